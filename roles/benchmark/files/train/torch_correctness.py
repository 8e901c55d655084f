"""Proof that DDP averaged the gradients, with the same records as ChainerMN's (``train.correctness``).

* ``check_gradients``: one untimed iteration through the timed loop's own backward
  (``TorchRunner.backward``, DDP and its timed hook). The hook keeps a copy of every local
  gradient as it hands a bucket to the reduction; one host allreduce (SUM / p) of those
  copies gives their mean, and every rank's ``.grad`` after backward must equal it.
* ``check``: after the timed passes, the ranks' parameters agree (largest difference of
  any element between two ranks, over the largest parameter).

A reduction that sums instead of averaging agrees across ranks, so only the first check
sees it; a reduction that does not happen fails both.
"""

from __future__ import annotations

import os

import numpy as np

from train import correctness


def host_parameters(r) -> list[np.ndarray]:
    return [p.detach().cpu().numpy().astype(np.float32).ravel() for p in r.params]


def perturb_if_asked(r) -> bool:
    """Test-only (``MNCBENCH_TEST_PERTURB_RANK``): this rank adds 1e-3 of the largest parameter to one."""
    target = os.environ.get(correctness.PERTURB_ENV)
    if target is None or int(target) != r.rank:
        return False
    with r.torch.no_grad():
        scale = max(float(p.abs().max()) for p in r.params)
        r.params[0].view(-1)[0] += 1e-3 * scale
    return True


def check(r) -> dict:
    """Collective: the ``correctness`` record, the same on every rank."""
    perturbed = perturb_if_asked(r)
    return correctness.agreement(r, host_parameters(r), perturbed)


def _packed(tensors) -> np.ndarray:
    arrays = [t.detach().cpu().numpy().astype(np.float32).ravel() for t in tensors]
    return np.concatenate(arrays) if arrays else np.zeros(1, np.float32)


def check_gradients(r) -> dict:
    """Collective: one untimed iteration through the timed loop's backward; the ``gradients`` record."""
    MPI, mpi = r.MPI, r.mpi
    x, t = r.to_device(*r.batches.next())
    mpi.Barrier()
    r.hook.local = {}
    r.hook.start()
    r.backward(x, t)  # exactly what every timed iteration runs
    r.sync()
    copies, r.hook.local = r.hook.local, None
    missing = [i for i, p in enumerate(r.params) if id(p) not in copies]
    if missing:
        raise ValueError(f"DDP's hook saw no gradient of parameters {missing[:5]}")
    local = _packed(copies[id(p)] for p in r.params)
    mean = local.copy()
    mpi.Allreduce(MPI.IN_PLACE, mean, op=MPI.SUM)
    mean /= r.size
    reduced = _packed(p.grad for p in r.params)
    r.actual.step()
    return correctness.gradient_record(r, local, mean, reduced, "model")
