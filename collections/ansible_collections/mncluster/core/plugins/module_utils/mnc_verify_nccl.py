"""verify's nccl-tests rows: ``all_reduce_perf`` over all GPUs of each node (against the node's
``verify_nccl_min_busbw_gbs``, or the median node), and across all nodes, one rank per GPU
(against ``verify_nccl_cluster_min_busbw_gbs``, or a fraction of one link). Parsing is
mnc_nccl_tests; no Ansible imports (tests/unit/test_verify_gpu_health.py)."""

from __future__ import annotations

from ansible_collections.mncluster.core.plugins.module_utils import mnc_nccl_tests
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_rows import (
    FAIL,
    PASS,
    SKIP,
    failed_run,
    row,
)


def _median(values: list[float]) -> float:
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2.0


def _threshold(value) -> float | None:
    """The node's verify_nccl_min_busbw_gbs: a positive number, or None (none declared)."""
    try:
        return float(value) if value not in (None, "", "None") and float(value) > 0 else None
    except (TypeError, ValueError):
        return None


def check_nccl_tests(nodes: list[dict], median_fraction: float | None) -> tuple[list[dict], dict]:
    """Each GPU node's ``all_reduce_perf`` over all its GPUs: no wrong result, and busbw at the
    largest size at least the node's ``nccl_min_busbw_gbs`` (verify_nccl_min_busbw_gbs, per node
    type in the inventory); where none is declared, at least ``median_fraction`` of the median
    node's. Returns (rows, {node: parsed or None})."""
    parsed: dict[str, dict | None] = {}
    rows_by_node: dict[str, dict] = {}
    for n in nodes:
        run = (n.get("health") or {}).get("nccl")
        why = failed_run(run)
        doc = None
        if run and not run.get("skipped_reason"):
            try:
                doc = mnc_nccl_tests.parse_perf(run.get("stdout", ""))
            except ValueError:
                doc = None
        parsed[n["name"]] = doc
        if doc is None:
            status = SKIP if run and run.get("skipped_reason") else FAIL
            detail = why or "no result rows in the output"
            if status == FAIL:
                detail = f"all_reduce_perf gave no result: {detail}"
            rows_by_node[n["name"]] = row("nccl-tests", n["name"], status, detail)
    peaks = {name: mnc_nccl_tests.peak(d)["busbw"] for name, d in parsed.items() if d}
    median = _median(list(peaks.values())) if len(peaks) > 1 else None
    for n in nodes:
        doc = parsed[n["name"]]
        if doc is None:
            continue
        top = mnc_nccl_tests.peak(doc)
        threshold = _threshold(n.get("nccl_min_busbw_gbs"))
        gpus = len({r["device"] for r in doc["ranks"]}) or "?"
        detail = (
            f"all_reduce_perf on {gpus} GPU(s): busbw {top['busbw']:.2f} GB/s (algbw {top['algbw']:.2f}) "
            f"at {top['bytes']} B"
        )
        problems = mnc_nccl_tests.problems(doc, threshold)
        if threshold:
            detail += f"; threshold {threshold:g} GB/s (verify_nccl_min_busbw_gbs)"
        elif median and median_fraction:
            detail += f"; {top['busbw'] / median:.0%} of the median node ({median:.2f} GB/s)"
            if top["busbw"] < median_fraction * median:
                problems.append(f"below {median_fraction:.0%} of the median node")
        else:
            detail += "; no threshold (verify_nccl_min_busbw_gbs) and no other node to compare with"
        if problems:
            rows_by_node[n["name"]] = row("nccl-tests", n["name"], FAIL, detail + "; " + "; ".join(problems))
        elif not threshold and not (median and median_fraction):
            rows_by_node[n["name"]] = row("nccl-tests", n["name"], SKIP, detail)
        else:
            rows_by_node[n["name"]] = row("nccl-tests", n["name"], PASS, detail)
    return [rows_by_node[n["name"]] for n in nodes], parsed


def check_nccl_cluster(
    run: dict | None, floor: float | None, declared: bool
) -> tuple[list[dict], dict | None]:
    """nccl-tests across all nodes, one rank per GPU: no wrong result, and busbw at the largest
    size at least ``floor`` (verify_nccl_cluster_min_busbw_gbs when ``declared``, else a fraction
    of one link). No row where it does not apply (no GPU node, a single node)."""
    if run is None or run.get("not_applicable"):
        return [], None
    why = failed_run(run)
    try:
        doc = mnc_nccl_tests.parse_perf(run.get("stdout", ""))
    except ValueError:
        doc = None
    if doc is None:
        if run.get("skipped_reason"):
            return [row("nccl-tests", "cluster", SKIP, run["skipped_reason"])], None
        return [
            row(
                "nccl-tests",
                "cluster",
                FAIL,
                f"all_reduce_perf across the nodes gave no result: {why}; "
                "check the per-node nccl-tests rows, NCCL_SOCKET_IFNAME / NCCL_IB_HCA (mpi_network)",
            )
        ], None
    top = mnc_nccl_tests.peak(doc)
    hosts = len({r["host"] for r in doc["ranks"]})
    detail = (
        f"all_reduce_perf, {len(doc['ranks'])} ranks on {hosts} node(s): busbw {top['busbw']:.2f} GB/s "
        f"(algbw {top['algbw']:.2f}) at {top['bytes']} B"
    )
    if floor:
        source = "verify_nccl_cluster_min_busbw_gbs" if declared else "verify_p2p_min_fraction of one link"
        detail += f"; threshold {floor:g} GB/s ({source})"
    problems = mnc_nccl_tests.problems(doc, floor)
    if problems:
        return [row("nccl-tests", "cluster", FAIL, detail + "; " + "; ".join(problems))], doc
    return [
        row("nccl-tests", "cluster", PASS if floor else SKIP, detail if floor else detail + "; no threshold")
    ], doc


def nccl_record(doc: dict) -> dict:
    return {
        "by_size": mnc_nccl_tests.by_size(doc),
        "peak": mnc_nccl_tests.peak(doc),
        "avg_busbw": doc["avg_busbw"],
    }
