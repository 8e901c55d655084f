"""The scale benchmark's report from its recorded runs: the table (scale.md) and the plot (scale.png).

The records are scripts/scale_bench.py record's (one JSON line per run);
matplotlib is needed for the plot only.
"""

from __future__ import annotations

import json
from pathlib import Path

from scale_bench_cpu import cpu_floor, node_cpu_mean

# The runs the table shows, in its order; the others (sandbox, prepare,
# converge) are recorded but only the benchmark's subject is tabled.
TABLED = ["network-cold", "verify-cold", "noop"]
TITLES = {
    "sandbox": "sandbox up",
    "prepare": "stages before network, cold",
    "network-cold": "network stage, cold",
    "middle": "chainer + scheduler, cold",
    "verify-cold": "verify stage, cold",
    "converge": "site.yml converge",
    "noop": "site.yml no-op (2nd run)",
}
REFERENCE_N = 3


def cpu_cells(r: dict) -> tuple[str, str, str]:
    mean = node_cpu_mean(r)
    node = "-" if mean is None else f"{mean:.1f} / {max(r['node_cpu_s'].values()):.1f}"
    ctl = r.get("controller_cpu_s")
    floor = cpu_floor(r)
    return node, ("-" if ctl is None else f"{ctl:.1f}"), ("-" if floor is None else f"{floor:.1f}")


def ratios(records: list[dict], reference: int = REFERENCE_N) -> dict[tuple[int, str], float | None]:
    """(N, run) -> wall time / the same run's wall time at N = reference (None without one)."""
    ref = {r["run"]: r["wall_s"] for r in records if r["n"] == reference}
    return {(r["n"], r["run"]): (r["wall_s"] / ref[r["run"]] if ref.get(r["run"]) else None) for r in records}


def busiest(counts: dict[str, int]) -> str:
    return str(max(counts.values())) if counts else "-"


def markdown(records: list[dict]) -> str:
    ratio = ratios(records)
    rows = sorted((r for r in records if r["run"] in TABLED), key=lambda r: (TABLED.index(r["run"]), r["n"]))
    cpus = sorted({str(r.get("cpus") or "no cap") for r in records})
    out = [
        "# Scale benchmark",
        "",
        f"CPU share per node (podman --cpus): {', '.join(cpus)}. "
        f"Host: {records[0].get('host_cpus', '?')} CPUs when it ran. "
        "Tasks and loop items per node: the busiest node. "
        f"Ratio: wall time over the same run's at N = {REFERENCE_N}. "
        "Node CPU: CPU seconds a node's container used during the run, mean over the nodes / "
        "the busiest node. Controller CPU: the user + system seconds of ansible-runner and "
        "ansible-playbook ("
        "workers and ssh clients included). CPU floor: the controller's and all nodes' CPU "
        "seconds over the host's CPUs, the shortest wall time this host could give the run. "
        "Load: the host's 1-minute load average at the end of the run.",
        "",
        f"| N | run | wall (s) | ratio to N={REFERENCE_N} | tasks per node | loop items per node | "
        "node CPU (s) | controller CPU (s) | CPU floor (s) | load | five slowest tasks (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        q = ratio[(r["n"], r["run"])]
        slow = "; ".join(f"{s['name']} ({s['seconds']:.1f})" for s in r["slowest"]).replace("|", "\\|")
        out.append(
            f"| {r['n']} | {TITLES[r['run']]} | {r['wall_s']:.1f} | {'-' if q is None else f'{q:.2f}x'} | "
            f"{busiest(r['tasks_per_node'])} | {busiest(r['items_per_node'])} | "
            f"{' | '.join(cpu_cells(r))} | {r.get('load', '-')} | {slow} |"
        )
    other = [r for r in records if r["run"] not in TABLED]
    if other:
        out += ["", "Other steps (not the benchmark's subject):", ""]
        out += ["| N | step | wall (s) | node CPU (s) | controller CPU (s) | CPU floor (s) |",
                "|---|---|---|---|---|---|"]
        out += [f"| {r['n']} | {TITLES.get(r['run'], r['run'])} | {r['wall_s']:.1f} | "
                f"{' | '.join(cpu_cells(r))} |" for r in other]
    return "\n".join(out) + "\n"


def plot(records: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, cx) = plt.subplots(1, 2, figsize=(11, 5.6))
    cpus = ", ".join(sorted({str(r.get("cpus") or "no cap") for r in records}))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for run, colour in zip(TABLED, colours, strict=False):
        runs = sorted((r for r in records if r["run"] == run), key=lambda r: r["n"])
        if runs:
            ax.plot([r["n"] for r in runs], [r["wall_s"] for r in runs], marker="o", color=colour,
                    label=TITLES[run])
        nodes = [(r["n"], node_cpu_mean(r)) for r in runs if r.get("node_cpu_s")]
        if nodes:
            cx.plot([p[0] for p in nodes], [p[1] for p in nodes], marker="o", color=colour,
                    label=f"{TITLES[run]}: a node")
        ctl = [(r["n"], r["controller_cpu_s"] / r["n"]) for r in runs
               if r.get("controller_cpu_s") is not None]
        if ctl:
            cx.plot([p[0] for p in ctl], [p[1] for p in ctl], marker="s", linestyle="--", color=colour,
                    label=f"{TITLES[run]}: controller / N")
    ax.set_title(f"wall time ({cpus} CPU per node)")
    ax.set_ylabel("wall time (s)")
    cx.set_title("CPU time per node")
    cx.set_ylabel("CPU seconds")
    for a in (ax, cx):
        a.set_xticks(sorted({r["n"] for r in records}))
        a.set_xlabel("nodes (N)")
        a.set_ylim(bottom=0)
        a.grid(True, alpha=0.3)
        if a.get_lines():
            # below the axes: the lines stay readable wherever they run
            a.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    fig.suptitle("mncluster scale benchmark")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

