"""What the network and MPI can do without the framework: the ceilings of the allreduce.

* ``allreduce_sweep``: raw MPI_Allreduce of one host buffer per size (nccl-tests style),
  always including exactly L, the bytes the communicator reduces;
* ``at_allreduce_size``: the ceilings at L on the communicator's own path (host MPI,
  per-array as naive does, CUDA-aware MPI on device buffers, NCCL), labelled;
* ``p2p``: ping-pong between rank 0 and a rank on another node and one on its own node.

Every function here is collective: all ranks call it with the same arguments.
"""

from __future__ import annotations

import math
import time

import numpy as np

from train import metrics

MIN_REPS_AT_L = 10
MIN_REPS = 5  # any other size of the sweep
# Each size is repeated until it has been timed this long (more repetitions of small, fast ones:
# a median of 20 allreduces of 8 bytes is mostly scheduler noise), up to MAX_REPS.
MIN_SECONDS = 0.05
MAX_REPS = 1000
# Sizes above 1 MiB get no more repetitions than this many bytes in all, unless MIN_SECONDS or
# the floor (MIN_REPS, MIN_REPS_AT_L at L) asks for more.
SWEEP_BYTE_BUDGET = 256 << 20
REPETITION_RULE = (f"repetitions: --sweep-iters (fewer above 1 MiB: {SWEEP_BYTE_BUDGET >> 20} MiB in all per "
                   f"size), raised until the size is timed for {MIN_SECONDS:g} s from one probe (at most "
                   f"{MAX_REPS}), and never fewer than {MIN_REPS} ({MIN_REPS_AT_L} at exactly L)")


def sweep_sizes(allreduce_bytes: int, top) -> list[int]:
    """Powers of two from 8 B up to ``top`` ('auto': below L), and always L itself."""
    if top == "auto":
        top = allreduce_bytes - 1
    sizes, s = [], 8
    while s <= top:
        if s != allreduce_bytes:
            sizes.append(s)
        s *= 2
    return sorted([*sizes, allreduce_bytes])


