"""State the `openmpi` role leaves on a node, checked from outside with testinfra."""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
from ansible_env import podman_hosts

# One `podman exec` per check (tests/unit/ansible_env.py).
testinfra_hosts = podman_hosts("all")

PREFIX = "/opt/openmpi/5.0.7-cuda12.6"
USER = "mpiuser"

HELLO_C = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int one = rank + 1;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d sum %d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
"""


def as_user(host, command):
    """Run `command` as the MPI user in a plain, non-login, non-interactive shell (sudo -u)."""
    return host.run("sudo -u %s -H bash -c %s", USER, command)


def ssh_ready(host):
    """Let the MPI user ssh to this node with a key: what mpiexec does between nodes."""
    home = f"/home/{USER}"
    script = (
        f"test -f {home}/.ssh/id_ed25519 || ssh-keygen -q -t ed25519 -N '' -f {home}/.ssh/id_ed25519; "
        f"grep -qf {home}/.ssh/id_ed25519.pub {home}/.ssh/authorized_keys 2>/dev/null "
        f"|| cat {home}/.ssh/id_ed25519.pub >> {home}/.ssh/authorized_keys; "
        f"chmod 600 {home}/.ssh/authorized_keys; "
        f"ssh-keyscan -t ed25519 localhost > {home}/.ssh/known_hosts 2>/dev/null"
    )
    host.run(f"install -d -m 700 -o {USER} -g {USER} {home}/.ssh")
    res = as_user(host, script)
    assert res.rc == 0, res.stderr


def over_ssh(host, command):
    """`command` in the non-interactive shell sshd starts (reads only ~/.bashrc)."""
    return as_user(host, f"ssh -o BatchMode=yes localhost {command!r}")


def test_ompi_info_reports_cuda_support_built_in(host):
    out = host.check_output(f"{PREFIX}/bin/ompi_info --parsable --all")
    assert "ompi:version:full:5.0.7" in out
    assert "mca:opal:base:param:opal_built_with_cuda_support:value:true" in out
    # 5.x prints the 4.x name as a synonym.
    assert "mca:mpi:base:param:mpi_built_with_cuda_support:value:true" in out
    assert f"path:prefix:{PREFIX}" in out


def test_cuda_plugin_links_the_driver_library_not_the_stub(host):
    # The accelerator/cuda plugin is a DSO that needs the driver's libcuda.so.1
    # at run time; nothing may point it at the link-only stub.
    plugin = f"{PREFIX}/lib/openmpi/mca_accelerator_cuda.so"
    assert host.file(plugin).exists
    dyn = host.check_output(f"readelf -d {plugin}")
    assert "Shared library: [libcuda.so.1]" in dyn
    assert "stubs" not in dyn


def test_the_distribution_openmpi_was_removed(host):
    # prepare.yml installed openmpi-bin; converge ran with openmpi_remove_conflicting.
    assert not host.package("openmpi-bin").is_installed
    assert not host.package("libopenmpi3").is_installed
    assert not host.file("/usr/bin/mpirun").exists
    ldcache = host.check_output("ldconfig -p")
    libmpi = [line for line in ldcache.splitlines() if "libmpi.so.40 " in line]
    assert libmpi, "libmpi.so.40 is not in the linker cache"
    assert all(f"{PREFIX}/lib/" in line for line in libmpi), libmpi


def test_login_shell_finds_our_mpiexec(host):
    res = host.run("su - %s -c 'command -v mpiexec mpicc'", USER)
    assert res.rc == 0, res.stderr
    assert res.stdout.split() == [f"{PREFIX}/bin/mpiexec", f"{PREFIX}/bin/mpicc"]


def test_bashrc_block_is_above_the_interactive_guard(host):
    bashrc = host.file(f"/home/{USER}/.bashrc").content_string
    begin = bashrc.index("# BEGIN mncluster openmpi")
    guard = bashrc.find("case $- in")
    assert guard == -1 or begin < guard


def test_mpiexec_two_ranks_over_ssh_as_mpi_user(host):
    ssh_ready(host)
    res = over_ssh(host, "mpiexec -n 2 printenv OMPI_COMM_WORLD_RANK")
    assert res.rc == 0, res.stderr
    assert sorted(res.stdout.split()) == ["0", "1"]


def test_mpi_program_built_with_our_mpicc_runs_on_two_ranks(host):
    ssh_ready(host)
    work = f"/home/{USER}/mncluster"
    host.run(f"install -d -o {USER} -g {USER} {work}")
    write = as_user(host, f"cat > {work}/hello.c <<'EOF'\n{HELLO_C}\nEOF")
    assert write.rc == 0, write.stderr
    build = over_ssh(host, f"mpicc -o {work}/hello {work}/hello.c")
    assert build.rc == 0, build.stderr
    # The wrapper links our libmpi, found at run time without LD_LIBRARY_PATH.
    ldd = host.check_output(f"ldd {work}/hello")
    assert f"{PREFIX}/lib/libmpi.so.40" in ldd
    run = over_ssh(host, f"mpiexec -n 2 {work}/hello")
    assert run.rc == 0, run.stderr
    lines = sorted(run.stdout.strip().splitlines())
    assert lines == ["rank 0 of 2 sum 3", "rank 1 of 2 sum 3"]
    # No driver here: the CUDA plugins cannot load, and the ranks must not say so each time.
    assert "unable to open mca_accelerator_cuda" not in run.stderr


def test_the_launcher_forks_ranks_on_the_thread_that_reaps_them(host):
    # roles/openmpi/README.md, "The launcher's threads": mpiexec and every daemon read this file;
    # without the line a rank that ends at once can be lost and mpiexec hangs after the job
    # (molecule/cluster/verify.yml runs the jobs that show it).
    conf = host.file(f"{PREFIX}/etc/prte-mca-params.conf")
    assert conf.user == "root" and conf.mode == 0o644
    assert "odls_base_max_threads = 0" in conf.content_string.splitlines()


def test_build_marker_records_the_fingerprint(host):
    marker = json.loads(host.file(f"{PREFIX}/.mncluster-build.json").content_string)
    fp = marker["fingerprint"]
    assert fp["version"] == "5.0.7"
    assert fp["cuda_version"] == "12.6"
    assert fp["os"] == "debian-bookworm-x86_64"
    assert f"--prefix={PREFIX}" in fp["configure_flags"]
    assert len(marker["fingerprint_hash"]) == 16
    # No half-swapped leftovers next to the prefix.
    assert not host.file(f"{PREFIX}.mncluster-new").exists
    assert not host.file(f"{PREFIX}.mncluster-old").exists


def test_every_shared_library_resolves(host):
    # A shipped build fails to start where a runtime library is missing.
    res = host.run(
        f"for f in {PREFIX}/bin/* {PREFIX}/lib/*.so {PREFIX}/lib/openmpi/*.so; do "
        "ldd $f 2>/dev/null | grep 'not found' | grep -v libcuda.so.1 | sed \"s|^|$f: |\"; done"
    )
    assert res.stdout.strip() == ""
