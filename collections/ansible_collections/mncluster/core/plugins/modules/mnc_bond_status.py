#!/usr/bin/python
"""Ansible module: read /proc/net/bonding/<bond> and check mode, links and LACP partner."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_bond_status
short_description: Check a Linux bond from /proc/net/bonding
description:
  - Parses C(/proc/net/bonding/<name>) and fails unless the bond runs the expected mode, the bond and every
    expected link are up, and (802.3ad) an LACP partner answered and every link is in the active aggregator.
  - Read-only; never changes anything.
options:
  name:
    description: Bond device.
    type: str
    default: bond0
  mode:
    description: Expected bonding mode (sysfs name, e.g. C(802.3ad)).
    type: str
    default: 802.3ad
  interfaces:
    description: NICs that must be enslaved and up.
    type: list
    elements: str
    required: true
  proc_dir:
    description: Where the kernel exposes bond state.
    type: path
    default: /proc/net/bonding
author: mncluster
"""

EXAMPLES = r"""
- name: Check bond0
  mncluster.core.mnc_bond_status:
    name: bond0
    mode: 802.3ad
    interfaces: [enp65s0f0, enp65s0f1]
"""

RETURN = r"""
status:
  description: Parsed bond state.
  returned: when the file was read
  type: dict
  sample: {"mode": "IEEE 802.3ad Dynamic link aggregation", "mii_status": "up",
           "aggregator": {"id": "1", "ports": 2, "partner_mac": "00:1c:73:aa:bb:cc"},
           "slaves": [{"name": "enp65s0f0", "mii_status": "up", "speed_mbps": 10000}]}
problems:
  description: What is wrong, in words; empty when healthy.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bonding import bond_problems, parse_bonding


def main():
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "default": "bond0"},
            "mode": {"type": "str", "default": "802.3ad"},
            "interfaces": {"type": "list", "elements": "str", "required": True},
            "proc_dir": {"type": "path", "default": "/proc/net/bonding"},
        },
        supports_check_mode=True,
    )
    path = os.path.join(module.params["proc_dir"], module.params["name"])
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        module.fail_json(msg=f"cannot read {path}: {exc}", problems=[f"{path} missing"])
    status = parse_bonding(text)
    problems = bond_problems(status, module.params["mode"], module.params["interfaces"])
    if problems:
        msg = f"{module.params['name']}: " + "; ".join(problems)
        module.fail_json(msg=msg, status=status, problems=problems)
    module.exit_json(changed=False, status=status, problems=[])


if __name__ == "__main__":
    main()
