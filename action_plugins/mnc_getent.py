"""Action plugin: ansible.builtin.getent for passwd and group, without a Python module when the
node's getent answers (documented in library/mnc_getent.py)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ansible.plugins.action import ActionBase

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_shell

_LOOKED_AT = frozenset(("database", "key"))


def records(database: str, out: str) -> dict:
    """The getent module's fact for ``database`` from getent's output (first field: the key)."""
    found: dict = {}
    seen: dict = {}
    for line in out.splitlines():
        record = line.split(":")
        name, rest = record[0], record[1:]
        if name in seen:
            if seen[name] == 1:
                found[name] = [found[name]]
            found[name].append(rest)
            seen[name] += 1
        else:
            found[name], seen[name] = rest, 1
    return {f"getent_{database}": found}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = self._task.args
        if set(args) <= _LOOKED_AT and args.get("database") in ("passwd", "group"):
            words = ["getent", args["database"]] + ([str(args["key"])] if args.get("key") else [])
            look = mnc_shell.run_script(self, mnc_shell.build_script(shlex.join(words), "/"))
            # 0: found. Anything else (2: no such key) goes to the module, which says so.
            if look["rc"] == 0:
                result.update(changed=False, ansible_facts=records(args["database"], look["stdout"]))
                return result
        done = self._execute_module("ansible.legacy.getent", module_args=dict(args), task_vars=task_vars)
        result.update(done)
        return result
