"""Action plugin: ansible.builtin.stat through the node's shell (documented in library/mnc_stat.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from ansible.module_utils.parsing.convert_bool import boolean

# Controller-side plugins cannot import a project's module_utils through
# ansible.module_utils (that namespace is assembled for modules only).
_MODULE_UTILS = str(Path(__file__).resolve().parents[1] / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)

import mnc_shell

_LOOKED_AT = frozenset(("path", "get_checksum", "checksum_algorithm", "get_mime", "get_attributes", "follow"))
_SUMS = {"sha1": "sha1sum", "sha256": "sha256sum"}
# "absent", or "<%f type>|<mode>|<uid>|<gid>|<owner>|<group>|<size>" and, for a readable regular
# file, a second line with its checksum. Not following a link at the path (stat's default).
_LOOK = """if [ ! -e "$p" ] && [ ! -L "$p" ]; then echo absent; exit 0; fi
stat -c '%F|%a|%u|%g|%U|%G|%s' -- "$p"
if [ -n "$sum" ] && [ -f "$p" ] && [ ! -L "$p" ] && [ -r "$p" ]; then "$sum" < "$p" | cut -d' ' -f1; fi"""


def stat_result(path: str, out: str) -> dict:
    """The keys of ansible.builtin.stat's result the look can give (exists, path, mode, isdir,
    isreg, islnk, uid, gid, pw_name, gr_name, size, checksum)."""
    lines = out.split("\n")
    if lines[0] == "absent":
        return {"exists": False}
    kind, mode, uid, gid, owner, group, size = lines[0].split("|")
    st = {
        "exists": True, "path": path, "mode": f"{int(mode, 8):04o}",
        "isdir": kind == "directory", "isreg": kind.startswith("regular"), "islnk": kind == "symbolic link",
        "uid": int(uid), "gid": int(gid), "pw_name": owner, "gr_name": group, "size": int(size),
    }  # fmt: skip
    if len(lines) > 1 and lines[1]:
        st["checksum"] = lines[1]
    return st


class ActionModule(mnc_shell.ShellFront):
    MODULE = "ansible.legacy.stat"

    def look(self, args):
        path, word = mnc_shell.path_argument(args, ("path",), _LOOKED_AT)
        algorithm = args.get("checksum_algorithm") or "sha1"
        if word is None or boolean(args.get("follow", False), strict=False) or algorithm not in _SUMS:
            return None
        get_checksum = args.get("get_checksum")
        summer = _SUMS[algorithm] if get_checksum is None or boolean(get_checksum, strict=False) else ""
        look = self.shell(f"p={word}\nsum={summer}\n{_LOOK}")
        if look["rc"] != 0:
            return None
        try:
            return {"stat": stat_result(path, look["stdout"])}
        except ValueError:
            return None
