"""roles/openmpi's plan for UCX built from source (openmpi_ucx_build), decided on the controller.

The real tasks/inputs.yml runs with ansible-playbook on localhost, case by case: the configure
flags of UCX and of OpenMPI, both build fingerprints and the build-cache hash artifacts derives
from OpenMPI's, and the refusals, before anything is fetched or built. The CUDA toolkit is a
stand-in directory (include/cuda.h, lib64/stubs/libcuda.so): inputs.yml only checks that they are
there. The default path (no UCX build) keeps the fingerprint it had, so a cluster's cached OpenMPI
is not rebuilt by this option's existence. A real UCX build is not part of this test (README:
"UCX from source").
"""

from __future__ import annotations

import pytest
from ansible_env import openmpi_inputs_case_tasks, run_cases

# Every fact a case may change, at its default: the cases run one after the other in one play
# (set as facts, which outrank the role's defaults), so each sets them all.
BASE = {
    "openmpi_with_cuda": False,
    "openmpi_cuda_version": "",
    "openmpi_with_ucx": False,
    "openmpi_ucx_build": False,
    "rdma_mode": "none",
    "stack_ucx_version": "1.18.1",
    "mnc_artifact_overrides": {},
}
DEBIAN_ORIG_SHA = "1a88e09ca1b406c046a469c2ae271d2c330050b5664c0bcd9890e26c6ef09f3c"
CASE_TASKS = openmpi_inputs_case_tasks(
    'openmpi_cuda_home: "{{ case_toolkit }}"',
    """,
              'ucx_flags': __openmpi_ucx_configure_flags if openmpi_ucx_build | bool else none,
              'ucx_fingerprint': __openmpi_ucx_fingerprint if openmpi_ucx_build | bool else none,
              'ucx_prefix': __openmpi_ucx_prefix if openmpi_ucx_build | bool else none""",
)


def _case(name, **knobs):
    return {"name": name, "vars": {**BASE, **knobs}}


GPU = {"openmpi_with_cuda": True, "openmpi_cuda_version": "12.6"}
BUILD = {"openmpi_with_ucx": True, "openmpi_ucx_build": True}
CASES = [
    _case("default"),
    _case("distro-ucx", openmpi_with_ucx=True),
    _case("cpu", **BUILD),
    _case("cpu-1.13", **BUILD, stack_ucx_version="1.13.1"),
    _case("gpu", **BUILD, **GPU),
    _case("gpu-cuda12.4", **BUILD, openmpi_with_cuda=True, openmpi_cuda_version="12.4"),
    _case("gpu-ib", **BUILD, **GPU, rdma_mode="infiniband"),
    _case(
        "debian-orig",
        **BUILD,
        stack_ucx_version="1.13.1",
        mnc_artifact_overrides={
            "ucx": {
                "path": "/srv/src/ucx_1.13.1.orig.tar.xz",
                "filename": "ucx_1.13.1.orig.tar.xz",
                "sha256": DEBIAN_ORIG_SHA,
            }
        },
    ),
    # refused
    # refused (last: their knobs stay set as facts for the cases after them; the version check
    # comes before the prefix check)
    _case("build-without-ucx", openmpi_ucx_build=True),
    _case("prefix-inside-openmpi", **BUILD, openmpi_ucx_prefix="/opt/openmpi/5.0.7/ucx"),
    _case("version-not-the-record", **BUILD, openmpi_ucx_version="1.18.0"),
]
OLD_KEYS = {"version", "source_sha256", "configure_flags", "cuda_version", "os"}


