"""roles/artifacts build_check / build_install (build once, ship many) run by real
ansible-playbook on the controller, in the order a component calls them (check, its own build
on the builder, install), with localhost as the node and a small
real build (a shell program written into the staging prefix). The OpenMPI
build through the same tasks is proven by `molecule test -s openmpi`.
"""

from __future__ import annotations

import grp
import hashlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ansible_env import run_playbook, tamper_env

ROOT = Path(__file__).resolve().parents[2]

BUILD_TASKS = """\
---
- name: Count the builds
  ansible.builtin.shell:
    cmd: echo built >> {count}
  changed_when: true

# Concurrent runs: the build starts only once every run has started, and takes
# a moment, so that without the lock the other run finds no cached build.
- name: Wait until every run of the test has started
  ansible.builtin.wait_for:
    path: "{started}"
    search_regex: "(?s)started.*started"
    timeout: 120
  when: barrier | default(false) | bool

- name: Take a moment
  ansible.builtin.command:
    cmd: sleep 2
  changed_when: false
  when: barrier | default(false) | bool

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
    - name: Say that this run has started
      ansible.builtin.shell:
        cmd: echo started >> {started}
      changed_when: false
      when: barrier | default(false) | bool

    - name: Build or install
      vars:
        artifacts_build_name: hello
        artifacts_build_fingerprint: {{flag: "{{{{ flag }}}}", os: test}}
        artifacts_build_prefix: "{prefix}"
        artifacts_build_work_root: "{work}"
        artifacts_build_owner: "{{{{ owner }}}}"
        artifacts_build_group: "{{{{ group }}}}"
        artifacts_build_keep: [envs]
        artifacts_build_install_here: "{{{{ install_here | default(true) }}}}"
      block:
        - name: Look for the build
          ansible.builtin.include_role:
            name: artifacts
            tasks_from: build_check

        - name: Build it (the caller's own task file, on the builder only)
          when: artifacts_build_result.build_here | bool
          block:
            - name: Build
              ansible.builtin.include_tasks: "{tasks}"
          rescue:
            - name: Release the build cache entry and fail with the build's error
              ansible.builtin.include_role:
                name: artifacts
                tasks_from: build_release

        - name: Store and install it
          ansible.builtin.include_role:
            name: artifacts
            tasks_from: build_install

    - name: Report
      ansible.builtin.debug:
        msg:
          hash: "{{{{ artifacts_build_result.hash }}}}"
          built: "{{{{ artifacts_build_result.built }}}}"
          installed: "{{{{ artifacts_build_result.installed }}}}"
"""


def parse(run) -> dict:
    results = run.results(host="localhost")
    report = next((r["msg"] for r in results if r["_task"] == "Report"), None)
    messages = [r["msg"] for r in results if isinstance(r.get("msg"), str)]
    failures = [r.get("msg") for r in results if r.get("failed")]
    return {"stats": run.host_stats(), "report": report, "failures": failures, "messages": messages}


