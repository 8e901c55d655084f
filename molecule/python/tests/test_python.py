"""State the `pyenv` and `chainer` roles leave on a node, checked from outside with testinfra.

The same checks for both Python providers: the pyenv path (MNC_PYENV_MIRROR
set: CPython built by pyenv from the local mirror) and the documented
fallback (Debian's python3.11 + venv), which this module names in its
output when it is the one under test.
"""

import hashlib
import json
import os
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
from ansible_env import podman_hosts, repo_ansible_env, run_playbook
from playbook_runner import run_module

# One `podman exec` per check (tests/unit/ansible_env.py).
testinfra_hosts = podman_hosts("all")

USER = "mpiuser"
HOME = f"/home/{USER}"
PYENV = bool(os.environ.get("MNC_PYENV_MIRROR"))
PROVIDER = "pyenv" if PYENV else "system"
FACT = "/etc/ansible/facts.d/mncluster_python.fact"


def test_python_provider_under_test():
    # Said plainly in the test report: which path these checks cover.
    print(
        "testing the pyenv path (MNC_PYENV_MIRROR)"
        if PYENV
        else "FALLBACK under test: pyenv sources are not reachable here (MNC_PYENV_MIRROR unset); "
        "checking mnc_python_provider=system (Debian's python3.11 + venv)"
    )


@pytest.fixture(scope="module")
def facts(host):
    return json.loads(host.file(FACT).content_string)


@pytest.fixture(scope="module")
def ssh(host):
    """The MPI user can ssh to this node with a key, as mpiexec does between nodes."""
    script = (
        f"test -f {HOME}/.ssh/id_ed25519 || ssh-keygen -q -t ed25519 -N '' -f {HOME}/.ssh/id_ed25519; "
        f"grep -qf {HOME}/.ssh/id_ed25519.pub {HOME}/.ssh/authorized_keys 2>/dev/null "
        f"|| cat {HOME}/.ssh/id_ed25519.pub >> {HOME}/.ssh/authorized_keys; "
        f"chmod 600 {HOME}/.ssh/authorized_keys; "
        f"ssh-keyscan -t ed25519 localhost > {HOME}/.ssh/known_hosts 2>/dev/null"
    )
    assert host.run("systemctl start ssh").rc == 0
    host.run(f"install -d -m 700 -o {USER} -g {USER} {HOME}/.ssh")
    res = host.run(f"runuser -u {USER} -- bash -c {shlex.quote(script)}")
    assert res.rc == 0, res.stderr

    def run(command):
        # BatchMode: no prompt can hang the test; sshd runs `command` in a
        # non-interactive bash, which reads ~/.bashrc only (up to its guard).
        return host.run(f"runuser -u {USER} -- ssh -o BatchMode=yes localhost {shlex.quote(command)}")

    return run


def test_version_fact_recorded(facts):
    assert facts["provider"] == PROVIDER
    assert facts["numpy"] == "1.26.4"
    assert facts["chainer"] == "7.8.1"
    assert facts["mpi4py"] == "4.1.1"
    assert facts["python_version"].startswith("3.11.")
    assert facts["cupy"] is None  # CPU mode: CuPy is not installed
    assert facts["mpi_library_version"].startswith("Open MPI v")


def test_bashrc_block_is_above_the_interactive_guard(host):
    bashrc = host.file(f"{HOME}/.bashrc").content_string
    block = bashrc.index("# BEGIN mncluster python")
    guard = bashrc.index("If not running interactively")
    assert block < guard


def test_noninteractive_ssh_shell_finds_the_virtualenv(host, ssh, facts):
    res = ssh("which python; python -c 'import sys; print(sys.version.split()[0])'")
    assert res.rc == 0, res.stderr
    which, version = res.stdout.split()
    if PYENV:
        # pyenv's shim, resolved by `pyenv global` to the virtualenv
        assert which == f"{HOME}/.pyenv/shims/python"
        assert facts["python"] == f"{HOME}/.pyenv/versions/{version}/envs/mncluster/bin/python"
    else:
        assert which == f"{HOME}/.venvs/mncluster/bin/python"
    assert version == facts["python_version"]


def test_stack_imports_in_a_noninteractive_ssh_shell(ssh):
    res = ssh(
        "python -c 'import chainer, chainermn, mpi4py, numpy; "
        'print(chainer.__version__, mpi4py.__version__, numpy.__version__)\''
    )
    assert res.rc == 0, res.stderr
    assert res.stdout.split() == ["7.8.1", "4.1.1", "1.26.4"]


def test_pyenv_built_this_python(host, facts):
    if not PYENV:
        pytest.skip("fallback under test: the Python is Debian's python3.11, not built by pyenv")
    version = facts["python_version"]
    assert host.file(f"{HOME}/.pyenv/version").content_string.strip() == "mncluster"
    python = f"{HOME}/.pyenv/versions/{version}/bin/python"
    built = host.run(f"runuser -u {USER} -- {python} -c 'import sys; print(sys.prefix)'")
    assert built.stdout.strip() == f"{HOME}/.pyenv/versions/{version}"
    # python-build used the staged tarball (nothing was downloaded): the installed tree's build
    # marker names the staged source's sha256, whether this node built it or unpacked the
    # cluster's cached build of it (then pyenv's cache here never held the tarball).
    mirror = Path(os.environ["MNC_PYENV_MIRROR"])
    staged = [p for p in mirror.iterdir() if version in p.name and not p.name.startswith("pyenv")]
    assert len(staged) == 1, staged
    marker = json.loads(host.file(f"{HOME}/.pyenv/versions/{version}/.mncluster-build.json").content_string)
    assert marker["fingerprint"]["version"] == version
    assert marker["fingerprint"]["source_sha256"] == hashlib.sha256(staged[0].read_bytes()).hexdigest()


