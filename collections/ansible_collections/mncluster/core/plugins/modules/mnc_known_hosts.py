#!/usr/bin/python
"""Ansible module: pin a whole set of host keys in one known_hosts file in one pass."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_known_hosts
short_description: Pin many host keys in one known_hosts file at once
description:
  - Reads the file once, keeps every line that names none of the given hosts, keeps one line per
    given host whose key is the given key, drops that host's other lines (an old or wrong key), and
    appends a line for each host that has none. Hashed names (C(|1|salt|hash), what
    C(ssh-keygen -H) writes) and plain names are both recognised.
  - One task per node whatever the number of peers, where C(ansible.builtin.known_hosts) needs
    one loop item (one module run) per name.
  - The file is replaced atomically (a temporary file in the same directory, then a rename), so a
    reader never sees half of it and a symlink at the path is replaced, not followed.
  - Supports check mode and diff mode.
options:
  path:
    description: The known_hosts file. Its directory must exist.
    type: path
    required: true
  hosts:
    description: What to pin, one item per name.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The name or address ssh is given (no port, no pattern).
        type: str
        required: true
      key:
        description: The key as C(<type> <base64>) (the C(.pub) file's first two fields).
        type: str
        required: true
  hash_host:
    description: Write new entries with hashed names.
    type: bool
    default: true
  mode:
    description: Mode of the file.
    type: raw
    default: "0600"
author: mncluster
"""

EXAMPLES = r"""
- name: Pin every node's host key in the MPI user's known_hosts
  mncluster.core.mnc_known_hosts:
    path: ~mpiuser/.ssh/known_hosts
    hosts:
      - {name: 10.0.0.11, key: "ssh-ed25519 AAAAC3Nza..."}
      - {name: node1, key: "ssh-ed25519 AAAAC3Nza..."}
  become: true
  become_user: mpiuser
"""

RETURN = r"""
added:
  description: Names that had no line and got one.
  returned: always
  type: list
  elements: str
replaced:
  description: Names whose lines held another key and were replaced.
  returned: always
  type: list
  elements: str
"""

import base64
import binascii
import hashlib
import hmac
import os
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule


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


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            hosts=dict(
                type="list",
                elements="dict",
                required=True,
                options=dict(name=dict(type="str", required=True), key=dict(type="str", required=True)),
            ),
            hash_host=dict(type="bool", default=True),
            mode=dict(type="raw", default="0600"),
        ),
        supports_check_mode=True,
    )
    path, hosts = module.params["path"], module.params["hosts"]
    for h in hosts:
        if any(c in h["name"] for c in " ,*?![]|") or len(h["key"].split()) < 2:
            msg = f"mnc_known_hosts: bad entry {h!r}: a plain name and a '<type> <base64>' key"
            module.fail_json(msg=msg)
    mode = int(str(module.params["mode"]), 8)
    try:
        with open(path, encoding="utf-8") as f:
            before = f.read()
    except FileNotFoundError:
        before = None
    lines = (before or "").splitlines()
    new, added, replaced = plan(lines, hosts, module.params["hash_host"])
    changed = bool(added or replaced) or before is None
    # The same lines in the same order minus the dropped ones: a line-set comparison is enough.
    if not changed and len(new) != len(lines):
        changed = True
    after = "\n".join(new) + "\n" if new else ""
    current_mode = None if before is None else stat.S_IMODE(os.stat(path).st_mode)
    mode_changed = current_mode is not None and current_mode != mode
    result = dict(changed=changed or mode_changed, added=added, replaced=replaced, path=path)
    if module._diff:
        result["diff"] = dict(before=before or "", after=after if changed else before or "")
    if module.check_mode or not result["changed"]:
        module.exit_json(**result)
    if changed:
        fd, tmp = tempfile.mkstemp(prefix=".known_hosts.", dir=os.path.dirname(path) or ".")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                os.fchmod(f.fileno(), mode)
                f.write(after)
            os.replace(tmp, path)
        except OSError as e:
            if os.path.exists(tmp):
                os.unlink(tmp)
            module.fail_json(msg=f"mnc_known_hosts: cannot write {path}: {e}")
    else:
        os.chmod(path, mode)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
