"""GPU-side checks of one node that need no second node: one line per check.

    PASS|FAIL|SKIP <check>: <detail>

Run it through scripts/device-check.sh (which picks the Python and the time
limit) on a machine with one NVIDIA GPU and no network; it also runs where
there is no GPU at all, where its CPU-side parts still run and every GPU
check says SKIP with the reason. Exit status 1 if any check FAILs, else 0.

Each check runs in its own subprocess with a timeout (a CUDA crash or hang
costs that check only), all within one overall deadline (--deadline, 540 s):

  python          the interpreter and the versions of numpy/cupy/chainer/mpi4py
  nvidia-smi      GPUs the driver sees (name, driver, memory)
  cuda            CuPy sees the GPUs: count, name, compute capability, driver
                  and runtime versions, and a kernel runs
  cudnn-cupy      cuDNN as CuPy loads it (cupy.cuda.cudnn; CuPy 14 has none)
  cudnn-chainer   chainer.backends.cuda.cudnn_enabled, where Chainer imports
  nccl-allreduce  a single-rank NCCL allreduce of a device buffer (cupy.cuda.nccl)
  mpi-host-send   mpiexec -n 2: an mpi4py send of a host buffer (CPU side)
  mpi-cuda-aware  whether OpenMPI was built with CUDA (ompi_info)
  mpi-device-send mpiexec -n 2 on the one GPU: an mpi4py send of a CuPy buffer
  mpi-allreduce-host, mpi-allreduce-device
                  mpiexec -n 2: MPI_Allreduce of ResNet-50's gradients (L bytes of
                  float32) in host memory, then in device memory through the
                  CUDA-aware MPI: median of 10, busbw, the sum checked
  train-cpu       python -m train at p=1 on the CPU (naive), a smoke run
  train-gpu-*     python -m train --gpu at p=1: pure_nccl, double buffering, fp16

Only the standard library is imported here and in the modules beside it
(device_check_harness.py: the subprocesses, the deadline, the result lines;
device_check_gpu.py, device_check_mpi.py, device_check_train.py: the
checks); everything else is imported by the probes, so a missing or broken
package is that check's SKIP or FAIL. The GPU probes (cuda, cudnn-*,
nccl-allreduce, mpi-*-send) are roles/verify/files/mnc_gpu_probe.py, the same
program roles/verify runs on the nodes.
"""

from __future__ import annotations

import argparse
import sys
import time

import device_check_harness as harness
from device_check_gpu import check_cuda, check_cudnn, check_nccl, check_nvidia_smi, check_python
from device_check_mpi import check_mpi_allreduce, check_mpi_device, check_mpi_host
from device_check_train import TRAIN_CHECKS, check_train


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--deadline", type=float, default=540, help="seconds for all checks (default: 540)")
    p.add_argument("--no-train", action="store_true", help="leave out the python -m train runs")
    args = p.parse_args(argv)
    harness.DEADLINE = harness.Deadline(args.deadline)  # what report() and run() read
    t0 = time.monotonic()
    info = check_python()
    smi = check_nvidia_smi()
    gpu = check_cuda(info, smi) if info else False
    check_cudnn(info, gpu)
    check_nccl(gpu)
    mpiexec = check_mpi_host(info)
    aware = check_mpi_device(info, mpiexec, gpu)
    check_mpi_allreduce(mpiexec, gpu, aware)
    if args.no_train:
        for name in TRAIN_CHECKS:
            harness.report("SKIP", name, "--no-train")
    else:
        check_train(info, mpiexec, gpu)
    counts = {s: sum(1 for r in harness.RESULTS if r[0] == s) for s in ("PASS", "FAIL", "SKIP")}
    print(
        f"# {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP "
        f"in {time.monotonic() - t0:.0f}s",
        flush=True,
    )
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
