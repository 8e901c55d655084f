"""verify's node-health rows (module_utils/mnc_verify_gpu_health.py) over recorded real outputs
of the GPU tools (tests/unit/fixtures/gpu/): DCGM, nccl-tests against a threshold or the median
node, persistence, ECC, the PCIe link, Xid, nvidia-uvm, the CUDA runtime against the driver, the
topology, InfiniBand link flaps; and the SKIP rows of a node without a GPU."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from ansible_collections.mncluster.core.plugins.module_utils import mnc_verify, mnc_verify_nccl
from ansible_collections.mncluster.core.plugins.module_utils import mnc_verify_gpu_health as h

FIXTURES = Path(__file__).parent / "fixtures" / "gpu"
UVM = ["/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]


def ran(name: str, **extra) -> dict:
    return {"rc": 0, "stdout": (FIXTURES / name).read_text(), "stderr": "", **extra}


def probe(driver=12080, runtime=12060) -> dict:
    return {
        "rc": 0,
        "stdout": "PROBE " + json.dumps({"cuda": {"driver": driver, "runtime": runtime}}),
        "stderr": "",
    }


def gpu_node(name="g1", **health) -> dict:
    base = {
        "nvidia_smi": ran("nvidia-smi-q-h800-525-p0.txt"),
        "topo": ran("topo-m-8gpu-h800-nic-legend.txt"),
        "xid": {"rc": 0, "stdout": "", "stderr": ""},
        "uvm": UVM,
        "ib": {"mlx5_0:1": {"link_downed": 0, "link_error_recovery": 0}},
        "dcgm": ran("dcgmi-diag-r3-pass-570-blackwell.txt", level=1),
        "nccl": ran("all_reduce_perf-2x8-h100.txt"),
    }
    base.update(health)
    return {
        "name": name,
        "reachable": True,
        "use_gpu": True,
        "gpu_count": 1,
        "gpu_probe": probe(),
        "health": base,
        "nccl_min_busbw_gbs": 300.0,
    }


def rows_of(nodes, fraction=0.7):
    rows, record = h.check_gpu_health(nodes, fraction)
    return {(r["check"], r["subject"]): r for r in rows}, record


def test_a_healthy_gpu_node_passes_every_row_and_is_recorded():
    rows, record = rows_of([gpu_node()])
    assert {k[0]: r["status"] for k, r in rows.items()} == {
        "dcgm": "PASS",
        "nccl-tests": "PASS",
        "gpu persistence": "PASS",
        "gpu ecc": "PASS",
        "gpu pcie link": "PASS",
        "gpu xid": "PASS",
        "gpu uvm": "PASS",
        "gpu cuda driver": "PASS",
        "gpu topology": "PASS",
        "ib link flaps": "PASS",
    }
    assert rows[("nccl-tests", "g1")]["detail"].startswith("all_reduce_perf on 8 GPU(s): busbw 338.82 GB/s")
    assert "threshold 300 GB/s (verify_nccl_min_busbw_gbs)" in rows[("nccl-tests", "g1")]["detail"]
    assert rows[("gpu topology", "g1")]["detail"].startswith(
        "nearest NIC: GPU0 -> mlx5_0 (NODE), GPU1 -> mlx5_0 (PIX)"
    )
    assert rows[("gpu cuda driver", "g1")]["detail"] == "runtime CUDA 12.6, driver supports CUDA 12.8"
    rec = record["g1"]
    assert rec["topology"]["nearest_nic"]["GPU7"] == {"nic": "mlx5_2", "path": "PIX"}
    assert rec["nccl_tests"]["peak"] == {"bytes": 8 << 30, "busbw": 338.82, "algbw": 180.71}
    assert len(rec["nccl_tests"]["by_size"]) == 31
    assert rec["dcgm"]["level"] == 1 and rec["dcgm"]["metadata"]["DCGM Version"] == "3.3.9"
    assert json.loads(json.dumps(record)) == record  # verify.json can hold it


def test_each_recorded_fault_fails_its_own_row_naming_it():
    node = gpu_node(
        nvidia_smi=ran("nvidia-smi-q-a16-470-idle.txt"),
        xid=ran("dmesg-xid-48-63-94.txt"),
        uvm=["/dev/nvidia-uvm"],
        ib={"mlx5_0:1": {"link_downed": 3, "link_error_recovery": 0}},
        dcgm=ran("dcgmi-diag-r4-fail-persistence.txt", level=4),
    )
    node["nccl_min_busbw_gbs"] = 400.0
    node["gpu_probe"] = probe(driver=12040, runtime=12060)
    rows, _ = rows_of([node])
    failed = {k[0]: r["detail"] for k, r in rows.items() if r["status"] == "FAIL"}
    assert failed["dcgm"].startswith("dcgmi diag -r 4: Persistence Mode failed: Persistence mode for GPU 0")
    assert "busbw 338.82 GB/s at 8589934592 B is below 400 GB/s" in failed["nccl-tests"]
    assert failed["gpu pcie link"].startswith("GPU 0 (00000000:13:00.0) PCIe width x4 of x16")
    assert failed["gpu xid"].startswith("since boot: Xid 48 on 0000:52:00; Xid 63 on 0000:52:00; Xid 94")
    assert failed["gpu uvm"].startswith("missing /dev/nvidia-uvm-tools")
    assert failed["gpu cuda driver"].startswith(
        "runtime CUDA 12.6, driver supports CUDA 12.4: the runtime is newer"
    )
    assert failed["ib link flaps"].startswith("mlx5_0:1: link_downed 3")
    assert rows[("gpu ecc", "g1")]["status"] == "PASS"
    remap = gpu_node(nvidia_smi=ran("nvidia-smi-q-ecc-row-remapper-pending-550.txt"))
    rows, _ = rows_of([remap])
    assert rows[("gpu ecc", "g1")]["status"] == "FAIL"
    assert "row remapping pending (reset the GPU to activate it)" in rows[("gpu ecc", "g1")]["detail"]


def test_nccl_without_a_threshold_is_judged_against_the_median_node():
    text = (FIXTURES / "all_reduce_perf-2x8-h100.txt").read_text()
    slow = text.replace("47535  180.71  338.82", "47535   90.35  169.41").replace(
        "47743  179.92  337.35", "47743   89.96  168.67"
    )
    nodes = [gpu_node("g1"), gpu_node("g2"), gpu_node("g3", nccl={"rc": 0, "stdout": slow, "stderr": ""})]
    for n in nodes:
        n["nccl_min_busbw_gbs"] = None
    rows, _ = rows_of(nodes)
    assert (
        rows[("nccl-tests", "g1")]["status"] == "PASS"
        and "100% of the median node" in rows[("nccl-tests", "g1")]["detail"]
    )
    assert rows[("nccl-tests", "g3")]["status"] == "FAIL"
    assert rows[("nccl-tests", "g3")]["detail"].endswith(
        "50% of the median node (338.82 GB/s); below 70% of the median node"
    )
    # Alone and without a threshold: measured, not judged.
    rows, _ = rows_of(nodes[:1])
    assert rows[("nccl-tests", "g1")]["status"] == "SKIP"


def test_missing_tools_skip_or_fail_with_the_reason():
    node = gpu_node(
        dcgm={"off": "verify_dcgm_level 0: the DCGM diagnostic is off"},
        nccl={"skipped_reason": "no all_reduce_perf on the PATH of mpiuser and no verify_nccl_tests_bin"},
        nvidia_smi={"rc": 127, "stdout": "", "stderr": "nvidia-smi: not found"},
        topo={"rc": 127, "stdout": "", "stderr": "nvidia-smi: not found"},
        ib={},
    )
    rows, record = rows_of([node])
    assert rows[("dcgm", "g1")] == {
        "check": "dcgm",
        "subject": "g1",
        "status": "SKIP",
        "detail": "verify_dcgm_level 0: the DCGM diagnostic is off",
    }
    assert rows[("nccl-tests", "g1")]["status"] == "SKIP"
    assert "no all_reduce_perf on the PATH" in rows[("nccl-tests", "g1")]["detail"]
    assert rows[("gpu persistence", "g1")]["status"] == "FAIL"
    assert "exited 127: nvidia-smi: not found" in rows[("gpu persistence", "g1")]["detail"]
    assert rows[("gpu topology", "g1")]["status"] == "FAIL"
    assert ("ib link flaps", "g1") not in rows  # no RDMA port: no row
    assert record["g1"]["nvidia_smi"] is None and record["g1"]["topology"] is None


def test_a_cpu_node_skips_each_group_with_the_reason_and_the_table_records_it():
    cpu = {
        "name": "c1",
        "reachable": True,
        "use_gpu": False,
        "health": {"skipped_reason": "CPU mode (mnc_use_gpu false): no GPU to check"},
    }
    rows, record = rows_of([cpu, {"name": "down", "reachable": False}])
    assert [(k, r["status"]) for k, r in rows.items()] == [
        (("dcgm", "c1"), "SKIP"),
        (("nccl-tests", "c1"), "SKIP"),
        (("gpu node health", "c1"), "SKIP"),
    ]
    assert all(r["detail"].startswith("CPU mode (mnc_use_gpu false)") for r in rows.values())
    assert record == {}
    result = mnc_verify.evaluate([cpu], None, None, None, None, 0.5, False)
    assert result["gpu_health"] == {}
    assert [
        r["status"] for r in result["rows"] if r["check"] in ("dcgm", "nccl-tests", "gpu node health")
    ] == ["SKIP", "SKIP", "SKIP"]


def test_nccl_across_the_nodes_against_its_threshold_or_a_fraction_of_the_link():
    run = ran("all_reduce_perf-2x8-h100.txt")
    nodes = [gpu_node("g1"), gpu_node("g2")]
    rows, record = h.check_gpu_health(nodes, 0.7, run, 300.0, declared=True)
    (cluster,) = [r for r in rows if r["subject"] == "cluster"]
    assert cluster["status"] == "PASS"
    assert cluster["detail"] == (
        "all_reduce_perf, 16 ranks on 2 node(s): busbw 338.82 GB/s (algbw 180.71) at "
        "8589934592 B; threshold 300 GB/s (verify_nccl_cluster_min_busbw_gbs)"
    )
    assert record["cluster"]["nccl_tests"]["peak"]["busbw"] == 338.82
    # Through evaluate: no threshold declared, a 400 Gbit/s link, half of it at least (25 GB/s): passes;
    # a declared 400 GB/s fails.
    result = mnc_verify.evaluate(nodes, None, None, None, 400, 0.5, False, nccl_tests=run)
    (cluster,) = [r for r in result["rows"] if r["check"] == "nccl-tests" and r["subject"] == "cluster"]
    assert (
        cluster["status"] == "PASS"
        and "threshold 25 GB/s (verify_p2p_min_fraction of one link)" in cluster["detail"]
    )
    result = mnc_verify.evaluate(
        nodes, None, None, None, 400, 0.5, False, nccl_tests=run, nccl_cluster_min_busbw_gbs=400.0
    )
    (cluster,) = [r for r in result["rows"] if r["check"] == "nccl-tests" and r["subject"] == "cluster"]
    assert cluster["status"] == "FAIL" and cluster["detail"].endswith("is below 400 GB/s")


def test_nccl_across_the_nodes_not_run_says_why():
    assert mnc_verify_nccl.check_nccl_cluster(
        {"not_applicable": "a single node: nothing crosses a node"}, 25.0, False
    ) == (
        [],
        None,
    )
    rows, _ = mnc_verify_nccl.check_nccl_cluster(
        {"skipped_reason": "no all_reduce_perf on the PATH of mpiuser"}, 25.0, False
    )
    assert rows == [
        {
            "check": "nccl-tests",
            "subject": "cluster",
            "status": "SKIP",
            "detail": "no all_reduce_perf on the PATH of mpiuser",
        }
    ]
    rows, _ = mnc_verify_nccl.check_nccl_cluster({"rc": 124, "stdout": "", "stderr": ""}, 25.0, False)
    assert rows[0]["status"] == "FAIL" and "gave no result: timed out" in rows[0]["detail"]
