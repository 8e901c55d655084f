"""MPI point-to-point bandwidth between every pair of nodes (mpi4py ping-pong).

Run with one rank per node:

    mpiexec -n <nodes> -hostfile hostfile --map-by ppr:1:node python mnc_p2p_bandwidth.py

Every pair (i, j) is measured once. The pairs are scheduled as a round-robin
tournament: n-1 rounds (n rounded up to even), in each of which every node
is in at most one pair and the pairs of a round run at the same time, so a
64-node cluster takes 63 short rounds, not 2016 sequential measurements.
Within a pair, rank i sends a message of each size to rank j and j sends it
back; one-way bandwidth = bytes / (round trip / 2), in GB/s (1e9 B/s, as
nccl-tests). Rank 0 prints one JSON line: {"hosts": [...], "rounds": R,
"pairs": [{"a", "b", "ranks", "round", "results": [{"bytes", "seconds",
"gbps", "iters"}]}]}. Standard library + mpi4py only; buffers are
bytearrays, so NumPy is not needed.
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


def schedule(n):
    """Round-robin (circle method): a list of rounds, each a list of disjoint (a, b) pairs, a < b."""
    players = list(range(n)) + ([None] if n % 2 else [])
    m = len(players)
    rounds = []
    for _ in range(m - 1):
        pairs = []
        for k in range(m // 2):
            a, b = players[k], players[m - 1 - k]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def pingpong(comm, me, peer, first, size, iters, warmup):
    buf = bytearray(size)
    t0 = 0.0
    for k in range(warmup + iters):
        if k == warmup:
            t0 = MPI.Wtime()
        if first:
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
    mine = []  # measurements where this rank is the first of its pair
    rounds = schedule(n)
    for number, pairs in enumerate(rounds):
        comm.Barrier()  # the pairs of one round run together, rounds one after another
        for a, b in pairs:
            if me not in (a, b):
                continue
            results = []
            for size in args.sizes:
                iters = iterations(size, args.budget_mib << 20, args.min_iters, args.max_iters)
                t = pingpong(comm, me, b if me == a else a, me == a, size, iters, args.warmup)
                results.append({"bytes": size, "seconds": t, "gbps": size / t / 1e9, "iters": iters})
            if me == a:
                pair = {"a": hosts[a], "b": hosts[b], "ranks": [a, b], "round": number}
                mine.append({**pair, "results": results})
    everything = comm.gather(mine, root=0)
    if me == 0:
        pairs = sorted((p for part in everything for p in part), key=lambda p: p["ranks"])
        library = MPI.Get_library_version().replace("\x00", "").splitlines()[0]
        json.dump({"hosts": hosts, "rounds": len(rounds), "pairs": pairs, "mpi": library}, sys.stdout)
        sys.stdout.write("\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
