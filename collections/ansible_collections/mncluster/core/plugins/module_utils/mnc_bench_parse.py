# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a benchmark run's output says: rank 0's document, whether the time limit stopped the run,
which rank failed and what it wrote last. Pure functions, no Ansible, no I/O.
"""

from __future__ import annotations

import re

from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench import JSON_PREFIX, SCHEMA


def timed_out(rc, output, elapsed, timeout):
    """Whether a failed run was stopped by the time limit rather than by a rank."""
    if rc in (124, 137):  # the coreutils backstop fired
        return True
    if "time limit for job execution has been reached" in output:
        return True
    if "DUE TO TIME LIMIT" in output:  # Slurm's --time
        return True
    return bool(timeout) and rc != 0 and elapsed >= timeout


def parse_document(stdout):
    """The benchmark document from rank 0's ``MNCBENCH_JSON`` line."""
    import json

    for line in reversed(stdout.splitlines()):
        idx = line.find(JSON_PREFIX)
        if idx >= 0:
            doc = json.loads(line[idx + len(JSON_PREFIX):])
            if doc.get("schema") != SCHEMA:
                raise ValueError("document schema is {!r}, expected {!r}".format(doc.get("schema"), SCHEMA))
            return doc
    raise ValueError(f"no {JSON_PREFIX.strip()!r} line in the output")


_RANK_PATTERNS = (
    re.compile(r"^\[rank (\d+)\]"),
    re.compile(r"process rank (\d+) with PID"),
    re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]"),  # OpenMPI 4
    re.compile(r"Process name:\s*\[\S*@\d+,(\d+)\]"),  # OpenMPI 5 (PRRTE)
    re.compile(r"^\[\d+,(\d+)\]<stderr>"),
    re.compile(r"^srun: error: \S+: tasks? (\d+)"),  # Slurm: "task 3: Exited with exit code 1"
)


def failing_rank(stderr):
    """The first rank that the output blames, or None."""
    for line in stderr.splitlines():
        for pat in _RANK_PATTERNS:
            m = pat.search(line.strip())
            if m:
                return int(m.group(1))
    return None


def stderr_tail(stderr, rank=None, lines=25):
    """The last lines a rank wrote (``[rank N]`` prefix), else the last lines of all output."""
    all_lines = stderr.rstrip().splitlines()
    if rank is not None:
        mine = [ln for ln in all_lines if ln.startswith(f"[rank {rank}]")]
        if mine:
            return "\n".join(mine[-lines:])
    return "\n".join(all_lines[-lines:])
