"""Command line of the benchmark; every check here runs before MPI starts.

Flags follow ChainerMN's examples (``--communicator``, ``--batchsize``,
``--unit``, ``--gpu``). A bad choice fails every rank with the same message
and exit status 2 before any MPI call, so mpiexec never waits on a partner
that has already left.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from train.data import DataError, check_data_path
from train.errors import BenchmarkError

MODELS = ("mlp", "resnet50")
FRAMEWORKS = ("chainer", "pytorch")
COMMUNICATORS = ("naive", "flat", "non_cuda_aware", "pure_nccl")
GPU_COMMUNICATORS = ("flat", "non_cuda_aware", "pure_nccl")
BACKENDS = ("gloo", "nccl")  # PyTorch DDP's process group
DEFAULT_BATCHSIZE = {"mlp": 100, "resnet50": 32}


def _bytes(text: str) -> int | str:
    if text == "auto":
        return text
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    try:
        if t and t[-1] in units:
            return int(float(t[:-1]) * units[t[-1]])
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte count (e.g. 4096, 64M, 1G, auto)") from None


class Parser(argparse.ArgumentParser):
    """Errors on one line tagged with the rank: mpiexec interleaves every rank's stderr."""

    def error(self, message: str):
        self.exit(2, f"[rank {_rank()}] {self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m train",
        description="ChainerMN or PyTorch DDP data-parallel training benchmark (run under mpiexec, "
                    "srun --mpi=pmix, or torchrun for PyTorch).",
    )
    p.add_argument("--framework", choices=FRAMEWORKS, default="chainer",
                   help="chainer (ChainerMN, default) or pytorch (DistributedDataParallel)")
    p.add_argument("--model", "-m", choices=MODELS, default="mlp", help="network to train (default: mlp)")
    p.add_argument("--batchsize", "-b", type=int, help="samples per process per iteration, weak scaling "
                   "(default: 100 for mlp, 32 for resnet50)")
    p.add_argument("--global-batchsize", type=int,
                   help="samples per iteration over all processes, strong scaling: each of p processes "
                   "takes global/p (a multiple of p)")
    p.add_argument("--unit", "-u", type=int, default=1000, help="hidden units of the MLP (default: 1000)")
    p.add_argument("--communicator", choices=COMMUNICATORS + BACKENDS,
                   help="ChainerMN communicator (default: pure_nccl with --gpu, naive without); with "
                   "--framework pytorch the process group's backend (default: nccl with --gpu, gloo without)")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0,
                   help="DDP's bucket size cap in MiB (--framework pytorch; default: 25, DDP's own)")
    p.add_argument("--gpu", "-g", action="store_true", help="one GPU per process (device = intra-node rank)")
    p.add_argument("--iterations", "-i", type=int, default=50,
                   help="timed iterations in each pass, instrumented and plain (default: 50)")
    p.add_argument("--warmup", type=int, default=5, help="untimed iterations first (default: 5)")
    p.add_argument("--rounds", type=int,
                   help="alternate plain and instrumented chunks this many times "
                   "(default: chunks of 5 iterations, so a burst of load hits both alike)")
    p.add_argument("--data", default="synthetic",
                   help="'synthetic', or an MNIST IDX file/directory, an .npz, a 'path label' list file, or "
                   "an ImageNet-style class-folder directory (<dir>/<class>/<image>)")
    p.add_argument("--validation", type=int, default=0,
                   help="hold out this many samples of --data and evaluate them after the warm-up and after "
                   "the timed passes through ChainerMN's multi-node evaluator (default: 0, none)")
    p.add_argument("--loaders", type=int,
                   help="worker processes per rank that decode images (list file, class folders) ahead of "
                   "the loop (default: 2; 0 decodes in the loop)")
    p.add_argument("--root", help="directory the list file's image paths are relative to "
                   "(default: the list file's directory)")
    p.add_argument("--insize", type=int, default=224,
                   help="image side for resnet50 and list files (default: 224)")
    p.add_argument("--classes", type=int, help="output classes (default: 10 for mlp, 1000 for resnet50)")
    p.add_argument("--allreduce-dtype", choices=("float16", "float32"),
                   help="gradient dtype on the wire (pure_nccl only)")
    p.add_argument("--double-buffering", action="store_true",
                   help="overlap allreduce with the next iteration (pure_nccl only)")
    p.add_argument("--seed", type=int, default=0, help="seed for data order and synthetic data")
    p.add_argument("--out", "-o", help="write the JSON document here (rank 0)")
    p.add_argument("--json-stdout", action="store_true",
                   help="also print the document on one stdout line prefixed 'MNCBENCH_JSON '")
    p.add_argument("--trace", help="write a Chrome trace (chrome://tracing, Perfetto) of every rank's phases")
    p.add_argument("--sweep-max-bytes", type=_bytes, default="auto",
                   help="largest power of two in the raw MPI allreduce sweep from 8 B; 'auto' = below "
                   "the allreduce size L, which is always measured (at least 10 times); 0 = L only")
    p.add_argument("--sweep-iters", type=int, default=20,
                   help="allreduces per sweep size (fewer for big sizes, at least 10 at L)")
    p.add_argument("--p2p-bytes", type=_bytes, default=16 << 20,
                   help="message size of the point-to-point ping-pong (default: 16M; 0 skips it)")
    p.add_argument("--p2p-iters", type=int, default=10, help="round trips per measured pair (default: 10)")
    return p


