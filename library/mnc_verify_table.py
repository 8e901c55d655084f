#!/usr/bin/python
"""Ansible module: judge verify.yml's acceptance checks and render the pass/fail table."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_verify_table
short_description: Judge the cluster acceptance checks and render a pass/fail table
description:
  - Takes what C(playbooks/verify.yml) collected from the nodes (reachability, the hostfile, the
    output of the rank check and of the point-to-point bandwidth run, OpenMPI facts, versions) and
    returns one row per check with PASS, FAIL or SKIP, the rendered table, and the list of failures.
  - Runs on the controller; changes nothing. The checks are plain functions in
    C(module_utils/mnc_verify.py).
options:
  nodes:
    description:
      - One entry per inventory node, in inventory order.
      - Keys C(name), C(reachable) (bool), C(error), C(nodename) (what C(uname -n) prints),
        C(private_ip), C(versions) (dict from mnc_versions.py), C(versions_error),
        C(openmpi) (dict with C(version), C(prefix), C(built_with), C(runtime)), C(openmpi_error).
    type: list
    elements: dict
    required: true
  hostfile:
    description: Content of the MPI hostfile on the launching node; null when it could not be read.
    type: str
  ranks:
    description:
      - The rank check's mpiexec run, C(rc), C(stdout), C(stderr), C(cmd); or C(skipped_reason).
      - Null when it was not run at all.
    type: dict
  p2p:
    description: The bandwidth run (same keys as O(ranks)); stdout holds mnc_p2p_bandwidth.py's JSON line.
    type: dict
  link_gbps:
    description:
      - Configured speed of one private-network link in Gbit/s (C(mnc_link_gbps)).
      - Null skips the comparison (the pairs are reported as SKIP).
    type: float
  p2p_min_fraction:
    description: A pair passes when its peak bandwidth reaches this fraction of the link speed.
    type: float
    default: 0.5
  require_cuda:
    description: Fail nodes whose OpenMPI lacks CUDA support (GPU mode); otherwise report them as SKIP.
    type: bool
    default: false
  launcher:
    description:
      - Inventory name of the node the rank check's mpiexec ran on. OpenMPI maps ranks from the
        launching node first, so the expected placement is derived from it and the hostfile.
      - Null when unknown (the placement is then expected in hostfile order).
    type: str
author: mncluster
"""

EXAMPLES = r"""
- name: Judge the checks
  mnc_verify_table:
    nodes: "{{ __verify_nodes }}"
    hostfile: "{{ __verify_hostfile }}"
    ranks: "{{ __verify_ranks }}"
    p2p: "{{ __verify_p2p }}"
    link_gbps: 10
    launcher: node1
  register: __verify
"""

RETURN = r"""
rows:
  description: One row per check and subject.
  returned: always
  type: list
  elements: dict
  sample: [{"check": "ranks", "subject": "cluster", "status": "PASS", "detail": "6 ranks, 0..5 once each"}]
table:
  description: The rows as a fixed-width text table with a verdict line.
  returned: always
  type: str
passed:
  description: True when no row failed.
  returned: always
  type: bool
failures:
  description: One line per failed row, naming the check and its subject (node or pair).
  returned: always
  type: list
  elements: str
not_answering:
  description: Nodes that did not answer.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.mnc_verify import evaluate


def main():
    module = AnsibleModule(
        argument_spec={
            "nodes": {"type": "list", "elements": "dict", "required": True},
            "hostfile": {"type": "str"},
            "ranks": {"type": "dict"},
            "p2p": {"type": "dict"},
            "link_gbps": {"type": "float"},
            "p2p_min_fraction": {"type": "float", "default": 0.5},
            "require_cuda": {"type": "bool", "default": False},
            "launcher": {"type": "str"},
        },
        supports_check_mode=True,
    )
    p = module.params
    bad = [i for i, n in enumerate(p["nodes"]) if not n.get("name")]
    if bad:
        module.fail_json(msg=f"nodes[{bad[0]}] has no 'name'", nodes=p["nodes"])
    if not 0 < p["p2p_min_fraction"] <= 10:
        module.fail_json(msg=f"p2p_min_fraction must be in (0, 10], got {p['p2p_min_fraction']}")
    result = evaluate(
        p["nodes"],
        p["hostfile"],
        p["ranks"],
        p["p2p"],
        p["link_gbps"],
        p["p2p_min_fraction"],
        p["require_cuda"],
        p["launcher"],
    )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
