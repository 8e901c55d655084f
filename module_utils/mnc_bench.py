# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers for the ChainerMN benchmark modules: no Ansible, no I/O.

* the process-count sweep and hostfile slot checks,
* the launcher's command line of one benchmark run (mpiexec, or Slurm's srun)
  and parsing its output,
* scaling efficiency across runs (weak or strong: the same samples/s arithmetic),
* the report (one dict, and its Markdown rendering; ChainerMN's and PyTorch's side by side
  with ``mnc_frameworks``).

The per-run numbers (phase statistics, algbw/busbw) are computed by the
benchmark itself (``train/metrics.py``) and read here from its documents.
"""

from __future__ import annotations

import re

try:  # as a module_utils of an Ansible module
    from ansible.module_utils.mnc_frameworks import FRAMEWORK_NAMES, compare_frameworks, framework_of
    from ansible.module_utils.mnc_hostfile import parse_hostfile as parse_hostfile
except ImportError:  # imported directly (unit tests)
    from mnc_frameworks import FRAMEWORK_NAMES, compare_frameworks, framework_of
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


def _backstop(timeout, timeout_bin):
    """``timeout`` around the launcher, BACKSTOP_S after the job's own limit: for a launcher
    that itself hangs (ssh, a dead node). The job's own limit (mpiexec's MPIEXEC_TIMEOUT, see
    launcher_env, or srun's --time) is what takes every rank down."""
    if timeout and timeout_bin:
        return [timeout_bin, "--kill-after=30", str(int(timeout) + BACKSTOP_S)]
    return []


def mpiexec_argv(mpiexec, processes, slots_per_node, command, hostfile=None, export=(),
                 extra_args=(), timeout=None, timeout_bin=None, yield_when_idle=False):
    """The launcher's argv: ``[timeout] mpiexec -n p [-hostfile H] --map-by ppr:s:node ... command``.

    ``yield_when_idle`` adds ``--mca mpi_yield_when_idle 1``: ranks waiting in MPI give
    their core away instead of busy-polling, which is what ranks sharing fewer cores
    than there are ranks need (the benchmark also sets it itself when a node has fewer
    CPUs than ranks, but cannot see nodes that share one host's cores).
    """
    argv = [*_backstop(timeout, timeout_bin), mpiexec, "-n", str(processes)]
    if hostfile:
        argv += ["-hostfile", hostfile]
    argv += ["--map-by", f"ppr:{slots_per_node}:node"]
    for name in export:
        argv += ["-x", name]
    if yield_when_idle:
        argv += ["--mca", "mpi_yield_when_idle", "1"]
    argv += list(extra_args)
    argv += list(command)
    return argv


