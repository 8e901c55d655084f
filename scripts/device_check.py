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

Only the standard library is imported here; everything else is imported by
the probes, so a missing or broken package is that check's SKIP or FAIL. The
GPU probes (cuda, cudnn-*, nccl-allreduce, mpi-*-send) are
module_utils/mnc_gpu_probe.py, the same program roles/verify runs on the
nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS: list[tuple[str, str, str]] = []


def report(status: str, check: str, detail: str) -> None:
    if status != "SKIP" and DEADLINE.left() <= 0 and "timed out" in str(detail):
        # Checks that start after the overall deadline get no time at all.
        status, detail = "SKIP", f"not run or cut off: the {DEADLINE.total:.0f}s deadline was reached"
    detail = " ".join(str(detail).split())  # one line
    RESULTS.append((status, check, detail))
    print(f"{status} {check}: {detail}", flush=True)


class Deadline:
    def __init__(self, seconds: float):
        self.total = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


DEADLINE = Deadline(540)


def mpi_env(extra: dict | None = None) -> dict:
    # Root in a container is normal here; one BLAS thread per rank.
    env = dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
        PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe",
        OMP_NUM_THREADS="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.update(extra or {})
    return env


def run(argv: list[str], timeout: float, env: dict | None = None, cwd: Path = ROOT):
    """(rc, stdout, stderr) of argv; rc None when it ran past its time (or the deadline)."""
    if DEADLINE.left() <= 0:
        return None, "", "timed out: no time left"
    limit = max(1.0, min(timeout, DEADLINE.left()))
    try:
        proc = subprocess.run(
            argv, cwd=cwd, env=env or mpi_env(), capture_output=True, text=True, timeout=limit, check=False
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return None, out, f"timed out after {limit:.0f}s"
    except OSError as exc:
        return 127, "", str(exc)
    return proc.returncode, proc.stdout, proc.stderr


def last_line(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _probe_doc(out: str) -> dict | None:
    for line in (out or "").splitlines():
        if line.startswith("PROBE "):
            return json.loads(line[6:])
    return None


def probe(code: str, timeout: float = 90) -> tuple[int | None, dict | None, str]:
    """Run ``code`` in this Python; it prints one JSON line prefixed 'PROBE '."""
    rc, out, err = run([sys.executable, "-c", code], timeout)
    return rc, _probe_doc(out), err


# The GPU probes are the ones verify runs on the nodes (one implementation).
GPU_PROBE = ROOT / "module_utils" / "mnc_gpu_probe.py"


def gpu_probe(args: list[str], timeout: float = 90, mpiexec: str | None = None):
    """(rc, the probe's JSON document or None, stderr) of module_utils/mnc_gpu_probe.py ``args``."""
    argv = [sys.executable, str(GPU_PROBE), *args]
    if mpiexec:
        argv = [mpiexec, "-n", "2", *argv]
    rc, out, err = run(argv, timeout)
    return rc, _probe_doc(out), err


# --- what is here --------------------------------------------------------------

VERSIONS = r"""
import json, sys, importlib
out = {"python": sys.version.split()[0]}
for name in ("numpy", "cupy", "chainer", "chainermn", "mpi4py"):
    try:
        mod = importlib.import_module(name)
        out[name] = getattr(mod, "__version__", "?")
    except Exception as exc:
        out[name] = None
        out[name + "_error"] = f"{type(exc).__name__}: {exc}"[:300]
print("PROBE " + json.dumps(out))
"""


def gpu_device_nodes() -> list[str]:
    return sorted(p.name for p in Path("/dev").glob("nvidia[0-9]*"))


def check_python() -> dict:
    _rc, info, err = probe(VERSIONS, 120)
    if info is None:
        report("FAIL", "python", f"{sys.executable} could not report its packages: {last_line(err)}")
        return {}
    parts = [f"Python {info['python']} ({sys.executable})"]
    parts += [f"{n} {info[n] or '-'}" for n in ("numpy", "cupy", "chainer", "mpi4py")]
    report("PASS", "python", ", ".join(parts))
    return info


def check_nvidia_smi() -> dict:
    smi = shutil.which("nvidia-smi")
    nodes = gpu_device_nodes()
    if smi is None:
        why = "no nvidia-smi on PATH" + (
            f" (but {', '.join(nodes)} exist)" if nodes else " and no /dev/nvidia*"
        )
        report("SKIP", "nvidia-smi", f"{why}: no NVIDIA driver here")
        return {"gpus": 0, "driver": False}
    rc, out, err = run(
        [smi, "--query-gpu=index,name,driver_version,memory.total,pci.bus_id", "--format=csv,noheader"], 60
    )
    if rc != 0:
        report(
            "FAIL", "nvidia-smi", f"nvidia-smi failed (rc={rc}): {last_line(err or out)}; check the driver"
        )
        return {"gpus": 0, "driver": True}
    gpus = [line.strip() for line in out.splitlines() if line.strip()]
    if not gpus:
        report("SKIP", "nvidia-smi", "the driver lists no GPU")
        return {"gpus": 0, "driver": True}
    report("PASS", "nvidia-smi", f"{len(gpus)} GPU(s): " + "; ".join(gpus))
    return {"gpus": len(gpus), "driver": True}


# --- CUDA, cuDNN, NCCL through CuPy -----------------------------------------------


def _cuda_version(code: int) -> str:
    return f"{code // 1000}.{code % 1000 // 10}" if code else "?"


NO_GPU = "no usable CUDA device (see cuda)"


def check_cuda(info: dict, smi: dict) -> bool:
    """True when CuPy has a usable GPU (the later GPU checks run); NO_GPU says why not."""
    global NO_GPU
    if not info.get("cupy"):
        NO_GPU = f"CuPy not importable (see cuda){'' if smi.get('gpus') else '; no GPU here'}"
        report("SKIP", "cuda", f"CuPy not importable: {info.get('cupy_error', 'not installed')}")
        return False
    rc, res, err = gpu_probe(["cuda"], 120)
    if res is None:
        report("FAIL", "cuda", f"the CuPy probe died (rc={rc}): {last_line(err)}")
        return False
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1")
    gpu_expected = not hidden and (smi.get("gpus", 0) > 0 or bool(gpu_device_nodes()))
    if "error" in res or not res.get("count"):
        why = res.get("error", "CuPy sees 0 devices")
        if gpu_expected:
            report(
                "FAIL",
                "cuda",
                f"the driver shows a GPU but CUDA from CuPy {res.get('cupy')} cannot use it: "
                f"{why}; check the driver version against the CUDA runtime and /dev/nvidia* permissions",
            )
        else:
            where = "CUDA_VISIBLE_DEVICES hides every GPU" if hidden else "no GPU on this machine"
            NO_GPU = f"{where} (see cuda)"
            report("SKIP", "cuda", f"no CUDA device ({where}): {why}")
        return False
    devs = "; ".join(f"{d['name']} (cc {d['cc']}, {d['mem_gib']} GiB)" for d in res["devices"])
    detail = (
        f"{res['count']} device(s): {devs}; driver CUDA {_cuda_version(res['driver'])}, "
        f"runtime {_cuda_version(res['runtime'])}, CuPy {res['cupy']}"
    )
    if smi.get("gpus") and smi["gpus"] != res["count"]:
        report("FAIL", "cuda", f"{detail}; nvidia-smi lists {smi['gpus']}: check CUDA_VISIBLE_DEVICES")
        return False
    if not res.get("kernel"):
        report("FAIL", "cuda", f"{detail}; but a CuPy kernel returned a wrong sum")
        return False
    report("PASS", "cuda", detail + "; a kernel ran")
    return True


def _major(version) -> int:
    try:
        return int(str(version).split(".")[0])
    except ValueError:
        return 0


def chainer_blocker(info: dict) -> str | None:
    """Why Chainer 7 cannot run here, when it is known before trying (else None)."""
    if not info.get("chainer"):
        return f"Chainer not importable: {info.get('chainer_error', 'not installed')}"
    py = tuple(int(x) for x in info["python"].split(".")[:2])
    if _major(info["chainer"]) != 7:
        return None
    why = []
    if info.get("numpy") and _major(info["numpy"]) >= 2:
        why.append(f"fails on NumPy {info['numpy']} (np.sctypes is gone)")
    if py >= (3, 12):
        why.append(f"cannot run on Python {info['python']} (numpy.distutils is gone)")
    if info.get("cupy") and _major(info["cupy"]) >= 14:
        why.append(f"cannot use CuPy {info['cupy']} (no cupy.cudnn)")
    return f"Chainer {info['chainer']} " + "; ".join(why) if why else None


def check_cudnn(info: dict, gpu: bool) -> None:
    if not gpu:
        report("SKIP", "cudnn-cupy", NO_GPU)
        report("SKIP", "cudnn-chainer", NO_GPU)
        return
    if _major(info["cupy"]) >= 14:
        report(
            "SKIP",
            "cudnn-cupy",
            f"CuPy {info['cupy']} has no cuDNN support (dropped in CuPy 14); "
            "Chainer needs CuPy 13 with cuDNN 8 for it",
        )
    else:
        rc, res, err = gpu_probe(["cudnn"], 90)
        if res is None or "error" in res:
            why = res["error"] if res else f"probe died (rc={rc}): {last_line(err)}"
            report(
                "FAIL",
                "cudnn-cupy",
                f"CuPy {info['cupy']} cannot load cuDNN: {why}; CuPy 13 loads "
                "libcudnn.so.8 (cuDNN 8.8+): install cuDNN 8 where the loader finds it",
            )
        else:
            v = res["version"]
            report(
                "PASS",
                "cudnn-cupy",
                f"CuPy {info['cupy']} loads cuDNN {v // 1000}.{v % 1000 // 100}.{v % 100} ({v})",
            )
    blocker = chainer_blocker(info)
    if blocker:
        report("SKIP", "cudnn-chainer", blocker)
        return
    rc, res, err = gpu_probe(["chainer"], 120)
    if res is None or "error" in res:
        why = res["error"] if res else f"probe died (rc={rc}): {last_line(err)}"
        report("FAIL", "cudnn-chainer", f"Chainer {info['chainer']} does not import: {why}")
    elif not res["available"]:
        report(
            "FAIL",
            "cudnn-chainer",
            f"Chainer {res['chainer']} cannot use CuPy {info['cupy']}: {res.get('why')}",
        )
    elif not res["cudnn_enabled"]:
        report(
            "FAIL",
            "cudnn-chainer",
            f"Chainer {res['chainer']}: cudnn_enabled is False: it would train "
            "without cuDNN; CuPy must load cuDNN (see cudnn-cupy)",
        )
    else:
        report("PASS", "cudnn-chainer", f"Chainer {res['chainer']}: cuda available, cudnn_enabled True")


def check_nccl(gpu: bool) -> None:
    if not gpu:
        report("SKIP", "nccl-allreduce", NO_GPU)
        return
    rc, doc, err = gpu_probe(["nccl-allreduce"], 120)
    res = doc["ranks"][0] if doc and doc.get("ranks") else None
    if res is not None and "missing" in res:
        report(
            "SKIP",
            "nccl-allreduce",
            f"CuPy finds no NCCL library (libnccl.so.2): {res['missing']}; "
            "install NCCL 2 (nvidia-nccl-cu<major> or libnccl2) to check it",
        )
        return
    if res is None or "error" in res:
        why = res["error"] if res else f"probe died (rc={rc}): {last_line(err)}"
        report("FAIL", "nccl-allreduce", f"CuPy's NCCL binding: {why}; install NCCL 2 (libnccl.so.2)")
    elif not res["ok"]:
        report("FAIL", "nccl-allreduce", "a single-rank allreduce returned a wrong result")
    else:
        v = res["version"]
        report(
            "PASS",
            "nccl-allreduce",
            f"NCCL {v // 10000}.{v % 10000 // 100}.{v % 100}: single-rank "
            f"allreduce of {res['bytes'] >> 20} MiB on the device is right",
        )


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
        report("SKIP", "mpi-device-send", NO_GPU)
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
        report("SKIP", "mpi-allreduce-device", NO_GPU)
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
    blocker = chainer_blocker(info)
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
            report("SKIP", name, NO_GPU)
        else:
            _train(name, args, mpiexec, 180)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--deadline", type=float, default=540, help="seconds for all checks (default: 540)")
    p.add_argument("--no-train", action="store_true", help="leave out the python -m train runs")
    args = p.parse_args(argv)
    global DEADLINE
    DEADLINE = Deadline(args.deadline)
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
            report("SKIP", name, "--no-train")
    else:
        check_train(info, mpiexec, gpu)
    counts = {s: sum(1 for r in RESULTS if r[0] == s) for s in ("PASS", "FAIL", "SKIP")}
    print(
        f"# {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP "
        f"in {time.monotonic() - t0:.0f}s",
        flush=True,
    )
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
