"""The environment record (train/environment.py) and its parts: the CPUs a rank can use and the
interfaces (train/node.py), the launcher's word on ranks per node (train/launch.py), and when MPI
is told to yield (train/startup.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.train.conftest import QUICK, run_ok
from train import environment, launch, node, startup


def test_cpu_lists():
    assert node.parse_cpu_list("0-3,6") == {0, 1, 2, 3, 6}
    assert node.parse_cpu_list("5") == {5}
    assert node.parse_cpu_list("") == set()


def test_this_machine_has_usable_cpus():
    cpus = node.node_cpus()
    assert 0 < cpus["usable_cpus"] <= cpus["cpuset_cpus"] <= (os.cpu_count() or 1)
    if cpus["cpu_quota"] is not None:
        assert cpus["usable_cpus"] == min(cpus["cpuset_cpus"], cpus["cpu_quota"])


def test_ranks_on_this_node_under_srun():
    """srun starts the ranks itself: this node's count comes from Slurm's step layout."""
    assert launch.slurm_tasks_on_node("2(x2),1", "0") == 2
    assert launch.slurm_tasks_on_node("2(x2),1", "2") == 1
    assert launch.slurm_tasks_on_node("2(x2),1", "3") is None
    assert launch.slurm_tasks_on_node("garbage", "0") is None
    assert launch.local_ranks({"SLURM_STEP_TASKS_PER_NODE": "3,1", "SLURM_NODEID": "0"}) == 3
    # mpiexec's own figure wins (also inside an sbatch job, whose variables the ranks inherit)
    assert launch.local_ranks({"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "SLURM_STEP_TASKS_PER_NODE": "1",
                                    "SLURM_NODEID": "0"}) == 2
    assert launch.local_ranks({}) is None


def test_the_batch_job_is_recorded():
    job = launch.scheduler_job({"SLURM_JOB_ID": "17", "SLURM_STEP_ID": "0",
                                     "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_JOB_NODELIST": "n[1-3]",
                                     "SLURM_JOB_PARTITION": "batch"})
    assert job == {"name": "slurm", "job_id": "17", "step_id": "0", "nodelist": "n[1-2]",
                   "partition": "batch"}
    assert launch.scheduler_job({"PBS_JOBID": "3.pbs", "PBS_QUEUE": "workq"})["job_id"] == "3.pbs"
    assert launch.scheduler_job({}) is None


def test_yield_only_when_ranks_outnumber_cpus():
    var = startup.YIELD_VAR
    assert startup.decide_yield({}, 6, 2.0)["value"] == "1"
    assert "6 ranks on this node, 2 usable CPUs" in startup.decide_yield({}, 6, 2.0)["source"]
    assert startup.decide_yield({}, 2, 2.0)["value"] is None
    assert startup.decide_yield({}, 2, 1.5)["value"] == "1"  # a podman --cpus=1.5 quota
    assert startup.decide_yield({}, None, 1.0)["value"] is None  # not launched by mpiexec
    # what the launcher said wins, either way
    assert startup.decide_yield({var: "0"}, 6, 2.0) == {
        "value": "0", "source": "launcher (mpiexec --mca or the environment)"}


def test_oversubscribed_hosts_by_cpus_or_by_binding():
    rec = {"usable_cpus": 2.0, "affinity": [0, 1]}
    ranks = [{"host": "a", **rec}, {"host": "a", **rec}, {"host": "b", **rec}, {"host": "b", **rec},
             {"host": "b", **rec}]
    assert environment.oversubscribed_hosts(ranks) == [{"host": "b", "ranks": 3, "usable_cpus": 2}]
    # bound to one shared core: two ranks, one CPU between them
    bound = [{"host": "c", "usable_cpus": 8.0, "affinity": [3]}] * 2
    assert environment.oversubscribed_hosts(bound) == [{"host": "c", "ranks": 2, "usable_cpus": 1}]


def test_nodes_that_share_one_machine_share_its_cpus():
    # The sandbox: 3 containers (nodes) on one 2-core host, 2 ranks each, every one sees both cores.
    ranks = [{"host": f"node{i // 2 + 1}", "boot_id": "k1", "usable_cpus": 2.0, "affinity": [0, 1]}
             for i in range(6)]
    assert environment.oversubscribed_hosts(ranks) == []  # no node is short of CPUs on its own
    assert environment.shared_machines(ranks) == [{"boot_id": "k1", "hosts": ["node1", "node2", "node3"],
                                                   "ranks": 6, "usable_cpus": 2, "oversubscribed": True}]
    # two machines, one node each: nothing shared; one node alone on its kernel is no machine entry
    apart = [dict(r, boot_id=f"k{i}") for i, r in enumerate(ranks[:2])]
    apart[1]["host"] = "node2"
    assert environment.shared_machines(apart) == []
    # containers pinned to cores of their own: the machine has CPUs for all
    pinned = [dict(r, affinity=[i]) for i, r in enumerate(ranks)]
    assert environment.shared_machines(pinned)[0]["oversubscribed"] is False


def test_the_interfaces_open_mpis_tcp_transport_uses():
    ifaces = [{"name": "lo", "address": "127.0.0.1", "prefix": 8},
              {"name": "eth0", "address": "192.168.1.5", "prefix": 24},
              {"name": "eth1", "address": "10.0.0.5", "prefix": 24}]
    names = [i["name"] for i in node.tcp_interfaces(ifaces, "10.0.0.0/24", None)]
    assert names == ["eth1"]  # roles/mpi_network pins the private subnet
    assert [i["name"] for i in node.tcp_interfaces(ifaces, "eth0,eth1", None)] == ["eth0", "eth1"]
    # nothing pinned: every interface but loopback (Open MPI's default exclude)
    assert [i["name"] for i in node.tcp_interfaces(ifaces, None, None)] == ["eth0", "eth1"]
    assert [i["name"] for i in node.tcp_interfaces(ifaces, None, "127.0.0.1/8,eth0")] == ["eth1"]
    # this machine's own interfaces: loopback at least, each with an IPv4 address
    mine = node.interfaces()
    assert any(i["name"] == "lo" and i["address"] == "127.0.0.1" for i in mine)


@pytest.mark.mpi
def test_environment_of_every_rank_is_recorded(tmp_path):
    doc = run_ok(QUICK, tmp_path / "e.json", processes=2,
                 env={startup.YIELD_VAR: "1", "OMPI_MCA_btl_tcp_if_include": "lo"})
    env = doc["environment"]
    assert [r["rank"] for r in env["ranks"]] == [0, 1]
    for r in env["ranks"]:
        assert r["host"] == env["hosts"][r["rank"]] and r["affinity"] and r["usable_cpus"] > 0
        assert r["gpu"] is None and r["yield_when_idle"] == "1"
        assert r["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert env["shared_machines"] == []  # one node: the per-node check covers it
    assert env["mpi_yield_when_idle"]["source"].startswith("launcher")
    assert env["transport"]["OMPI_MCA_btl_tcp_if_include"] == "lo"
    assert env["cuda_aware_mpi"]["built_with_cuda_support"] in (True, False)
    # ompi_info, run with the ranks' environment, reports the setting every job gets.
    assert env["network_pinning"]["btl_tcp_if_include"] == "lo"
    # ... and so the only interface its TCP transport uses here
    tcp = env["mpi_tcp_interfaces"]
    assert tcp["rule"] == "btl_tcp_if_include=lo"
    assert {h: [i["name"] for i in ifs] for h, ifs in tcp["hosts"].items()} == {env["hosts"][0]: ["lo"]}
    if node.node_cpus()["usable_cpus"] >= 2:
        assert env["oversubscribed"] == []


@pytest.mark.mpi
def test_more_ranks_than_cpus_make_mpi_yield(tmp_path):
    usable = node.node_cpus()["usable_cpus"]
    if usable > 3:
        pytest.skip(f"{usable:g} usable CPUs: oversubscribing them would take {int(usable) + 1} ranks")
    p = int(usable) + 1
    doc = run_ok([*QUICK, "--iterations", "5", "--rounds", "1", "--p2p-bytes", "0"], tmp_path / "o.json",
                 processes=p)
    env = doc["environment"]
    assert env["mpi_yield_when_idle"]["value"] == "1"
    assert env["mpi_yield_when_idle"]["source"].startswith(f"benchmark: {p} ranks on this node")
    assert all(r["yield_when_idle"] == "1" for r in env["ranks"])
    assert env["oversubscribed"] and env["oversubscribed"][0]["ranks"] == p


NCCL_INFO = """\
node1:2231:2231 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
node1:2231:2231 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation
node1:2231:2231 [0] NCCL INFO cudaDriverVersion 12020
NCCL version 2.18.3+cuda12.2
node1:2231:2231 [0] NCCL INFO NCCL version 2.18.3+cuda12.2
node1:2231:2290 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>
node1:2231:2290 [0] NCCL INFO Using network IB
node1:2231:2290 [0] NCCL INFO Channel 00/02 :    0   1
node1:2231:2290 [0] NCCL INFO Channel 00/0 : 0[3b000] -> 1[5e000] via P2P/IPC
node1:2231:2290 [0] NCCL INFO Channel 01/0 : 1[5e000] -> 2[3b000] [send] via NET/IB/0
node2:3001:3050 [0] NCCL INFO NET/Socket : Using [0]eth1:192.168.1.2<0> [1]eth2:192.168.2.2<0>
"""


def test_nccl_info_lines_say_network_interfaces_and_transports():
    got = startup.parse_nccl_info(NCCL_INFO)
    assert got["version"] == "2.18.3+cuda12.2"
    assert got["network"] == "IB"
    assert got["interfaces"] == ["IB:mlx5_0:1/IB", "IB:mlx5_1:1/IB", "Socket:eth1", "Socket:eth2"]
    assert got["transports"] == ["P2P/IPC", "NET/IB/0"]
    assert startup.parse_nccl_info("no nccl here") == {"version": None, "network": None,
                                                           "interfaces": [], "transports": []}


def test_ompi_info_found_beside_the_launchers_open_mpi(tmp_path):
    """A rank whose PATH lacks Open MPI's bin/ (mpiexec started by its full path) still finds the
    launcher's ompi_info through OMPI_LIBDIR_LOC, which Open MPI 5 gives every rank; without it,
    the document said "not pinned" on a cluster whose MCA files pin the private network."""
    real = Path(os.path.realpath("/usr/bin/ompi_info"))
    if not real.is_file():
        pytest.skip("no ompi_info on this machine")
    prefix = tmp_path / "openmpi"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "bin" / "ompi_info").symlink_to(real)
    no_mpi_path = str(tmp_path / "empty")
    assert startup.find_ompi_info({"PATH": no_mpi_path}) is None
    found = startup.find_ompi_info({"PATH": no_mpi_path, "OMPI_LIBDIR_LOC": str(prefix / "lib")})
    assert found == str(prefix / "bin" / "ompi_info")
    assert startup.find_ompi_info({"PATH": no_mpi_path, "OPAL_PREFIX": str(prefix)}) == found
    # PATH first: the ompi_info a user's shell would run.
    assert startup.find_ompi_info({"PATH": str(real.parent), "OPAL_PREFIX": str(prefix)}) == str(real)
    # Neither variable (a user's own srun, no module loaded): beside the libmpi the rank has loaded.
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f10 r--p 00000000 08:01 42   /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        f"7f10-7f20 r-xp 00000000 08:01 43   {prefix}/lib/libmpi.so.40.40.7\n"
        "7f20-7f30 rw-p 00000000 00:00 0\n"
    )
    assert startup.find_ompi_info({"PATH": no_mpi_path}, maps=str(maps)) == found
    assert startup.find_ompi_info({"PATH": no_mpi_path}, maps=str(tmp_path / "none")) is None

