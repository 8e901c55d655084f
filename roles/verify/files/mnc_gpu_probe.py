"""What a node's Python can do with its GPUs: the one implementation of the GPU probes.

A program, not a library: run with the Python under test (the MPI user's
virtualenv), it prints one line ``PROBE <json>`` and exits 0 (a failed probe
is a finding in the JSON, not a crash). Only the standard library is
imported at start; CuPy, Chainer and mpi4py are imported by the probes, so a
missing or broken package is that probe's ``error``. Used by

* roles/verify, whose file it is (copied to the nodes beside its other
  check programs): ``node`` on every GPU-mode node, ``nccl-allreduce`` and
  ``send gpu`` across the nodes from the launcher (one rank per node);
  module_utils/mnc_verify.py judges
  the output (``check_gpu``, over mnc_verify_gpu.py and mnc_verify_gpu_cluster.py);
* scripts/device_check.py (one machine): ``cuda``, ``cudnn``, ``chainer``,
  ``nccl-allreduce`` (a single rank), ``send cpu|gpu`` and ``allreduce cpu|gpu``
  under ``mpiexec -n 2``.

Probes::

    cuda            CUDA devices CuPy sees (count, name, compute capability,
                    memory), driver/runtime versions, a kernel on every device
    cudnn           cuDNN as CuPy loads it (cupy.cuda.cudnn; CuPy 14 has none)
    chainer         chainer.backends.cuda: available, cudnn_enabled
    nccl-allreduce  CuPy's NCCL binding and an allreduce of a device buffer
                    over every rank (one rank without MPI): rank r gives r + 1,
                    every rank must get N (N + 1) / 2; NCCL's own log lines on
                    the transport (NCCL_DEBUG=INFO into a file per rank)
    send cpu|gpu    a ring of mpi4py Sendrecv: rank r sends a host (cpu) or
                    CuPy device (gpu) buffer to rank r + 1, which checks it
    allreduce cpu|gpu BYTES
                    MPI_Allreduce (sum) of a float32 host (cpu) or CuPy device
                    (gpu) buffer of BYTES: rank r gives r + 1 and checks the
                    sum; one untimed, then ALLREDUCE_REPS timed (barrier, the
                    allreduce, device sync; per repetition the slowest rank)
    node            cuda, cudnn, chainer and a single-rank nccl-allreduce in
                    one run, plus the InfiniBand/RoCE ports (/sys/class/infiniband)
                    and whether nvidia_peermem is loaded

Under MPI, rank 0 prints the line for all ranks (``ranks``: one entry per rank).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import sys
import tempfile

NCCL_ELEMENTS = 1 << 22  # 16 MiB of float32
SEND_ELEMENTS = 1 << 20  # 4 MiB of int32
ALLREDUCE_REPS = 10


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:400]


def _local_device(cupy) -> int:
    """The GPU of this rank: its rank on the node, modulo the GPUs there."""
    local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("MPI_LOCALRANKID", "0")) or 0)
    count = cupy.cuda.runtime.getDeviceCount()
    return local % count if count else 0


# --- one process -------------------------------------------------------------------------------


def probe_cuda() -> dict:
    out: dict = {}
    try:
        import cupy

        rt = cupy.cuda.runtime
        out["cupy"] = cupy.__version__
        out["count"] = rt.getDeviceCount()
        out["driver"] = rt.driverGetVersion()
        out["runtime"] = rt.runtimeGetVersion()
        out["devices"] = []
        n = 1 << 20
        want = float(2 * n * (n - 1) / 2)
        for i in range(out["count"]):
            p = rt.getDeviceProperties(i)
            name = p["name"].decode() if isinstance(p["name"], bytes) else p["name"]
            dev = {
                "name": name,
                "cc": f"{p['major']}.{p['minor']}",
                "mem_gib": round(p["totalGlobalMem"] / 2**30, 1),
            }
            try:
                with cupy.cuda.Device(i):
                    x = cupy.arange(n, dtype=cupy.float32)
                    dev["kernel"] = float((x * 2).sum()) == want
            except Exception as exc:  # one device's failure is a finding
                dev["kernel"] = False
                dev["error"] = _error(exc)
            out["devices"].append(dev)
        out["kernel"] = bool(out["devices"]) and all(d["kernel"] for d in out["devices"])
    except Exception as exc:
        out["error"] = _error(exc)
    return out


def probe_cudnn() -> dict:
    out: dict = {}
    try:
        import cupy.cuda.cudnn as cudnn

        out["version"] = cudnn.getVersion()
    except Exception as exc:
        out["error"] = _error(exc)
    return out


def probe_chainer() -> dict:
    out: dict = {}
    try:
        import chainer
        from chainer.backends import cuda

        out["chainer"] = chainer.__version__
        out["available"] = bool(cuda.available)
        out["cudnn_enabled"] = bool(cuda.cudnn_enabled)
        if not cuda.available:
            out["why"] = str(getattr(cuda, "_resolution_error", "") or "")[:300]
    except Exception as exc:
        out["error"] = _error(exc)
    return out


def probe_infiniband(root: str = "/sys") -> dict:
    """InfiniBand/RoCE ports ({device, port, state, link_layer}) and whether nvidia_peermem is loaded."""
    ports = []
    for port_dir in sorted(glob.glob(os.path.join(root, "class", "infiniband", "*", "ports", "*"))):
        parts = port_dir.split(os.sep)

        def read(name, _d=port_dir):
            try:
                with open(os.path.join(_d, name)) as f:
                    return f.read().strip()
            except OSError:
                return ""

        ports.append(
            {"device": parts[-3], "port": parts[-1], "state": read("state"), "link_layer": read("link_layer")}
        )
    return {"ports": ports, "peermem": os.path.isdir(os.path.join(root, "module", "nvidia_peermem"))}


# --- across ranks ------------------------------------------------------------------------------


def _world():
    """mpi4py's COMM_WORLD when launched by mpiexec, else None (a single rank)."""
    if not any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK")):
        return None
    from mpi4py import MPI

    return MPI.COMM_WORLD


