"""Slurm on three containers: one munge key, one slurm.conf built from the nodes'
own facts, and jobs (srun, sbatch) on every node as the MPI user; the cluster's OpenMPI 5
started by `srun --mpi=pmix` (Slurm's PMIx server, no mpiexec) and by mpiexec inside a batch job.

testinfra from outside; the change and bad-input cases run the real role again
against the molecule inventory.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

INVENTORY_FILE = os.environ["MOLECULE_INVENTORY_FILE"]
ROOT = Path(__file__).resolve().parents[3]
from ansible_env import podman_hosts, run_playbook

# One `podman exec` per check.
testinfra_hosts = podman_hosts("mnc_nodes")

SCENARIO = Path(__file__).resolve().parents[1]
NODES = {"mnc-slurm-1": "10.89.79.11", "mnc-slurm-2": "10.89.79.12", "mnc-slurm-3": "10.89.79.13"}
CONTROLLER = "mnc-slurm-1"
USER = "mpiuser"


def sh(node, script, stdin=None, check=True):
    """A root shell command in one container; the completed process."""
    return subprocess.run(["podman", "exec", "-i", node, "sh", "-c", script], input=stdin,
                          capture_output=True, text=True, check=check, timeout=120)  # fmt: skip


def playbook(path, *extra, timeout=900):
    """A real playbook against this scenario's containers (through ansible-runner): the run."""
    inventory = Path(INVENTORY_FILE).parent
    proc, _ = run_playbook(path, *extra, inventory=inventory, timeout=timeout)
    return proc


def _sha(node, path):
    return sh(node, f"sha256sum {path}").stdout.split()[0]


def once(host, node=CONTROLLER):
    if host.backend.hostname != node:
        pytest.skip(f"runs once, on {node}")


# --- munge --------------------------------------------------------------------------------------


def test_munge_key_is_one_key_readable_by_munge_only(host):
    once(host)
    for node in NODES:
        assert sh(node, "stat -c '%U:%G %a' /etc/munge/munge.key").stdout.strip() == "munge:munge 400", node
    assert len({_sha(n, "/etc/munge/munge.key") for n in NODES}) == 1


def test_a_credential_made_on_one_node_is_accepted_on_the_others(host):
    once(host)
    cred = host.run("munge -n")
    assert cred.rc == 0, cred.stderr
    for node in NODES:
        decoded = sh(node, "unmunge", stdin=cred.stdout, check=False)
        assert decoded.returncode == 0 and "STATUS:          Success" in decoded.stdout, (node, decoded)


# --- configuration ------------------------------------------------------------------------------


def test_slurm_conf_is_the_same_everywhere_and_lists_every_node_on_its_private_address(host):
    once(host)
    assert len({_sha(n, "/etc/slurm/slurm.conf") for n in NODES}) == 1
    conf = host.file("/etc/slurm/slurm.conf").content_string
    lines = [line for line in conf.splitlines() if line.startswith("NodeName=")]
    assert [line.split()[0] for line in lines] == [f"NodeName={n}" for n in NODES]
    for line, ip in zip(lines, NODES.values(), strict=True):
        assert f" NodeAddr={ip} " in line
    assert f"SlurmctldHost={CONTROLLER}({NODES[CONTROLLER]})" in conf
    # Containers: no cgroup tree of their own.
    assert "ProctrackType=proctrack/linuxproc" in conf and "TaskPlugin=task/none" in conf
    assert not host.file("/etc/slurm/cgroup.conf").exists
    assert len({_sha(n, "/etc/slurm/mpi.conf") for n in NODES}) == 1
    assert "PMIxEnv=PMIX_MCA_psec=native" in host.file("/etc/slurm/mpi.conf").content_string.splitlines()
    # ... and the running Slurm reads it: every fence on the ring (role README: PMIx).
    config = host.check_output("scontrol show config").splitlines()
    pmix = {
        key.strip(): value.strip()
        for key, _, value in (line.partition("=") for line in config)
        if key.startswith("PMIx")
    }
    assert pmix["PMIxCollFence"] == "ring", pmix


