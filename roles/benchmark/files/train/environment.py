"""What a reader needs to judge a run: versions, MPI library, and every rank's host, CPUs and GPU.

The parts come from ``train.node`` (CPUs, interfaces), ``train.launch`` (the batch job) and
what ``train.startup`` settled before MPI started (``BEFORE_MPI``: the yield decision,
``ompi_info``'s settings, NCCL's INFO lines).
"""

from __future__ import annotations

import os
import platform

import numpy as np

from train import torch_environment
from train.launch import scheduler_job
from train.node import OMPI_DEFAULT_EXCLUDE, _read, interfaces, node_cpus, tcp_interfaces
from train.startup import BEFORE_MPI, nccl_debug_read

# What the ranks were told about transports, as mpiexec --mca / -x pass it.
TRANSPORT_VARS = ("OMPI_MCA_btl", "OMPI_MCA_pml", "OMPI_MCA_btl_tcp_if_include",
                  "OMPI_MCA_btl_tcp_if_exclude", "OMPI_MCA_oob_tcp_if_include", "NCCL_SOCKET_IFNAME",
                  "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_NET", "UCX_NET_DEVICES")


def mpi_tcp_interfaces(ranks: list[dict], pinning: dict | None) -> dict:
    """Per host, the interfaces Open MPI's TCP transport uses (when TCP carries the traffic)."""
    pinning = pinning or {}
    # ompi_info (rank 0, before MPI_Init) resolved both from the MCA files and the environment;
    # without it, what the ranks were told
    include = pinning.get("btl_tcp_if_include") or os.environ.get(TRANSPORT_VARS[2])
    exclude = pinning.get("btl_tcp_if_exclude") or os.environ.get(TRANSPORT_VARS[3])
    hosts: dict[str, list[dict]] = {}
    for rec in ranks:
        if rec["host"] not in hosts and rec.get("interfaces") is not None:
            hosts[rec["host"]] = [{k: i[k] for k in ("name", "address", "prefix", "speed_mbps")}
                                  for i in tcp_interfaces(rec["interfaces"], include, exclude)]
    rule = f"btl_tcp_if_include={include}" if include else \
        f"btl_tcp_if_exclude={exclude or OMPI_DEFAULT_EXCLUDE}" + ("" if exclude else " (Open MPI's default)")
    return {"rule": rule, "hosts": hosts,
            "note": "the interfaces with an IPv4 address that the rule selects on each host; Open MPI's TCP "
                    "transport stripes over all of them when it carries the traffic (not with a UCX or "
                    "InfiniBand pml/btl)"}


# -- after ---------------------------------------------------------------------------
def rank_record(r) -> dict:
    """This rank's host, CPUs and device (every rank; gathered by the caller)."""
    cpus = BEFORE_MPI.get("cpus") or node_cpus()
    rec = {
        "rank": r.rank, "host": r.hosts[r.rank], "pid": os.getpid(),
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        **cpus,
        "yield_when_idle": (BEFORE_MPI.get("yield_when_idle") or {}).get("value"),
        # One kernel, one machine: containers (the sandbox's nodes) on one host share it, and
        # with it the host's cores, which no cpuset inside them shows.
        "boot_id": _read("/proc/sys/kernel/random/boot_id"),
        "interfaces": interfaces(),
        "gpu": None,
        "nccl": nccl_debug_read(),
    }
    if getattr(r, "framework", "chainer") == "pytorch":
        rec["gpu"] = torch_environment.torch_gpu(r)
    elif r.cuda is not None:
        cupy = r.cuda.cupy
        props = cupy.cuda.runtime.getDeviceProperties(r.device)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        rec["gpu"] = {"device": r.device, "name": name,
                      "pci_bus_id": "{:04x}:{:02x}:{:02x}.0".format(
                          props.get("pciDomainID", 0), props.get("pciBusID", 0), props.get("pciDeviceID", 0))}
    return rec


def device_buffer_allreduce(r) -> dict | None:
    """Collective, GPU runs only: does MPI reduce a device (CuPy) buffer correctly?

    What ``ompi_info`` says the library was built with is not what a job gets (a UCX or
    transport without CUDA support); one small MPI_Allreduce of a device buffer says it.
    Handed a device pointer, an MPI without CUDA support may crash the process, so it is
    tried only where ompi_info says CUDA support is built in, or where the communicator
    (naive, flat on GPUs) has just handed MPI device buffers itself.
    """
    if r.cuda is None:
        return None
    built = r.mpi.bcast((BEFORE_MPI.get("cuda_aware_mpi") or {}).get("built_with_cuda_support"), root=0)
    if built is not True and r.args.communicator not in ("naive", "flat"):
        return {"tried": False, "works": None,
                "reason": f"ompi_info says built_with_cuda_support={built}; a device pointer handed to MPI "
                          "could crash the run"}
    cupy = r.cuda.cupy
    buf = cupy.full(16, r.rank + 1, dtype=cupy.float32)
    try:
        r.mpi.Allreduce(r.MPI.IN_PLACE, buf, op=r.MPI.SUM)
        r.sync()
        ok, error = bool((buf.get() == r.size * (r.size + 1) / 2).all()), None
    except Exception as e:  # mpi4py refuses the buffer, or MPI returns an error
        ok, error = False, f"{type(e).__name__}: {e}"
    results = r.mpi.allgather((ok, error))
    return {"tried": True, "works": all(x[0] for x in results),
            "errors": sorted({x[1] for x in results if x[1]}),
            "note": "one MPI_Allreduce (SUM) of a 16-element CuPy buffer, checked on every rank"}


