#!/usr/bin/env python3
# Managed by mncluster (roles/chainer): a ChainerMN smoke test for 2+ ranks.
"""Allreduce of known arrays through a ChainerMN communicator.

mpiexec -n 2 python chainermn_smoke.py --communicator naive

Every rank r contributes arange(8) * (r + 1): the sum is
arange(8) * p(p+1)/2. multi_node_mean_grad on a Linear link whose gradients
are all r + 1 gives (p + 1) / 2 everywhere. Rank 0 prints one JSON line;
any mismatch exits non-zero.
"""

import argparse
import json
import sys

import chainer
import chainermn
import numpy


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--communicator", default="naive")
    parser.add_argument("--gpu", action="store_true")
    args = parser.parse_args()

    comm = chainermn.create_communicator(args.communicator)
    xp = numpy
    if args.gpu:
        import cupy

        cupy.cuda.Device(comm.intra_rank).use()
        xp = cupy

    size, rank = comm.size, comm.rank
    x = xp.arange(8, dtype=xp.float32) * (rank + 1)
    total = chainer.backends.cuda.to_cpu(comm.allreduce(x))
    expected_sum = numpy.arange(8, dtype=numpy.float32) * (size * (size + 1) / 2)

    link = chainer.links.Linear(4, 3)
    if args.gpu:
        link.to_gpu(comm.intra_rank)
    for param in link.params():
        param.grad = xp.full(param.shape, rank + 1, dtype=param.dtype)
    comm.multi_node_mean_grad(link)
    means = [float(chainer.backends.cuda.to_cpu(p.grad).mean()) for p in link.params()]
    expected_mean = (size + 1) / 2

    ok = bool(numpy.allclose(total, expected_sum)) and all(abs(m - expected_mean) < 1e-6 for m in means)
    oks = comm.mpi_comm.gather(ok, root=0)
    if rank == 0:
        print(
            json.dumps(
                {
                    "communicator": args.communicator,
                    "size": size,
                    "allreduce_sum": total.tolist(),
                    "expected_sum": expected_sum.tolist(),
                    "mean_grad": means,
                    "expected_mean_grad": expected_mean,
                    "ok": all(oks),
                },
                sort_keys=True,
            )
        )
    return 0 if all(comm.mpi_comm.allgather(ok)) else 1


if __name__ == "__main__":
    sys.exit(main())
