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

import os
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mncluster.core.plugins.module_utils.mnc_known_hosts import plan


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
