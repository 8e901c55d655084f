"""The acceptance checks of roles/verify (module_utils/mnc_verify.py and the mnc_verify_*.py it imports).

Rank and bandwidth checks are fed the output of real mpiexec runs on the
controller (Debian's OpenMPI + mpi4py in .venv); the judging of failures the
controller cannot produce (a node that did not answer, a version skew) uses
inputs in the exact shape the playbook collects.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from ansible_collections.mncluster.core.plugins.module_utils import mnc_verify as v
from ansible_collections.mncluster.core.plugins.module_utils import mnc_verify_gpu as vgpu
from ansible_collections.mncluster.core.plugins.module_utils import mnc_verify_mpi as vmpi
from ansible_collections.mncluster.core.plugins.module_utils import mnc_verify_render as vrender

P2P = ROOT / "roles" / "verify" / "files" / "mnc_p2p_bandwidth.py"
VERSIONS = ROOT / "roles" / "verify" / "files" / "mnc_versions.py"
RANK_CMD = ["/bin/sh", "-c", 'echo "$(uname -n) $(printenv OMPI_COMM_WORLD_RANK)"']
HOST = os.uname().nodename

needs_mpiexec = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec on this host")


def mpiexec(n, command, timeout=120):
    env = dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
    )
    argv = ["timeout", "--kill-after=5", str(timeout), "mpiexec", "-n", str(n), "--oversubscribe", *command]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout + 30, check=False)
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "cmd": " ".join(argv)}


def only(rows, check):
    return [r for r in rows if r["check"] == check]


# --- ranks ----------------------------------------------------------------------------------------


@pytest.mark.mpi
@needs_mpiexec
def test_real_mpiexec_every_rank_once_passes():
    run = mpiexec(4, RANK_CMD)
    assert run["rc"] == 0, run["stderr"]
    rows = vmpi.check_ranks(run, [{"host": HOST, "slots": 4}])
    assert rows[0]["status"] == v.PASS, rows
    assert "0..3 once each" in rows[0]["detail"]
    assert f"{HOST}: 0-3" in rows[0]["detail"]


@pytest.mark.mpi
@needs_mpiexec
def test_real_mpiexec_too_few_ranks_names_the_missing_ones():
    # The hostfile promises 4 slots on this host, but only 3 processes start.
    run = mpiexec(3, RANK_CMD)
    rows = vmpi.check_ranks(run, [{"host": HOST, "slots": 4}])
    assert rows[0]["status"] == v.FAIL
    assert "ranks never printed: 3" in rows[0]["detail"]
    assert f"{HOST} ran 3 rank(s), expected 4" in rows[0]["detail"]


@pytest.mark.mpi
@needs_mpiexec
def test_real_mpiexec_failure_is_reported_with_its_error():
    run = mpiexec(2, ["/nonexistent/program"])
    assert run["rc"] != 0
    rows = vmpi.check_ranks(run, [{"host": HOST, "slots": 2}])
    assert rows[0]["status"] == v.FAIL
    assert f"mpiexec exited {run['rc']}" in rows[0]["detail"]


def test_duplicate_rank_and_unexpected_host_fail():
    # Two mpiexec jobs writing into one output, or a hostfile pointing at the wrong machine.
    out = "node1 0\nnode1 1\nnode2 2\nnode2 2\nrogue 3\n"
    rows = vmpi.check_ranks(
        {"rc": 0, "stdout": out}, [{"host": "node1", "slots": 2}, {"host": "node2", "slots": 2}]
    )
    detail = rows[0]["detail"]
    assert rows[0]["status"] == v.FAIL
    assert "ranks printed more than once: 2" in detail
    assert "unexpected host rogue ran ranks 3" in detail
    assert "node2 ran 2 rank(s), expected 2" not in detail


# The three wiring containers' hostfile (slots 2, 3, 2), as verify.yml reads it.
WIRING = [{"host": "w1", "slots": 2}, {"host": "w2", "slots": 3}, {"host": "w3", "slots": 2}]


def _rank_output(placement):
    return "".join(f"{host} {r}\n" for host, ranks in placement for r in ranks)


def test_expected_placement_starts_on_the_launcher_then_hostfile_order():
    assert vmpi.expected_placement(WIRING, "w1") == [("w1", [0, 1]), ("w2", [2, 3, 4]), ("w3", [5, 6])]
    # What OpenMPI printed when mnc-wiring-2 happened to launch (issue: launcher chosen by chance).
    assert vmpi.expected_placement(WIRING, "w2") == [("w2", [0, 1, 2]), ("w1", [3, 4]), ("w3", [5, 6])]
    # A launcher outside the hostfile (or unknown): hostfile order.
    assert vmpi.expected_placement(WIRING, None) == vmpi.expected_placement(WIRING, "w1")
    assert vmpi.expected_placement(WIRING, "login") == vmpi.expected_placement(WIRING, "w1")


@pytest.mark.parametrize("launcher", ["w1", "w2", "w3"])
def test_placement_from_any_launcher_passes_when_it_follows_the_mapping(launcher):
    out = _rank_output(vmpi.expected_placement(WIRING, launcher))
    rows = vmpi.check_ranks({"rc": 0, "stdout": out}, WIRING, launcher)
    assert rows[0]["status"] == v.PASS, rows
    assert "7 ranks, 0..6 once each" in rows[0]["detail"]
    # The detail lists the hosts in rank order.
    first = rows[0]["detail"].split("; ")[1]
    assert first.startswith(f"{launcher}: 0-")


def test_placement_of_another_launcher_fails_and_names_the_expected_one():
    out = _rank_output(vmpi.expected_placement(WIRING, "w2"))
    rows = vmpi.check_ranks({"rc": 0, "stdout": out}, WIRING, "w1")
    assert rows[0]["status"] == v.FAIL
    assert "placement differs from the mapping" in rows[0]["detail"]
    assert "expected w1: 0-1; w2: 2-4; w3: 5-6" in rows[0]["detail"]


def test_round_robin_placement_fails_although_the_counts_are_right():
    # --map-by node instead of filling each node's slots: right counts, wrong ranks.
    out = "w1 0\nw2 1\nw3 2\nw1 3\nw2 4\nw3 5\nw2 6\n"
    rows = vmpi.check_ranks({"rc": 0, "stdout": out}, WIRING, "w1")
    assert rows[0]["status"] == v.FAIL
    assert "placement differs" in rows[0]["detail"]
    assert "expected w1: 0-1; w2: 2-4; w3: 5-6" in rows[0]["detail"]


def test_ranks_timeout_is_named():
    rows = vmpi.check_ranks({"rc": 124, "stdout": "", "stderr": ""}, [{"host": "a", "slots": 1}])
    assert rows[0]["status"] == v.FAIL and rows[0]["detail"].startswith("timed out")


def test_ranks_all_printed_but_the_launcher_hung_is_named_as_such():
    # What a hung launcher leaves: every rank's line, then timeout's 124 (or 137 after --kill-after).
    out = "a 1\na 0\nb 3\nb 2\n"
    two_by_two = [{"host": "a", "slots": 2}, {"host": "b", "slots": 2}]
    for rc in (124, 137):
        rows = vmpi.check_ranks({"rc": rc, "stdout": out, "stderr": ""}, two_by_two, "a")
        assert rows[0]["status"] == v.FAIL
        assert rows[0]["detail"].startswith("all 4 ranks ran on the expected hosts and printed, but mpiexec")
        assert "a: 0-1; b: 2-3" in rows[0]["detail"]
    # A rank missing as well: the plain timeout, with what is missing.
    rows = vmpi.check_ranks({"rc": 124, "stdout": "a 0\na 1\nb 2\n", "stderr": ""}, two_by_two, "a")
    assert rows[0]["detail"].startswith("timed out") and "ranks never printed: 3" in rows[0]["detail"]


def test_ranks_not_run_because_a_node_is_down():
    rows = vmpi.check_ranks({"skipped_reason": "node3 did not answer"}, [])
    assert rows == [v.row("ranks", "cluster", v.FAIL, "not run: node3 did not answer")]


# --- hostfile -------------------------------------------------------------------------------------

NODES = [
    {"name": "n1", "private_ip": "10.0.0.1", "nodename": "n1"},
    {"name": "n2", "private_ip": "10.0.0.2", "nodename": "n2"},
]


def test_hostfile_parse_and_check():
    text = "# managed by mncluster\n10.0.0.1 slots=4\n\n10.0.0.2 slots=4  # second\n"
    entries = vmpi.parse_hostfile(text)
    assert entries == [{"address": "10.0.0.1", "slots": 4}, {"address": "10.0.0.2", "slots": 4}]
    assert vmpi.check_hostfile(entries, NODES)[0]["status"] == v.PASS


def test_hostfile_missing_node_and_stranger_fail():
    rows = vmpi.check_hostfile(vmpi.parse_hostfile("10.0.0.1 slots=2\n10.9.9.9 slots=2\n"), NODES)
    assert rows[0]["status"] == v.FAIL
    assert "n2 (10.0.0.2) missing" in rows[0]["detail"]
    assert "10.9.9.9 is no node of the inventory" in rows[0]["detail"]


# --- p2p bandwidth -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def p2p_run():
    if shutil.which("mpiexec") is None:
        pytest.skip("no mpiexec on this host")
    run = mpiexec(3, [sys.executable, str(P2P), "--budget-mib", "4", "--sizes", "4096", "1048576"])
    assert run["rc"] == 0, run["stderr"]
    return run


@pytest.mark.mpi
def test_real_pingpong_measures_every_pair(p2p_run):
    doc = vmpi.parse_p2p(p2p_run["stdout"])
    assert [p["ranks"] for p in doc["pairs"]] == [[0, 1], [0, 2], [1, 2]]
    for p in doc["pairs"]:
        assert [r["bytes"] for r in p["results"]] == [4096, 1048576]
        for r in p["results"]:
            assert r["gbps"] == pytest.approx(r["bytes"] / r["seconds"] / 1e9)
            assert r["gbps"] > 0


@pytest.mark.mpi
def test_real_pingpong_against_link_speed(p2p_run):
    # Shared memory on one host is far faster than a 1 Gb/s link ...
    rows = vmpi.check_p2p(p2p_run, link_gbps=1, min_fraction=0.5)
    assert len(rows) == 3 and all(r["status"] == v.PASS for r in rows), rows
    assert "link 1 Gb/s = 0.12 GB/s" in rows[0]["detail"]
    # ... and far slower than a 100 Tb/s one: every pair fails and says by how much.
    rows = vmpi.check_p2p(p2p_run, link_gbps=100000, min_fraction=0.5)
    assert all(r["status"] == v.FAIL for r in rows)
    assert "< 50%" in rows[0]["detail"]
    # No configured link speed: measured, reported, not judged.
    rows = vmpi.check_p2p(p2p_run, link_gbps=None, min_fraction=0.5)
    assert all(r["status"] == v.SKIP and "no mnc_link_gbps" in r["detail"] for r in rows)


@pytest.mark.mpi
@needs_mpiexec
@pytest.mark.parametrize("n", [4, 5])
def test_real_pingpong_round_robin_covers_every_pair_once(n):
    # Disjoint pairs run concurrently: n-1 rounds (n rounded up to even), each pair exactly once.
    run = mpiexec(n, [sys.executable, str(P2P), "--budget-mib", "1", "--sizes", "4096"])
    assert run["rc"] == 0, run["stderr"]
    doc = vmpi.parse_p2p(run["stdout"])
    assert doc["rounds"] == n - 1 + n % 2
    assert [p["ranks"] for p in doc["pairs"]] == [[a, b] for a in range(n) for b in range(a + 1, n)]
    by_round = {}
    for p in doc["pairs"]:
        by_round.setdefault(p["round"], []).extend(p["ranks"])
    assert all(len(r) == len(set(r)) for r in by_round.values()), by_round
    assert len(vmpi.check_p2p(run, 1, 0.5)) == n * (n - 1) // 2


def test_p2p_garbage_output_fails_with_the_text():
    rows = vmpi.check_p2p({"rc": 0, "stdout": "Segmentation fault\n"}, 10, 0.5)
    assert rows[0]["status"] == v.FAIL and "Segmentation fault" in rows[0]["detail"]


def test_p2p_single_node_is_skipped():
    rows = vmpi.check_p2p({"not_applicable": "a single node: no pair to measure"}, 10, 0.5)
    assert rows[0]["status"] == v.SKIP


# --- OpenMPI CUDA support -------------------------------------------------------------------------


def test_cuda_support_required_in_gpu_mode_only():
    nodes = [
        {
            "name": "gpu1",
            "openmpi": {"version": "5.0.7", "prefix": "/opt/ompi", "built_with": True, "runtime": True},
        },
        {"name": "gpu2", "openmpi": {"version": "4.1.4", "prefix": "/usr", "built_with": False}},
        {"name": "gpu3", "openmpi_error": "no ompi_info in /opt/x/bin"},
        {"name": "down", "reachable": False},
    ]
    rows = vgpu.check_cuda(nodes, require=True)
    assert [(r["subject"], r["status"]) for r in rows] == [
        ("gpu1", v.PASS),
        ("gpu2", v.FAIL),
        ("gpu3", v.FAIL),
    ]
    assert "--with-cuda" in rows[1]["detail"]
    assert "no ompi_info in /opt/x/bin" in rows[2]["detail"]
    cpu = vgpu.check_cuda(nodes[:2], require=False)
    assert [r["status"] for r in cpu] == [v.PASS, v.SKIP]


def test_a_gpu_node_whose_cuda_is_not_usable_fails():
    # Built --with-cuda, but the accelerator/cuda plugin did not open (no loadable libcuda.so.1).
    node = {"name": "gpu1", "openmpi": {"version": "5.0.7", "prefix": "/opt/ompi", "built_with": True,
                                        "runtime": False}}  # fmt: skip
    [gpu] = vgpu.check_cuda([node], require=True)
    assert gpu["status"] == v.FAIL
    assert "not usable at run time" in gpu["detail"] and "libcuda.so.1" in gpu["detail"]
    # The sandbox's CPU nodes: the same build without a driver is fine.
    [cpu] = vgpu.check_cuda([node], require=False)
    assert cpu["status"] == v.PASS and "runtime=False" in cpu["detail"]


# --- versions -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_versions():
    proc = subprocess.run(
        [sys.executable, str(VERSIONS)], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(proc.stdout)


def test_real_versions_script_reports_the_stack(real_versions):
    assert real_versions["python"] == ".".join(map(str, sys.version_info[:3]))
    assert real_versions["chainer"] == "7.8.1"
    assert "\x00" not in real_versions["mpi_library"]
    assert real_versions["mpi_library"].startswith(("Open MPI", "MPICH"))


def test_same_versions_pass_and_skew_names_the_node(real_versions):
    same = [{"name": f"n{i}", "versions": real_versions} for i in range(3)]
    rows = v.check_versions(same)
    assert [r["status"] for r in rows] == [v.PASS]
    assert "Chainer 7.8.1" in rows[0]["detail"]
    skew = [dict(same[0]), dict(same[1]), {"name": "n2", "versions": dict(real_versions, chainer="7.8.0")}]
    rows = v.check_versions(skew)
    assert rows[-1]["status"] == v.FAIL
    assert "Chainer differs: 7.8.0 on n2; 7.8.1 on n0, n1" in rows[-1]["detail"]


def test_import_error_and_unreadable_node_fail():
    rows = v.check_versions(
        [
            {
                "name": "n0",
                "versions": {
                    "python": "3.11.9",
                    "chainer": "error: ModuleNotFoundError: No module named 'chainer'",
                },
            },
            {"name": "n1", "versions_error": "/x/python failed (rc 127): not found"},
        ]
    )
    assert ("n0", v.FAIL) in [(r["subject"], r["status"]) for r in rows]
    assert any(r["subject"] == "n1" and "rc 127" in r["detail"] for r in rows)
    assert rows[-1]["status"] == v.FAIL


# --- the whole table -----------------------------------------------------------------------------


def test_unreachable_node_is_named_and_fails_the_table():
    nodes = [
        {
            "name": "n1",
            "reachable": True,
            "nodename": "n1",
            "private_ip": "10.0.0.1",
            "versions": {"python": "3.11.9"},
            "openmpi": {"version": "5.0.7", "built_with": True},
        },
        {
            "name": "n2",
            "reachable": False,
            "private_ip": "10.0.0.2",
            "error": "Failed to connect to the host via ssh: connect to host 10.0.0.2 port 22: "
            "Connection timed out",
        },
    ]
    res = v.evaluate(
        nodes,
        "10.0.0.1 slots=1\n10.0.0.2 slots=1\n",
        {"skipped_reason": "n2 did not answer"},
        {"skipped_reason": "n2 did not answer"},
        10,
        0.5,
        False,
    )
    assert res["passed"] is False
    assert res["not_answering"] == ["n2"]
    assert any(f.startswith("node answers [n2]: did not answer: Failed to connect") for f in res["failures"])
    table = res["table"].splitlines()
    assert table[0].split() == ["CHECK", "SUBJECT", "RESULT", "DETAIL"]
    assert any(line.startswith("node answers") and " n2 " in line and "FAIL" in line for line in table)
    assert table[-1].startswith("FAILED: ")


def test_all_good_table_passes():
    vers = {"python": "3.11.9", "chainer": "7.8.1", "mpi4py": "4.1.1", "mpi_library": "Open MPI v5.0.7"}
    nodes = [
        {
            "name": f"n{i}",
            "reachable": True,
            "nodename": f"n{i}",
            "private_ip": f"10.0.0.{i}",
            "versions": vers,
            "openmpi": {"version": "5.0.7", "built_with": True, "runtime": True},
        }
        for i in (1, 2)
    ]
    ranks = {"rc": 0, "stdout": "n1 0\nn1 1\nn2 2\nn2 3\n"}
    p2p = {
        "rc": 0,
        "stdout": json.dumps(
            {
                "hosts": ["n1", "n2"],
                "pairs": [
                    {
                        "a": "n1",
                        "b": "n2",
                        "ranks": [0, 1],
                        "results": [
                            {"bytes": 8192, "seconds": 1e-5, "gbps": 0.8192},
                            {"bytes": 16 << 20, "seconds": 0.0145, "gbps": 1.157},
                        ],
                    }
                ],
            }
        ),
    }
    res = v.evaluate(nodes, "10.0.0.1 slots=2\n10.0.0.2 slots=2\n", ranks, p2p, 10, 0.5, True)
    assert res["passed"], res["table"]
    assert res["failures"] == []
    assert "peak 1.16 GB/s at 16 MiB" in res["table"]
    assert "-> 93%" in res["table"]
    # CPU nodes (no use_gpu): the GPU checks are one SKIP per node and one for the cluster; no
    # record of the driver's services or the RDMA path: one SKIP per node; DCGM, nccl-tests and
    # the node-health group (module_utils/mnc_verify_gpu_health.py): three SKIPs per node.
    assert res["table"].splitlines()[-1] == "PASSED: 8 passed, 0 failed, 11 skipped"


def test_evaluate_derives_the_placement_from_the_launcher_inventory_name():
    # The launcher is given by inventory name; the ranks print `uname -n`.
    nodes = [
        {"name": f"node{i}", "reachable": True, "nodename": f"n{i}", "private_ip": f"10.0.0.{i}"}
        for i in (1, 2)
    ]
    hostfile = "10.0.0.1 slots=2\n10.0.0.2 slots=2\n"
    from_second = {"rc": 0, "stdout": "n2 0\nn2 1\nn1 2\nn1 3\n"}
    args = (hostfile, from_second, {"not_applicable": "x"}, None, 0.5, False)
    ranks = only(v.evaluate(nodes, *args, launcher="node2")["rows"], "ranks")[0]
    assert ranks["status"] == v.PASS and ranks["detail"].endswith("n2: 0-1; n1: 2-3"), ranks
    ranks = only(v.evaluate(nodes, *args, launcher="node1")["rows"], "ranks")[0]
    assert ranks["status"] == v.FAIL and "expected n1: 0-1; n2: 2-3" in ranks["detail"], ranks


# --- all pairs: the bad link ----------------------------------------------------------------------


def _pairs_doc(peaks: dict[tuple[int, int], float], hosts: list[str]) -> dict:
    """A p2p run's output in mnc_p2p_bandwidth.py's shape, with the given peak GB/s per pair."""
    pairs = [
        {"a": hosts[a], "b": hosts[b], "ranks": [a, b], "round": 0,
         "results": [{"bytes": 8192, "seconds": 8192 / (g / 10) / 1e9, "gbps": g / 10},
                     {"bytes": 16 << 20, "seconds": (16 << 20) / g / 1e9, "gbps": g}]}
        for (a, b), g in sorted(peaks.items())
    ]  # fmt: skip
    return {"rc": 0, "stdout": json.dumps({"hosts": hosts, "rounds": 3, "pairs": pairs})}


HOSTS4 = ["n1", "n2", "n3", "n4"]
# Every pair at about 1.1 GB/s, except n2 <-> n4 at 0.5 GB/s (a bad cable on one of them).
PEAKS4 = {(0, 1): 1.10, (0, 2): 1.12, (0, 3): 1.08, (1, 2): 1.11, (1, 3): 0.50, (2, 3): 1.09}


def test_a_pair_far_below_the_median_pair_fails_naming_both_nodes():
    rows = vmpi.check_p2p(_pairs_doc(PEAKS4, HOSTS4), link_gbps=None, min_fraction=0.5, median_fraction=0.7)
    by = {r["subject"]: r for r in rows}
    assert by["n2 <-> n4"]["status"] == v.FAIL
    assert "below 70% of the median pair: a slow link between n2 and n4?" in by["n2 <-> n4"]["detail"]
    assert all(r["status"] == v.PASS for s, r in by.items() if s != "n2 <-> n4"), rows
    # The median of the six pairs is 1.095 GB/s; the slow pair is at 46% of it.
    assert "46% of the median pair (1.10 GB/s)" in by["n2 <-> n4"]["detail"]
    # Without the comparison (0 / None) and without a link speed: reported, not judged.
    rows = vmpi.check_p2p(_pairs_doc(PEAKS4, HOSTS4), link_gbps=None, min_fraction=0.5, median_fraction=None)
    assert {r["status"] for r in rows} == {v.SKIP}


def test_pair_matrix_is_symmetric_with_every_measured_pair():
    m = vmpi.p2p_matrix(vmpi.parse_p2p(_pairs_doc(PEAKS4, HOSTS4)["stdout"]))
    assert m["hosts"] == HOSTS4
    for (a, b), g in PEAKS4.items():
        assert m["gbps"][a][b] == m["gbps"][b][a] == g
    assert all(m["gbps"][i][i] is None for i in range(4))
    md = vrender.render_p2p_matrix(m)
    assert md.splitlines()[0] == "| GB/s | n1 | n2 | n3 | n4 |"
    assert md.splitlines()[3] == "| **n2** | 1.10 | - | 1.11 | 0.50 |"
    text = vrender.render_p2p_text(m).splitlines()
    assert len(text) == 5 and text[2].split() == ["n2", "1.10", "-", "1.11", "0.50"]


def test_evaluate_judges_pairs_against_the_median_by_default_argument():
    nodes = [{"name": h, "reachable": True, "nodename": h, "private_ip": f"10.0.0.{i}"}
             for i, h in enumerate(HOSTS4, 1)]  # fmt: skip
    hostfile = "".join(f"10.0.0.{i} slots=1\n" for i in range(1, 5))
    ranks = {"rc": 0, "stdout": "".join(f"{h} {i}\n" for i, h in enumerate(HOSTS4))}
    res = v.evaluate(nodes, hostfile, ranks, _pairs_doc(PEAKS4, HOSTS4), 1, 0.5, False, "n1")
    assert "p2p bandwidth [n2 <-> n4]: " in " ".join(res["failures"])
    assert res["p2p_matrix"]["gbps"][1][3] == 0.5
    md = vrender.render_markdown(res, image="p2p-matrix.png")
    assert "| **n4** | 1.08 | 0.50 | 1.09 | - |" in md and "![pair bandwidth](p2p-matrix.png)" in md
