"""Action plugin: ansible.builtin.slurp without a Python module when the node's shell can read
the file (documented in library/mnc_slurp.py)."""

from __future__ import annotations

import sys
from pathlib import Path

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_shell


class ActionModule(mnc_shell.ShellFront):
    MODULE = "ansible.legacy.slurp"

    def look(self, args):
        src, word = mnc_shell.path_argument(args, ("src", "path"), ("src", "path"))
        if word is None:
            return None
        # Only a regular file is read here; the module says what is wrong with anything else.
        look = self.shell(f'p={word}\n[ -f "$p" ] && [ -r "$p" ] || exit 3\nbase64 -w0 < "$p"')
        if look["rc"] != 0:
            return None
        return {"content": look["stdout"].strip(), "source": src, "encoding": "base64"}