def oversubscribed_hosts(ranks: list[dict]) -> list[dict]:
    """Hosts whose ranks outnumber the CPUs they can use (node CPUs, or the union of their affinities)."""
    by_host: dict[str, list[dict]] = {}
    for rec in ranks:
        by_host.setdefault(rec["host"], []).append(rec)
    out = []
    for host, recs in by_host.items():
        affinity = set()
        for rec in recs:
            affinity.update(rec.get("affinity") or [])
        usable = min([rec["usable_cpus"] for rec in recs] + ([len(affinity)] if affinity else []))
        if len(recs) > usable:
            out.append({"host": host, "ranks": len(recs), "usable_cpus": usable})
    return out


def shared_machines(ranks: list[dict]) -> list[dict]:
    """Machines (one kernel boot id) that run several of the run's nodes, with ranks and CPUs.

    ``oversubscribed`` is true when the ranks on the machine outnumber the CPUs they can run on
    (the union of their affinities, which containers report in the machine's numbering), the
    sandbox's case: 3 containers x 2 ranks on a 2-core host look fine node by node.
    """
    by_boot: dict[str, list[dict]] = {}
    for rec in ranks:
        if rec.get("boot_id"):
            by_boot.setdefault(rec["boot_id"], []).append(rec)
    out = []
    for boot, recs in by_boot.items():
        hosts = sorted({rec["host"] for rec in recs})
        if len(hosts) < 2:
            continue
        affinity = set()
        for rec in recs:
            affinity.update(rec.get("affinity") or [])
        usable = len(affinity) if affinity else max(rec["usable_cpus"] for rec in recs)
        out.append({"boot_id": boot, "hosts": hosts, "ranks": len(recs), "usable_cpus": usable,
                    "oversubscribed": len(recs) > usable})
    return out


def _mpi_versions(r) -> dict:
    """mpi4py's and the MPI library's versions; None where the ranks have no MPI world (torchrun)."""
    if getattr(r, "host_path", "host-mpi") != "host-mpi":
        return {"mpi4py": None, "mpi_library": None, "mpi_standard": None}
    import mpi4py

    MPI = r.MPI
    # Open MPI's string ends in a NUL, which is not whitespace.
    mpi_library = MPI.Get_library_version().replace("\x00", "").strip()
    mpi_library = mpi_library.splitlines()[0].strip().rstrip(",")
    return {"mpi4py": mpi4py.__version__, "mpi_library": mpi_library,
            "mpi_standard": "{}.{}".format(*MPI.Get_version())}


def environment(r, ranks: list[dict]) -> dict:
    counts: dict[str, int] = {}
    for h in r.hosts:
        counts[h] = counts.get(h, 0) + 1
    fw = torch_environment.framework_record(r)
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "framework": fw["framework"],
        "chainer": fw["chainer"],
        "torch": fw["torch"],
        "numpy": np.__version__,
        "cupy": None,
        **_mpi_versions(r),
        "cuda_aware_mpi": BEFORE_MPI.get("cuda_aware_mpi"),
        "communicator_class": fw["communicator_class"],
        "distributed": fw["distributed"],
        "hosts": r.hosts,
        "nodes": len(counts),
        "processes_per_node": counts,
        "ranks": ranks,
        "oversubscribed": oversubscribed_hosts(ranks),
        "shared_machines": shared_machines(ranks),
        "mpi_yield_when_idle": BEFORE_MPI.get("yield_when_idle"),
        "transport": {k: os.environ.get(k) for k in TRANSPORT_VARS},
        "network_pinning": BEFORE_MPI.get("network_pinning"),
        "mpi_tcp_interfaces": mpi_tcp_interfaces(ranks, BEFORE_MPI.get("network_pinning")),
        "transport_note": "as the ranks were told (mpiexec --mca, -x); unset: Open MPI's TCP transport "
                          "uses every interface that is up, NCCL picks its own",
        "device": "cpu",
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "scheduler": scheduler_job(),
    }
    if fw["framework"] == "pytorch" and r.args.gpu:
        env.update(torch_environment.gpu_environment(r, ranks))
    if r.cuda is not None:
        cupy = r.cuda.cupy
        env["cupy"] = cupy.__version__
        env["device"] = f"cuda ({ranks[0]['gpu']['name']})"
        env["gpus"] = [dict(rec["gpu"], rank=rec["rank"], host=rec["host"]) for rec in ranks]
        env["cudnn_enabled"] = bool(r.cuda.cudnn_enabled) and r.chainer.should_use_cudnn(">=auto")
        try:
            from cupy.cuda import nccl

            env["nccl_version"] = nccl.get_version()
        except Exception:
            env["nccl_version"] = None
        seen = [rec["nccl"] for rec in ranks if rec.get("nccl")]
        env["nccl"] = None if not seen else {
            "network": sorted({x["network"] for x in seen if x["network"]}),
            "interfaces": sorted({i for x in seen for i in x["interfaces"]}),
            "transports": sorted({t for x in seen for t in x["transports"]}),
            "note": "from one NCCL_DEBUG=INFO initialisation per rank (subsystems INIT, NET)",
        }
    return env
