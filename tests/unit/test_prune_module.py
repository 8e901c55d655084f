"""mncluster.core.mnc_prune run by real Ansible on a stand-in cache and report root (issue 38,
item 9): leftovers of killed runs older than the bound go, younger ones stay; with evict, only
the newest builds of each name (a locked one kept), wheelhouses and reports (never `latest`'s)
stay; check mode removes nothing; the cache's size is reported."""

from __future__ import annotations

import os
import time

from ansible_env import run_module

HOUR = 3600


def _file(path, size=10, age=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    t = time.time() - age
    os.utime(path, (t, t))
    return path


def _bed(tmp_path):
    cache, reports = tmp_path / "cache", tmp_path / "reports"
    b = cache / "builds" / "openmpi"
    paths = {
        "old-partial": _file(b / "a.tar.gz.partial-abc123", age=2 * HOUR),
        "new-partial": _file(b / "b.tar.gz.partial-def456", age=60),
        "build-1": _file(b / "h1.tar.gz", 100, age=3 * HOUR),
        "record-1": _file(b / "h1.json", age=3 * HOUR),
        "build-2": _file(b / "h2.tar.gz", 100, age=2 * HOUR),
        "build-3": _file(b / "h3.tar.gz", 100, age=HOUR),
        "build-locked": _file(b / "h0.tar.gz", 100, age=9 * HOUR),
    }
    (b / "h0.lock").mkdir()
    for i in range(3):
        (reports / f"2026120{i + 1}T000000Z").mkdir(parents=True)
    (reports / "latest").symlink_to("20261201T000000Z")
    return cache, reports, paths


def test_leftovers_only_by_default(tmp_path):
    cache, _, paths = _bed(tmp_path)
    res = run_module("mncluster.core.mnc_prune", {"cache": str(cache), "tmpdir": str(tmp_path / "none")})
    assert res["removed"] == [str(paths["old-partial"])], res
    assert paths["new-partial"].exists() and paths["build-1"].exists()
    assert res["cache_bytes"] == sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())


def test_evict_keeps_the_newest_builds_locked_ones_and_latest(tmp_path):
    cache, reports, paths = _bed(tmp_path)
    args = {"cache": str(cache), "reports": str(reports), "tmpdir": str(tmp_path / "none"), "evict": True,
            "keep_builds": 2, "keep_reports": 1}  # fmt: skip
    dry = run_module("mncluster.core.mnc_prune", args, "--check")
    assert dry["changed"] and paths["build-1"].exists(), dry
    res = run_module("mncluster.core.mnc_prune", args)
    assert sorted(res["removed"]) == sorted(dry["removed"]), (res, dry)
    assert not paths["build-1"].exists() and not paths["record-1"].exists()
    assert paths["build-2"].exists() and paths["build-3"].exists() and paths["build-locked"].exists()
    # keep 1 report: the newest, and the one latest points to
    assert sorted(p.name for p in reports.iterdir()) == ["20261201T000000Z", "20261203T000000Z", "latest"]
    assert res["freed_bytes"] >= 110
