"""verify's node-health rows: what the established GPU-cluster tools check on a node.

``check_gpu_health`` turns what each node reported under ``health`` (the run of
roles/verify/files/mnc_gpu_health.py, ``dcgmi diag`` and nccl-tests' ``all_reduce_perf``)
into table rows: DCGM's diagnostic, the intra-node all-reduce bus bandwidth against a
threshold, persistence mode, ECC and retired/remapped memory, the PCIe link, Xid errors since
boot, the ``nvidia-uvm`` device nodes, the CUDA runtime against the driver, the topology (each
GPU's nearest NIC) and InfiniBand link flaps. A node in CPU mode gets one SKIP row per check
group, saying why. ``gpu_health_record`` is what verify.json keeps of it (docs/verify-json.md).

The parsing is one module per tool (mnc_dcgm, mnc_nccl_tests, mnc_nvsmi, mnc_nvtopo, mnc_xid);
this module only judges. No Ansible imports (tests/unit/test_verify_gpu_health.py).
"""

from __future__ import annotations

import json

from ansible_collections.mncluster.core.plugins.module_utils import mnc_dcgm, mnc_nvsmi, mnc_nvtopo, mnc_xid
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_nccl import (
    check_nccl_cluster,
    check_nccl_tests,
    nccl_record,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_rows import (
    FAIL,
    PASS,
    SKIP,
    clip,
    failed_run,
    row,
)

CPU_MODE = "CPU mode (mnc_use_gpu false): no GPU to check"


# --- DCGM ------------------------------------------------------------------------------------------


def check_dcgm(name: str, run: dict | None) -> list[dict]:
    """``dcgmi diag -r <level>``: every test passed or was skipped by DCGM; the failing tests named."""
    if run is None or run.get("off"):
        return [row("dcgm", name, SKIP, (run or {}).get("off") or "not run")]
    level = run.get("level", "?")
    why = failed_run(run)
    try:
        doc = mnc_dcgm.parse_diag(run.get("stdout", ""))
    except ValueError:
        doc = None
    if doc is None:
        return [
            row(
                "dcgm",
                name,
                FAIL,
                f"dcgmi diag -r {level} gave no result: {why or 'no table in the output'}; "
                "check that nvidia-dcgm runs (systemctl status nvidia-dcgm) and dcgmi discovery -l",
            )
        ]
    failed = mnc_dcgm.failures(doc)
    if failed:
        return [row("dcgm", name, FAIL, f"dcgmi diag -r {level}: " + clip("; ".join(failed), 400))]
    return [row("dcgm", name, PASS, f"dcgmi diag -r {level}: {mnc_dcgm.summary(doc)}")]


# --- nvidia-smi, topology, kernel log, device nodes, InfiniBand ------------------------------------


def _rows_from(check: str, name: str, problems: list[str], fine: str, fix: str) -> dict:
    if problems:
        return row(check, name, FAIL, clip("; ".join(problems), 400) + f"; {fix}")
    return row(check, name, PASS, fine)


def check_nvidia_smi(name: str, run: dict | None, want_gpus: int) -> tuple[list[dict], dict | None]:
    """Persistence mode, ECC and retired/remapped memory, the PCIe link, from ``nvidia-smi -q``."""
    why = failed_run(run)
    try:
        doc = mnc_nvsmi.parse_query((run or {}).get("stdout", "")) if not why else None
    except ValueError:
        doc = None
    if not doc or not doc["gpus"]:
        detail = (
            f"nvidia-smi -q gave no GPU: {why or 'no GPU block in the output'}; check the driver (nvidia-smi)"
        )
        return [row("gpu persistence", name, FAIL, detail)], None
    rows = []
    count = len(doc["gpus"])
    counted = f"{count} GPU(s)" + (
        f" of the {want_gpus} lspci shows" if want_gpus and want_gpus != count else ""
    )
    problems = mnc_nvsmi.persistence_problems(doc)
    if want_gpus and count != want_gpus:
        problems.append(f"nvidia-smi shows {count} GPU(s), lspci {want_gpus} (mnc_gpu_count)")
    rows.append(
        _rows_from(
            "gpu persistence",
            name,
            problems,
            f"{counted} in persistence mode",
            "start nvidia-persistenced (nvidia_driver role) or nvidia-smi -pm 1",
        )
    )
    rows.append(
        _rows_from(
            "gpu ecc",
            name,
            mnc_nvsmi.ecc_problems(doc),
            mnc_nvsmi.ecc_summary(doc),
            "drain the node and reset the GPU (nvidia-smi -r); replace it when remapping failed",
        )
    )
    problems, notes = mnc_nvsmi.pcie_problems(doc)
    fine = mnc_nvsmi.pcie_summary(doc) + ("; " + "; ".join(notes) if notes else "")
    rows.append(
        _rows_from(
            "gpu pcie link",
            name,
            problems,
            fine,
            "reseat the card or riser, check the slot's wiring and the BIOS's link settings",
        )
    )
    return rows, doc


def check_topology(name: str, run: dict | None) -> tuple[list[dict], dict | None]:
    why = failed_run(run)
    try:
        doc = mnc_nvtopo.parse_topo((run or {}).get("stdout", "")) if not why else None
    except ValueError as exc:
        why = str(exc)
        doc = None
    if doc is None:
        return [row("gpu topology", name, FAIL, f"nvidia-smi topo -m gave nothing: {why}")], None
    return [row("gpu topology", name, PASS, "nearest NIC: " + mnc_nvtopo.summary(doc))], doc


def check_xid(name: str, run: dict | None) -> list[dict]:
    why = failed_run(run)
    if why:
        return [row("gpu xid", name, FAIL, f"could not read the kernel log: {why}")]
    xids = mnc_xid.parse_xids(run.get("stdout", ""))
    problems = mnc_xid.xid_problems(xids)
    if problems:
        return [
            row(
                "gpu xid",
                name,
                FAIL,
                "since boot: "
                + clip("; ".join(problems), 300)
                + "; look the codes up in NVIDIA's Xid catalogue (48: double-bit ECC, 79: fell off the bus)",
            )
        ]
    apps = len(xids)
    return [
        row(
            "gpu xid",
            name,
            PASS,
            "no Xid since boot"
            if not apps
            else f"{apps} Xid(s) of applications' own faults (13, 31, 43, 45, 68) since boot, "
            "none of the node",
        )
    ]


def check_uvm(name: str, present: list | None) -> list[dict]:
    """The nvidia-uvm device nodes CUDA needs for managed memory (a validator that finds them
    missing reports CUDA broken: nvidia-modprobe, or the nvidia-uvm module loaded at boot)."""
    want = ["/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    missing = [p for p in want if p not in (present or [])]
    if missing:
        return [
            row(
                "gpu uvm",
                name,
                FAIL,
                f"missing {', '.join(missing)}: load nvidia-uvm (modprobe nvidia-uvm; "
                "nvidia-modprobe -u -c 0) and have it loaded at boot",
            )
        ]
    return [row("gpu uvm", name, PASS, ", ".join(want) + " present")]


def _cuda_text(code) -> str:
    return f"{code // 1000}.{code % 1000 // 10}" if isinstance(code, int) and code else "?"


def check_cuda_driver(n: dict) -> list[dict]:
    """The CUDA runtime (CuPy's) not newer than the CUDA the driver supports."""
    stdout = (n.get("gpu_probe") or {}).get("stdout") or ""
    cuda = {}
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("PROBE "):
            try:
                cuda = json.loads(line[6:]).get("cuda") or {}
            except ValueError:
                cuda = {}
            break
    driver, runtime = cuda.get("driver"), cuda.get("runtime")
    if not isinstance(driver, int) or not isinstance(runtime, int) or not driver or not runtime:
        return [
            row(
                "gpu cuda driver",
                n["name"],
                SKIP,
                "the GPU probe reported no driver and runtime versions (see gpu cuda)",
            )
        ]
    text = f"runtime CUDA {_cuda_text(runtime)}, driver supports CUDA {_cuda_text(driver)}"
    if runtime > driver:
        return [
            row(
                "gpu cuda driver",
                n["name"],
                FAIL,
                text + ": the runtime is newer than the driver; install "
                "a newer driver branch (stack_nvidia_driver_branch) or an older CUDA (stack_cuda_version)",
            )
        ]
    return [row("gpu cuda driver", n["name"], PASS, text)]


def check_ib_flaps(name: str, ports: dict | None) -> list[dict]:
    """InfiniBand/RoCE ports' link_downed and link_error_recovery counters (no row without ports)."""
    if not ports:
        return []
    flapped = [
        f"{p}: link_downed {c.get('link_downed')}, link_error_recovery {c.get('link_error_recovery')}"
        for p, c in sorted(ports.items())
        if (c.get("link_downed") or 0) > 0 or (c.get("link_error_recovery") or 0) > 0
    ]
    if flapped:
        return [
            row(
                "ib link flaps",
                name,
                FAIL,
                "; ".join(flapped) + "; check the cable and the switch port "
                "(the counters count since the HCA's reset: perfquery -x -R clears them)",
            )
        ]
    return [row("ib link flaps", name, PASS, f"{len(ports)} port(s), no link down or error recovery")]


# --- the whole ------------------------------------------------------------------------------------


def check_gpu_health(
    nodes: list[dict],
    median_fraction: float | None = 0.7,
    cluster_run: dict | None = None,
    cluster_floor: float | None = None,
    declared: bool = False,
) -> tuple[list[dict], dict]:
    """Every node-health row (and nccl-tests across the nodes, ``cluster_run``), and the record
    verify.json keeps (:func:`gpu_health_record`; the cluster's run under ``cluster``)."""
    rows, record = [], {}
    answered = [n for n in nodes if n.get("reachable", True)]
    gpu_nodes = [n for n in answered if n.get("use_gpu")]
    for n in answered:
        if n.get("use_gpu"):
            continue
        reason = (n.get("health") or {}).get("skipped_reason") or CPU_MODE
        rows.append(row("dcgm", n["name"], SKIP, reason))
        rows.append(row("nccl-tests", n["name"], SKIP, reason))
        rows.append(
            row(
                "gpu node health",
                n["name"],
                SKIP,
                reason + " (persistence, ECC, PCIe link, Xid, nvidia-uvm, CUDA against the driver, topology)",
            )
        )
    nccl_rows, nccl_docs = check_nccl_tests(gpu_nodes, median_fraction)
    nccl_by_node = {r["subject"]: r for r in nccl_rows}
    for n in gpu_nodes:
        name, health = n["name"], n.get("health") or {}
        if health.get("skipped_reason"):
            rows.append(row("gpu node health", name, FAIL, f"not collected: {health['skipped_reason']}"))
            continue
        rows += check_dcgm(name, health.get("dcgm"))
        rows.append(nccl_by_node[name])
        smi_rows, smi = check_nvidia_smi(name, health.get("nvidia_smi"), int(n.get("gpu_count") or 0))
        rows += smi_rows
        rows += check_xid(name, health.get("xid"))
        rows += check_uvm(name, health.get("uvm"))
        rows += check_cuda_driver(n)
        topo_rows, topo = check_topology(name, health.get("topo"))
        rows += topo_rows
        rows += check_ib_flaps(name, health.get("ib"))
        record[name] = gpu_health_record(health, smi, topo, nccl_docs.get(name))
    cluster_rows, cluster_doc = check_nccl_cluster(cluster_run, cluster_floor, declared)
    rows += cluster_rows
    if cluster_doc:
        record["cluster"] = {"nccl_tests": nccl_record(cluster_doc)}
    return rows, record


def gpu_health_record(health: dict, smi: dict | None, topo: dict | None, nccl: dict | None) -> dict:
    """What verify.json keeps of one GPU node (docs/verify-json.md, ``gpu_health``)."""
    dcgm_run = health.get("dcgm") or {}
    try:
        dcgm = mnc_dcgm.parse_diag(dcgm_run.get("stdout", "")) if dcgm_run.get("stdout") else None
    except ValueError:
        dcgm = None
    return {
        "nvidia_smi": smi,
        "topology": {
            "matrix": topo["matrix"],
            "nearest_nic": topo["nearest_nic"],
            "affinity": topo["affinity"],
        }
        if topo
        else None,
        "dcgm": {"level": dcgm_run.get("level"), "tests": dcgm["tests"], "metadata": dcgm["metadata"]}
        if dcgm
        else None,
        "nccl_tests": nccl_record(nccl) if nccl else None,
        "xid": mnc_xid.parse_xids((health.get("xid") or {}).get("stdout", "")),
        "uvm": health.get("uvm"),
        "ib": health.get("ib"),
    }
