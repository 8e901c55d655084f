"""mnc_file (action_plugins/mnc_file.py): ansible.builtin.file, with a shell look first.

Real `ansible` runs on localhost. Where the path is already as asked, no module runs (a
module's result carries its invocation); everywhere else the file module does the change.
"""

from __future__ import annotations

import os

from ansible_env import run_module


def test_a_directory_is_made_once_then_only_looked_at(tmp_path):
    d = tmp_path / "spool"
    args = {"path": str(d), "state": "directory", "mode": "0750", "owner": "root", "group": "0"}
    first = run_module("mnc_file", args)
    assert first["changed"] is True and "invocation" in first, first
    assert d.is_dir() and oct(d.stat().st_mode & 0o7777) == "0o750"
    second = run_module("mnc_file", args)
    assert second["changed"] is False and "invocation" not in second, second
    d.chmod(0o755)
    third = run_module("mnc_file", args)
    assert third["changed"] is True and oct(d.stat().st_mode & 0o7777) == "0o750", third


def test_absent_and_links(tmp_path):
    gone = tmp_path / "gone"
    gone.write_text("x")
    assert run_module("mnc_file", {"path": str(gone), "state": "absent"})["changed"] is True
    again = run_module("mnc_file", {"path": str(gone), "state": "absent"})
    assert not gone.exists() and again["changed"] is False and "invocation" not in again, again
    (tmp_path / "lib").mkdir()
    link = tmp_path / "lib64"
    link.symlink_to("elsewhere")
    fixed = run_module("mnc_file", {"path": str(link), "src": "lib", "state": "link"})
    assert fixed["changed"] is True and os.readlink(link) == "lib", fixed
    kept = run_module("mnc_file", {"path": str(link), "src": "lib", "state": "link"})
    assert kept["changed"] is False and "invocation" not in kept, kept


def test_a_link_where_a_directory_is_wanted_goes_to_the_module(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / "dir"
    link.symlink_to(target)
    # The look does not follow the link: it is not the directory asked for, so the file module
    # decides (it refuses to turn a link into a directory).
    res = run_module("mnc_file", {"path": str(link), "state": "directory"})
    assert "invocation" in res, res


def test_check_mode_changes_nothing(tmp_path):
    d = tmp_path / "new"
    res = run_module("mnc_file", {"path": str(d), "state": "directory"}, "--check")
    assert res["changed"] is True and not d.exists(), res