@pytest.fixture
def bed(tmp_path):
    count = tmp_path / "builds.count"
    started = tmp_path / "started"
    tasks = tmp_path / "build.yml"
    tasks.write_text(BUILD_TASKS.format(count=count, started=started))
    cache = tmp_path / "cache"

    def node(name: str, base: Path | None = None) -> dict:
        """A node of its own (prefix, under ``base`` if given, and scratch) that shares the
        controller cache."""
        prefix = (base or tmp_path / name) / "opt" / "hello-1"
        play = tmp_path / f"play-{name}.yml"
        work = tmp_path / name / "work"
        play.write_text(PLAY.format(prefix=prefix, tasks=tasks, work=work, started=started))
        return {"prefix": prefix, "play": play, "work": work}

    nodes = {"node": node("node"), "other": node("other")}
    if os.geteuid() == 0:
        # A node whose prefix's parent belongs to "nobody" (pyenv: ~/.pyenv/versions),
        # outside pytest's root-only tmp_path so that nobody can reach it.
        owned = Path(tempfile.mkdtemp(prefix="mnc-owned-", dir="/var/tmp"))
        owned.chmod(0o755)
        (owned / "opt").mkdir()
        os.chown(owned / "opt", pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("nobody").pw_gid)
        nodes["owned"] = node("owned", base=owned)

    def argv(
        flag: str, owner: str = "", on: str = "node", barrier: bool = False, group: str = "",
        install_here: bool = True,
    ) -> list[str]:
        return [
            "-c", "local", "-e", f"flag={flag}", "-e", f"owner={owner}", "-e", f"group={group}",
            "-e", f"barrier={barrier}",
            "-e", f"install_here={install_here}", "-e", f"ansible_python_interpreter={sys.executable}",
        ]  # fmt: skip

    def run(flag: str, owner: str = "", on: str = "node", group: str = "", install_here: bool = True,
            **env_extra: str):
        args = argv(flag, owner, on, group=group, install_here=install_here)
        env = {"MNC_ARTIFACT_CACHE": str(cache), **env_extra}
        proc, _ = run_playbook(nodes[on]["play"], *args, inventory="localhost,", env=env, timeout=300)
        return parse(proc)

    def run_together(flag: str, on: list[str]) -> list[tuple[int, dict | None, str]]:
        """Runs started at the same moment, one per node (each under its own ansible-runner,
        in a thread): (rc, parsed result, the end of its output) each."""

        def one(n: str):
            proc, _ = run_playbook(nodes[n]["play"], *argv(flag, on=n, barrier=True), inventory="localhost,",
                                   env={"MNC_ARTIFACT_CACHE": str(cache)}, timeout=600)  # fmt: skip
            return proc.rc, parse(proc), proc.tail(5000)

        with ThreadPoolExecutor(max_workers=len(on)) as pool:
            return list(pool.map(one, on))

    def builds() -> int:
        return len(count.read_text().splitlines()) if count.exists() else 0

    def program(on: str = "node") -> str:
        exe = nodes[on]["prefix"] / "bin" / "hello"
        return subprocess.run([exe], capture_output=True, text=True, check=True).stdout

    yield {
        "run": run, "run_together": run_together, "builds": builds, "program": program,
        "prefix": nodes["node"]["prefix"], "nodes": nodes, "cache": cache, "tmp": tmp_path,
    }  # fmt: skip
    if "owned" in nodes:
        shutil.rmtree(nodes["owned"]["prefix"].parents[1])


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
    first = bed["run"]("a")
    changed = bed["run"]("b")
    assert changed["report"]["built"] is True
    assert bed["program"]() == "hello b\n"
    again = bed["run"]("b")
    assert again["report"]["built"] is False and again["report"]["installed"] is False
    assert bed["builds"]() == 2
    # Back to a: the cached build is unpacked, nothing is built.
    back = bed["run"]("a")
    assert back["report"] == {"hash": first["report"]["hash"], "built": False, "installed": True}
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


def test_a_node_that_shares_the_prefix_of_another_never_installs_it(bed):
    """A shared home's non-writer (pyenv passes mnc_home_writer): the build is cached and another
    node installs it into the prefix both see; this node neither swaps it in nor changes anything."""
    bed["run"]("a", on="other")
    assert bed["builds"]() == 1
    res = bed["run"]("a", install_here=False)
    assert res["report"]["built"] is False and res["report"]["installed"] is False, res
    assert res["stats"]["changed"] == 0
    assert not bed["prefix"].exists()
    # no node gets the build: build_check reports none (that report comes only where one does)
    assert not [m for m in res["messages"] if m.startswith("hello ")], res["messages"]


@pytest.mark.battery("tamper: a corrupted cached build archive is rebuilt, not shipped", bound_s=900)
def test_corrupted_cached_build_is_rebuilt_not_shipped(bed):
    bed["run"]("a")
    archive = next((bed["cache"] / "builds" / "hello").glob("*.tar.gz"))
    archive.write_bytes(b"not a tarball")
    subprocess.run(["rm", "-rf", str(bed["prefix"])], check=True)
    res = bed["run"]("a")
    assert res["report"]["built"] is True
    assert bed["builds"]() == 2
    assert bed["program"]() == "hello a\n"


@pytest.mark.battery("fault: a failed build leaves the previous install usable", bound_s=900)
def test_failed_build_leaves_the_previous_install_usable(bed):
    bed["run"]("a")
    marker_before = (bed["prefix"] / ".mncluster-build.json").read_text()
    res = bed["run"]("broken")
    assert res["stats"]["failures"] == 1
    assert "the build broke" in res["failures"]
    assert (bed["prefix"] / ".mncluster-build.json").read_text() == marker_before
    assert bed["program"]() == "hello a\n"
    # Neither a partial archive nor the entry's lock is left behind.
    assert not list((bed["cache"] / "builds" / "hello").glob("*.partial*"))
    assert not list((bed["cache"] / "builds" / "hello").glob("*.lock"))


