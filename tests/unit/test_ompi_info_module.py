"""mncluster.core.openmpi_facts run by real Ansible against a real ompi_info.

The controller has Debian's ompi_info (openmpi-bin); tests that need it skip
where it is missing. Error paths use real programs that fail.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import ansible_env
import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_module(args: str, check: bool = False) -> dict:
    # The controller's own interpreter (ansible_env's): discovery may find a broken shim first.
    return ansible_env.run_module("mncluster.core.openmpi_facts", args, *(["--check"] if check else []))


needs_ompi_info = pytest.mark.skipif(shutil.which("ompi_info") is None, reason="no ompi_info on this host")


@needs_ompi_info
def test_facts_of_the_installed_openmpi():
    res = run_module("ompi_info=ompi_info")
    assert not res.get("failed"), res
    assert res["changed"] is False
    facts = res["ansible_facts"]["openmpi"]
    # Cross-check against the human-readable first line of `ompi_info --version`.
    version_line = subprocess.run(["ompi_info", "--version"], capture_output=True, text=True).stdout
    assert f"v{facts['version']}" in version_line
    assert isinstance(facts["cuda_support"]["built_with"], bool)
    assert "tcp" in facts["transports"]["btl"]
    assert facts["configure_args"], "configure command line missing"


@needs_ompi_info
def test_a_prefix_gives_the_same_facts_as_the_program_on_path():
    prefix = Path(shutil.which("ompi_info")).resolve().parent.parent
    by_prefix = run_module(f"prefix={prefix}")
    by_name = run_module("ompi_info=ompi_info")
    assert not by_prefix.get("failed"), by_prefix
    assert by_prefix["ansible_facts"] == by_name["ansible_facts"]


@needs_ompi_info
def test_check_mode_still_reports():
    res = run_module("ompi_info=ompi_info", check=True)
    assert not res.get("failed"), res
    assert res["ansible_facts"]["openmpi"]["version"]


def test_prefix_without_openmpi_fails_clearly(tmp_path):
    res = run_module(f"prefix={tmp_path}")
    assert res["failed"] is True
    assert f"no ompi_info in {tmp_path}/bin" in res["msg"]


def test_failing_ompi_info_returns_rc_and_output(tmp_path):
    fake = tmp_path / "bin" / "ompi_info"
    fake.parent.mkdir()
    # What a build linked against a missing libevent prints.
    fake.write_text(
        "#!/bin/sh\necho 'ompi_info: error while loading shared libraries: "
        "libevent_core-2.1.so.7: cannot open shared object file' >&2\nexit 127\n"
    )
    fake.chmod(0o755)
    res = run_module(f"prefix={tmp_path}")
    assert res["failed"] is True
    assert res["rc"] == 127
    assert "libevent_core-2.1.so.7" in res["stderr"]
    assert res["cmd"] == [str(fake), "--parsable", "--all"]


def test_unparsable_output_fails_with_the_raw_text(tmp_path):
    fake = tmp_path / "ompi_info"
    fake.write_text("#!/bin/sh\necho 'Package: Open MPI'\necho 'Open MPI: 5.0.7'\n")
    fake.chmod(0o755)
    res = run_module(f"ompi_info={fake}")
    assert res["failed"] is True
    assert "cannot parse" in res["msg"]
    assert "Open MPI: 5.0.7" in res["stdout"]


def test_prefix_and_ompi_info_are_exclusive(tmp_path):
    res = run_module(f"prefix={tmp_path} ompi_info=ompi_info")
    assert res["failed"] is True
    assert "mutually exclusive" in res["msg"]
