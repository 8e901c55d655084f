"""MPI-IO across nodes on a shared directory (mpi4py): what one node writes, another reads.

Run with one rank per node, as the MPI user, the directory on every node's
shared filesystem (mnc_shared_dirs):

    mpiexec -n <nodes> -hostfile hostfile --map-by ppr:1:node python mnc_mpiio.py DIR

All ranks open one new file in DIR together (MPI_File_open, collective), each
writes its own block at offset rank * BLOCK (MPI_File_write_at_all), and
they close it (a plain file, written by rank 0 and read by all, first
checks that they see one directory: MPI_File_open can hang where they do
not): close-to-open is what NFS guarantees, so the reads below see
the writes of every node. They open it again and every rank reads the block
of the rank on the next node (rank + 1, modulo the size) and checks it
byte for byte against what that rank wrote (a pattern of its rank and
host). Rank 0 prints one JSON line: {"dir", "file", "block", "ranks":
[{"rank", "host", "read_from", "read_from_host", "ok", "error"}]}, and
removes the file. Standard library + mpi4py only.
"""

import argparse
import contextlib
import json
import os
import socket
import sys
import time

from mpi4py import MPI

BLOCK = 1 << 20


def pattern(rank: int, host: str, size: int) -> bytes:
    """``size`` bytes only ``rank`` on ``host`` writes."""
    seed = f"rank {rank} on {host}\n".encode()
    return (seed * (size // len(seed) + 1))[:size]


class _Failed(Exception):
    """A step failed on this rank or another (the message says which)."""


class _Refused(Exception):
    """This rank's part of a step failed (the message says why)."""


def _agreed(comm, hosts, action):
    """Run one step on every rank (an MPI collective, or a plain file's part); raise _Failed on
    every rank when it failed on any, naming each rank and host, so that no rank goes on to a
    collective the others left."""
    error = ""
    value = None
    try:
        value = action()
    except MPI.Exception as err:
        error = err.Get_error_string()
    except _Refused as err:
        error = str(err)
    errors = comm.allgather(error)
    if any(errors):
        raise _Failed("; ".join(f"rank {r} on {hosts[r]}: {e}" for r, e in enumerate(errors) if e))
    return value


def _write_marker(marker, token):
    try:
        with open(marker, "x") as f:
            f.write(token)
    except OSError as err:
        raise _Refused(f"cannot write {marker}: {err.strerror}") from err


def _read_marker(marker, token, first_host):
    try:
        with open(marker) as f:
            seen = f.read()
    except OSError as err:
        raise _Refused(f"does not see the file rank 0 on {first_host} wrote ({err.strerror}): "
                       "not the same directory") from err
    if seen != token:
        raise _Refused(f"{marker} holds something else than what rank 0 wrote")


def _shared(comm, marker, rank, hosts):
    """Plain files first: rank 0 writes a marker, every rank must read it back. On a directory
    that is not shared MPI_File_open can wait for ever (OMPIO's open, each node's own file):
    this names the nodes that do not see it, at once."""
    token = comm.bcast(f"{hosts[0]} {os.getpid()} {time.time_ns()}" if rank == 0 else None)
    try:
        _agreed(comm, hosts, lambda: _write_marker(marker, token) if rank == 0 else None)
        _agreed(comm, hosts, lambda: None if rank == 0 else _read_marker(marker, token, hosts[0]))
    finally:
        # every rank has read it once the step above is agreed
        if rank == 0:
            with contextlib.suppress(OSError):
                os.unlink(marker)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="a directory every node shares")
    parser.add_argument("--block", type=int, default=BLOCK, help="bytes each rank writes")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    host = socket.gethostname()
    hosts = comm.allgather(host)
    # One name for the whole job, chosen by rank 0: every rank opens the same file.
    name = comm.bcast(os.path.join(args.dir, f".mnc-mpiio-{host}-{os.getpid()}") if rank == 0 else None)
    peer = (rank + 1) % size
    result = {"rank": rank, "host": host, "read_from": peer, "read_from_host": hosts[peer],
              "ok": False, "error": ""}
    # Every step is checked by all ranks together before the next collective,
    # so a rank that failed cannot leave the others waiting in one.
    try:
        step = "see the other nodes' files"
        _shared(comm, name + ".seen", rank, hosts)
        step = "open for writing"
        # MODE_CREATE on every rank, not only rank 0's: on a directory that is
        # not shared every node then makes its own file, and the reads show it.
        fh = _agreed(comm, hosts, lambda: MPI.File.Open(comm, name, MPI.MODE_CREATE | MPI.MODE_WRONLY))
        step = "write"
        _agreed(comm, hosts, lambda: fh.Write_at_all(rank * args.block, pattern(rank, host, args.block)))
        step = "close"
        _agreed(comm, hosts, fh.Close)
        step = "open for reading"
        fh = _agreed(comm, hosts, lambda: MPI.File.Open(comm, name, MPI.MODE_RDONLY))
        got = bytearray(args.block)
        step = "read"
        _agreed(comm, hosts, lambda: fh.Read_at_all(peer * args.block, got))
        fh.Close()
        want = pattern(peer, hosts[peer], args.block)
        result["ok"] = bytes(got) == want
        if not result["ok"]:
            first = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
            seen = bytes(got[first:first + 24])
            result["error"] = f"byte {first} of rank {peer}'s block differs ({seen!r})"
    except _Failed as err:
        result["error"] = f"{step}: {err}"
    results = comm.gather(result)
    if rank == 0:
        with contextlib.suppress(OSError):
            os.unlink(name)
        print(json.dumps({"dir": args.dir, "file": name, "block": args.block, "ranks": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
