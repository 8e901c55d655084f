"""roles/openmpi/files/find-mpi-conflicts.sh run as root, as the openmpi role runs it: the
Pythons it asks about mpi4py (the virtualenv's is the MPI user's program) never run as root.
Issue 38, item 3: with MNC_PYTHON_USER empty or root, the script ran them, and ldd, as root."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "roles" / "openmpi" / "files" / "find-mpi-conflicts.sh"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the case is root running the scan (CI: root)")


@pytest.fixture
def tmp_path():
    """A directory every user can reach (pytest's own is root's 0700)."""
    d = Path(tempfile.mkdtemp(prefix="mnc-scan-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d)


def _planted_python(tmp_path: Path) -> tuple[Path, Path]:
    """A 'python' of another user's (a stand-in for a virtualenv's, with a sitecustomize.py in
    it): whatever runs it leaves a mark naming the uid it ran as."""
    marks = tmp_path / "marks"
    marks.mkdir(mode=0o1777)
    marks.chmod(0o1777)
    py = tmp_path / "python"
    py.write_text(f"#!/bin/sh\ntouch {marks}/ran-as-uid-$(id -u)\necho\n")
    py.chmod(0o755)
    return py, marks


@pytest.mark.battery("root scan: the MPI conflict scan with no Python user (or root) runs no Python as root")
@pytest.mark.parametrize("user", ["", "root"])
def test_the_scan_runs_no_python_as_root(tmp_path, user):
    py, marks = _planted_python(tmp_path)
    env = {**os.environ, "MNC_PYTHON_USER": user}
    proc = subprocess.run(["bash", str(SCRIPT), "/nonexistent-prefix", str(py)], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    ran = sorted(p.name for p in marks.iterdir())
    assert ran and "ran-as-uid-0" not in ran, ran  # it ran, as nobody


def test_the_scan_runs_the_python_as_the_given_user(tmp_path):
    py, marks = _planted_python(tmp_path)
    env = {**os.environ, "MNC_PYTHON_USER": "nobody"}
    subprocess.run(["bash", str(SCRIPT), "/nonexistent-prefix", str(py)], env=env,
                   capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    nobody = int(subprocess.run(["id", "-u", "nobody"], capture_output=True, text=True, check=True).stdout)
    assert [p.name for p in marks.iterdir()] == [f"ran-as-uid-{nobody}"]