def test_node_line_is_what_slurmd_reports_less_the_reserve(host):
    me = host.backend.hostname
    conf = host.file("/etc/slurm/slurm.conf").content_string
    line = next(x for x in conf.splitlines() if x.startswith(f"NodeName={me} "))
    fields = dict(f.split("=", 1) for f in line.split())
    seen = dict(f.split("=", 1) for f in host.check_output("slurmd -C").splitlines()[0].split())
    for key in ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore"):
        assert fields[key] == seen[key], key
    assert int(fields["RealMemory"]) == int(seen["RealMemory"]) - 512
    assert "Gres=" not in line  # no GPU here


def test_daemons_run_where_they_belong(host):
    assert host.service("munge").is_running and host.service("munge").is_enabled
    assert host.service("slurmd").is_running and host.service("slurmd").is_enabled
    ctl = host.service("slurmctld")
    if host.backend.hostname == CONTROLLER:
        assert ctl.is_running and ctl.is_enabled
    else:
        assert not host.package("slurmctld").is_installed


# --- jobs ---------------------------------------------------------------------------------------


def test_every_node_idle_in_sinfo(host):
    once(host)
    out = host.check_output("sinfo --noheader --Node --format='%N %t %P'")
    assert sorted(out.splitlines()) == [f"{n} idle batch*" for n in NODES]


def test_srun_runs_one_task_per_node_as_the_mpi_user(host):
    once(host)
    out = host.check_output(f"sudo -u {USER} timeout 120 srun -N 3 -n 3 --ntasks-per-node=1 hostname")
    assert sorted(out.split()) == sorted(NODES)


def test_sbatch_job_script_runs_across_the_nodes(host):
    once(host)
    script = "\n".join(
        ["#!/bin/bash", "#SBATCH -N 3", "#SBATCH --ntasks-per-node=1", "#SBATCH -o /tmp/mnc-job-%j.out",
         "srun hostname", ""]
    )  # fmt: skip
    sh(CONTROLLER, f"cat > ~{USER}/job.sh && chown {USER} ~{USER}/job.sh", stdin=script)
    # --wait: sbatch exits with the job's exit code (sh() checks it is 0).
    job = sh(CONTROLLER, f"cd /tmp && sudo -u {USER} timeout 180 sbatch --wait --parsable ~{USER}/job.sh")
    job_id = job.stdout.strip().split(";")[0]
    # The batch step writes its output on the job's first node.
    outputs = [sh(n, f"cat /tmp/mnc-job-{job_id}.out", check=False).stdout for n in NODES]
    found = [o for o in outputs if o.strip()]
    assert len(found) == 1 and sorted(found[0].split()) == sorted(NODES), outputs


# --- MPI through Slurm ---------------------------------------------------------------------------

# Every rank says who it is, where, what the others sent (an allreduce: the ranks talk to each
# other across the nodes) and which PMIx namespace started it: "slurm.pmix.<job>.<step>" is
# Slurm's PMIx server (srun --mpi=pmix), "prterun-..." OpenMPI's own launcher (mpiexec).
HELLO_C = r"""#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int rank, size, len, sum = 0;
    char host[MPI_MAX_PROCESSOR_NAME];
    const char *ns = getenv("PMIX_NAMESPACE");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("hello rank=%d size=%d host=%s sum=%d ns=%s\n", rank, size, host, sum, ns ? ns : "-");
    MPI_Finalize();
    return 0;
}
"""
HELLO = f"/home/{USER}/mnc-hello"
# converge.yml installs OpenMPI on these two.
MPI_NODES = ["mnc-slurm-1", "mnc-slurm-2"]


@pytest.fixture(scope="module")
def hello():
    """The program, built with the cluster's mpicc as the MPI user on the controller; its prefix."""
    fact = json.loads(sh(CONTROLLER, "cat /etc/ansible/facts.d/mncluster_openmpi.fact").stdout)
    prefix = fact["mnc_openmpi_prefix"]
    sh(CONTROLLER, f"sudo -u {USER} sh -c 'cat > {HELLO}.c'", stdin=HELLO_C)
    sh(CONTROLLER, f"cd /tmp && sudo -u {USER} {prefix}/bin/mpicc -o {HELLO} {HELLO}.c")
    return prefix


def _ranks(out, prefix="hello "):
    """{rank: {size, host, sum, ns}} from the program's lines (in any order)."""
    ranks = {}
    for line in out.splitlines():
        if line.startswith(prefix):
            fields = dict(f.split("=", 1) for f in line[len(prefix) :].split())
            ranks[int(fields.pop("rank"))] = fields
    return ranks


