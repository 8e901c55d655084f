# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The parts ``mnc_bench_markdown.render_markdown`` puts report.md together from: the number
formats, the tables, and the sections over the report dict (verdict, frameworks, baseline,
ranks, launch, interfaces, pinning, ceilings not measured, a partial sweep). Pure functions,
no Ansible, no I/O.
"""

from __future__ import annotations

from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_nccl import run_label, summary_line
from ansible_collections.mncluster.core.plugins.module_utils.mnc_frameworks import FRAMEWORK_NAMES


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
    missing = (report.get("nccl_tests") or {}).get("missing")
    if missing:
        lines.append(f"* {missing}" + ("" if missing.endswith(".") else "."))
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


def _nccl_tests_cell(run):
    """nccl-tests' busbw at the size nearest L for the table, with the size and the run."""
    if run.get("nccl_tests_busbw") is None:
        return "n/a"
    return "{:.3f} ({} B, {})".format(run["nccl_tests_busbw"], run["nccl_tests_bytes"],
                                      run_label(run["nccl_tests_run"]))


def _nccl_tests_lines(report):
    """Under the bandwidth table: nccl-tests' figures and where they came from, or why there are none."""
    line = summary_line(report.get("nccl_tests"))
    if not line:
        return []
    return [line if line.endswith(".") else line + ".", ""]


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
