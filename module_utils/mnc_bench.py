# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers for the ChainerMN benchmark modules: no Ansible, no I/O.

* the process-count sweep and hostfile slot checks,
* the mpiexec command line of one benchmark run and parsing its output,
* weak-scaling efficiency across runs,
* the report (one dict, and its Markdown rendering).

The per-run numbers (phase statistics, algbw/busbw) are computed by the
benchmark itself (``train/metrics.py``) and read here from its documents.
"""

from __future__ import annotations

import re

try:  # as a module_utils of an Ansible module
    from ansible.module_utils.mnc_hostfile import parse_hostfile as parse_hostfile
except ImportError:  # imported directly (unit tests)
    from mnc_hostfile import parse_hostfile as parse_hostfile

SCHEMA = "mncluster.benchmark/1"
REPORT_SCHEMA = "mncluster.report/1"
JSON_PREFIX = "MNCBENCH_JSON "
PHASES = ("compute", "wait", "allreduce", "update")
BACKSTOP_S = 60


# -- sweep and slots ----------------------------------------------------------
def process_counts(total_slots):
    """1, then powers of two below ``total_slots``, then ``total_slots`` itself."""
    if total_slots < 1:
        raise ValueError("there must be at least one slot")
    counts, p = [], 1
    while p < total_slots:
        counts.append(p)
        p *= 2
    counts.append(total_slots)
    return counts


def check_process_counts(counts, nodes, slots_per_node, hostfile_hosts=None):
    """None when every count fits the slots, else a message saying what does not."""
    if not counts:
        return "process_counts is empty"
    capacity = nodes * slots_per_node
    bad = [p for p in counts if p < 1]
    if bad:
        return f"process counts must be at least 1, got {bad}"
    too_many = [p for p in counts if p > capacity]
    if too_many:
        listed = ", ".join(str(p) for p in too_many)
        return (f"{listed} processes requested but there are only {capacity} slots "
                f"({nodes} nodes x {slots_per_node} slots per node); nothing was run")
    if hostfile_hosts is not None:
        if len(hostfile_hosts) < nodes:
            return f"the hostfile lists {len(hostfile_hosts)} hosts but nodes is {nodes}; nothing was run"
        short = [(h, s) for h, s in hostfile_hosts[:nodes] if s < slots_per_node]
        if short:
            listed = ", ".join(f"{h} (slots={s})" for h, s in short)
            return f"hostfile gives {listed} fewer than slots_per_node={slots_per_node}; nothing was run"
    return None


# -- one run ------------------------------------------------------------------
def train_argv(python, options, extra_args=()):
    """``python -m train ...`` with a flag per set option (None and False are left out)."""
    argv = [python, "-m", "train"]
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        argv.append(flag) if value is True else argv.extend([flag, str(value)])
    argv.append("--json-stdout")
    argv.extend(extra_args)
    return argv


def mpiexec_argv(mpiexec, processes, slots_per_node, command, hostfile=None, export=(),
                 extra_args=(), timeout=None, timeout_bin=None):
    """The launcher's argv: ``[timeout] mpiexec -n p [-hostfile H] --map-by ppr:s:node ... command``."""
    argv = []
    if timeout and timeout_bin:
        # A backstop for an mpiexec that itself hangs (ssh, a dead node): the job's own
        # limit is MPIEXEC_TIMEOUT (see launcher_env), which takes every rank down.
        argv += [timeout_bin, "--kill-after=30", str(int(timeout) + BACKSTOP_S)]
    argv += [mpiexec, "-n", str(processes)]
    if hostfile:
        argv += ["-hostfile", hostfile]
    argv += ["--map-by", f"ppr:{slots_per_node}:node"]
    for name in export:
        argv += ["-x", name]
    argv += list(extra_args)
    argv += list(command)
    return argv


def launcher_env(timeout):
    """Environment for mpiexec: OpenMPI and MPICH both abort the whole job at MPIEXEC_TIMEOUT."""
    return {"MPIEXEC_TIMEOUT": str(int(timeout))} if timeout else {}


def timed_out(rc, output, elapsed, timeout):
    """Whether a failed run was stopped by the time limit rather than by a rank."""
    if rc in (124, 137):  # the coreutils backstop fired
        return True
    if "time limit for job execution has been reached" in output:
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


def build_report(documents, meta=None):
    """One report dict from the benchmark documents of a sweep."""
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
        runs.append({
            "processes": p,
            "nodes": d["environment"].get("nodes"),
            "samples_per_s": d["throughput"]["samples_per_s"],
            "ideal_samples_per_s": eff[p]["ideal_samples_per_s"],
            "speedup": eff[p]["speedup"],
            "efficiency": eff[p]["efficiency"],
            "overhead_percent": d["instrumentation"]["overhead_percent"],
            "estimated_overhead_percent": d["instrumentation"].get("estimated_overhead_percent"),
            "phases_median": {k: d["phases"][k]["median"] for k in (*PHASES, "total")},
            "phases_mean": {k: d["phases"][k]["mean"] for k in (*PHASES, "total")},
            "phases_p95": {k: d["phases"][k]["p95"] for k in (*PHASES, "total")},
            "breakdown_mean": {k: d["breakdown"][k]["mean"]
                               for k in (*PHASES, "total")},
            "imbalance_median": d["imbalance"]["median"],
            "allreduce_bytes": ar["bytes"],
            "allreduce_time": ar["time"],
            "algbw": ar["algbw"],
            "busbw": ar["busbw"],
            "raw_allreduce_bytes": raw["bytes"] if raw else None,
            "raw_allreduce_busbw": raw["busbw"] if raw else None,
            "raw_allreduce_peak_busbw": max((r["busbw"] for r in d.get("raw_allreduce") or []
                                             if r["busbw"] is not None), default=None),
            "p2p_inter_node": _p2p(d, "inter-node"),
            "p2p_intra_node": _p2p(d, "intra-node"),
        })
    first = docs[0] if docs else {}
    return {
        "schema": REPORT_SCHEMA,
        "meta": dict(meta or {}),
        "config": {k: v for k, v in first.get("config", {}).items() if k != "processes"},
        "environment": {k: first.get("environment", {}).get(k) for k in
                        ("chainer", "numpy", "cupy", "mpi4py", "mpi_library", "python", "device")},
        "gradient": first.get("gradient"),
        "baseline_processes": runs[0]["processes"] if runs else None,
        "runs": runs,
        "documents": docs,
    }


