# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark report as one dict, from the documents of a sweep: scaling efficiency across runs
(weak or strong: the same samples/s arithmetic) and each run's figures; ChainerMN's and PyTorch's
side by side with ``mnc_frameworks``. Pure functions, no Ansible, no I/O.

``mnc_verdict`` judges this dict, ``mnc_bench_markdown`` renders it.
"""

from __future__ import annotations

from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench import PHASES, REPORT_SCHEMA, SCHEMA
from ansible_collections.mncluster.core.plugins.module_utils.mnc_frameworks import (
    compare_frameworks,
    framework_of,
)


# -- scaling --------------------------------------------------------------------
def scaling(points):
    """Weak-scaling efficiency of (processes, samples/s) points against the smallest p.

    efficiency(p) = (T(p) / p) / (T(b) / b) for the baseline b (p = 1 when it was
    run); the ideal throughput at p is T(b) p / b.
    """
    pts = sorted((int(p), float(t)) for p, t in points)
    if not pts:
        return []
    base_p, base_t = pts[0]
    per_proc = base_t / base_p
    rows = []
    for p, t in pts:
        ideal = per_proc * p
        rows.append({"processes": p, "samples_per_s": t, "ideal_samples_per_s": ideal,
                     "speedup": t / base_t if base_t else None,
                     "efficiency": t / ideal if ideal else None, "baseline_processes": base_p})
    return rows


def nearest_sweep_row(sweep, nbytes):
    """The raw-allreduce sweep row whose size is nearest to ``nbytes`` (at or above if possible)."""
    if not sweep:
        return None
    above = [r for r in sweep if r["bytes"] >= nbytes]
    if above:
        return min(above, key=lambda r: r["bytes"])
    return max(sweep, key=lambda r: r["bytes"])


def _p2p(doc, kind):
    for row in doc.get("p2p") or []:
        if row.get("kind") == kind:
            return row.get("bandwidth")
    return None


def _quartiles(values):
    """(median, q1, q3, iqr) with numpy's default (linear) interpolation; Nones when empty."""
    xs = sorted(float(v) for v in values)
    if not xs:
        return {"median": None, "q1": None, "q3": None, "iqr": None}

    def q(frac):
        pos = (len(xs) - 1) * frac
        lo = int(pos)
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    return {"median": q(0.5), "q1": q(0.25), "q3": q(0.75), "iqr": q(0.75) - q(0.25)}


def round_throughput(doc):
    """samples/s of each plain round (the spread the single throughput hides)."""
    cfg, rounds = doc["config"], doc["instrumentation"].get("rounds") or []
    per_iter = cfg.get("batchsize", 0) * cfg["processes"]
    return [per_iter * r["iterations"] / r["plain_wall"] for r in rounds if r.get("plain_wall")]


def _correctness(doc):
    """Whether the run proved its gradients averaged: the reduced gradient is the ranks' mean,
    and the ranks' parameters agree (``correct``: both, where recorded)."""
    c = doc.get("correctness") or {}
    g = c.get("gradients") or {}
    checks = [x for x in (c.get("agree"), g.get("averaged")) if x is not None]
    return {"correct": None if not checks else all(checks),
            "parameters_agree": c.get("agree"), "gradients_averaged": g.get("averaged"),
            "gradient_error": g.get("relative_error"), "gradient_check_distinguishes": g.get("distinguishes")}


def build_report(documents, meta=None):
    """One report dict from the benchmark documents of a sweep.

    With documents of both frameworks (``benchmark_framework: both``) the report is ChainerMN's,
    with PyTorch's own report under ``frameworks`` and the two side by side per p under
    ``framework_comparison``.
    """
    groups = {}
    for d in documents:
        groups.setdefault(framework_of(d), []).append(d)
    if len(groups) < 2:
        return _build_one(documents, meta)
    primary = "chainer" if "chainer" in groups else sorted(groups)[0]
    report = _build_one(groups[primary], meta)
    report["frameworks"] = {name: _build_one(docs, meta) for name, docs in sorted(groups.items())
                            if name != primary}
    report["framework_comparison"] = compare_frameworks(
        {primary: report, **report["frameworks"]})
    return report


