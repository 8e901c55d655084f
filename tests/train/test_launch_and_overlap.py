"""Pure parts of the PyTorch engine: who started the ranks (train/launch.py) and DDP's overlap
accounting from the comm hook's stamps (train/ddp_hook.py)."""

from __future__ import annotations

import pytest

from train import ddp_hook, launch


def test_mpiexec_ranks():
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_RANK": "3"}
    rec = launch.detect(env)
    assert (rec["launcher"], rec["rank"], rec["size"], rec["local_rank"], rec["local_size"]) == \
        ("mpiexec", 3, 4, 1, 2)
    assert (rec["rank_from"], rec["master_addr"], rec["master_port"]) == ("OMPI_COMM_WORLD_RANK", None, None)
    assert launch.uses_mpi(rec)


def test_srun_ranks_with_the_node_count_from_slurm():
    env = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_STEP_NUM_TASKS": "6", "SLURM_LOCALID": "1",
           "SLURM_STEP_ID": "0", "SLURM_STEP_TASKS_PER_NODE": "2(x3)", "SLURM_NODEID": "2", "PMIX_RANK": "5"}
    rec = launch.detect(env)
    # the step's 6 tasks, not the job's 8
    assert (rec["launcher"], rec["rank"], rec["size"], rec["local_rank"], rec["local_size"]) == \
        ("slurm", 5, 6, 1, 2)
    assert rec["rank_from"] == "SLURM_PROCID" and rec["size_from"] == "SLURM_STEP_NUM_TASKS"
    assert launch.uses_mpi(rec)
    del env["SLURM_STEP_NUM_TASKS"]
    assert (launch.detect(env)["size"], launch.detect(env)["size_from"]) == (8, "SLURM_NTASKS")


def test_mpiexec_inside_a_slurm_job_is_mpiexec():
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_STEP_ID": "batch", "OMPI_COMM_WORLD_RANK": "1",
           "OMPI_COMM_WORLD_SIZE": "4"}
    assert launch.detect(env)["launcher"] == "mpiexec"
    # a batch script's own shell (no job step) is not a launch: the plain start
    assert launch.detect({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"})["launcher"] == "none"


def test_torchrun_ranks_and_rendezvous():
    env = {"TORCHELASTIC_RUN_ID": "x", "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
           "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    rec = launch.detect(env)
    assert (rec["launcher"], rec["rank"], rec["size"], rec["master_addr"], rec["master_port"]) == \
        ("torchrun", 1, 2, "10.0.0.1", 29500)
    assert not launch.uses_mpi(rec)


def test_a_plain_start_is_one_process():
    rec = launch.detect({})
    assert (rec["launcher"], rec["rank"], rec["size"]) == ("none", 0, 1) and launch.uses_mpi(rec)


def _iface(name, address, prefix=24):
    return {"name": name, "address": address, "prefix": prefix}


def test_master_address_is_the_one_every_node_can_reach():
    lo = _iface("lo", "127.0.0.1", 8)
    rank0 = [lo, _iface("eth0", "192.168.1.10"), _iface("bond0", "10.10.0.1")]
    rank1 = [lo, _iface("bond0", "10.10.0.2")]
    rank2 = [lo, _iface("eth0", "192.168.1.12"), _iface("bond0", "10.10.0.3")]
    assert launch.master_address([rank0, rank1, rank2], ["a", "b", "c"]) == ("10.10.0.1", "bond0")
    # ranks on rank 0's own host do not count; one host only: the loopback
    assert launch.master_address([rank0, rank0], ["a", "a"]) == ("127.0.0.1", None)
    # no common subnet: rank 0's first address off the loopback
    assert launch.master_address([rank0, [lo, _iface("ib0", "172.16.0.2")]], ["a", "b"]) == \
        ("192.168.1.10", "eth0")
    assert launch.interface_towards(rank2, "10.10.0.1") == "bond0"
    assert launch.interface_towards([lo], "10.10.0.1") is None


def test_busy_time_is_the_union_of_the_intervals():
    assert ddp_hook.busy([]) == 0.0
    assert ddp_hook.busy([(0.0, 1.0), (2.0, 3.0)]) == pytest.approx(2.0)
    assert ddp_hook.busy([(0.0, 2.0), (1.0, 3.0), (1.5, 1.8)]) == pytest.approx(3.0)  # overlapping buckets
    assert ddp_hook.busy_before([(0.0, 2.0), (3.0, 5.0)], 4.0) == pytest.approx(3.0)
    assert ddp_hook.busy_before([(5.0, 6.0)], 4.0) == 0.0


def test_an_iteration_splits_into_hidden_and_exposed():
    # buckets handed over at 1, 2, 3 ms (3: the last, every gradient ready), each reduced in 1.5 ms
    s = ddp_hook.split([(1.0, 2.5), (2.0, 3.5), (3.0, 4.5)], ready=3.0)
    assert s["own"] == pytest.approx(3.5) and s["hidden"] == pytest.approx(2.0)
    assert s["exposed"] == pytest.approx(1.5)
    # one bucket: it starts when every gradient is ready, nothing hides
    assert ddp_hook.split([(3.0, 4.0)], ready=3.0) == {"own": 1.0, "hidden": 0.0, "exposed": 1.0}


def _iteration(own, hidden, buckets=((0, 100, 0.001), (1, 300, 0.002))):
    return {"own": own, "hidden": hidden, "exposed": own - hidden,
            "buckets": [{"index": i, "bytes": n, "duration": d} for i, n, d in buckets]}


def test_overlap_record_takes_each_iterations_last_rank():
    stat = {"median": 0.0}
    phases = {"compute": {"median": 0.010}, "wait": {"median": 0.001}, "allreduce": {"median": 0.002},
              "update": {"median": 0.003}, "total": stat}
    rank0 = [_iteration(0.004, 0.003), _iteration(0.006, 0.002)]
    rank1 = [_iteration(0.005, 0.001), _iteration(0.002, 0.002)]
    rec = ddp_hook.overlap_record(phases, [rank0, rank1], measured_step=0.020)
    # the rank whose reduction was shortest (it waited for no other): iteration 0 rank 0's 4 ms
    # (3 hidden), iteration 1 rank 1's 2 ms (all hidden)
    assert rec["allreduce_own"]["median"] == pytest.approx(0.003)
    assert rec["hidden"] == pytest.approx(0.0025)
    assert rec["ddp"]["overlapped_percent"] == pytest.approx(100 * 0.005 / 0.006)
    assert rec["ddp"]["exposed"]["mean"] == pytest.approx((0.001 + 0.0) / 2)
    assert (rec["ddp"]["buckets"], rec["ddp"]["bucket_bytes"]) == (2, [100, 300])
    assert rec["perfect_overlap_step"] == pytest.approx(max(0.010, 0.003) + 0.003)
    assert rec["could_gain"] == pytest.approx(0.020 - 0.013)
    assert rec["mode"] == "ddp" and rec["allreduce_exposed"] == 0.002
