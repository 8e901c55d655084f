"""A role's look and mncluster.core.mnc_files_pending decide as mnc_write_files does.

A role runs its mnc_write_files task only where the look (mnc_files_look's lines, run by bash
on the node) and mnc_files_pending say a path differs. If they said "the same" where the module
would change something, a converged node would keep a wrong file: so each case here sets up real
files, runs the real look with bash, and compares its verdict with the module's own, run by real
Ansible in check mode on the same files.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from ansible_collections.mncluster.core.plugins.filter.mnc import FilterModule
from ansible_env import run_module

FILTERS = FilterModule().filters()
LOOK, PENDING = FILTERS["mnc_files_look"], FILTERS["mnc_files_pending"]


def _look(files, dirs):
    script = LOOK(files, dirs)
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def _setup(tmp_path, case):
    conf, prog, state = tmp_path / "etc/a.conf", tmp_path / "lib/prog", tmp_path / "state"
    files = [
        {"dest": str(conf), "content": "key = välue\n"},
        {"dest": str(prog), "content": "#!/bin/sh\necho hi\n", "mode": "0755"},
    ]
    dirs = [{"path": str(state), "mode": "0700"}]
    conf.parent.mkdir()
    prog.parent.mkdir()
    state.mkdir()
    conf.write_text("key = välue\n", encoding="utf-8")
    conf.chmod(0o644)
    prog.write_text("#!/bin/sh\necho hi\n")
    prog.chmod(0o755)
    state.chmod(0o700)
    if case == "content":
        conf.write_text("key = other\n")
    elif case == "mode":
        prog.chmod(0o644)
    elif case == "setuid":
        prog.chmod(0o4755)
    elif case == "link":
        target = tmp_path / "target"
        target.write_text("key = välue\n", encoding="utf-8")
        conf.unlink()
        conf.symlink_to(target)
    elif case == "missing":
        prog.unlink()
    elif case == "dir-mode":
        state.chmod(0o755)
    elif case == "dir-missing":
        state.rmdir()
    return files, dirs


CASES = {
    "same": [],
    "content": ["etc/a.conf"],
    "mode": ["lib/prog"],
    "setuid": ["lib/prog"],
    "link": ["etc/a.conf"],
    "missing": ["lib/prog"],
    "dir-mode": ["state"],
    "dir-missing": ["state"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_look_finds_what_the_module_would_change(tmp_path, case):
    files, dirs = _setup(tmp_path, case)
    lines = _look(files, dirs)
    found = sorted(os.path.relpath(p, tmp_path) for p in PENDING(files, lines, dirs))
    module = run_module("mncluster.core.mnc_write_files", {"files": files, "dirs": dirs}, "--check")
    assert "changed_files" in module, module
    assert found == sorted(os.path.relpath(p, tmp_path) for p in module["changed_files"]) == CASES[case]


def test_a_directory_owned_by_another_user_differs(tmp_path):
    files, dirs = _setup(tmp_path, "same")
    lines = _look(files, dirs)
    me = f":{os.geteuid()}:{os.getegid()}"
    other = [line.replace(me, ":12345:12345") if line.startswith("dir:") else line for line in lines]
    assert PENDING(files, other, dirs) == [dirs[0]["path"]]


def test_without_a_look_every_path_differs(tmp_path):
    files, dirs = _setup(tmp_path, "same")
    assert PENDING(files, [], dirs) == [f["dest"] for f in files] + [dirs[0]["path"]]
    # a path the look did not print (a look that lists fewer paths) differs too
    lines = _look(files[:1], dirs)
    assert PENDING(files, lines, dirs) == [files[1]["dest"]]


def test_the_look_quotes_its_paths(tmp_path):
    odd = tmp_path / "a b$(touch pwned)'c"
    odd.write_text("x\n")
    odd.chmod(0o644)
    files = [{"dest": str(odd), "content": "x\n"}]
    assert PENDING(files, _look(files, []), []) == []
    assert not (tmp_path / "pwned").exists() and not os.path.exists("pwned")
