#!/usr/bin/python
# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_report
short_description: Write the ChainerMN scaling report (JSON, Markdown, PNG plots)
description:
  - Takes the benchmark documents of a sweep (from M(chainermn_benchmark)) and writes
    C(<dest>/<timestamp>/) with C(report.json), C(report.md), one C(p<N>.json) per run and PNG plots
    (throughput with the ideal line, scaling efficiency, stacked phase times, allreduce bandwidth
    against the ceilings at L, each labelled with its path, and point-to-point), then points
    C(<dest>/latest) at it; C(trace.json) merges every run's and rank's phases into one Chrome trace.
  - C(report.md) opens with the verdict per process count (share of the step in allreduce, busbw in
    Gb/s and GB/s against the ceiling at L, point-to-point and the declared link, where the time went,
    what is not the network) and a model of a step that predicts the efficiency at twice the nodes.
  - Meant to run on the controller (C(delegate_to) C(localhost)); the plots need matplotlib there.
version_added: "0.1.0"
author: mncluster contributors
options:
  documents:
    description: Benchmark documents, schema C(mncluster.benchmark/1); one per process count.
    type: list
    elements: dict
    required: true
  dest:
    description: Directory that holds the report directories and the C(latest) link.
    type: path
    required: true
  timestamp:
    description: Name of this report's directory.
    type: str
    required: true
  launcher:
    description: Host that launched the runs, for the report's header.
    type: str
  plots:
    description: Draw the PNG plots (needs matplotlib).
    type: bool
    default: true
  latest_link:
    description: Point C(<dest>/latest) at this report.
    type: bool
    default: true
  link_gbps:
    description:
      - The link speed the inventory declares (C(mnc_link_gbps)), in Gb/s; the verdict states the
        in-training busbw as a percent of it.
    type: float
  baseline:
    description:
      - A previous report (its directory or its C(report.json)) whose figures go beside the new ones
        with the change in percent; a throughput or busbw drop beyond O(baseline_tolerance) percent, or a
        point-to-point drop beyond O(baseline_p2p_tolerance), is flagged in the report.
    type: path
  baseline_tolerance:
    description: Percent drop of throughput or allreduce busbw that is flagged.
    type: float
    default: 10
  baseline_p2p_tolerance:
    description: Percent drop of point-to-point bandwidth that is flagged.
    type: float
    default: 20
  partial:
    description:
      - The sweep stopped before its last process count (C(failed_processes), the C(reason), the
        counts C(not_run) and the C(measured) ones); the report says so in its title and first lines
        and keeps it as C(partial) in C(report.json). C(playbooks/benchmark.yml) writes such a report
        to C(<timestamp>-partial) and leaves C(latest) alone.
    type: dict
  verify_json:
    description:
      - The verify.json whose nccl-tests results (C(all_reduce_perf) on each GPU node and across the
        nodes) go beside the in-training busbw, usually C(<verify_report_root>/verify-latest/verify.json).
        Per run the busbw at the size nearest the gradient's L bytes and the peak; C(report.json)
        keeps them as C(nccl_tests) with the file's path and time. Unset, missing, of other nodes
        than O(cluster_nodes), without a result, or on a CPU cluster, the report says why in one line.
    type: path
  cluster_nodes:
    description:
      - The cluster's nodes (inventory names, C(mnc_nodes)); a verify.json that checked other nodes is
        not used.
    type: list
    elements: str
  cluster_state:
    description:
      - Fingerprint of what was measured (nodes' stack records, hostfile, benchmark program and
        settings), kept in the report's C(meta.cluster_state). C(site.yml) skips the benchmark
        when C(<dest>/latest) already holds a report for the same state.
    type: str
"""

EXAMPLES = r"""
- name: Write the report on the controller
  mncluster.core.mnc_report:
    documents: "{{ bench.documents }}"
    dest: "{{ playbook_dir }}/../reports"
    timestamp: "{{ now(utc=true, fmt='%Y%m%dT%H%M%SZ') }}"
  delegate_to: localhost
