"""One PyTorch DDP benchmark run on every rank: the timed passes, the checks, the ceilings, the document.

The same order and the same document as ChainerMN's run (``train.bench``); what
differs is the runner (``train.torch_loop``), the proof (``train.torch_correctness``)
and the ceilings on DDP's backend (``train.torch_ceilings``).
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from train import ceilings, correctness, document, environment, torch_ceilings, torch_correctness
from train.timing import chunk_sizes, log


def run(args) -> dict | None:
    from train.torch_loop import TorchRunner

    r = TorchRunner(args)
    rank, size = r.rank, r.size
    log(rank, f"{args.model} on {size} process(es), PyTorch DDP on {r.backend} (started by "
        f"{r.launch['launcher']}), batch {args.batchsize}/process ({args.scaling} scaling), "
        f"{args.iterations} iterations x 2 passes")
    r.setup()
    log(rank, f"gradient: {r.grad_bytes} bytes in {r.grad_arrays} arrays; warm-up {args.warmup} iterations")
    r.warmup()
    before = r.evaluate()
    validation = {"before": r.validate()} if args.validation else None

    chunks = chunk_sizes(args.iterations, args.rounds)
    r.mpi.Barrier()
    origin = time.perf_counter()
    walls, stamps, loading = [], [], []
    for n in chunks:
        plain_s = r.plain(n)
        s, st, ld = r.instrumented(n, origin)
        walls.append((plain_s, s))
        stamps.append(st)
        loading.append(ld)
    stamps, loading = np.concatenate(stamps), np.concatenate(loading)
    r.sync()
    after = r.evaluate()
    if validation is not None:
        validation.update(after=r.validate(), samples=args.validation,
                          per_rank=r.mpi.allgather(len(r.batches.validation)),
                          evaluator="each rank evaluates its shard of the held-out samples (eval mode, "
                                    "no_grad), the figures are the mean over ranks; after the warm-up and "
                                    "after the timed passes")
    correct = correctness.require_averaged(r, torch_correctness.check_gradients, torch_correctness.check,
                                           "measuring the ceilings")

    allreduce_bytes = r.grad_bytes
    sweep = ceilings.allreduce_sweep(r, ceilings.sweep_sizes(allreduce_bytes, args.sweep_max_bytes),
                                     args.sweep_iters, allreduce_bytes)
    measured = {
        "sweep": sweep,
        "ceilings": torch_ceilings.at_allreduce_size(r, args, sweep, allreduce_bytes),
        "p2p": ceilings.p2p(r, args.p2p_bytes, args.p2p_iters),
        "p2p_latency": ceilings.p2p(r, 8 if args.p2p_bytes else 0, max(20, args.p2p_iters)),
        "correctness": correct,
        "learning": {"before": before, "after": after, "validation": validation,
                     "note": "loss and accuracy on each rank's next batch (mean over ranks, eval mode), "
                             "after the warm-up and after the timed passes"},
        "ranks": r.mpi.gather(environment.rank_record(r), root=0),
        "device_buffer_allreduce": None,
    }
    cost = r.instrumentation_cost()
    r.batches.close()

    gathered = r.mpi.gather((stamps, loading, np.array(walls), cost, np.array(r.own_durations),
                             r.ddp_iterations), root=0)
    if rank != 0:
        r.mpi.Barrier()
        _finish(r)
        return None
    doc = document.document(args, r, gathered, measured, allreduce_bytes)
    if args.trace:
        document.write_json(args.trace, document.chrome_trace([g[0] for g in gathered], r.hosts))
        doc["trace"] = os.path.abspath(args.trace)
    if args.out:
        document.write_json(args.out, doc)
    if args.json_stdout:
        print("MNCBENCH_JSON " + json.dumps(doc, separators=(",", ":")), flush=True)
    ov = doc["overlap"]
    share = ov["ddp"]["overlapped_percent"]
    log(rank, f"throughput {doc['throughput']['samples_per_s']:.1f} samples/s; DDP's reduction "
        f"{ov['allreduce_own']['median'] * 1e3:.3f} ms per step, "
        + ("n/a" if share is None else f"{share:.0f}%") + " of it behind backward, "
        f"{doc['phases']['allreduce']['median'] * 1e3:.3f} ms exposed"
        + (f" -> {args.out}" if args.out else ""))
    r.mpi.Barrier()
    _finish(r)
    return doc


def _finish(r) -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
