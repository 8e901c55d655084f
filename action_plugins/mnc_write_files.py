"""Action plugin in front of the mnc_write_files module (library/mnc_write_files.py).

A re-run usually finds every file as it should be. The module would tell, but it costs a Python
start on the node; this plugin first asks the node's shell for each file's mode and sha256
(module_utils/mnc_shell.py, as the same user) and compares them with the contents rendered here.
Only where a file differs, is missing, or is not a regular file (a link), or the look cannot
tell, does the module run, and it does the writing, check mode and diff as before.
"""

from __future__ import annotations

import hashlib
import shlex
import sys
from pathlib import Path

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_shell

# One line per file: "<mode> <sha256>" for a regular file that is not a link, "-" otherwise.
_LOOK = """for f in {paths}; do
if [ -f "$f" ] && [ ! -L "$f" ]
then printf '%s %s\\n' "$(stat -c %a -- "$f")" "$(sha256sum < "$f" | cut -c1-64)"
else echo -
fi
done"""


def wanted(files) -> list[tuple[str, int, str]] | None:
    """(dest, mode, sha256) of every file, or None when the look could not decide (the module
    then checks and reports the bad input itself)."""
    out = []
    for item in files if isinstance(files, list) else [None]:
        if not isinstance(item, dict):
            return None
        dest, content, mode = item.get("dest"), item.get("content"), item.get("mode") or "0644"
        if not isinstance(dest, str) or not dest.startswith("/") or not isinstance(content, str):
            return None
        try:
            mode_bits = int(str(mode), 8)
        except ValueError:
            return None
        out.append((dest, mode_bits, hashlib.sha256(content.encode("utf-8")).hexdigest()))
    return out


def all_match(plan, lines: list[str]) -> bool:
    if len(lines) != len(plan):
        return False
    for (_, mode, digest), line in zip(plan, lines, strict=True):
        parts = line.split()
        if len(parts) != 2 or parts[1] != digest:
            return False
        try:
            if int(parts[0], 8) != mode:
                return False
        except ValueError:
            return False
    return True


class ActionModule(mnc_shell.ShellFront):
    MODULE = "mnc_write_files"

    def look(self, args):
        plan = wanted(args.get("files"))
        if not plan:
            return None
        look = self.shell(_LOOK.format(paths=" ".join(shlex.quote(dest) for dest, _, _ in plan)))
        return {"changed_files": []} if look["rc"] == 0 and all_match(plan, look["stdout_lines"]) else None
