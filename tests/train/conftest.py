"""Helpers for the train/ tests: the repository on sys.path and real mpiexec runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

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


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs CuPy and a CUDA device; skipped with the reason elsewhere")


def pytest_collection_modifyitems(config, items):
    if CUDA_PROBLEM is None:
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {CUDA_PROBLEM}")
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
