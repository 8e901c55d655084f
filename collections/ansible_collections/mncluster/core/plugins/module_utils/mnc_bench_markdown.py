# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report.md: the benchmark report (``mnc_bench_report.build_report``) in Markdown, the verdict
first, then the configuration, the tables and the plots. Pure function, no Ansible, no I/O.
"""

from __future__ import annotations

from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench import PHASES
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_markdown_sections import (
    _comparison_lines,
    _double_buffering_lines,
    _f,
    _frameworks_lines,
    _interface_lines,
    _launch_lines,
    _ms,
    _ms_iqr,
    _nccl_tests_cell,
    _nccl_tests_lines,
    _partial_lines,
    _pinning_lines,
    _ranks_lines,
    _skipped_lines,
    _table,
    _verdict_details,
    _verdict_lines,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_frameworks import FRAMEWORK_NAMES


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
                "p2p inter-node GB/s", "p2p intra-node GB/s", "nccl-tests busbw GB/s (size nearest L, run)",
                "% of nccl-tests"],
               [[r["processes"], _ms(r["allreduce_time"]), _f(r["algbw"], "%.3f"), _f(r["busbw"], "%.3f"),
                 _f(None if r["busbw"] is None else 8 * r["busbw"], "%.2f"),
                 r["ceiling_path"] or "n/a", _f(r["ceiling_busbw"], "%.3f"),
                 _f(r["busbw_percent_of_ceiling"], "%.0f%%"), _ms(r["framework_overhead"]),
                 _ms(r["per_array_cost"]),
                 _f(r["p2p_inter_node"], "%.3f"), _f(r["p2p_intra_node"], "%.3f"), _nccl_tests_cell(r),
                 _f(r.get("busbw_percent_of_nccl_tests"), "%.0f%%")] for r in runs]),
        "",
        *_nccl_tests_lines(report),
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
