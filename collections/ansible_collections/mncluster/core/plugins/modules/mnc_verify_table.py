#!/usr/bin/python
"""Ansible module: judge verify.yml's acceptance checks and render the pass/fail table."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_verify_table
short_description: Judge the cluster acceptance checks and render a pass/fail table
description:
  - Takes what C(playbooks/verify.yml) collected from the nodes (reachability, the hostfile, the
    output of the rank check and of the point-to-point bandwidth run, OpenMPI facts, versions, the
    GPU probes) and
    returns one row per check with PASS, FAIL or SKIP, the rendered table, and the list of failures.
  - Runs on the controller; changes nothing. The checks are plain functions in
    C(module_utils/mnc_verify.py) and the C(mnc_verify_*.py) modules it imports.
options:
  nodes:
    description:
      - One entry per inventory node, in inventory order.
      - Keys C(name), C(reachable) (bool), C(error), C(nodename) (what C(uname -n) prints),
        C(private_ip), C(versions) (dict from mnc_versions.py), C(versions_error),
        C(openmpi) (dict with C(version), C(prefix), C(built_with), C(runtime)), C(openmpi_error),
        C(use_gpu) (bool, the node's fact mnc_use_gpu), C(gpu_count) (its fact mnc_gpu_count) and, in GPU
        mode, C(gpu_probe) (the run of C(mnc_gpu_probe.py node), keys as O(ranks)), and C(services)
        (per service name a dict with C(state) and C(reason), from the facts mnc_nvidia_services
        and mnc_rdma_services).
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
  gpu_nccl:
    description:
      - The NCCL allreduce across the nodes (C(mnc_gpu_probe.py nccl-allreduce), one rank per node), keys as
        O(ranks), or C(not_applicable) (a single node).
      - Judged only where a node is in GPU mode; null there is a failure (not run).
    type: dict
  gpu_send:
    description:
      - The ring send of CuPy device buffers across the nodes (C(mnc_gpu_probe.py send gpu)), as O(gpu_nccl).
    type: dict
  mpiio:
    description:
      - The MPI-IO write and read of one file across the nodes on the shared directory
        (C(mnc_mpiio.py), one rank per node), keys as O(ranks) plus C(dir), or C(not_applicable).
      - Unset where nothing is shared (mnc_shared_dirs empty), and then no row.
    type: dict
  nccl_tests:
    description:
      - nccl-tests' C(all_reduce_perf) across all nodes from the launcher, one rank per GPU, keys as O(ranks),
        or C(not_applicable) (no GPU node, a single node) or C(skipped_reason) (no C(all_reduce_perf)).
      - Unset, no cluster row.
    type: dict
  nccl_cluster_min_busbw_gbs:
    description:
      - Bus bandwidth (GB/s) the run across the nodes must reach at its largest message; null judges it
        against O(p2p_min_fraction) of one link (O(link_gbps)), and without a link speed it is not judged.
    type: float
  p2p_median_fraction:
    description:
      - A pair fails when its peak bandwidth is below this fraction of the median pair's (a bad
        link even where the link speed is unknown). 0 switches the comparison off.
    type: float
    default: 0.7
  report_dir:
    description:
      - Where to write C(verify.json) (every row and the bandwidth matrix), C(verify.md) and, when
        pairs were measured, C(p2p-matrix.png) (a heat map; needs matplotlib). Created when missing.
      - Unset writes nothing.
    type: path
  latest_link:
    description:
      - A symlink to point at O(report_dir) (relative, replaced atomically), e.g. C(reports/verify-latest).
    type: path
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
  mncluster.core.mnc_verify_table:
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
p2p_matrix:
  description:
    - Peak pair bandwidth in GB/s, C(hosts) in rank order and C(gbps) an N x N list (null on the diagonal).
  returned: always
  type: dict
files:
  description: The files written under O(report_dir).
  returned: when O(report_dir) is set
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mncluster.core.plugins.module_utils.mnc_files import point_link, write_atomic
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify import evaluate
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_render import render_markdown

HEATMAP = "p2p-matrix.png"


def _heatmap(matrix, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hosts = matrix["hosts"]
    values = [[float("nan") if v is None else v for v in r] for r in matrix["gbps"]]
    size = max(4.0, 0.6 * len(hosts) + 2.5)
    fig, ax = plt.subplots(figsize=(size + 1.0, size))
    top = max([v for r in matrix["gbps"] for v in r if v is not None] or [1.0])
    # From 0, so that pairs within a few percent look alike and a slow one stands out.
    im = ax.imshow(values, cmap="viridis", vmin=0.0, vmax=top)
    ax.set_xticks(range(len(hosts)), hosts, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(hosts)), hosts, fontsize=8)
    if len(hosts) <= 16:
        for i, r in enumerate(matrix["gbps"]):
            for j, v in enumerate(r):
                if v is not None:
                    color = "black" if v > 0.6 * top else "white"
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", color=color, fontsize=8)
    fig.colorbar(im, ax=ax, label="peak one-way GB/s")
    ax.set_title("Point-to-point bandwidth, every pair of nodes")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(result, report_dir, latest_link):
    os.makedirs(report_dir, exist_ok=True)
    files = [os.path.join(report_dir, "verify.json"), os.path.join(report_dir, "verify.md")]
    image = None
    matrix = result.get("p2p_matrix")
    if matrix and len(matrix["hosts"]) > 1:
        _heatmap(matrix, os.path.join(report_dir, HEATMAP))
        image = HEATMAP
        files.append(os.path.join(report_dir, HEATMAP))
    write_atomic(files[0], json.dumps(result, indent=1) + "\n")
    write_atomic(files[1], render_markdown(result, image=image))
    if latest_link:
        point_link(latest_link, os.path.relpath(report_dir, os.path.dirname(latest_link) or "."))
    return files


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
            "p2p_median_fraction": {"type": "float", "default": 0.7},
            "gpu_nccl": {"type": "dict"},
            "gpu_send": {"type": "dict"},
            "mpiio": {"type": "dict"},
            "nccl_tests": {"type": "dict"},
            "nccl_cluster_min_busbw_gbs": {"type": "float"},
            "report_dir": {"type": "path"},
            "latest_link": {"type": "path"},
        },
        supports_check_mode=True,
    )
    p = module.params
    bad = [i for i, n in enumerate(p["nodes"]) if not n.get("name")]
    if bad:
        module.fail_json(msg=f"nodes[{bad[0]}] has no 'name'", nodes=p["nodes"])
    if not 0 <= p["p2p_median_fraction"] <= 1:
        module.fail_json(msg=f"p2p_median_fraction must be in [0, 1], got {p['p2p_median_fraction']}")
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
        p["p2p_median_fraction"] or None,
        gpu_nccl=p["gpu_nccl"],
        gpu_send=p["gpu_send"],
        mpiio=p["mpiio"],
        nccl_tests=p["nccl_tests"],
        nccl_cluster_min_busbw_gbs=p["nccl_cluster_min_busbw_gbs"],
    )
    if p["report_dir"] and not module.check_mode:
        try:
            result["files"] = write_report(result, p["report_dir"], p["latest_link"])
        except ImportError as e:
            module.fail_json(msg=f"the heat map needs matplotlib on the controller ({e})", **result)
        except OSError as e:
            module.fail_json(msg=f"cannot write the verify report in {p['report_dir']}: {e}", **result)
        module.exit_json(changed=True, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
