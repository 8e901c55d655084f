#!/usr/bin/python
"""Ansible module: root makes a directory for an user, following no link that user could plant."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_user_dir
short_description: Make a directory owned by an unprivileged user, following no link that user could plant
description:
  - Root makes (or adopts) the directory I(path) and gives it to I(owner), walking the path one component
    at a time from C(/) with C(O_NOFOLLOW) directory handles (C(openat)), so a link anywhere on the way is
    never followed unless the site made it (owned by root, in a directory only root can write, such as
    C(/scratch) as a link to C(/data/scratch)).
  - It refuses, changing nothing at the refused component, when a component is a link someone else could
    have made, a component is not a directory, or a directory on the way was replaced by a link while it
    walked (the handles are opened with C(O_NOFOLLOW), so a swap fails the open instead of redirecting it).
  - The builtin M(ansible.builtin.file) module does not do this; with C(follow=false) it refuses a link at
    I(path) itself, but it follows links in the directories above it, and it chowns by path.
  - Ownership and mode are set through the directory's own handle (C(fchown), C(fchmod)), never by path.
options:
  path:
    description: The directory, an absolute path.
    type: path
    required: true
  owner:
    description: User name that owns the directory.
    type: str
    required: true
  group:
    description: Group name of the directory.
    type: str
    required: true
  mode:
    description: Permission bits, an octal string such as C("0755").
    type: str
    required: true
author: mncluster
"""

EXAMPLES = r"""
- name: Make the MPI user's work directory on a shared scratch
  mncluster.core.mnc_user_dir:
    path: /scratch/mpiuser/mncluster
    owner: mpiuser
    group: mpiuser
    mode: "0755"
"""

RETURN = r"""
created:
  description: The directories it made, outermost first.
  returned: always
  type: list
  elements: str
"""

import grp
import os
import pwd
import stat

from ansible.module_utils.basic import AnsibleModule

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(Exception):
    pass


def _site_link(st_link, st_dir):
    """A link the site made: owned by root, in a directory only root can write (no group/other write)."""
    return st_link.st_uid == 0 and st_dir.st_uid == 0 and not st_dir.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _open_root_path(path):
    """Open `path` (made only of site-trusted components) as a directory handle, resolving links root made."""
    fd = os.open("/", DIR_FLAGS)
    for name in [p for p in path.split("/") if p]:
        try:
            nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError:
            os.close(fd)
            raise
        os.close(fd)
        fd = nfd
    return fd


def make_user_dir(path, uid, gid, mode, check_mode=False):
    """Walk `path` from /, make what is missing, give the last component to uid:gid with mode.
    Returns (changed, created). Raises Refused with a reason in words."""
    if not os.path.isabs(path):
        raise Refused(f"{path} is not an absolute path")
    parts = [p for p in os.path.normpath(path).split("/") if p]
    if not parts or ".." in parts:
        raise Refused(f"{path}: not a directory below /")
    created, changed = [], False
    walked = ""  # the path as walked so far (with the site's links resolved)
    fd = os.open("/", DIR_FLAGS)
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            here = f"{walked}/{name}"
            st_dir = os.fstat(fd)
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISLNK(st.st_mode):
                if last or not _site_link(st, st_dir):
                    owner = _user(st.st_uid)
                    raise Refused(
                        f"{here} is a link (owned by {owner}, to {os.readlink(name, dir_fd=fd)}): root "
                        "does not follow a link another user could have made; remove it, or make the "
                        "directory there yourself"
                    )
                target = os.path.normpath(os.path.join(walked or "/", os.readlink(name, dir_fd=fd)))
                nfd = _open_root_path(target)
                os.close(fd)
                fd, walked = nfd, target.rstrip("/")
                continue
            if st is None:
                if check_mode:
                    created.extend(
                        f"{walked}/{'/'.join(parts[i : i + k + 1])}" for k in range(len(parts) - i)
                    )
                    return True, created
                try:
                    os.mkdir(name, 0o700, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: opened below without following, refused if not a directory
                else:
                    created.append(here)
                    changed = True
            elif not stat.S_ISDIR(st.st_mode):
                raise Refused(f"{here} exists and is not a directory")
            try:
                nfd = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                raise Refused(
                    f"{here} could not be opened as a directory without following a link ({e.strerror})"
                ) from None
            os.close(fd)
            fd, walked = nfd, here
            if here in created and not last:
                os.fchmod(fd, 0o755)  # a directory made on the way: root's, readable by all (as mkdir -p)
        st = os.fstat(fd)
        if (st.st_uid, st.st_gid) != (uid, gid):
            if not check_mode:
                os.fchown(fd, uid, gid)
            changed = True
        if stat.S_IMODE(st.st_mode) != mode:
            if not check_mode:
                os.fchmod(fd, mode)
            changed = True
        return changed, created
    finally:
        os.close(fd)


def _user(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "owner": {"type": "str", "required": True},
            "group": {"type": "str", "required": True},
            "mode": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        uid = pwd.getpwnam(p["owner"]).pw_uid
        gid = grp.getgrnam(p["group"]).gr_gid
        mode = int(p["mode"], 8)
    except (KeyError, ValueError) as e:
        module.fail_json(
            msg=f"mnc_user_dir: owner {p['owner']!r}, group {p['group']!r}, mode {p['mode']!r}: {e}",
            created=[],
        )
    try:
        changed, created = make_user_dir(p["path"], uid, gid, mode, module.check_mode)
    except Refused as e:
        module.fail_json(msg=f"mnc_user_dir: refused: {e}", created=[], refused=True)
    except OSError as e:
        module.fail_json(msg=f"mnc_user_dir: {p['path']}: {e}", created=[])
    module.exit_json(changed=changed, created=created, path=p["path"])


if __name__ == "__main__":
    main()