def repetitions(nbytes: int, iters: int, at_l: bool, probe: float | None = None) -> int:
    """How often to time an operation on ``nbytes``: a count target, a time minimum, a floor.

    ``probe`` is the seconds one (warm) operation took on the slowest rank, the same on every
    rank, so every rank arrives at the same count.
    """
    reps = iters if nbytes <= (1 << 20) else min(iters, SWEEP_BYTE_BUDGET // max(1, nbytes))
    if probe and probe > 0:
        reps = max(reps, min(MAX_REPS, math.ceil(MIN_SECONDS / probe)))
    return max(MIN_REPS_AT_L if at_l else MIN_REPS, reps)


def timed(r, op, iters: int, nbytes: int, at_l: bool, sync=None) -> np.ndarray:
    """Seconds of each repetition of ``op``, slowest rank: barrier, op, device sync.

    That is how the instrumented loop times the gradient allreduce (barrier -> t2,
    multi_node_mean_grad and a device sync -> t3), so the two compare like for like.
    One untimed operation first (connections, buffers, algorithm selection), then a
    probe that sets the count (``repetitions``): one operation, or, where it is fast
    enough for the time minimum to matter, the median of three, so that one lucky
    probe does not ask a slow operation for a thousand repetitions.
    """
    MPI, mpi = r.MPI, r.mpi

    def once() -> float:
        mpi.Barrier()
        t0 = time.perf_counter()
        op()
        if sync:
            sync()
        return time.perf_counter() - t0

    once()
    probe = np.array([once()])
    mpi.Allreduce(MPI.IN_PLACE, probe, op=MPI.MAX)
    if probe[0] * MIN_REPS < MIN_SECONDS:  # the same decision on every rank
        more = np.array([once(), once()])
        mpi.Allreduce(MPI.IN_PLACE, more, op=MPI.MAX)
        probe = np.array([np.median([probe[0], *more])])
    reps = repetitions(nbytes, iters, at_l, float(probe[0]))
    times = np.array([once() for _ in range(reps)])
    mpi.Allreduce(MPI.IN_PLACE, times, op=MPI.MAX)
    return times


def row(r, path: str, layout: str, label: str, nbytes: int, count: int, dtype: str, arrays: int,
        times: np.ndarray) -> dict:
    stats = metrics.summarize(times)
    t = stats["median"]
    return {"path": path, "layout": layout, "label": label, "bytes": int(nbytes), "count": int(count),
            "dtype": dtype, "arrays": arrays, "repetitions": len(times), "time": t, "spread": stats,
            "algbw": metrics.algbw(nbytes, t), "busbw": metrics.busbw(nbytes, t, r.size)}


HOST_PACKED = "one MPI_Allreduce of a host (numpy) buffer"
HOST_PER_ARRAY = "one MPI_Allreduce per parameter array, host buffers (what the naive communicator does)"
DEVICE_PACKED = "one MPI_Allreduce of a device (CuPy) buffer, CUDA-aware MPI"
DEVICE_PER_ARRAY = "one MPI_Allreduce per parameter array, device buffers, CUDA-aware MPI"
NCCL_PACKED = "one NCCL allreduce of a device buffer, on the communicator's own NCCL communicator"


HOST_GLOO = "one allreduce of a host (numpy) buffer on a gloo group (torchrun: the ranks have no MPI world)"


def allreduce_sweep(r, sizes: list[int], iters: int, allreduce_bytes: int) -> list[dict]:
    """Raw MPI_Allreduce of one float32 host buffer per size (nccl-tests style), L included."""
    MPI, mpi = r.MPI, r.mpi
    path = getattr(r, "host_path", "host-mpi")
    label = HOST_PACKED if path == "host-mpi" else HOST_GLOO
    rows = []
    for size in sizes:
        buf = np.zeros(max(1, size // 4), dtype=np.float32)
        at_l = size == allreduce_bytes
        times = timed(r, lambda b=buf: mpi.Allreduce(MPI.IN_PLACE, b, op=MPI.SUM), iters, buf.nbytes, at_l)
        rows.append({**row(r, path, "packed", label, buf.nbytes, buf.size, "float32", 1, times),
                     "at_L": at_l})
    return rows


def at_allreduce_size(r, args, sweep: list[dict], allreduce_bytes: int) -> dict:
    """The ceilings at exactly L, each on its path, and which one the communicator's allreduce compares with.

    naive: the packed host row (from the sweep) and the same per-array allreduces the
    communicator makes, so the per-array cost shows; flat / naive on GPUs: CUDA-aware MPI
    on device buffers; pure_nccl: NCCL on a device buffer of L in the allreduce dtype;
    non_cuda_aware (device -> host copy, host MPI): the packed host row.
    """
    MPI, mpi = r.MPI, r.mpi
    rows = [{k: v for k, v in x.items() if k != "at_L"} for x in sweep if x["at_L"]]
    iters = args.sweep_iters
    comm = args.communicator
    sizes = [p.array.size for _, p in sorted(r.model.namedparams()) if p.array is not None]
    if comm == "naive":
        if r.cuda is None:
            bufs = [np.zeros(n, dtype=np.float32) for n in sizes]
            path, label, sync = "host-mpi", HOST_PER_ARRAY, None
        else:
            cupy = r.cuda.cupy
            bufs = [cupy.zeros(n, dtype=cupy.float32) for n in sizes]
            path, label, sync = "device-mpi", DEVICE_PER_ARRAY, r.sync

        def per_array():
            for b in bufs:
                mpi.Allreduce(MPI.IN_PLACE, b, op=MPI.SUM)

        times = timed(r, per_array, iters, allreduce_bytes, True, sync)
        n = sum(sizes)
        rows.append(row(r, path, "per-array", label, 4 * n, n, "float32", len(sizes), times))
        del bufs
    if r.cuda is not None and comm in ("naive", "flat"):
        cupy = r.cuda.cupy
        n = r.grad_elements
        buf = cupy.zeros(n, dtype=cupy.float32)
        times = timed(r, lambda: mpi.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM), iters, allreduce_bytes, True,
                      r.sync)
        rows.append(row(r, "device-mpi", "packed", DEVICE_PACKED, 4 * n, n, "float32", 1, times))
        del buf
    if r.cuda is not None and comm == "pure_nccl":
        rows.append(nccl_row(r, args, allreduce_bytes))
    reference = {"naive": ("device-mpi" if r.cuda is not None else "host-mpi", "packed"),
                 "flat": ("device-mpi", "packed"), "non_cuda_aware": ("host-mpi", "packed"),
                 "pure_nccl": ("nccl", "packed")}[comm]
    ref = next((i for i, x in enumerate(rows) if (x["path"], x["layout"]) == reference), None)
    out = {"bytes": allreduce_bytes, "rows": rows, "reference": ref, "skipped": skipped_paths(r, comm),
           "repetition_rule": REPETITION_RULE,
           "note": "each ceiling timed as the training loop times its allreduce: barrier, the "
                   "operation, device sync; per repetition the slowest rank; time is the median. "
                   "reference is the row the communicator's allreduce is compared with (one "
                   "allreduce of L on the same path)"}
    if comm == "non_cuda_aware":
        out["reference_caveat"] = NON_CUDA_AWARE_CAVEAT
    return out


NON_CUDA_AWARE_CAVEAT = ("non_cuda_aware reduces within a node with NCCL and across nodes with host MPI "
                         "among one rank per node (device -> host copies between); the reference is one "
                         "host MPI_Allreduce of L over all ranks, the same bytes on host MPI but not the "
                         "same steps")


def skipped_paths(r, comm: str) -> list[dict]:
    """The ceiling paths not measured in this run, each with the reason (the report states them)."""
    out = []
    if r.cuda is None:
        out.append({"path": "device-mpi", "reason": f"no --gpu: the {comm} communicator reduces host (numpy) "
                                                    "buffers, so a device-buffer ceiling is not its path"})
        out.append({"path": "nccl", "reason": "no --gpu: NCCL reduces device memory only"})
        return out
    if comm not in ("naive", "flat"):
        out.append({"path": "device-mpi", "reason": f"the {comm} communicator does not hand device buffers "
                                                    "to MPI"})
    if comm != "pure_nccl":
        out.append({"path": "nccl", "reason": f"the {comm} communicator's allreduce is not one NCCL "
                                              "allreduce of L"})
    return out


def nccl_row(r, args, allreduce_bytes: int) -> dict:
    """NCCL allreduce of L elements in the allreduce dtype, on the pure_nccl communicator's NCCL comm."""
    from chainermn.communicators import _communication_utility
    from cupy.cuda import nccl

    cupy = r.cuda.cupy
    dtype = np.dtype(args.allreduce_dtype or "float32")
    n = r.grad_elements
    a, b = cupy.zeros(n, dtype=dtype), cupy.zeros(n, dtype=dtype)
    r.comm._init_comms()
    type_id = _communication_utility._get_nccl_type_id(dtype)
    stream = cupy.cuda.Stream.null

    def op():
        r.comm.nccl_comm.allReduce(a.data.ptr, b.data.ptr, n, type_id, nccl.NCCL_SUM, stream.ptr)

    times = timed(r, op, args.sweep_iters, allreduce_bytes, True, stream.synchronize)
    return row(r, "nccl", "packed", NCCL_PACKED, n * dtype.itemsize, n, dtype.name, 1, times)


def p2p(r, nbytes: int, reps: int) -> list[dict]:
    """Ping-pong between rank 0 and one peer on its node and one on another node."""
    if not nbytes or r.size < 2:
        return []
    pairs = p2p_pairs(r.hosts)
    rows = []
    buf = np.zeros(nbytes, dtype=np.uint8)
    for kind, peer in pairs:
        r.mpi.Barrier()
        if r.rank == 0:
            for i in range(reps + 1):  # the first round trip sets up the connection
                if i == 1:
                    start = time.perf_counter()
                r.mpi.Send(buf, dest=peer, tag=7)
                r.mpi.Recv(buf, source=peer, tag=7)
            one_way = (time.perf_counter() - start) / reps / 2
            rows.append({"kind": kind, "ranks": [0, peer], "hosts": [r.hosts[0], r.hosts[peer]],
                         "bytes": nbytes, "iterations": reps, "time": one_way,
                         "bandwidth": metrics.algbw(nbytes, one_way)})
        elif r.rank == peer:
            for _ in range(reps + 1):
                r.mpi.Recv(buf, source=0, tag=7)
                r.mpi.Send(buf, dest=0, tag=7)
    r.mpi.Barrier()
    return rows


def p2p_pairs(hosts: list[str]) -> list[tuple[str, int]]:
    """(kind, peer of rank 0): the first rank on another node, then the first on rank 0's node."""
    pairs = []
    other = [r for r in range(1, len(hosts)) if hosts[r] != hosts[0]]
    same = [r for r in range(1, len(hosts)) if hosts[r] == hosts[0]]
    if other:
        pairs.append(("inter-node", other[0]))
    if same:
        pairs.append(("intra-node", same[0]))
    return pairs


