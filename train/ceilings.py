"""What the network and MPI can do without the framework: the ceilings of the allreduce.

* ``allreduce_sweep``: raw MPI_Allreduce of one host buffer per size (nccl-tests style);
* ``p2p``: ping-pong between rank 0 and a rank on another node and one on its own node.

Every function here is collective: all ranks call it with the same arguments.
"""

from __future__ import annotations

import time

import numpy as np

from train import metrics


def sweep_sizes(allreduce_bytes: int, top) -> list[int]:
    if top == "auto":
        top = 1 << max(3, (allreduce_bytes - 1).bit_length())
    sizes, s = [], 8
    while s <= top:
        sizes.append(s)
        s *= 2
    if top >= 8 and sizes[-1] < top and top // 4 * 4 > sizes[-1]:
        sizes.append(top // 4 * 4)
    return sizes if top and top >= 8 else []


def allreduce_sweep(r, sizes: list[int], iters: int) -> list[dict]:
    """Raw MPI_Allreduce of one float32 host buffer per size (nccl-tests style)."""
    MPI, mpi = r.MPI, r.mpi
    rows = []
    for size in sizes:
        buf = np.zeros(max(1, size // 4), dtype=np.float32)
        reps = max(2, min(iters, (256 << 20) // size))
        mpi.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        mpi.Barrier()
        start = time.perf_counter()
        for _ in range(reps):
            mpi.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        dt = mpi.allreduce((time.perf_counter() - start) / reps, op=MPI.MAX)
        rows.append({"bytes": buf.nbytes, "count": buf.size, "dtype": "float32", "iterations": reps,
                     "time": dt, "algbw": metrics.algbw(buf.nbytes, dt),
                     "busbw": metrics.busbw(buf.nbytes, dt, r.size)})
    return rows


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


