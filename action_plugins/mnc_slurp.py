"""Action plugin: ansible.builtin.slurp without a Python module when the node's shell can read
the file (documented in library/mnc_slurp.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from ansible.plugins.action import ActionBase

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_shell


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self._task.args
        src = args.get("src") or args.get("path")
        word = mnc_shell.path_word(src) if isinstance(src, str) and set(args) <= {"src", "path"} else None
        if word is not None:
            # Only a regular file is read here; the module says what is wrong with anything else.
            script = f'p={word}\n[ -f "$p" ] && [ -r "$p" ] || exit 3\nbase64 -w0 < "$p"'
            look = mnc_shell.run_script(self, mnc_shell.build_script(script, "/"))
            if look["rc"] == 0:
                result.update(changed=False, content=look["stdout"].strip(), source=src, encoding="base64")
                return result
        done = self._execute_module("ansible.legacy.slurp", module_args=dict(args), task_vars=task_vars)
        result.update(done)
        return result
