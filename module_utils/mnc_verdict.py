# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's verdict, in numbers and words: is the network the bottleneck, and if not, what is?

Pure functions over the report that ``mnc_bench_report.build_report`` makes (its
``runs`` and ``documents``); no Ansible, no I/O. Units: seconds, bytes,
GB/s = 1e9 B/s, Gb/s = 1e9 bit/s (link speeds).

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

try:  # as a module_utils of an Ansible module
    from ansible.module_utils.mnc_bench_nccl import sentence as nccl_tests_sentence
    from ansible.module_utils.mnc_overlap import overlap_accounting, overlap_sentence
except ImportError:  # imported directly (unit tests)
    from mnc_bench_nccl import sentence as nccl_tests_sentence
    from mnc_overlap import overlap_accounting, overlap_sentence

MODEL = (
    "step = measured compute + measured update + ring allreduce predicted from point-to-point: "
    "k * 2(p-1) * alpha + 2(p-1)/p * L / B, B and alpha the point-to-point bandwidth and one-way "
    "latency (inter-node when the run spans nodes), k = allreduces per step (one per parameter array "
    "for naive, else 1); predicted efficiency = ideal step / predicted step, the ideal being the measured "
    "baseline step (weak scaling) or its share base p / p (strong scaling, where compute shrinks alike)"
)
MODEL_TOLERANCE = 0.25  # the model "predicts" a step when within 25 %
SMALL_MESSAGE_FACTOR = 10.0  # 8-byte allreduce this many times the latency prediction: not the network
IMBALANCE_SHARE = 0.15  # wait above this share of the step
DATA_SHARE = 0.10  # data loading above this share of the step
COMPUTE_GROWTH = 1.5  # compute this many times the baseline's: ranks compete for the CPU or memory
CEILING_TARGET = 80.0  # in-training busbw below this percent of the ceiling: the report says why
# In-training busbw above this percent of its ceiling: the ceiling is no bound (measured while the
# ranks fought for the cores, or too noisy), and the report says so instead of quoting it as one.
CEILING_UNRELIABLE = 110.0


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


def _ceiling(doc):
    ar = doc.get("allreduce", {})
    return ar.get("ceiling") or {}


def _contention(yields):
    """Oversubscription in plain words: what it does to the figures, and what to do about it."""
    text = (": more ranks than cores, so they take turns on the CPUs, and a rank waiting in MPI spins on "
            "its core (busy polling) instead of giving it to one that is computing or sending; the slow "
            "allreduce and the low efficiency measure this competition for the CPUs, not the network")
    if yields:
        return text + (" (MPI yields when idle here, which softens it; run no more ranks than CPUs to "
                       "remove it)")
    return text + " (run no more ranks than CPUs, or have MPI yield when idle: mnc_mpi_yield_when_idle)"