def _check_world(ranks, hosts, launcher):
    """4 ranks, 2 on each of ``hosts`` in block order, one world, started by ``launcher``."""
    assert sorted(ranks) == [0, 1, 2, 3], ranks
    assert {r: v["host"] for r, v in ranks.items()} == {0: hosts[0], 1: hosts[0], 2: hosts[1], 3: hosts[1]}
    assert all(v["size"] == "4" and v["sum"] == "6" for v in ranks.values()), ranks
    namespaces = {v["ns"] for v in ranks.values()}
    assert len(namespaces) == 1, namespaces
    if launcher == "srun":
        assert namespaces.pop().startswith("slurm.pmix."), ranks
    else:
        assert not namespaces.pop().startswith("slurm."), ranks


def test_srun_mpi_pmix_starts_our_mpi_ranks_without_mpiexec(host, hello):
    once(host)
    nodes = MPI_NODES
    # --bcast: srun copies the program to the nodes' /tmp first (homes are not shared here).
    srun = (
        f"srun --mpi=pmix -w {','.join(nodes)} -N 2 --ntasks-per-node=2 --distribution=block"
        f" --bcast=/tmp/mnc-hello {HELLO}"
    )
    run = sh(CONTROLLER, f"cd /tmp && sudo -u {USER} timeout 120 {srun}", check=False)
    assert run.returncode == 0, run
    _check_world(_ranks(run.stdout), nodes, "srun")
    # mpi.conf's PMIxEnv: no per-rank notice about the munge security plugin our PMIx lacks.
    assert "munge" not in run.stderr and "not found" not in run.stderr, run.stderr


def test_sbatch_mpi_job_runs_srun_pmix_and_mpiexec_in_its_allocation(host, hello):
    once(host)
    # A login shell (bash -l): /etc/profile.d puts the cluster's mpiexec on PATH, as for users.
    script = "\n".join(
        ["#!/bin/bash -l", f"#SBATCH -w {','.join(MPI_NODES)}", "#SBATCH --ntasks-per-node=2",
         "#SBATCH -o /tmp/mnc-mpi-job-%j.out", "set -e",
         'echo "nodes $(scontrol show hostnames "$SLURM_JOB_NODELIST" | tr "\\n" " ")"',
         'echo "found $(command -v mpiexec)"',
         f"srun --mpi=pmix --bcast=/tmp/mnc-hello {HELLO} | sed s/^hello/srun/",
         # OpenMPI's launcher in an allocation, held to Slurm's (plm slurm: its daemons start
         # through srun, one per node; ssh is not asked) and to the allocation's nodes and slots.
         "mpiexec --prtemca plm slurm /tmp/mnc-hello | sed s/^hello/mpiexec/", ""]
    )  # fmt: skip
    sh(CONTROLLER, f"sudo -u {USER} sh -c 'cat > ~/mpi-job.sh'", stdin=script)
    job = sh(CONTROLLER, f"cd /tmp && sudo -u {USER} timeout 180 sbatch --wait --parsable ~{USER}/mpi-job.sh",
             check=False)  # fmt: skip
    job_id = job.stdout.strip().split(";")[0]
    outputs = {n: sh(n, f"cat /tmp/mnc-mpi-job-{job_id}.out", check=False).stdout for n in NODES}
    found = [o for o in outputs.values() if o.strip()]
    assert job.returncode == 0 and len(found) == 1, (job, outputs)
    out = found[0]
    nodes = next(line.split()[1:] for line in out.splitlines() if line.startswith("nodes "))
    assert nodes == MPI_NODES, out
    assert f"found {hello}/bin/mpiexec" in out.splitlines(), out
    _check_world(_ranks(out, "srun "), nodes, "srun")
    _check_world(_ranks(out, "mpiexec "), nodes, "mpiexec")


# --- the health check (HealthCheckProgram) ---------------------------------------------------------

import mnc_slurm_health  # the rules the program on the nodes runs

# Every wait polls and is bounded; the interval is 10 s (molecule.yml), so slurmd runs the check
# several times within the bound. Nothing is asserted on how long anything took.
BOUND_S = 180
REMOUNT = "mount -t tmpfs -o rw,size=16m,mode=0755 tmpfs /shared"


