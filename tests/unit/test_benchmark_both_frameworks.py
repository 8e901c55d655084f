"""benchmark_framework: both, through the real modules: chainermn_benchmark runs every count with
ChainerMN then PyTorch DDP (real mpiexec, real gloo), mnc_report writes one report that compares
them per p, with a plot of both."""

from __future__ import annotations

import json
import sys

import pytest
from test_chainermn_benchmark_module import ROOT, run_module
from test_chainermn_benchmark_module_report import png_size

pytestmark = pytest.mark.mpi


def test_one_report_compares_both_frameworks_per_p(tmp_path):
    (tmp_path / "hostfile").write_text("localhost slots=2\n")
    res = run_module({
        "chdir": str(ROOT), "python": sys.executable, "hostfile": str(tmp_path / "hostfile"),
        "framework": "both", "process_counts": [1, 2], "iterations": 8, "warmup": 2,
        "mpiexec_extra_args": ["--oversubscribe"],
        "extra_args": ["--unit", "50", "--batchsize", "16", "--sweep-iters", "2", "--p2p-bytes", "64K"],
        "environment": {"OMP_NUM_THREADS": "1"}, "timeout": 180,
    })
    assert not res.get("failed"), res.get("msg")
    runs = [(d["config"]["processes"], d["config"]["framework"]) for d in res["documents"]]
    assert runs == [(1, "chainer"), (1, "pytorch"), (2, "chainer"), (2, "pytorch")]
    # the module's own scaling is the first framework's (ChainerMN's)
    assert [s["processes"] for s in res["scaling"]] == [1, 2]

    rep = run_module({"documents": res["documents"], "dest": str(tmp_path / "reports"),
                      "timestamp": "20260101T000000Z", "link_gbps": 10}, module="mncluster.core.mnc_report")
    assert not rep.get("failed"), rep.get("msg")
    assert [s.split(":")[0] for s in rep["frameworks"]] == ["p = 1", "p = 2"]  # the play shows these
    run = tmp_path / "reports" / "20260101T000000Z"
    names = {p.name for p in run.iterdir()}
    assert {"p1.json", "p2.json", "p1-pytorch.json", "p2-pytorch.json", "frameworks.png"} <= names
    assert png_size(run / "frameworks.png")[0] > 500
    report = json.loads((run / "report.json").read_text())
    assert report["framework"] == "chainer" and list(report["frameworks"]) == ["pytorch"]
    pytorch = report["frameworks"]["pytorch"]
    assert [r["processes"] for r in pytorch["runs"]] == [1, 2] and pytorch["verdict"]["runs"]
    comp = report["framework_comparison"]
    rows = {(r["processes"], r["framework"]) for r in comp["rows"]}
    assert rows == {(1, "chainer"), (1, "pytorch"), (2, "chainer"), (2, "pytorch")}
    two = {r["framework"]: r for r in comp["rows"] if r["processes"] == 2}
    # in-training busbw against the same host MPI allreduce of L, each against its own ceiling at L
    assert two["chainer"]["ceiling_path"] == "host-mpi" and two["pytorch"]["ceiling_path"] == "gloo"
    assert two["chainer"]["host_mpi_busbw"] and two["pytorch"]["host_mpi_busbw"]
    assert two["chainer"]["busbw_over"] == "allreduce phase"
    assert two["pytorch"]["busbw_over"] == "reduction's own duration"
    md = (run / "report.md").read_text()
    assert md.startswith("# ChainerMN and PyTorch DDP scaling report")
    assert "## Frameworks compared" in md and "| 2 | PyTorch DDP |" in md and "| 2 | ChainerMN |" in md
    assert "PyTorch DDP's verdict:" in md and "![ChainerMN and PyTorch DDP per process count" in md
