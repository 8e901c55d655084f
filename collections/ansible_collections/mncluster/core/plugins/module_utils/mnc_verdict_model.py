# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The step model behind the benchmark's verdict (``mnc_verdict``): what a step should cost, and at 2x nodes.

Pure functions over the benchmark's documents; no Ansible, no I/O. Units:
seconds, bytes, GB/s = 1e9 B/s, Gb/s = 1e9 bit/s (link speeds).

The model of a step (stated in the report as ``MODEL``): a step is the
measured compute plus the measured update plus an allreduce predicted from the
measured point-to-point figures, a ring allreduce of L bytes over p ranks,

    t_allreduce(L, p) = k * 2 (p - 1) * alpha + 2 (p - 1) / p * L / B

with B the point-to-point bandwidth and alpha the one-way latency of the
slowest link a ring crosses (inter-node when the run spans nodes), and k the
number of allreduces per step (one per parameter array for the naive
communicator, one otherwise). At twice the largest measured node count the
same model, with the largest run's compute and update, predicts the step,
and weak-scaling efficiency = step at the baseline / predicted step.
"""

from __future__ import annotations

import math

MODEL = (
    "step = measured compute + measured update + ring allreduce predicted from point-to-point: "
    "k * 2(p-1) * alpha + 2(p-1)/p * L / B, B and alpha the point-to-point bandwidth and one-way "
    "latency (inter-node when the run spans nodes), k = allreduces per step (one per parameter array "
    "for naive, else 1); predicted efficiency = ideal step / predicted step, the ideal being the measured "
    "baseline step (weak scaling) or its share base p / p (strong scaling, where compute shrinks alike)"
)
MODEL_TOLERANCE = 0.25  # the model "predicts" a step when within 25 %


def gbit(gb_per_s):
    """GB/s (1e9 bytes) to Gb/s (1e9 bits), the unit link speeds are sold in."""
    return None if gb_per_s is None else gb_per_s * 8.0


def percent(part, whole):
    if part is None or not whole:
        return None
    return 100.0 * part / whole


def ring_allreduce_time(nbytes, processes, bandwidth, latency, allreduces=1):
    """Seconds of a ring allreduce of ``nbytes`` (GB/s bandwidth, seconds latency); 0 at p = 1."""
    if processes < 2:
        return 0.0
    if not bandwidth:
        return None
    steps = 2 * (processes - 1)
    return allreduces * steps * (latency or 0.0) + steps / processes * nbytes / (bandwidth * 1e9)


def small_allreduce_prediction(processes, latency):
    """Seconds of an 8-byte allreduce by recursive doubling: ceil(log2 p) one-way latencies."""
    if processes < 2 or latency is None:
        return None
    return math.ceil(math.log2(processes)) * latency


def strong(doc):
    """Whether the run held the global batch fixed (strong scaling) rather than the per-process one."""
    return (doc.get("config") or {}).get("scaling") == "strong"


def work_share(doc, base_doc):
    """The part of the baseline's per-rank work a rank of ``doc`` does: 1 under weak scaling,
    base p / p under strong scaling (the global batch split over more ranks)."""
    if not strong(doc):
        return 1.0
    return base_doc["config"]["processes"] / doc["config"]["processes"]


def _p2p_row(rows, nodes):
    """The pair a ring is limited by: inter-node when the run spans nodes, else intra-node."""
    want = "inter-node" if (nodes or 1) > 1 else "intra-node"
    for row in rows or []:
        if row.get("kind") == want:
            return row
    return None


def link_figures(doc):
    """(bandwidth GB/s, one-way latency s, kind) of the link a ring allreduce of this run crosses."""
    nodes = doc.get("environment", {}).get("nodes")
    bw = _p2p_row(doc.get("p2p"), nodes)
    lat = _p2p_row(doc.get("p2p_latency"), nodes)
    return (bw or {}).get("bandwidth"), (lat or {}).get("time"), (bw or lat or {}).get("kind")


def allreduces_per_step(doc):
    cfg = doc.get("config", {})
    return doc.get("gradient", {}).get("arrays") or 1 if cfg.get("communicator") == "naive" else 1


def measured_step(doc):
    ov = doc.get("overlap") or {}
    if ov.get("measured_step"):
        return ov["measured_step"]
    thr = doc.get("throughput", {})
    iters = thr.get("iterations") or doc.get("config", {}).get("iterations")
    return thr["wall"] / iters if thr.get("wall") and iters else None


def step_model(doc):
    """The model's step for this run next to the measured one."""
    p = doc["config"]["processes"]
    med = {k: doc["phases"][k]["median"] for k in ("compute", "update", "allreduce")}
    bw, lat, kind = link_figures(doc)
    L = doc["allreduce"]["bytes"]
    t_ar = ring_allreduce_time(L, p, bw, lat, allreduces_per_step(doc))
    step = measured_step(doc)
    predicted = None if t_ar is None else med["compute"] + med["update"] + t_ar
    off = None if predicted is None or not step else predicted / step - 1.0
    return {
        "predicted_allreduce": t_ar, "predicted_step": predicted, "measured_step": step,
        "error": off, "within_tolerance": None if off is None else abs(off) <= MODEL_TOLERANCE,
        "link": kind, "bandwidth": bw, "latency": lat,
    }



def predict_at_double(docs):
    """The model's scaling efficiency at twice the largest measured node count (weak: the same step as
    the baseline is ideal; strong: the baseline's step x base p / p, with compute shrinking alike)."""
    multi = [d for d in docs if d["config"]["processes"] > 1]
    if not docs or not multi:
        return None
    base = docs[0]
    big = max(docs, key=lambda d: d["config"]["processes"])
    nodes = big.get("environment", {}).get("nodes") or 1
    per_node = max(1, big["config"]["processes"] // nodes)
    p = 2 * nodes * per_node
    # at 2x nodes the ring crosses nodes: take the inter-node figures of any run that has them
    bw = lat = None
    for d in reversed(multi):
        row = _p2p_row(d.get("p2p"), 2)
        lrow = _p2p_row(d.get("p2p_latency"), 2)
        if row and bw is None:
            bw = row.get("bandwidth")
        if lrow and lat is None:
            lat = lrow.get("time")
    link = "inter-node"
    if bw is None:  # one node only: the intra-node link is all that was measured
        bw, lat, link = link_figures(big)
        link = f"{link} (no inter-node pair was measured)"
    t_ar = ring_allreduce_time(big["allreduce"]["bytes"], p, bw, lat, allreduces_per_step(big))
    base_step = measured_step(base)
    if t_ar is None or not base_step:
        return None
    # strong scaling: each rank's share of the batch, and so its compute, halves again
    compute = big["phases"]["compute"]["median"] * (big["config"]["processes"] / p if strong(big) else 1.0)
    step = compute + big["phases"]["update"]["median"] + t_ar
    ideal = base_step * (base["config"]["processes"] / p if strong(big) else 1.0)
    return {"nodes": 2 * nodes, "processes": p, "predicted_allreduce": t_ar, "predicted_step": step,
            "baseline_step": base_step, "ideal_step": ideal, "efficiency": ideal / step, "link": link,
            "bandwidth": bw, "latency": lat, "scaling": "strong" if strong(big) else "weak",
            "model": MODEL}