@pytest.fixture(scope="module")
def decided(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ucx")
    toolkit = tmp / "cuda"
    (toolkit / "include").mkdir(parents=True)
    (toolkit / "include" / "cuda.h").write_text("/* stand-in */\n")
    (toolkit / "lib64" / "stubs").mkdir(parents=True)
    (toolkit / "lib64" / "stubs" / "libcuda.so").write_text("")
    cases = [dict(c, vars=dict(c["vars"], case_toolkit=str(toolkit))) for c in CASES]
    results = run_cases(tmp, "Settle OpenMPI's and UCX's build inputs, case by case", CASE_TASKS, cases)
    for name, got in results.items():
        if name not in ("build-without-ucx", "version-not-the-record", "prefix-inside-openmpi"):
            assert "failed" not in got, (name, got)
    return results, str(toolkit)


def test_the_default_path_keeps_its_fingerprint(decided):
    results, _ = decided
    default = results["default"]
    assert "--without-ucx" in default["flags"]
    assert not any(f.startswith("--with-ucx") for f in default["flags"])
    # the keys it had before UCX could be built: the same inputs hash as before
    assert set(default["fingerprint"]) == OLD_KEYS
    distro = results["distro-ucx"]
    assert "--with-ucx" in distro["flags"] and set(distro["fingerprint"]) == OLD_KEYS
    assert distro["hash"] != default["hash"]


def test_cpu_build_flags_and_prefix(decided):
    got = decided[0]["cpu"]
    assert got["ucx_prefix"] == "/opt/ucx/1.18.1"
    assert got["ucx_flags"][0] == "--prefix=/opt/ucx/1.18.1"
    for flag in ("--without-cuda", "--without-verbs", "--without-rdmacm", "--enable-mt", "--disable-static"):
        assert flag in got["ucx_flags"], flag
    assert "--with-ucx=/opt/ucx/1.18.1" in got["flags"]
    assert "--with-ucx" not in got["flags"] and "--without-ucx" not in got["flags"]
    assert got["fingerprint"]["ucx"] == got["ucx_fingerprint"]
    assert got["ucx_fingerprint"]["version"] == "1.18.1"
    assert got["ucx_fingerprint"]["cuda_version"] == "none"


def test_gpu_mode_builds_ucx_with_cuda(decided):
    results, toolkit = decided
    got = results["gpu"]
    assert got["ucx_prefix"] == "/opt/ucx/1.18.1-cuda12.6"
    assert f"--with-cuda={toolkit}" in got["ucx_flags"]
    assert "--without-cuda" not in got["ucx_flags"]
    assert "--with-ucx=/opt/ucx/1.18.1-cuda12.6" in got["flags"]
    assert f"--with-cuda={toolkit}" in got["flags"]
    assert got["ucx_fingerprint"]["cuda_version"] == "12.6"


def test_an_rdma_path_builds_verbs_and_rdmacm(decided):
    got = decided[0]["gpu-ib"]
    assert "--with-verbs" in got["ucx_flags"] and "--with-rdmacm" in got["ucx_flags"]
    assert "--without-verbs" not in got["ucx_flags"]
    assert got["hash"] != decided[0]["gpu"]["hash"]


def test_openmpi_is_rebuilt_when_ucx_changes(decided):
    results, _ = decided
    names = ("cpu", "cpu-1.13", "gpu", "gpu-cuda12.4", "debian-orig")
    hashes = {name: results[name]["hash"] for name in names}
    # a new UCX release, another CUDA, other bytes: each a different OpenMPI build
    assert len(set(hashes.values())) == len(hashes), hashes
    assert results["cpu-1.13"]["ucx_fingerprint"]["version"] == "1.13.1"
    old, new = results["cpu"]["fingerprint"]["ucx"], results["cpu-1.13"]["fingerprint"]["ucx"]
    assert new["source_sha256"] != old["source_sha256"]
    assert results["gpu-cuda12.4"]["ucx_fingerprint"]["cuda_version"] == "12.4"
    # the OpenMPI part alone is the same for the two UCX releases: only UCX moved it
    a = {k: v for k, v in results["cpu"]["fingerprint"].items() if k not in ("ucx", "configure_flags")}
    b = {k: v for k, v in results["cpu-1.13"]["fingerprint"].items() if k not in ("ucx", "configure_flags")}
    assert a == b


def test_the_override_is_the_bytes_built(decided):
    got = decided[0]["debian-orig"]
    assert got["ucx_fingerprint"]["source_sha256"] == DEBIAN_ORIG_SHA
    assert got["ucx_fingerprint"]["version"] == "1.13.1"


def test_a_ucx_build_without_the_ucx_transport_is_refused(decided):
    msg = decided[0]["build-without-ucx"]["failed"]
    assert "openmpi_ucx_build is true but openmpi_with_ucx is false" in msg and "Nothing was built" in msg


def test_a_release_that_is_not_the_record_is_refused(decided):
    msg = decided[0]["version-not-the-record"]["failed"]
    assert "openmpi_ucx_version 1.18.0 must be a release listed in stack_ucx_releases" in msg


def test_a_prefix_inside_openmpis_is_refused(decided):
    msg = decided[0]["prefix-inside-openmpi"]["failed"]
    assert "UCX prefix (/opt/openmpi/5.0.7/ucx) must be a directory of its own" in msg