def signatures(doc, step, base_doc=None):
    """What, other than the network, the figures show: a list of {kind, text}."""
    found = []
    p = doc["config"]["processes"]
    env = doc.get("environment", {})
    yields = (env.get("mpi_yield_when_idle") or {}).get("value") == "1"
    for host in env.get("oversubscribed") or []:
        found.append({"kind": "oversubscribed",
                      "text": "{} ranks on {}, which has {:g} usable CPUs (cpuset, CPU quota, "
                              "affinity){}".format(host["ranks"], host["host"], host["usable_cpus"],
                                                   _contention(yields))})
    for m in env.get("shared_machines") or []:
        if m.get("oversubscribed"):
            found.append({"kind": "shared machine",
                          "text": "{} ranks on nodes {}, which are one machine (the same kernel) with "
                                  "{:g} CPUs between them{}".format(m["ranks"], ", ".join(m["hosts"]),
                                                                    m["usable_cpus"], _contention(yields))})
    if base_doc is not None and base_doc is not doc:
        f = work_share(doc, base_doc)
        c, c0 = doc["phases"]["compute"]["median"], base_doc["phases"]["compute"]["median"] * f
        if c0 and c > COMPUTE_GROWTH * c0:
            b = base_doc["config"]["processes"]
            ratio, now, then = c / c0, f"{c * 1e3:.3g}", f"{c0 * 1e3:.3g}"
            if f == 1:
                head = (f"compute takes {ratio:.1f}x as long as at p = {b} ({now} against {then} ms) for the "
                        "same work per rank")
            else:
                head = (f"compute takes {ratio:.1f}x its share of p = {b}'s ({now} against {then} ms; strong "
                        f"scaling: {f:.3g} of the batch per rank)")
            found.append({"kind": "compute contention",
                          "text": head + ": the ranks compete for CPU cores or memory bandwidth"})
    _, lat, _ = link_figures(doc)
    small = next((r for r in doc.get("raw_allreduce") or [] if r.get("bytes") == 8), None)
    predicted = small_allreduce_prediction(p, lat)
    if small and predicted and small["time"] > SMALL_MESSAGE_FACTOR * predicted:
        found.append({"kind": "small-message latency",
                      "text": "an 8-byte allreduce takes {:.3g} ms, {:.0f}x the {:.3g} ms the point-to-point "
                              "latency predicts: the signature of CPU contention (oversubscription, "
                              "busy-polling ranks), not of the network".format(
                                  small["time"] * 1e3, small["time"] / predicted, predicted * 1e3)})
    br = doc.get("breakdown", {})
    wait = (br.get("wait") or {}).get("mean")
    if step and wait is not None and wait > IMBALANCE_SHARE * step:
        found.append({"kind": "imbalance",
                      "text": f"ranks wait {wait * 1e3:.3g} ms ({100 * wait / step:.0f}% of the step) "
                              "for the slowest one's compute"})
    data = (doc.get("data_loading") or {}).get("median")
    if step and data is not None and data > DATA_SHARE * step:
        found.append({"kind": "data loading",
                      "text": f"loading a batch takes {data * 1e3:.3g} ms "
                              f"({100 * data / step:.0f}% of the step)"})
    return found


def run_verdict(doc, base_doc, link_gbps=None, run=None):
    """Numbers and sentences for one run (one p) of a sweep; ``run``: the report's row for it, which
    carries nccl-tests' busbw at L where verify measured it (``mnc_bench_nccl.apply``)."""
    p = doc["config"]["processes"]
    nodes = doc.get("environment", {}).get("nodes") or 1
    ar = doc["allreduce"]
    br = doc["breakdown"]
    step = measured_step(doc)
    base_step = measured_step(base_doc)
    total = br["total"]["mean"]
    share = percent(br["allreduce"]["mean"], total)
    busbw = ar.get("busbw")
    ceil = _ceiling(doc)
    bw, _, kind = link_figures(doc)
    out = {
        "processes": p, "nodes": nodes,
        "allreduce_share_percent": share,
        "busbw_GBps": busbw, "busbw_Gbps": gbit(busbw),
        "ceiling_path": ceil.get("path"), "ceiling_busbw_GBps": ceil.get("busbw"),
        "percent_of_ceiling": percent(busbw, ceil.get("busbw")),
        "percent_of_p2p": percent(busbw, bw), "p2p_kind": kind,
        "percent_of_link": percent(gbit(busbw), link_gbps) if nodes > 1 else None,
        "framework_overhead": ar.get("framework_overhead"),
        "per_array_cost": ar.get("per_array_cost"),
        "model": step_model(doc),
        "signatures": signatures(doc, step, base_doc),
        "overlap": overlap_accounting(doc),
        "nccl_tests_busbw_GBps": (run or {}).get("nccl_tests_busbw"),
        "nccl_tests_bytes": (run or {}).get("nccl_tests_bytes"),
        "nccl_tests_run": (run or {}).get("nccl_tests_run"),
        "percent_of_nccl_tests": (run or {}).get("busbw_percent_of_nccl_tests"),
    }
    # Where the time beyond the ideal step went: the baseline's step under weak scaling (same
    # work per rank), its share of it under strong scaling (the global batch split p ways).
    f = work_share(doc, base_doc)
    ideal = None if not base_step else base_step * f
    lost = None if not (step and base_step) else step - ideal
    parts = {
        "allreduce on the wire (its ceiling at L)": ceil.get("time") if not ar.get("exposed_only") else None,
        "framework overhead (in-training allreduce minus the ceiling)": ar.get("framework_overhead"),
        "imbalance (waiting for the slowest rank)": br["wait"]["mean"],
        "compute slower than at the baseline" if f == 1 else "compute above its share of the baseline's":
            doc["phases"]["compute"]["median"] - base_doc["phases"]["compute"]["median"] * f,
    }
    if f != 1:
        parts["update, which does not shrink with the batch (strong scaling)"] = (
            doc["phases"]["update"]["median"] - base_doc["phases"]["update"]["median"] * f)
    out["scaling"] = "strong" if strong(doc) else "weak"
    out["baseline_processes"] = base_doc["config"]["processes"]
    out["ideal_step"] = ideal
    if ar.get("exposed_only"):
        what = ("DDP: the reduction backward still waited for" if out["overlap"]["mode"] == "ddp"
                else "double buffering")
        parts[f"exposed communication ({what})"] = ar.get("time")
    parts = {k: v for k, v in parts.items() if v is not None and v > 0}
    out["lost_per_step"] = lost
    out["where_lost"] = parts
    out["dominant"] = max(parts, key=parts.get) if parts and p > 1 else None
    said = _sentences(out, doc, link_gbps)
    yardstick = nccl_tests_sentence(run or {}, (doc.get("config") or {}).get("framework"))
    if yardstick:
        said.insert(1, (True, yardstick))
    out["sentences"] = [text for _, text in said]
    out["headline"] = " ".join(text for top, text in said if top)
    return out


