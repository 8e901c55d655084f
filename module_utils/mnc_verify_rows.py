"""A verify table row and what a command's run says when it gave nothing to judge: shared by
the judging modules of the GPU checks (mnc_verify_gpu_health, mnc_verify_nccl). No Ansible
imports."""

from __future__ import annotations

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
