"""scripts/device-check.sh: one PASS|FAIL|SKIP line per check, SKIP (not FAIL) without a GPU.

It runs here for real (no GPU on the test bed): the CPU-side parts run (the
interpreter, a 2-rank mpi4py send under mpiexec, python -m train at p=1 on
the CPU) and every GPU part says SKIP with its reason; the exit status is 0.
A fake nvidia-smi on PATH shows that a driver that fails is a FAIL (exit 1)
and that a GPU the driver lists, without CuPy, is still only a SKIP.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import device_check_gpu
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "device-check.sh"
LINE = re.compile(r"^(PASS|FAIL|SKIP) ([a-z0-9-]+): (\S.*)$")
CHECKS = [
    "python",
    "nvidia-smi",
    "cuda",
    "cudnn-cupy",
    "cudnn-chainer",
    "nccl-allreduce",
    "mpi-host-send",
    "mpi-cuda-aware",
    "mpi-device-send",
    "mpi-allreduce-host",
    "mpi-allreduce-device",
    "train-cpu",
    "train-gpu-pure-nccl",
    "train-gpu-double-buffering",
    "train-gpu-fp16",
]
GPU_CHECKS = [
    "cuda",
    "cudnn-cupy",
    "cudnn-chainer",
    "nccl-allreduce",
    "mpi-device-send",
    "mpi-allreduce-device",
    "train-gpu-pure-nccl",
    "train-gpu-double-buffering",
    "train-gpu-fp16",
]

no_gpu_here = pytest.mark.skipif(
    shutil.which("nvidia-smi") is not None or any(Path("/dev").glob("nvidia[0-9]*")),
    reason="this machine has an NVIDIA GPU: the no-GPU expectations do not apply",
)


def _run(*args: str, path_prefix: Path | None = None, timeout: int = 300):
    env = dict(os.environ, PYTHON=sys.executable)
    if path_prefix is not None:
        env["PATH"] = f"{path_prefix}:{env['PATH']}"
    proc = subprocess.run(
        [str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    lines = proc.stdout.splitlines()
    results = {}
    for line in lines:
        if line.startswith("# "):
            continue
        m = LINE.match(line)
        assert m, f"not a PASS|FAIL|SKIP line: {line!r}\n{proc.stdout}\n{proc.stderr}"
        results[m.group(2)] = (m.group(1), m.group(3))
    return proc, lines, results


def _fake_smi(tmp_path: Path, body: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + body + "\n")
    smi.chmod(0o755)
    return bin_dir


@no_gpu_here
def test_runs_here_with_the_gpu_checks_skipped():
    proc, lines, results = _run()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert list(results) == CHECKS, out
    assert lines[-1].startswith("# ") and "0 FAIL" in lines[-1], out
    for name in GPU_CHECKS:
        assert results[name][0] == "SKIP", (name, results[name])
        assert results[name][1], name  # a reason
    assert results["nvidia-smi"][0] == "SKIP"
    assert results["python"][0] == "PASS"
    assert sys.version.split()[0] in results["python"][1]
    # The CPU-side parts run for real where their pieces are here.
    if shutil.which("mpiexec") and importlib.util.find_spec("mpi4py"):
        assert results["mpi-host-send"][0] == "PASS", results["mpi-host-send"]
        # A figure at ResNet-50's L, with the sum checked on every rank.
        status, detail = results["mpi-allreduce-host"]
        assert status == "PASS" and "102,228,384 B" in detail and "sum right" in detail, detail
        assert re.search(r"median \d+\.\d+ ms .*10 reps\), busbw \d+\.\d+ GB/s", detail), detail
        if importlib.util.find_spec("chainer") and importlib.util.find_spec("chainermn"):
            assert results["train-cpu"][0] == "PASS", results["train-cpu"]
            assert "samples/s" in results["train-cpu"][1]


def test_a_failing_driver_is_a_fail_and_the_exit_status_says_so(tmp_path):
    bin_dir = _fake_smi(tmp_path, "echo 'NVIDIA-SMI has failed because it could not communicate' >&2; exit 9")
    proc, _, results = _run("--no-train", path_prefix=bin_dir)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    status, detail = results["nvidia-smi"]
    assert status == "FAIL" and "could not communicate" in detail, detail
    assert [n for n, (s, _) in results.items() if s == "FAIL"] == ["nvidia-smi"]


@no_gpu_here
def test_a_listed_gpu_without_cupy_is_skip_not_fail(tmp_path):
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here")
    bin_dir = _fake_smi(tmp_path, "echo '0, NVIDIA H200, 570.86.15, 143771 MiB, 00000000:19:00.0'")
    proc, _, results = _run("--no-train", path_prefix=bin_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert results["nvidia-smi"] == (
        "PASS",
        "1 GPU(s): 0, NVIDIA H200, 570.86.15, 143771 MiB, 00000000:19:00.0",
    )
    assert results["cuda"][0] == "SKIP" and "CuPy not importable" in results["cuda"][1]
    assert results["train-cpu"] == ("SKIP", "--no-train")


@pytest.mark.parametrize(
    ("info", "expect"),
    [
        # The target GPU machine: Python 3.12, CuPy 14, Chainer 7 installed or not.
        ({"python": "3.12.3", "chainer": "7.8.1", "numpy": "2.2.1", "cupy": "14.0.1"}, "Python 3.12.3"),
        # What importing Chainer 7.8.1 there first fails on (seen on an H200 image, 2026-12-04).
        ({"python": "3.12.3", "chainer": "7.8.1", "numpy": "2.5.2", "cupy": "14.2.0"}, "np.sctypes"),
        (
            {"python": "3.12.3", "chainer": None, "chainer_error": "ModuleNotFoundError: chainer"},
            "not importable",
        ),
        ({"python": "3.11.7", "chainer": "7.8.1", "numpy": "2.0.2", "cupy": "13.6.0"}, "NumPy 2.0.2"),
        ({"python": "3.11.7", "chainer": "7.8.1", "numpy": "1.26.4", "cupy": "14.0.1"}, "CuPy 14.0.1"),
        ({"python": "3.11.7", "chainer": "7.8.1", "numpy": "1.26.4", "cupy": "13.6.0"}, None),
    ],
)
def test_it_knows_when_chainer_cannot_run(info, expect):
    blocker = device_check_gpu.chainer_blocker(info)
    if expect is None:
        assert blocker is None
    else:
        assert blocker and expect in blocker, blocker
