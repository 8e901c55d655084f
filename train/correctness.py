"""Proof that the gradients were averaged: after the timed passes every rank's parameters agree.

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
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

# float32 reductions that add in another order differ in the last bits (~1e-7
# relative); a missing or wrong reduction differs by the learning rate's order.
TOLERANCE = 1e-5
# Test-only: the rank named here adds 1e-3 of the largest parameter to one
# element before the check, which must then fail.
PERTURB_ENV = "MNCBENCH_TEST_PERTURB_RANK"


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
    MPI, mpi = r.MPI, r.mpi
    perturbed = perturb_if_asked(r.model, r.rank)
    arrays = host_parameters(r.model)
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


def failure_message(record: dict) -> str:
    ranks = ", ".join(f"rank {c['rank']} ({c['host']}) sha256 {c['sha256'][:12]} sum {c['sum']:.9g}"
                      for c in record["per_rank"])
    return ("the ranks' parameters differ after the timed passes, so the gradients were not averaged: "
            f"largest difference {record['max_abs_diff']:.3g} = {record['relative_diff']:.3g} of the largest "
            f"parameter (tolerance {record['tolerance']:g}), at element {record['worst_element']}; {ranks}")
