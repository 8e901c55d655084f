"""mncluster.core.mnc_report and playbooks/benchmark.yml, run by real Ansible.

The report module gets documents from a real 2-process sweep (the
chainermn_benchmark module on the controller) and writes the files a user
opens: report.json, report.md, PNGs, and the ``latest`` link. The playbook
test runs the whole benchmark.yml against the controller as a one-node
``mnc_nodes`` group.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from ansible_env import run_playbook
from test_chainermn_benchmark_module import ROOT, run_module

pytestmark = pytest.mark.mpi

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    (d / "hostfile").write_text("localhost slots=2\n")
    res = run_module(
        {
            "chdir": str(ROOT),
            "python": sys.executable,
            "hostfile": str(d / "hostfile"),
            "iterations": 8,
            "warmup": 2,
            "mpiexec_extra_args": ["--oversubscribe"],
            "extra_args": ["--unit", "50", "--batchsize", "16", "--sweep-iters", "2", "--p2p-bytes", "64K"],
            "environment": {"OMP_NUM_THREADS": "1"},
            "timeout": 120,
        }
    )
    assert not res.get("failed"), res.get("msg")
    return res["documents"]


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_MAGIC, f"{path} is not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_report_files_and_latest_link(documents, tmp_path):
    res = run_module(
        {
            "documents": documents,
            "dest": str(tmp_path),
            "timestamp": "20260101T000000Z",
            "launcher": "node1",
            "link_gbps": 10,
        },
        module="mncluster.core.mnc_report",
    )
    assert not res.get("failed"), res.get("msg")
    run = tmp_path / "20260101T000000Z"
    assert os.readlink(tmp_path / "latest") == "20260101T000000Z"
    names = sorted(p.name for p in run.iterdir())
    assert names == [
        "bandwidth.png",
        "p1.json",
        "p2.json",
        "phases.png",
        "report.json",
        "report.md",
        "throughput.png",
        "trace.json",
    ]
    # one Chrome trace: every run's ranks as rows, every phase of every iteration
    trace = json.loads((run / "trace.json").read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"}
    hosts = [(d["config"]["processes"], d["environment"]["hosts"]) for d in documents]
    expected = [(p, r, h) for p, hs in hosts for r, h in enumerate(hs)]
    assert names == {f"p={p} rank {r} ({h})" for p, r, h in expected}
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == (1 + 2) * 8 * 4 and all(e["dur"] >= 0 for e in spans)
    for png in ("throughput.png", "phases.png", "bandwidth.png"):
        w, h = png_size(run / png)
        assert w >= 600 and h >= 400
    report = json.loads((run / "report.json").read_text())
    assert report["schema"] == "mncluster.report/1"
    assert [r["processes"] for r in report["runs"]] == [1, 2]
    t1, t2 = (d["throughput"]["samples_per_s"] for d in documents)
    assert report["runs"][1]["efficiency"] == pytest.approx(t2 / (2 * t1))
    md = (run / "report.md").read_text()
    for heading in (
        "## Throughput and scaling efficiency",
        "## Where an iteration's time goes",
        "## Allreduce bandwidth against its ceilings",
    ):
        assert heading in md
    assert "![Throughput and scaling efficiency vs processes](throughput.png)" in md
    assert "[trace.json](trace.json)" in md
    assert f"| 2 | 1 | {t2:.1f} | {2 * t1:.1f} |" in md
    # the verdict leads, per p, and says what the model is
    head = md.split("## Throughput")[0]
    assert "## Verdict" in head and "* p = 2 (1 node): allreduce is" in head and "Model of a step:" in head
    assert "same size" not in md
    verdict = report["verdict"]
    assert verdict["link_gbps"] == 10 and [v["processes"] for v in verdict["runs"]] == [1, 2]
    assert verdict["runs"][1]["percent_of_ceiling"] is not None
    assert verdict["runs"][1]["ceiling_path"] == "host-mpi"
    assert all(r["correct"] is True for r in report["runs"])
    assert res["runs"][1]["verdict"].startswith("p = 2 (1 node): allreduce is")

    # a second report, against the first, moves latest and leaves the first alone
    res = run_module(
        {"documents": documents, "dest": str(tmp_path), "timestamp": "T2", "baseline": str(run)},
        module="mncluster.core.mnc_report",
    )
    assert not res.get("failed"), res.get("msg")
    assert os.readlink(tmp_path / "latest") == "T2"
    assert (run / "report.md").exists()
    comparison = res["comparison"]
    assert comparison["baseline"] == "20260101T000000Z"
    assert {r["processes"] for r in comparison["rows"]} == {1, 2}
    assert all(r["change_percent"] == pytest.approx(0.0) for r in comparison["rows"])  # same documents
    assert comparison["drops"] == [] and "no figure dropped" in comparison["summary"]
    assert "## Against the baseline (20260101T000000Z)" in (tmp_path / "T2" / "report.md").read_text()
    bad = run_module(
        {"documents": documents, "dest": str(tmp_path), "timestamp": "T3", "baseline": str(tmp_path / "no")},
        module="mncluster.core.mnc_report",
    )
    assert bad["failed"] is True and "is not a report this module wrote" in bad["msg"]


def test_report_check_mode_writes_nothing(documents, tmp_path):
    res = run_module(
        {"documents": documents, "dest": str(tmp_path / "r"), "timestamp": "T"},
        check=True,
        module="mncluster.core.mnc_report",
    )
    assert res["changed"] is True
    assert str(tmp_path / "r" / "T" / "report.md") in res["files"]
    assert not (tmp_path / "r").exists()


def test_report_refuses_what_is_not_a_document(tmp_path):
    res = run_module(
        {"documents": [{"schema": "x"}], "dest": str(tmp_path), "timestamp": "T"},
        module="mncluster.core.mnc_report",
    )
    assert res["failed"] is True
    assert "not benchmark documents" in res["msg"]


def test_benchmark_playbook_on_a_one_node_cluster(tmp_path):
    (tmp_path / "hostfile").write_text("localhost slots=2\n")
    inventory = {
        "mnc_nodes": {
            "hosts": {
                "localhost": {
                    "ansible_connection": "local",
                    "ansible_python_interpreter": sys.executable,
                    "mnc_mpi_user": os.environ.get("USER", "root"),
                    "mnc_work_dir": str(tmp_path / "work"),
                    "mnc_hostfile": str(tmp_path / "hostfile"),
                    "mnc_python": sys.executable,
                    "mnc_slots_per_node": 2,
                    "mnc_use_gpu": False,
                }
            }
        }
    }
    (tmp_path / "hosts.yml").write_text(json.dumps(inventory))
    extra = {
        "benchmark_become": False,
        "benchmark_program_dir": str(tmp_path / "lib"),
        "benchmark_iterations": 8,
        "benchmark_warmup": 2,
        "benchmark_mpiexec_extra_args": ["--oversubscribe"],
        "benchmark_report_root": str(tmp_path / "reports"),
        "benchmark_extra_args": [
            "--unit",
            "50",
            "--batchsize",
            "16",
            "--sweep-iters",
            "2",
            "--p2p-bytes",
            "64K",
        ],
    }
    env = {
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.default",  # none but the stdout one
    }

    def playbook(**more):
        proc, _ = run_playbook("playbooks/benchmark.yml", "-e", json.dumps({**extra, **more}),
                               inventory=tmp_path / "hosts.yml", env=env, timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.tail(6000)
        return proc

    proc = playbook()
    # progress: one line per process count
    assert "(item=p=1)" in proc.stdout and "(item=p=2)" in proc.stdout
    # the train package reached the node, sources only, root's own (outside the MPI user's home)
    train = tmp_path / "lib" / "train"
    assert sorted(p.name for p in train.iterdir()) == sorted(p.name for p in (ROOT / "train").glob("*.py"))
    assert {(p.stat().st_uid, p.stat().st_mode & 0o022) for p in [train, *train.iterdir()]} == {(0, 0)}
    latest = tmp_path / "reports" / "latest"
    assert latest.is_symlink()
    report = json.loads((latest / "report.json").read_text())
    assert [r["processes"] for r in report["runs"]] == [1, 2]
    assert report["meta"]["launcher"] == "localhost"
    assert report["verdict"]["headline"] and "p = 2" in report["verdict"]["headline"][0]
    assert "p=2: " in proc.stdout and "allreduce is" in proc.stdout  # the summary says the verdict
    # nccl-tests beside the in-training busbw (benchmark_verify_json): a CPU cluster says why there is none
    assert report["nccl_tests"]["missing"] == "nccl-tests: not run on this cluster (no GPU)"
    assert report["nccl_tests"]["source"]["path"] == f"{tmp_path}/reports/verify-latest/verify.json"
    assert "* nccl-tests: not run on this cluster (no GPU)." in (latest / "report.md").read_text()
    for png in ("throughput.png", "phases.png", "bandwidth.png"):
        png_size(latest / png)
    first = os.readlink(latest)

    # As site.yml runs it: the same cluster and settings are not measured again...
    again = playbook(benchmark_only_when_changed=True)
    assert "not measuring again" in again.stdout and "(item=p=1)" not in again.stdout
    assert os.readlink(latest) == first
    # ...but other settings are.
    changed = playbook(benchmark_only_when_changed=True, benchmark_iterations=6)
    assert "(item=p=1)" in changed.stdout and "not measuring again" not in changed.stdout
    remeasured = json.loads((latest / "report.json").read_text())
    assert remeasured["meta"]["cluster_state"] != report["meta"]["cluster_state"]


def _one_node(tmp_path, slots, python):
    (tmp_path / "hostfile").write_text(f"localhost slots={slots}\n")
    node = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "mnc_mpi_user": os.environ.get("USER", "root"),
        "mnc_work_dir": str(tmp_path / "work"),
        "mnc_hostfile": str(tmp_path / "hostfile"),
        "mnc_python": python,
        "mnc_use_gpu": False,
    }
    (tmp_path / "hosts.yml").write_text(json.dumps({"mnc_nodes": {"hosts": {"localhost": node}}}))


def _failing_python(tmp_path, size):
    """The controller's Python, except in a job of ``size`` ranks: those fail at once, named."""
    wrapper = tmp_path / "python"
    wrapper.write_text(
        f'#!/bin/sh\nif [ "$OMPI_COMM_WORLD_SIZE" = {size} ]; then\n'
        f'  echo "mnc-test: injected failure in a job of {size} ranks" >&2; exit 3\nfi\n'
        f'exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def _benchmark(tmp_path, **extra):
    args = {
        "benchmark_become": False,
        "benchmark_program_dir": str(tmp_path / "lib"),
        "benchmark_iterations": 6,
        "benchmark_warmup": 2,
        "benchmark_mpiexec_extra_args": ["--oversubscribe"],
        "benchmark_report_root": str(tmp_path / "reports"),
        "benchmark_extra_args": ["--unit", "50", "--batchsize", "16", "--sweep-iters", "2",
                                 "--p2p-bytes", "64K"],
        **extra,
    }
    env = {"ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.default",  # none but the stdout one
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}  # fmt: skip
    proc, _ = run_playbook("playbooks/benchmark.yml", "-e", json.dumps(args),
                           inventory=tmp_path / "hosts.yml", env=env, timeout=600)  # fmt: skip
    return proc


@pytest.mark.battery("fault: a count failing mid-sweep leaves a report named partial, latest untouched",
                     bound_s=300)  # fmt: skip
def test_a_sweep_stopped_part_way_writes_a_report_named_partial(tmp_path):
    """p = 1, 2, 4 planned; p = 2 fails: p = 1's figures are kept in a report that says it is
    partial (its directory, title, first lines and report.json), reports/latest is not moved to
    it, p = 4 is not run, and the play fails naming p = 2 and its error."""
    _one_node(tmp_path, 4, _failing_python(tmp_path, 2))
    proc = _benchmark(tmp_path)
    out = proc.stdout  # Ansible's stderr too (ansible-runner runs it on a terminal)
    assert proc.returncode != 0, out[-4000:]
    assert "(item=p=1)" in out and "(item=p=4)" not in out, out[-4000:]
    assert "benchmark: the sweep stopped at p=2" in out and "injected failure in a job of 2 ranks" in out
    assert "PARTIAL report of p=1 only" in out and "Not run: p=4." in out, out[-4000:]
    reports = tmp_path / "reports"
    made = sorted(p.name for p in reports.iterdir())
    assert len(made) == 1 and made[0].endswith("-partial"), made  # no reports/latest
    run = reports / made[0]
    report = json.loads((run / "report.json").read_text())
    assert report["partial"]["failed_processes"] == 2 and report["partial"]["not_run"] == [4]
    assert report["partial"]["measured"] == [1]
    assert [r["processes"] for r in report["runs"]] == [1]
    assert "cluster_state" not in report["meta"]  # not a measurement site.yml would skip on
    md = (run / "report.md").read_text().splitlines()
    assert md[0] == "# ChainerMN scaling report (PARTIAL: the sweep stopped at p = 2)", md[:3]
    assert md[2].startswith("**Partial report, not a complete sweep.** The run with p = 2 failed")
    assert "not run: p = 4" in md[2]
    assert str(run / "report.md") in out


@pytest.mark.battery("fault: the first count failing writes no report, named", bound_s=300)
def test_a_sweep_that_fails_at_its_first_count_writes_no_report(tmp_path):
    _one_node(tmp_path, 2, _failing_python(tmp_path, 1))
    proc = _benchmark(tmp_path)
    out = proc.stdout  # Ansible's stderr too (ansible-runner runs it on a terminal)
    assert proc.returncode != 0, out[-4000:]
    assert "benchmark: the sweep stopped at p=1" in out and "injected failure in a job of 1 ranks" in out
    assert "Nothing was measured before it: no report." in out and "Not run: p=2." in out, out[-4000:]
    assert not (tmp_path / "reports").exists()
