"""roles/artifacts/tasks/build_cache.yml (build once, ship many) run by real
ansible-playbook on the controller, with localhost as the node and a small
real build (a shell program written into the staging prefix). The OpenMPI
build through the same tasks is proven by `molecule test -s openmpi`.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from ansible_env import repo_ansible_env

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")

BUILD_TASKS = """\
---
- name: Count the builds
  ansible.builtin.shell:
    cmd: echo built >> {count}
  changed_when: true

- name: Fail on request
  ansible.builtin.fail:
    msg: the build broke
  when: artifacts_build_fingerprint.flag == 'broken'

- name: Create the staging prefix
  ansible.builtin.file:
    path: "{{{{ artifacts_build_result.destdir }}}}{{{{ artifacts_build_prefix }}}}/bin"
    state: directory
    mode: "0755"

- name: Build the program into the staging prefix
  ansible.builtin.copy:
    dest: "{{{{ artifacts_build_result.destdir }}}}{{{{ artifacts_build_prefix }}}}/bin/hello"
    content: "#!/bin/sh\\necho hello {{{{ artifacts_build_fingerprint.flag }}}}\\n"
    mode: "0755"
"""

PLAY = """\
---
- name: Build once, ship many
  hosts: all
  gather_facts: false
  tasks:
    - name: Build or install
      ansible.builtin.include_role:
        name: artifacts
        tasks_from: build_cache
      vars:
        artifacts_build_name: hello
        artifacts_build_fingerprint: {{flag: "{{{{ flag }}}}", os: test}}
        artifacts_build_prefix: "{prefix}"
        artifacts_build_tasks: "{tasks}"
        artifacts_build_work_root: "{work}"
        artifacts_build_owner: "{{{{ owner }}}}"
        artifacts_build_keep: [envs]

    - name: Report
      ansible.builtin.debug:
        msg:
          hash: "{{{{ artifacts_build_result.hash }}}}"
          built: "{{{{ artifacts_build_result.built }}}}"
          installed: "{{{{ artifacts_build_result.installed }}}}"