"""

RETURN = r"""
report_dir:
  description: The directory written.
  returned: always
  type: str
files:
  description: Files written (or that would be, in check mode).
  returned: always
  type: list
  elements: str
frameworks:
  description: With documents of both frameworks, one sentence per process count comparing their throughput.
  returned: always
  type: list
  elements: str
partial:
  description: The O(partial) given, when the report is a partial one.
  returned: always
  type: dict
runs:
  description: Per process count, throughput, efficiency, phase medians and bandwidths.
  returned: always
  type: list
  elements: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench import PHASES
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_markdown import render_markdown
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_nccl import apply as apply_nccl_tests
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_nccl import load_verify_json, yardstick
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_report import build_report
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_trace import chrome_trace
from ansible_collections.mncluster.core.plugins.module_utils.mnc_files import point_link, write_atomic
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verdict import assess
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verdict_compare import compare

PHASE_COLOURS = {"compute": "#4C72B0", "wait": "#DD8452", "allreduce": "#C44E52", "update": "#55A868"}
PLOTS = (
    ("throughput.png", "Throughput and scaling efficiency vs processes"),
    ("phases.png", "Time per iteration by phase vs processes"),
    ("bandwidth.png", "Allreduce bus bandwidth against its labelled ceilings and point-to-point"),
)


FRAMEWORKS_PLOT = ("frameworks.png", "ChainerMN and PyTorch DDP per process count: throughput, in-training "
                                     "busbw against each one's ceiling at L")


