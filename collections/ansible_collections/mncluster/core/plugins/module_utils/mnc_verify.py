"""The acceptance checks of playbooks/verify.yml as pure functions.

Each check turns what the nodes reported into table rows
``{"check", "subject", "status", "detail"}`` with status PASS, FAIL or SKIP;
``evaluate`` runs them all and renders the table. The checks live by concern:
mnc_verify_mpi (hostfile, ranks, point-to-point bandwidth, MPI-IO), mnc_verify_gpu (Open MPI's
CUDA support, each node's GPUs and services), mnc_verify_gpu_cluster (the GPUs across the nodes,
InfiniBand), mnc_verify_gpu_health (DCGM, nccl-tests, node health); mnc_verify_render renders
the table, verify.md and the pair matrix; mnc_verify_rows holds the row and the helpers they
share. This module keeps reachability, versions, ``check_gpu`` and ``evaluate``. No Ansible
imports: unit-tested directly (tests/unit/test_verify*.py), used by mncluster.core.mnc_verify_table.

Units follow nccl-tests: bytes, seconds, GB/s = 1e9 B/s. Link speeds are
configured in Gbit/s (``mnc_link_gbps``): GB/s = Gbit/s / 8.
"""

from __future__ import annotations

from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_gpu import (
    CPU_MODE,
    check_cuda,
    check_gpu_node,
    check_services,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_gpu_cluster import check_gpu_cluster
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_gpu_health import check_gpu_health
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_mpi import (
    check_hostfile,
    check_mpiio,
    check_p2p,
    check_ranks,
    p2p_matrix,
    parse_hostfile,
    parse_p2p,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_render import (
    render_p2p_text,
    render_table,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_rows import (
    FAIL,
    PASS,
    SKIP,
    clip,
    row,
)

# Components that must be identical on every node (key in mnc_versions.py's output -> label).
VERSION_KEYS = (
    ("python", "Python"),
    ("chainer", "Chainer"),
    ("numpy", "NumPy"),
    ("cupy", "CuPy"),
    ("mpi4py", "mpi4py"),
    ("mpi_library", "MPI library"),
    ("openmpi", "Open MPI (ompi_info)"),
)


# --- the GPUs (mnc_verify_gpu, mnc_verify_gpu_cluster) -----------------------------------------


def check_gpu(nodes: list[dict], nccl_run: dict | None = None, send_run: dict | None = None) -> list[dict]:
    """Every GPU check: each GPU-mode node's own (:func:`check_gpu_node`), a SKIP row naming CPU
    mode for the others, then the checks across nodes (:func:`check_gpu_cluster`)."""
    rows = []
    for n in nodes:
        if not n.get("reachable", True):
            continue
        rows += check_gpu_node(n) if n.get("use_gpu") else [row("gpu", n["name"], SKIP, CPU_MODE)]
    return rows + check_gpu_cluster(nodes, nccl_run, send_run)


# --- versions ----------------------------------------------------------------------------------


def check_versions(nodes: list[dict]) -> list[dict]:
    """The same Python, Chainer, NumPy, CuPy, mpi4py and MPI on every node that answered."""
    check = "versions"
    rows = []
    seen = []
    for n in nodes:
        if not n.get("reachable", True):
            continue
        v = n.get("versions")
        if not v or n.get("versions_error"):
            why = n.get("versions_error") or "nothing"
            rows.append(row(check, n["name"], FAIL, f"could not read versions: {why}"))
            continue
        v = dict(v)
        if (n.get("openmpi") or {}).get("version"):
            v["openmpi"] = n["openmpi"]["version"]
        errors = {k: val for k, val in v.items() if isinstance(val, str) and val.startswith("error:")}
        for k, val in sorted(errors.items()):
            rows.append(row(check, n["name"], FAIL, f"{k}: {val}"))
        seen.append((n["name"], v))
    if not seen:
        return rows or [row(check, "cluster", FAIL, "no node reported versions")]
    differing = []
    agreed = []
    for key, label in VERSION_KEYS:
        # Import errors are reported per node above; compare what did import.
        values = {name: v.get(key) for name, v in seen if key in v and not str(v[key]).startswith("error:")}
        if not values:
            continue
        distinct = sorted({str(x) for x in values.values()})
        if len(distinct) == 1:
            agreed.append(f"{label} {_short(distinct[0])}")
        else:
            groups = {d: sorted(nm for nm, x in values.items() if str(x) == d) for d in distinct}
            where = "; ".join(f"{_short(d)} on {', '.join(h)}" for d, h in groups.items())
            differing.append(f"{label} differs: {where}")
    down = [n["name"] for n in nodes if not n.get("reachable", True)]
    unchecked = f"; not checked: {', '.join(down)}" if down else ""
    if differing:
        rows.append(row(check, "cluster", FAIL, "; ".join(differing) + unchecked))
    else:
        broken = f"; import errors on {', '.join(sorted({r['subject'] for r in rows}))}" if rows else ""
        rows.append(
            row(
                check,
                "cluster",
                PASS if not rows else FAIL,
                f"same on {len(seen)} node(s): " + ", ".join(agreed) + broken + unchecked,
            )
        )
    return rows


def _short(value: str) -> str:
    """The first line, first two comma-separated parts ("Open MPI v5.0.7, package: ...")."""
    line = value.strip().splitlines()[0] if value.strip() else value
    return ", ".join(line.split(", ")[:2])[:80]


# --- the whole table ---------------------------------------------------------------------------


def check_reachable(nodes: list[dict]) -> list[dict]:
    return [
        row("node answers", n["name"], PASS, f"{n.get('nodename') or n['name']} ({n.get('private_ip', '?')})")
        if n.get("reachable", True)
        else row(
            "node answers", n["name"], FAIL, f"did not answer: {clip(n.get('error') or 'unreachable', 160)}"
        )
        for n in nodes
    ]


def evaluate(
    nodes,
    hostfile_text,
    ranks_run,
    p2p_run,
    link_gbps,
    p2p_min_fraction,
    require_cuda,
    launcher=None,
    p2p_median_fraction=0.7,
    gpu_nccl=None,
    gpu_send=None,
    mpiio=None,
    nccl_tests=None,
    nccl_cluster_min_busbw_gbs=None,
) -> dict:
    """Every check's rows, the rendered table, and whether the cluster passed.

    ``launcher``: the inventory name of the node mpiexec ran on (None: not known).
    ``nccl_tests``: nccl-tests' all_reduce_perf across the nodes (one rank per GPU), judged against
    ``nccl_cluster_min_busbw_gbs`` or, without it, ``p2p_min_fraction`` of one link.
    ``gpu_nccl``, ``gpu_send``: the cross-node GPU runs (mnc_gpu_probe.py nccl-allreduce, send gpu),
    shaped like ``p2p_run``; see :func:`check_gpu`. ``mpiio``: the MPI-IO run on the shared
    directory (mnc_mpiio.py), None where nothing is shared; see :func:`check_mpiio`.
    """
    entries = parse_hostfile(hostfile_text) if hostfile_text is not None else []
    by_ip = {n.get("private_ip"): n for n in nodes}
    expected = [
        {"host": (by_ip.get(e["address"]) or {}).get("nodename") or e["address"], "slots": e["slots"]}
        for e in entries
    ]
    rows = check_reachable(nodes)
    rows += (
        check_hostfile(entries, nodes)
        if hostfile_text is not None
        else [row("hostfile", "cluster", FAIL, "not read (no node answered)")]
    )
    launcher_node = next((n for n in nodes if n.get("name") == launcher), {})
    rows += check_ranks(ranks_run, expected, launcher_node.get("nodename") or launcher)
    rows += check_cuda(nodes, require_cuda)
    rows += check_gpu(nodes, gpu_nccl, gpu_send)
    rows += check_services(nodes)
    # DCGM, nccl-tests and the node-health checks (module_utils/mnc_verify_gpu_health.py).
    # The cluster's nccl-tests run is judged against its threshold, else a fraction of one link.
    cluster_floor = nccl_cluster_min_busbw_gbs or (p2p_min_fraction * link_gbps / 8.0 if link_gbps else None)
    health_rows, gpu_health = check_gpu_health(
        nodes, p2p_median_fraction, nccl_tests, cluster_floor, declared=bool(nccl_cluster_min_busbw_gbs)
    )
    rows += health_rows
    rows += check_p2p(p2p_run, link_gbps, p2p_min_fraction, p2p_median_fraction)
    rows += check_mpiio(mpiio)
    rows += check_versions(nodes)
    failures = [f"{r['check']} [{r['subject']}]: {r['detail']}" for r in rows if r["status"] == FAIL]
    down = [n["name"] for n in nodes if not n.get("reachable", True)]
    matrix = _matrix_of(p2p_run)
    return {
        "rows": rows,
        "table": render_table(rows),
        "passed": not failures,
        "failures": failures,
        "not_answering": down,
        "p2p_matrix": matrix,
        "p2p_matrix_text": render_p2p_text(matrix) if matrix else "no pair measured",
        "gpu_health": gpu_health,
    }


def _matrix_of(run: dict | None) -> dict | None:
    """The p2p run's matrix, or None where it did not produce one."""
    if not run or run.get("rc") not in (0, None) or not run.get("stdout"):
        return None
    try:
        return p2p_matrix(parse_p2p(run["stdout"]))
    except (ValueError, KeyError, TypeError):
        return None
