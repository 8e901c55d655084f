"""scripts/device_check.py's checks of what is here and of the GPU through CuPy.

python, nvidia-smi, cuda, cudnn-cupy, cudnn-chainer, nccl-allreduce (see
device_check.py). check_cuda sets NO_GPU, the reason every later GPU check
gives for its SKIP when CuPy has no usable GPU. Only the standard library;
the GPU probes are roles/verify/files/mnc_gpu_probe.py's.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from device_check_harness import gpu_probe, last_line, probe, report, run

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

