"""mnc_getent, mnc_slurp (action_plugins/): the module's result, without the module where the
node's shell can answer. Real `ansible` on localhost; the builtin module is the reference, and
a module's result carries its invocation where the front's does not."""

from __future__ import annotations

import base64

import pytest
from ansible_env import run_module


@pytest.mark.parametrize("args", [{"database": "passwd", "key": "root"}, {"database": "group"}])
def test_getent_gives_the_module_s_fact(args):
    front = run_module("mnc_getent", args)
    truth = run_module("ansible.builtin.getent", args)
    assert "invocation" not in front, front
    assert front["ansible_facts"] == truth["ansible_facts"], (front, truth)


def test_getent_of_a_missing_key_fails_as_the_module_does():
    front = run_module("mnc_getent", {"database": "passwd", "key": "no-such-user-mnc"})
    assert front.get("failed") is True and "could not be found" in front["msg"], front


def test_slurp_gives_the_module_s_content(tmp_path):
    f = tmp_path / "key.pub"
    f.write_bytes(b"ssh-ed25519 AAAA host\n\x00\xff")
    front = run_module("mnc_slurp", {"src": str(f)})
    assert "invocation" not in front, front
    assert base64.b64decode(front["content"]) == f.read_bytes()
    assert front["content"] == run_module("ansible.builtin.slurp", {"src": str(f)})["content"]
    missing = run_module("mnc_slurp", {"src": str(tmp_path / "nope")})
    assert missing.get("failed") is True and "not found" in missing["msg"], missing


STAT_KEYS = ("exists", "path", "mode", "isdir", "isreg", "islnk", "uid", "gid", "pw_name", "gr_name", "size")


@pytest.mark.parametrize("kind", ["file", "empty", "dir", "link", "missing"])
@pytest.mark.parametrize("algorithm", ["sha1", "sha256"])
def test_stat_gives_the_module_s_keys(tmp_path, kind, algorithm):
    p = tmp_path / "p"
    if kind == "file":
        p.write_text("munge\n")
        p.chmod(0o400)
    elif kind == "empty":
        p.write_text("")
    elif kind == "dir":
        p.mkdir()
    elif kind == "link":
        (tmp_path / "t").write_text("x")
        p.symlink_to(tmp_path / "t")
    args = {"path": str(p), "checksum_algorithm": algorithm}
    front = run_module("mnc_stat", args)
    truth = run_module("ansible.builtin.stat", args)
    assert "invocation" not in front, front
    for key in (*STAT_KEYS, "checksum"):
        assert front["stat"].get(key) == truth["stat"].get(key), (key, front["stat"], truth["stat"])


@pytest.mark.parametrize("case", ["creates-there", "creates-missing", "removes-there", "removes-missing"])
def test_command_runs_where_the_module_would_and_says_what_it_says_where_not(tmp_path, case):
    there = tmp_path / "there"
    there.write_text("x")
    key, path = case.split("-")[0], there if case.endswith("-there") else tmp_path / "missing"
    args = {"argv": ["touch", str(tmp_path / "ran")], key: str(path)}
    truth = run_module("ansible.builtin.command", args)
    ran = (tmp_path / "ran").exists()
    (tmp_path / "ran").unlink(missing_ok=True)
    front = run_module("mnc_command", args)
    assert (tmp_path / "ran").exists() == ran  # runs exactly where the module ran it
    assert ran == (case in ("creates-missing", "removes-there"))
    assert ("invocation" in front) == ran, front  # the module itself only where it runs
    for k in ("rc", "changed", "stdout", "msg"):
        assert front.get(k) == truth.get(k), (k, front, truth)