def _nccl_log_lines(path: str) -> list[str]:
    """NCCL's lines about the network and the channels' transports (NCCL_DEBUG_FILE)."""
    keep = ("Using network", "NET/", "via ", "GDR", "peermem", "NCCL_IB", "NCCL_SOCKET", "WARN")
    lines = []
    for name in sorted(glob.glob(path + "*")):
        try:
            with open(name, errors="replace") as f:
                lines += [line.rstrip() for line in f if any(k in line for k in keep)]
        except OSError:
            continue
    return [line[:300] for line in lines[:40]]


def nccl_allreduce(comm=None) -> dict:
    """This rank's part: NCCL's version, whether its allreduce gave the right sum, NCCL's log lines."""
    out: dict = {"host": socket.gethostname(), "rank": comm.rank if comm else 0}
    size = comm.size if comm else 1
    log_dir = tempfile.mkdtemp(prefix="mnc-nccl-")
    log = os.path.join(log_dir, "nccl")
    # Read by NCCL when it first logs (during the communicator's set-up).
    os.environ.setdefault("NCCL_DEBUG", "INFO")
    os.environ.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
    os.environ["NCCL_DEBUG_FILE"] = log + ".%h.%p"
    ready, uid = False, None
    try:
        import cupy
        from cupy.cuda import nccl

        if not getattr(nccl, "available", True):
            out["missing"] = str(getattr(nccl, "_import_error", "") or "CuPy found no NCCL library")[:300]
        else:
            out["version"] = nccl.get_version()
            out["device"] = _local_device(cupy)
            cupy.cuda.Device(out["device"]).use()
            ready = True
            if out["rank"] == 0:
                uid = nccl.get_unique_id()
    except Exception as exc:
        out["error"] = _error(exc)
    # Every rank must be ready before any enters the communicator's set-up (it would wait forever).
    all_ready = all(comm.allgather(ready)) if comm else ready
    if comm:
        uid = comm.bcast(uid, root=0)
    if not all_ready:
        if ready:
            out["error"] = "not run: another rank could not load CuPy's NCCL binding"
        shutil.rmtree(log_dir, ignore_errors=True)
        return out
    try:
        n = NCCL_ELEMENTS
        x = cupy.full(n, out["rank"] + 1, dtype=cupy.float32)
        y = cupy.zeros(n, dtype=cupy.float32)
        nc = nccl.NcclCommunicator(size, uid, out["rank"])
        stream = cupy.cuda.Stream.null
        nc.allReduce(x.data.ptr, y.data.ptr, n, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr)
        stream.synchronize()
        want = size * (size + 1) / 2
        out["ok"] = bool((y == want).all())
        if not out["ok"]:
            out["got"] = float(y[0])
        out["want"] = want
        out["bytes"] = 4 * n
    except Exception as exc:
        out["error"] = _error(exc)
    out["nccl_log"] = _nccl_log_lines(log)
    shutil.rmtree(log_dir, ignore_errors=True)
    return out


