# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A benchmark report against a baseline report: each figure's change at the same p, drops flagged.

Pure functions over the report that ``mnc_bench_report.build_report`` makes (its
``runs``); no Ansible, no I/O.
"""

from __future__ import annotations

COLLECTIVE_TOLERANCE = 10.0  # percent: throughput and allreduce busbw
P2P_TOLERANCE = 20.0  # percent: point-to-point bandwidth
COMPARED = (
    ("samples_per_s", "throughput (samples/s)", "collective"),
    ("busbw", "in-training busbw (GB/s)", "collective"),
    ("ceiling_busbw", "ceiling busbw at L (GB/s)", "collective"),
    ("p2p_inter_node", "p2p inter-node (GB/s)", "p2p"),
    ("p2p_intra_node", "p2p intra-node (GB/s)", "p2p"),
)


def compare(report, baseline, collective_tolerance=COLLECTIVE_TOLERANCE, p2p_tolerance=P2P_TOLERANCE):
    """Each run's figures beside the baseline report's at the same p, with the change in percent.

    A drop beyond the tolerance (percent) is flagged: collectives (throughput, busbw) and
    point-to-point have their own, as cloud HPC test suites keep them.
    """
    tolerance = {"collective": collective_tolerance, "p2p": p2p_tolerance}
    old = {r["processes"]: r for r in baseline.get("runs", [])}
    rows, drops = [], []
    for r in report["runs"]:
        b = old.get(r["processes"])
        if b is None:
            continue
        for key, label, kind in COMPARED:
            new_v, old_v = r.get(key), b.get(key)
            if new_v is None or not old_v:
                continue
            change = 100.0 * (new_v / old_v - 1.0)
            flagged = change < -tolerance[kind]
            row = {"processes": r["processes"], "figure": key, "label": label, "baseline": old_v,
                   "value": new_v, "change_percent": change, "tolerance_percent": tolerance[kind],
                   "dropped": flagged}
            rows.append(row)
            if flagged:
                drops.append(row)
    meta = baseline.get("meta") or {}
    summary = "Against the baseline {}: ".format(meta.get("timestamp") or "report")
    if not rows:
        summary += "no process count in common, nothing compared."
    elif drops:
        summary += "; ".join("{} at p = {} dropped {:.0f}% (beyond {:g}%)".format(
            d["label"], d["processes"], -d["change_percent"], d["tolerance_percent"]) for d in drops) + "."
    else:
        summary += (f"no figure dropped beyond its tolerance ({collective_tolerance:g}% collectives, "
                    f"{p2p_tolerance:g}% point-to-point).")
    return {"baseline": meta.get("timestamp"), "rows": rows, "drops": drops, "summary": summary,
            "tolerances": tolerance}
