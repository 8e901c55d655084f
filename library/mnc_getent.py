#!/usr/bin/python
"""Documentation of the mnc_getent action (action_plugins/mnc_getent.py); it runs on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_getent
short_description: ansible.builtin.getent, through the node's shell where that can answer
description:
  - Takes the arguments of M(ansible.builtin.getent) and gives its result.
  - For the C(passwd) and C(group) databases it runs the node's C(getent) through the shell
    (no Python module on the node) and sets the same fact, C(getent_passwd) or C(getent_group).
  - Everywhere else it runs M(ansible.builtin.getent) with the task's arguments.
options:
  database:
    description: As for M(ansible.builtin.getent).
    type: str
    required: true
  key:
    description: As for M(ansible.builtin.getent).
    type: str
author: mncluster
"""

EXAMPLES = r"""
- name: Look up the MPI user's account
  mnc_getent:
    database: passwd
    key: mpiuser
"""

RETURN = r"""
ansible_facts:
  description: getent_<database>, each key's fields after the first.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.fail_json(msg="mnc_getent is an action plugin (action_plugins/mnc_getent.py).")


if __name__ == "__main__":
    main()
