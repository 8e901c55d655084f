"""The timed training loop: set-up, warm-up, and the plain and instrumented passes.

Per instrumented iteration, on every rank (train/README.md says the same):

    barrier -> t0
    cleargrads, forward, backward, device sync -> t1   compute
    barrier -> t2                                       wait (load imbalance)
    comm.multi_node_mean_grad, device sync -> t3        allreduce
    actual optimizer update, device sync -> t4          update

The multi-node optimizer's update is these last two steps; calling them
one by one times them apart without patching Chainer. A plain pass through
``optimizer.update(model, x, t)``, with no barriers or syncs, gives the
throughput; the two passes alternate so that drift hits both alike.
"""

from __future__ import annotations

import time

import numpy as np

from train import data, models
from train.errors import BenchmarkError
from train.timing import PHASES, chunk_sizes, log

__all__ = ["PHASES", "Runner", "chunk_sizes", "log"]


class Runner:
    def __init__(self, args):
        import chainer
        import chainermn
        from mpi4py import MPI

        self.args = args
        self.MPI = MPI
        kwargs = {}
        if args.allreduce_dtype:
            kwargs["allreduce_grad_dtype"] = np.dtype(args.allreduce_dtype)
        self.comm = chainermn.create_communicator(args.communicator, **kwargs)
        self.mpi = self.comm.mpi_comm
        self.rank, self.size = self.comm.rank, self.comm.size
        self.hosts = self.mpi.allgather(MPI.Get_processor_name())
        if args.scaling == "strong" and args.batchsize * self.size != args.global_batchsize:
            # the launcher's environment named another process count than MPI has
            raise BenchmarkError(f"--global-batchsize {args.global_batchsize} is not {self.size} processes x "
                                 f"{args.batchsize}")
        self.cuda = None
        if args.gpu:
            from chainer.backends import cuda

            self.cuda = cuda
            self.device = self.comm.intra_rank
            cuda.get_device_from_id(self.device).use()
        # collective: every rank must take part, so it is gathered here, not in environment()
        self.devices = self.mpi.allgather(f"{self.hosts[self.rank]}:{self.device}" if args.gpu else "cpu")
        self.chainer = chainer
        self.chainermn = chainermn

    # -- device helpers -------------------------------------------------
    def sync(self) -> None:
        """Wait for the device; with double buffering, only for the default stream."""
        if self.cuda is None:
            return
        if self.args.double_buffering:
            self.cuda.Stream.null.synchronize()
        else:
            self.cuda.cupy.cuda.runtime.deviceSynchronize()

    def to_device(self, x, t):
        if self.cuda is None:
            return x, t
        return self.cuda.to_gpu(x), self.cuda.to_gpu(t)

    # -- setup ----------------------------------------------------------
    def setup(self) -> None:
        a = self.args
        if a.data == "synthetic":
            shape = (784,) if a.model == "mlp" else (3, a.insize, a.insize)
            dataset = data.SyntheticDataset(shape, a.classes, a.batchsize, a.seed + self.rank)
            if self.cuda is not None:  # synthetic data lives on the device: no copy per iteration
                dataset.x, dataset.y = self.cuda.to_gpu(dataset.x), self.cuda.to_gpu(dataset.y)
        else:
            dataset = data.load_dataset(a.data, a.model, a.insize, a.root)
            if dataset.max_label >= a.classes:
                raise BenchmarkError(f"{a.data}: label {dataset.max_label} needs --classes above {a.classes}")
        self.dataset = dataset
        self.batches = data.Batches(dataset, a.batchsize, self.rank, self.size, a.seed, workers=a.loaders,
                                    holdout=a.validation)
        model = models.build(a.model, dataset.sample_shape, a.classes, a.unit)
        if self.cuda is not None:
            model.to_gpu(self.device)
        if a.model == "mlp":
            actual = self.chainer.optimizers.Adam()
        else:
            actual = self.chainer.optimizers.MomentumSGD(lr=0.1, momentum=0.9)
        self.optimizer = self.chainermn.create_multi_node_optimizer(
            actual, self.comm, double_buffering=a.double_buffering)
        self.optimizer.setup(model)
        self.actual = actual
        self.model = model
        self.grad_bytes, self.grad_arrays, self.grad_elements = models.gradient_size(model)
        self.own_durations: list[float] = []  # double buffering: each timed reduction on its stream
        self.pending_events = None

    # -- passes ---------------------------------------------------------
    def warmup(self) -> None:
        # The multi-node optimizer's first update broadcasts rank 0's parameters
        # instead of updating; the rest warm allocators, caches and connections.
        for _ in range(self.args.warmup):
            x, t = self.to_device(*self.batches.next())
            self.optimizer.update(self.model, x, t)
        self.sync()
        self.mpi.Barrier()

    def plain(self, n: int) -> float:
        """n iterations the way a training script runs them; returns seconds."""
        self.mpi.Barrier()
        start = time.perf_counter()
        for _ in range(n):
            x, t = self.to_device(*self.batches.next())
            self.optimizer.update(self.model, x, t)
        self.sync()
        return time.perf_counter() - start

    def _reduce_and_update(self, times: list) -> None:
        opt, comm, model = self.optimizer, self.comm, self.model
        if not self.args.double_buffering:
            comm.multi_node_mean_grad(model, opt.zero_fill)
            self.sync()
            times.append(time.perf_counter())
            self.actual.update()
        else:
            # _DoubleBufferingOptimizer.update's steps: the exposed allreduce time
            # is the wait for the previous iteration's reduction plus the launch.
            opt.wait()
            self.read_own_duration()
            opt.swap_grad(opt.target_params_list[0], opt.target_params_list[1])
            # The reduction's own duration: CUDA events on its stream, read once it has
            # finished (at the next wait), so they add no synchronisation.
            cupy = self.cuda.cupy
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(opt.allreduce_grad_stream)
            opt.multi_node_mean_grad_async()
            end.record(opt.allreduce_grad_stream)
            self.pending_events = (start, end)
            self.sync()
            times.append(time.perf_counter())
            self.actual.update()
        self.sync()
        times.append(time.perf_counter())

    def read_own_duration(self) -> None:
        """Seconds the last timed asynchronous reduction took on its stream (double buffering)."""
        if getattr(self, "pending_events", None) is not None:
            start, end = self.pending_events
            end.synchronize()
            self.own_durations.append(self.cuda.cupy.cuda.get_elapsed_time(start, end) / 1e3)
            self.pending_events = None

    def instrumented(self, n: int, origin: float) -> tuple[float, np.ndarray, np.ndarray]:
        """n timed iterations: (seconds, stamps[n, 5] t0..t4 from origin, data[n])."""
        stamps = np.zeros((n, 5))
        loading = np.zeros(n)
        model, barrier = self.model, self.mpi.Barrier
        barrier()
        start = time.perf_counter()
        for i in range(n):
            d0 = time.perf_counter()
            x, t = self.to_device(*self.batches.next())
            loading[i] = time.perf_counter() - d0
            barrier()
            t0 = time.perf_counter()
            model.cleargrads()
            loss = model(x, t)
            loss.backward(loss_scale=self.actual._loss_scale)
            del loss
            self.sync()
            t1 = time.perf_counter()
            barrier()
            t2 = time.perf_counter()
            times = [t0, t1, t2]
            self._reduce_and_update(times)
            stamps[i] = np.array(times) - origin
        return time.perf_counter() - start, stamps, loading

    def evaluate(self) -> dict:
        """Loss and accuracy of the model on each rank's next batch, mean over ranks (collective).

        Taken after the warm-up and after the timed passes, outside both: that the loss
        falls shows the distributed training learns.
        """
        x, t = self.to_device(*self.batches.next())
        with self.chainer.using_config("train", False), self.chainer.no_backprop_mode():
            loss = float(self.model(x, t).array)
        accuracy = getattr(self.model, "accuracy", None)
        accuracy = None if accuracy is None else float(getattr(accuracy, "array", accuracy))
        mine = np.array([loss, accuracy if accuracy is not None else np.nan])
        self.mpi.Allreduce(self.MPI.IN_PLACE, mine, op=self.MPI.SUM)
        mine /= self.size
        return {"loss": float(mine[0]), "accuracy": None if np.isnan(mine[1]) else float(mine[1])}

    def validate(self) -> dict:
        """Loss and accuracy over the held-out samples through ChainerMN's multi-node evaluator
        (collective): each rank evaluates its shard, the result is the mean over ranks."""
        from chainer.training import extensions

        if getattr(self, "_validation_set", None) is None:
            x, y = self.dataset.get(self.batches.validation)  # decoded once, outside any timing
            self._validation_set = self.chainer.datasets.TupleDataset(x, y)
        it = self.chainer.iterators.SerialIterator(self._validation_set, self.args.batchsize, repeat=False,
                                                   shuffle=False)
        device = self.device if self.cuda is not None else None
        evaluator = extensions.Evaluator(it, self.model, device=device)
        evaluator = self.chainermn.create_multi_node_evaluator(evaluator, self.comm)
        result = evaluator()  # outside a trainer: no name prefix
        out = {"loss": float(result["main/loss"])}
        acc = result.get("main/accuracy")
        out["accuracy"] = None if acc is None else float(acc)
        return out

    def instrumentation_cost(self, n: int = 100) -> tuple[float, float]:
        """Median seconds of one idle barrier and of the three device syncs the timing adds.

        These are what an instrumented iteration does that a plain one does not; on
        a quiet machine the measured overhead should be about 2 barriers + 3 syncs.
        """
        barrier, syncs = np.zeros(n), np.zeros(n)
        self.mpi.Barrier()
        for i in range(n):
            t0 = time.perf_counter()
            self.mpi.Barrier()
            t1 = time.perf_counter()
            self.sync()
            self.sync()
            self.sync()
            barrier[i], syncs[i] = t1 - t0, time.perf_counter() - t1
        return float(np.median(barrier)), float(np.median(syncs))
