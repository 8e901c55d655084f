#!/usr/bin/python
"""Documentation of the mnc_slurp action (action_plugins/mnc_slurp.py); it runs on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_slurp
short_description: ansible.builtin.slurp, through the node's shell where that can answer
description:
  - Takes the arguments of M(ansible.builtin.slurp) and gives its result.
  - A regular file the task's user may read is read through the node's shell (base64, no
    Python module on the node).
  - Everywhere else it runs M(ansible.builtin.slurp) with the task's arguments.
options:
  src:
    description: As for M(ansible.builtin.slurp).
    type: path
    required: true
    aliases: [path]
author: mncluster
"""

EXAMPLES = r"""
- name: Read the host key
  mnc_slurp:
    src: /etc/ssh/ssh_host_ed25519_key.pub
  register: __host_key
"""

RETURN = r"""
content:
  description: The file's bytes, base64.
  returned: success
  type: str
source:
  description: The path read.
  returned: success
  type: str
encoding:
  description: Always base64.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.fail_json(msg="mnc_slurp is an action plugin (action_plugins/mnc_slurp.py).")


if __name__ == "__main__":
    main()
