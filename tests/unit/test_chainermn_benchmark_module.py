"""mncluster.core.chainermn_benchmark run by real Ansible with a real mpiexec.

The controller is a one-node "cluster": a hostfile ``localhost slots=2``, the
controller's venv Python, and ``--oversubscribe`` (two cores, run as root).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import ansible_env
import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_module(
    args: dict, check: bool = False, module: str = "mncluster.core.chainermn_benchmark", timeout: int = 300
) -> dict:
    env = {
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return ansible_env.run_module(module, args, *(["--check"] if check else []), timeout=timeout, env=env)


@pytest.fixture
def cluster(tmp_path):
    """Module arguments for the controller as a one-node, two-slot cluster."""
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("localhost slots=2\n")
    return {
        "chdir": str(ROOT),
        "python": sys.executable,
        "hostfile": str(hostfile),
        "iterations": 8,
        "warmup": 2,
        "extra_args": ["--unit", "50", "--batchsize", "16", "--sweep-iters", "2", "--p2p-bytes", "64K"],
        "mpiexec_extra_args": ["--oversubscribe"],
        "environment": {"OMP_NUM_THREADS": "1"},
        "timeout": 120,
        "out_dir": str(tmp_path / "out"),
    }


def test_check_mode_plans_and_runs_nothing(cluster, tmp_path):
    res = run_module(cluster, check=True)
    assert not res.get("failed"), res
    assert res["changed"] is False
    assert res["process_counts"] == [1, 2]
    cmd = res["commands"][1]
    assert cmd[cmd.index("-n") + 1] == "2"
    assert cmd[cmd.index("--map-by") + 1] == "ppr:2:node"
    assert cmd[cmd.index("-hostfile") + 1] == cluster["hostfile"]
    assert cmd[-len(cluster["extra_args"]) :] == cluster["extra_args"]
    assert "documents" not in res
    assert not (tmp_path / "out").exists()


def test_both_frameworks_run_each_count_chainer_then_pytorch(cluster):
    res = run_module({**cluster, "framework": "both", "communicator": "gloo"}, check=True)
    assert not res.get("failed"), res
    assert res["process_counts"] == [1, 2]
    commands = res["commands"]
    assert len(commands) == 4
    for cmd, (p, framework) in zip(
        commands, [(1, "chainer"), (1, "pytorch"), (2, "chainer"), (2, "pytorch")], strict=True
    ):
        assert cmd[cmd.index("-n") + 1] == str(p)
        train = cmd[cmd.index("train") + 1 :]
        # ChainerMN keeps its command line (no --framework: the default); gloo is PyTorch's alone
        assert ("--framework" in train) == (framework == "pytorch")
        assert ("--communicator" in train) == (framework == "pytorch")
        if framework == "pytorch":
            assert train[train.index("--framework") + 1] == "pytorch"
            assert train[train.index("--communicator") + 1] == "gloo"


def test_a_communicator_of_the_other_framework_is_refused(cluster, tmp_path):
    res = run_module({**cluster, "framework": "pytorch", "communicator": "naive"}, check=True)
    assert res.get("failed") and "communicator naive is not one of pytorch's: gloo or nccl" in res["msg"], res
    res = run_module({**cluster, "communicator": "gloo"}, check=True)
    assert res.get("failed") and "communicator gloo is not one of chainer's" in res["msg"], res
    assert not (tmp_path / "out").exists()


def test_yield_when_idle_reaches_mpiexec(cluster):
    res = run_module({**cluster, "mpi_yield_when_idle": True}, check=True)
    cmd = res["commands"][1]
    i = cmd.index("mpi_yield_when_idle")
    assert cmd[i - 1 : i + 2] == ["--mca", "mpi_yield_when_idle", "1"]
    res = run_module(cluster, check=True)
    assert "mpi_yield_when_idle" not in res["commands"][1]


def test_default_sweep_for_three_nodes_of_two_slots(cluster, tmp_path):
    hostfile = tmp_path / "hostfile3"
    hostfile.write_text("10.0.0.1 slots=2\n10.0.0.2 slots=2\n10.0.0.3 slots=2\n")
    res = run_module({**cluster, "hostfile": str(hostfile)}, check=True)
    assert res["process_counts"] == [1, 2, 4, 6]


@pytest.mark.battery("bad input: more benchmark processes than slots runs nothing", bound_s=150)
def test_more_processes_than_slots_runs_nothing(cluster, tmp_path):
    res = run_module({**cluster, "process_counts": [1, 4]})
    assert res["failed"] is True
    assert res["msg"] == (
        "4 processes requested but there are only 2 slots (1 nodes x 2 slots per node); nothing was run"
    )
    assert not (tmp_path / "out").exists()


def test_hostfile_with_fewer_slots_than_asked(cluster, tmp_path):
    (tmp_path / "hostfile").write_text("localhost slots=1\n")
    res = run_module({**cluster, "slots_per_node": 2})
    assert res["failed"] is True
    assert "localhost (slots=1) fewer than slots_per_node=2" in res["msg"]


def test_unknown_model_and_communicator_are_refused(cluster):
    res = run_module({**cluster, "model": "vgg16"})
    assert res["failed"] is True
    assert "value of model must be one of: mlp, resnet50, got: vgg16" in res["msg"]
    res = run_module({**cluster, "communicator": "hierarchical"})
    assert "value of communicator must be one of" in res["msg"]


def test_missing_python_or_mpiexec_runs_nothing(cluster, tmp_path):
    res = run_module({**cluster, "python": "/no/venv/bin/python"})
    assert res["msg"] == "python /no/venv/bin/python is not an executable on this node; nothing was run"
    res = run_module({**cluster, "mpiexec": "no-such-mpiexec"})
    assert res["msg"] == "no-such-mpiexec is not on PATH here (set mpiexec to its full path); nothing was run"
    assert not (tmp_path / "out").exists()


def test_slurm_launcher_plans_one_srun_job_per_count(cluster):
    res = run_module(
        {
            **cluster,
            "launcher": "slurm",
            "srun": "/bin/true",
            "gpu": False,
            "srun_extra_args": ["--partition=batch"],
        },
        check=True,
    )
    assert not res.get("failed"), res
    one, two = res["commands"]
    assert one[one.index("/bin/true") :][:4] == ["/bin/true", "--mpi=pmix", "--nodes=1", "--ntasks=1"]
    assert "--ntasks=2" in two and "--ntasks-per-node=2" in two and "--time=2" in two  # timeout 120 s
    assert two[two.index("--partition=batch") + 1 :][:3] == [cluster["python"], "-m", "train"]
    assert "mpiexec" not in " ".join(two) and "--oversubscribe" not in two  # mpiexec's flags are mpiexec's


def test_slurm_launcher_without_srun_runs_nothing(cluster, tmp_path):
    res = run_module({**cluster, "launcher": "slurm", "srun": "no-such-srun"})
    assert res["msg"] == "no-such-srun is not on PATH here (set srun to its full path); nothing was run"
    assert not (tmp_path / "out").exists()


def test_check_mode_only_warns_about_what_earlier_tasks_install(cluster, tmp_path):
    # In a --check run of the whole playbook the copy and the virtualenv have not happened.
    res = run_module({**cluster, "chdir": str(tmp_path), "python": "/no/venv/bin/python"}, check=True)
    assert not res.get("failed"), res
    assert res["process_counts"] == [1, 2]
    assert any("holds no train package" in w for w in res["warnings"])
    assert any("/no/venv/bin/python is not an executable" in w for w in res["warnings"])


def test_directory_without_the_train_package(cluster, tmp_path):
    res = run_module({**cluster, "chdir": str(tmp_path)})
    assert res["failed"] is True
    assert "holds no train package" in res["msg"]


@pytest.mark.mpi
def test_sweep_returns_documents_and_efficiency(cluster, tmp_path):
    res = run_module(cluster)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is True
    docs = res["documents"]
    assert [d["config"]["processes"] for d in docs] == [1, 2]
    assert all(d["schema"] == "mncluster.benchmark/1" for d in docs)
    t1, t2 = (d["throughput"]["samples_per_s"] for d in docs)
    s1, s2 = res["scaling"]
    assert (s1["efficiency"], s1["speedup"]) == (1.0, 1.0)
    assert s2["efficiency"] == pytest.approx(t2 / (2 * t1))
    assert s2["ideal_samples_per_s"] == pytest.approx(2 * t1)
    assert sorted(res["files"]) == [str(tmp_path / "out" / "p1.json"), str(tmp_path / "out" / "p2.json")]
    assert json.loads((tmp_path / "out" / "p2.json").read_text()) == docs[1]


@pytest.mark.mpi
def test_missing_data_path_fails_every_rank_before_training(cluster):
    res = run_module({**cluster, "data": "/no/such/mnist.npz", "process_counts": [2]})
    assert res["failed"] is True
    assert res["failed_rank"] in (0, 1)
    assert (
        f"[rank {res['failed_rank']}] python -m train: error: data path /no/such/mnist.npz does not exist"
        in (res["msg"])
    )
    assert "MNCBENCH_JSON" not in res["stdout"]


@pytest.mark.mpi
@pytest.mark.battery("fault: a crashing rank is named with its stderr", bound_s=150)
def test_a_crashing_rank_fails_with_its_stderr(cluster, tmp_path):
    # An IDX file whose header passes the pre-MPI check but whose payload is cut short.
    header = bytes([0, 0, 8, 3]) + (50).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2
    (tmp_path / "train-images-idx3-ubyte").write_bytes(header + bytes(100))
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(
        bytes([0, 0, 8, 1]) + (50).to_bytes(4, "big") + bytes(50)
    )
    res = run_module({**cluster, "data": str(tmp_path / "train-images-idx3-ubyte"), "process_counts": [2]})
    assert res["failed"] is True
    assert res["failed_processes"] == 2
    assert res["failed_rank"] in (0, 1)
    assert "the run with 2 processes failed" in res["msg"]
    assert f"[rank {res['failed_rank']}] train: error:" in res["msg"] and "truncated" in res["msg"]


@pytest.mark.mpi
@pytest.mark.battery("fault: a hung rank is killed at benchmark_timeout and named", bound_s=150)
def test_a_hanging_rank_is_killed_at_the_timeout(cluster, tmp_path):
    # Rank 1 never starts Python: rank 0 waits for it in MPI_Init forever.
    wrapper = tmp_path / "python"
    wrapper.write_text(
        f'#!/bin/sh\nif [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec sleep 317; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    start = time.monotonic()
    res = run_module({**cluster, "python": str(wrapper), "process_counts": [2], "timeout": 10}, timeout=120)
    elapsed = time.monotonic() - start
    assert res["failed"] is True
    assert "did not finish within 10 s and was killed" in res["msg"]
    assert res["rc"] != 0
    assert elapsed < 60
    # mpiexec took the job down itself (MPIEXEC_TIMEOUT): no rank is left behind
    assert shutil.which("pgrep"), "pgrep (procps) is needed to look for leftover ranks"
    time.sleep(1)
    leftover = subprocess.run(["pgrep", "-f", "sleep 317"], capture_output=True, text=True)
    assert leftover.stdout.strip() == ""
