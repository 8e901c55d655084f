#!/usr/bin/python
"""Documentation of the mnc_file action (action_plugins/mnc_file.py); it runs on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_file
short_description: ansible.builtin.file, with a look through the node's shell first
description:
  - Takes the arguments of M(ansible.builtin.file). It first asks the node's shell what is at
    the path (type, mode, owner, group, or a link's target; a link at the path is never
    followed), as the task's user. Where that is already what the task asks for, it reports
    C(changed=false) without running a Python module on the node; a re-run that changes
    nothing costs a shell instead of a Python start for each such task.
  - Everywhere else (something differs, an argument the look does not compare such as
    C(recurse), C(attributes) or a symbolic mode, a relative path) it runs
    M(ansible.builtin.file) with the task's arguments, which makes the change and supports
    check and diff mode as ever.
  - The look compares O(state) C(absent), C(directory), C(file), C(link) (with O(src) and no
    owner, group or mode) or none, O(mode) as an octal string, and O(owner) and O(group) as
    names or ids.
options:
  path:
    description: The path, as for M(ansible.builtin.file).
    type: path
    required: true
    aliases: [dest, name]
  state:
    description: As for M(ansible.builtin.file).
    type: str
  mode:
    description: As for M(ansible.builtin.file).
    type: raw
  owner:
    description: As for M(ansible.builtin.file).
    type: str
  group:
    description: As for M(ansible.builtin.file).
    type: str
  src:
    description: As for M(ansible.builtin.file).
    type: path
author: mncluster
"""

EXAMPLES = r"""
- name: Create the spool directory
  mnc_file:
    path: /var/spool/slurm
    state: directory
    owner: slurm
    group: slurm
    mode: "0755"
"""

RETURN = r"""
path:
  description: The path.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.fail_json(msg="mnc_file is an action plugin (action_plugins/mnc_file.py), named in ansible.cfg.")


if __name__ == "__main__":
    main()
