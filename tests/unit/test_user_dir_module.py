"""mncluster.core.mnc_user_dir run by real Ansible as root: root makes a directory for an
unprivileged user (here `nobody`) and follows no link that user could have planted, anywhere on
the path; a link the site made (root's, in a directory only root can write) is followed.
Issue 38, item 1: with the builtin file module, a link planted at the work directory made root
chown and chmod its target."""

from __future__ import annotations

import os
import pwd
import stat

import pytest
from ansible_env import run_module

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="chown to another user needs root (CI runs as root)"
)

USER = "nobody"


def _ids():
    pw = pwd.getpwnam(USER)
    return pw.pw_uid, pw.pw_gid


def _group():
    import grp

    return grp.getgrgid(_ids()[1]).gr_name


def _args(path, mode="0755"):
    return {"path": str(path), "owner": USER, "group": _group(), "mode": mode}


def _state(path):
    st = os.lstat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode), sorted(os.listdir(path))


@pytest.fixture
def victim(tmp_path):
    """A root-only directory with a root-only file: what a planted link points at."""
    v = tmp_path / "victim"
    v.mkdir(mode=0o700)
    (v / "secret").write_text("root only\n")
    return v


@pytest.fixture
def user_owned(tmp_path):
    """A directory the user owns (as /scratch/<user> after the site made it)."""
    tmp_path.chmod(0o755)
    d = tmp_path / "scratch" / USER
    d.mkdir(parents=True)
    os.chown(d, *_ids())
    return d


def _plant(link, target):
    os.symlink(target, link)
    os.lchown(link, *_ids())


def test_makes_the_directory_for_the_user_and_a_second_run_changes_nothing(user_owned):
    path = user_owned / "mncluster"
    first = run_module("mncluster.core.mnc_user_dir", _args(path))
    assert first["changed"] is True and first["created"] == [str(path)], first
    st = os.lstat(path)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (*_ids(), 0o755)
    second = run_module("mncluster.core.mnc_user_dir", _args(path))
    assert second["changed"] is False and second["created"] == [], second


@pytest.mark.battery("link: the work directory outside the home planted to a root directory (mnc_user_dir)")
def test_a_link_planted_at_the_path_is_refused_and_its_target_unchanged(user_owned, victim):
    before = _state(victim)
    path = user_owned / "mncluster"
    _plant(path, victim)
    result = run_module("mncluster.core.mnc_user_dir", _args(path))
    assert result.get("failed") and result.get("refused"), result
    assert f"{path} is a link (owned by {USER}, to {victim})" in result["msg"], result["msg"]
    assert _state(victim) == before


@pytest.mark.battery("link: a directory above the work directory planted to a root directory (mnc_user_dir)")
def test_a_link_planted_above_the_path_is_refused_and_nothing_made_in_its_target(user_owned, victim):
    before = _state(victim)
    _plant(user_owned / "sub", victim)
    result = run_module("mncluster.core.mnc_user_dir", _args(user_owned / "sub" / "mncluster"))
    assert result.get("failed") and result.get("refused"), result
    assert f"{user_owned}/sub is a link" in result["msg"], result["msg"]
    assert _state(victim) == before  # no mncluster made in it, no owner or mode changed


def test_a_link_the_site_made_is_followed(tmp_path):
    """/scratch -> /data/scratch, root's link in a root-only directory: the site's, followed."""
    tmp_path.chmod(0o755)
    real = tmp_path / "data" / "scratch"
    real.mkdir(parents=True)
    (tmp_path / "scratch").symlink_to(real)
    result = run_module("mncluster.core.mnc_user_dir", _args(tmp_path / "scratch" / "u"))
    assert result["changed"] is True, result
    assert os.lstat(real / "u").st_uid == _ids()[0]


def test_a_root_link_in_a_directory_others_can_write_is_not_followed(tmp_path, victim):
    """Root's link, but in a world-writable directory: someone else could have put it there."""
    tmp_path.chmod(0o755)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "x").symlink_to(victim)
    before = _state(victim)
    result = run_module("mncluster.core.mnc_user_dir", _args(shared / "x" / "u"))
    assert result.get("refused"), result
    assert _state(victim) == before


def test_a_file_in_the_way_is_refused(user_owned):
    (user_owned / "mncluster").write_text("")
    result = run_module("mncluster.core.mnc_user_dir", _args(user_owned / "mncluster"))
    assert result.get("refused") and "is not a directory" in result["msg"], result


def test_check_mode_makes_nothing(user_owned):
    path = user_owned / "a" / "b"
    result = run_module("mncluster.core.mnc_user_dir", _args(path), "--check")
    assert result["changed"] is True and result["created"] == [str(user_owned / "a"), str(path)], result
    assert not (user_owned / "a").exists()
