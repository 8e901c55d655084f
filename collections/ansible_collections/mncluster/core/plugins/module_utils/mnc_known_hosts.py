"""What mncluster.core.mnc_known_hosts writes into a known_hosts file, and whether it would
change one: the module and the ssh_mesh role's look (the filter mnc_known_hosts_pending) decide
with the same code.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os


def _hashed_match(pattern: str, name: str) -> bool:
    parts = pattern.split("|")
    if len(parts) != 4 or parts[1] != "1":
        return False
    try:
        salt, digest = base64.b64decode(parts[2]), base64.b64decode(parts[3])
    except (binascii.Error, ValueError):
        return False
    return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), digest)


def names_host(field: str, name: str) -> bool:
    """Whether a known_hosts host field (comma-separated names, plain or hashed) names ``name``."""
    return any(_hashed_match(p, name) if p.startswith("|1|") else p == name for p in field.split(","))


def hashed_name(name: str, salt: bytes | None = None) -> str:
    salt = os.urandom(20) if salt is None else salt
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def plan(lines: list[str], hosts: list[dict], hash_host: bool = True) -> tuple[list, list, list]:
    """The file's new lines, the names added and the names replaced."""
    wanted = {h["name"]: " ".join(h["key"].split()[:2]) for h in hosts}
    keep, kept_for, seen = [], set(), set()
    for line in lines:
        fields = line.split()
        # Comments, blank lines and @cert-authority / @revoked markers are not ours to judge.
        if len(fields) < 3 or line.lstrip().startswith(("#", "@")):
            keep.append(line)
            continue
        mine = [n for n in wanted if names_host(fields[0], n)]
        if not mine:
            keep.append(line)
            continue
        seen.update(mine)
        key = " ".join(fields[1:3])
        # One line per name, with the wanted key; any other line of that name goes.
        if len(mine) == 1 and key == wanted[mine[0]] and mine[0] not in kept_for:
            kept_for.add(mine[0])
            keep.append(line)
    added, replaced = [], []
    for name, key in wanted.items():
        if name in kept_for:
            continue
        (replaced if name in seen else added).append(name)
        keep.append(f"{hashed_name(name) if hash_host else name} {key}")
    return keep, added, replaced


def unchanged(lines: list[str] | None, hosts: list[dict], mode: int | None, wanted_mode: int = 0o600) -> bool:
    """Whether the module with ``hosts`` would leave a file of these ``lines`` (``None``: no file)
    and this ``mode`` as it is (every name pinned once, with its key, and the mode)."""
    if lines is None:
        return False
    new, added, replaced = plan(lines, hosts)
    return not added and not replaced and len(new) == len(lines) and mode == wanted_mode