# -- Markdown -----------------------------------------------------------------
def _f(value, fmt="%.2f", none="n/a"):
    return none if value is None else fmt % value


def _ms(seconds):
    return _f(None if seconds is None else seconds * 1e3, "%.2f")


def _table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def render_markdown(report, plots=()):
    """report.md: configuration, then the three tables, then the plots."""
    cfg, grad, runs = report["config"], report.get("gradient") or {}, report["runs"]
    meta, env = report.get("meta", {}), report.get("environment", {})
    lines = ["# ChainerMN scaling report", ""]
    if meta.get("timestamp"):
        where = f" on `{meta['launcher']}`" if meta.get("launcher") else ""
        lines += [f"Run `{meta['timestamp']}`{where}.", ""]
    lines += [
        "Model **{}**, {} samples per process per iteration (weak scaling), communicator **{}**, {}, "
        "{} timed iterations per pass.".format(
            cfg.get("model"), cfg.get("batchsize"), cfg.get("communicator"),
            env.get("device") or "cpu", cfg.get("iterations")),
        "Gradient L = {} bytes ({:.2f} MB) in {} arrays. Chainer {}, {}.".format(
            grad.get("bytes"), (grad.get("bytes") or 0) / 1e6, grad.get("arrays"),
            env.get("chainer"), env.get("mpi_library")),
        "",
        "## Throughput and scaling efficiency",
        "",
        f"Efficiency = throughput / (p x per-process throughput at p = {report.get('baseline_processes')}).",
        "",
        _table(["processes", "nodes", "samples/s", "ideal samples/s", "speedup", "efficiency",
                "timing overhead measured", "timing overhead from barrier cost"],
               [[r["processes"], _f(r["nodes"], "%d"), _f(r["samples_per_s"], "%.1f"),
                 _f(r["ideal_samples_per_s"], "%.1f"), _f(r["speedup"], "%.2fx"),
                 _f(None if r["efficiency"] is None else r["efficiency"] * 100, "%.1f%%"),
                 _f(r["overhead_percent"], "%+.2f%%"), _f(r["estimated_overhead_percent"], "%.2f%%")]
                for r in runs]),
        "",
        "Timing overhead measured: instrumented vs plain iterations, alternating (median over rounds); "
        "on a busy machine this is mostly noise. From barrier cost: two idle barriers and three device "
        "syncs per iteration over the plain iteration time.",
        "",
        "## Where an iteration's time goes",
        "",
        "Milliseconds per iteration: median over iterations of the slowest rank in each phase "
        "(the critical path); wait is the barrier after compute, i.e. load imbalance. Each phase's "
        "slowest rank is taken on its own, so the phases can add up to more than the total, by "
        "about the compute imbalance (slowest minus fastest rank's compute).",
        "",
    ]
    rows = []
    for r in runs:
        med = r["phases_median"]
        rows.append([r["processes"], *(_ms(med[k]) for k in PHASES), _ms(med["total"]),
                     _ms(r["phases_p95"]["total"]), _ms(r["imbalance_median"])])
    lines += [_table(["processes", "compute", "wait", "allreduce", "update", "total", "total p95",
                      "imbalance"], rows), ""]
    lines += [
        "The average rank (mean over iterations and ranks; these add up to the total, and are the "
        "stacked bars of phases.png), with each phase's share:",
        "",
    ]
    rows = []
    for r in runs:
        avg, total = r["breakdown_mean"], r["breakdown_mean"]["total"] or 0
        cells = [r["processes"]]
        for k in PHASES:
            share = f" ({100 * avg[k] / total:.0f}%)" if total else ""
            cells.append(_ms(avg[k]) + share)
        rows.append([*cells, _ms(total)])
    lines += [_table(["processes", "compute", "wait", "allreduce", "update", "total"], rows), ""]
    lines += [
        "## Allreduce bandwidth against its ceilings",
        "",
        "busbw = 2L(p-1)/p / t (nccl-tests' definition, GB/s = 1e9 B/s; n/a at p = 1). "
        "Raw MPI_Allreduce is one buffer of the nearest swept size; p2p is a ping-pong from rank 0.",
        "",
        _table(["processes", "allreduce (ms)", "algbw GB/s", "busbw GB/s", "raw allreduce busbw GB/s",
                "raw peak busbw GB/s", "p2p inter-node GB/s", "p2p intra-node GB/s"],
               [[r["processes"], _ms(r["allreduce_time"]), _f(r["algbw"], "%.3f"), _f(r["busbw"], "%.3f"),
                 _f(r["raw_allreduce_busbw"], "%.3f"), _f(r["raw_allreduce_peak_busbw"], "%.3f"),
                 _f(r["p2p_inter_node"], "%.3f"), _f(r["p2p_intra_node"], "%.3f")] for r in runs]),
        "",
    ]
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{title}]({name})" for name, title in plots]
        lines.append("")
    return "\n".join(lines)