def gpu_problem(communicator: str) -> str | None:
    try:
        import cupy
    except Exception as e:  # ImportError, or a CUDA library that does not load
        return f"--gpu needs CuPy, which does not import here: {e}"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return f"--gpu: no usable CUDA device ({e})"
    if n < 1:
        return "--gpu: no CUDA device is visible"
    if communicator == "pure_nccl":
        try:
            from cupy.cuda import nccl
        except Exception as e:
            return f"communicator 'pure_nccl' needs NCCL, which CuPy cannot load: {e}"
        if not getattr(nccl, "available", True):  # CuPy >= 10 sets it when libnccl does not load
            return "communicator 'pure_nccl' needs NCCL, which CuPy cannot load (nccl.available is false)"
    return None


def torch_gpu_problem() -> str | None:
    try:
        import torch
    except Exception as e:
        return f"--framework pytorch needs torch, which does not import here: {e}"
    if not torch.cuda.is_available():
        return "--gpu: torch sees no usable CUDA device (a CPU build of torch, or no device)"
    return None


def resolve_framework(args: argparse.Namespace) -> str | None:
    """The choices that depend on the framework: its communicators and its options."""
    if args.framework == "chainer":
        if args.communicator in BACKENDS:
            return (f"--communicator {args.communicator} is a PyTorch process group backend: add "
                    "--framework pytorch, or choose a ChainerMN communicator")
        return None
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return (f"--framework pytorch needs torch, which is not installed for {sys.executable} (the chainer "
                "role installs it with chainer_torch: true)")
    if args.communicator is None:
        args.communicator = "nccl" if args.gpu else "gloo"
    if args.communicator not in BACKENDS:
        return (f"--communicator {args.communicator} is a ChainerMN communicator; --framework pytorch "
                "reduces on a process group: gloo (CPU) or nccl (GPU)")
    if args.communicator == "nccl" and not args.gpu:
        return "--communicator nccl runs on GPUs only: add --gpu on a GPU node, or use gloo on the CPU"
    for flag, value in (("--allreduce-dtype", args.allreduce_dtype),
                        ("--double-buffering", args.double_buffering)):
        if value:
            return f"{flag} is a ChainerMN pure_nccl option; DDP overlaps the reduction with backward itself"
    if args.bucket_cap_mb <= 0:
        return "--bucket-cap-mb must be above 0"
    return None


