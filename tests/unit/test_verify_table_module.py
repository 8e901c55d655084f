"""library/mnc_verify_table.py run by real Ansible: the table, the verdict, argument errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ansible_env import repo_ansible_env

ROOT = Path(__file__).resolve().parents[2]


def run_module(args: dict) -> dict:
    env = repo_ansible_env()
    argv = [
        str(Path(sys.executable).with_name("ansible")),
        "localhost",
        "-i",
        "localhost,",
        "-c",
        "local",
        "-m",
        "mnc_verify_table",
        "-a",
        json.dumps(args),
        "-e",
        f"ansible_python_interpreter={sys.executable}",
    ]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


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