def test_mpi4py_uses_our_openmpi(host, ssh, facts):
    prefix = facts["openmpi_prefix"]
    assert host.file(f"{prefix}/bin/mpicc").exists
    res = ssh(
        "python -c 'import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; "
        "print(MPI.__file__); print(MPI.Get_library_version())'"
    )
    assert res.rc == 0, res.stderr
    extension, library = res.stdout.split("\n", 1)
    # Linked by our mpicc wrapper: its RUNPATH points into our prefix.
    assert f"{prefix}/lib" in host.check_output(f"readelf -d {extension} | grep -E 'RUNPATH|RPATH'")
    version = os.path.basename(prefix).split("-")[0]
    assert library.startswith(f"Open MPI v{version}"), library
    ldd = host.check_output(f"ldd {extension}")
    libmpi = [line.split("=>")[1].split()[0] for line in ldd.splitlines() if "libmpi.so" in line]
    assert libmpi and host.file(libmpi[0]).linked_to.startswith(prefix + "/"), ldd
    # No distribution MPI is installed that mpi4py could have picked up.
    assert host.run("dpkg -l 'libopenmpi*' 'libmpich*' 2>/dev/null | grep -q '^ii'").rc != 0


def test_chainermn_allreduce_on_two_ranks(ssh):
    smoke = "/opt/mncluster/python/chainermn_smoke.py"
    res = ssh(f"mpiexec -n 2 --oversubscribe python {smoke} --communicator naive")
    assert res.rc == 0, res.stdout + res.stderr
    result = json.loads(res.stdout.strip().splitlines()[-1])
    assert result["size"] == 2
    assert result["allreduce_sum"] == [0.0, 3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0]
    assert result["mean_grad"] and all(m == 1.5 for m in result["mean_grad"])
    assert result["ok"] is True



def _markers(host):
    """md5 of the build markers of what the converge built or unpacked (OpenMPI, the mpi4py wheel,
    CPython on the pyenv path): a rebuild or a re-unpack rewrites them."""
    paths = (
        "/opt/openmpi/*/.mncluster-build.json"
        " /var/cache/mncluster/wheels/mpi4py-built/.mncluster-build.json"
    )
    if PYENV:
        paths += f" {HOME}/.pyenv/versions/*/.mncluster-build.json"
    return host.check_output(f"md5sum {paths}")


def test_a_point_release_upgrade_rebuilds_nothing_and_keeps_a_user_virtualenv(host, facts):
    # issue 16: an `apt upgrade` moves /etc/debian_version to the next point release (12.7 ->
    # 12.8, same ABI). The fingerprints carry the release (bookworm), so the next run rebuilds
    # nothing (OpenMPI, the mpi4py wheel, CPython) and a virtualenv the user made is still there.
    release = host.file("/etc/debian_version").content_string
    major, _, point = release.strip().partition(".")
    bumped = f"{major}.{int(point or 0) + 1}"
    if PYENV:  # beside ours, under the CPython a rebuild would swap
        base = f"{HOME}/.pyenv/versions/{facts['python_version']}"
        env, python = f"{base}/envs/users-own", f"{base}/bin/python"
    else:
        env, python = f"{HOME}/.venvs/users-own", "python3"
    made = host.run(f"runuser -u {USER} -- {python} -m venv {env} && runuser -u {USER} -- touch {env}/mine")
    assert made.rc == 0, made.stderr
    markers = _markers(host)
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    try:
        host.run_expect([0], f"printf '%s\\n' {bumped} > /etc/debian_version")
        # what the roles' facts see (ansible's distribution_version reads that file)
        seen = run_module("setup", "filter=ansible_distribution_version", host_pattern="all",
                          inventory=str(inventory), env=repo_ansible_env())  # fmt: skip
        versions = [r.get("ansible_facts", {}).get("ansible_distribution_version") for r in seen.results()]
        assert versions and set(versions) == {bumped}, seen.tail(3000)
        proc, wall = run_playbook(Path(__file__).parents[1] / "converge.yml", inventory=inventory,
                                  timeout=1200)  # fmt: skip
        assert proc.returncode == 0, proc.tail(4000)
        stats = proc.recap()
        assert all(s["changed"] == 0 and s["failures"] == 0 for s in stats.values()), stats
        assert _markers(host) == markers
        assert host.file(f"{env}/mine").exists and host.file(f"{env}/bin/python").exists
    finally:
        host.run(f"printf '%s' {shlex.quote(release)} > /etc/debian_version")
        host.run(f"rm -rf {env}")
    print(f"/etc/debian_version {release.strip()} -> {bumped}: re-converge {wall:.0f} s, changed=0, "
          f"build markers unchanged, {env} kept")  # fmt: skip


def test_a_check_run_on_the_converged_node_reports_no_change(host):
    # Drift detection for the build roles (common, pyenv, cuda, openmpi, chainer): --check --diff
    # on the converged node reports changed=0 (the read-only probes run in check mode, the
    # roles' own checks that run the installed programs are skipped, saying so) and rebuilds,
    # unpacks or installs nothing.
    markers = _markers(host)
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    proc, wall = run_playbook(Path(__file__).parents[1] / "converge.yml", "--check", "--diff",
                              inventory=inventory, timeout=1200)  # fmt: skip
    assert proc.returncode == 0, proc.tail(4000)
    stats = proc.recap()
    assert all(s["changed"] == 0 and s["failures"] == 0 for s in stats.values()), stats
    assert "check mode: openmpi's own checks" in proc.stdout
    assert _markers(host) == markers
    print(f"converge.yml --check --diff on the converged node: {wall:.0f} s, changed=0")
