"""One benchmark run on every rank: the timed passes, then the ceilings, then the document.

``train.loop`` holds the timed loop, ``train.ceilings`` the communication
ceilings, ``train.document`` the JSON document and trace (train/README.md
describes both). Nothing here imports ``train.cli``: the command line calls ``run``.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from train import ceilings, correctness, document, environment
from train.loop import Runner, chunk_sizes, log

DTYPE_BYTES = {"float16": 2, "float32": 4}


def run(args) -> dict | None:
    r = Runner(args)
    rank, size = r.rank, r.size
    log(rank, f"{args.model} on {size} process(es), {args.communicator} communicator, "
        f"batch {args.batchsize}/process ({args.scaling} scaling), {args.iterations} iterations x 2 passes")
    r.setup()
    log(rank, f"gradient: {r.grad_bytes} bytes in {r.grad_arrays} arrays; warm-up {args.warmup} iterations")
    r.warmup()
    before = r.evaluate()
    validation = {"before": r.validate()} if args.validation else None

    # Alternate plain and instrumented chunks: both passes see the same drift.
    chunks = chunk_sizes(args.iterations, args.rounds)
    r.mpi.Barrier()
    origin = time.perf_counter()
    walls = []  # (plain, instrumented) seconds per round
    stamps, loading = [], []
    for n in chunks:
        plain_s = r.plain(n)
        s, st, ld = r.instrumented(n, origin)
        walls.append((plain_s, s))
        stamps.append(st)
        loading.append(ld)
    stamps = np.concatenate(stamps)
    loading = np.concatenate(loading)
    # Proof that the gradients were averaged: the ranks' parameters agree.
    if args.double_buffering:
        r.optimizer.wait()
        r.read_own_duration()
    r.sync()
    after = r.evaluate()
    if validation is not None:
        validation.update(after=r.validate(), samples=args.validation,
                          per_rank=r.mpi.allgather(len(r.batches.validation)),
                          evaluator="chainermn.create_multi_node_evaluator over chainer's Evaluator: each "
                                    "rank evaluates its shard of the held-out samples, the figures are the "
                                    "mean over ranks; after the warm-up and after the timed passes")
    # One more iteration, untimed, through the same reduction: is it the ranks' mean?
    correct = correctness.require_averaged(r, correctness.check_gradients, correctness.check,
                                           "measuring raw allreduce and point-to-point bandwidth")

    allreduce_bytes = r.grad_bytes
    if args.allreduce_dtype:
        allreduce_bytes = r.grad_elements * DTYPE_BYTES[args.allreduce_dtype]
    sweep = ceilings.allreduce_sweep(r, ceilings.sweep_sizes(allreduce_bytes, args.sweep_max_bytes),
                                     args.sweep_iters, allreduce_bytes)
    measured = {
        "sweep": sweep,
        "ceilings": ceilings.at_allreduce_size(r, args, sweep, allreduce_bytes),
        "p2p": ceilings.p2p(r, args.p2p_bytes, args.p2p_iters),
        # small messages: the latency a ring or recursive-doubling allreduce pays per step
        "p2p_latency": ceilings.p2p(r, 8 if args.p2p_bytes else 0, max(20, args.p2p_iters)),
        "correctness": correct,
        "learning": {"before": before, "after": after, "validation": validation,
                     "note": "loss and accuracy on each rank's next batch (mean over ranks, eval mode), "
                             "after the warm-up and after the timed passes"},
        "ranks": r.mpi.gather(environment.rank_record(r), root=0),
        "device_buffer_allreduce": environment.device_buffer_allreduce(r),
    }
    cost = r.instrumentation_cost()
    r.batches.close()

    gathered = r.mpi.gather((stamps, loading, np.array(walls), cost, np.array(r.own_durations)), root=0)
    if rank != 0:
        r.mpi.Barrier()
        return None

    doc = document.document(args, r, gathered, measured, allreduce_bytes)
    if args.trace:
        document.write_json(args.trace, document.chrome_trace([g[0] for g in gathered], r.hosts))
        doc["trace"] = os.path.abspath(args.trace)
    if args.out:
        document.write_json(args.out, doc)
    if args.json_stdout:
        print("MNCBENCH_JSON " + json.dumps(doc, separators=(",", ":")), flush=True)
    thr = doc["throughput"]
    log(rank, f"throughput {thr['samples_per_s']:.1f} samples/s; "
        f"instrumentation overhead {doc['instrumentation']['overhead_percent']:+.2f}% measured, "
        f"{doc['instrumentation']['estimated_overhead_percent']:.2f}% from barrier cost; "
        f"allreduce median {doc['phases']['allreduce']['median'] * 1e3:.3f} ms"
        + (f" -> {args.out}" if args.out else ""))
    ov = doc["overlap"]
    log(rank, f"step {ov['measured_step'] * 1e3:.2f} ms measured; perfect-overlap bound max(compute, "
        f"allreduce) + update = " + (f"{ov['perfect_overlap_step'] * 1e3:.2f} ms"
                                    if ov["perfect_overlap_step"] is not None else "n/a (allreduce's own "
                                    "duration not measurable)"))
    r.mpi.Barrier()
    return doc

