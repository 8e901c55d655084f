"""module_utils/mnc_verdict.py (and its model and comparison): the verdict's arithmetic and its words."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from ansible_collections.mncluster.core.plugins.module_utils import (
    mnc_bench,
    mnc_bench_markdown,
    mnc_bench_report,
    mnc_verdict,
    mnc_verdict_model,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verdict_compare import compare

L = 102_228_384  # ResNet-50's fp32 gradient, the seed's figure


def stat(v, iqr=0.0):
    return {"median": v, "mean": v, "p95": v, "min": v, "max": v, "q1": v, "q3": v, "iqr": iqr}


def make_doc(p, nodes, compute=0.100, update=0.010, allreduce=0.0, wait=0.0, step=None, ceiling=None,
             p2p_gbs=1.0, p2p_lat=50e-6, small=None, arrays=161, communicator="pure_nccl", data=0.0,
             oversubscribed=(), exposed_only=False, nbytes=L):
    step = step if step is not None else compute + wait + allreduce + update
    busbw = None if p == 1 or exposed_only else 2 * nbytes * (p - 1) / p / allreduce / 1e9
    ceil = None
    if ceiling is not None and p > 1:
        ceil = {"path": "nccl", "layout": "packed", "label": "x", "time": ceiling,
                "busbw": 2 * nbytes * (p - 1) / p / ceiling / 1e9}
    kind = "inter-node" if nodes > 1 else "intra-node"
    phases = {"compute": stat(compute), "wait": stat(wait), "allreduce": stat(allreduce),
              "update": stat(update), "total": stat(compute + wait + allreduce + update)}
    ar = {"bytes": nbytes, "time": allreduce, "busbw": busbw, "algbw": None, "exposed_only": exposed_only,
          "ceiling": ceil}
    if ceil:
        ar["framework_overhead"] = allreduce - ceiling
        ar["busbw_percent_of_ceiling"] = 100 * busbw / ceil["busbw"] if busbw else None
    return {
        "schema": mnc_bench.SCHEMA,
        "config": {"processes": p, "communicator": communicator, "batchsize": 32, "iterations": 50},
        "environment": {"nodes": nodes, "oversubscribed": list(oversubscribed)},
        "gradient": {"bytes": nbytes, "arrays": arrays},
        "phases": phases, "breakdown": phases,
        "allreduce": ar,
        "overlap": {"measured_step": step},
        "throughput": {"wall": step * 50, "iterations": 50},
        "data_loading": stat(data),
        "raw_allreduce": [] if small is None else [{"bytes": 8, "time": small}],
        "p2p": [] if p == 1 else [{"kind": kind, "bandwidth": p2p_gbs}],
        "p2p_latency": [] if p == 1 else [{"kind": kind, "time": p2p_lat}],
        "ceilings": {"rows": [] if ceil is None else [dict(ceil, arrays=1, repetitions=10, bytes=nbytes,
                                                           spread=stat(ceiling))], "reference": 0},
    }


def report(docs):
    return {"documents": docs, "runs": []}


def test_units_and_the_ring_model():
    assert mnc_verdict_model.gbit(0.625) == pytest.approx(5.0)  # GB/s -> Gb/s
    assert mnc_verdict_model.gbit(None) is None
    # p = 4, 1 GB/s, 10 us: 2*3 latencies + 2*3/4 * L / 1e9
    t = mnc_verdict_model.ring_allreduce_time(L, 4, 1.0, 10e-6)
    assert t == pytest.approx(6 * 10e-6 + 1.5 * L / 1e9)
    # naive: one allreduce per array pays the latency each time
    assert mnc_verdict_model.ring_allreduce_time(L, 4, 1.0, 10e-6, allreduces=161) == pytest.approx(
        161 * 6 * 10e-6 + 1.5 * L / 1e9)
    assert mnc_verdict_model.ring_allreduce_time(L, 1, 1.0, 10e-6) == 0.0
    assert mnc_verdict_model.small_allreduce_prediction(6, 50e-6) == pytest.approx(3 * 50e-6)
    assert mnc_verdict_model.small_allreduce_prediction(1, 50e-6) is None


def test_the_seeds_network_bound_cluster():
    # The hand analysis: 16 processes, allreduce > 50% of a step, ~5 Gb/s busbw against ~8.5 Gb/s p2p.
    p, nodes = 16, 4
    t_ar = 2 * L * (p - 1) / p / 0.625e9  # busbw 0.625 GB/s = 5 Gb/s
    base = make_doc(1, 1, compute=0.250, update=0.010)
    big = make_doc(p, nodes, compute=0.250, update=0.010, allreduce=t_ar, ceiling=t_ar * 0.95,
                   p2p_gbs=8.5 / 8, arrays=161, communicator="pure_nccl")
    v = mnc_verdict.assess(report([base, big]), link_gbps=10)
    r16 = v["runs"][1]
    assert r16["allreduce_share_percent"] > 50
    assert r16["busbw_Gbps"] == pytest.approx(5.0)
    assert r16["busbw_GBps"] == pytest.approx(0.625)
    assert r16["percent_of_link"] == pytest.approx(50.0)
    assert r16["percent_of_p2p"] == pytest.approx(100 * 5.0 / 8.5)
    assert r16["percent_of_ceiling"] == pytest.approx(95.0)
    assert r16["dominant"] == "allreduce on the wire (its ceiling at L)"
    assert r16["signatures"] == []
    text = v["headline"][0]
    assert text.startswith("p = 16 (4 nodes): allreduce is")
    assert "in-training busbw 5.00 Gb/s (0.625 GB/s)" in text
    assert "95% of the nccl ceiling at L" in text and "50% of the declared 10 Gb/s link" in text
    assert "dominant cause: allreduce on the wire (its ceiling at L), 291 ms; then framework overhead" in text
    # the model: compute + update + ring allreduce over 1.0625 GB/s, 50 us
    m = r16["model"]
    expect = 0.260 + mnc_verdict_model.ring_allreduce_time(L, p, 8.5 / 8, 50e-6)
    assert m["predicted_step"] == pytest.approx(expect)
    assert m["within_tolerance"] is True
    assert any("The step model predicts" in s for s in r16["sentences"])


def test_prediction_at_twice_the_nodes():
    base = make_doc(1, 1, compute=0.1, update=0.01)
    two = make_doc(4, 2, compute=0.1, update=0.01, allreduce=0.2, p2p_gbs=1.0, p2p_lat=20e-6)
    pred = mnc_verdict_model.predict_at_double([base, two])
    assert (pred["nodes"], pred["processes"]) == (4, 8)
    t_ar = 2 * 7 * 20e-6 + 2 * 7 / 8 * L / 1e9
    assert pred["predicted_allreduce"] == pytest.approx(t_ar)
    assert pred["efficiency"] == pytest.approx(0.11 / (0.11 + t_ar))
    assert pred["link"] == "inter-node"
    v = mnc_verdict.assess(report([base, two]))
    assert v["headline"][-1].startswith("Predicted weak-scaling efficiency at 4 nodes (8 processes): ")
    assert v["model"] == mnc_verdict_model.MODEL and "2(p-1)/p * L / B" in v["model"]


def test_the_sandbox_demo_is_cpu_contention_not_the_network():
    # The demo: 7.18 MB at p = 4 in 1472 ms, p2p 0.85 GB/s, an 8-byte allreduce ~4 ms.
    nbytes = 7_184_040
    base = make_doc(1, 1, compute=0.02, update=0.002, nbytes=nbytes)
    p4 = make_doc(4, 2, compute=0.02, update=0.002, allreduce=1.472, p2p_gbs=0.85, p2p_lat=60e-6,
                  small=4e-3, nbytes=nbytes, arrays=6, communicator="naive",
                  oversubscribed=[{"host": "node1", "ranks": 2, "usable_cpus": 1.0}])
    v = mnc_verdict.run_verdict(p4, base)
    kinds = [s["kind"] for s in v["signatures"]]
    assert kinds == ["oversubscribed", "small-message latency"]  # compute did not grow here
    over = v["signatures"][0]["text"]
    assert over.startswith("2 ranks on node1, which has 1 usable CPUs (cpuset, CPU quota, affinity): more "
                           "ranks than cores, so they take turns on the CPUs")
    assert "busy polling" in over and "not the network" in over and "mnc_mpi_yield_when_idle" in over
    small = v["signatures"][1]["text"]
    assert "an 8-byte allreduce takes 4 ms, 33x the 0.12 ms the point-to-point latency predicts" in small
    assert "Not the network: " in v["headline"]
    # the model cannot explain it, and says why
    m = v["model"]
    assert m["within_tolerance"] is False and m["error"] < -0.25
    off = [s for s in v["sentences"] if "The step model is off" in s]
    assert len(off) == 1 and "the signatures above explain it" in off[0]


def test_strong_scaling_is_judged_against_the_baselines_share():
    # The global batch fixed: at p = 4 each rank computes a quarter of p = 1's batch.
    base = make_doc(1, 1, compute=0.100, update=0.010)
    p4 = make_doc(4, 2, compute=0.025, update=0.010, allreduce=0.020, ceiling=0.018, p2p_gbs=1.0,
                  p2p_lat=20e-6)
    for d in (base, p4):
        d["config"]["scaling"] = "strong"
    v = mnc_verdict.run_verdict(p4, base)
    assert v["scaling"] == "strong" and v["ideal_step"] == pytest.approx(0.110 / 4)
    assert v["lost_per_step"] == pytest.approx(0.055 - 0.0275)
    # compute at its share is no contention; the update, which does not shrink, is lost time
    assert [s["kind"] for s in v["signatures"]] == []
    assert v["where_lost"]["update, which does not shrink with the batch (strong scaling)"] == \
        pytest.approx(0.010 - 0.0025)
    assert "compute above its share of the baseline's" not in v["where_lost"]  # exactly its share
    assert "longer than the ideal 27.5 ms (strong scaling: the baseline's step x 1/4)" in v["headline"]
    # compute above its share is contention, said as such
    slow = make_doc(4, 2, compute=0.060, update=0.010, allreduce=0.020)
    slow["config"]["scaling"] = "strong"
    (sig,) = mnc_verdict.run_verdict(slow, base)["signatures"]
    assert sig["text"] == ("compute takes 2.4x its share of p = 1's (60 against 25 ms; strong scaling: "
                           "0.25 of the batch per rank): the ranks compete for CPU cores or memory bandwidth")
    # at twice the nodes, compute halves again, and the ideal is the baseline's step / 8
    pred = mnc_verdict_model.predict_at_double([base, p4])
    t_ar = mnc_verdict_model.ring_allreduce_time(L, 8, 1.0, 20e-6)
    assert pred["scaling"] == "strong" and pred["processes"] == 8
    assert pred["predicted_step"] == pytest.approx(0.0125 + 0.010 + t_ar)
    assert pred["efficiency"] == pytest.approx((0.110 / 8) / (0.0125 + 0.010 + t_ar))
    assert mnc_verdict.assess(report([base, p4]))["headline"][-1].startswith(
        "Predicted strong-scaling efficiency at 4 nodes (8 processes): ")


def test_compute_that_grows_with_p_is_contention():
    base = make_doc(1, 1, compute=0.030)
    p2 = make_doc(2, 1, compute=0.100, allreduce=0.005)
    (sig,) = mnc_verdict.run_verdict(p2, base)["signatures"]
    assert sig["kind"] == "compute contention"
    assert sig["text"].startswith("compute takes 3.3x as long as at p = 1 (100 against 30 ms)")


def test_imbalance_and_data_loading_are_named():
    base = make_doc(1, 1, compute=0.1, update=0.01)
    p2 = make_doc(2, 1, compute=0.1, update=0.01, allreduce=0.005, wait=0.05, data=0.03)
    v = mnc_verdict.run_verdict(p2, base)
    assert [s["kind"] for s in v["signatures"]] == ["imbalance", "data loading"]
    assert v["dominant"] == "imbalance (waiting for the slowest rank)"
    assert "ranks wait 50 ms (30% of the step)" in v["signatures"][0]["text"]
    assert "loading a batch takes 30 ms (18% of the step)" in v["signatures"][1]["text"]


def test_below_80_percent_of_the_ceiling_says_why():
    base = make_doc(1, 1)
    p2 = make_doc(2, 1, allreduce=0.040, ceiling=0.020, communicator="naive", arrays=6)
    p2["allreduce"]["per_array_cost"] = 0.003
    v = mnc_verdict.run_verdict(p2, base)
    assert v["percent_of_ceiling"] == pytest.approx(50.0)
    assert any(s.startswith("In-training busbw is below 80% of the ceiling: 3 ms of per-array allreduces, "
                            "20 ms framework overhead in all") for s in v["sentences"])


def test_a_ceiling_below_the_training_busbw_is_called_no_bound():
    # The sandbox case: the ceiling was measured while ranks fought for the cores.
    base = make_doc(1, 1)
    p2 = make_doc(2, 2, allreduce=0.020, ceiling=0.0436, communicator="naive")
    v = mnc_verdict.run_verdict(p2, base)
    assert v["percent_of_ceiling"] == pytest.approx(218.0)
    assert "218% of the nccl ceiling at L (no bound: see below)" in v["headline"]
    assert "is below what training achieved" in v["headline"] and "bounds nothing here" in v["headline"]
    # A plausible ceiling is quoted plainly.
    ok = mnc_verdict.run_verdict(make_doc(2, 2, allreduce=0.020, ceiling=0.019), base)
    assert "no bound" not in ok["headline"] and "bounds nothing" not in ok["headline"]


def test_the_sandbox_containers_share_one_machines_cores():
    # 3 containers x 2 ranks on a 2-core host: no node is short of CPUs, the machine is.
    base = make_doc(1, 1, compute=0.02, update=0.002)
    p6 = make_doc(6, 3, compute=0.02, update=0.002, allreduce=0.5, p2p_lat=60e-6, communicator="naive")
    env = p6["environment"]
    env["shared_machines"] = [{"boot_id": "b", "hosts": ["node1", "node2", "node3"], "ranks": 6,
                               "usable_cpus": 2, "oversubscribed": True}]
    env["mpi_yield_when_idle"] = {"value": "1", "source": "launcher"}
    v = mnc_verdict.run_verdict(p6, base)
    (sig,) = v["signatures"]
    assert sig["kind"] == "shared machine"
    assert sig["text"].startswith("6 ranks on nodes node1, node2, node3, which are one machine (the same "
                                  "kernel) with 2 CPUs between them: more ranks than cores")
    assert "not the network" in sig["text"] and "MPI yields when idle here, which softens it" in sig["text"]
    assert "Not the network: 6 ranks on nodes node1, node2, node3" in v["headline"]
    # a machine with CPUs enough for its ranks is no signature
    env["shared_machines"][0].update(usable_cpus=8, oversubscribed=False)
    assert mnc_verdict.run_verdict(p6, base)["signatures"] == []


def test_double_buffering_states_no_bandwidth_from_the_exposed_wait():
    base = make_doc(1, 1)
    p2 = make_doc(2, 1, allreduce=0.002, exposed_only=True)
    v = mnc_verdict.run_verdict(p2, base)
    assert v["busbw_GBps"] is None
    assert "no busbw from the allreduce phase (double buffering: it is only the exposed wait)" \
        in v["sentences"][0]
    assert "own duration" not in v["sentences"][0]  # not measured: nothing claimed
    # what it is instead: the reduction's own duration on its stream, labelled as such
    p2["allreduce"].update(own_duration=0.030, busbw_own_duration=2 * L / 2 / 0.030 / 1e9,
                           busbw_own_percent_of_ceiling=90.0)
    p2["allreduce"]["ceiling"] = {"path": "nccl", "busbw": 1.0, "time": 0.03}
    first = mnc_verdict.run_verdict(p2, base)["sentences"][0]
    assert "the reduction's own duration on its stream is 30 ms (busbw 27.26 Gb/s, 3.408 GB/s, while it " \
           "overlapped compute, 90% of the nccl ceiling at L)" in first


def test_report_markdown_leads_with_the_verdict():
    base = make_doc(1, 1)
    two = make_doc(4, 2, allreduce=0.2, ceiling=0.15)
    for d in (base, two):
        d["instrumentation"] = {"overhead_percent": 0.5, "rounds": [{"iterations": 5, "plain_wall": 1.0}]}
        d["throughput"]["samples_per_s"] = 100.0 * d["config"]["processes"]
        d["imbalance"] = stat(0.0)
    rep = mnc_bench_report.build_report([base, two])
    rep["verdict"] = mnc_verdict.assess(rep, link_gbps=1)
    md = mnc_bench_markdown.render_markdown(rep)
    head = md.split("## Throughput")[0]
    assert "## Verdict" in head and "* p = 4 (2 nodes): allreduce is" in head
    assert "Model of a step: step = measured compute" in head
    assert "same size" not in md
    assert "| 4 | nccl packed |" in md  # every ceiling at L, labelled with its path


def test_baseline_comparison_flags_drops_beyond_their_tolerance():
    def run(p, thr, busbw, inter):
        return {"processes": p, "samples_per_s": thr, "busbw": busbw, "ceiling_busbw": None,
                "p2p_inter_node": inter, "p2p_intra_node": None}

    baseline = {"meta": {"timestamp": "T0"}, "runs": [run(1, 100.0, None, None), run(4, 300.0, 1.0, 1.0)]}
    now = {"runs": [run(1, 95.0, None, None), run(4, 255.0, 0.95, 0.85), run(8, 500.0, 1.0, 1.0)]}
    c = compare(now, baseline)
    got = {(r["processes"], r["figure"]): (round(r["change_percent"], 1), r["dropped"]) for r in c["rows"]}
    assert got == {
        (1, "samples_per_s"): (-5.0, False),
        (4, "samples_per_s"): (-15.0, True),  # beyond 10% for collectives
        (4, "busbw"): (-5.0, False),
        (4, "p2p_inter_node"): (-15.0, False),  # within 20% for point-to-point
    }
    assert c["summary"] == ("Against the baseline T0: throughput (samples/s) at p = 4 dropped 15% "
                            "(beyond 10%).")
    assert compare(now, baseline, p2p_tolerance=10)["drops"][-1]["figure"] == "p2p_inter_node"
    other = compare({"runs": [run(2, 1, 1, 1)]}, baseline)
    assert "no process count in common" in other["summary"]
    rep = {"config": {}, "runs": [], "comparison": c}
    md = mnc_bench_markdown.render_markdown(rep)
    assert "## Against the baseline (T0)" in md
    assert "| 4 | throughput (samples/s) | 300 | 255 | -15.0% | **dropped** (beyond 10%) |" in md


# -- DDP's overlap accounting -------------------------------------------------------------------
def ddp_doc(own, hidden, buckets=4, overlapped=None, exposed_phase=None):
    """A 2-rank PyTorch DDP run: the allreduce phase is only what backward still waited for."""
    exposed = own - hidden if exposed_phase is None else exposed_phase
    doc = make_doc(2, 1, allreduce=exposed, exposed_only=True)
    doc["config"]["framework"] = "pytorch"
    doc["overlap"].update(mode="ddp", double_buffering=False, allreduce_own=stat(own), hidden=hidden,
                          allreduce_exposed=exposed,
                          ddp={"overlapped_percent": 100 * hidden / own if overlapped is None else overlapped,
                               "buckets": buckets})
    doc["allreduce"].update(own_duration=own, busbw_own_duration=2 * L / 2 / own / 1e9)
    return doc


def test_ddp_overlap_accounting_splits_the_reduction_into_hidden_and_exposed():
    acc = mnc_verdict.overlap_accounting(ddp_doc(own=0.040, hidden=0.030))
    assert acc["mode"] == "ddp" and acc["buckets"] == 4
    assert acc["own"] == 0.040 and acc["hidden"] == 0.030
    assert acc["exposed"] == pytest.approx(0.010) and acc["overlapped_percent"] == pytest.approx(75.0)
    assert acc["exposed_phase"] == pytest.approx(0.010)
    # the document's share (summed over iterations) is taken as it is, not recomputed from medians
    acc = mnc_verdict.overlap_accounting(ddp_doc(0.040, 0.030, overlapped=60.0))
    assert acc["overlapped_percent"] == 60.0
    # a hidden part above the own duration (medians of different iterations) exposes nothing, not < 0
    assert mnc_verdict.overlap_accounting(ddp_doc(0.040, 0.045, overlapped=100.0))["exposed"] == 0.0


def test_ddp_overlap_in_words():
    v = mnc_verdict.run_verdict(ddp_doc(own=0.040, hidden=0.030), make_doc(1, 1))
    assert v["busbw_GBps"] is None
    first, second = v["sentences"][:2]
    assert "no busbw from the allreduce phase (DDP reduces while backward runs: it is only the exposed " \
           "part)" in first
    assert "the reduction's own duration from DDP's timed comm hook is 40 ms" in first
    assert second == ("DDP reduced the gradient in 4 buckets while backward ran: 30 ms of its 40 ms "
                      "reduction (75%) was hidden behind backward, 10 ms exposed.")
    assert second in v["headline"]
    # the exposed part is what the step lost to communication, named as DDP's
    assert v["where_lost"]["exposed communication (DDP: the reduction backward still waited for)"] == \
        pytest.approx(0.010)


def test_ddp_with_one_bucket_says_why_nothing_overlapped():
    v = mnc_verdict.run_verdict(ddp_doc(own=0.002, hidden=0.0, buckets=1), make_doc(1, 1))
    said = v["sentences"][1]
    assert said.startswith("DDP reduced the gradient in 1 bucket while backward ran: 0 ms of its 2 ms "
                           "reduction (0%) was hidden")
    assert "a smaller bucket_cap_mb lets DDP start reducing earlier" in said


def test_serial_and_double_buffering_overlap_accounting():
    serial = make_doc(2, 1, allreduce=0.002)
    serial["overlap"].update(allreduce_own=stat(0.002), hidden=0.0, double_buffering=False)
    acc = mnc_verdict.overlap_accounting(serial)
    assert (acc["mode"], acc["overlapped_percent"], acc["exposed"]) == ("serial", 0.0, 0.002)
    assert mnc_verdict.overlap_sentence(acc) is None  # nothing overlaps, nothing said
    db = make_doc(2, 1, allreduce=0.001, exposed_only=True)
    db["overlap"].update(allreduce_own=stat(0.004), hidden=0.003, double_buffering=True)
    acc = mnc_verdict.overlap_accounting(db)
    assert (acc["mode"], acc["overlapped_percent"]) == ("double-buffering", pytest.approx(75.0))
    assert mnc_verdict.overlap_sentence(acc) == ("Double buffering hid 3 ms of the reduction's 4 ms behind "
                                                 "the next iteration's compute (75%).")


def test_a_report_of_both_frameworks_compares_them_per_p():
    def ready(d, samples):
        d["instrumentation"] = {"overhead_percent": 0.5, "rounds": [{"iterations": 5, "plain_wall": 1.0}]}
        d["throughput"]["samples_per_s"] = samples
        d["imbalance"] = stat(0.0)
        d["ceilings"]["rows"].append({"path": "host-mpi", "layout": "packed", "label": "x", "arrays": 1,
                                      "repetitions": 10, "time": 0.05, "busbw": 2.0, "spread": stat(0.05)})
        return d

    chainer = [ready(make_doc(1, 1), 100.0), ready(make_doc(2, 1, allreduce=0.05, ceiling=0.04), 150.0)]
    torch_base = ready(make_doc(1, 1), 120.0)
    torch_base["config"]["framework"] = "pytorch"
    torch_two = ready(ddp_doc(own=0.040, hidden=0.030), 210.0)
    rep = mnc_bench_report.build_report([*chainer, torch_base, torch_two])
    assert [r["processes"] for r in rep["runs"]] == [1, 2] and rep["framework"] == "chainer"
    assert [r["processes"] for r in rep["frameworks"]["pytorch"]["runs"]] == [1, 2]
    comp = rep["framework_comparison"]
    assert comp["frameworks"] == ["chainer", "pytorch"]
    rows = {(r["processes"], r["framework"]): r for r in comp["rows"]}
    assert set(rows) == {(1, "chainer"), (1, "pytorch"), (2, "chainer"), (2, "pytorch")}
    # ChainerMN's busbw is over its allreduce phase, DDP's over the reduction's own duration
    assert rows[2, "chainer"]["busbw_over"] == "allreduce phase"
    assert rows[2, "pytorch"]["busbw_over"] == "reduction's own duration"
    assert rows[2, "pytorch"]["busbw"] == pytest.approx(2 * L / 2 / 0.040 / 1e9)
    assert rows[2, "pytorch"]["percent_of_host_mpi"] == pytest.approx(100 * rows[2, "pytorch"]["busbw"] / 2.0)
    assert comp["sentences"] == ["p = 1: PyTorch DDP 120.0 samples/s, ChainerMN 100.0 (1.20x)",
                                 "p = 2: PyTorch DDP 210.0 samples/s, ChainerMN 150.0 (1.40x)"]
    rep["verdict"] = mnc_verdict.assess(rep)
    rep["frameworks"]["pytorch"]["verdict"] = mnc_verdict.assess(rep["frameworks"]["pytorch"])
    md = mnc_bench_markdown.render_markdown(rep)
    assert md.startswith("# ChainerMN and PyTorch DDP scaling report")
    assert "## Frameworks compared" in md and "| 2 | PyTorch DDP | 210.0 |" in md
    assert "PyTorch DDP's verdict:" in md and "was hidden behind backward" in md
