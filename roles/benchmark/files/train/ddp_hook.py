"""DDP's gradient reduction, timed bucket by bucket: the comm hook and the overlap accounting.

DistributedDataParallel reduces the gradient in buckets while backward still runs:
when every gradient of a bucket is ready, its communication hook starts the
bucket's allreduce, and backward returns once every bucket is reduced. The hook
here is DDP's default one (divide by the world size, allreduce the bucket on the
process group, copy back) with a clock around it: per bucket its size, when it was
handed over (the gradients ready) and when its reduction finished (the future's
callback on the CPU; CUDA events on GPUs). From those stamps, per iteration:

* ``ready`` — the last bucket's hand-over: every gradient is computed (the end of compute);
* ``own`` — the time some bucket was being reduced (the union of the buckets' intervals);
* ``hidden`` — the part of ``own`` before ``ready``, behind backward's computation;
* ``exposed`` — the rest, which the step waits for.

The accounting functions are pure (lists of floats in, floats out) and unit-tested.
"""

from __future__ import annotations

import time


def busy(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of (start, end) intervals."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def busy_before(intervals: list[tuple[float, float]], t: float) -> float:
    """Seconds of the union of the intervals that lie before ``t``."""
    return busy([(a, min(b, t)) for a, b in intervals if a < t])


def split(intervals: list[tuple[float, float]], ready: float) -> dict:
    """own, hidden (before ``ready``) and exposed (after) seconds of one iteration's reductions."""
    own = busy(intervals)
    hidden = busy_before(intervals, ready)
    return {"own": own, "hidden": hidden, "exposed": own - hidden}


class TimedAllreduce:
    """State of the timed hook: the stamps of the current iteration, and copies for the gradient check."""

    def __init__(self, world: int, cuda: bool = False):
        self.world = world
        self.cuda = cuda
        self.stamps: list[list] = []  # per bucket: [index, bytes, handed over, reduced]
        self.origin = None
        self.local: dict[int, object] | None = None  # parameter id -> local gradient (the check only)

    def start(self) -> None:
        """At the iteration's t0: the clock's origin (a CUDA event on GPUs)."""
        self.stamps = []
        self.origin = _stamp(self)

    def _offset(self, stamp) -> float:
        if self.cuda:
            return self.origin.elapsed_time(stamp) / 1e3
        return stamp - self.origin

    def finish(self) -> dict:
        """After backward returned (and the device synchronised): this iteration's figures, in
        seconds from ``start``; on GPUs from CUDA events, on the device's clock."""
        rows = [(i, n, self._offset(a), self._offset(b)) for i, n, a, b in self.stamps]
        if not rows:
            return {"buckets": [], "ready": None, "own": 0.0, "hidden": 0.0, "exposed": 0.0}
        ready = max(r[2] for r in rows)
        out = split([(r[2], r[3]) for r in rows], ready)
        out.update(ready=ready, buckets=[{"index": int(i), "bytes": int(n), "duration": b - a}
                                         for i, n, a, b in rows])
        return out


def _stamp(state: TimedAllreduce):
    if state.cuda:
        import torch

        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev
    return time.perf_counter()


def timed_allreduce_hook(state: TimedAllreduce, bucket):
    """DDP comm hook: the mean of the bucket over the process group, as DDP's default hook, timed."""
    import torch.distributed as dist

    tensor = bucket.buffer()
    if state.local is not None:  # the gradient check: every local gradient before the reduction
        for p, g in zip(bucket.parameters(), bucket.gradients(), strict=True):
            state.local[id(p)] = g.detach().clone()
    rec = [bucket.index(), tensor.numel() * tensor.element_size(), _stamp(state), None]
    state.stamps.append(rec)
    tensor.div_(state.world)  # the mean: DDP's default hook divides by the world size, then sums
    fut = dist.all_reduce(tensor, async_op=True).get_future()

    def reduced(f):
        rec[3] = _stamp(state)
        return f.value()[0]

    return fut.then(reduced)


def overlap_record(phases: dict, per_rank: list[list[dict]], measured_step: float) -> dict:
    """The document's ``overlap`` for DDP, from every rank's per-iteration hook figures.

    Per iteration the rank whose reduction took least time gives ``own`` and ``hidden``: the
    last rank to hand its buckets over, which waited for no other (a faster rank's reduction
    also holds its wait for the slowest one, which the wait phase already counts). The record
    has the same keys as ChainerMN's (``train.document.overlap_record``) and, under ``ddp``, the
    share of the reduction that overlapped backward and the buckets.
    """
    from train import metrics

    n = min(len(x) for x in per_rank)
    own, hidden = [], []
    for i in range(n):
        last = min((x[i] for x in per_rank), key=lambda f: f["own"])
        own.append(last["own"])
        hidden.append(last["hidden"])
    med = {k: phases[k]["median"] for k in ("compute", "wait", "allreduce", "update")}
    own_s = metrics.summarize(own) if n else None
    own_t = own_s["median"] if own_s else None
    hidden_t = metrics.percentile(hidden, 50) if n else None
    bound = None if own_t is None else max(med["compute"], own_t) + med["update"]
    total_own = sum(own)
    last = sorted(per_rank[0][n - 1]["buckets"], key=lambda b: b["index"]) if n else []
    durations = {}
    for f in per_rank[0][:n]:
        for b in f["buckets"]:
            durations.setdefault(b["index"], []).append(b["duration"])
    return {
        "mode": "ddp",
        "double_buffering": False,
        "allreduce_exposed": med["allreduce"],
        "allreduce_own": own_s,
        "hidden": hidden_t,
        "serial_step": None if own_t is None else med["compute"] + med["wait"] + own_t + med["update"],
        "perfect_overlap_step": bound,
        "measured_step": measured_step,
        "could_gain": None if bound is None else measured_step - bound,
        "ddp": {
            "overlapped_percent": 100.0 * sum(hidden) / total_own if total_own > 0 else None,
            "hidden": metrics.summarize(hidden) if n else None,
            "exposed": metrics.summarize([o - h for o, h in zip(own, hidden, strict=True)]) if n else None,
            "buckets": len(last),
            "bucket_bytes": [b["bytes"] for b in last],
            "bucket_duration_median": [metrics.percentile(durations[b["index"]], 50) for b in last],
            "hook": "DDP's default reduction (bucket / p, all_reduce on the process group) in a Python "
                    "comm hook that stamps each bucket's hand-over and the end of its reduction",
        },
        "note": "per iteration the rank whose reduction took least time (the last to hand its buckets over, "
                "which waited for no other rank): allreduce_own is the time some bucket was being reduced "
                "(union of the buckets' intervals), hidden the part of it before the last bucket's gradients "
                "were ready (behind backward's computation); overlapped_percent = hidden over own, summed "
                "over iterations. allreduce_exposed is the allreduce phase, the reduction "
                "backward still waited for after compute. perfect_overlap_step = max(compute, own) + update; "
                "measured_step is the plain pass's time per iteration",
    }
