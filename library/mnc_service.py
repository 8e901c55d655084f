#!/usr/bin/python
"""Documentation of the mnc_service action (action_plugins/mnc_service.py); it runs on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_service
short_description: ansible.builtin.service, through the node's shell where that can answer
description:
  - Takes the arguments of M(ansible.builtin.service) and gives its result.
  - For a service to be started and enabled, it first asks systemd (C(systemctl is-enabled),
    C(is-active)) through the node's shell; where both already hold it reports C(changed=false)
    without running a Python module on the node.
  - Everywhere else it runs M(ansible.builtin.service) with the task's arguments.
options:
  name:
    description: As for M(ansible.builtin.service).
    type: str
    required: true
  state:
    description: As for M(ansible.builtin.service).
    type: str
  enabled:
    description: As for M(ansible.builtin.service).
    type: bool
author: mncluster
"""

EXAMPLES = r"""
- name: Enable and start munge
  mnc_service:
    name: munge
    state: started
    enabled: true
"""

RETURN = r"""
name:
  description: The service.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.fail_json(msg="mnc_service is an action plugin (action_plugins/mnc_service.py).")


if __name__ == "__main__":
    main()
