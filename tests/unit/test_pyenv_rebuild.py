"""roles/pyenv/tasks/build-python.yml's own scripts, run on a stand-in PYENV_ROOT: a CPython
rebuild on the builder node keeps the virtualenvs under the old build's envs/ (a user's own
among them), and a build interrupted by Ctrl-C followed by a re-run keeps the previous Python.
Issue 38, item 5: the old build, envs/ included, was moved aside and deleted after the build,
and a re-run deleted the `<v>.mncluster-previous` that an interrupted run left."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "roles" / "pyenv" / "tasks" / "build-python.yml"
MOVE = "Move an installed CPython of another build aside"
MERGE = "Move the previous build's virtualenvs into the new one and remove the rest of it"
BACK = "Put the previous build back"


def _script(name: str) -> str:
    block = next(t for t in yaml.safe_load(TASKS.read_text()) if "block" in t)
    task = next(t for t in block["block"] + block["rescue"] if t["name"] == name)
    return task["ansible.builtin.shell"]["cmd"]


def _run(name: str, live: Path) -> str:
    proc = subprocess.run(["bash", "-c", _script(name)], env={"LIVE": str(live), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
    return proc.stdout.strip()


def _build(live: Path, tag: str) -> None:
    """What `pyenv install` leaves: a prefix with bin/python."""
    (live / "bin").mkdir(parents=True)
    (live / "bin" / "python").write_text(f"{tag}\n")


@pytest.fixture
def live(tmp_path):
    live = tmp_path / "versions" / "3.11.9"
    _build(live, "old")
    (live / "envs" / "mncluster").mkdir(parents=True)
    (live / "envs" / "mine").mkdir()
    (live / "envs" / "mine" / "my-work.txt").write_text("a user's environment\n")
    return live


def test_a_rebuild_keeps_the_virtualenvs_of_the_old_build(live):
    assert _run(MOVE, live) == "moved"
    _build(live, "new")
    _run(MERGE, live)
    assert (live / "bin" / "python").read_text() == "new\n"
    assert (live / "envs" / "mine" / "my-work.txt").read_text() == "a user's environment\n"
    assert (live / "envs" / "mncluster").is_dir()
    assert not Path(f"{live}.mncluster-previous").exists()


@pytest.mark.battery("interrupted build: a re-run after a Ctrl-C keeps the previous Python and its envs")
def test_a_re_run_after_an_interrupted_build_keeps_the_previous_python(live):
    assert _run(MOVE, live) == "moved"
    _build(live, "partial")  # Ctrl-C here: the run stops, the previous build is aside
    # The re-run: the partial build goes, the previous one stays aside until the new one is in.
    assert _run(MOVE, live) == "kept"
    assert (Path(f"{live}.mncluster-previous") / "bin" / "python").read_text() == "old\n"
    assert not live.exists()
    _build(live, "new")
    _run(MERGE, live)
    assert (live / "envs" / "mine" / "my-work.txt").exists()


def test_a_failed_build_puts_the_previous_one_back(live):
    _run(MOVE, live)
    _build(live, "broken")
    _run(BACK, live)
    assert (live / "bin" / "python").read_text() == "old\n"
    assert (live / "envs" / "mine" / "my-work.txt").exists()
