"""A verify table row and what a command's run says when it gave nothing to judge: shared by
the judging modules of verify (mnc_verify, mnc_verify_mpi, mnc_verify_gpu, mnc_verify_gpu_cluster,
mnc_verify_gpu_health, mnc_verify_nccl, mnc_verify_render). No Ansible imports."""

from __future__ import annotations

import re

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


def row(check, subject, status, detail):
    return {"check": check, "subject": subject, "status": status, "detail": detail}


def clip(text: str, width: int = 300) -> str:
    """One line of at most ``width`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 3] + "..."


def failed_run(run: dict | None) -> str | None:
    """Why a command gave nothing to judge (None: it ran and exited 0)."""
    if run is None:
        return "not run"
    if run.get("skipped_reason"):
        return run["skipped_reason"]
    if run.get("rc") in (124, 137):
        return "timed out"
    if run.get("rc") not in (0, None):
        said = clip(run.get("stderr") or run.get("stdout") or run.get("msg") or "", 200)
        return f"exited {run.get('rc')}" + (f": {said}" if said else "")
    return None


def not_run(check: str, subject: str, run: dict | None) -> list[dict] | None:
    """The row of a run that gave nothing to judge (never run, not applicable, skipped), else None."""
    if run is None:
        return [row(check, subject, FAIL, "not run")]
    if run.get("not_applicable"):
        return [row(check, subject, SKIP, run["not_applicable"])]
    if run.get("skipped_reason"):
        return [row(check, subject, FAIL, f"not run: {run['skipped_reason']}")]
    return None


def launch_failure(run: dict) -> str:
    """How a launch ended that gave no result: timed out or mpiexec's exit code, with what it said."""
    what = "timed out" if run.get("rc") in (124, 137) else f"mpiexec exited {run.get('rc')}"
    said = gist(run)
    return what + (f": {said}" if said else "")


def gist(run: dict, width: int = 300) -> str:
    """What a failed run said: its meaningful lines (no blank or ----- box lines), joined, clipped."""
    text = run.get("stderr") or run.get("stdout") or ""
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and set(line) != {"-"}]
    # "[node:pid] ..." lines are launcher warnings; the explanation is OpenMPI's message box.
    plain = [line for line in lines if not re.match(r"\[[^\]]+:\d+\] ", line)]
    return clip(" ".join(plain or lines), width) if lines else ""
