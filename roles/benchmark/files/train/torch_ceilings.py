"""The PyTorch engine's ceilings at exactly L: ``torch.distributed.all_reduce`` on DDP's own backend.

Beside the host MPI row of the sweep (``train.ceilings``, MPI as for ChainerMN), the
reference is one ``all_reduce`` of L bytes (float32) on the process group DDP reduces on:
gloo on the CPU (host tensors), NCCL on GPUs (device tensors), timed as the training loop
times its reduction (barrier, operation, device sync; slowest rank; median). A second row
reduces L in DDP's own buckets, one ``all_reduce`` per bucket, so the cost of bucketing shows.
"""

from __future__ import annotations

from train import ceilings

LABELS = {
    ("gloo", "packed"): "one torch.distributed all_reduce of a host tensor of L on the gloo process group",
    ("gloo", "per-bucket"): "one gloo all_reduce per DDP bucket, host tensors (what DDP's hook reduces)",
    ("nccl", "packed"): "one torch.distributed all_reduce of a device tensor of L on the NCCL process group",
    ("nccl", "per-bucket"): "one NCCL all_reduce per DDP bucket, device tensors (what DDP's hook reduces)",
}


def bucket_bytes(r) -> list[int]:
    """DDP's bucket sizes, as the last timed iteration reduced them (index order)."""
    last = r.ddp_iterations[-1]["buckets"] if r.ddp_iterations else []
    return [b["bytes"] for b in sorted(last, key=lambda b: b["index"])]


def at_allreduce_size(r, args, sweep: list[dict], allreduce_bytes: int) -> dict:
    """The ceilings at exactly L and which one the DDP reduction compares with (the packed backend row)."""
    import torch
    import torch.distributed as dist

    rows = [{k: v for k, v in x.items() if k != "at_L"} for x in sweep if x["at_L"]]
    backend, n = r.backend, r.grad_elements
    buf = torch.zeros(n, dtype=torch.float32, device=r.device)
    times = ceilings.timed(r, lambda b=buf: dist.all_reduce(b), args.sweep_iters, allreduce_bytes, True,
                           r.sync)
    rows.append(ceilings.row(r, backend, "packed", LABELS[backend, "packed"], 4 * n, n, "float32", 1, times))
    del buf
    sizes = bucket_bytes(r)
    if len(sizes) > 1:
        bufs = [torch.zeros(s // 4, dtype=torch.float32, device=r.device) for s in sizes]

        def per_bucket():
            for b in bufs:
                dist.all_reduce(b)

        times = ceilings.timed(r, per_bucket, args.sweep_iters, allreduce_bytes, True, r.sync)
        rows.append(ceilings.row(r, backend, "per-bucket", LABELS[backend, "per-bucket"], sum(sizes),
                                 sum(sizes) // 4, "float32", len(sizes), times))
        del bufs
    ref = next(i for i, x in enumerate(rows) if (x["path"], x["layout"]) == (backend, "packed"))
    return {"bytes": allreduce_bytes, "rows": rows, "reference": ref, "skipped": skipped_paths(r),
            "repetition_rule": ceilings.REPETITION_RULE, "buckets": sizes,
            "note": "each ceiling timed as the training loop times its reduction: barrier, the operation, "
                    "device sync; per repetition the slowest rank; time is the median. reference is the row "
                    f"DDP's reduction is compared with (one all_reduce of L on its {backend} process group)"}


def skipped_paths(r) -> list[dict]:
    out = [{"path": "device-mpi", "reason": "DDP hands its buckets to the torch.distributed process group, "
                                            "not to MPI"}]
    if r.backend == "gloo":
        out.append({"path": "nccl", "reason": "no --gpu: NCCL reduces device memory only"})
    else:
        out.append({"path": "gloo", "reason": "--gpu: DDP reduces on the NCCL process group"})
    return out
