"""The CPU readings scripts/scale-bench.sh takes around a run, as scripts/scale_bench.py reads them.

  controller CPU   user + system seconds of ansible-runner, ansible-playbook
                   and the processes they waited for (bash's `times` in the
                   subshell that ran them)
  node CPU         each node's container's CPU seconds during the run (its
                   cgroup's counter before and after): the table shows the mean
                   over the nodes and the busiest one, so work that grows with
                   N on every node, or on one (a launcher), shows there

Only the standard library.
"""

from __future__ import annotations

import re


def controller_cpu(text: str) -> float:
    """bash's `times` (the shell's own line, then its children's: "0m1.500s 0m0.250s")
    -> the children's user + system seconds."""
    lines = [x.split() for x in text.splitlines() if x.strip()]
    if len(lines) != 2 or any(len(x) != 2 for x in lines):
        raise ValueError(f"not the output of bash's times: {text!r}")
    total = 0.0
    for field in lines[1]:
        m = re.fullmatch(r"(\d+)m(\d+(?:\.\d+)?)s", field)
        if not m:
            raise ValueError(f"not the output of bash's times: {text!r}")
        total += int(m.group(1)) * 60 + float(m.group(2))
    return round(total, 2)


def node_cpu(before: str, after: str) -> dict[str, float]:
    """Two readings of "name seconds" lines -> each node's CPU seconds in between
    (a node in one reading only, or whose counter went back -- restarted -- is left out)."""
    def read(text):
        out = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = float(parts[1])
        return out
    a, b = read(before), read(after)
    return {h: round(b[h] - a[h], 2) for h in sorted(a.keys() & b.keys()) if b[h] >= a[h]}


def cpu_floor(r: dict) -> float | None:
    """The shortest wall time the host could give the run: all its CPU seconds (the
    controller's and every node's) over the host's CPUs. A wall time near it means the
    run waited for the host's CPUs, not for anything the code does in sequence."""
    nodes, ctl, cpus = r.get("node_cpu_s"), r.get("controller_cpu_s"), r.get("host_cpus")
    if not nodes or ctl is None or not cpus:
        return None
    return (ctl + sum(nodes.values())) / cpus


def node_cpu_mean(r: dict) -> float | None:
    nodes = r.get("node_cpu_s")
    return sum(nodes.values()) / len(nodes) if nodes else None