@pytest.mark.skipif(os.geteuid() != 0, reason="running as another user needs root")
def test_an_owned_build_is_unpacked_and_swapped_in_as_its_owner(bed):
    prefix = bed["nodes"]["owned"]["prefix"]
    res = bed["run"]("a", owner="nobody", on="owned")
    assert res["failures"] == [] and res["report"]["installed"] is True
    owners = {
        (pwd.getpwuid(p.stat().st_uid).pw_name, grp.getgrgid(p.stat().st_gid).gr_name)
        for p in [prefix, *prefix.rglob("*")]
    }
    assert owners == {("nobody", grp.getgrgid(pwd.getpwnam("nobody").pw_gid).gr_name)}
    assert bed["program"]("owned") == "hello a\n"
    again = bed["run"]("a", owner="nobody", on="owned")
    assert again["report"]["installed"] is False and again["stats"]["changed"] == 0
    # A rebuild keeps what the owner made in the kept directories, swapped as the owner too;
    # the group given by its id, as pyenv passes the user's (getent passwd's gid).
    nobody = pwd.getpwnam("nobody")
    (prefix / "envs").mkdir()
    (prefix / "envs" / "mine").write_text("x")
    for made in (prefix / "envs", prefix / "envs" / "mine"):
        os.chown(made, nobody.pw_uid, nobody.pw_gid)
    res = bed["run"]("b", owner="nobody", on="owned", group=str(nobody.pw_gid))
    assert res["failures"] == [] and bed["program"]("owned") == "hello b\n"
    assert (prefix / "envs" / "mine").read_text() == "x"


@pytest.mark.skipif(os.geteuid() != 0, reason="running as another user needs root")
@pytest.mark.battery("link: a link the owner planted above the prefix is not followed by root", bound_s=900)
def test_a_link_the_owner_planted_for_the_prefix_parent_is_not_followed_by_root(bed, tmp_path):
    """The owner makes the prefix's parent a link to a root-owned directory: root
    (which once unpacked and chowned there) writes nothing into it."""
    prefix = bed["nodes"]["owned"]["prefix"]
    victim = prefix.parents[1] / "victim"
    victim.mkdir(mode=0o755)
    shutil.rmtree(prefix.parent)
    prefix.parent.symlink_to(victim)
    res = bed["run"]("a", owner="nobody", on="owned")
    assert res["stats"]["failures"] == 1, res
    assert list(victim.iterdir()) == []
    assert victim.stat().st_uid == 0 and victim.stat().st_mode & 0o777 == 0o755


