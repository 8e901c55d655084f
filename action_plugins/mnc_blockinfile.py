"""Action plugin: ansible.builtin.blockinfile with a shell look first (documented in
library/mnc_blockinfile.py).

A re-run usually finds every managed block in place. The blockinfile module would tell, but it
costs a Python start on the node; this plugin reads the file through the node's shell (as the
task's user; a link at the path is not read) and works out, with blockinfile's own rules, what
the module would write. Only where that differs from the file, or the mode, owner or group
differ, or the look cannot tell, does ansible.builtin.blockinfile run with the task's arguments.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import sys
from pathlib import Path

from ansible.module_utils.parsing.convert_bool import boolean

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_shell

# Arguments that only matter when the module writes (backup, validate, unsafe_writes, create) or
# that the rules below follow; any other sends the task straight to the module.
_LOOKED_AT = frozenset((
    "path", "dest", "destfile", "name", "block", "content", "marker", "marker_begin", "marker_end",
    "state", "insertafter", "insertbefore", "create", "backup", "validate", "unsafe_writes",
    "owner", "group", "mode", "prepend_newline", "append_newline",
))  # fmt: skip


_LOOK = mnc_shell.STAT_LINE + """
if [ -f "$p" ] && [ ! -L "$p" ]; then base64 -w0 < "$p"; fi"""


def blockinfile_text(original: bytes, args: dict) -> bytes:
    """What ansible.builtin.blockinfile (ansible-core 2.18) makes of an existing file's bytes."""
    lines = original.splitlines(True)
    nl = os.linesep.encode()
    block = str(args.get("block", args.get("content")) or "").encode()
    marker = str(args.get("marker") or "# {mark} ANSIBLE MANAGED BLOCK").encode()
    present = (args.get("state") or "present") == "present"
    prepend_newline = boolean(args.get("prepend_newline") or False, strict=False)
    append_newline = boolean(args.get("append_newline") or False, strict=False)
    insertbefore, insertafter = args.get("insertbefore"), args.get("insertafter")
    if insertbefore is None and insertafter is None:
        insertafter = "EOF"
    if insertafter not in (None, "EOF"):
        insertre = re.compile(str(insertafter).encode())
    elif insertbefore not in (None, "BOF"):
        insertre = re.compile(str(insertbefore).encode())
    else:
        insertre = None
    marker0 = re.sub(rb"{mark}", str(args.get("marker_begin") or "BEGIN").encode(), marker) + nl
    marker1 = re.sub(rb"{mark}", str(args.get("marker_end") or "END").encode(), marker) + nl
    blocklines = []
    if present and block:
        if not block.endswith(nl):
            block += nl
        blocklines = [marker0, *block.splitlines(True), marker1]
    n0 = n1 = None
    for i, line in enumerate(lines):
        if line == marker0:
            n0 = i
        if line == marker1:
            n1 = i
    if None in (n0, n1):
        n0 = None
        if insertre is not None:
            if insertre.flags & re.MULTILINE:
                match = insertre.search(original)
                if match:
                    text = original.decode("utf-8", "surrogateescape")
                    n0 = text.count("\n", 0, match.end() if insertafter else match.start())
            else:
                for i, line in enumerate(lines):
                    if insertre.search(line):
                        n0 = i
            if n0 is None:
                n0 = len(lines)
            elif insertafter is not None:
                n0 += 1
        elif insertbefore is not None:
            n0 = 0
        else:
            n0 = len(lines)
    elif n0 < n1:
        lines[n0 : n1 + 1] = []
    else:
        lines[n1 : n0 + 1] = []
        n0 = n1
    if n0 > 0 and not lines[n0 - 1].endswith(nl):
        lines[n0 - 1] += nl
    if prepend_newline and present and n0 != 0 and lines[n0 - 1] != nl:
        lines[n0:n0] = [nl]
        n0 += 1
    lines[n0:n0] = blocklines
    after = n0 + len(blocklines)
    if append_newline and present and after < len(lines) and lines[after] != nl:
        lines[after:after] = [nl]
    return b"".join(lines)


class ActionModule(mnc_shell.ShellFront):
    MODULE = "ansible.legacy.blockinfile"

    def look(self, args):
        _, word = mnc_shell.path_argument(args, ("path", "dest", "destfile", "name"), _LOOKED_AT)
        if word is None:
            return None
        look = self.shell(f"p={word}\n{_LOOK}")
        # The stat line, then the file's bytes in base64 (no second line: an empty file).
        lines = look["stdout"].split("\n")
        if look["rc"] != 0:
            return None
        if lines[0] == "absent":
            # blockinfile leaves a missing file alone when the block is to be absent.
            return {"msg": ""} if (args.get("state") or "present") == "absent" else None
        wanted = mnc_shell.attributes_match(lines[0], args.get("mode"), args.get("owner"), args.get("group"))
        if len(lines) not in (1, 2) or not lines[0].startswith("file ") or wanted is not True:
            return None
        try:
            original = base64.b64decode(lines[1] if len(lines) == 2 else "", validate=True)
        except (binascii.Error, ValueError):
            return None
        return {"msg": ""} if blockinfile_text(original, args) == original else None
