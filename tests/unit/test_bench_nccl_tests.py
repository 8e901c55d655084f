"""nccl-tests beside the in-training busbw (module_utils/mnc_bench_nccl.py): a recorded real
all_reduce_perf (tests/unit/fixtures/gpu/) judged by verify into a verify.json, read by the
benchmark's report (mncluster.core.mnc_report, run by real Ansible) into report.json and report.md;
the size nearest L, the percentage, and the cases without a result (no GPU, no verify.json, other
nodes, nccl-tests not run), each said in one line and never with a number."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ansible_collections.mncluster.core.plugins.module_utils import (
    mnc_bench_markdown,
    mnc_bench_nccl,
    mnc_bench_report,
    mnc_nccl_tests,
    mnc_verdict,
    mnc_verify,
)
from test_chainermn_benchmark_module import run_module
from test_mnc_verdict import make_doc, stat
from test_verify_gpu_health import gpu_node, ran

FIXTURES = Path(__file__).parent / "fixtures" / "gpu"
PERF = "all_reduce_perf-2x8-h100.txt"
L = 7_180_000  # the MLP's gradient, 7.18 MB: between nccl-tests' 4 MiB and 8 MiB rows, nearer 8 MiB
STAMP = "20260102T030405Z"


def by_size():
    return mnc_nccl_tests.by_size(mnc_nccl_tests.parse_perf((FIXTURES / PERF).read_text()))


@pytest.mark.parametrize(
    ("nbytes", "nearest"),
    [
        (L, 8 << 20),  # 1.2 MB from 8 MiB, 3.0 MB from 4 MiB
        (5_000_000, 4 << 20),  # nearer 4 MiB: the nearest, not the next above
        (6 << 20, 8 << 20),  # half way: the larger size
        (102_228_384, 128 << 20),  # ResNet-50's 102 MB: 128 MiB (26 MB off) before 64 MiB (35 MB off)
        (64 << 30, 8 << 30),  # above the largest size: the largest
        (1, 8),  # below the smallest: the smallest
    ],
)
def test_the_row_nearest_L(nbytes, nearest):
    assert mnc_bench_nccl.nearest_size(by_size(), nbytes)["bytes"] == nearest


def test_figures_at_L_and_the_peak():
    f = mnc_bench_nccl.figures({"by_size": by_size()}, L)
    # the better of out-of-place (27.50) and in-place (27.91) at 8 MiB, as verify.json keeps it
    assert f["at_L"] == {"bytes": 8 << 20, "busbw": 27.91, "algbw": 14.89}
    assert f["peak"] == {"bytes": 8 << 30, "busbw": 338.82, "algbw": 180.71}
    assert mnc_bench_nccl.figures({"by_size": []}, L) is None
    assert mnc_bench_nccl.figures(None, L) is None


# -- through verify.json ------------------------------------------------------------------------
def faster_node_text():
    """The same run with a faster 8 MiB row: tells the two nodes apart."""
    return (FIXTURES / PERF).read_text().replace("571.9   14.67   27.50", "571.9   24.00   45.00").replace(
        "563.5   14.89   27.91", "563.5   24.50   46.00")


def write_verify(root: Path, nodes, cluster_run) -> Path:
    """verify.json as playbooks/verify.yml writes it: verify's evaluate() over the nodes' runs, in
    <root>/verify-<time>/, with <root>/verify-latest pointing there."""
    result = mnc_verify.evaluate(nodes, None, None, None, 400, 0.5, False, nccl_tests=cluster_run)
    run_dir = root / f"verify-{STAMP}"
    run_dir.mkdir(parents=True)
    (run_dir / "verify.json").write_text(json.dumps(result, indent=1) + "\n")
    (root / "verify-latest").symlink_to(run_dir.name)
    return root / "verify-latest" / "verify.json"


@pytest.fixture
def verify_json(tmp_path):
    g1 = gpu_node("g1", nccl={"rc": 0, "stdout": faster_node_text(), "stderr": ""})
    return write_verify(tmp_path / "reports", [g1, gpu_node("g2")], ran(PERF))


def busbw_time(p, busbw):
    """The allreduce time that gives ``busbw`` GB/s at p ranks."""
    return 2 * L * (p - 1) / p / (busbw * 1e9)


def gpu_documents(device="cuda (NVIDIA H100 80GB HBM3)"):
    """p = 1; p = 8 on one node at 23 GB/s; p = 16 on two nodes at 75% of 27.91 GB/s."""
    docs = [make_doc(1, 1, nbytes=L),
            make_doc(8, 1, allreduce=busbw_time(8, 23.0), nbytes=L),
            make_doc(16, 2, allreduce=busbw_time(16, 0.75 * 27.91), nbytes=L)]
    for d in docs:
        d["instrumentation"] = {"overhead_percent": 0.5, "rounds": [{"iterations": 5, "plain_wall": 1.0}]}
        d["throughput"]["samples_per_s"] = 100.0 * d["config"]["processes"]
        d["imbalance"] = stat(0.0)
        d["environment"]["device"] = device
    return docs


def report_of(docs, path, nodes=("g1", "g2"), launcher="g1"):
    """What mncluster.core.mnc_report does, without Ansible."""
    rep = mnc_bench_report.build_report(docs, {"timestamp": "20260103T000000Z", "launcher": launcher})
    gpu = str(rep["environment"].get("device") or "cpu").startswith("cuda")
    verify, real, stamp, error = mnc_bench_nccl.load_verify_json(path)
    rep["nccl_tests"] = mnc_bench_nccl.yardstick(verify, real, stamp, L, gpu, nodes=list(nodes), error=error)
    mnc_bench_nccl.apply(rep, rep["nccl_tests"])
    rep["verdict"] = mnc_verdict.assess(rep)
    return rep, mnc_bench_markdown.render_markdown(rep)


def test_the_recorded_run_reaches_report_json_and_report_md(verify_json, tmp_path):
    res = run_module(
        {"documents": gpu_documents(), "dest": str(tmp_path / "reports"), "timestamp": "20260103T000000Z",
         "launcher": "g1", "plots": False, "verify_json": str(verify_json), "cluster_nodes": ["g1", "g2"]},
        module="mncluster.core.mnc_report",
    )
    assert not res.get("failed"), res.get("msg")
    run = tmp_path / "reports" / "20260103T000000Z"
    report = json.loads((run / "report.json").read_text())
    nt = report["nccl_tests"]
    real = str((tmp_path / "reports" / f"verify-{STAMP}" / "verify.json").resolve())
    assert nt["source"] == {"path": real, "time": STAMP}
    assert nt["gradient_bytes"] == L and nt["missing"] is None
    assert nt["cluster"] == {"at_L": {"bytes": 8 << 20, "busbw": 27.91, "algbw": 14.89},
                             "peak": {"bytes": 8 << 30, "busbw": 338.82, "algbw": 180.71}}
    assert nt["nodes"]["g1"]["at_L"] == {"bytes": 8 << 20, "busbw": 46.0, "algbw": 24.5}
    assert nt["nodes"]["g2"]["at_L"]["busbw"] == 27.91
    runs = {r["processes"]: r for r in report["runs"]}
    assert runs[1]["nccl_tests_busbw"] is None and runs[1]["busbw_percent_of_nccl_tests"] is None
    # one node: the launcher's own run; across nodes: the cluster's run
    assert (runs[8]["nccl_tests_run"], runs[8]["nccl_tests_busbw"]) == ("g1", 46.0)
    assert runs[8]["busbw_percent_of_nccl_tests"] == pytest.approx(50.0)
    assert (runs[16]["nccl_tests_run"], runs[16]["nccl_tests_bytes"]) == ("cluster", 8 << 20)
    assert runs[16]["busbw_percent_of_nccl_tests"] == pytest.approx(75.0)
    assert runs[16]["nccl_tests_peak_busbw"] == 338.82
    verdict = {v["processes"]: v for v in report["verdict"]["runs"]}
    assert verdict[16]["percent_of_nccl_tests"] == pytest.approx(75.0)

    md = (run / "report.md").read_text()
    head = md.split("## Throughput")[0]
    assert ("ChainerMN reached 75% of nccl-tests' bus bandwidth at 8.39 MB (27.91 GB/s, the size nearest L, "
            "all_reduce_perf across the nodes; its peak 338.82 GB/s).") in head
    assert ("ChainerMN reached 50% of nccl-tests' bus bandwidth at 8.39 MB (46.00 GB/s, the size nearest L, "
            "all_reduce_perf on g1; its peak 338.82 GB/s).") in head
    assert "nccl-tests: " not in head  # nothing missing, nothing said to be
    # the columns beside the in-training busbw, then where the figures came from
    assert "| nccl-tests busbw GB/s (size nearest L, run) | % of nccl-tests |" in md
    assert "| 27.910 (8388608 B, across the nodes) | 75% |" in md
    assert "| 46.000 (8388608 B, on g1) | 50% |" in md
    assert (f"nccl-tests' all_reduce_perf (verify.json at {real}, {STAMP}; L = {L} B): across the nodes "
            "27.91 GB/s at 8388608 B (nearest L), peak 338.82 GB/s at 8589934592 B; on g1 46.00 GB/s") in md


def test_no_verify_json_is_said_through_the_module(tmp_path):
    missing = tmp_path / "reports" / "verify-latest" / "verify.json"
    res = run_module(
        {"documents": gpu_documents(), "dest": str(tmp_path / "reports"), "timestamp": "20260103T000000Z",
         "plots": False, "verify_json": str(missing)},
        module="mncluster.core.mnc_report",
    )
    assert not res.get("failed"), res.get("msg")
    run = tmp_path / "reports" / "20260103T000000Z"
    report = json.loads((run / "report.json").read_text())
    line = f"nccl-tests: no verify.json found at {missing} (playbooks/verify.yml not run)"
    assert report["nccl_tests"]["missing"] == line
    assert report["nccl_tests"]["cluster"] is None and report["nccl_tests"]["nodes"] == {}
    assert all(r["nccl_tests_busbw"] is None for r in report["runs"])
    md = (run / "report.md").read_text()
    assert f"* {line}." in md.split("## Throughput")[0]
    assert "of nccl-tests' bus bandwidth" not in md


def test_the_launcher_unknown_to_verify_takes_the_first_node(verify_json):
    rep, _ = report_of(gpu_documents(), verify_json, launcher="somewhere")
    assert {r["processes"]: r["nccl_tests_run"] for r in rep["runs"]} == {1: None, 8: "g1", 16: "cluster"}


def assert_missing(rep, md, line):
    assert rep["nccl_tests"]["missing"] == line
    for r in rep["runs"]:
        assert r["nccl_tests_busbw"] is None and r["busbw_percent_of_nccl_tests"] is None
    assert f"* {line}" in md.split("## Throughput")[0]
    assert "of nccl-tests' bus bandwidth" not in md
    assert "| n/a | n/a |" in md  # the columns stay, with no number


def test_a_cpu_cluster_says_no_gpu(verify_json):
    rep, md = report_of(gpu_documents(device="cpu"), verify_json)
    assert_missing(rep, md, "nccl-tests: not run on this cluster (no GPU)")


def test_verify_without_nccl_tests_says_why(tmp_path):
    skipped = {"skipped_reason": "no all_reduce_perf on the PATH of mpiuser and no verify_nccl_tests_bin"}
    path = write_verify(tmp_path, [gpu_node("g1", nccl=skipped), gpu_node("g2", nccl=skipped)], skipped)
    rep, md = report_of(gpu_documents(), path)
    real = (tmp_path / f"verify-{STAMP}" / "verify.json").resolve()
    assert_missing(rep, md, f"nccl-tests: no result in {real} ({STAMP}): cluster: SKIP "
                            "no all_reduce_perf on the PATH of mpiuser and no verify_nccl_tests_bin")


def test_verify_of_a_cpu_cluster_says_no_gpu_node(tmp_path):
    cpu = {"name": "g1", "reachable": True, "use_gpu": False,
           "health": {"skipped_reason": "CPU mode (mnc_use_gpu false): no GPU to check"}}
    path = write_verify(tmp_path, [cpu], None)
    rep, md = report_of(gpu_documents(), path, nodes=["g1"])
    real = (tmp_path / f"verify-{STAMP}" / "verify.json").resolve()
    line = f"nccl-tests: not run on this cluster (verify found no GPU node; {real} ({STAMP}))"
    assert_missing(rep, md, line)


def test_verify_of_other_nodes_is_not_used(verify_json, tmp_path):
    rep, md = report_of(gpu_documents(), verify_json, nodes=["g1", "g2", "g3"])
    real = (tmp_path / "reports" / f"verify-{STAMP}" / "verify.json").resolve()
    assert_missing(rep, md, f"nccl-tests: {real} ({STAMP}) checked nodes g1, g2, not this cluster's "
                            "g1, g2, g3: run playbooks/verify.yml again")


def test_unreadable_or_unset_verify_json(tmp_path):
    bad = tmp_path / "verify.json"
    bad.write_text("{not json")
    rep, md = report_of(gpu_documents(), bad)
    assert rep["nccl_tests"]["missing"].startswith(f"nccl-tests: {bad} could not be read (")
    assert "of nccl-tests' bus bandwidth" not in md
    rep, md = report_of(gpu_documents(), "")
    assert_missing(rep, md, "nccl-tests: no verify.json to read (benchmark_verify_json is empty)")


def test_the_time_of_a_verify_json_outside_a_verify_directory_is_its_mtime(tmp_path, verify_json):
    copy = tmp_path / "elsewhere.json"
    copy.write_text(verify_json.read_text())
    os.utime(copy, (1767225600, 1767225600))  # 2026-01-01 00:00:00 UTC
    doc, real, stamp, error = mnc_bench_nccl.load_verify_json(str(copy))
    assert (real, stamp, error) == (str(copy), "20260101T000000Z", None) and doc["gpu_health"]
