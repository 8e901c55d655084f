"""Action plugin: run a read-only command or script on the node without a Python module.

Documented in library/mnc_look.py; the running is module_utils/mnc_shell.py.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_shell


def command_text(args: dict) -> str:
    """The script of a task's arguments: exactly one of cmd (a script) and argv (a command)."""
    cmd, argv = args.get("cmd"), args.get("argv")
    if (cmd is None) == (argv is None):
        raise AnsibleActionFail("mnc_look: give exactly one of cmd (a script) and argv (a command)")
    if argv is not None:
        if not isinstance(argv, list) or not argv or not all(isinstance(a, (str, int, float)) for a in argv):
            raise AnsibleActionFail(f"mnc_look: argv must be a non-empty list of strings, got {argv!r}")
        cmd = shlex.join(str(a) for a in argv)
    if not isinstance(cmd, str) or not cmd.strip():
        raise AnsibleActionFail("mnc_look: cmd must be a non-empty script")
    return cmd


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    # ActionBase refuses any other option ("Invalid options for mnc_look: ...").
    _VALID_ARGS = frozenset(("cmd", "argv", "executable", "chdir"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        script = mnc_shell.build_script(command_text(self._task.args), self._task.args.get("chdir"))
        # A look changes nothing, so it runs in check mode as well (what it reads is what the
        # tasks after it decide on).
        result.update(mnc_shell.run_script(self, script, str(self._task.args.get("executable") or "/bin/sh")))
        result["changed"] = False
        result["cmd"] = self._task.args.get("argv") or self._task.args.get("cmd")
        if result["rc"] != 0:
            result["failed"] = True
            result["msg"] = f"non-zero return code {result['rc']}"
        return result
