"""mncluster.core.mnc_write_files run by real Ansible: files written with their content and mode in
one run, missing directories made; a second run changes nothing; only a file whose content or mode
differs is replaced; a link at a path is replaced, never followed; check mode writes nothing;
bad input is refused before any file is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_env import run_module


def test_files_written_once_and_a_second_run_changes_nothing(tmp_path):
    files = [
        {"dest": str(tmp_path / "etc/jobs/a.sbatch"), "content": "#!/bin/bash\necho a\n", "mode": "0755"},
        {"dest": str(tmp_path / "etc/lmod/openmpi/5.0.7.lua"), "content": "-- lua\n"},
    ]
    first = run_module("mncluster.core.mnc_write_files", {"files": files})
    assert first["changed"] is True and first["changed_files"] == [f["dest"] for f in files], first
    assert (tmp_path / "etc/jobs/a.sbatch").read_text() == "#!/bin/bash\necho a\n"
    assert oct((tmp_path / "etc/jobs/a.sbatch").stat().st_mode & 0o7777) == "0o755"
    assert oct((tmp_path / "etc/lmod/openmpi/5.0.7.lua").stat().st_mode & 0o7777) == "0o644"
    assert oct((tmp_path / "etc/lmod/openmpi").stat().st_mode & 0o7777) == "0o755"
    second = run_module("mncluster.core.mnc_write_files", {"files": files})
    assert second["changed"] is False and second["changed_files"] == [], second


def test_only_the_file_that_differs_is_replaced(tmp_path):
    same, other, mode = tmp_path / "same", tmp_path / "other", tmp_path / "mode"
    same.write_text("kept\n")
    other.write_text("old\n")
    mode.write_text("x\n")
    for p in (same, other, mode):
        p.chmod(0o644)
    files = [
        {"dest": str(same), "content": "kept\n"},
        {"dest": str(other), "content": "new\n"},
        {"dest": str(mode), "content": "x\n", "mode": "0600"},
    ]
    res = run_module("mncluster.core.mnc_write_files", {"files": files}, "--diff")
    assert res["changed_files"] == [str(other), str(mode)], res
    assert other.read_text() == "new\n" and oct(mode.stat().st_mode & 0o777) == "0o600"
    assert any(d["before"] == "old\n" and d["after"] == "new\n" for d in res["diff"]), res


def test_a_link_at_the_path_is_replaced_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "conf"
    link.symlink_to(victim)
    res = run_module("mncluster.core.mnc_write_files", {"files": [{"dest": str(link), "content": "mine\n"}]})
    assert res["changed"] is True, res
    assert victim.read_text() == "precious\n"
    assert not link.is_symlink() and link.read_text() == "mine\n"


def test_check_mode_reports_and_writes_nothing(tmp_path):
    dest = tmp_path / "new/dir/file"
    res = run_module(
        "mncluster.core.mnc_write_files", {"files": [{"dest": str(dest), "content": "x\n"}]}, "--check"
    )
    assert res["changed"] is True and res["changed_files"] == [str(dest)], res
    assert not (tmp_path / "new").exists()


def test_bad_input_is_refused_before_any_file_is_written(tmp_path):
    good = {"dest": str(tmp_path / "good"), "content": "x\n"}
    bads = [
        {"dest": "relative/path", "content": "x"},
        {"dest": str(tmp_path / "m"), "content": "x", "mode": "rw"},
        {"dest": good["dest"], "content": "twice"},
    ]
    for bad in bads:
        res = run_module("mncluster.core.mnc_write_files", {"files": [good, bad]})
        assert res.get("failed") is True and "mnc_write_files:" in res["msg"], res
        assert not (tmp_path / "good").exists()


@pytest.mark.battery("site file: a slurm.conf the site wrote is kept as a backup when mncluster replaces it")
def test_a_replaced_file_is_kept_as_a_backup_when_asked(tmp_path):
    """Issue 38, item 6: a site's file (its slurm.conf) replaced by ours is kept beside it, named as
    the builtin modules' backup names theirs; an unchanged file makes no backup."""
    dest = tmp_path / "slurm.conf"
    dest.write_text("# the site's own\nNodeName=gpu01 Weight=7\n")
    files = [{"dest": str(dest), "content": "ours\n", "backup": True}]
    first = run_module("mncluster.core.mnc_write_files", {"files": files})
    assert first["changed"] is True and len(first["backup_files"]) == 1, first
    kept = first["backup_files"][0]
    assert kept.startswith(f"{dest}.") and kept.endswith("~"), kept
    assert "NodeName=gpu01 Weight=7" in Path(kept).read_text()
    assert dest.read_text() == "ours\n"
    second = run_module("mncluster.core.mnc_write_files", {"files": files})
    assert second["changed"] is False and second["backup_files"] == [], second
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([dest.name, Path(kept).name])


def test_dirs_are_made_or_corrected_with_the_files_in_one_run(tmp_path):
    """`dirs`: a role's directory and its files in one module run; an existing directory's mode is
    corrected (another role made it 0700), a second run changes nothing, check mode touches nothing."""
    made, private = tmp_path / "opt/tools", tmp_path / "etc/mncluster"
    private.mkdir(parents=True)
    private.chmod(0o700)
    args = {
        "dirs": [{"path": str(made), "mode": "0750"}, {"path": str(private)}],
        "files": [{"dest": str(made / "probe.py"), "content": "print(1)\n", "mode": "0755"}],
    }
    check = run_module("mncluster.core.mnc_write_files", args, "--check")
    assert check["changed_files"] == [str(made), str(private), str(made / "probe.py")], check
    assert not made.exists() and oct(private.stat().st_mode & 0o7777) == "0o700"
    first = run_module("mncluster.core.mnc_write_files", args)
    assert first["changed_files"] == [str(made), str(private), str(made / "probe.py")], first
    assert oct(made.stat().st_mode & 0o7777) == "0o750"
    assert oct(private.stat().st_mode & 0o7777) == "0o755"
    assert (made / "probe.py").read_text() == "print(1)\n"
    second = run_module("mncluster.core.mnc_write_files", args)
    assert second["changed"] is False and second["changed_files"] == [], second


def test_a_link_or_file_in_dirs_is_refused_not_followed(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    target.chmod(0o700)
    link, plain = tmp_path / "link", tmp_path / "plain"
    link.symlink_to(target)
    plain.write_text("x\n")
    for bad in (link, plain):
        res = run_module("mncluster.core.mnc_write_files", {"dirs": [{"path": str(bad)}], "files": [
            {"dest": str(tmp_path / "f"), "content": "x\n"}]})  # fmt: skip
        assert res.get("failed") is True and "refused" in res["msg"], res
        assert not (tmp_path / "f").exists()
    assert oct(target.stat().st_mode & 0o7777) == "0o700"
