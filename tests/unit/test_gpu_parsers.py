"""The GPU tools' parsers fed recorded real outputs (tests/unit/fixtures/gpu/README.md says
where each comes from): dcgmi diag, all_reduce_perf, nvidia-smi -q, nvidia-smi topo -m, the
kernel's Xid lines; each judged PASS or FAIL as verify and the Slurm health check judge it."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from ansible_collections.mncluster.core.plugins.module_utils import (
    mnc_dcgm,
    mnc_nccl_tests,
    mnc_nvsmi,
    mnc_nvtopo,
    mnc_xid,
)

FIXTURES = Path(__file__).parent / "fixtures" / "gpu"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


# --- dcgmi diag ------------------------------------------------------------------------------------


def test_dcgm_3_level_3_on_blackwell_passes_naming_what_it_skipped():
    doc = mnc_dcgm.parse_diag(text("dcgmi-diag-r3-pass-570-blackwell.txt"))
    assert doc["metadata"] == {
        "DCGM Version": "3.3.9",
        "Driver Version Detected": "570.172.08",
        "GPU Device IDs Detected": "2bb5,2bb5",
    }
    assert [t["name"] for t in doc["tests"]][:3] == ["Denylist", "NVML Library", "CUDA Main Library"]
    assert {t["section"] for t in doc["tests"]} == {"Deployment", "Integration", "Hardware", "Stress"}
    assert mnc_dcgm.failures(doc) == []
    assert mnc_dcgm.summary(doc) == (
        "9 passed; 6 skipped (PCIe, GPU Memory, Targeted Stress, Targeted Power, Memory Bandwidth, EUD Test) "
        "(DCGM Version 3.3.9, Driver Version Detected 570.172.08)"
    )


def test_dcgm_failure_names_the_test_and_joins_dcgms_wrapped_error_text():
    doc = mnc_dcgm.parse_diag(text("dcgmi-diag-r4-fail-persistence.txt"))
    assert mnc_dcgm.failures(doc) == [
        "Persistence Mode failed: Persistence mode for GPU 0 is currently disabled. The DCGM diagnostic "
        'requires peristence mode to be enabled. Enable persistence mode by running "nvidia-smi -i <gpuId> '
        '-pm 1 " as root.'
    ]
    # The error is a note of the test above it, not a test of its own.
    assert "Error" not in [t["name"] for t in doc["tests"]]
    assert next(t for t in doc["tests"] if t["name"] == "Memtest")["result"] == "Pass - All"


def test_dcgm_4_per_gpu_results():
    doc = mnc_dcgm.parse_diag(text("dcgmi-diag-r3-pass-dcgm4.txt"))
    assert [t["name"] for t in doc["tests"]] == [
        "software",
        "memory",
        "diagnostic",
        "pcie",
        "memory_bandwidth",
        "targeted_stress",
        "targeted_power",
    ]
    assert all(t["gpus"] == {0: "Pass", 1: "Pass", 2: "Pass", 3: "Pass"} for t in doc["tests"])
    assert mnc_dcgm.failures(doc) == []
    # One GPU failing in DCGM 4's layout is named with its GPU.
    lines = text("dcgmi-diag-r3-pass-dcgm4.txt").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("| memory "))
    lines[at] = lines[at].replace("Pass", "Fail")
    assert "GPU2: Pass" in lines[at + 3]
    lines[at + 3] = lines[at + 3].replace("GPU2: Pass", "GPU2: Fail")
    failing = "\n".join(lines)
    assert mnc_dcgm.failures(mnc_dcgm.parse_diag(failing)) == ["memory on GPU 2 failed"]


def test_dcgm_output_without_a_table_is_refused():
    with pytest.raises(ValueError, match="no diagnostic table"):
        mnc_dcgm.parse_diag("Error: unable to establish a connection to the specified host: localhost\n")


# --- all_reduce_perf -------------------------------------------------------------------------------


def test_all_reduce_perf_rows_ranks_and_peak():
    doc = mnc_nccl_tests.parse_perf(text("all_reduce_perf-2x8-h100.txt"))
    assert len(doc["rows"]) == 31 and doc["rows"][0]["bytes"] == 8 and doc["rows"][-1]["bytes"] == 8 << 30
    assert len(doc["ranks"]) == 16 and {r["host"] for r in doc["ranks"]} == {"ztan-mig-235z", "ztan-mig-gq73"}
    assert doc["ranks"][15] == {
        "rank": 15,
        "host": "ztan-mig-gq73",
        "device": 7,
        "bus": "0000:8c:00",
        "name": "NVIDIA H100 80GB HBM3",
    }
    assert doc["avg_busbw"] == 70.742 and doc["out_of_bounds_ok"] is True
    assert mnc_nccl_tests.peak(doc) == {"bytes": 8 << 30, "busbw": 338.82, "algbw": 180.71}
    assert mnc_nccl_tests.by_size(doc)[-1] == {"bytes": 8 << 30, "algbw": 180.71, "busbw": 338.82}


def test_all_reduce_perf_judged_against_a_threshold():
    doc = mnc_nccl_tests.parse_perf(text("all_reduce_perf-2x8-h100.txt"))
    assert mnc_nccl_tests.problems(doc, 300.0) == []
    assert mnc_nccl_tests.problems(doc, 400.0) == ["busbw 338.82 GB/s at 8589934592 B is below 400 GB/s"]


def test_all_reduce_perf_wrong_results_fail_whatever_the_bandwidth():
    lines = text("all_reduce_perf-2x8-h100.txt").splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["1048576"])
    # The in-place #wrong column of the 1 MiB row: 0 -> 3, as nccl-tests prints a wrong sum.
    lines[at] = lines[at][: lines[at].rstrip().rfind(" ")] + "      3"
    lines = [
        line.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 2 FAILED") for line in lines
    ]
    doc = mnc_nccl_tests.parse_perf("\n".join(lines))
    assert mnc_nccl_tests.problems(doc, None) == [
        "wrong results at 1 size(s), from 1048576 B",
        "out-of-bounds values reported",
    ]


def test_all_reduce_perf_without_rows_is_refused():
    with pytest.raises(ValueError, match="no result rows"):
        mnc_nccl_tests.parse_perf(
            "# nThread 1 nGpus 8 minBytes 8\nTest NCCL failure common.cu:1005 'unhandled cuda error'\n"
        )


# --- nvidia-smi -q ---------------------------------------------------------------------------------


def test_nvidia_smi_h800_busy_at_full_link_passes():
    doc = mnc_nvsmi.parse_query(text("nvidia-smi-q-h800-525-p0.txt"))
    assert doc["driver"] == "525.105.17" and doc["cuda"] == "12.0"
    (g,) = doc["gpus"]
    assert g["bus_id"] == "00000000:18:00.0" and g["name"] == "NVIDIA H800" and g["persistence"] is True
    assert g["pcie"] == {"gen_max": 5, "gen_current": 5, "width_max": 16, "width_current": 16}
    assert g["remapped"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert mnc_nvsmi.persistence_problems(doc) == []
    assert mnc_nvsmi.ecc_problems(doc) == []
    assert mnc_nvsmi.pcie_problems(doc) == ([], [])


def test_nvidia_smi_a16_narrow_link_fails_and_an_idle_slow_one_is_a_note():
    doc = mnc_nvsmi.parse_query(text("nvidia-smi-q-a16-470-idle.txt"))
    (g,) = doc["gpus"]
    assert g["perf_state"] == "P8" and g["ecc_mode"] == "Enabled"
    assert g["ecc_volatile_uncorrectable"] == 0 and g["ecc_aggregate_uncorrectable"] == 0
    problems, notes = mnc_nvsmi.pcie_problems(doc)
    assert problems == ["GPU 0 (00000000:13:00.0) PCIe width x4 of x16"]
    assert notes == [
        "GPU 0 (00000000:13:00.0) PCIe Gen1 of Gen4 at P8 (an idle link trains down to save power)"
    ]
    # The same slow generation while busy is a fault.
    busy = text("nvidia-smi-q-a16-470-idle.txt").replace(
        "Performance State                     : P8", "Performance State                     : P0"
    )
    assert (
        "GPU 0 (00000000:13:00.0) PCIe Gen1 of Gen4 while busy (P0)"
        in mnc_nvsmi.pcie_problems(mnc_nvsmi.parse_query(busy))[0]
    )


def test_nvidia_smi_row_remapping_pending_fails():
    doc = mnc_nvsmi.parse_query(text("nvidia-smi-q-ecc-row-remapper-pending-550.txt"))
    (g,) = doc["gpus"]
    assert g["remapped"] == {"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False}
    assert mnc_nvsmi.ecc_problems(doc) == [
        "GPU 0 (00000000:52:00.0) row remapping pending (reset the GPU to activate it)"
    ]


def test_nvidia_smi_uncorrectable_volatile_errors_and_persistence_off_fail():
    q = (
        text("nvidia-smi-q-a16-470-idle.txt")
        .replace(
            "Persistence Mode                      : Enabled",
            "Persistence Mode                      : Disabled",
        )
        .replace(
            "            DRAM Uncorrectable            : 0\n        Aggregate",
            "            DRAM Uncorrectable            : 2\n        Aggregate",
        )
    )
    doc = mnc_nvsmi.parse_query(q)
    assert mnc_nvsmi.persistence_problems(doc) == ["GPU 0 (00000000:13:00.0) persistence mode off"]
    assert mnc_nvsmi.ecc_problems(doc) == [
        "GPU 0 (00000000:13:00.0) 2 uncorrectable ECC error(s) since the driver loaded"
    ]


# --- nvidia-smi topo -m ----------------------------------------------------------------------------


def test_topo_nearest_nic_of_named_nic_columns():
    doc = mnc_nvtopo.parse_topo(text("topo-m-4gpu-4nic.txt"))
    assert doc["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"] and doc["nics"] == [
        "mlx5_0",
        "mlx5_1",
        "mlx5_2",
        "mlx5_3",
    ]
    assert doc["matrix"]["GPU0"]["GPU1"] == "NV3" and doc["affinity"]["GPU2"] == {"CPU Affinity": "64-127"}
    assert mnc_nvtopo.summary(doc) == (
        "GPU0 -> mlx5_0 (NODE), GPU1 -> mlx5_0 (NODE), GPU2 -> mlx5_2 (NODE), GPU3 -> mlx5_2 (NODE)"
    )


def test_topo_nic_legend_names_the_nics():
    doc = mnc_nvtopo.parse_topo(text("topo-m-8gpu-h800-nic-legend.txt"))
    assert doc["nics"] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert doc["nearest_nic"]["GPU1"] == {"nic": "mlx5_0", "path": "PIX"}
    assert doc["nearest_nic"]["GPU3"] == {"nic": "mlx5_1", "path": "PIX"}
    assert doc["nearest_nic"]["GPU7"] == {"nic": "mlx5_2", "path": "PIX"}
    assert doc["affinity"]["GPU4"] == {"CPU Affinity": "32-63,96-127", "NUMA Affinity": "1"}


def test_topo_without_a_nic():
    doc = mnc_nvtopo.parse_topo(text("topo-m-2gpu-blackwell-no-nic.txt"))
    assert doc["nics"] == [] and doc["nearest_nic"] == {"GPU0": None, "GPU1": None}
    assert doc["matrix"]["GPU0"]["GPU1"] == "PIX"
    assert mnc_nvtopo.summary(doc) == "2 GPU(s), no NIC in the matrix"
    with pytest.raises(ValueError, match="no matrix header"):
        mnc_nvtopo.parse_topo(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
        )


# --- Xid ---------------------------------------------------------------------------------------------


def test_xid_lines_are_named_per_gpu_and_code():
    xids = mnc_xid.parse_xids(text("dmesg-xid-48-63-94.txt"))
    assert [(x["bus"], x["code"]) for x in xids] == [
        ("0000:52:00", 48),
        ("0000:52:00", 63),
        ("0000:52:00", 94),
    ]
    assert mnc_xid.xid_problems(xids) == [
        "Xid 48 on 0000:52:00",
        "Xid 63 on 0000:52:00",
        "Xid 94 on 0000:52:00",
    ]
    # An application's own fault (13: graphics engine exception) is not the node's.
    app = "[  12.5] NVRM: Xid (PCI:0000:18:00): 13, pid=4242, name=python, Graphics Exception: ESR 0x405840"
    assert mnc_xid.xid_problems(mnc_xid.parse_xids(app)) == []
