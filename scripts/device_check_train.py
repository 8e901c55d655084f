"""scripts/device_check.py's benchmark checks: python -m train at p=1, on the CPU and on the GPU.

train-cpu, train-gpu-pure-nccl, train-gpu-double-buffering, train-gpu-fp16
(see device_check.py): a quick run each, judged by its document. Only the
standard library.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import device_check_gpu as gpu_checks
from device_check_harness import last_line, report, run

# --- the benchmark -------------------------------------------------------------------

QUICK = [
    "--model",
    "mlp",
    "--unit",
    "100",
    "--batchsize",
    "32",
    "--iterations",
    "10",
    "--warmup",
    "3",
    "--rounds",
    "2",
    "--sweep-iters",
    "3",
    "--sweep-max-bytes",
    "0",
    "--p2p-bytes",
    "64K",
    "--p2p-iters",
    "3",
]


def _train(name: str, args: list[str], mpiexec: str | None, timeout: float) -> None:
    with tempfile.TemporaryDirectory(prefix="mnc-device-check-") as tmp:
        out = Path(tmp) / "bench.json"
        argv = [sys.executable, "-m", "train", *QUICK, *args, "--out", str(out)]
        if mpiexec:
            argv = [mpiexec, "-n", "1", *argv]
        rc, stdout, stderr = run(argv, timeout)
        if rc != 0 or not out.is_file():
            report("FAIL", name, f"python -m train {' '.join(args)} (rc={rc}): {last_line(stderr or stdout)}")
            return
        doc = json.loads(out.read_text())
    thr = doc.get("throughput", {}).get("samples_per_s")
    ar = (doc.get("allreduce") or {}).get("time")
    env = doc.get("environment", {})
    extra = ""
    if "--gpu" in args:
        extra = f", cudnn_enabled {env.get('cudnn_enabled')}, NCCL {env.get('nccl_version')}"
    agree = (doc.get("correctness") or {}).get("agree")
    detail = f"p=1 {' '.join(args)}: {thr:.0f} samples/s" if thr else f"p=1 {' '.join(args)}: ran"
    detail += f", allreduce {ar * 1e3:.3f} ms" if isinstance(ar, (int, float)) else ""
    detail += extra
    if agree is False:
        report("FAIL", name, detail + ", ranks disagree")
    elif "--gpu" in args and env.get("cudnn_enabled") is False:
        report("FAIL", name, detail + ": trained without cuDNN")
    else:
        report("PASS", name, detail)


TRAIN_CHECKS = ["train-cpu", "train-gpu-pure-nccl", "train-gpu-double-buffering", "train-gpu-fp16"]


def check_train(info: dict, mpiexec: str | None, gpu: bool) -> None:
    gpu_runs = [
        ("train-gpu-pure-nccl", ["--gpu", "--communicator", "pure_nccl"]),
        ("train-gpu-double-buffering", ["--gpu", "--communicator", "pure_nccl", "--double-buffering"]),
        ("train-gpu-fp16", ["--gpu", "--communicator", "pure_nccl", "--allreduce-dtype", "float16"]),
    ]
    blocker = gpu_checks.chainer_blocker(info)
    if not info.get("chainermn") and not blocker:
        blocker = f"ChainerMN not importable: {info.get('chainermn_error', 'not installed')}"
    if not blocker and not info.get("mpi4py"):
        blocker = f"mpi4py not importable: {info.get('mpi4py_error', 'not installed')}"
    if blocker:
        for name, _ in [("train-cpu", None), *gpu_runs]:
            report("SKIP", name, blocker)
        return
    _train("train-cpu", ["--communicator", "naive"], mpiexec, 180)
    for name, args in gpu_runs:
        if not gpu:
            report("SKIP", name, gpu_checks.NO_GPU)
        else:
            _train(name, args, mpiexec, 180)
