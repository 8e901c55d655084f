#!/usr/bin/python
"""Documentation of the mnc_look action (action_plugins/mnc_look.py); it runs on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_look
short_description: Run a read-only command or script on the node without a Python module
description:
  - Runs a command (O(argv)) or a shell script (O(cmd)) on the node and returns its C(rc),
    C(stdout) and C(stderr), as M(ansible.builtin.command) and M(ansible.builtin.shell) do, but
    without shipping a Python module. The script goes to the node's shell on the connection's
    stdin, as pipelining sends a module to Python. On a node that costs a shell instead of a
    Python interpreter compiling C(ansible.module_utils) (about 0.13 CPU-seconds per node and
    run), which is most of what a re-run that changes nothing spends.
  - For looks and checks, that is commands that change nothing. It reports C(changed=false)
    and runs in check mode as well. A look that may repair something (finish an interrupted
    swap) says when it did with C(changed_when), and keeps its check run read-only itself.
  - A non-zero exit fails the task (C(failed_when) decides otherwise, as for any module).
  - Honours C(become), C(become_user) and the C(environment) keyword.
  - The script's stdin is C(/dev/null), so a command in it that reads stdin (mpiexec, ssh)
    cannot swallow the rest of the script.
  - Where the script cannot travel on stdin (a connection without pipelining, or C(become_method)
    su, as for Ansible's own pipelining) it is the shell's C(-c) argument instead; over SSH with a
    terminal, stderr then arrives in stdout.
options:
  argv:
    description: The command and its arguments, each quoted for the shell. Exactly one of
      O(argv) and O(cmd).
    type: list
    elements: str
  cmd:
    description: A shell script, run by O(executable).
    type: str
  executable:
    description: The shell that reads the script (it is given C(-s)).
    type: path
    default: /bin/sh
  chdir:
    description: Change into this directory first (the task fails when it cannot). Without it the
      command runs where the login left it, or, where the become user may not enter that
      directory, in that user's home, as a Python module does.
    type: path
author: mncluster
"""

EXAMPLES = r"""
- name: Read the installed OpenMPI version
  mnc_look:
    argv: [/opt/openmpi/bin/ompi_info, --version]
  register: __ompi_version

- name: Look for the headers, as the MPI user
  mnc_look:
    cmd: |
      set -e
      test -e "$CUDA_HOME/include/cuda.h"
      ls "$CUDA_HOME/lib64/stubs"
    executable: /bin/bash
  environment:
    CUDA_HOME: /opt/nvidia/cuda
  become: true
  become_user: mpiuser
"""

RETURN = r"""
rc:
  description: The command's exit status.
  returned: always
  type: int
stdout:
  description: Its standard output.
  returned: always
  type: str
stderr:
  description: Its standard error.
  returned: always
  type: str
cmd:
  description: The command or script as given.
  returned: always
  type: raw
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.fail_json(
        msg="mnc_look is an action plugin (action_plugins/mnc_look.py); ansible.cfg names that directory."
    )


if __name__ == "__main__":
    main()