"""


@pytest.fixture
def bed(tmp_path):
    prefix = tmp_path / "opt" / "hello-1"
    count = tmp_path / "builds.count"
    tasks = tmp_path / "build.yml"
    tasks.write_text(BUILD_TASKS.format(count=count))
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(prefix=prefix, tasks=tasks, work=tmp_path / "work"))
    cache = tmp_path / "cache"

    def run(flag: str, owner: str = ""):
        env = repo_ansible_env(MNC_ARTIFACT_CACHE=str(cache))
        argv = [
            str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", str(play),
            "-e", f"flag={flag}", "-e", f"owner={owner}",
            "-e", f"ansible_python_interpreter={sys.executable}",
        ]  # fmt: skip
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        doc = json.loads(proc.stdout)
        stats = doc["stats"]["localhost"]
        report = None
        for task in doc["plays"][0]["tasks"]:
            if task["task"]["name"] == "Report":
                report = task["hosts"]["localhost"]["msg"]
        failures = [
            t["hosts"]["localhost"].get("msg")
            for t in doc["plays"][0]["tasks"]
            if t["hosts"].get("localhost", {}).get("failed")
        ]
        return {"stats": stats, "report": report, "failures": failures}

    def builds() -> int:
        return len(count.read_text().splitlines()) if count.exists() else 0

    def program() -> str:
        return subprocess.run([prefix / "bin" / "hello"], capture_output=True, text=True, check=True).stdout

    return {"run": run, "builds": builds, "program": program, "prefix": prefix, "cache": cache}


def test_first_run_builds_second_run_changes_nothing(bed):
    first = bed["run"]("a")
    assert first["report"]["built"] is True and first["report"]["installed"] is True
    assert bed["builds"]() == 1
    assert bed["program"]() == "hello a\n"
    marker = json.loads((bed["prefix"] / ".mncluster-build.json").read_text())
    assert marker["fingerprint"] == {"flag": "a", "os": "test"}
    assert marker["fingerprint_hash"] == first["report"]["hash"]

    second = bed["run"]("a")
    assert second["report"] == {"hash": first["report"]["hash"], "built": False, "installed": False}
    assert second["stats"]["changed"] == 0
    assert bed["builds"]() == 1


def test_changed_fingerprint_rebuilds_exactly_once(bed):
    bed["run"]("a")
    changed = bed["run"]("b")
    assert changed["report"]["built"] is True
    assert bed["program"]() == "hello b\n"
    again = bed["run"]("b")
    assert again["report"]["built"] is False and again["report"]["installed"] is False
    assert bed["builds"]() == 2
    # Back to a: the cached build is unpacked, nothing is built.
    back = bed["run"]("a")
    assert back["report"] == {"hash": bed["run"]("a")["report"]["hash"], "built": False, "installed": True}
    assert bed["builds"]() == 2
    assert bed["program"]() == "hello a\n"


def test_new_node_gets_the_cached_build_without_building(bed):
    bed["run"]("a")
    archives = list((bed["cache"] / "builds" / "hello").glob("*.tar.gz"))
    assert len(archives) == 1
    with tarfile.open(archives[0]) as tar:
        names = tar.getnames()
    assert "./.mncluster-build.json" in names and "./bin/hello" in names
    # A node that has nothing yet (the prefix removed).
    subprocess.run(["rm", "-rf", str(bed["prefix"])], check=True)
    res = bed["run"]("a")
    assert res["report"]["built"] is False and res["report"]["installed"] is True
    assert bed["builds"]() == 1
    assert bed["program"]() == "hello a\n"


def test_corrupted_cached_build_is_rebuilt_not_shipped(bed):
    bed["run"]("a")
    archive = next((bed["cache"] / "builds" / "hello").glob("*.tar.gz"))
    archive.write_bytes(b"not a tarball")
    subprocess.run(["rm", "-rf", str(bed["prefix"])], check=True)
    res = bed["run"]("a")
    assert res["report"]["built"] is True
    assert bed["builds"]() == 2
    assert bed["program"]() == "hello a\n"


def test_failed_build_leaves_the_previous_install_usable(bed):
    bed["run"]("a")
    marker_before = (bed["prefix"] / ".mncluster-build.json").read_text()
    res = bed["run"]("broken")
    assert res["stats"]["failures"] == 1
    assert "the build broke" in res["failures"]
    assert (bed["prefix"] / ".mncluster-build.json").read_text() == marker_before
    assert bed["program"]() == "hello a\n"
    assert not list((bed["cache"] / "builds" / "hello").glob("*.partial"))


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_owner_is_set_before_the_swap(bed):
    res = bed["run"]("a", owner="nobody")
    assert res["report"]["installed"] is True
    owners = {
        (pwd.getpwuid(p.stat().st_uid).pw_name, grp.getgrgid(p.stat().st_gid).gr_name)
        for p in [bed["prefix"], *bed["prefix"].rglob("*")]
    }
    assert owners == {("nobody", grp.getgrgid(pwd.getpwnam("nobody").pw_gid).gr_name)}
    assert bed["program"]() == "hello a\n"
    again = bed["run"]("a", owner="nobody")
    assert again["report"]["installed"] is False and again["stats"]["changed"] == 0


def test_a_rebuild_keeps_what_users_made_in_the_kept_directories(bed):
    bed["run"]("a")
    env = bed["prefix"] / "envs" / "mine"
    env.mkdir(parents=True)
    (env / "pyvenv.cfg").write_text("home = mine\n")
    res = bed["run"]("b")
    assert res["failures"] == [] and res["report"]["installed"] is True
    assert bed["program"]() == "hello b\n"
    assert (env / "pyvenv.cfg").read_text() == "home = mine\n"
    assert not Path(f"{bed['prefix']}.mncluster-old").exists()


def test_a_swap_killed_between_its_renames_is_finished_not_lost(bed):
    bed["run"]("a")
    (bed["prefix"] / "envs").mkdir()
    (bed["prefix"] / "envs" / "kept").write_text("x")
    # As the swap leaves it when killed after moving the prefix aside.
    old = Path(f"{bed['prefix']}.mncluster-old")
    bed["prefix"].rename(old)
    res = bed["run"]("a")
    assert res["failures"] == [] and res["report"]["installed"] is False
    assert bed["builds"]() == 1 and bed["program"]() == "hello a\n"
    assert (bed["prefix"] / "envs" / "kept").read_text() == "x" and not old.exists()