def node_state(node):
    """The node as slurmctld has it: {name, state, flags, reason}."""
    return mnc_slurm_health.parse_node(sh(CONTROLLER, f"scontrol -o show node {node}").stdout)


def health_runs(node):
    """How many times the health check ran on the node (its own record), 0 before the first."""
    out = sh(node, "cat /var/lib/mncluster/healthcheck/last.json", check=False).stdout
    return json.loads(out)["runs"] if out.strip() else 0


def wait_until(node, what, predicate, bound=BOUND_S):
    """Poll slurmctld's view of the node until predicate(state) holds; fail naming the node."""
    deadline = time.monotonic() + bound
    while True:
        state = node_state(node)
        if predicate(state):
            return state
        if time.monotonic() > deadline:
            last = sh(node, "cat /var/lib/mncluster/healthcheck/last.json", check=False).stdout
            pytest.fail(
                f"{node}: not {what} within {bound} s; slurmctld has {state}; the check's last run: {last}"
            )
        time.sleep(2)


def wait_for_runs(node, runs, bound=BOUND_S):
    """Poll until the health check has run on the node `runs` more times (slurmd's own runs)."""
    start, deadline = health_runs(node), time.monotonic() + bound
    while health_runs(node) < start + runs:
        if time.monotonic() > deadline:
            pytest.fail(f"{node}: the health check did not run {runs} more time(s) within {bound} s "
                        f"(runs: {health_runs(node)}; slurmd.log: HealthCheckProgram)")  # fmt: skip
        time.sleep(2)


def remount(node):
    """/shared mounted again on the node (a tmpfs, as molecule.yml gives it)."""
    script = f"mountpoint -q /shared || {REMOUNT}"
    subprocess.run(["podman", "exec", "--privileged", node, "sh", "-c", script], check=True, timeout=60)


def drained(state):
    return bool({"DRAIN", "DRAINED", "DRAINING"} & state["flags"])


def test_health_check_is_slurmds_program_and_passes_on_every_node(host):
    once(host)
    config = dict(line.split("=", 1) for line in host.check_output("scontrol show config").splitlines()
                  if "=" in line)  # fmt: skip
    config = {k.strip(): v.strip() for k, v in config.items()}
    assert config["HealthCheckProgram"] == "/usr/local/lib/mncluster/healthcheck/mncluster-healthcheck"
    assert config["HealthCheckInterval"].startswith("10")
    for node in NODES:
        settings = json.loads(sh(node, "cat /etc/slurm/mncluster-healthcheck.json").stdout)
        assert settings["node"] == node and settings["shared_dirs"] == ["/shared"] and settings["gpus"] == 0
        program = "/usr/local/lib/mncluster/healthcheck/mncluster-healthcheck"
        assert sh(node, f"stat -c '%U %a' {program}").stdout.split() == ["root", "755"]
        # where an older mncluster put it: gone
        assert sh(node, "test -e /usr/local/sbin/mncluster-healthcheck", check=False).returncode == 1
        wait_for_runs(node, 1)
        last = json.loads(sh(node, "cat /var/lib/mncluster/healthcheck/last.json").stdout)
        assert last["failures"] == [] and last["action"] == "keep", (node, last)
        assert not drained(node_state(node)), node


def test_health_check_drains_a_node_whose_shared_directory_is_gone_and_resumes_it(host):
    once(host)
    node = "mnc-slurm-3"
    # The shared directory is unmounted on purpose (a mount needs the privilege the container lacks).
    subprocess.run(["podman", "exec", "--privileged", node, "umount", "/shared"], check=True, timeout=60)
    try:
        state = wait_until(
            node, "drained by the health check", lambda s: drained(s) and s["reason"] is not None
        )
        assert state["reason"] == "mncluster: shared directory /shared not mounted", state
        sinfo = host.check_output("sinfo -R --noheader --format='%n|%E'").splitlines()
        assert f"{node}|mncluster: shared directory /shared not mounted" in sinfo, sinfo
        # The other nodes keep working.
        assert not drained(node_state("mnc-slurm-2"))
    finally:
        remount(node)
    state = wait_until(node, "resumed by the health check", lambda s: not drained(s))
    # Slurm 22.05 (Debian 12) clears the reason on resume; 24.11 (Debian 13) leaves the last one
    # on the idle node in scontrol show node, where the health check's rules ignore it (they read
    # the DRAIN flag). sinfo -R, which lists the drained and down nodes, no longer names it.
    assert state["reason"] in (None, "mncluster: shared directory /shared not mounted"), state
    sinfo = host.check_output("sinfo -R --noheader --format='%n|%E'").splitlines()
    assert not [line for line in sinfo if line.startswith(f"{node}|")], sinfo
    out = host.check_output(f"sudo -u {USER} timeout 120 srun -N 3 -n 3 --ntasks-per-node=1 hostname")
    assert sorted(out.split()) == sorted(NODES)


