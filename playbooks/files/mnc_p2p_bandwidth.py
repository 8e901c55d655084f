"""MPI point-to-point bandwidth between every pair of nodes (mpi4py ping-pong).

Run with one rank per node:

    mpiexec -n <nodes> -hostfile hostfile --map-by ppr:1:node python mnc_p2p_bandwidth.py

For each pair (i, j), i < j, in turn (the other ranks wait at a barrier),
rank i sends a message of each size to rank j and j sends it back. One-way
bandwidth = bytes / (round trip / 2), in GB/s (1e9 B/s, as nccl-tests).
Rank 0 prints one JSON line: {"hosts": [...], "pairs": [{"a", "b", "ranks",
"results": [{"bytes", "seconds", "gbps"}]}]}. Standard library + mpi4py only;
buffers are bytearrays, so NumPy is not needed.
"""

import argparse
import json
import socket
import sys

from mpi4py import MPI

DEFAULT_SIZES = [1 << 13, 1 << 16, 1 << 19, 1 << 22, 1 << 24]


def iterations(size, budget_bytes, lo, hi):
    """Enough round trips to move about budget_bytes, within [lo, hi]."""
    return max(lo, min(hi, budget_bytes // max(size, 1)))


def pingpong(comm, me, a, b, size, iters, warmup):
    buf = bytearray(size)
    peer = b if me == a else a
    t0 = 0.0
    for k in range(warmup + iters):
        if k == warmup:
            t0 = MPI.Wtime()
        if me == a:
            comm.Send([buf, MPI.BYTE], dest=peer, tag=k)
            comm.Recv([buf, MPI.BYTE], source=peer, tag=k)
        else:
            comm.Recv([buf, MPI.BYTE], source=peer, tag=k)
            comm.Send([buf, MPI.BYTE], dest=peer, tag=k)
    return (MPI.Wtime() - t0) / iters / 2.0  # one-way time per message


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=DEFAULT_SIZES, help="message sizes in bytes")
    parser.add_argument("--budget-mib", type=int, default=64, help="bytes moved per size and pair (MiB)")
    parser.add_argument("--min-iters", type=int, default=5)
    parser.add_argument("--max-iters", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args(argv)

    comm = MPI.COMM_WORLD
    me, n = comm.Get_rank(), comm.Get_size()
    hosts = comm.allgather(socket.gethostname())
    pairs = []
    for a in range(n):
        for b in range(a + 1, n):
            comm.Barrier()
            results = []
            for size in args.sizes:
                iters = iterations(size, args.budget_mib << 20, args.min_iters, args.max_iters)
                if me in (a, b):
                    t = pingpong(comm, me, a, b, size, iters, args.warmup)
                    if me == a:
                        results.append({"bytes": size, "seconds": t, "gbps": size / t / 1e9, "iters": iters})
            if me == a and a != 0:
                comm.send(results, dest=0, tag=1 << 20)
            if me == 0 and a != 0:
                results = comm.recv(source=a, tag=1 << 20)
            if me == 0:
                pairs.append({"a": hosts[a], "b": hosts[b], "ranks": [a, b], "results": results})
    comm.Barrier()
    if me == 0:
        library = MPI.Get_library_version().splitlines()[0]
        json.dump({"hosts": hosts, "pairs": pairs, "mpi": library}, sys.stdout)
        sys.stdout.write("\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
