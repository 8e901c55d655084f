"""The JSON document rank 0 writes, and the Chrome trace of every rank's phases."""

from __future__ import annotations

import datetime
import json
import os
import sys

import numpy as np

from train import SCHEMA, ddp_hook, metrics
from train.environment import environment
from train.timing import PHASES, chunk_sizes


def write_json(path: str, doc: dict) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def chrome_trace(stamps: list[np.ndarray], hosts: list[str]) -> dict:
    """Chrome trace events ('X' complete events, microseconds), one process per rank."""
    events = []
    for rank, st in enumerate(stamps):
        events.append({"name": "process_name", "ph": "M", "pid": rank,
                       "args": {"name": f"rank {rank} ({hosts[rank]})"}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": rank, "args": {"sort_index": rank}})
        for i, row in enumerate(st):
            for k, phase in enumerate(PHASES):
                events.append({"name": phase, "cat": "phase", "ph": "X", "pid": rank, "tid": 0,
                               "ts": row[k] * 1e6, "dur": (row[k + 1] - row[k]) * 1e6,
                               "args": {"iteration": i}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"schema": SCHEMA, "clock": "seconds since a common barrier, per rank"}}


def document(args, r, gathered, measured: dict, allreduce_bytes: int) -> dict:
    size = r.size
    # durations[rank, iteration, phase]; phases sum to total on every rank by construction
    durations = np.stack([np.diff(g[0], axis=1) for g in gathered])
    totals = durations.sum(axis=2)
    critical = durations.max(axis=0)  # max across ranks, per iteration and phase
    phases = {name: metrics.summarize(critical[:, k]) for k, name in enumerate(PHASES)}
    phases["total"] = metrics.summarize(totals.max(axis=0))
    # The average rank's iteration: these do add up to the total, and wait is the
    # mean time a rank idles for the slowest one. The report's stacked bars use them.
    average = durations.mean(axis=0)
    breakdown = {name: metrics.summarize(average[:, k]) for k, name in enumerate(PHASES)}
    breakdown["total"] = metrics.summarize(totals.mean(axis=0))
    spread = durations.max(axis=0) - durations.min(axis=0)  # [iteration, phase], slowest - fastest rank
    imbalance = spread[:, 0]
    data_time = np.stack([g[1] for g in gathered]).max(axis=0)

    n = args.iterations
    walls = np.stack([g[2] for g in gathered]).max(axis=0)  # [round, (plain, instrumented)], slowest rank
    plain_s, instr_s = (float(x) for x in walls.sum(axis=0))
    samples = args.batchsize * size * n
    # The median of the per-round ratios: one round hit by a noisy neighbour does not decide it.
    overhead = float(np.median(walls[:, 1] / walls[:, 0])) - 1.0
    barrier_s = max(g[3][0] for g in gathered)
    syncs_s = max(g[3][1] for g in gathered)
    barriers = getattr(r, "barriers_per_iteration", 2)
    estimated = (barriers * barrier_s + syncs_s) / (plain_s / n)

    per_rank = []
    for rk in range(size):
        means = {name: float(durations[rk, :, k].mean()) for k, name in enumerate(PHASES)}
        means["total"] = float(totals[rk].mean())
        per_rank.append({"rank": rk, "host": r.hosts[rk], "mean": means,
                         "data": float(gathered[rk][1].mean())})

    framework = getattr(r, "framework", "chainer")
    if framework == "pytorch":
        overlap = ddp_hook.overlap_record(phases, [g[5] for g in gathered], plain_s / n)
    else:
        overlap = overlap_record(args, phases, gathered, plain_s / n)
    env = environment(r, measured["ranks"])
    if env.get("cuda_aware_mpi") is not None:
        env["cuda_aware_mpi"] = dict(env["cuda_aware_mpi"],
                                     device_buffer_allreduce=measured["device_buffer_allreduce"])
    a = args
    return {
        "schema": SCHEMA,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv[1:],
        "units": {"time": "s", "bandwidth": "GB/s (1e9 B/s)", "size": "bytes"},
        "config": {
            "framework": framework, "model": a.model, "batchsize": a.batchsize, "scaling": a.scaling,
            "global_batchsize": a.batchsize * size, "unit": a.unit if a.model == "mlp" else None,
            "insize": a.insize if a.model == "resnet50" or r.dataset.format in ("list", "folder") else None,
            "classes": a.classes, "communicator": a.communicator, "gpu": a.gpu,
            "processes": size, "iterations": n, "warmup": a.warmup, "rounds": a.rounds,
            "data": a.data, "data_format": r.dataset.format,
            "data_samples": None if r.dataset.format == "synthetic" else len(r.dataset),
            "data_classes": getattr(r.dataset, "classes", None) and len(r.dataset.classes),
            "loaders": r.batches.workers,
            "allreduce_dtype": a.allreduce_dtype, "double_buffering": a.double_buffering,
            "optimizer": type(r.actual).__name__, "seed": a.seed,
            "bucket_cap_mb": a.bucket_cap_mb if framework == "pytorch" else None,
        },
        "environment": env,
        "gradient": {"bytes": r.grad_bytes, "arrays": r.grad_arrays, "elements": r.grad_elements,
                     "dtype": "float32", "allreduce_bytes": allreduce_bytes},
        "phases": phases,
        "phases_note": ("per iteration the max across ranks of each phase (the critical path); "
                        "total is the max across ranks of each rank's t4 - t0, so the phases "
                        "add up to more than the total by about the imbalance"),
        "breakdown": breakdown,
        "breakdown_note": "per iteration the mean across ranks of each phase; compute + wait + "
                          "allreduce + update = total for every iteration",
        "imbalance": metrics.summarize(imbalance),
        "imbalance_note": "per iteration the slowest minus the fastest rank's compute",
        "spread": {name: metrics.summarize(spread[:, k]) for k, name in enumerate(PHASES)},
        "spread_note": "per iteration and phase the slowest minus the fastest rank; the max-across-ranks "
                       "phases add up to at most the total plus these",
        "data_loading": metrics.summarize(data_time),
        "per_rank": per_rank,
        "throughput": {
            "samples_per_s": samples / plain_s,
            "samples_per_s_per_process": samples / plain_s / size,
            "iterations": n, "samples": samples, "wall": plain_s,
            "instrumented_samples_per_s": samples / instr_s,
        },
        "instrumentation": {
            "plain_wall": plain_s, "instrumented_wall": instr_s,
            "rounds": [{"iterations": int(c), "plain_wall": float(w[0]), "instrumented_wall": float(w[1])}
                       for c, w in zip(chunk_sizes(n, args.rounds), walls, strict=True)],
            "overhead": overhead, "overhead_percent": overhead * 100.0,
            "overhead_total_percent": (instr_s / plain_s - 1.0) * 100.0,
            "barrier": barrier_s, "device_syncs": syncs_s,
            "estimated_overhead": estimated, "estimated_overhead_percent": estimated * 100.0,
            "barriers_per_iteration": barriers,
            "note": "median over rounds of instrumented / plain wall time - 1 (same iterations, "
                    f"alternating passes); the instrumented pass adds {barriers} barrier(s) and the device "
                    "syncs per iteration. estimated_overhead is their idle cost (median barrier and "
                    "syncs, slowest rank) over the plain iteration time, which a busy shared machine "
                    "does not blur",
        },
        "allreduce": allreduce_record(args, size, phases, measured["ceilings"], allreduce_bytes,
                                      r.grad_arrays, overlap["allreduce_own"], framework),
        "raw_allreduce": measured["sweep"],
        "raw_allreduce_memory": "host",
        "ceilings": measured["ceilings"],
        "p2p": measured["p2p"],
        "p2p_latency": measured["p2p_latency"],
        "correctness": measured["correctness"],
        "learning": measured["learning"],
        "overlap": overlap,
        "trace": None,
        # Every rank's t0..t4 per instrumented iteration (seconds since a common barrier, to the
        # microsecond): the report merges them into one Chrome trace, one row per rank.
        "timeline": {"phases": list(PHASES), "hosts": r.hosts,
                     "stamps": [np.round(g[0], 6).tolist() for g in gathered]},
    }


def allreduce_record(args, size: int, phases: dict, ceil: dict, allreduce_bytes: int, arrays: int,
                     own: dict | None = None, framework: str = "chainer") -> dict:
    """The gradient allreduce in training, against the ceiling at L on the same path.

    Under double buffering, and under DDP (which reduces while backward runs), the phase is
    only the exposed part; the bandwidth then comes from the reduction's own duration (``own``:
    CUDA events on its stream, or DDP's timed comm hook), labelled as such.
    """
    t = phases["allreduce"]["median"]
    ddp = framework == "pytorch"
    exposed = bool(args.double_buffering) or ddp
    what = "DDP's bucket reductions left when compute ended" if ddp else "multi_node_mean_grad"
    rec = {
        "bytes": allreduce_bytes, "arrays": arrays, "time": t, "spread": phases["allreduce"],
        # Under double buffering the phase is the wait for the previous reduction plus the
        # launch, under DDP what backward still waited for after its last gradient: the part
        # not hidden behind compute. A bandwidth from it would be no bandwidth.
        "exposed_only": exposed,
        "algbw": None if exposed else metrics.algbw(allreduce_bytes, t),
        "busbw": None if exposed else metrics.busbw(allreduce_bytes, t, size),
        "note": what + ", median over iterations of the max across ranks"
                + ("; only the exposed part, so no bandwidth is derived from it" if exposed else ""),
    }
    ref = ceil["rows"][ceil["reference"]] if ceil.get("reference") is not None else None
    keys = ("path", "layout", "label", "time", "busbw")
    rec["ceiling"] = None if ref is None else {k: ref[k] for k in keys}
    if ref is not None and not exposed:
        rec["framework_overhead"] = t - ref["time"]
        rec["framework_overhead_percent"] = 100.0 * (t - ref["time"]) / t if t else None
        rec["busbw_percent_of_ceiling"] = (100.0 * rec["busbw"] / ref["busbw"]
                                           if rec["busbw"] and ref["busbw"] else None)
    if exposed:
        own_t = (own or {}).get("median")
        rec["exposed_wait"] = t
        rec["own_duration"] = own_t
        rec["busbw_own_duration"] = None if not own_t else metrics.busbw(allreduce_bytes, own_t, size)
        rec["own_duration_note"] = (
            "the reduction's own duration: the time some DDP bucket was being reduced (the timed comm hook), "
            "measured while it overlapped backward; busbw_own_duration is 2L(p-1)/p over it" if ddp else
            "the reduction's own duration on its stream (CUDA events; pack, NCCL allreduce, unpack), "
            "measured while it overlapped the next iteration's compute; busbw_own_duration is 2L(p-1)/p "
            "over it")
        if ref is not None and rec["busbw_own_duration"] and ref["busbw"]:
            rec["busbw_own_percent_of_ceiling"] = 100.0 * rec["busbw_own_duration"] / ref["busbw"]
    per_array = next((x for x in ceil["rows"] if x["layout"] == "per-array"), None)
    if per_array is not None and ref is not None:
        rec["per_array_cost"] = per_array["time"] - ref["time"]
    return rec


def overlap_record(args, phases: dict, gathered, measured_step: float) -> dict:
    """How much overlapping communication with compute could still buy.

    The perfect-overlap bound max(compute, allreduce) + update is the step with the
    allreduce entirely hidden behind compute, against the measured (plain) step. Without
    double buffering the allreduce's own duration is its phase; with it, the phase is only
    the exposed wait, and the own duration comes from CUDA events on the reduction's stream.
    """
    med = {k: phases[k]["median"] for k in PHASES}
    exposed = med["allreduce"]
    own = None
    if not args.double_buffering:
        own = phases["allreduce"]
    else:
        per_rank = [np.asarray(g[4]) for g in gathered]
        n = min(len(x) for x in per_rank)
        if n:
            own = metrics.summarize(np.stack([x[:n] for x in per_rank]).max(axis=0))
    own_t = own["median"] if own else None
    bound = None if own_t is None else max(med["compute"], own_t) + med["update"]
    return {
        "mode": "double-buffering" if args.double_buffering else "serial",
        "double_buffering": bool(args.double_buffering),
        "allreduce_exposed": exposed,
        "allreduce_own": own,
        "hidden": None if own_t is None else max(0.0, own_t - exposed),
        "serial_step": med["compute"] + med["wait"] + own_t + med["update"] if own_t is not None else None,
        "perfect_overlap_step": bound,
        "measured_step": measured_step,
        "could_gain": None if bound is None else measured_step - bound,
        "ddp": None,
        "note": "medians of the slowest rank; measured_step is the plain pass's time per iteration; "
                "perfect_overlap_step = max(compute, allreduce own duration) + update; hidden = own "
                "duration - exposed wait (0 without double buffering)",
    }
