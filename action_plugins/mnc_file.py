"""Action plugin: ansible.builtin.file with a shell look first (documented in library/mnc_file.py).

A re-run usually finds every directory, link and absent path as it should be. The file module
would tell, but it costs a Python start on the node; this plugin first asks the node's shell
what is at the path (module_utils/mnc_shell.py, as the task's user, never following a link at
it). Only where that differs, or the look cannot tell, does ansible.builtin.file run, with the
task's arguments, and it does the change, check mode and diff as ever.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_shell

# The arguments the look understands; any other sends the task straight to the module.
_LOOKED_AT = frozenset(("path", "dest", "name", "state", "mode", "owner", "group", "src"))


def as_wanted(args: dict, line: str) -> bool:
    """Whether what the look saw (a mnc_shell.STAT_LINE) is already what ``args`` ask for."""
    state = args.get("state")
    mode, owner, group = args.get("mode"), args.get("owner"), args.get("group")
    if state == "absent":
        return line == "absent"
    if state == "link":
        return mode is None and owner is None and group is None and line == f"link {args.get('src')}"
    if state not in (None, "directory", "file"):
        return False
    kinds = {None: ("directory", "file"), "directory": ("directory",), "file": ("file",)}[state]
    return line.split(" ", 1)[0] in kinds and mnc_shell.attributes_match(line, mode, owner, group) is True


class ActionModule(mnc_shell.ShellFront):
    MODULE = "ansible.legacy.file"

    def look(self, args):
        path, word = mnc_shell.path_argument(args, ("path", "dest", "name"), _LOOKED_AT)
        if word is None:
            return None
        look = self.shell(f"p={word}\n{mnc_shell.STAT_LINE}")
        if look["rc"] != 0 or not as_wanted(args, look["stdout"]):
            return None
        return {"path": path, "state": args.get("state") or look["stdout"].split()[0]}