def srun_argv(srun, processes, slots_per_node, command, extra_args=(), timeout=None,
              timeout_bin=None, gpu=False, job_name="mncluster-benchmark"):
    """Slurm's argv: ``[timeout] srun --mpi=pmix --nodes=k --ntasks=p ... command``, a job per run.

    The same placement as ``mpiexec --map-by ppr:s:node``: the fewest nodes that hold ``p``
    ranks at ``s`` per node, filled in order (``--distribution=block``). Slurm stops the job at
    ``--time`` (whole minutes, rounded up); ``--kill-on-bad-exit`` takes every rank down when
    one fails, as mpiexec does. srun passes the caller's environment on (``--export=ALL``), so
    ranks see the same variables as under mpiexec's ``-x``. With ``gpu`` every task gets one GPU.
    """
    nodes = -(-processes // slots_per_node)
    argv = [*_backstop(timeout, timeout_bin), srun, "--mpi=pmix", f"--nodes={nodes}",
            f"--ntasks={processes}", f"--ntasks-per-node={min(slots_per_node, processes)}",
            "--distribution=block", "--kill-on-bad-exit=1", f"--job-name={job_name}", "--export=ALL"]
    if timeout:
        argv.append(f"--time={-(-int(timeout) // 60)}")
    if gpu:
        argv.append("--gpus-per-task=1")
    argv += list(extra_args)
    argv += list(command)
    return argv


def launcher_env(timeout, launcher="mpiexec", yield_when_idle=False):
    """Environment for the launcher.

    mpiexec: OpenMPI and MPICH both abort the whole job at MPIEXEC_TIMEOUT (srun has
    ``--time`` instead). Under srun, Open MPI's ranks read MCA settings from the
    environment, so ``mpi_yield_when_idle`` goes there rather than on mpiexec's line.
    """
    env = {}
    if launcher == "mpiexec" and timeout:
        env["MPIEXEC_TIMEOUT"] = str(int(timeout))
    if launcher == "slurm" and yield_when_idle:
        env["OMPI_MCA_mpi_yield_when_idle"] = "1"
    return env


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


# -- Markdown -----------------------------------------------------------------
def _f(value, fmt="%.2f", none="n/a"):
    return none if value is None else fmt % value


def _ms(seconds):
    return _f(None if seconds is None else seconds * 1e3, "%.2f")


def _ms_iqr(median, iqr):
    """'12.30 (IQR 1.20)' in milliseconds."""
    if median is None:
        return "n/a"
    return _ms(median) + ("" if iqr is None else f" ({_ms(iqr)})")


def _table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _verdict_lines(report):
    verdict = report.get("verdict")
    if not verdict:
        return []
    lines = ["## Verdict", ""]
    lines += [f"* {h}" for h in verdict.get("headline") or []]
    comparison = report.get("comparison")
    if comparison:
        lines.append(f"* {comparison['summary']}")
    lines += ["", f"Model of a step: {verdict['model']}.", ""]
    return lines


def _frameworks_lines(report):
    """The two frameworks side by side per p (benchmark_framework: both)."""
    comp = report.get("framework_comparison")
    if not comp:
        return []
    rows = []
    for c in comp["rows"]:
        own = "" if c["busbw_over"] in (None, "allreduce phase") else " (own duration)"
        rows.append([c["processes"], c["name"], _f(c["samples_per_s"], "%.1f"),
                     _f(None if c["efficiency"] is None else 100 * c["efficiency"], "%.1f%%"),
                     _f(c["busbw"], "%.3f") + own,
                     f"{c['ceiling_path'] or 'n/a'} {_f(c['ceiling_busbw'], '%.3f')}",
                     _f(c["percent_of_ceiling"], "%.0f%%"), _f(c["host_mpi_busbw"], "%.3f"),
                     _f(c["percent_of_host_mpi"], "%.0f%%"), _ms(c["allreduce_exposed"]),
                     _f(c["overlapped_percent"], "%.0f%%")])
    lines = ["## Frameworks compared", ""]
    lines += [f"* {s}." for s in comp["sentences"]]
    lines += ["", comp["note"][0].upper() + comp["note"][1:] + ".", "",
              _table(["processes", "framework", "samples/s", "efficiency", "in-training busbw GB/s",
                      "own ceiling at L GB/s", "% of own ceiling", "host-mpi at L GB/s", "% of host-mpi",
                      "allreduce exposed (ms)", "overlapped behind backward"], rows), ""]
    for name, sub in (report.get("frameworks") or {}).items():
        verdict = sub.get("verdict") or {}
        if verdict.get("headline"):
            lines += [f"{FRAMEWORK_NAMES.get(name, name)}'s verdict:", ""]
            lines += [f"* {h}" for h in verdict["headline"]]
            lines.append("")
    return lines


def _comparison_lines(report):
    comparison = report.get("comparison")
    if not comparison or not comparison["rows"]:
        return []
    rows = [[c["processes"], c["label"], f"{c['baseline']:.4g}", f"{c['value']:.4g}",
             f"{c['change_percent']:+.1f}%",
             f"**dropped** (beyond {c['tolerance_percent']:g}%)" if c["dropped"] else "ok"]
            for c in comparison["rows"]]
    return [f"## Against the baseline ({comparison['baseline']})", "",
            _table(["processes", "figure", "baseline", "now", "change", "verdict"], rows), ""]


def _verdict_details(report):
    verdict = report.get("verdict")
    if not verdict:
        return []
    lines = ["## The verdict in full", ""]
    for v in verdict["runs"]:
        lines.append(f"* **p = {v['processes']}**: " + " ".join(v["sentences"]))
    lines.append("")
    rows = []
    for v in verdict["runs"]:
        m = v["model"]
        rows.append([v["processes"], _ms(m["predicted_allreduce"]), _ms(m["predicted_step"]),
                     _ms(m["measured_step"]), _f(None if m["error"] is None else 100 * m["error"], "%+.0f%%"),
                     {True: "yes", False: "**no**", None: "n/a"}[m["within_tolerance"]],
                     m["link"] or "n/a", _f(m["bandwidth"], "%.3f"), _f(None if m["latency"] is None
                                                                      else m["latency"] * 1e6, "%.1f")])
    lines += ["Step model against the measured step (plain pass), ms; within 25% or not:", "",
              _table(["processes", "predicted allreduce", "predicted step", "measured step", "error",
                      "within 25%", "link", "p2p GB/s", "p2p latency us"], rows), ""]
    pred = verdict.get("prediction")
    if pred:
        scaling = pred.get("scaling", "weak")
        ideal = pred.get("ideal_step", pred["baseline_step"])
        against = (f"{_ms(ideal)} ms at the baseline" if scaling == "weak" else
                   f"the ideal {_ms(ideal)} ms (the baseline's {_ms(pred['baseline_step'])} ms over "
                   f"the {pred['processes']} processes' share)")
        lines += [f"At {pred['nodes']} nodes ({pred['processes']} processes) the model predicts a step of "
                  f"{_ms(pred['predicted_step'])} ms against {against}: "
                  f"{scaling}-scaling efficiency {100 * pred['efficiency']:.0f}% ({pred['link']} link, "
                  f"{_f(pred['bandwidth'], '%.3f')} GB/s).", ""]
    return lines


def _ranks_lines(report):
    """Every rank's host and GPU in the largest run, grouped by host."""
    docs = report.get("documents") or []
    if not docs:
        return []
    big = max(docs, key=lambda d: d["config"]["processes"])
    ranks = (big.get("environment") or {}).get("ranks") or []
    if not ranks:
        return []
    by_host = {}
    for r in ranks:
        gpu = r.get("gpu")
        text = str(r["rank"]) if not gpu else "{} ({} {})".format(r["rank"], gpu.get("name"),
                                                                  gpu.get("pci_bus_id"))
        by_host.setdefault(r["host"], []).append(text)
    return ["Ranks at p = {}: ".format(big["config"]["processes"])
            + "; ".join(f"{h}: {', '.join(rs)}" for h, rs in by_host.items()) + ".", ""]


def _launch_lines(runs):
    """How the ranks were started, and the batch job each run was (Slurm's job id, PBS's)."""
    launchers = sorted({r["launcher"] for r in runs if r.get("launcher")})
    jobs = [(r["processes"], r["job"]) for r in runs if r.get("job")]
    if not launchers and not jobs:
        return []
    text = "Started by " + " and ".join({"slurm": "`srun --mpi=pmix` (one Slurm job per p)",
                                          "mpiexec": "`mpiexec`"}.get(x, f"`{x}`") for x in launchers)
    if not launchers:
        text = "Started by a launcher not recorded"
    names = {"slurm": "Slurm", "pbs": "PBS"}
    if jobs:
        text += "; jobs: " + ", ".join(
            "p = {}: {} job {}{}".format(p, names.get(j.get("name"), j.get("name")), j.get("job_id"),
                                         f" on {j['nodelist']}" if j.get("nodelist") else "")
            for p, j in jobs)
    return [text + ".", ""]


def _interface_lines(report):
    """The interfaces Open MPI's TCP transport uses on each host of the largest run."""
    docs = report.get("documents") or []
    if not docs:
        return []
    big = max(docs, key=lambda d: d["config"]["processes"])
    tcp = (big.get("environment") or {}).get("mpi_tcp_interfaces")
    # ranks on one node talk through shared memory, not TCP
    if not tcp or not tcp.get("hosts") or (big.get("environment") or {}).get("nodes", 1) < 2:
        return []

    def one(i):
        speed = "" if i.get("speed_mbps") is None else f", {i['speed_mbps'] / 1000:g} Gb/s"
        return f"{i['name']} ({i['address']}/{i['prefix']}{speed})"

    hosts = "; ".join("{}: {}".format(h, ", ".join(one(i) for i in ifs) or "**none**")
                      for h, ifs in tcp["hosts"].items())
    return [f"Open MPI's TCP transport (`{tcp['rule']}`) at p = {big['config']['processes']}: {hosts}.", ""]


def _double_buffering_lines(runs):
    """What stands in for busbw where the allreduce phase is only the exposed wait."""
    lines = []
    for r in runs:
        if not r.get("allreduce_exposed_only"):
            continue
        text = (f"p = {r['processes']}, double buffering: the allreduce phase "
                f"({_ms(r['allreduce_time'])} ms) is only the exposed wait for the previous reduction "
                "plus the launch, so no busbw is derived from it")
        if r.get("allreduce_own_duration"):
            text += (f"; the reduction's own duration on its stream (CUDA events) is "
                     f"{_ms(r['allreduce_own_duration'])} ms, busbw "
                     f"{_f(r.get('busbw_own_duration'), '%.3f')} GB/s, measured while it overlapped "
                     "compute")
        lines += [text + ".", ""]
    return lines


def _skipped_lines(report):
    """The ceiling paths a run did not measure, with the reason (the same for every p)."""
    docs = report.get("documents") or []
    ceil = (docs[0].get("ceilings") or {}) if docs else {}
    lines = []
    if ceil.get("skipped"):
        skipped = "; ".join(f"`{x['path']}`: {x['reason']}" for x in ceil["skipped"])
        lines += [f"Not measured: {skipped}."]
    if ceil.get("reference_caveat"):
        lines += [f"Reference caveat: {ceil['reference_caveat']}."]
    if ceil.get("repetition_rule"):
        lines += [f"Repetitions: {ceil['repetition_rule'].removeprefix('repetitions: ')}."]
    return [*lines, ""] if lines else []


def _pinning_lines(pinning):
    """Where every job's MPI and NCCL traffic is pinned (roles/mpi_network), as the ranks saw it."""
    if not pinning:
        return []
    mpi = pinning.get("btl_tcp_if_include")
    nccl = (pinning.get("nccl_conf") or {}).get("NCCL_SOCKET_IFNAME")
    nccl_text = "not pinned (NCCL's choice)"
    if nccl:
        nccl_text = f"`NCCL_SOCKET_IFNAME={nccl['value']}` ({nccl['file']})"
    mpi_text = f"`btl_tcp_if_include={mpi}`" if mpi else "not pinned (every interface that is up)"
    return [f"Network pinning (every job): Open MPI TCP {mpi_text}; NCCL sockets {nccl_text}.", ""]


def _partial_lines(partial, name="ChainerMN"):
    """The title, and for a sweep that stopped part way what is missing, before anything else."""
    if not partial:
        return [f"# {name} scaling report"]
    measured = ", ".join(str(n) for n in partial.get("measured") or []) or "none"
    not_run = ", ".join(str(n) for n in partial.get("not_run") or [])
    reason = " ".join(str(partial.get("reason") or "").split())
    return [
        "# {} scaling report (PARTIAL: the sweep stopped at p = {})".format(
            name, partial.get("failed_processes")),
        "",
        "**Partial report, not a complete sweep.** The run with p = {} failed, so this report holds p = {} "
        "only{}. Efficiency and the verdict below cover those counts alone.".format(
            partial.get("failed_processes"), measured, f"; not run: p = {not_run}" if not_run else ""),
        "",
        f"Why p = {partial.get('failed_processes')} failed: {reason[:600]}",
    ]


def render_markdown(report, plots=()):
    """report.md: the verdict, configuration, then the tables, then the plots."""
    cfg, grad, runs = report["config"], report.get("gradient") or {}, report["runs"]
    meta, env = report.get("meta", {}), report.get("environment", {})
    names = ((report.get("framework_comparison") or {}).get("frameworks")
             or [report.get("framework") or "chainer"])
    name = " and ".join(FRAMEWORK_NAMES.get(n, n) for n in names)
    lines = [*_partial_lines(report.get("partial"), name), ""]
    if meta.get("timestamp"):
        where = f" on `{meta['launcher']}`" if meta.get("launcher") else ""
        lines += [f"Run `{meta['timestamp']}`{where}.", ""]
    lines += _verdict_lines(report)
    cuda_aware = (env.get("cuda_aware_mpi") or {}).get("built_with_cuda_support")
    device_mpi = (env.get("cuda_aware_mpi") or {}).get("device_buffer_allreduce")
    cuda_text = {True: "yes", False: "no"}.get(cuda_aware, "unknown") + " by ompi_info"
    if device_mpi:
        cuda_text += ("; a device-buffer MPI_Allreduce " + {True: "worked", False: "**failed**"}.get(
            device_mpi.get("works"), "was not tried") + (f" ({device_mpi['reason']})"
                                                         if device_mpi.get("reason") else ""))
    lines += [
        "Model **{}**, {}, communicator **{}**, {}, "
        "{} timed iterations per pass.".format(
            cfg.get("model"),
            f"{cfg.get('batchsize')} samples per process per iteration (weak scaling)"
            if cfg.get("scaling") != "strong" else
            f"{cfg.get('global_batchsize')} samples per iteration split over the processes (strong scaling: "
            "the global batch fixed)", cfg.get("communicator"),
            env.get("device") or "cpu", cfg.get("iterations")),
        "Gradient L = {} bytes ({:.2f} MB) in {} arrays. {}, {} (CUDA-aware: {}).".format(
            grad.get("bytes"), (grad.get("bytes") or 0) / 1e6, grad.get("arrays"),
            f"PyTorch {env.get('torch')} (DDP)" if env.get("framework") == "pytorch" else
            f"Chainer {env.get('chainer')}", env.get("mpi_library"), cuda_text),
        "",
    ]
    lines += _ranks_lines(report)
    lines += _launch_lines(runs)
    nccl = env.get("nccl")
    if env.get("nccl_version") or nccl:
        lines += ["NCCL {}: network {}, interfaces {}, channel transports {}; cuDNN {}.".format(
            env.get("nccl_version") or "n/a", ", ".join((nccl or {}).get("network") or []) or "n/a",
            ", ".join((nccl or {}).get("interfaces") or []) or "n/a",
            ", ".join((nccl or {}).get("transports") or []) or "n/a",
            {True: "enabled", False: "disabled"}.get(env.get("cudnn_enabled"), "n/a")), ""]
    lines += _pinning_lines(env.get("network_pinning"))
    lines += _interface_lines(report)
    transport = {k: v for k, v in (env.get("transport") or {}).items() if v}
    if transport:
        lines += ["Transport settings the ranks were given: "
                  + ", ".join(f"`{k}={v}`" for k, v in sorted(transport.items())) + ".", ""]
    yields = sorted({(r["mpi_yield_when_idle"] or {}).get("source") or "not recorded" for r in runs
                     if (r["mpi_yield_when_idle"] or {}).get("value") is not None})
    if yields:
        lines += ["MPI yields when idle (`mpi_yield_when_idle`): " + "; ".join(yields) + ".", ""]
    for r in runs:
        for o in r["oversubscribed"]:
            lines += [f"p = {r['processes']}: {o['ranks']} ranks on {o['host']}, which gives them "
                      f"{o['usable_cpus']:g} usable CPUs.", ""]
        for m in r["shared_machines"]:
            lines += ["p = {}: nodes {} are one machine (the same kernel): {} ranks on {:g} CPUs{}.".format(
                r["processes"], ", ".join(m["hosts"]), m["ranks"], m["usable_cpus"],
                ", more ranks than CPUs" if m.get("oversubscribed") else ""), ""]
    bad = [r["processes"] for r in runs if r["correct"] is False]
    checked = [r for r in runs if r["correct"] is not None]
    if checked:
        proved = [r for r in checked if r["correct"]]
        gradient = [r for r in proved if r.get("gradients_averaged")]
        text = ("Gradients averaged: every rank's reduced gradient was the mean of the ranks' local "
                "gradients (one extra iteration, checked against a separate MPI_Allreduce) and every "
                "rank ended with the same parameters" if gradient and len(gradient) == len(proved)
                else "Every rank ended with the same parameters (gradients averaged)")
        lines += [text + " at p = " + ", ".join(str(r["processes"]) for r in proved)
                  + ("" if not bad else f"; **not** at p = {bad}") + "."]
        blind = [r["processes"] for r in proved if r.get("gradient_check_distinguishes") is False]
        if blind:
            lines += [f"At p = {blind} every rank computed the same local gradient (the same data on every "
                      "rank), so the gradient check could not have seen a missing reduction."]
        lines.append("")
    learned = [r for r in runs if r.get("learning")]
    if learned:
        def _acc(x):
            return "" if x.get("accuracy") is None else f" (accuracy {100 * x['accuracy']:.0f}%)"

        lines += ["Loss on each rank's next batch, after the warm-up -> after the timed passes (mean over "
                  "ranks; falling means the distributed training learns): " + "; ".join(
                      "p = {}: {:.4g}{} -> {:.4g}{}".format(
                          r["processes"], r["learning"]["before"]["loss"], _acc(r["learning"]["before"]),
                          r["learning"]["after"]["loss"], _acc(r["learning"]["after"])) for r in learned)
                  + ".", ""]
        validated = [r for r in learned if r["learning"].get("validation")]
        if validated:
            lines += ["Held-out samples, through ChainerMN's multi-node evaluator (each rank its shard, the "
                      "mean over ranks), after the warm-up -> after the timed passes: " + "; ".join(
                          "p = {}: {} samples, loss {:.4g}{} -> {:.4g}{}".format(
                              r["processes"], v["samples"], v["before"]["loss"], _acc(v["before"]),
                              v["after"]["loss"], _acc(v["after"]))
                          for r in validated for v in [r["learning"]["validation"]]) + ".", ""]
    lines += [
        "## Throughput and scaling efficiency",
        "",
        f"Efficiency = throughput / (p x per-process throughput at p = {report.get('baseline_processes')}).",
        "",
        _table(["processes", "nodes", "samples/s", "ideal samples/s", "speedup", "efficiency",
                "timing overhead measured", "timing overhead from barrier cost",
                "samples/s per round: median (IQR)"],
               [[r["processes"], _f(r["nodes"], "%d"), _f(r["samples_per_s"], "%.1f"),
                 _f(r["ideal_samples_per_s"], "%.1f"), _f(r["speedup"], "%.2fx"),
                 _f(None if r["efficiency"] is None else r["efficiency"] * 100, "%.1f%%"),
                 _f(r["overhead_percent"], "%+.2f%%"), _f(r["estimated_overhead_percent"], "%.2f%%"),
                 "{} ({})".format(_f(r["samples_per_s_rounds"]["median"], "%.1f"),
                                  _f(r["samples_per_s_rounds"]["iqr"], "%.1f"))]
                for r in runs]),
        "",
        "Timing overhead measured: instrumented vs plain iterations, alternating (median over rounds); "
        "on a busy machine this is mostly noise. From barrier cost: two idle barriers and three device "
        "syncs per iteration over the plain iteration time.",
        "",
        "## Where an iteration's time goes",
        "",
        "Milliseconds per iteration: median (IQR) over iterations of the slowest rank in each phase "
        "(the critical path); wait is the barrier after compute, i.e. load imbalance. Each phase's "
        "slowest rank is taken on its own, so the phases can add up to more than the total, by "
        "about the compute imbalance (slowest minus fastest rank's compute). Data loading (the next "
        "batch, before the iteration's first barrier) is outside the phases.",
        "",
    ]
    rows = []
    for r in runs:
        med, iqr = r["phases_median"], r["phases_iqr"]
        rows.append([r["processes"], *(_ms_iqr(med[k], iqr[k]) for k in PHASES),
                     _ms_iqr(med["total"], iqr["total"]),
                     _ms(r["phases_p95"]["total"]), _ms(r["imbalance_median"]),
                     _ms_iqr(r["data_loading_median"], r["data_loading_iqr"])])
    lines += [_table(["processes", "compute", "wait", "allreduce", "update", "total", "total p95",
                      "imbalance", "data loading"], rows), ""]
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
        "## Overlap",
        "",
        "Perfect-overlap bound = max(compute, allreduce's own duration) + update (medians, slowest rank): "
        "the step if communication hid entirely behind compute, against the measured step (plain pass). "
        "With double buffering the allreduce phase is only the exposed wait; its own duration comes from "
        "CUDA events on the reduction's stream, and hidden = own duration - exposed wait. The phases "
        "come from the instrumented pass and the measured step from the plain one, so a negative saving "
        "means the instrumented iterations ran slower (see the timing overhead), not that overlap costs.",
        "",
        _table(["processes", "allreduce own (ms)", "hidden (ms)", "perfect-overlap step (ms)",
                "measured step (ms)", "overlap could save (ms)"],
               [[r["processes"], _ms(r["overlap"]["allreduce_own"]), _ms(r["overlap"]["hidden"]),
                 _ms(r["overlap"]["perfect_overlap_step"]), _ms(r["overlap"]["measured_step"]),
                 _ms(r["overlap"]["could_gain"])] for r in runs]),
        "",
        "## Allreduce bandwidth against its ceilings",
        "",
        "busbw = 2L(p-1)/p / t (nccl-tests' definition, GB/s = 1e9 B/s; n/a at p = 1, and under double "
        "buffering, whose allreduce phase is only the exposed wait). Each ceiling is measured at exactly "
        "L, timed as the training loop times its allreduce (barrier, operation, device sync, slowest "
        "rank), median of at least 10 repetitions; the reference is one allreduce of L on the "
        "communicator's own path. Framework overhead = in-training allreduce - reference ceiling.",
        "",
        _table(["processes", "allreduce (ms)", "algbw GB/s", "busbw GB/s", "busbw Gb/s", "reference ceiling",
                "ceiling busbw GB/s", "% of ceiling", "framework overhead (ms)", "per-array cost (ms)",
                "p2p inter-node GB/s", "p2p intra-node GB/s"],
               [[r["processes"], _ms(r["allreduce_time"]), _f(r["algbw"], "%.3f"), _f(r["busbw"], "%.3f"),
                 _f(None if r["busbw"] is None else 8 * r["busbw"], "%.2f"),
                 r["ceiling_path"] or "n/a", _f(r["ceiling_busbw"], "%.3f"),
                 _f(r["busbw_percent_of_ceiling"], "%.0f%%"), _ms(r["framework_overhead"]),
                 _ms(r["per_array_cost"]),
                 _f(r["p2p_inter_node"], "%.3f"), _f(r["p2p_intra_node"], "%.3f")] for r in runs]),
        "",
        *_double_buffering_lines(runs),
        "Every ceiling at L, labelled with its path:",
        "",
        _table(["processes", "path", "what", "arrays", "repetitions", "time (ms): median (IQR)",
                "busbw GB/s"],
               [[r["processes"], f"{c['path']} {c['layout']}", c["label"], c["arrays"], c["repetitions"],
                 _ms_iqr(c["time"], c["iqr"]), _f(c["busbw"], "%.3f")]
                for r in runs for c in r["ceilings_at_L"]]),
        "",
    ]
    lines += _skipped_lines(report)
    lines += _frameworks_lines(report)
    lines += _verdict_details(report)
    lines += _comparison_lines(report)
    if report.get("trace"):
        lines += ["## Trace", "",
                  f"[{report['trace']}]({report['trace']}): every rank's phases, iteration by iteration, one "
                  "row per rank and run (open it in chrome://tracing or Perfetto).", ""]
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{title}]({name})" for name, title in plots]
        lines.append("")
    return "\n".join(lines)
