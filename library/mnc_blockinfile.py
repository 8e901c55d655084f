#!/usr/bin/python
"""Documentation of the mnc_blockinfile action (action_plugins/mnc_blockinfile.py); it runs on
the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_blockinfile
short_description: ansible.builtin.blockinfile, with a look through the node's shell first
description:
  - Takes the arguments of M(ansible.builtin.blockinfile). It first reads the file through the
    node's shell, as the task's user (a link at the path is not read), and works out with
    blockinfile's own rules what the module would write. Where that is the file as it is, and
    its mode, owner and group are as asked, it reports C(changed=false) without running a
    Python module on the node.
  - Everywhere else it runs M(ansible.builtin.blockinfile) with the task's arguments, which
    writes, validates, backs up and supports check and diff mode as ever.
options:
  path:
    description: As for M(ansible.builtin.blockinfile).
    type: path
    required: true
    aliases: [dest, destfile, name]
  block:
    description: As for M(ansible.builtin.blockinfile).
    type: str
    default: ""
    aliases: [content]
  marker:
    description: As for M(ansible.builtin.blockinfile).
    type: str
    default: "# {mark} ANSIBLE MANAGED BLOCK"
  marker_begin:
    description: As for M(ansible.builtin.blockinfile).
    type: str
    default: BEGIN
  marker_end:
    description: As for M(ansible.builtin.blockinfile).
    type: str
    default: END
  state:
    description: As for M(ansible.builtin.blockinfile).
    type: str
    choices: [absent, present]
    default: present
  insertafter:
    description: As for M(ansible.builtin.blockinfile).
    type: str
  insertbefore:
    description: As for M(ansible.builtin.blockinfile).
    type: str
  create:
    description: As for M(ansible.builtin.blockinfile).
    type: bool
    default: false
  backup:
    description: As for M(ansible.builtin.blockinfile).
    type: bool
    default: false
  validate:
    description: As for M(ansible.builtin.blockinfile).
    type: str
  unsafe_writes:
    description: As for M(ansible.builtin.blockinfile).
    type: bool
    default: false
  owner:
    description: As for M(ansible.builtin.blockinfile).
    type: str
  group:
    description: As for M(ansible.builtin.blockinfile).
    type: str
  mode:
    description: As for M(ansible.builtin.blockinfile).
    type: raw
  prepend_newline:
    description: As for M(ansible.builtin.blockinfile).
    type: bool
    default: false
  append_newline:
    description: As for M(ansible.builtin.blockinfile).
    type: bool
    default: false
author: mncluster
"""

EXAMPLES = r"""
- name: Put OpenMPI on PATH at the top of ~/.bashrc, as the user
  mnc_blockinfile:
    path: /home/mpiuser/.bashrc
    marker: "# {mark} mncluster openmpi"
    insertbefore: BOF
    create: true
    mode: "0644"
    block: export PATH=/opt/openmpi/bin:$PATH
  become: true
  become_user: mpiuser
"""

RETURN = r"""
msg:
  description: What the module did, or empty.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.fail_json(msg="mnc_blockinfile is an action plugin (action_plugins/mnc_blockinfile.py).")


if __name__ == "__main__":
    main()
