"""scripts/device_check.py's harness: each check's subprocess, the overall deadline, the result lines.

Each check runs its probe in a subprocess with a timeout (a CUDA crash or
hang costs that check only), all within one overall deadline (DEADLINE, set
by device_check.main from --deadline); each result is one line,

    PASS|FAIL|SKIP <check>: <detail>

printed as it comes and kept in RESULTS. Only the standard library.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
GPU_PROBE = ROOT / "roles" / "verify" / "files" / "mnc_gpu_probe.py"


def gpu_probe(args: list[str], timeout: float = 90, mpiexec: str | None = None):
    """(rc, the probe's JSON document or None, stderr) of roles/verify/files/mnc_gpu_probe.py ``args``."""
    argv = [sys.executable, str(GPU_PROBE), *args]
    if mpiexec:
        argv = [mpiexec, "-n", "2", *argv]
    rc, out, err = run(argv, timeout)
    return rc, _probe_doc(out), err
