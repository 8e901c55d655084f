"""module_utils/mnc_bench*.py: the sweep, slot checks and launcher lines (mnc_bench), a run's output
(mnc_bench_parse), the scaling maths and the report (mnc_bench_report, mnc_bench_markdown)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from ansible_collections.mncluster.core.plugins.module_utils import (
    mnc_bench,
    mnc_bench_markdown,
    mnc_bench_parse,
    mnc_bench_report,
)


@pytest.mark.parametrize(
    ("slots", "counts"),
    [
        (1, [1]),
        (2, [1, 2]),
        (3, [1, 2, 3]),
        (6, [1, 2, 4, 6]),
        (8, [1, 2, 4, 8]),
        (12, [1, 2, 4, 8, 12]),
        (64, [1, 2, 4, 8, 16, 32, 64]),
    ],
)
def test_process_count_sweep(slots, counts):
    assert mnc_bench.process_counts(slots) == counts


def test_process_count_sweep_needs_a_slot():
    with pytest.raises(ValueError):
        mnc_bench.process_counts(0)


def test_parse_hostfile():
    text = "# private network\n10.0.0.1 slots=2\n10.0.0.2 slots=2 max_slots=4  # node 2\n\nnode3\n"
    assert mnc_bench.parse_hostfile(text) == [("10.0.0.1", 2), ("10.0.0.2", 2), ("node3", 1)]
    with pytest.raises(ValueError, match="line 1: cannot read 'slots:2'"):
        mnc_bench.parse_hostfile("node slots:2\n")


def test_more_processes_than_slots_is_refused():
    msg = mnc_bench.check_process_counts([1, 2, 8], nodes=3, slots_per_node=2)
    assert msg == (
        "8 processes requested but there are only 6 slots (3 nodes x 2 slots per node); nothing was run"
    )
    assert mnc_bench.check_process_counts([1, 2, 4, 6], 3, 2) is None


def test_hostfile_must_hold_the_slots():
    hosts = [("a", 2), ("b", 1)]
    assert "b (slots=1) fewer than slots_per_node=2" in mnc_bench.check_process_counts([1], 2, 2, hosts)
    assert "lists 2 hosts but nodes is 3" in mnc_bench.check_process_counts([1], 3, 2, hosts)
    assert mnc_bench.check_process_counts([1, 2], 1, 2, hosts) is None
    assert "at least 1" in mnc_bench.check_process_counts([0], 1, 2)
    assert mnc_bench.check_process_counts([], 1, 2) == "process_counts is empty"


def test_weak_scaling_efficiency():
    rows = mnc_bench_report.scaling([(4, 3200.0), (1, 1000.0), (2, 1900.0)])
    assert [r["processes"] for r in rows] == [1, 2, 4]
    assert [r["ideal_samples_per_s"] for r in rows] == [1000.0, 2000.0, 4000.0]
    assert [r["efficiency"] for r in rows] == pytest.approx([1.0, 0.95, 0.8])
    assert [r["speedup"] for r in rows] == pytest.approx([1.0, 1.9, 3.2])
    assert {r["baseline_processes"] for r in rows} == {1}


def test_efficiency_without_p1_is_against_the_smallest_run():
    rows = mnc_bench_report.scaling([(2, 2000.0), (4, 3000.0)])
    assert rows[1]["efficiency"] == pytest.approx(0.75)  # 3000 / (4 * 2000 / 2)
    assert rows[0]["baseline_processes"] == 2


def test_command_lines():
    cmd = mnc_bench.train_argv(
        "/venv/bin/python",
        {"model": "mlp", "batchsize": None, "gpu": False, "iterations": 10, "double_buffering": True},
        ["--unit", "5"],
    )
    assert cmd == [
        "/venv/bin/python",
        "-m",
        "train",
        "--model",
        "mlp",
        "--iterations",
        "10",
        "--double-buffering",
        "--json-stdout",
        "--unit",
        "5",
    ]
    argv = mnc_bench.mpiexec_argv(
        "mpiexec",
        4,
        2,
        ["py"],
        hostfile="/h",
        export=["OMP_NUM_THREADS"],
        extra_args=["--mca", "btl", "tcp,self"],
        timeout=60,
        timeout_bin="/usr/bin/timeout",
    )
    assert argv == [
        "/usr/bin/timeout",
        "--kill-after=30",
        "120",
        "mpiexec",
        "-n",
        "4",
        "-hostfile",
        "/h",
        "--map-by",
        "ppr:2:node",
        "-x",
        "OMP_NUM_THREADS",
        "--mca",
        "btl",
        "tcp,self",
        "py",
    ]


def test_yield_when_idle_goes_before_the_users_mpiexec_flags():
    argv = mnc_bench.mpiexec_argv("mpiexec", 6, 2, ["py"], extra_args=["--mca", "btl", "tcp,self"],
                                  yield_when_idle=True)
    assert argv == ["mpiexec", "-n", "6", "--map-by", "ppr:2:node", "--mca", "mpi_yield_when_idle", "1",
                    "--mca", "btl", "tcp,self", "py"]
    assert "mpi_yield_when_idle" not in mnc_bench.mpiexec_argv("mpiexec", 6, 2, ["py"])


def test_parse_document():
    doc = {"schema": mnc_bench.SCHEMA, "x": 1}
    out = "train: starting\nMNCBENCH_JSON " + json.dumps(doc) + "\ntrain: done\n"
    assert mnc_bench_parse.parse_document(out) == doc
    with pytest.raises(ValueError, match="no 'MNCBENCH_JSON' line"):
        mnc_bench_parse.parse_document("train: crashed\n")
    with pytest.raises(ValueError, match="schema is 'other/2'"):
        mnc_bench_parse.parse_document('MNCBENCH_JSON {"schema": "other/2"}')


OPENMPI_ABORT = """\
[rank 1] Traceback (most recent call last):
[rank 1]   File "train/bench.py", line 10, in run
[rank 1] MemoryError
--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD
"""
OPENMPI_SIGNAL = """\
--------------------------------------------------------------------------
mpiexec noticed that process rank 3 with PID 0 on node node2 exited on signal 9 (Killed).
--------------------------------------------------------------------------
"""


def test_failing_rank_and_its_stderr():
    assert mnc_bench_parse.failing_rank(OPENMPI_ABORT) == 1
    assert mnc_bench_parse.stderr_tail(OPENMPI_ABORT, 1).splitlines()[-1] == "[rank 1] MemoryError"
    assert mnc_bench_parse.failing_rank(OPENMPI_SIGNAL) == 3
    assert "exited on signal 9" in mnc_bench_parse.stderr_tail(OPENMPI_SIGNAL, 3)
    assert mnc_bench_parse.failing_rank("ssh: connect to host node2: No route\n") is None
    ompi5 = "  Process name: [prterun-mnc-node1-4242@1,5]\n  Exit code:    1\n"
    assert mnc_bench_parse.failing_rank(ompi5) == 5


def make_doc(p, samples_per_s, allreduce_s, L=4_000_000):
    phases = {"compute": 0.010, "wait": 0.001 * p, "allreduce": allreduce_s, "update": 0.002}
    phases["total"] = sum(phases.values())
    stat = {
        k: {"median": v, "mean": v, "p95": v * 1.1, "min": v * 0.9, "max": v * 1.2} for k, v in phases.items()
    }
    busbw = None if p == 1 else 2 * L * (p - 1) / p / allreduce_s / 1e9
    return {
        "schema": mnc_bench.SCHEMA,
        "config": {
            "model": "mlp",
            "batchsize": 100,
            "communicator": "naive",
            "processes": p,
            "iterations": 50,
        },
        "environment": {
            "nodes": (p + 1) // 2,
            "chainer": "7.8.1",
            "mpi_library": "Open MPI v5.0.7",
            "device": "cpu",
        },
        "gradient": {"bytes": L, "arrays": 6},
        "phases": stat,
        "breakdown": stat,
        "imbalance": {"median": 0.0005},
        "throughput": {"samples_per_s": samples_per_s},
        "instrumentation": {"overhead_percent": 1.5, "estimated_overhead_percent": 0.25},
        "allreduce": {"bytes": L, "time": allreduce_s, "algbw": L / allreduce_s / 1e9, "busbw": busbw},
        "raw_allreduce": []
        if p == 1
        else [{"bytes": b, "busbw": 0.5 * b / (b + 1e5)} for b in (8, 1 << 20, 1 << 22, 1 << 23)],
        "p2p": []
        if p == 1
        else [{"kind": "inter-node", "bandwidth": 1.1}, {"kind": "intra-node", "bandwidth": 5.0}],
    }


def test_report_rows_and_markdown():
    docs = [make_doc(4, 3000.0, 0.008), make_doc(1, 1000.0, 0.0001), make_doc(2, 1900.0, 0.004)]
    report = mnc_bench_report.build_report(docs, {"timestamp": "20260101T000000Z", "launcher": "node1"})
    assert report["schema"] == "mncluster.report/1"
    assert [r["processes"] for r in report["runs"]] == [1, 2, 4]
    r4 = report["runs"][2]
    assert r4["efficiency"] == pytest.approx(0.75)
    assert r4["busbw"] == pytest.approx(2 * 4e6 * 3 / 4 / 0.008 / 1e9)
    assert r4["raw_allreduce_bytes"] == 1 << 22  # nearest swept size at or above L
    assert (r4["p2p_inter_node"], r4["p2p_intra_node"]) == (1.1, 5.0)
    md = mnc_bench_markdown.render_markdown(report, [("throughput.png", "Throughput")])
    assert "| 4 | 2 | 3000.0 | 4000.0 | 3.00x | 75.0% | +1.50% | 0.25% |" in md
    assert "| 1 | 0.10 | 40.000 | n/a |" in md  # busbw is n/a at p = 1
    assert "| 4 | 8.00 | 0.500 | 0.750 |" in md
    assert "![Throughput](throughput.png)" in md
    assert "Run `20260101T000000Z` on `node1`." in md


def test_report_names_nccl_and_transport_settings():
    docs = [make_doc(1, 1000.0, 0.0001), make_doc(2, 1900.0, 0.004)]
    for d in docs:
        nccl = {"network": ["IB"], "interfaces": ["IB:mlx5_0:1/IB"], "transports": ["NET/IB/0"]}
        d["environment"].update(nccl_version=21803, cudnn_enabled=True, nccl=nccl,
                                transport={"NCCL_SOCKET_IFNAME": "bond0", "OMPI_MCA_btl": None})
    md = mnc_bench_markdown.render_markdown(mnc_bench_report.build_report(docs))
    assert ("NCCL 21803: network IB, interfaces IB:mlx5_0:1/IB, channel transports NET/IB/0; "
            "cuDNN enabled.") in md
    assert "Transport settings the ranks were given: `NCCL_SOCKET_IFNAME=bond0`." in md


def test_report_says_where_every_job_is_pinned():
    docs = [make_doc(1, 1000.0, 0.0001), make_doc(2, 1900.0, 0.004)]
    pinned = {"btl_tcp_if_include": "10.0.0.0/24", "btl_tcp_if_exclude": None,
              "nccl_conf": {"NCCL_SOCKET_IFNAME": {"value": "=bond0", "file": "/etc/nccl.conf"}}}
    for d in docs:
        d["environment"]["network_pinning"] = pinned
    report = mnc_bench_report.build_report(docs)
    assert report["environment"]["network_pinning"] == pinned
    md = mnc_bench_markdown.render_markdown(report)
    assert ("Network pinning (every job): Open MPI TCP `btl_tcp_if_include=10.0.0.0/24`; "
            "NCCL sockets `NCCL_SOCKET_IFNAME==bond0` (/etc/nccl.conf).") in md
    for d in docs:
        d["environment"]["network_pinning"] = {"btl_tcp_if_include": None, "nccl_conf": {}}
    md = mnc_bench_markdown.render_markdown(mnc_bench_report.build_report(docs))
    assert "Open MPI TCP not pinned (every interface that is up); NCCL sockets not pinned" in md


def test_report_refuses_other_documents():
    with pytest.raises(ValueError, match="schema"):
        mnc_bench_report.build_report([{"schema": "x", "config": {"processes": 1}}])


def test_time_limit():
    assert mnc_bench.launcher_env(30) == {"MPIEXEC_TIMEOUT": "30"}
    assert mnc_bench.launcher_env(0) == {}
    assert mnc_bench_parse.timed_out(124, "", 5, 30)  # the backstop
    assert mnc_bench_parse.timed_out(
        110, "The user-provided time limit for job execution has been reached", 31, 30)
    assert mnc_bench_parse.timed_out(1, "", 30.5, 30)
    assert not mnc_bench_parse.timed_out(1, "[rank 1] train: error: x", 3, 30)


def test_report_says_how_the_gradients_were_proven_averaged():
    docs = [make_doc(1, 1000.0, 0.0001), make_doc(2, 1900.0, 0.004), make_doc(4, 3000.0, 0.008)]
    for d in docs:
        d["correctness"] = {"agree": True, "gradients": {"averaged": True, "relative_error": 0.0,
                                                         "distinguishes": True}}
    md = mnc_bench_markdown.render_markdown(mnc_bench_report.build_report(docs))
    assert ("Gradients averaged: every rank's reduced gradient was the mean of the ranks' local gradients "
            "(one extra iteration, checked against a separate MPI_Allreduce) and every rank ended with the "
            "same parameters at p = 1, 2, 4.") in md
    assert "could not have seen" not in md
    # ranks that agree but hold a sum, not a mean, are not correct; identical data is said
    docs[2]["correctness"]["gradients"]["averaged"] = False
    docs[1]["correctness"]["gradients"]["distinguishes"] = False
    report = mnc_bench_report.build_report(docs)
    assert [r["correct"] for r in report["runs"]] == [True, True, False]
    md = mnc_bench_markdown.render_markdown(report)
    assert "same parameters at p = 1, 2; **not** at p = [4]." in md
    assert "At p = [2] every rank computed the same local gradient" in md


def test_report_names_the_ceilings_not_measured_and_what_replaces_busbw_under_double_buffering():
    docs = [make_doc(1, 1000.0, 0.0001), make_doc(2, 1900.0, 0.004)]
    for d in docs:
        d["ceilings"] = {"rows": [], "reference": None, "repetition_rule": "repetitions: at least 10 at L",
                         "skipped": [{"path": "nccl", "reason": "no --gpu: NCCL reduces device memory only"}]}
    docs[1]["allreduce"].update(exposed_only=True, busbw=None, own_duration=0.030, busbw_own_duration=0.133)
    docs[1]["environment"]["shared_machines"] = [{"boot_id": "b", "hosts": ["n1", "n2"], "ranks": 2,
                                                  "usable_cpus": 1, "oversubscribed": True}]
    md = mnc_bench_markdown.render_markdown(mnc_bench_report.build_report(docs))
    assert "Not measured: `nccl`: no --gpu: NCCL reduces device memory only." in md
    assert "Repetitions: at least 10 at L." in md
    assert ("p = 2, double buffering: the allreduce phase (4.00 ms) is only the exposed wait for the "
            "previous reduction plus the launch, so no busbw is derived from it; the reduction's own "
            "duration on its stream (CUDA events) is 30.00 ms, busbw 0.133 GB/s, measured while it "
            "overlapped compute.") in md
    assert ("p = 2: nodes n1, n2 are one machine (the same kernel): 2 ranks on 1 CPUs, more ranks than "
            "CPUs.") in md


def test_report_names_every_ranks_host_and_gpu_and_whether_mpi_took_a_device_buffer():
    docs = [make_doc(1, 1000.0, 0.0001), make_doc(2, 1900.0, 0.004)]
    gpu = {"device": 0, "name": "NVIDIA H100", "pci_bus_id": "0000:1b:00.0"}
    gpus = [{"rank": 0, "host": "g1", "gpu": gpu}, {"rank": 1, "host": "g2", "gpu": gpu}]
    for d in docs:
        d["environment"].update(ranks=gpus[:d["config"]["processes"]], cuda_aware_mpi={
            "built_with_cuda_support": True, "device_buffer_allreduce": {"tried": True, "works": True}})
    md = mnc_bench_markdown.render_markdown(mnc_bench_report.build_report(docs))
    assert "(CUDA-aware: yes by ompi_info; a device-buffer MPI_Allreduce worked)." in md
    assert ("Ranks at p = 2: g1: 0 (NVIDIA H100 0000:1b:00.0); g2: 1 (NVIDIA H100 0000:1b:00.0).") in md
    for d in docs:
        d["environment"]["cuda_aware_mpi"] = {"built_with_cuda_support": False, "device_buffer_allreduce": {
            "tried": False, "works": None, "reason": "ompi_info says built_with_cuda_support=False"}}
    md = mnc_bench_markdown.render_markdown(mnc_bench_report.build_report(docs))
    assert ("(CUDA-aware: no by ompi_info; a device-buffer MPI_Allreduce was not tried (ompi_info says "
            "built_with_cuda_support=False)).") in md


def test_report_names_the_interfaces_mpi_uses_on_every_host():
    docs = [make_doc(1, 1000.0, 0.0001), make_doc(2, 1900.0, 0.004)]
    docs[1]["environment"]["mpi_tcp_interfaces"] = {"rule": "btl_tcp_if_include=10.0.0.0/24", "hosts": {
        "n1": [{"name": "eth1", "address": "10.0.0.1", "prefix": 24, "speed_mbps": 25000}],
        "n2": []}}
    md = mnc_bench_markdown.render_markdown(mnc_bench_report.build_report(docs))
    assert "TCP transport (" not in md  # one node
    docs[1]["environment"]["nodes"] = 2
    md = mnc_bench_markdown.render_markdown(mnc_bench_report.build_report(docs))
    assert ("Open MPI's TCP transport (`btl_tcp_if_include=10.0.0.0/24`) at p = 2: n1: eth1 (10.0.0.1/24, "
            "25 Gb/s); n2: **none**.") in md


def test_report_says_strong_scaling_when_the_global_batch_was_fixed():
    docs = [make_doc(1, 1000.0, 0.0001), make_doc(2, 1900.0, 0.004)]
    assert "100 samples per process per iteration (weak scaling)" in mnc_bench_markdown.render_markdown(
        mnc_bench_report.build_report(docs))
    for d in docs:
        d["config"].update(scaling="strong", global_batchsize=200)
    md = mnc_bench_markdown.render_markdown(mnc_bench_report.build_report(docs))
    assert "200 samples per iteration split over the processes (strong scaling: the global batch fixed)" in md


def test_report_states_the_held_out_accuracy():
    docs = [make_doc(1, 1000.0, 0.0001), make_doc(2, 1900.0, 0.004)]
    for d in docs:
        d["learning"] = {"before": {"loss": 2.0, "accuracy": 0.1}, "after": {"loss": 0.5, "accuracy": 0.8},
                         "validation": {"samples": 100, "before": {"loss": 2.1, "accuracy": 0.12},
                                        "after": {"loss": 0.6, "accuracy": 0.75}}}
    md = mnc_bench_markdown.render_markdown(mnc_bench_report.build_report(docs))
    assert ("Held-out samples, through ChainerMN's multi-node evaluator (each rank its shard, the mean over "
            "ranks), after the warm-up -> after the timed passes: p = 1: 100 samples, loss 2.1 (accuracy "
            "12%) -> 0.6 (accuracy 75%); p = 2: 100 samples") in md


@pytest.mark.parametrize(
    ("processes", "nodes", "per_node"),
    [(1, 1, 1), (2, 1, 2), (4, 2, 2), (5, 3, 2), (6, 3, 2)],
)
def test_srun_places_ranks_as_mpiexec_ppr_does(processes, nodes, per_node):
    """The fewest nodes that hold p ranks at 2 per node, filled in order (mpiexec's --map-by ppr:2:node)."""
    argv = mnc_bench.srun_argv("srun", processes, 2, ["py"])
    assert argv[:4] == ["srun", "--mpi=pmix", f"--nodes={nodes}", f"--ntasks={processes}"]
    assert f"--ntasks-per-node={per_node}" in argv
    assert "--distribution=block" in argv and "--kill-on-bad-exit=1" in argv
    assert argv[-1] == "py"


def test_srun_time_limit_gpus_and_user_flags():
    argv = mnc_bench.srun_argv("/usr/bin/srun", 4, 2, ["py", "-m", "train"], extra_args=["--partition=gpu"],
                               timeout=61, timeout_bin="/usr/bin/timeout", gpu=True)
    assert argv[:3] == ["/usr/bin/timeout", "--kill-after=30", "121"]  # the backstop, as for mpiexec
    assert "--time=2" in argv  # whole minutes, rounded up: never less than the module's timeout
    assert "--gpus-per-task=1" in argv
    assert argv[-4:] == ["--partition=gpu", "py", "-m", "train"]  # the user's flags before the program
    assert not any(a.startswith(("--time", "--gpus")) for a in mnc_bench.srun_argv("srun", 4, 2, ["py"]))
    assert "--time=15" in mnc_bench.srun_argv("srun", 4, 2, ["py"], timeout=900)


def test_launcher_environment_per_launcher():
    assert mnc_bench.launcher_env(30, "slurm") == {}  # srun has --time; MPIEXEC_TIMEOUT is mpiexec's
    assert mnc_bench.launcher_env(30, "slurm", yield_when_idle=True) == {"OMPI_MCA_mpi_yield_when_idle": "1"}
    assert mnc_bench.launcher_env(30, "mpiexec", yield_when_idle=True) == {"MPIEXEC_TIMEOUT": "30"}


def test_slurm_failures_and_time_limit_are_read():
    err = "srun: error: mnc-cluster-2: task 3: Exited with exit code 1\nsrun: Terminating StepId=12.0\n"
    assert mnc_bench_parse.failing_rank(err) == 3
    assert mnc_bench_parse.failing_rank("srun: error: node2: tasks 2-3: Killed\n") == 2
    assert mnc_bench_parse.timed_out(
        1, "slurmstepd: error: *** STEP 12.0 ON n1 CANCELLED AT 2026-12-03T09:00:00 "
           "DUE TO TIME LIMIT ***", 3, 900)


def test_report_says_how_ranks_started_and_names_each_job():
    docs = [make_doc(1, 1000.0, 0.0001), make_doc(2, 1900.0, 0.004)]
    for job, d in zip(("41", "42"), docs, strict=True):
        d["launch"] = {"launcher": "slurm", "command": ["srun", "py"]}
        d["environment"]["scheduler"] = {"name": "slurm", "job_id": job, "step_id": "0",
                                         "nodelist": "n[1-2]", "partition": "batch"}
    report = mnc_bench_report.build_report(docs)
    assert [(r["launcher"], r["job"]["job_id"]) for r in report["runs"]] == [("slurm", "41"), ("slurm", "42")]
    md = mnc_bench_markdown.render_markdown(report)
    assert ("Started by `srun --mpi=pmix` (one Slurm job per p); jobs: p = 1: Slurm job 41 on n[1-2], "
            "p = 2: Slurm job 42 on n[1-2].") in md
    for d in docs:
        d["launch"]["launcher"] = "mpiexec"
        del d["environment"]["scheduler"]
    md = mnc_bench_markdown.render_markdown(mnc_bench_report.build_report(docs))
    assert "Started by `mpiexec`." in md and "Slurm job" not in md
