#!/usr/bin/python
"""Documentation of the mnc_command action (action_plugins/mnc_command.py); it runs on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_command
short_description: ansible.builtin.command, whose creates/removes test the node's shell answers
description:
  - Takes the arguments of M(ansible.builtin.command) and gives its result.
  - Where O(creates) names an absolute path (no glob) that exists, or O(removes) one that does not,
    the node's shell says so (no Python module on the node) and the command does not run, as the
    module does it.
  - Everywhere else (the command must run, a relative path or a glob, su, no pipelining) it runs
    M(ansible.builtin.command) with the task's arguments.
options:
  argv:
    description: As for M(ansible.builtin.command).
    type: list
    elements: str
  cmd:
    description: As for M(ansible.builtin.command).
    type: str
  creates:
    description: As for M(ansible.builtin.command).
    type: path
  removes:
    description: As for M(ansible.builtin.command).
    type: path
  chdir:
    description: As for M(ansible.builtin.command).
    type: path
  stdin:
    description: As for M(ansible.builtin.command).
    type: str
author: mncluster
"""

EXAMPLES = r"""
- name: Create the munge key when there is none
  mnc_command:
    argv: [mungekey, --create]
    creates: /etc/munge/munge.key
"""

RETURN = r"""
rc:
  description: The command's exit status (0 where it did not run).
  returned: always
  type: int
stdout:
  description: Its output, or "skipped, since <path> exists".
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.fail_json(msg="mnc_command is an action plugin (action_plugins/mnc_command.py).")


if __name__ == "__main__":
    main()
