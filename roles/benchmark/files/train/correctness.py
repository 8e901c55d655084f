"""Proof that the gradients were averaged: the reduced gradient is the ranks' mean, and the ranks'
parameters agree after the timed passes.

Data-parallel training keeps one model: every rank starts from rank 0's
parameters (the multi-node optimizer's first update broadcasts them) and
applies the same averaged gradient, so the ranks' parameters stay identical.
A reduction that does not happen (or averages the wrong thing) lets them drift
apart within a few iterations, because each rank trains on its own batches.

Every rank computes a checksum of its parameters (sha256 of the bytes, their
float64 sum and sum of magnitudes), and the element-wise largest and smallest
value across ranks (two MPI_Allreduce, MAX and MIN, of the packed parameters,
after timing) give the largest difference between any two ranks. The run
fails when that difference exceeds ``TOLERANCE`` times the largest parameter.

Agreement alone does not show an *average*: a reduction that summed, or
reduced something else identically on every rank, would agree too. So
``check_gradients`` runs one more iteration, untimed, through the timed loop's
own reduction (``Runner._reduce_and_update``): every rank keeps a copy of its
local gradient before the reduction, one MPI_Allreduce of those copies (host
float32, SUM / p) gives their mean, and after the reduction every rank's
gradient must equal that mean to ``GRAD_TOLERANCE`` of its largest element.
It also records how far the ranks' local gradients were from the mean: if they
were identical (the same data on every rank) the check could not tell a missing
reduction, and the record says so.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from train.errors import BenchmarkError
from train.timing import log

# float32 reductions that add in another order differ in the last bits (~1e-7
# relative); a missing or wrong reduction differs by the learning rate's order.
TOLERANCE = 1e-5
# Test-only: the rank named here adds 1e-3 of the largest parameter to one
# element before the check, which must then fail.
PERTURB_ENV = "MNCBENCH_TEST_PERTURB_RANK"
# The reduced gradient against the mean of the ranks' local gradients, over the largest |mean|:
# float32 sums in another order differ by ~p * 1e-7; float16 on the wire (pure_nccl's
# --allreduce-dtype) rounds each element to ~1e-3 before and after the sum. A missing reduction
# is off by the ranks' difference (order 1 on different batches), a sum instead of a mean by p - 1.
GRAD_TOLERANCE = {"float32": 1e-5, "float16": 2e-2}


def host_parameters(model) -> list[np.ndarray]:
    """Each parameter array as a host float32 copy, in the model's (sorted) order."""
    out = []
    for _, p in sorted(model.namedparams()):
        if p.array is None:
            continue
        a = p.array
        if not isinstance(a, np.ndarray):  # a CuPy array
            a = a.get()
        out.append(np.ascontiguousarray(a, dtype=np.float32))
    return out


def perturb_if_asked(model, rank: int) -> bool:
    target = os.environ.get(PERTURB_ENV)
    if target is None or int(target) != rank:
        return False
    params = [p for _, p in sorted(model.namedparams()) if p.array is not None]
    scale = max(float(abs(p.array).max()) for p in params)
    flat = params[0].array.reshape(-1)
    flat[0] += 1e-3 * scale
    return True


def checksum(arrays: list[np.ndarray]) -> dict:
    h = hashlib.sha256()
    total = magnitude = 0.0
    for a in arrays:
        h.update(a.tobytes())
        total += float(a.sum(dtype=np.float64))
        magnitude += float(np.abs(a).sum(dtype=np.float64))
    return {"sha256": h.hexdigest(), "sum": total, "sum_abs": magnitude}


def check(r) -> dict:
    """Collective: the ``correctness`` record, the same on every rank."""
    perturbed = perturb_if_asked(r.model, r.rank)
    return agreement(r, host_parameters(r.model), perturbed)