def test_health_check_leaves_a_node_an_administrator_drained(host):
    once(host)
    node = "mnc-slurm-2"
    sh(CONTROLLER, f"scontrol update NodeName={node} State=DRAIN Reason='disk swap (admin)'")
    try:
        # Passing checks do not resume it: two of slurmd's runs after the drain, still drained.
        wait_for_runs(node, 2)
        state = node_state(node)
        assert drained(state) and state["reason"] == "disk swap (admin)", state
        last = json.loads(sh(node, "cat /var/lib/mncluster/healthcheck/last.json").stdout)
        assert last["action"] == "keep" and "drained by someone else (disk swap (admin))" in last["why"], last
        # Nor does a failing check take it over: the administrator's reason stays.
        subprocess.run(["podman", "exec", "--privileged", node, "umount", "/shared"], check=True, timeout=60)
        try:
            wait_for_runs(node, 2)
            state = node_state(node)
            assert drained(state) and state["reason"] == "disk swap (admin)", state
        finally:
            remount(node)
    finally:
        sh(CONTROLLER, f"scontrol update NodeName={node} State=RESUME")
    wait_until(node, "resumed by the administrator", lambda s: not drained(s))


# --- changes and bad input ----------------------------------------------------------------------


def test_a_changed_setting_restarts_the_daemons_and_takes_effect(host):
    # The last change to the cluster in this scenario (the bad-input cases after it change
    # nothing): no second converge to put it back, destroy comes next.
    once(host)
    key = _sha(CONTROLLER, "/etc/munge/munge.key")
    proc = playbook(SCENARIO / "slurm.yml", "-e", "slurm_partition=other")
    assert proc.returncode == 0, proc.tail(5000)
    assert sum(s["changed"] for s in proc.recap().values()) >= 3
    assert host.check_output("sinfo --noheader --format=%P").strip() == "other*"
    # The key was not regenerated or redistributed.
    assert {_sha(n, "/etc/munge/munge.key") for n in NODES} == {key}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"slurm_controller": "head-node"}, "controller: head-node (not in the play)"),
        ({"slurm_proctrack_type": "proctrack/bogus"}, "slurm_proctrack_type"),
        ({"slurm_cluster_name": "my cluster;id"}, "names of letters, digits and _ . - only"),
        ({"slurm_wait_timeout": "soon"}, "slurm_wait_timeout"),
        ({"slurm_pmix_env": ["PMIX_MCA_psec=native;rm"]}, "(PMIX_MCA_psec=native;rm)"),
        ({"slurm_pmix": False, "slurm_mpi_default": "pmix"}, "slurm_mpi_default pmix only with slurm_pmix"),
        ({"slurm_health_check_interval": 0}, "slurm_health_check_interval > 0 (now 0)"),
        ({"slurm_health_check_shared_dirs": ["shared;rm"]}, "(shared;rm)"),
    ],
    ids=[
        "unknown-controller",
        "bad-proctrack",
        "shell-in-name",
        "timeout-not-int",
        "pmix-env-not-a-pair",
        "pmix-default-without-pmix",
        "health-interval-zero",
        "health-dir-not-absolute",
    ],
)
def test_bad_input_fails_before_anything_changes(host, extra, message):
    once(host)
    before = {n: _sha(n, "/etc/slurm/slurm.conf") for n in NODES}
    proc = playbook(SCENARIO / "bad_input.yml", "-e", json.dumps(extra))
    out = proc.stdout
    assert proc.returncode != 0, out[-3000:]
    assert message in out, out[-3000:]
    stats = proc.recap()
    assert all(s["changed"] == 0 for s in stats.values()), stats
    assert {n: _sha(n, "/etc/slurm/slurm.conf") for n in NODES} == before
