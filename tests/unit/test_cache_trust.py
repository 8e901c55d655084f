"""roles/artifacts/files/mnc-cache-lock.py refuses a build-cache entry another user could have
written (issue 38, item 8): the archive is checked only against the record beside it, so whoever
can write the entry chooses what every node unpacks and runs. The script as the role runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "roles" / "artifacts" / "files" / "mnc-cache-lock.py"


def _acquire(cache: Path) -> subprocess.CompletedProcess:
    entry = cache / "builds" / "openmpi"
    argv = [sys.executable, str(LOCK), "acquire", str(entry / "h.lock"), f"--archive={entry}/h.tar.gz",
            f"--record={entry}/h.json", "--timeout=60", f"--cache-root={cache}"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def cache(tmp_path):
    cache = tmp_path / "artifacts"
    (cache / "builds" / "openmpi").mkdir(parents=True)
    for d in (cache, cache / "builds", cache / "builds" / "openmpi"):
        d.chmod(0o755)
    return cache


def test_an_entry_only_this_user_writes_is_used(cache):
    proc = _acquire(cache)
    assert proc.returncode == 0 and json.loads(proc.stdout)["state"] == "acquired", proc.stderr


@pytest.mark.battery("cache: a build-cache directory writable by others is refused")
def test_a_world_writable_entry_is_refused(cache):
    (cache / "builds").chmod(0o777)
    proc = _acquire(cache)
    assert proc.returncode == 3, proc.stdout
    assert f"{cache}/builds is writable by its group or others" in proc.stderr, proc.stderr
    assert not (cache / "builds" / "openmpi" / "h.lock").exists()


@pytest.mark.battery("cache: a build-cache record owned by another user is refused")
@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root (CI: root)")
def test_a_record_owned_by_another_user_is_refused(cache):
    record = cache / "builds" / "openmpi" / "h.json"
    record.write_text("{}\n")
    os.chown(record, 65534, 65534)
    proc = _acquire(cache)
    assert proc.returncode == 3 and f"{record} is owned by uid 65534" in proc.stderr, proc.stderr
