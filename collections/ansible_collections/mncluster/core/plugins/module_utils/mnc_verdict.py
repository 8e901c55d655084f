# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The benchmark's verdict, in numbers and words: is the network the bottleneck, and if not, what is?

Pure functions over the report that ``mnc_bench_report.build_report`` makes (its
``runs`` and ``documents``); no Ansible, no I/O. Units: seconds, bytes,
GB/s = 1e9 B/s, Gb/s = 1e9 bit/s (link speeds).

The step model the verdict measures each run against, and its prediction at
twice the nodes, are ``mnc_verdict_model``'s; the comparison with a baseline
report is ``mnc_verdict_compare``'s.
"""

from __future__ import annotations

from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_nccl import (
    sentence as nccl_tests_sentence,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_overlap import (
    overlap_accounting,
    overlap_sentence,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verdict_model import (
    MODEL,
    MODEL_TOLERANCE,
    gbit,
    link_figures,
    measured_step,
    percent,
    predict_at_double,
    small_allreduce_prediction,
    step_model,
    strong,
    work_share,
)

SMALL_MESSAGE_FACTOR = 10.0  # 8-byte allreduce this many times the latency prediction: not the network
IMBALANCE_SHARE = 0.15  # wait above this share of the step
DATA_SHARE = 0.10  # data loading above this share of the step
COMPUTE_GROWTH = 1.5  # compute this many times the baseline's: ranks compete for the CPU or memory
CEILING_TARGET = 80.0  # in-training busbw below this percent of the ceiling: the report says why
# In-training busbw above this percent of its ceiling: the ceiling is no bound (measured while the
# ranks fought for the cores, or too noisy), and the report says so instead of quoting it as one.
CEILING_UNRELIABLE = 110.0


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