def _plot_frameworks(plt, report, path):
    """Both frameworks side by side: samples/s, and in-training busbw against each one's ceiling at L."""
    comp = report["framework_comparison"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, name in enumerate(comp["frameworks"]):
        rows = [r for r in comp["rows"] if r["framework"] == name]
        colour = ("#4C72B0", "#C44E52", "#55A868")[i % 3]
        label = rows[0]["name"] if rows else name
        ps = [r["processes"] for r in rows]
        ax1.plot(ps, [r["samples_per_s"] for r in rows], "o-", color=colour, label=label)
        multi = [r for r in rows if r["busbw"] is not None]
        own = any(r["busbw_over"] != "allreduce phase" for r in multi)
        ax2.plot([r["processes"] for r in multi], [r["busbw"] for r in multi], "*-", color=colour,
                 markersize=10, label=f"{label} in training" + (" (own duration)" if own else ""))
        ceil = [r for r in rows if r["ceiling_busbw"]]
        ax2.plot([r["processes"] for r in ceil], [r["ceiling_busbw"] for r in ceil], "D--", color=colour,
                 label=f"{label}'s ceiling at L ({ceil[0]['ceiling_path'] if ceil else 'n/a'})")
    ax1.set_xlabel("processes")
    ax1.set_ylabel("samples/s")
    ax1.set_title("Throughput")
    ax2.set_xlabel("processes")
    ax2.set_ylabel("busbw, GB/s (1e9 B/s)")
    ax2.set_title("Gradient allreduce against its ceiling at L")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(_subtitle(report), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_throughput(plt, report, path):
    runs = report["runs"]
    ps = [r["processes"] for r in runs]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    ax.plot(ps, [r["ideal_samples_per_s"] for r in runs], "--", color="grey", label="ideal (linear)")
    ax.plot(ps, [r["samples_per_s"] for r in runs], "o-", color="#4C72B0", lw=2, label="measured")
    for r in runs:
        ax.annotate(f"{r['samples_per_s']:.0f}", (r["processes"], r["samples_per_s"]),
                    textcoords="offset points", xytext=(0, 8), ha="center", fontsize=9)
    ax.set_xlabel("processes")
    ax.set_ylabel("samples / s")
    ax.set_title("Throughput (weak scaling)")
    ax.set_xticks(ps)
    ax.set_xlim(0, max(ps) + 1)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left")
    effs = [100 * (r["efficiency"] or 0) for r in runs]
    ax2.bar(_labels(runs), effs, color="#4C72B0", alpha=0.8)
    ax2.axhline(100, ls="--", color="grey")
    for i, e in enumerate(effs):
        ax2.text(i, e + 2, f"{e:.0f}%", ha="center", fontsize=9)
    ax2.set_xlabel("processes")
    ax2.set_ylabel(f"efficiency vs p = {report['baseline_processes']} (%)")
    ax2.set_title("Scaling efficiency")
    ax2.set_ylim(0, max([110, *[e + 10 for e in effs]]))
    ax2.grid(axis="y", alpha=0.3)
    fig.suptitle(_subtitle(report), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _labels(runs):
    """x tick labels: the process count, and the node count under it."""
    return [f"{r['processes']}\n({r['nodes']} node{'s' if r['nodes'] != 1 else ''})" if r.get("nodes")
            else str(r["processes"]) for r in runs]


def _subtitle(report):
    cfg = report["config"]
    return (f"{cfg.get('model')}, batch {cfg.get('batchsize')}/process, {cfg.get('communicator')} "
            f"communicator, {report['environment'].get('device') or 'cpu'}")


def _plot_phases(plt, report, path):
    runs = report["runs"]
    labels = _labels(runs)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    bottom = [0.0] * len(runs)
    for phase in PHASES:
        vals = [r["breakdown_mean"][phase] * 1e3 for r in runs]
        ax.bar(labels, vals, bottom=bottom, label=phase, color=PHASE_COLOURS[phase], width=0.6)
        bottom = [b + v for b, v in zip(bottom, vals)]  # noqa: B905 (py3.8+ nodes)
    totals = [r["breakdown_mean"]["total"] * 1e3 for r in runs]
    for i, t in enumerate(totals):
        share = 100 * runs[i]["breakdown_mean"]["allreduce"] * 1e3 / t if t else 0
        ax.text(i, t * 1.02, f"{t:.1f} ms\nallreduce {share:.0f}%", ha="center", va="bottom", fontsize=8)
    ax.set_xlabel("processes")
    ax.set_ylabel("ms per iteration (mean over ranks and iterations)")
    ax.set_title("Where an iteration's time goes\n" + _subtitle(report), fontsize=11)
    ax.set_ylim(0, max([*bottom, *totals]) * 1.25 or 1)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left", ncol=4, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_bandwidth(plt, report, path):
    docs = [d for d in report["documents"] if d["config"]["processes"] > 1]
    fig, ax = plt.subplots(figsize=(8, 4.8))
    cmap = plt.get_cmap("viridis")
    for i, d in enumerate(docs):
        colour = cmap(i / max(1, len(docs) - 1) * 0.85)
        p = d["config"]["processes"]
        sweep = [r for r in d.get("raw_allreduce") or [] if r["busbw"]]
        if sweep:
            ax.plot([r["bytes"] for r in sweep], [r["busbw"] for r in sweep], "-", color=colour,
                    label=f"host-mpi packed: one MPI_Allreduce of a host buffer, p={p}")
        for c in (d.get("ceilings") or {}).get("rows", []):
            if c.get("busbw") and c.get("layout") == "packed" and c.get("path") != "host-mpi":
                ax.plot([c["bytes"]], [c["busbw"]], "D", color=colour, mec="black",
                        label=f"{c['path']} ceiling at L, p={p}")
            elif c.get("busbw") and c.get("layout") == "per-array":
                ax.plot([c["bytes"]], [c["busbw"]], "v", color=colour, mec="black", markersize=9,
                        label=f"{c['path']} per-array allreduces, p={p}")
        ar = d["allreduce"]
        if ar.get("busbw"):
            ax.plot([ar["bytes"]], [ar["busbw"]], "*", color=colour, markersize=14, mec="black",
                    label=f"{'PyTorch DDP' if d['config'].get('framework') == 'pytorch' else 'ChainerMN'} "
                          f"gradient allreduce, p={p}")
    styles = {"inter-node": ("black", "--"), "intra-node": ("grey", ":")}
    seen = set()
    for d in docs:
        for row in d.get("p2p") or []:
            if row["kind"] in seen or not row.get("bandwidth"):
                continue
            seen.add(row["kind"])
            colour, ls = styles.get(row["kind"], ("black", "-."))
            ax.axhline(row["bandwidth"], color=colour, ls=ls,
                       label=f"p2p {row['kind']} ({row['bandwidth']:.2f} GB/s)")
    if docs:
        nbytes = docs[0]["allreduce"]["bytes"]
        ax.axvline(nbytes, color="#C44E52", lw=0.8, alpha=0.6)
        ax.annotate(f"L = {nbytes / 1e6:.2f} MB", (nbytes, 0.97), xycoords=("data", "axes fraction"),
                    rotation=90, ha="right", va="top", fontsize=8, color="#C44E52")
    values = [y for line in ax.get_lines() for y in line.get_ydata() if y and y > 0]
    if values and max(values) / min(values) > 100:  # small messages would sit on the axis
        ax.set_yscale("log")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw, GB/s (1e9 B/s)")
    ax.set_title("Allreduce bus bandwidth vs its ceilings\n" + _subtitle(report), fontsize=11)
    ax.grid(alpha=0.3, which="both")
    if docs:
        ax.legend(fontsize=8, loc="best")
    else:
        ax.text(0.5, 0.5, "no run with more than one process", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)




def _nccl_tests(report, path, nodes):
    """nccl-tests' figures at L from the verify.json at ``path`` (report.json's ``nccl_tests``)."""
    device = str((report.get("environment") or {}).get("device") or "cpu")
    gpu = device.startswith("cuda")
    nbytes = (report.get("gradient") or {}).get("bytes") or next(
        (r["allreduce_bytes"] for r in report["runs"] if r.get("allreduce_bytes")), None)
    verify, real, stamp, error = load_verify_json(path) if gpu else (None, path, None, None)
    return yardstick(verify, real, stamp, nbytes, gpu, nodes=nodes, error=error)


def _partial(given):
    """The partial sweep's record with its counts as numbers (a template may hand them as strings)."""
    def count(value):
        return int(value) if str(value).strip().lstrip("-").isdigit() else value

    out = dict(given)
    out["failed_processes"] = count(given.get("failed_processes"))
    for key in ("measured", "not_run"):
        out[key] = [count(v) for v in given.get(key) or []]
    out["reason"] = str(given.get("reason") or "")
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            documents=dict(type="list", elements="dict", required=True),
            dest=dict(type="path", required=True),
            timestamp=dict(type="str", required=True),
            launcher=dict(type="str"),
            plots=dict(type="bool", default=True),
            latest_link=dict(type="bool", default=True),
            cluster_state=dict(type="str"),
            partial=dict(type="dict"),
            link_gbps=dict(type="float"),
            baseline=dict(type="path"),
            baseline_tolerance=dict(type="float", default=10.0),
            baseline_p2p_tolerance=dict(type="float", default=20.0),
            verify_json=dict(type="path"),
            cluster_nodes=dict(type="list", elements="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p["documents"]:
        module.fail_json(msg="no benchmark documents to report on")
    if "/" in p["timestamp"] or p["timestamp"] in ("", ".", "..", "latest"):
        module.fail_json(msg=f"timestamp {p['timestamp']!r} cannot name a report directory")
    try:
        meta = {"timestamp": p["timestamp"], "launcher": p["launcher"]}
        if p["cluster_state"]:
            meta["cluster_state"] = p["cluster_state"]
        if p["link_gbps"]:
            meta["link_gbps"] = p["link_gbps"]
        report = build_report(p["documents"], meta)
        report["nccl_tests"] = _nccl_tests(report, p["verify_json"], p["cluster_nodes"])
        for sub in (report, *(report.get("frameworks") or {}).values()):
            apply_nccl_tests(sub, report["nccl_tests"])
        report["verdict"] = assess(report, p["link_gbps"])
        for sub in (report.get("frameworks") or {}).values():
            sub["verdict"] = assess(sub, p["link_gbps"])
        if p["partial"]:
            report["partial"] = _partial(p["partial"])
    except (KeyError, TypeError, ValueError) as e:
        module.fail_json(msg=f"the documents are not benchmark documents: {e!r}")
    if p["baseline"]:
        path = p["baseline"]
        if os.path.isdir(path):
            path = os.path.join(path, "report.json")
        try:
            with open(path, encoding="utf-8") as f:
                baseline = json.load(f)
            if baseline.get("schema") != report["schema"]:
                raise ValueError(f"schema {baseline.get('schema')!r}, not {report['schema']!r}")
            report["comparison"] = compare(report, baseline, p["baseline_tolerance"],
                                           p["baseline_p2p_tolerance"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            module.fail_json(msg=f"baseline {path} is not a report this module wrote: {e}")

    report_dir = os.path.join(p["dest"], p["timestamp"])
    plots = list(PLOTS) if p["plots"] else []
    if plots and report.get("framework_comparison"):
        plots.append(FRAMEWORKS_PLOT)
    others = [(name, d) for name, sub in (report.get("frameworks") or {}).items() for d in sub["documents"]]
    trace = chrome_trace(report["documents"])
    if trace["traceEvents"]:
        report["trace"] = "trace.json"
    files = [os.path.join(report_dir, n) for n in ("report.json", "report.md")]
    if report.get("trace"):
        files.append(os.path.join(report_dir, report["trace"]))
    files += [os.path.join(report_dir, f"p{r['processes']}.json") for r in report["runs"]]
    files += [os.path.join(report_dir, f"p{d['config']['processes']}-{name}.json") for name, d in others]
    files += [os.path.join(report_dir, n) for n, _ in plots]
    summary = [dict(r, verdict=v["headline"]) for r, v in zip(report["runs"], report["verdict"]["runs"])]  # noqa: B905
    if module.check_mode:
        module.exit_json(changed=True, report_dir=report_dir, files=files, runs=summary)

    plt = None
    if plots:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            module.fail_json(msg=f"the plots need matplotlib on the controller ({e}); "
                                 "install it or set plots: false")
    os.makedirs(report_dir, exist_ok=True)
    for d in report["documents"]:
        name = f"p{d['config']['processes']}.json"
        write_atomic(os.path.join(report_dir, name), json.dumps(d, indent=1) + "\n")
    for name, d in others:
        write_atomic(os.path.join(report_dir, f"p{d['config']['processes']}-{name}.json"),
                     json.dumps(d, indent=1) + "\n")
    write_atomic(os.path.join(report_dir, "report.json"), json.dumps(report, indent=1) + "\n")
    write_atomic(os.path.join(report_dir, "report.md"), render_markdown(report, plots))
    if report.get("trace"):
        write_atomic(os.path.join(report_dir, report["trace"]), json.dumps(trace) + "\n")
    if plt is not None:
        _plot_throughput(plt, report, os.path.join(report_dir, "throughput.png"))
        _plot_phases(plt, report, os.path.join(report_dir, "phases.png"))
        _plot_bandwidth(plt, report, os.path.join(report_dir, "bandwidth.png"))
        if FRAMEWORKS_PLOT in plots:
            _plot_frameworks(plt, report, os.path.join(report_dir, FRAMEWORKS_PLOT[0]))
    if p["latest_link"]:
        link = os.path.join(p["dest"], "latest")
        point_link(link, p["timestamp"])  # relative: the reports tree can move
    module.exit_json(changed=True, report_dir=report_dir, files=files, runs=summary,
                     comparison=report.get("comparison"), partial=report.get("partial"),
                     frameworks=(report.get("framework_comparison") or {}).get("sentences") or [])


if __name__ == "__main__":
    main()
