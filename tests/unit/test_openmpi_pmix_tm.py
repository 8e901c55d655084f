"""roles/openmpi's external PMIx (openmpi_pmix: external) and PBS TM (openmpi_with_tm) options,
decided on the controller.

The real tasks/inputs.yml runs with ansible-playbook on localhost (the builder of a one-host
play), case by case: the configure flags, the build fingerprint and the build-cache hash
artifacts derives from it, and the refusals, before anything is built. The distribution's PMIx
and a PBS installation are stand-in directories (include/pmix_version.h as Debian's libpmix-dev
writes it, include/tm.h): inputs.yml reads the one and checks that the other is there. Neither
option is on by default, and the default flags and fingerprint are the ones the build cache
holds builds for, so a cluster's cached OpenMPI is not rebuilt by these options' existence. A real
build against them is not part of this test (roles/openmpi/README.md, "PMIx and PBS").
"""

from __future__ import annotations

import pytest
from ansible_env import openmpi_inputs_case_tasks, run_cases

# Every fact a case may change, at its default: the cases run one after the other in one play
# (set as facts, which outrank the role's defaults), so each sets them all.
BASE = {
    "stack_openmpi_version": "5.0.7",
    "openmpi_with_cuda": False,
    "openmpi_cuda_version": "",
    "openmpi_with_ucx": False,
    "openmpi_ucx_build": False,
    "openmpi_pmix": "internal",
    "openmpi_with_tm": "",
    "mnc_artifact_overrides": {},
}
CASE_TASKS = openmpi_inputs_case_tasks('openmpi_pmix_dir: "{{ case_pmix_dir }}"')

# Debian 12's libpmix-dev 4.2.2 writes its version so (and Ubuntu 24.04's 5.0.1 the same way).
PMIX_HEADER = """\
#ifndef PMIx_VERSION_H
#define PMIx_VERSION_H
#define PMIX_VERSION_MAJOR {}L
#define PMIX_VERSION_MINOR {}L
#define PMIX_VERSION_RELEASE {}L
#define PMIX_NUMERIC_VERSION 0x00040202
#endif
"""

# The flags the build cache's default OpenMPI (CPU mode) was configured with, in order: any
# change here is a new fingerprint, a rebuild of every cluster's OpenMPI.
DEFAULT_FLAGS = [
    "--prefix=/opt/openmpi/5.0.7",
    "--with-libevent=external",
    "--with-hwloc=external",
    "--with-pmix=internal",
    "--enable-mpi-fortran=no",
    "--disable-oshmem",
    "--disable-io-romio",
    "--disable-static",
    "--enable-shared",
    "--without-cuda",
    "--with-prrte=internal",
    "--without-ucx",
]
OLD_KEYS = {"version", "source_sha256", "configure_flags", "cuda_version", "os"}
REFUSED = {
    "pmix-4.2.2-for-5.0.7", "pmix-missing", "pmix-no-version", "tm-missing", "tm-relative", "pmix-bogus",
}  # fmt: skip


def _case(name, pmix_dir="pmix-4.2.2", **knobs):
    return {"name": name, "pmix_dir": pmix_dir, "vars": {**BASE, **knobs}}


CASES = [
    _case("default"),
    _case("pmix-5.0.1", "pmix-5.0.1", openmpi_pmix="external"),
    _case("pmix-5.0.2", "pmix-5.0.2", openmpi_pmix="external"),
    _case("tm", openmpi_with_tm="PBS"),
    _case("pmix-and-tm", "pmix-5.0.1", openmpi_pmix="external", openmpi_with_tm="PBS"),
    # 4.1.x has no minimum in the matrix: Debian's own openmpi 4.1.4 is built against its 4.2.2.
    _case("4.1.4-pmix-4.2.2", openmpi_pmix="external", stack_openmpi_version="4.1.4"),
    # refused
    _case("pmix-4.2.2-for-5.0.7", openmpi_pmix="external"),
    _case("pmix-missing", "absent", openmpi_pmix="external"),
    _case("pmix-no-version", "pmix-empty", openmpi_pmix="external"),
    _case("tm-missing", openmpi_with_tm="/nonexistent/pbs"),
    _case("tm-relative", openmpi_with_tm="opt/pbs"),
    _case("pmix-bogus", openmpi_pmix="bundled"),
]


