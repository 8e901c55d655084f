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
