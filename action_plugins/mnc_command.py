"""Action plugin: ansible.builtin.command whose `creates` path exists (or `removes` path is gone)
answered by the node's shell, without a Python module (documented in library/mnc_command.py)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_shell

# What the command module's own test reads as a glob (the look answers plain paths only).
_GLOB = re.compile(r"[*?\[]")


class ActionModule(mnc_shell.ShellFront):
    MODULE = "ansible.legacy.command"

    def look(self, args):
        for key, present in (("creates", True), ("removes", False)):
            path = args.get(key)
            if not path:
                continue
            path = str(path)
            if not path.startswith("/") or _GLOB.search(path):
                return None
            look = self.shell(f"[ -e {shlex.quote(path)} ]")
            if look["rc"] not in (0, 1):
                return None
            if (look["rc"] == 0) == present:
                # What the command module answers when it does not run the command.
                state = "exists" if present else "does not exist"
                return {"rc": 0, "stdout": f"skipped, since {path} {state}", "stderr": "",
                        "stdout_lines": [f"skipped, since {path} {state}"], "stderr_lines": [],
                        "msg": f"Did not run command since '{path}' {state}", "cmd": args.get("argv")
                        or args.get("cmd") or args.get("_raw_params")}
        return None
