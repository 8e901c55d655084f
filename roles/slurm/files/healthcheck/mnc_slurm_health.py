"""The Slurm health check's rules: what a failing or passing check does to the node.

roles/slurm installs ``mncluster-healthcheck`` as slurm.conf's ``HealthCheckProgram``; slurmd
runs it on every node every ``HealthCheckInterval``. It runs the checks that have meaning on
the node (the shared directories mounted, the MPI prefix present; on GPU nodes the GPUs answer,
persistence mode, no uncorrectable ECC error or pending remapping, the nvidia-uvm nodes, no new
Xid since the last pass) and then, by :func:`decide`:

* a check failed: the node is drained with ``mncluster: <the failing check>`` as its reason
  (what ``sinfo -R`` shows), unless someone else drained it (their reason is kept);
* every check passed: the node is resumed only if its reason starts with ``mncluster:`` (a
  drain of ours); a node an administrator drained stays drained.

The DCGM prolog (``mncluster-dcgm-prolog``, slurm.conf's ``Prolog`` with ``slurm_dcgm_prolog``)
drains by :func:`decide_dcgm` with ``mncluster dcgm: <the failing DCGM test>``: a prefix the health
check's :func:`ours` does not take for its own, so a pass of the health check (which runs no DCGM
diagnostic) never resumes a node DCGM failed; an administrator resumes it.

Pure Python, no Ansible imports (tests/unit/test_slurm_health.py).
"""

from __future__ import annotations

import re

PREFIX = "mncluster:"
# The DCGM prolog's drains: not PREFIX, so that the health check keeps them (see ours()).
DCGM_PREFIX = "mncluster dcgm:"
# slurmctld keeps a reason of at most this many characters readable in sinfo -R.
REASON_WIDTH = 200


def parse_node(text: str) -> dict:
    """``scontrol show node <name> --oneliner`` -> ``{"name", "state", "flags", "reason"}``:
    ``flags`` the state's words (``IDLE+DRAIN`` -> {"IDLE", "DRAIN"}); ``reason`` without the
    ``[user@time]`` slurmctld appends, None when the node has none."""
    line = " ".join((text or "").split("\n")).strip()
    name = re.search(r"(?:^|\s)NodeName=(\S+)", line)
    state = re.search(r"(?:^|\s)State=(\S+)", line)
    if not name or not state:
        raise ValueError(f"no NodeName= and State= in {line[:200]!r}")
    reason = None
    m = re.search(r"(?:^|\s)Reason=(.*?)(?:\s\[[^\]]*@[^\]]*\])?(?=\s+\w+=|$)", line)
    if m and m.group(1).strip() not in ("", "(null)"):
        reason = m.group(1).strip()
    return {
        "name": name.group(1),
        "state": state.group(1),
        "flags": set(state.group(1).split("+")),
        "reason": reason,
    }


def reason_text(failures: list[str], prefix: str = PREFIX) -> str:
    """``mncluster: <first failure>[; <more>]`` (or another prefix), clipped to what sinfo -R shows."""
    text = f"{prefix} " + "; ".join(failures)
    text = " ".join(text.replace('"', "'").split())
    return text if len(text) <= REASON_WIDTH else text[: REASON_WIDTH - 3] + "..."


def ours(reason: str | None) -> bool:
    """A drain of the health check's, which its pass may resume. Not the DCGM prolog's
    (``mncluster dcgm:``): a pass of the health check says nothing of what DCGM found."""
    return bool(reason) and reason.startswith(PREFIX)


def decide(node: dict, failures: list[str]) -> tuple[str, str]:
    """(action, why): ``drain`` (why: the reason to set), ``resume``, or ``keep`` (why: what stays)."""
    drained = _drained(node)
    if failures:
        reason = reason_text(failures)
        if drained and not ours(node["reason"]):
            return "keep", f"drained by someone else ({node['reason'] or 'no reason'}): left as it is"
        if drained and node["reason"] == reason:
            return "keep", "already drained for this"
        return "drain", reason
    if drained and ours(node["reason"]):
        return "resume", f"every check passes again (was: {node['reason']})"
    if drained:
        return "keep", f"drained by someone else ({node['reason'] or 'no reason'}): left as it is"
    return "keep", "every check passes"


def _drained(node: dict) -> bool:
    return bool({"DRAIN", "DRAINED", "DRAINING"} & node["flags"])


def decide_dcgm(node: dict, failures: list[str]) -> tuple[str, str]:
    """The DCGM prolog found ``failures`` (not empty): (``drain``, the reason
    ``mncluster dcgm: ...``) or (``keep``, why). An administrator's drain keeps its reason; a drain
    of the health check's is replaced, so that its next pass cannot resume the node."""
    reason = reason_text(failures, DCGM_PREFIX)
    if _drained(node) and node["reason"] == reason:
        return "keep", "already drained for this"
    if _drained(node) and not (ours(node["reason"]) or (node["reason"] or "").startswith(DCGM_PREFIX)):
        return "keep", f"drained by someone else ({node['reason'] or 'no reason'}): left as it is"
    return "drain", reason


def shared_dir_failures(dirs: list[str], mounted: dict, exported: set) -> list[str]:
    """A shared directory must be a mount point here, or one this node exports (the NFS server
    of roles/shared_fs holds the directory itself)."""
    return [f"shared directory {d} not mounted" for d in dirs if not mounted.get(d) and d not in exported]


def exported_dirs(exports_text: str) -> set:
    """The directories an exports(5) file lists (first field of each line)."""
    out = set()
    for line in (exports_text or "").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.add(line.split()[0].strip('"'))
    return out


def new_xids(seen: dict, boot_id: str, count: int) -> int:
    """How many of the ``count`` Xid lines of this boot the last pass had not seen (``seen``:
    ``{"boot_id", "count"}`` the last pass recorded)."""
    if seen.get("boot_id") != boot_id:
        return count
    return max(0, count - int(seen.get("count") or 0))