def resolve(args: argparse.Namespace) -> str | None:
    """Fill defaults that depend on other flags; return a problem or None."""
    problem = resolve_framework(args)
    if problem:
        return problem
    if args.communicator is None:
        args.communicator = "pure_nccl" if args.gpu else "naive"
    args.scaling = "weak"
    if args.global_batchsize is not None:
        if args.batchsize is not None:
            return ("--batchsize (per process, weak scaling) and --global-batchsize (over all processes, "
                    "strong scaling) exclude each other")
        size = _size()
        if args.global_batchsize < size or args.global_batchsize % size:
            return (f"--global-batchsize {args.global_batchsize} is not a multiple of the {size} processes "
                    "(each takes the same share)")
        args.scaling, args.batchsize = "strong", args.global_batchsize // size
    if args.batchsize is None:
        args.batchsize = DEFAULT_BATCHSIZE[args.model]
    if args.classes is None:
        args.classes = 10 if args.model == "mlp" else 1000
    if args.rounds is None:
        args.rounds = max(1, args.iterations // 5)
    if args.loaders is None:
        args.loaders = 2
    if args.loaders < 0:
        return "--loaders must be 0 or more"
    if args.validation < 0:
        return "--validation must be 0 or more"
    if args.validation and args.data == "synthetic":
        return "--validation needs --data: synthetic data has no samples to hold out"
    positive = ("batchsize", "unit", "iterations", "insize", "classes", "rounds", "sweep_iters", "p2p_iters")
    for name in positive:
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1"
    args.rounds = min(args.rounds, args.iterations)
    if args.communicator in GPU_COMMUNICATORS and not args.gpu:
        return (f"communicator {args.communicator!r} runs on GPUs only: add --gpu on a GPU node, "
                "or use --communicator naive on the CPU")
    if args.allreduce_dtype and args.communicator != "pure_nccl":
        return "--allreduce-dtype needs --communicator pure_nccl"
    if args.double_buffering and args.communicator != "pure_nccl":
        return "--double-buffering needs --communicator pure_nccl"
    if args.framework == "pytorch":
        if args.data != "synthetic":
            try:
                check_data_path(args.data, args.root)
            except (DataError, OSError) as e:
                return str(e)
        if args.warmup < 2:
            return "--warmup must be at least 2 (DDP rebuilds its buckets after the first iteration)"
        return torch_gpu_problem() if args.gpu else None
    if args.warmup < (3 if args.double_buffering else 2):
        return ("--warmup must be at least 2 (3 with --double-buffering): the first update only "
                "broadcasts, and the optimizer state is made by the next")
    if args.data != "synthetic":
        try:
            check_data_path(args.data, args.root)
        except (DataError, OSError) as e:
            return str(e)
    if args.gpu:
        return gpu_problem(args.communicator)
    return None


def _size() -> int:
    """The job's process count from the launcher's environment, before MPI starts (1 without one)."""
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "WORLD_SIZE", "SLURM_STEP_NUM_TASKS",
                "SLURM_NTASKS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 1


def _rank() -> int:
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "RANK", "SLURM_PROCID"):
        if var in os.environ:
            return int(os.environ[var])
    return 0


def _abort(code: int) -> int:
    """Take every rank down: a partner blocked in a collective would hang."""
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized() and mpi.COMM_WORLD.Get_size() > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        mpi.COMM_WORLD.Abort(code)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    problem = resolve(args)
    if problem:
        parser.error(problem)
    try:
        from train import startup

        # MCA settings take effect at MPI_Init only, NCCL's debug settings at its init
        startup.before_mpi(nccl=args.gpu and args.communicator in ("pure_nccl", "nccl"))
        if args.framework == "pytorch":
            from train import torch_bench, torch_dist

            torch_bench.run(args)
            torch_dist.leave(0)  # never returns: see its note
        else:
            from train import bench

            bench.run(args)
    except (BenchmarkError, DataError) as e:
        print(f"[rank {_rank()}] train: error: {e}", file=sys.stderr, flush=True)
        return _abort(1)
    except Exception:
        for line in traceback.format_exc().splitlines():
            print(f"[rank {_rank()}] {line}", file=sys.stderr)
        sys.stderr.flush()
        return _abort(1)
    return 0