def _ms(seconds):
    return f"{seconds * 1e3:.3g} ms"


def _sentences(v, doc, link_gbps):
    p = v["processes"]
    ar = doc.get("allreduce", {})
    if p < 2:
        return [(False, "p = 1 is the baseline: no allreduce crosses a link.")]
    words = []  # (part of the headline?, sentence)
    first = "p = {} ({} node{}): allreduce is {:.0f}% of the step".format(
        p, v["nodes"], "s" if v["nodes"] != 1 else "", v["allreduce_share_percent"] or 0)
    if v["busbw_GBps"] is not None:
        first += "; in-training busbw {:.2f} Gb/s ({:.3f} GB/s)".format(v["busbw_Gbps"], v["busbw_GBps"])
        rel = []
        if v["percent_of_ceiling"] is not None:
            rel.append("{:.0f}% of the {} ceiling at L{}".format(
                v["percent_of_ceiling"], v["ceiling_path"],
                " (no bound: see below)" if v["percent_of_ceiling"] > CEILING_UNRELIABLE else ""))
        if v["percent_of_p2p"] is not None:
            rel.append("{:.0f}% of {} point-to-point".format(v["percent_of_p2p"], v["p2p_kind"]))
        if v["percent_of_link"] is not None:
            rel.append("{:.0f}% of the declared {:g} Gb/s link".format(v["percent_of_link"], link_gbps))
        if rel:
            first += ", " + ", ".join(rel)
    else:
        first += "; no busbw from the allreduce phase ({})".format(
            "DDP reduces while backward runs: it is only the exposed part" if v["overlap"]["mode"] == "ddp"
            else "double buffering: it is only the exposed wait")
        own, own_bw = ar.get("own_duration"), ar.get("busbw_own_duration")
        if own and own_bw:
            first += ("; the reduction's own duration {} is {} (busbw {:.2f} Gb/s, {:.3f} GB/s, "
                      "while it overlapped compute{})").format(
                          "from DDP's timed comm hook" if v["overlap"]["mode"] == "ddp" else "on its stream",
                          _ms(own), gbit(own_bw), own_bw,
                          "" if ar.get("busbw_own_percent_of_ceiling") is None else ", {:.0f}% of the {} "
                          "ceiling at L".format(ar["busbw_own_percent_of_ceiling"], v["ceiling_path"]))
    words.append((True, first + "."))
    said = overlap_sentence(v["overlap"])
    if said:
        words.append((True, said))
    if v["dominant"] and v["lost_per_step"] is not None and v["lost_per_step"] > 0:
        parts = sorted(v["where_lost"].items(), key=lambda kv: -kv[1])
        (top, t_top), rest = parts[0], parts[1:]
        than = ("at the baseline" if v.get("scaling") != "strong" else
                "the ideal {} (strong scaling: the baseline's step x {}/{})".format(
                    _ms(v["ideal_step"]), v["baseline_processes"], v["processes"]))
        text = "The step is {} longer than {}; dominant cause: {}, {}".format(
            _ms(v["lost_per_step"]), than, top, _ms(t_top))
        if rest:
            text += "; then " + ", ".join(f"{k} {_ms(t)}" for k, t in rest)
        words.append((True, text + "."))
    pc = v["percent_of_ceiling"]
    if pc is not None and pc > CEILING_UNRELIABLE:
        words.append((True, "The {} ceiling at L ({:.3f} GB/s) is below what training achieved: it was "
                            "measured while the ranks competed for CPUs or the network (or too noisily), so "
                            "it bounds nothing here; measure again on an idle cluster before comparing with "
                            "it.".format(v["ceiling_path"], v["ceiling_busbw_GBps"])))
    if pc is not None and pc < CEILING_TARGET:
        why = []
        if v["per_array_cost"] is not None and v["per_array_cost"] > 0:
            why.append("{} of per-array allreduces".format(_ms(v["per_array_cost"])))
        if v["framework_overhead"] is not None:
            why.append("{} framework overhead in all".format(_ms(v["framework_overhead"])))
        words.append((False, "In-training busbw is below {:.0f}% of the ceiling: {}.".format(
            CEILING_TARGET, ", ".join(why) or "see the phase table")))
    if v["signatures"]:
        words.append((True, "Not the network: " + "; ".join(sig["text"] for sig in v["signatures"]) + "."))
    m = v["model"]
    if m["error"] is not None:
        if m["within_tolerance"]:
            words.append((False, "The step model predicts {} against {} measured ({:+.0f}%).".format(
                _ms(m["predicted_step"]), _ms(m["measured_step"]), 100 * m["error"])))
        else:
            reason = ("; the signatures above explain it" if v["signatures"] else
                      "; the allreduce costs more than point-to-point predicts (framework overhead, "
                      "algorithm) or the compute varies between passes")
            words.append((False, "The step model is off: {} predicted against {} measured ({:+.0f}%, "
                                 "beyond {:.0f}%){}.".format(
                                     _ms(m["predicted_step"]), _ms(m["measured_step"]), 100 * m["error"],
                                     100 * MODEL_TOLERANCE, reason)))
    return words


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


def assess(report, link_gbps=None):
    """The ``verdict`` of a report: per run numbers and sentences, the prediction, a headline."""
    docs = sorted(report["documents"], key=lambda d: d["config"]["processes"])
    rows = {r["processes"]: r for r in report.get("runs") or []}
    runs = [run_verdict(d, docs[0], link_gbps, rows.get(d["config"]["processes"])) for d in docs]
    pred = predict_at_double(docs)
    headline = []
    for v in runs:
        if v["processes"] > 1:
            headline.append(v["headline"])
    if pred:
        headline.append("Predicted {}-scaling efficiency at {} nodes ({} processes): {:.0f}% (allreduce "
                        "{} per step over the {} link).".format(
                            pred["scaling"], pred["nodes"], pred["processes"], 100 * pred["efficiency"],
                            _ms(pred["predicted_allreduce"]), pred["link"]))
    return {"link_gbps": link_gbps, "model": MODEL, "model_tolerance": MODEL_TOLERANCE,
            "runs": runs, "prediction": pred, "headline": headline}


# -- against a baseline report --------------------------------------------------------
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
