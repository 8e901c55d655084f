# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's Chrome trace: every run's ranks, phase by phase. Pure function, no Ansible, no I/O."""

from __future__ import annotations

from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench import REPORT_SCHEMA


def chrome_trace(documents):
    """One Chrome trace (chrome://tracing, Perfetto) of every run's ranks, one row per rank.

    Each process is "p=<N> rank <r> (<host>)"; times are microseconds since the run's own
    common barrier, so runs overlay each other on the time axis and stack as rows.
    """
    events = []
    for d in sorted(documents, key=lambda d: d["config"]["processes"]):
        tl = d.get("timeline")
        if not tl:
            continue
        p = d["config"]["processes"]
        for rank, stamps in enumerate(tl["stamps"]):
            pid = p * 1000 + rank
            events.append({"name": "process_name", "ph": "M", "pid": pid,
                           "args": {"name": f"p={p} rank {rank} ({tl['hosts'][rank]})"}})
            events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})
            for i, row in enumerate(stamps):
                for k, phase in enumerate(tl["phases"]):
                    events.append({"name": phase, "cat": "phase", "ph": "X", "pid": pid, "tid": 0,
                                   "ts": row[k] * 1e6, "dur": (row[k + 1] - row[k]) * 1e6,
                                   "args": {"iteration": i, "processes": p}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"schema": REPORT_SCHEMA, "clock": "seconds since each run's common barrier"}}
