"""The report's plots (matplotlib, drawn by the mnc_report module on the controller): throughput and
scaling efficiency, time per phase, the allreduce bus bandwidth against its ceilings, and both
frameworks side by side. ``draw`` writes the ones ``plots`` names into the report directory."""

from __future__ import annotations

import os

from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench import PHASES

PHASE_COLOURS = {"compute": "#4C72B0", "wait": "#DD8452", "allreduce": "#C44E52", "update": "#55A868"}
PLOTS = (
    ("throughput.png", "Throughput and scaling efficiency vs processes"),
    ("phases.png", "Time per iteration by phase vs processes"),
    ("bandwidth.png", "Allreduce bus bandwidth against its labelled ceilings and point-to-point"),
)


FRAMEWORKS_PLOT = ("frameworks.png", "ChainerMN and PyTorch DDP per process count: throughput, in-training "
                                     "busbw against each one's ceiling at L")


def plot_frameworks(plt, report, path):
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


def plot_throughput(plt, report, path):
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


def plot_phases(plt, report, path):
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


def plot_bandwidth(plt, report, path):
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


def draw(plt, report, report_dir, plots):
    """Every plot of ``plots`` ((file name, title) pairs) into ``report_dir``."""
    names = {name for name, _title in plots}
    for name, plot in (("throughput.png", plot_throughput), ("phases.png", plot_phases),
                       ("bandwidth.png", plot_bandwidth), (FRAMEWORKS_PLOT[0], plot_frameworks)):
        if name in names:
            plot(plt, report, os.path.join(report_dir, name))
