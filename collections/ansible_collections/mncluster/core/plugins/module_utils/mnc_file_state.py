"""What mncluster.core.mnc_write_files compares, read by a role's look on the node.

The module replaces a file that is not a regular file at its path (a link counts as absent) or
whose content or mode differs, and makes or corrects a directory of its ``dirs`` that is missing,
is not a directory, or whose mode or owner differs from the task's user. A role's look (a ``raw``
shell program, one round trip for everything the role reads) prints that state, one line per path
(``look_script``), and ``pending`` names the paths the module would change: the role runs its
write only where one differs, so a converged node pays a skipped task, not a module run.

A path the look did not print counts as differing (the write runs): a look that misses a path is
slower, never wrong. The module's own comparison (``mnc_write_files.run``) decides the same way,
and a unit test runs both on the same files.
"""

from __future__ import annotations

import hashlib
import shlex


def _paths(items, key):
    return [item[key] if isinstance(item, dict) else item for item in items or ()]


def _mode(text, default):
    return format(int(str(text or default), 8), "o")


def look_script(files=(), dirs=()):
    """Shell lines that print ``file:<path>:<mode>:<sha256>`` for each regular file of ``files``
    (dicts with ``dest``, or paths), ``dir:<path>:<mode>:<uid>:<gid>`` for each directory of
    ``dirs`` (dicts with ``path``, or paths), and ``id:<uid>:<gid>`` of the user the look runs as.
    Nothing is followed: a link prints nothing."""
    lines = []
    paths = _paths(files, "dest")
    if paths:
        lines += [
            "for f in " + " ".join(shlex.quote(p) for p in paths) + "; do",
            '  if [ -f "$f" ] && [ ! -L "$f" ]; then',
            '    echo "file:$f:$(stat -c %a -- "$f"):$(sha256sum < "$f" | cut -c1-64)"',
            "  fi",
            "done",
        ]
    directories = [p.rstrip("/") for p in _paths(dirs, "path")]
    if directories:
        lines += [
            "for d in " + " ".join(shlex.quote(p) for p in directories) + "; do",
            '  if [ -d "$d" ] && [ ! -L "$d" ]; then echo "dir:$d:$(stat -c %a:%u:%g -- "$d")"; fi',
            "done",
        ]
    lines.append('echo "id:$(id -u):$(id -g)"')
    return "\n".join(lines)


def wanted_lines(files=(), dirs=(), ident="0:0"):
    """``{path: the line the look prints where the path is as the module would leave it}``."""
    out = {}
    for item in files or ():
        digest = hashlib.sha256(str(item["content"]).encode("utf-8")).hexdigest()
        out[item["dest"]] = f"file:{item['dest']}:{_mode(item.get('mode'), '0644')}:{digest}"
    for item in dirs or ():
        path = item["path"].rstrip("/")
        out[path] = f"dir:{path}:{_mode(item.get('mode'), '0755')}:{ident}"
    return out


def pending(files, look_lines, dirs=()):
    """The paths (files, then directories) that mnc_write_files with ``files`` and ``dirs`` would
    change, as the look's lines (``look_script``'s) show them; every path where there is no look."""
    seen = set(look_lines or ())
    ident = next((line[3:] for line in look_lines or () if line.startswith("id:")), None)
    wanted = wanted_lines(files, dirs, ident or "")
    return [path for path, line in wanted.items() if ident is None or line not in seen]


# ansible.builtin.blockinfile's marker lines: its ``marker`` with ``{mark}`` made BEGIN and END.
def _markers(item):
    marker = str(item.get("marker") or "# {mark} ANSIBLE MANAGED BLOCK")
    return marker.replace("{mark}", "BEGIN"), marker.replace("{mark}", "END")


def _block_key(item):
    return hashlib.sha256(f"{item['path']}\n{item.get('marker')}".encode()).hexdigest()[:16]


def blocks_look_script(blocks=()):
    """Shell lines that print, for each block of ``blocks`` (dicts with ansible.builtin.blockinfile's
    ``path``, ``marker`` and ``block``), ``block:<key>:missing`` where nothing is at the path, or
    ``block:<key>:<mode>:<uid>:<gid>:<user>:<group>:<begins>:<ends>:<newline>:<sha256>`` for a
    regular file: how many lines are exactly the begin and the end marker, whether the file ends
    with a newline (or is empty), and the sha256 of its lines from the first begin marker through
    the end marker after it. A link or another kind of file prints nothing. Nothing is followed."""
    if not blocks:
        return ""
    lines = [
        "mnc_block() {",
        '  if [ ! -e "$2" ] && [ ! -L "$2" ]; then echo "block:$1:missing"; return; fi',
        '  if [ -L "$2" ] || [ ! -f "$2" ]; then return; fi',
        '  nl=1; [ -n "$(tail -c 1 -- "$2")" ] && nl=0',
        '  echo "block:$1:$(stat -c %a:%u:%g:%U:%G -- "$2"):$(LC_ALL=C grep -cxF -e "$3" -- "$2")'
        ':$(LC_ALL=C grep -cxF -e "$4" -- "$2"):$nl:$(M0="$3" M1="$4" LC_ALL=C awk '
        "'p == 0 && $0 == ENVIRON[\"M0\"] { p = 1 } p == 1 { print } "
        "p == 1 && $0 == ENVIRON[\"M1\"] { p = 2 }'"
        ' "$2" | sha256sum | cut -c1-64)"',
        "}",
    ]
    for item in blocks:
        begin, end = _markers(item)
        words = (_block_key(item), item["path"], begin, end)
        lines.append("mnc_block " + " ".join(shlex.quote(v) for v in words))
    return "\n".join(lines)


def _same_owner(wanted, number, name):
    return wanted in (None, "") or str(wanted) in (number, name)


def block_unchanged(item, line):
    """Whether ansible.builtin.blockinfile with ``item`` (its ``state``, ``block``, ``marker``,
    ``mode``, ``owner``, ``group``) would change nothing at a file whose look printed ``line``
    (``None``: the look printed nothing for it)."""
    if line is None:
        return False
    fields = line.split(":")[2:]
    present = item.get("state", "present") != "absent"
    if fields == ["missing"]:
        return not present
    if len(fields) != 9:
        return False
    mode, uid, gid, user, group, begins, ends, newline, digest = fields
    if item.get("mode") not in (None, "") and _mode(item["mode"], "0644") != mode:
        return False
    if not (_same_owner(item.get("owner"), uid, user) and _same_owner(item.get("group"), gid, group)):
        return False
    if newline != "1":
        return False
    if not present:
        return begins == "0" or ends == "0"
    block = str(item.get("block") or "")
    if not block:
        # an empty block removes the markers: unchanged only where there are none
        return begins == "0" or ends == "0"
    if not block.endswith("\n"):
        block += "\n"
    begin, end = _markers(item)
    wanted = hashlib.sha256(f"{begin}\n{block}{end}\n".encode()).hexdigest()
    return begins == "1" and ends == "1" and digest == wanted


def blocks_pending(blocks, look_lines):
    """The blocks of ``blocks`` that ansible.builtin.blockinfile would change, as the look's lines
    (``blocks_look_script``'s) show them: every block the look printed nothing for."""
    seen = {}
    for line in look_lines or ():
        if line.startswith("block:"):
            seen[line.split(":")[1]] = line
    return [item for item in blocks or () if not block_unchanged(item, seen.get(_block_key(item)))]
