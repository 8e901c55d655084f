"""verify's GPU checks across the nodes, one rank per node (the ``nccl-allreduce`` and
``send gpu`` runs of roles/verify/files/mnc_gpu_probe.py): an NCCL allreduce of device buffers,
NCCL's InfiniBand transport on a node with an active port, and an mpi4py ring send of CuPy device
buffers (CUDA-aware MPI). Each node's own GPU checks are mnc_verify_gpu. No Ansible imports
(tests/unit/test_verify_gpu.py)."""

from __future__ import annotations

from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_gpu import (
    active_ports,
    nccl_text,
    nccl_transport,
    parse_probe,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_rows import (
    FAIL,
    PASS,
    SKIP,
    launch_failure,
    not_run,
    row,
)


def _ranks_of(check: str, run: dict | None, fix: str) -> tuple[list[dict] | None, list[dict]]:
    """(the per-rank parts of a cross-node probe run, or None, and the rows when it did not give them)."""
    nothing = not_run(check, "cluster", run)
    if nothing:
        return None, nothing
    try:
        doc = parse_probe(run.get("stdout", ""))
    except ValueError:
        return None, [row(check, "cluster", FAIL, f"{launch_failure(run)}; {fix}")]
    return list(doc.get("ranks") or []), []


def check_gpu_cluster(nodes: list[dict], nccl_run: dict | None, send_run: dict | None) -> list[dict]:
    """Across the nodes, one rank per node: an NCCL allreduce of device buffers (the right sum on
    every rank; on InfiniBand/RoCE, NCCL's IB transport, with GPUDirect RDMA where nvidia_peermem is
    loaded) and an mpi4py ring send of CuPy device buffers (CUDA-aware MPI, proven by use)."""
    answered = [n for n in nodes if n.get("reachable", True)]
    gpu = [n for n in answered if n.get("use_gpu")]
    if not gpu:
        return [row("gpu across nodes", "cluster", SKIP, "no node in GPU mode (mnc_use_gpu): not run")]
    cpu = [n["name"] for n in answered if not n.get("use_gpu")]
    if cpu:
        why = (
            f"not run: {', '.join(cpu)} in CPU mode; ChainerMN on GPUs needs every node in GPU mode "
            "(mnc_accelerator)"
        )
        return [row("gpu nccl allreduce", "cluster", FAIL, why), row("gpu device send", "cluster", FAIL, why)]
    by_host = {n.get("nodename") or n["name"]: n for n in gpu}
    rows = []

    nccl_fix = (
        "check the gpu nccl rows, NCCL_SOCKET_IFNAME / NCCL_IB_HCA in /etc/nccl.conf (mpi_network), and that "
        "the nodes reach each other on the private network"
    )
    ranks, rows_nccl = _ranks_of("gpu nccl allreduce", nccl_run, nccl_fix)
    rows += rows_nccl
    if ranks is not None:
        problems = []
        for r in ranks:
            who = f"rank {r.get('rank')} on {r.get('host')}"
            if r.get("missing"):
                problems.append(f"{who}: CuPy finds no NCCL ({r['missing']})")
            elif r.get("error"):
                problems.append(f"{who}: {r['error']}")
            elif not r.get("ok"):
                problems.append(f"{who} got {r.get('got')}, expected {r.get('want')}")
        hosts = sorted({r.get("host") for r in ranks})
        missing = sorted(set(by_host) - set(hosts))
        if missing:
            problems.append(f"no rank on {', '.join(missing)}")
        if len(ranks) < 2:
            problems.append(f"{len(ranks)} rank(s): nothing crossed a node")
        transport = nccl_transport([line for r in ranks for line in r.get("nccl_log") or []])
        net = transport["network"] or "?"
        if problems:
            rows.append(row("gpu nccl allreduce", "cluster", FAIL, "; ".join(problems) + f"; {nccl_fix}"))
        else:
            r0 = ranks[0]
            rows.append(
                row(
                    "gpu nccl allreduce",
                    "cluster",
                    PASS,
                    (
                        f"{len(ranks)} ranks, one per node: allreduce of {r0.get('bytes', 0) >> 20} MiB "
                        "float32 device "
                        f"buffers gave {r0.get('want'):g} on every rank; NCCL "
                        f"{nccl_text(r0.get('version'))}, "
                        f"network {net}"
                    ),
                )
            )
            rows += _check_ib(ranks, by_host)

    send_fix = (
        "OpenMPI must be built --with-cuda (see openmpi cuda) and mpi4py built against it "
        "(mnc_openmpi_prefix); a device pointer given to an MPI that is not CUDA-aware crashes or arrives "
        "wrong"
    )
    ranks, rows_send = _ranks_of("gpu device send", send_run, send_fix)
    rows += rows_send
    if ranks is not None:
        problems = [
            f"rank {r.get('rank')} on {r.get('host')}: "
            + (r["error"] if r.get("error") else f"the buffer from rank {r.get('from')} arrived wrong")
            for r in ranks
            if not r.get("ok")
        ]
        if len(ranks) < 2:
            problems.append(f"{len(ranks)} rank(s): nothing crossed a node")
        if problems:
            rows.append(row("gpu device send", "cluster", FAIL, "; ".join(problems) + f"; {send_fix}"))
        else:
            rows.append(
                row(
                    "gpu device send",
                    "cluster",
                    PASS,
                    (
                        f"{len(ranks)} ranks, one per node: {ranks[0].get('bytes', 0) >> 20} MiB CuPy device "
                        "buffers "
                        "sent around the ring with mpi4py arrived intact (CUDA-aware MPI in use)"
                    ),
                )
            )
    return rows


def _check_ib(ranks: list[dict], by_host: dict) -> list[dict]:
    """On a node with an active InfiniBand/RoCE port, NCCL must use its IB transport, and GPUDirect
    RDMA where nvidia_peermem is loaded."""
    rows = []
    for r in ranks:
        n = by_host.get(r.get("host"))
        if n is None:
            continue
        try:
            doc = parse_probe((n.get("gpu_probe") or {}).get("stdout", ""))
        except ValueError:
            doc = {}
        ports = active_ports(doc)
        if not ports:
            continue
        peermem = bool((doc.get("infiniband") or {}).get("peermem"))
        t = nccl_transport(r.get("nccl_log") or [])
        where = f"active port(s) {', '.join(ports)}"
        if t["network"] != "IB":
            rows.append(
                row(
                    "gpu ib transport",
                    n["name"],
                    FAIL,
                    (
                        f"{where}, but NCCL uses {t['network'] or 'an unknown network'}, not NET/IB: install "
                        "rdma-core "
                        "(libibverbs) for NCCL, check NCCL_IB_HCA (mpi_network_ib_hca) and that "
                        "NCCL_IB_DISABLE is unset"
                    ),
                )
            )
        elif peermem and not t["gdrdma"]:
            rows.append(
                row(
                    "gpu ib transport",
                    n["name"],
                    FAIL,
                    (
                        f"{where}; NCCL uses NET/IB, but not GPUDirect RDMA although nvidia_peermem is "
                        "loaded: "
                        "check nvidia-smi topo -m (GPU and HCA under one PCIe switch) and NCCL_NET_GDR_LEVEL"
                    ),
                )
            )
        else:
            gdr = (
                "with GPUDirect RDMA" if t["gdrdma"] else "without GPUDirect RDMA (nvidia_peermem not loaded)"
            )
            rows.append(row("gpu ib transport", n["name"], PASS, f"{where}; NCCL uses NET/IB {gdr}"))
    return rows
