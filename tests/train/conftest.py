"""Helpers for the train/ tests: real mpiexec runs (pyproject.toml puts the repository on sys.path)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

MPIEXEC = shutil.which("mpiexec")


def cuda_problem() -> str | None:
    """Why CUDA tests cannot run here, or None when CuPy sees a device."""
    try:
        import cupy
    except Exception as e:  # ImportError, or a CUDA library that does not load
        return f"CuPy does not import ({type(e).__name__})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device is visible"
    except Exception as e:
        return f"no usable CUDA device ({type(e).__name__})"
    return None


CUDA_PROBLEM = cuda_problem()


def chainer_problem() -> str | None:
    """Why the benchmark cannot run on this Python at all, or None (then a failure is a failure).

    Only the cases known in advance: no Chainer, or Chainer 7 on a Python without
    numpy.distutils (3.12 and later), as on a GPU image that ships CuPy 14.
    """
    import importlib.metadata

    try:
        version = importlib.metadata.version("chainer")
    except importlib.metadata.PackageNotFoundError:
        return "Chainer is not installed for this Python"
    if version.startswith("7.") and sys.version_info >= (3, 12):
        return f"Chainer {version} cannot run on Python {sys.version.split()[0]} (numpy.distutils is gone)"
    return None


def torch_missing() -> str | None:
    """Why the PyTorch engine cannot run here (torch not installed), or None."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return ("torch is not installed for this Python: scripts/bootstrap.sh installs "
                "requirements/controller-torch.txt (the CPU build)")
    return None


def torch_cuda_problem() -> str | None:
    """Why the PyTorch GPU tests cannot run here, or None when torch sees a CUDA device."""
    if torch_missing():
        return torch_missing()
    import torch

    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    return None


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs CuPy and a CUDA device; skipped with the reason elsewhere")
    config.addinivalue_line("markers", "torch_gpu: needs torch with a CUDA device; skipped with the reason "
                                       "elsewhere")


def pytest_collection_modifyitems(config, items):
    torch_gpu = [item for item in items if item.get_closest_marker("torch_gpu") is not None]
    if torch_gpu and torch_cuda_problem():
        for item in torch_gpu:
            item.add_marker(pytest.mark.skip(reason=f"needs a CUDA GPU: {torch_cuda_problem()}"))
    problem = f"needs a CUDA GPU: {CUDA_PROBLEM}" if CUDA_PROBLEM else None
    if problem is None and chainer_problem():
        problem = f"needs Chainer: {chainer_problem()}"
    if problem is None:
        return
    skip = pytest.mark.skip(reason=problem)
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


def mpi_env() -> dict:
    # Root in a container, two cores: allow both, and one BLAS thread per rank.
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")


def run_train(args: list[str], processes: int | None = 2, timeout: int = 180, cwd: Path = ROOT,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """``[mpiexec -n p] python -m train args`` from the repository root (or ``cwd``)."""
    argv = [sys.executable, "-m", "train", *args]
    if processes is not None:
        if MPIEXEC is None:
            pytest.fail("mpiexec is not on PATH (install openmpi-bin)")
        argv = [MPIEXEC, "-n", str(processes), *argv]
    return subprocess.run(argv, cwd=cwd, env={**mpi_env(), **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)


def run_ok(args: list[str], out: Path, processes: int | None = 2, timeout: int = 180,
           env: dict | None = None) -> dict:
    proc = run_train([*args, "--out", str(out)], processes, timeout, env=env)
    assert proc.returncode == 0, f"rc={proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return json.loads(out.read_text())


# Small and quick: an MLP with 100 hidden units, few iterations, small ceilings.
QUICK = ["--model", "mlp", "--unit", "100", "--batchsize", "32", "--iterations", "20", "--warmup", "2",
         "--rounds", "4", "--sweep-iters", "3", "--p2p-bytes", "256K", "--p2p-iters", "3"]


def mlp_param_bytes(n_in: int, unit: int, n_out: int) -> int:
    """float32 bytes of the 3-layer MLP: weights and biases of l1, l2, l3."""
    return 4 * ((n_in * unit + unit) + (unit * unit + unit) + (unit * n_out + n_out))