def send(kind: str, comm) -> dict:
    """This rank's part of the ring: it sends to rank + 1 and checks what rank - 1 sent."""
    out: dict = {"host": socket.gethostname(), "rank": comm.rank, "kind": kind}
    try:
        from mpi4py import MPI

        if kind == "gpu":
            import cupy as xp

            out["device"] = _local_device(xp)
            xp.cuda.Device(out["device"]).use()
        else:
            import numpy as xp
        n = SEND_ELEMENTS
        right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        sendbuf = xp.arange(n, dtype=xp.int32) + 7 * comm.rank
        recvbuf = xp.zeros(n, dtype=xp.int32)
        if kind == "gpu":
            xp.cuda.get_current_stream().synchronize()
        comm.Sendrecv(
            [sendbuf, MPI.INT], dest=right, sendtag=7, recvbuf=[recvbuf, MPI.INT], source=left, recvtag=7
        )
        want = xp.arange(n, dtype=xp.int32) + 7 * left
        out["ok"] = bool((recvbuf == want).all())
        out["from"] = left
        out["bytes"] = 4 * n
    except Exception as exc:
        out["error"] = _error(exc)
    return out


def allreduce(kind: str, nbytes: int, comm) -> dict:
    """This rank's part: the sum right, and (rank 0) the seconds of each timed repetition."""
    import time

    out: dict = {"host": socket.gethostname(), "rank": comm.rank, "kind": kind}
    try:
        from mpi4py import MPI

        if kind == "gpu":
            import cupy as xp

            out["device"] = _local_device(xp)
            xp.cuda.Device(out["device"]).use()
            sync = xp.cuda.get_current_stream().synchronize
        else:
            import numpy as xp

            def sync():
                return None

        n = max(1, nbytes // 4)
        buf = xp.full(n, comm.rank + 1, dtype=xp.float32)
        sync()
        comm.Allreduce(MPI.IN_PLACE, [buf, MPI.FLOAT], op=MPI.SUM)  # untimed: connections, buffers
        sync()
        want = comm.size * (comm.size + 1) / 2
        out["ok"] = bool((buf == want).all())
        times = []
        for _ in range(ALLREDUCE_REPS):
            comm.Barrier()
            t0 = time.perf_counter()
            comm.Allreduce(MPI.IN_PLACE, [buf, MPI.FLOAT], op=MPI.SUM)
            sync()
            times.append(time.perf_counter() - t0)
        import numpy

        slowest = numpy.array(times)
        comm.Allreduce(MPI.IN_PLACE, slowest, op=MPI.MAX)
        out["times"] = [float(t) for t in slowest]
        out["bytes"] = 4 * n
    except Exception as exc:
        out["error"] = _error(exc)
    return out


def _gathered(comm, mine: dict) -> dict | None:
    """Every rank's part on rank 0 (None on the others); a single rank's own part."""
    if comm is None:
        return {"size": 1, "ranks": [mine]}
    parts = comm.gather(mine, root=0)
    return {"size": comm.size, "ranks": parts} if comm.rank == 0 else None


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "node"
    if what == "cuda":
        doc = probe_cuda()
    elif what == "cudnn":
        doc = probe_cudnn()
    elif what == "chainer":
        doc = probe_chainer()
    elif what == "node":
        doc = {"python": sys.executable, "cuda": probe_cuda()}
        doc["cudnn"] = probe_cudnn()
        doc["chainer"] = probe_chainer()
        doc["nccl"] = (
            nccl_allreduce(None) if doc["cuda"].get("count") else {"error": "not run: no CUDA device"}
        )
        doc["infiniband"] = probe_infiniband()
    elif what == "nccl-allreduce":
        comm = _world()
        doc = _gathered(comm, nccl_allreduce(comm))
    elif what == "send" and len(argv) > 1 and argv[1] in ("cpu", "gpu"):
        comm = _world()
        if comm is None:
            doc = {"error": "send needs mpiexec (at least 2 ranks)"}
        else:
            doc = _gathered(comm, send(argv[1], comm))
    elif what == "allreduce" and len(argv) > 2 and argv[1] in ("cpu", "gpu") and argv[2].isdigit():
        comm = _world()
        if comm is None:
            doc = {"error": "allreduce needs mpiexec (at least 2 ranks)"}
        else:
            doc = _gathered(comm, allreduce(argv[1], int(argv[2]), comm))
    else:
        print(f"usage: {os.path.basename(sys.argv[0])} node|cuda|cudnn|chainer|nccl-allreduce|send cpu|gpu"
              "|allreduce cpu|gpu BYTES", file=sys.stderr)  # fmt: skip
        return 2
    if doc is not None:
        print("PROBE " + json.dumps(doc, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