def agreement(r, arrays: list[np.ndarray], perturbed: bool) -> dict:
    """Collective: the ``correctness`` record from every rank's parameters as host float32 arrays."""
    MPI, mpi = r.MPI, r.mpi
    mine = checksum(arrays)
    flat = np.concatenate([a.ravel() for a in arrays]) if arrays else np.zeros(1, np.float32)
    hi, lo = flat.copy(), flat.copy()
    mpi.Allreduce(MPI.IN_PLACE, hi, op=MPI.MAX)
    mpi.Allreduce(MPI.IN_PLACE, lo, op=MPI.MIN)
    diff = (hi.astype(np.float64) - lo).max()
    scale = float(np.maximum(np.abs(hi), np.abs(lo)).max()) or 1.0
    worst = int(np.argmax(hi.astype(np.float64) - lo))
    per_rank = mpi.allgather({"rank": r.rank, "host": r.hosts[r.rank], **mine,
                              "perturbed_for_test": perturbed})
    relative = float(diff) / scale
    return {
        "agree": relative <= TOLERANCE,
        "bitwise_identical": len({c["sha256"] for c in per_rank}) == 1,
        "max_abs_diff": float(diff),
        "max_abs_param": scale,
        "relative_diff": relative,
        "worst_element": worst,
        "tolerance": TOLERANCE,
        "elements": int(flat.size),
        "per_rank": per_rank,
        "note": "after the timed passes: largest difference of any parameter element between any two "
                "ranks, over the largest |parameter|; the run fails above the tolerance",
    }


def require_averaged(r, check_gradients, check_parameters, next_step: str) -> dict:
    """The run's proof that the gradients were averaged, for either engine (its own checks given):
    one more reduction is the ranks' mean, then the ranks' parameters agree; a failure of either
    ends the run (BenchmarkError), naming it. Returns the correctness record, the gradient check
    under "gradients"; says on rank 0's log what was shown, then ``next_step``."""
    grads = check_gradients(r)
    if not grads["averaged"]:
        raise BenchmarkError(gradient_failure_message(grads))
    correct = check_parameters(r)
    correct["gradients"] = grads
    if not correct["agree"]:
        raise BenchmarkError(failure_message(correct))
    log(r.rank, f"the reduced gradient is the ranks' mean (largest difference {grads['relative_error']:.2g} "
        f"of its largest element) and the parameters agree on every rank (largest difference "
        f"{correct['relative_diff']:.2g} of the largest parameter); {next_step}")
    if not grads["distinguishes"]:
        log(r.rank, "warning: every rank computed the same local gradient (the same data on every rank), so "
            "the gradient check could not tell a missing reduction")
    return correct


def failure_message(record: dict) -> str:
    ranks = ", ".join(f"rank {c['rank']} ({c['host']}) sha256 {c['sha256'][:12]} sum {c['sum']:.9g}"
                      for c in record["per_rank"])
    return ("the ranks' parameters differ after the timed passes, so the gradients were not averaged: "
            f"largest difference {record['max_abs_diff']:.3g} = {record['relative_diff']:.3g} of the largest "
            f"parameter (tolerance {record['tolerance']:g}), at element {record['worst_element']}; {ranks}")


def _grads(params, zero_fill: bool) -> list[np.ndarray]:
    """Each parameter's gradient as a host float32 copy (zeros where none, as zero_fill reduces them)."""
    out = []
    for _, p in params:
        if p.array is None:
            continue
        g = p.grad
        if g is None:
            if not zero_fill:
                continue
            out.append(np.zeros(p.array.size, dtype=np.float32))
            continue
        if not isinstance(g, np.ndarray):  # a CuPy array
            g = g.get()
        out.append(np.asarray(g, dtype=np.float32).ravel())
    return out


