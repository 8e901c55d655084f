"""mncluster.core.mnc_verify_table run by real Ansible: the table, the verdict, argument errors."""

from __future__ import annotations

import json
from pathlib import Path

import ansible_env

ROOT = Path(__file__).resolve().parents[2]


def run_module(args: dict) -> dict:
    return ansible_env.run_module("mncluster.core.mnc_verify_table", args)


NODES = [
    {
        "name": "n1",
        "reachable": True,
        "nodename": "n1",
        "private_ip": "10.0.0.1",
        "versions": {"python": "3.11.9", "chainer": "7.8.1"},
        "openmpi": {"version": "5.0.7", "built_with": False},
    },
    {"name": "n2", "reachable": False, "private_ip": "10.0.0.2", "error": "Connection timed out"},
]


def test_down_node_gives_failed_verdict_naming_it():
    res = run_module(
        {
            "nodes": NODES,
            "hostfile": "10.0.0.1 slots=1\n10.0.0.2 slots=1\n",
            "ranks": {"skipped_reason": "n2 did not answer"},
            "p2p": {"skipped_reason": "n2 did not answer"},
            "link_gbps": 10,
        }
    )
    assert not res.get("failed"), res
    assert res["changed"] is False
    assert res["passed"] is False
    assert res["not_answering"] == ["n2"]
    assert "node answers [n2]: did not answer: Connection timed out" in res["failures"]
    statuses = {(r["check"], r["subject"]): r["status"] for r in res["rows"]}
    assert statuses[("openmpi cuda", "n1")] == "SKIP"  # CPU mode by default
    assert res["table"].splitlines()[-1].startswith("FAILED:")


def test_missing_node_name_is_an_argument_error():
    res = run_module({"nodes": [{"reachable": True}]})
    assert res["failed"] is True
    assert res["msg"] == "nodes[0] has no 'name'"


def test_bad_threshold_is_rejected():
    res = run_module({"nodes": NODES[:1], "p2p_min_fraction": 0})
    assert res["failed"] is True and "p2p_min_fraction" in res["msg"]


def test_report_files_written_with_matrix_and_heat_map(tmp_path):
    hosts = ["n1", "n2", "n3"]
    nodes = [{"name": h, "reachable": True, "nodename": h, "private_ip": f"10.0.0.{i}"}
             for i, h in enumerate(hosts, 1)]  # fmt: skip
    pairs = [
        {"a": hosts[a], "b": hosts[b], "ranks": [a, b], "round": 0,
         "results": [{"bytes": 1 << 24, "seconds": (1 << 24) / g / 1e9, "gbps": g}]}
        for (a, b), g in {(0, 1): 1.0, (0, 2): 1.1, (1, 2): 0.2}.items()
    ]  # fmt: skip
    report = tmp_path / "reports" / "verify-20261201T000000Z"
    res = run_module(
        {
            "nodes": nodes,
            "hostfile": "10.0.0.1 slots=1\n10.0.0.2 slots=1\n10.0.0.3 slots=1\n",
            "ranks": {"rc": 0, "stdout": "n1 0\nn2 1\nn3 2\n"},
            "p2p": {"rc": 0, "stdout": json.dumps({"hosts": hosts, "pairs": pairs})},
            "link_gbps": 1,
            "launcher": "n1",
            "report_dir": str(report),
            "latest_link": str(tmp_path / "reports" / "verify-latest"),
        }
    )
    assert not res.get("failed"), res
    assert res["changed"] is True and res["passed"] is False
    assert any("n2 <-> n3" in f and "median pair" in f for f in res["failures"]), res["failures"]
    doc = json.loads((report / "verify.json").read_text())
    assert doc["rows"] == res["rows"] and doc["p2p_matrix"]["gbps"][1][2] == 0.2
    md = (report / "verify.md").read_text()
    assert "| **n3** | 1.10 | 0.20 | - |" in md and "![pair bandwidth](p2p-matrix.png)" in md
    assert (report / "p2p-matrix.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "reports" / "verify-latest").resolve() == report.resolve()


def test_bad_median_fraction_is_refused():
    res = run_module({"nodes": NODES[:1], "p2p_median_fraction": 1.5})
    assert res["failed"] is True and "p2p_median_fraction" in res["msg"]


def test_gpu_runs_reach_the_judging_and_an_unusable_cuda_fails():
    probe = {"python": "/usr/bin/python3", "cuda": {"error": "CUDARuntimeError: cudaErrorNoDevice"}}
    node = dict(NODES[0], use_gpu=True, gpu_count=4,
                gpu_probe={"rc": 0, "stdout": "PROBE " + json.dumps(probe), "stderr": ""})  # fmt: skip
    single = {"not_applicable": "a single node"}
    args = {"nodes": [node], "hostfile": "10.0.0.1 slots=4\n", "ranks": {"rc": 0}, "p2p": single}
    res = run_module(dict(args, gpu_nccl=single, gpu_send=single, require_cuda=True))
    assert not res.get("failed"), res
    statuses = {(r["check"], r["subject"]): r["status"] for r in res["rows"]}
    assert statuses[("gpu cuda", "n1")] == "FAIL"
    assert statuses[("gpu nccl allreduce", "cluster")] == "SKIP"
    assert any(f.startswith("gpu cuda [n1]: CUDA is not usable") for f in res["failures"]), res["failures"]
