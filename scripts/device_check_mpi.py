"""scripts/device_check.py's MPI checks on one machine: 2 ranks under mpiexec, host and device buffers.

mpi-host-send, mpi-cuda-aware, mpi-device-send, mpi-allreduce-host and
mpi-allreduce-device (see device_check.py). Only the standard library; the
probes are roles/verify/files/mnc_gpu_probe.py's.
"""

from __future__ import annotations

import shutil
import statistics

import device_check_gpu as gpu_checks
from device_check_harness import gpu_probe, last_line, report, run

# --- MPI -------------------------------------------------------------------------


def mpi_tools(info: dict) -> tuple[str | None, str | None]:
    """(mpiexec, why not) for the MPI checks."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        return None, "no mpiexec on PATH"
    if not info.get("mpi4py"):
        return None, f"mpi4py not importable: {info.get('mpi4py_error', 'not installed')}"
    return mpiexec, None


def _send(mpiexec: str, kind: str, timeout: float) -> tuple[bool, str]:
    """(every rank got its buffer intact, what went wrong) for ``mpiexec -n 2`` on this machine."""
    rc, doc, err = gpu_probe(["send", kind], timeout, mpiexec=mpiexec)
    ranks = (doc or {}).get("ranks") or []
    if rc == 0 and len(ranks) == 2 and all(r.get("ok") for r in ranks):
        return True, ""
    errors = [r["error"] for r in ranks if r.get("error")] or [
        f"rank {r['rank']} received a wrong buffer" for r in ranks if r.get("ok") is False
    ]
    return False, f"rc={rc}: " + ("; ".join(errors) or last_line(err) or "no result")


def check_mpi_host(info: dict) -> str | None:
    mpiexec, why = mpi_tools(info)
    if why:
        report("SKIP", "mpi-host-send", why)
        return None
    ok, why = _send(mpiexec, "cpu", 120)
    if ok:
        report(
            "PASS",
            "mpi-host-send",
            f"{mpiexec} -n 2: 4 MiB host buffer arrived intact (mpi4py {info['mpi4py']})",
        )
        return mpiexec
    report("FAIL", "mpi-host-send", f"{mpiexec} -n 2 ({why})")
    return None


def ompi_cuda_aware() -> tuple[bool | None, str]:
    ompi_info = shutil.which("ompi_info")
    if ompi_info is None:
        return None, "no ompi_info (not OpenMPI?)"
    rc, out, _ = run([ompi_info, "--parsable", "--all"], 60)
    if rc != 0:
        return None, "ompi_info failed"
    for line in out.splitlines():
        if "mpi_built_with_cuda_support:value" in line:
            return line.strip().endswith(":true"), line.strip()
    return False, "ompi_info reports no CUDA support parameter"


def check_mpi_device(info: dict, mpiexec: str | None, gpu: bool) -> bool:
    """The CUDA-awareness and device-send checks; True when OpenMPI says it is CUDA-aware."""
    aware, line = ompi_cuda_aware() if shutil.which("mpiexec") else (None, "no mpiexec on PATH")
    if aware is None:
        report("SKIP", "mpi-cuda-aware", line)
    else:
        report(
            "PASS" if aware else "SKIP",
            "mpi-cuda-aware",
            f"{line}" + ("" if aware else ": this OpenMPI was built without CUDA (not --with-cuda)"),
        )
    if not gpu:
        report("SKIP", "mpi-device-send", gpu_checks.NO_GPU)
        return bool(aware)
    if mpiexec is None:
        report("SKIP", "mpi-device-send", "no working mpiexec + mpi4py (see mpi-host-send)")
        return bool(aware)
    if not aware:
        report("SKIP", "mpi-device-send", "OpenMPI is not CUDA-aware here (see mpi-cuda-aware)")
        return False
    ok, why = _send(mpiexec, "gpu", 180)
    if ok:
        report("PASS", "mpi-device-send", "2 ranks on GPU 0: 4 MiB CuPy device buffer arrived intact")
    else:
        report(
            "FAIL",
            "mpi-device-send",
            f"{why}; a --with-cuda OpenMPI must "
            "accept device pointers (check that mpi4py was built against this OpenMPI)",
        )
    return True


# ResNet-50's fp32 gradients: the size the seed's hand analysis reduced (docs/testing.md).
L_RESNET50 = 102_228_384


def _allreduce(mpiexec: str, kind: str, timeout: float) -> tuple[dict | None, str]:
    """(median seconds, busbw, ...) of MPI_Allreduce of L on 2 ranks, or (None, what went wrong)."""
    rc, doc, err = gpu_probe(["allreduce", kind, str(L_RESNET50)], timeout, mpiexec=mpiexec)
    ranks = (doc or {}).get("ranks") or []
    if rc != 0 or len(ranks) != 2 or not all(r.get("ok") for r in ranks):
        errors = [r["error"] for r in ranks if r.get("error")] or [
            f"rank {r['rank']} got a wrong sum" for r in ranks if r.get("ok") is False
        ]
        return None, f"rc={rc}: " + ("; ".join(errors) or last_line(err) or "no result")
    times = ranks[0]["times"]
    median, nbytes, p = statistics.median(times), ranks[0]["bytes"], len(ranks)
    busbw = 2 * nbytes * (p - 1) / p / median  # nccl-tests' bus bandwidth
    return {"median": median, "min": min(times), "max": max(times), "busbw": busbw, "bytes": nbytes,
            "reps": len(times)}, ""


def _allreduce_detail(res: dict, where: str) -> str:
    return (f"2 ranks, {res['bytes']:,} B of float32 in {where}: median {res['median'] * 1e3:.2f} ms "
            f"(min {res['min'] * 1e3:.2f}, max {res['max'] * 1e3:.2f}, {res['reps']} reps), "
            f"busbw {res['busbw'] / 1e9:.2f} GB/s, sum right")


def check_mpi_allreduce(mpiexec: str | None, gpu: bool, aware: bool) -> None:
    """The MPI ceilings at ResNet-50's L on this machine: host buffers, then device buffers."""
    host = None
    if mpiexec is None:
        report("SKIP", "mpi-allreduce-host", "no working mpiexec + mpi4py (see mpi-host-send)")
    else:
        host, why = _allreduce(mpiexec, "cpu", 120)
        if host:
            report("PASS", "mpi-allreduce-host", _allreduce_detail(host, "host memory"))
        else:
            report("FAIL", "mpi-allreduce-host", why)
    if not gpu:
        report("SKIP", "mpi-allreduce-device", gpu_checks.NO_GPU)
    elif mpiexec is None or not aware:
        report("SKIP", "mpi-allreduce-device", "needs a working mpiexec + mpi4py over a CUDA-aware OpenMPI "
                                               "(see mpi-host-send, mpi-cuda-aware)")
    else:
        dev, why = _allreduce(mpiexec, "gpu", 180)
        if dev is None:
            report("FAIL", "mpi-allreduce-device", why)
            return
        ratio = f"; {dev['median'] / host['median']:.2f}x the host-memory time" if host else ""
        report("PASS", "mpi-allreduce-device", _allreduce_detail(dev, "device memory (one GPU)") + ratio)
