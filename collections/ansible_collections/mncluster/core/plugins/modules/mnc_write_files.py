#!/usr/bin/python
"""Ansible module: write a role's set of small root-owned files in one pass."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_write_files
short_description: Write several files, given their contents, in one module run
description:
  - For each file, compares the given content and mode with what is on the node and replaces the
    file only when either differs. One task (one module run) per role for its files, where a loop
    of C(ansible.builtin.template) costs one module run per file on every node, changed or not.
  - The contents are rendered on the controller, as C(ansible.builtin.template) would render them
    (C(lookup('ansible.builtin.template', 'x.j2'))), or read (C(lookup('ansible.builtin.file', ...))).
  - Each file is replaced atomically (a temporary file in the same directory, then a rename), so a
    reader never sees half of it and a symlink at the path is replaced, never followed.
  - For root's own configuration (under /etc, /opt, /usr/local), or a user's own files when the
    task runs as that user. It writes as the user the task runs as and sets no owner. Never
    point it, as root, into a directory another user can write.
  - Missing parent directories are created (mode C(dir_mode)).
  - The directories listed in C(dirs) are made, or their mode and owner corrected, before the files are
    written, in the same module run (a role's directory and its files in one task, where a
    C(ansible.builtin.file) task before it costs one more module run on every node).
  - Supports check mode and diff mode.
options:
  files:
    description: The files.
    type: list
    elements: dict
    required: true
    suboptions:
      dest:
        description: Absolute path of the file.
        type: path
        required: true
      content:
        description: The whole content of the file.
        type: str
        required: true
      mode:
        description: Mode of the file, octal as a string (C("0644")).
        type: str
        default: "0644"
      backup:
        description:
          - Before replacing an existing file whose content differs, keep a copy of it next to it, named as
            the builtin modules' C(backup) option names theirs (C(<dest>.<pid>.<date>@<time>~)), for a file
            the site may have written (a C(slurm.conf)), so that nothing it wrote is lost.
        type: bool
        default: false
  dirs:
    description:
      - Directories made (missing parents with C(dir_mode)) or corrected, before any file is written.
      - Each ends up a directory with the given mode, owned by the user and group the task runs as
        (as root an existing directory of another owner is given to root; as another user one it does
        not own is refused). A link or another kind of file at the path is refused, never followed.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path of the directory.
        type: path
        required: true
      mode:
        description: Mode of the directory, octal as a string (C("0755")).
        type: str
        default: "0755"
  dir_mode:
    description: Mode of the parent directories it creates.
    type: str
    default: "0755"
author: mncluster
"""

EXAMPLES = r"""
- name: Write the job scripts
  mncluster.core.mnc_write_files:
    files:
      - dest: /etc/mncluster/jobs/chainermn.sbatch
        content: "{{ __user_env_tpl_chainermn_sbatch }}"
        mode: "0755"
      - dest: /etc/mncluster/jobs/chainermn.pbs
        content: "{{ __user_env_tpl_chainermn_pbs }}"
        mode: "0755"
"""

RETURN = r"""
backup_files:
  description: The copies kept of replaced files (C(backup)), one per file that had one made.
  returned: always
  type: list
  elements: str
changed_files:
  description: The files that were (or, in check mode, would be) replaced, and the directories of
    C(dirs) that were (or would be) made or corrected.
  returned: always
  type: list
  elements: str
"""

import os
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule


def _mode(text, what):
    try:
        mode = int(str(text), 8)
    except ValueError:
        raise ValueError(f"{what}: mode {text!r} is not an octal number such as 0644") from None
    if not 0 <= mode <= 0o7777:
        raise ValueError(f"{what}: mode {text!r} is out of range")
    return mode


def _current(dest):
    """(content bytes or None, mode or None) of a regular file at ``dest`` (a link counts as absent)."""
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(st.st_mode):
        return None, None
    with open(dest, "rb") as f:
        return f.read(), stat.S_IMODE(st.st_mode)