@pytest.mark.battery("link: a build scratch that is a link is refused, named", bound_s=900)
def test_a_build_scratch_that_is_a_link_is_refused_before_anything_is_built(bed, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    work = bed["nodes"]["node"]["work"]
    work.parent.mkdir(parents=True, exist_ok=True)
    work.symlink_to(elsewhere)
    res = bed["run"]("a")
    assert res["stats"]["failures"] == 1 and bed["builds"]() == 0
    (msg,) = res["failures"]
    assert f"{work} on " in msg and "is a symbolic link" in msg, msg
    assert list(elsewhere.iterdir()) == [] and not bed["prefix"].exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
@pytest.mark.battery("scratch: a build scratch of another user is refused, named", bound_s=900)
def test_a_build_scratch_of_another_user_is_refused_before_anything_is_built(bed):
    work = bed["nodes"]["node"]["work"]
    work.mkdir(parents=True, mode=0o755)
    os.chown(work, pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("nobody").pw_gid)
    res = bed["run"]("a")
    assert res["stats"]["failures"] == 1 and bed["builds"]() == 0
    (msg,) = res["failures"]
    assert f"{work} on " in msg and "belongs to nobody" in msg, msg
    assert list(work.iterdir()) == [] and work.stat().st_uid == pwd.getpwnam("nobody").pw_uid


def test_the_build_scratch_is_created_private(bed):
    bed["run"]("a")
    work = bed["nodes"]["node"]["work"]
    assert work.is_dir() and not work.is_symlink()
    assert work.stat().st_mode & 0o777 == 0o700 and work.stat().st_uid == os.geteuid()


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


@pytest.mark.battery("fault: a swap killed between its renames is finished, nothing lost", bound_s=900)
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


def cache_entries(bed) -> list[str]:
    """What the build cache holds, temporary and lock names included (the flock guard aside)."""
    entries = (bed["cache"] / "builds" / "hello").iterdir()
    return sorted(p.name for p in entries if p.name != ".mncluster-lock")


@pytest.mark.battery("concurrency: two runs on one cache at the same moment build once", bound_s=900)
def test_two_runs_on_one_cache_at_the_same_moment_build_once(bed):
    """Two clusters (a node each) driven from one controller cache at the same moment, as make
    test's two lanes are: both pass, the build runs once, the cache holds one complete entry."""
    results = bed["run_together"]("a", on=["node", "other"])
    for rc, doc, tail in results:
        assert rc == 0, tail
        assert doc["failures"] == [] and doc["report"]["installed"] is True
    assert bed["builds"]() == 1
    assert sorted(doc["report"]["built"] for _, doc, _ in results) == [False, True]
    assert bed["program"]("node") == bed["program"]("other") == "hello a\n"
    digest = results[0][1]["report"]["hash"]
    assert cache_entries(bed) == [f"{digest}.json", f"{digest}.tar.gz"]
    record = json.loads((bed["cache"] / "builds" / "hello" / f"{digest}.json").read_text())
    archive = (bed["cache"] / "builds" / "hello" / f"{digest}.tar.gz").read_bytes()
    assert record["archive_sha256"] == hashlib.sha256(archive).hexdigest()


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("owner", ["gone", "too-old"])
@pytest.mark.battery("concurrency: a stale cache lock is broken with a message", bound_s=900)
def test_a_stale_lock_is_broken_with_a_message(bed, owner):
    digest = bed["run"]("a")["report"]["hash"]
    subprocess.run(["rm", "-rf", str(bed["cache"]), str(bed["prefix"])], check=True)
    lock = bed["cache"] / "builds" / "hello" / f"{digest}.lock"
    lock.mkdir(parents=True)
    # Another run of this controller that was killed, or one that holds it longer than any build.
    pid, since = (_dead_pid(), time.time()) if owner == "gone" else (os.getpid(), time.time() - 20000)
    (lock / "owner.json").write_text(
        json.dumps({"host": socket.gethostname(), "pid": pid, "since": since, "token": "theirs"})
    )
    res = bed["run"]("a")
    assert res["failures"] == [] and res["report"]["built"] is True
    assert bed["builds"]() == 2 and bed["program"]() == "hello a\n"
    broke = [m for m in res["messages"] if "broke the stale lock" in m]
    assert broke and str(lock) in broke[0] and f"pid {pid}" in broke[0]
    assert ("no longer running" if owner == "gone" else "older than the build timeout") in broke[0]
    assert cache_entries(bed) == [f"{digest}.json", f"{digest}.tar.gz"]


@pytest.mark.battery("tamper: a node copy of a build archive altered before unpacking refused", bound_s=900)
def test_a_node_copy_altered_before_its_unpack_is_refused(bed, tmp_path):
    digest = bed["run"]("a")["report"]["hash"]
    bed["run"]("b")
    assert bed["program"]() == "hello b\n"
    # A well-formed archive with the right marker and another program: only its sha256 tells.
    evil = tmp_path / "evil"
    evil.mkdir()
    with tarfile.open(bed["cache"] / "builds" / "hello" / f"{digest}.tar.gz") as tar:
        tar.extractall(evil, filter="data")
    (evil / "bin" / "hello").write_text("#!/bin/sh\necho hello evil\n")
    subprocess.run(["tar", "-czf", str(tmp_path / "evil.tar.gz"), "-C", str(evil), "."], check=True)
    copy = bed["nodes"]["node"]["work"] / f"hello-{digest}.tar.gz"
    res = bed["run"](
        "a",
        **tamper_env(
            tmp_path / "callback_plugins", "Copy the packed build to the node", copy, tmp_path / "evil.tar.gz"
        ),
    )
    assert res["stats"]["failures"] == 1
    (msg,) = res["failures"]
    assert str(copy) in msg and "records" in msg and "Nothing was unpacked" in msg
    assert bed["program"]() == "hello b\n"
    assert not copy.exists()