def _packed(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(1, np.float32)


def check_gradients(r) -> dict:
    """Collective: one untimed iteration through the timed loop's reduction; the ``gradients`` record.

    Every rank's reduced gradient is compared with the mean of all ranks' local gradients
    (computed here by one host MPI_Allreduce of copies taken before the reduction).
    """
    MPI, mpi, model, opt = r.MPI, r.mpi, r.model, r.optimizer
    zero_fill = bool(getattr(opt, "zero_fill", True))
    x, t = r.to_device(*r.batches.next())
    mpi.Barrier()
    model.cleargrads()
    loss = model(x, t)
    loss.backward(loss_scale=r.actual._loss_scale)
    del loss
    r.sync()
    local = _packed(_grads(sorted(model.namedparams()), zero_fill))
    mean = local.copy()
    mpi.Allreduce(MPI.IN_PLACE, mean, op=MPI.SUM)
    mean /= r.size
    r._reduce_and_update([])  # exactly what every timed iteration runs
    source = "model"
    if r.args.double_buffering:
        # The reduction of this iteration's gradient runs on its own stream into the
        # optimizer's second copy of the model (the model now holds the previous one's).
        opt.wait()
        r.pending_events = None
        params, source = opt.target_params_list[1], "the double-buffering optimizer's second copy"
    else:
        r.sync()
        params = sorted(model.namedparams())
    reduced = _packed(_grads(params, zero_fill))
    return gradient_record(r, local, mean, reduced, source)


def gradient_record(r, local: np.ndarray, mean: np.ndarray, reduced: np.ndarray, source: str) -> dict:
    """Collective: the ``gradients`` record from this rank's packed local gradient (before the
    reduction), the mean of all ranks' local gradients, and this rank's reduced gradient."""
    mpi = r.mpi
    if reduced.size != mean.size:
        raise ValueError(f"the reduced gradient has {reduced.size} elements, the local one {mean.size}")
    scale = float(np.abs(mean).max()) or 1.0
    # float32 differences (exact for values within a factor of two of each other): no float64 copies of L
    error = float(np.abs(reduced - mean).max()) / scale
    spread = float(np.abs(local - mean).max()) / scale
    dtype = r.args.allreduce_dtype or "float32"
    tolerance = GRAD_TOLERANCE[dtype]
    h = hashlib.sha256(reduced.tobytes()).hexdigest()
    per_rank = mpi.allgather({"rank": r.rank, "host": r.hosts[r.rank], "sha256": h,
                              "local_sum": float(local.sum(dtype=np.float64)),
                              "reduced_sum": float(reduced.sum(dtype=np.float64)),
                              "relative_error": error, "local_relative_spread": spread})
    worst = max(c["relative_error"] for c in per_rank)
    local_spread = max(c["local_relative_spread"] for c in per_rank)
    return {
        "averaged": worst <= tolerance,
        "relative_error": worst,
        "tolerance": tolerance,
        "allreduce_dtype": dtype,
        "mean_sum": float(mean.sum(dtype=np.float64)),
        "local_relative_spread": local_spread,
        # With identical local gradients a missing reduction would go unseen.
        "distinguishes": r.size < 2 or local_spread > tolerance,
        "bitwise_identical": len({c["sha256"] for c in per_rank}) == 1,
        "elements": int(mean.size),
        "source": source,
        "per_rank": per_rank,
        "note": "one untimed iteration through the timed loop's reduction: largest difference between "
                "a rank's reduced gradient and the mean of all ranks' local gradients (one host "
                "MPI_Allreduce of copies taken before the reduction), over the largest |mean|; "
                "local_relative_spread is how far the local gradients were from that mean (0: "
                "identical data on every rank, and the check could not tell a missing reduction)",
    }


def gradient_failure_message(record: dict) -> str:
    ranks = ", ".join(f"rank {c['rank']} ({c['host']}) local sum {c['local_sum']:.9g} reduced sum "
                      f"{c['reduced_sum']:.9g}, off by {c['relative_error']:.3g}" for c in record["per_rank"])
    return ("the reduced gradient is not the mean of the ranks' gradients, so the gradients were not "
            f"averaged: largest difference {record['relative_error']:.3g} of the largest mean element "
            f"(tolerance {record['tolerance']:g}; the mean's sum is {record['mean_sum']:.9g}); {ranks}")