def _make_dirs(path, mode):
    missing = []
    while path and not os.path.lexists(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        os.mkdir(directory, mode)
        os.chmod(directory, mode)


def _write(dest, data, mode):
    directory = os.path.dirname(dest)
    fd, tmp = tempfile.mkstemp(prefix=".mnc-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def _ensure_dir(path, mode, dir_mode, check_mode):
    """Make ``path`` a directory of ``mode`` owned by the effective user and group; True when it
    changed (or would). A link or non-directory there is refused (ValueError), never followed."""
    uid, gid = os.geteuid(), os.getegid()
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not check_mode:
            _make_dirs(os.path.dirname(path), dir_mode)
            os.mkdir(path, mode)
            os.chmod(path, mode)
        return True
    if not stat.S_ISDIR(st.st_mode):
        raise ValueError(f"dirs: {path} is a link or not a directory; refused, not followed")
    wrong_owner = st.st_uid != uid or st.st_gid != gid
    if wrong_owner and uid != 0 and st.st_uid != uid:
        raise ValueError(f"dirs: {path} belongs to uid {st.st_uid}, not to the task's user (uid {uid})")
    if stat.S_IMODE(st.st_mode) == mode and not wrong_owner:
        return False
    if not check_mode:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            if wrong_owner:
                os.fchown(fd, uid, gid)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    return True


def run(files, dir_mode_text, check_mode=False, backup=None, dirs=()):
    """Compare and write; returns (changed_files, diffs, backup_files). ``backup(path)`` copies a
    file aside and returns the copy's path (AnsibleModule.backup_local). ``dirs`` ({path, mode})
    are made or corrected first. Raises ValueError on bad input."""
    dir_mode = _mode(dir_mode_text, "dir_mode")
    dir_plan = []
    for item in dirs or ():
        path = (item.get("path") or "").rstrip("/")
        if not os.path.isabs(path or "relative"):
            raise ValueError(f"dirs: {item.get('path')!r} must be an absolute path")
        dir_plan.append((path, _mode(item.get("mode") or "0755", path)))
    plan = []
    seen = set()
    for item in files:
        dest = item.get("dest") or ""
        if not os.path.isabs(dest) or dest.endswith("/"):
            raise ValueError(f"dest {dest!r} must be an absolute path of a file")
        if dest in seen:
            raise ValueError(f"dest {dest} is given twice")
        seen.add(dest)
        if item.get("content") is None:
            raise ValueError(f"{dest}: content is required")
        plan.append((dest, str(item["content"]).encode("utf-8"), _mode(item.get("mode") or "0644", dest),
                     bool(item.get("backup"))))
    changed, diffs, backups = [], [], []
    for path, mode in dir_plan:
        if _ensure_dir(path, mode, dir_mode, check_mode):
            changed.append(path)
    for dest, data, mode, keep in plan:
        before, before_mode = _current(dest)
        if before == data and before_mode == mode:
            continue
        changed.append(dest)
        diffs.append({
            "before_header": dest,
            "after_header": dest,
            "before": before.decode("utf-8", "replace") if before is not None else "",
            "after": data.decode("utf-8", "replace"),
        })  # fmt: skip
        if not check_mode:
            if keep and before is not None and before != data and backup is not None:
                backups.append(backup(dest))
            _make_dirs(os.path.dirname(dest), dir_mode)
            _write(dest, data, mode)
    return changed, diffs, backups


def main():
    module = AnsibleModule(
        argument_spec={
            "files": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "dest": {"type": "path", "required": True},
                    "content": {"type": "str", "required": True},
                    "mode": {"type": "str", "default": "0644"},
                    "backup": {"type": "bool", "default": False},
                },
            },
            "dirs": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "path": {"type": "path", "required": True},
                    "mode": {"type": "str", "default": "0755"},
                },
            },
            "dir_mode": {"type": "str", "default": "0755"},
        },
        supports_check_mode=True,
    )
    try:
        changed, diffs, backups = run(module.params["files"], module.params["dir_mode"], module.check_mode,
                                      module.backup_local, module.params["dirs"])
    except (ValueError, OSError) as exc:
        module.fail_json(msg=f"mnc_write_files: {exc}")
    result = {"changed": bool(changed), "changed_files": changed, "backup_files": backups}
    if module._diff and diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
