#!/usr/bin/python
"""Documentation of the mnc_stat action (action_plugins/mnc_stat.py); it runs on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_stat
short_description: ansible.builtin.stat through the node's shell
description:
  - Takes the arguments of M(ansible.builtin.stat) and answers through the node's shell
    (C(stat), C(sha1sum) or C(sha256sum)), without a Python module on the node, with these
    keys of its C(stat) result - C(exists), C(path), C(mode), C(isdir), C(isreg), C(islnk),
    C(uid), C(gid), C(pw_name), C(gr_name), C(size) and C(checksum) (a readable regular
    file, when O(get_checksum)).
  - A link at the path is described, not followed. O(follow), another checksum algorithm, or a
    shell that cannot answer runs M(ansible.builtin.stat) with the task's arguments.
options:
  path:
    description: As for M(ansible.builtin.stat).
    type: path
    required: true
  get_checksum:
    description: As for M(ansible.builtin.stat).
    type: bool
    default: true
  checksum_algorithm:
    description: As for M(ansible.builtin.stat); sha1 and sha256 are looked at.
    type: str
    default: sha1
  get_mime:
    description: Accepted; the look gives no mime type.
    type: bool
  get_attributes:
    description: Accepted; the look gives no attributes.
    type: bool
  follow:
    description: As for M(ansible.builtin.stat) (true runs the module).
    type: bool
    default: false
author: mncluster
"""

EXAMPLES = r"""
- name: Read the munge key's checksum
  mnc_stat:
    path: /etc/munge/munge.key
    checksum_algorithm: sha256
  register: __munge_key
"""

RETURN = r"""
stat:
  description: The keys named above.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.fail_json(msg="mnc_stat is an action plugin (action_plugins/mnc_stat.py).")


if __name__ == "__main__":
    main()
