"""The PyTorch engine's two communicators: the process group DDP reduces on, and a host one.

``init`` brings up ``torch.distributed`` (gloo on the CPU, NCCL on GPUs) from what the
launcher says (``train.launch``) and returns the host-side communicator the shared code
(barriers, gathers, the MPI ceilings, the correctness checks) talks to, with mpi4py's
interface: MPI's COMM_WORLD under mpiexec and ``srun --mpi=pmix`` (as for Chainer), or
``GlooHostComm``, a gloo group, under torchrun, whose ranks have no MPI world.
"""

from __future__ import annotations

import datetime
import os
import socket
import sys

import numpy as np

from train import launch
from train.errors import BenchmarkError

TIMEOUT = datetime.timedelta(minutes=10)


class _Op:
    def __init__(self, name):
        self.name = name


class GlooMPI:
    """The few names of mpi4py's MPI module the benchmark uses, for GlooHostComm."""

    IN_PLACE = object()
    SUM, MAX, MIN = _Op("SUM"), _Op("MAX"), _Op("MIN")

    @staticmethod
    def Get_processor_name() -> str:
        return socket.gethostname()


class GlooHostComm:
    """mpi4py's collective calls the benchmark makes, on a gloo group of torch.distributed."""

    def __init__(self, group=None):
        import torch.distributed as dist

        self.dist, self.group = dist, group
        self.ops = {"SUM": dist.ReduceOp.SUM, "MAX": dist.ReduceOp.MAX, "MIN": dist.ReduceOp.MIN}

    def Get_rank(self) -> int:
        return self.dist.get_rank()

    def Get_size(self) -> int:
        return self.dist.get_world_size()

    def Barrier(self) -> None:
        self.dist.barrier(group=self.group)

    def allgather(self, obj):
        out = [None] * self.Get_size()
        self.dist.all_gather_object(out, obj, group=self.group)
        return out

    def gather(self, obj, root=0):
        out = self.allgather(obj)  # gather_object needs a device under NCCL: all ranks get it, root keeps it
        return out if self.Get_rank() == root else None

    def bcast(self, obj, root=0):
        box = [obj]
        self.dist.broadcast_object_list(box, src=root, group=self.group)
        return box[0]

    def Allreduce(self, inplace, buf: np.ndarray, op) -> None:
        import torch

        if inplace is not GlooMPI.IN_PLACE:
            raise ValueError("GlooHostComm reduces in place only")
        self.dist.all_reduce(torch.from_numpy(buf), op=self.ops[op.name], group=self.group)

    def Send(self, buf: np.ndarray, dest: int, tag: int = 0) -> None:
        import torch

        self.dist.send(torch.from_numpy(buf), dst=dest, group=self.group, tag=tag)

    def Recv(self, buf: np.ndarray, source: int, tag: int = 0) -> None:
        import torch

        self.dist.recv(torch.from_numpy(buf), src=source, group=self.group, tag=tag)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def init(backend: str) -> dict:
    """Start the process group; returns {launch record, mpi, MPI, host_path, group info} for the runner."""
    import torch.distributed as dist

    from train.node import interfaces

    rec = launch.detect(os.environ)
    if launch.uses_mpi(rec):
        from mpi4py import MPI

        mpi = MPI.COMM_WORLD
        rank, size = mpi.Get_rank(), mpi.Get_size()
        if rec["launcher"] != "none" and (rec["rank"], rec["size"]) != (rank, size):
            raise BenchmarkError(f"{rec['rank_from']}={rec['rank']} of {rec['size_from']}={rec['size']}, but "
                                 f"MPI says rank {rank} of {size}")
        rec.update(rank=rank, size=size)
        hosts = mpi.allgather(MPI.Get_processor_name())
        ifaces = mpi.allgather(interfaces())
        given = rec["master_addr"]
        addr = given or (launch.master_address(ifaces, hosts)[0] if rank == 0 else None)
        port = rec["master_port"] or (_free_port() if rank == 0 else None)
        addr, port = mpi.bcast((addr, port), root=0)
        # gloo binds to the interface its host name resolves to (127.0.1.1 on Debian): name it
        mine = launch.interface_towards(ifaces[rank], addr)
        if mine and "GLOO_SOCKET_IFNAME" not in os.environ and size > 1:
            os.environ["GLOO_SOCKET_IFNAME"] = mine
        rec.update(master_addr=addr, master_port=port, init_method=f"tcp://{addr}:{port}",
                   master_from="MASTER_ADDR" if given else "rank 0's address, sent over MPI")
        dist.init_process_group(backend, init_method=rec["init_method"], rank=rank, world_size=size,
                                timeout=TIMEOUT)
        host, host_mpi, host_path = mpi, MPI, "host-mpi"
    else:
        dist.init_process_group(backend, init_method="env://", timeout=TIMEOUT)
        rec.update(master_from="torchrun (MASTER_ADDR, MASTER_PORT)", init_method="env://")
        group = dist.new_group(backend="gloo") if backend != "gloo" else None
        host, host_mpi, host_path = GlooHostComm(group), GlooMPI, "host-gloo"
    rec["gloo_socket_ifname"] = os.environ.get("GLOO_SOCKET_IFNAME")
    rec["backend"] = dist.get_backend()
    return {"launch": rec, "mpi": host, "MPI": host_mpi, "host_path": host_path}


def leave(code: int) -> None:
    """End a PyTorch rank after its last collective, without the interpreter's finalisation.

    Gloo's worker threads drop the last references to the tensors of the last collectives
    (a barrier keeps the work before it) on their own time, and the process group outlives
    ``destroy_process_group`` while torch holds it. A thread that releases a Python tensor
    while the interpreter finalises aborts the rank ("terminate called without an active
    exception", SIGABRT: about one torchrun run in 30 on two cores). Everything the run
    writes is written and closed by now: finish MPI if it was started, flush, and exit.
    """
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
