"""roles/artifacts/tasks/sync_files.yml run by real ansible-playbook, localhost as the node:
a re-run copies nothing, and exactly the files that are missing, changed or have another
mode are copied again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_env import run_playbook

ROOT = Path(__file__).resolve().parents[2]

PLAY = """\
---
- name: Sync a file set
  hosts: all
  gather_facts: false
  tasks:
    - name: Sync
      ansible.builtin.include_role:
        name: artifacts
        tasks_from: sync_files
      vars:
        artifacts_sync_src_dir: "{src}"
        artifacts_sync_files: {files}
        artifacts_sync_dest: "{dest}"
        artifacts_sync_dirs: {dirs}
        artifacts_sync_mode: "0640"
        artifacts_sync_owner: "{owner}"

    - name: Report
      ansible.builtin.debug:
        var: artifacts_sync_result.copied
"""

FILES = ["bench.py", "report.py", "with space.py"]


def _bed(tmp_path, with_dirs=False):
    src, dest = tmp_path / "src", tmp_path / "dest"
    dirs = [str(tmp_path / "parent"), str(tmp_path / "parent" / "dest")] if with_dirs else []
    if dirs:
        dest = Path(dirs[-1])
    src.mkdir()
    for name in FILES:
        (src / name).write_text(f"# {name}\n")
    owner = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    play = tmp_path / "play.yml"
    play.write_text(
        PLAY.format(src=src, dest=dest, files=json.dumps(FILES), owner=owner, dirs=json.dumps(dirs))
    )

    def run() -> dict:
        proc, _ = run_playbook(play, "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
                               inventory="localhost,", timeout=300)  # fmt: skip
        copied = proc.result("Report")["artifacts_sync_result.copied"]
        return {"stats": proc.host_stats(), "copied": copied}

    return {"run": run, "src": src, "dest": dest}


@pytest.fixture
def bed(tmp_path):
    return _bed(tmp_path)


def test_first_run_copies_all_second_run_nothing(bed):
    dest = bed["dest"]
    dest.mkdir()
    first = bed["run"]()
    assert first["copied"] == sorted(FILES)
    assert first["stats"]["failures"] == 0
    for name in FILES:
        assert (dest / name).read_text() == f"# {name}\n"
        assert oct((dest / name).stat().st_mode & 0o777) == "0o640"
    second = bed["run"]()
    assert second["copied"] == []
    assert second["stats"]["changed"] == 0


def test_only_missing_changed_or_wrong_mode_files_are_copied(bed):
    dest = bed["dest"]
    dest.mkdir()
    bed["run"]()
    (dest / "bench.py").unlink()
    (bed["src"] / "report.py").write_text("# a new report\n")
    os.chmod(dest / "with space.py", 0o600)
    res = bed["run"]()
    assert res["copied"] == ["bench.py", "report.py", "with space.py"]
    assert (dest / "report.py").read_text() == "# a new report\n"
    assert oct((dest / "with space.py").stat().st_mode & 0o777) == "0o640"
    (dest / "report.py").write_text("edited on the node\n")
    untouched = {name: (dest / name).stat().st_ctime_ns for name in ("bench.py", "with space.py")}
    res = bed["run"]()
    assert res["copied"] == ["report.py"]
    assert (dest / "report.py").read_text() == "# a new report\n"
    # Only the stale file is written: the others keep their ctime.
    assert {name: (dest / name).stat().st_ctime_ns for name in untouched} == untouched


@pytest.mark.skipif(os.geteuid() != 0, reason="artifacts_sync_dirs makes root's directories: CI runs as root")
def test_the_directories_are_made_and_corrected_and_a_rerun_changes_nothing(tmp_path):
    bed = _bed(tmp_path, with_dirs=True)
    dest = bed["dest"]
    assert not dest.parent.exists()
    first = bed["run"]()
    assert first["copied"] == sorted(FILES)
    for d in (dest.parent, dest):
        assert oct(d.stat().st_mode & 0o7777) == "0o755" and d.stat().st_uid == 0
    assert bed["run"]()["stats"]["changed"] == 0
    # a directory's mode changed, nothing else: only it is corrected, no file is copied
    os.chmod(dest.parent, 0o700)
    res = bed["run"]()
    assert res["copied"] == [] and res["stats"]["changed"] == 1
    assert oct(dest.parent.stat().st_mode & 0o7777) == "0o755"