def _build_one(documents, meta=None):
    docs = sorted(documents, key=lambda d: d["config"]["processes"])
    for d in docs:
        if d.get("schema") != SCHEMA:
            raise ValueError("document schema {!r} is not {!r}".format(d.get("schema"), SCHEMA))
    eff = {r["processes"]: r for r in scaling(
        [(d["config"]["processes"], d["throughput"]["samples_per_s"]) for d in docs])}
    runs = []
    for d in docs:
        p = d["config"]["processes"]
        ar = d["allreduce"]
        raw = nearest_sweep_row(d.get("raw_allreduce"), ar["bytes"])
        ceiling = ar.get("ceiling") or {}
        ov = d.get("overlap") or {}
        env = d["environment"]
        runs.append({
            "processes": p,
            "nodes": env.get("nodes"),
            "samples_per_s": d["throughput"]["samples_per_s"],
            "samples_per_s_rounds": _quartiles(round_throughput(d)),
            "ideal_samples_per_s": eff[p]["ideal_samples_per_s"],
            "speedup": eff[p]["speedup"],
            "efficiency": eff[p]["efficiency"],
            "overhead_percent": d["instrumentation"]["overhead_percent"],
            "estimated_overhead_percent": d["instrumentation"].get("estimated_overhead_percent"),
            "phases_median": {k: d["phases"][k]["median"] for k in (*PHASES, "total")},
            "phases_mean": {k: d["phases"][k]["mean"] for k in (*PHASES, "total")},
            "phases_p95": {k: d["phases"][k]["p95"] for k in (*PHASES, "total")},
            "phases_iqr": {k: d["phases"][k].get("iqr") for k in (*PHASES, "total")},
            "breakdown_mean": {k: d["breakdown"][k]["mean"]
                               for k in (*PHASES, "total")},
            "imbalance_median": d["imbalance"]["median"],
            "data_loading_median": (d.get("data_loading") or {}).get("median"),
            "data_loading_iqr": (d.get("data_loading") or {}).get("iqr"),
            "allreduce_bytes": ar["bytes"],
            "allreduce_time": ar["time"],
            "allreduce_exposed_only": ar.get("exposed_only", False),
            "allreduce_own_duration": ar.get("own_duration"),
            "busbw_own_duration": ar.get("busbw_own_duration"),
            "algbw": ar["algbw"],
            "busbw": ar["busbw"],
            "ceiling_path": ceiling.get("path"),
            "ceiling_label": ceiling.get("label"),
            "ceiling_time": ceiling.get("time"),
            "ceiling_busbw": ceiling.get("busbw"),
            "busbw_percent_of_ceiling": ar.get("busbw_percent_of_ceiling"),
            "framework_overhead": ar.get("framework_overhead"),
            "per_array_cost": ar.get("per_array_cost"),
            "ceilings_at_L": [dict({k: c.get(k) for k in ("path", "layout", "label", "arrays", "repetitions",
                                                           "time", "busbw")},
                                   iqr=(c.get("spread") or {}).get("iqr"))
                              for c in (d.get("ceilings") or {}).get("rows", [])],
            "raw_allreduce_bytes": raw["bytes"] if raw else None,
            "raw_allreduce_busbw": raw["busbw"] if raw else None,
            "raw_allreduce_peak_busbw": max((r["busbw"] for r in d.get("raw_allreduce") or []
                                             if r["busbw"] is not None), default=None),
            "p2p_inter_node": _p2p(d, "inter-node"),
            "p2p_intra_node": _p2p(d, "intra-node"),
            "overlap": dict({k: ov.get(k) for k in ("perfect_overlap_step", "measured_step", "could_gain",
                                                     "hidden")},
                            allreduce_own=(ov.get("allreduce_own") or {}).get("median")),
            "overlapped_percent": (ov.get("ddp") or {}).get("overlapped_percent"),
            "framework": framework_of(d),
            **_correctness(d),
            "learning": d.get("learning"),
            "mpi_yield_when_idle": env.get("mpi_yield_when_idle"),
            "launcher": (d.get("launch") or {}).get("launcher"),
            "job": env.get("scheduler"),
            "oversubscribed": env.get("oversubscribed") or [],
            "shared_machines": env.get("shared_machines") or [],
        })
    first = docs[0] if docs else {}
    return {
        "schema": REPORT_SCHEMA,
        "meta": dict(meta or {}),
        "config": {k: v for k, v in first.get("config", {}).items() if k != "processes"},
        "framework": framework_of(first) if first else None,
        "environment": {k: first.get("environment", {}).get(k) for k in
                        ("framework", "torch", "distributed", "chainer", "numpy", "cupy", "mpi4py",
                         "mpi_library", "python", "device",
                         "cuda_aware_mpi", "transport", "network_pinning", "nccl_version", "nccl",
                         "cudnn_enabled")},
        "gradient": first.get("gradient"),
        "baseline_processes": runs[0]["processes"] if runs else None,
        "runs": runs,
        "documents": docs,
    }
