# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ChainerMN and PyTorch DDP side by side: which framework made a benchmark document, and the two
frameworks' runs compared per process count (``benchmark_framework: both``).

Pure functions over the reports ``mnc_bench_report.build_report`` makes; no Ansible, no I/O.
"""

from __future__ import annotations


def framework_of(doc):
    """The framework that made a document (documents from before the PyTorch engine are ChainerMN's)."""
    return (doc.get("config") or {}).get("framework") or "chainer"


FRAMEWORK_NAMES = {"chainer": "ChainerMN", "pytorch": "PyTorch DDP"}


def _in_training_busbw(run):
    """(busbw GB/s, what it is over): the allreduce phase's, or where that is only the exposed
    part (DDP, double buffering) the reduction's own duration's."""
    if run.get("busbw") is not None:
        return run["busbw"], "allreduce phase"
    if run.get("busbw_own_duration") is not None:
        return run["busbw_own_duration"], "reduction's own duration"
    return None, None


def compare_frameworks(reports):
    """Per p, each framework's figures side by side: throughput, efficiency, in-training busbw
    against its own ceiling at L and against the host MPI allreduce of L both runs measured."""
    rows = []
    counts = sorted({r["processes"] for rep in reports.values() for r in rep["runs"]})
    for p in counts:
        for name, rep in reports.items():
            run = next((r for r in rep["runs"] if r["processes"] == p), None)
            if run is None:
                continue
            busbw, over = _in_training_busbw(run)
            host = next((c for c in run["ceilings_at_L"]
                         if (c["path"], c["layout"]) == ("host-mpi", "packed")), None)
            rows.append({
                "processes": p, "framework": name, "name": FRAMEWORK_NAMES.get(name, name),
                "samples_per_s": run["samples_per_s"], "efficiency": run["efficiency"],
                "busbw": busbw, "busbw_over": over,
                "ceiling_path": run["ceiling_path"], "ceiling_busbw": run["ceiling_busbw"],
                "percent_of_ceiling": None if busbw is None or not run["ceiling_busbw"] else
                100.0 * busbw / run["ceiling_busbw"],
                "host_mpi_busbw": None if host is None else host["busbw"],
                "percent_of_host_mpi": None if busbw is None or not host or not host["busbw"] else
                100.0 * busbw / host["busbw"],
                "allreduce_exposed": run["allreduce_time"],
                "overlapped_percent": run.get("overlapped_percent"),
            })
    names = list(reports)
    sentences = []
    for p in counts:
        here = {r["framework"]: r for r in rows if r["processes"] == p}
        if len(here) < 2:
            continue
        a, b = here[names[0]], here[names[1]]
        sentences.append("p = {}: {} {:.1f} samples/s, {} {:.1f} ({:.2f}x)".format(
            p, b["name"], b["samples_per_s"], a["name"], a["samples_per_s"],
            b["samples_per_s"] / a["samples_per_s"] if a["samples_per_s"] else float("nan")))
    return {"frameworks": names, "rows": rows, "sentences": sentences,
            "note": "in-training busbw is 2L(p-1)/p over the allreduce phase, or over the reduction's own "
                    "duration where the phase is only its exposed part (PyTorch DDP, double buffering); each "
                    "framework's ceiling is one allreduce of L on its own path, host-mpi the MPI allreduce "
                    "of L both measured"}
