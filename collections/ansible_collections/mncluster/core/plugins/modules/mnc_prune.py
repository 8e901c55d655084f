#!/usr/bin/python
"""Ansible module: prune the controller's artifact cache and report directories, bounded."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_prune
short_description: Remove what mncluster's controller cache and reports no longer need, and say their size
description:
  - Runs on the controller (C(localhost)). Always removes the leftovers of killed or failed runs older
    than O(stale_after_s) in O(cache) (C(*.partial-*) archives, C(*.tmp-*) wheelhouses, C(*.tmp) files)
    and the C(ansible.*.tar) files of this user in O(tmpdir) that artifacts' file sync leaves after a
    failed unarchive.
  - With O(evict), also keeps only the newest O(keep_builds) packed builds of each name (C(builds/<name>/),
    archive and record together; an entry whose lock is held is kept), the newest O(keep_wheelhouses)
    wheelhouses, and the newest O(keep_reports) report directories (never the one C(latest) points to).
  - Returns what it removed, the bytes freed and the cache's size after; check mode removes nothing.
options:
  cache:
    description: The artifact cache (mnc_artifact_cache).
    type: path
    required: true
  reports:
    description: The report root (reports/); empty leaves reports alone.
    type: path
    default: ""
  tmpdir:
    description: Where artifacts' file sync puts its temporary tar files on the controller.
    type: path
    default: /tmp
  stale_after_s:
    description: A leftover younger than this may belong to a run still going, and is kept.
    type: int
    default: 3600
  evict:
    description: Also evict old builds, wheelhouses and reports (C(make prune)); false removes leftovers only.
    type: bool
    default: false
  keep_builds:
    description: Packed builds kept per build name.
    type: int
    default: 2
  keep_wheelhouses:
    description: Wheelhouses kept.
    type: int
    default: 6
  keep_reports:
    description: Report directories kept.
    type: int
    default: 20
author: mncluster
"""

EXAMPLES = r"""
- name: Prune the cache and the reports
  mncluster.core.mnc_prune:
    cache: "{{ mnc_artifact_cache }}"
    reports: "{{ playbook_dir }}/../reports"
    evict: true
"""

RETURN = r"""
removed:
  description: What was (in check mode, would be) removed.
  returned: always
  type: list
  elements: str
freed_bytes:
  description: Bytes freed.
  returned: always
  type: int
cache_bytes:
  description: The cache's size afterwards.
  returned: always
  type: int
"""

import os
import re
import shutil
import time

from ansible.module_utils.basic import AnsibleModule

LEFTOVER = re.compile(r"\.partial-[a-z0-9]+$|\.tmp-[a-z0-9]+$|\.tmp$")
REPORT = re.compile(r"^\d{8}T\d{6}Z")


def size(path: str) -> int:
    if os.path.islink(path) or not os.path.isdir(path):
        return os.lstat(path).st_size if os.path.lexists(path) else 0
    total = 0
    for top, dirs, files in os.walk(path):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            total += os.lstat(os.path.join(top, name)).st_size
    return total


def _age(path: str, now: float) -> float:
    return now - os.lstat(path).st_mtime


def plan(p: dict, now: float) -> list[str]:
    """The paths to remove, given the module's parameters."""
    out = []
    cache, uid = p["cache"], os.geteuid()
    if os.path.isdir(cache):
        for top, dirs, files in os.walk(cache):
            for name in dirs + files:
                path = os.path.join(top, name)
                if LEFTOVER.search(name) and _age(path, now) > p["stale_after_s"]:
                    out.append(path)
            dirs[:] = [d for d in dirs if not LEFTOVER.search(d)]
    if os.path.isdir(p["tmpdir"]):
        for name in os.listdir(p["tmpdir"]):
            path = os.path.join(p["tmpdir"], name)
            if (name.startswith("ansible.") and name.endswith(".tar") and os.lstat(path).st_uid == uid
                    and _age(path, now) > p["stale_after_s"]):  # fmt: skip
                out.append(path)
    if not p["evict"]:
        return out
    builds = os.path.join(cache, "builds")
    for name in sorted(os.listdir(builds)) if os.path.isdir(builds) else []:
        entry = os.path.join(builds, name)
        archives = [f for f in os.listdir(entry) if f.endswith(".tar.gz")]
        archives.sort(key=lambda f: os.lstat(os.path.join(entry, f)).st_mtime, reverse=True)
        for old in archives[p["keep_builds"]:]:
            stem = os.path.join(entry, old[: -len(".tar.gz")])
            if os.path.isdir(stem + ".lock"):
                continue
            out += [f for f in (stem + ".tar.gz", stem + ".json") if os.path.lexists(f)]
    wheels = os.path.join(cache, "wheels")
    houses = [os.path.join(wheels, d) for d in os.listdir(wheels)] if os.path.isdir(wheels) else []
    houses = [h for h in houses if os.path.isdir(h) and not LEFTOVER.search(h)]
    houses.sort(key=lambda h: os.lstat(h).st_mtime, reverse=True)
    out += houses[p["keep_wheelhouses"]:]
    reports = p["reports"]
    if reports and os.path.isdir(reports):
        latest = os.path.realpath(os.path.join(reports, "latest"))
        runs = sorted((d for d in os.listdir(reports) if REPORT.match(d)), reverse=True)
        out += [os.path.join(reports, d) for d in runs[p["keep_reports"]:]
                if os.path.realpath(os.path.join(reports, d)) != latest]  # fmt: skip
    return out


def main():
    module = AnsibleModule(
        argument_spec={
            "cache": {"type": "path", "required": True},
            "reports": {"type": "path", "default": ""},
            "tmpdir": {"type": "path", "default": "/tmp"},
            "stale_after_s": {"type": "int", "default": 3600},
            "evict": {"type": "bool", "default": False},
            "keep_builds": {"type": "int", "default": 2},
            "keep_wheelhouses": {"type": "int", "default": 6},
            "keep_reports": {"type": "int", "default": 20},
        },
        supports_check_mode=True,
    )
    p = module.params
    bad = [k for k in ("stale_after_s", "keep_builds", "keep_wheelhouses", "keep_reports") if p[k] < 0]
    if bad:
        module.fail_json(msg=f"mnc_prune: {', '.join(bad)} must be 0 or more")
    removed, freed = plan(p, time.time()), 0
    for path in removed:
        freed += size(path)
        if module.check_mode:
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    cache_bytes = size(p["cache"]) if os.path.isdir(p["cache"]) else 0
    module.exit_json(changed=bool(removed), removed=removed, freed_bytes=freed,
                     cache_bytes=cache_bytes - (freed if module.check_mode else 0))  # fmt: skip


if __name__ == "__main__":
    main()
