"""Action plugin: ansible.builtin.getent for passwd and group, without a Python module when the
node's getent answers (documented in library/mnc_getent.py)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

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


class ActionModule(mnc_shell.ShellFront):
    MODULE = "ansible.legacy.getent"

    def look(self, args):
        if not set(args) <= _LOOKED_AT or args.get("database") not in ("passwd", "group"):
            return None
        words = ["getent", args["database"]] + ([str(args["key"])] if args.get("key") else [])
        look = self.shell(shlex.join(words))
        # 0: found. Anything else (2: no such key) goes to the module, which says so.
        return {"ansible_facts": records(args["database"], look["stdout"])} if look["rc"] == 0 else None
