"""Controller-side report files, written so that a reader never sees half of one."""

from __future__ import annotations

import os


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` next to ``path`` and rename it over ``path``."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def point_link(link: str, target: str) -> None:
    """Make ``link`` a symlink to ``target`` (kept as given, e.g. relative), replaced atomically."""
    tmp = link + ".tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, link)