@pytest.fixture(scope="module")
def decided(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pmix")
    for name, version in (("pmix-4.2.2", (4, 2, 2)), ("pmix-5.0.1", (5, 0, 1)), ("pmix-5.0.2", (5, 0, 2))):
        (tmp / name / "include").mkdir(parents=True)
        (tmp / name / "include" / "pmix_version.h").write_text(PMIX_HEADER.format(*version))
    (tmp / "pmix-empty" / "include").mkdir(parents=True)
    (tmp / "pmix-empty" / "include" / "pmix_version.h").write_text("/* no version */\n")
    pbs = tmp / "pbs"
    (pbs / "include").mkdir(parents=True)
    (pbs / "include" / "tm.h").write_text("/* stand-in */\n")
    cases = []
    for c in CASES:
        knobs = dict(c["vars"], case_pmix_dir=str(tmp / c["pmix_dir"]))
        if knobs["openmpi_with_tm"] == "PBS":
            knobs["openmpi_with_tm"] = str(pbs)
        cases.append({"name": c["name"], "vars": knobs})
    results = run_cases(tmp, "Settle OpenMPI's PMIx and PBS inputs, case by case", CASE_TASKS, cases)
    for name, got in results.items():
        assert ("failed" in got) == (name in REFUSED), (name, got)
    return results, tmp


def test_the_default_flags_and_fingerprint_are_the_cached_builds(decided):
    got = decided[0]["default"]
    assert got["flags"] == DEFAULT_FLAGS
    assert set(got["fingerprint"]) == OLD_KEYS


def test_an_external_pmix_is_configured_by_directory_and_fingerprinted_by_version(decided):
    results, tmp = decided
    got = results["pmix-5.0.1"]
    assert f"--with-pmix={tmp / 'pmix-5.0.1'}" in got["flags"]
    assert "--with-pmix=internal" not in got["flags"]
    # the rest of the flags as in the default build
    assert [f for f in got["flags"] if not f.startswith("--with-pmix=")] == [
        f for f in DEFAULT_FLAGS if f != "--with-pmix=internal"
    ]
    assert got["fingerprint"]["pmix"] == "5.0.1"
    assert set(got["fingerprint"]) == OLD_KEYS | {"pmix"}
    # another PMIx release in the same directory (a distribution update): another build
    other = results["pmix-5.0.2"]
    assert other["flags"] == [f.replace("pmix-5.0.1", "pmix-5.0.2") for f in got["flags"]]
    assert other["fingerprint"]["pmix"] == "5.0.2"
    assert len({got["hash"], other["hash"], results["default"]["hash"]}) == 3


def test_tm_adds_one_flag_and_a_new_build(decided):
    results, tmp = decided
    got = results["tm"]
    assert got["flags"] == [*DEFAULT_FLAGS, f"--with-tm={tmp / 'pbs'}"]
    assert set(got["fingerprint"]) == OLD_KEYS
    assert got["hash"] != results["default"]["hash"]
    both = results["pmix-and-tm"]
    assert f"--with-tm={tmp / 'pbs'}" in both["flags"]
    assert f"--with-pmix={tmp / 'pmix-5.0.1'}" in both["flags"]
    assert both["hash"] not in {results["tm"]["hash"], results["pmix-5.0.1"]["hash"]}


def test_a_release_without_a_minimum_takes_the_distributions_pmix(decided):
    results, tmp = decided
    got = results["4.1.4-pmix-4.2.2"]
    assert got["fingerprint"]["version"] == "4.1.4" and got["fingerprint"]["pmix"] == "4.2.2"
    assert f"--with-pmix={tmp / 'pmix-4.2.2'}" in got["flags"]
    assert not any(f.startswith("--with-prrte") for f in got["flags"])


def test_debian_12s_pmix_is_refused_for_5_0_7_naming_both_versions(decided):
    msg = decided[0]["pmix-4.2.2-for-5.0.7"]["failed"]
    assert "is 4.2.2" in msg and "OpenMPI 5.0.7 needs 4.2.4 or later" in msg, msg
    assert "openmpi_pmix: internal" in msg and "Nothing was built" in msg, msg


def test_a_missing_pmix_dev_package_is_refused_naming_it(decided):
    results, tmp = decided
    msg = results["pmix-missing"]["failed"]
    assert f"{tmp / 'absent'}/include/pmix_version.h is missing on the builder localhost" in msg, msg
    assert "apt-get install libpmix-dev" in msg and "Nothing was built" in msg, msg
    msg = results["pmix-no-version"]["failed"]
    assert "of no version (PMIX_VERSION_MAJOR/MINOR/RELEASE missing)" in msg, msg


def test_tm_without_pbs_headers_is_refused(decided):
    results, _ = decided
    msg = results["tm-missing"]["failed"]
    assert "no /nonexistent/pbs/include/tm.h on the builder localhost" in msg, msg
    assert "Nothing was built" in msg, msg
    assert "there is no opt/pbs/include/tm.h" in results["tm-relative"]["failed"]


def test_an_unknown_pmix_choice_is_refused(decided):
    msg = decided[0]["pmix-bogus"]["failed"]
    assert "openmpi_pmix (bundled) internal or external" in msg, msg
