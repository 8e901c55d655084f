"""The PyTorch engine's timed loop: DistributedDataParallel, the same phases as ChainerMN's.

Per instrumented iteration, on every rank (train/README.md says the same):

    barrier -> t0
    zero_grad, forward, backward (DDP reduces buckets meanwhile)   compute: t0 -> t1, the last
                                                                    bucket's gradients ready
    wait: t1 -> t2, how long this rank's reduction waited for the slowest rank's compute
          (the slowest compute of the iteration minus its own, from one gather after the pass)
    the reduction left when compute ended, backward's return, device sync -> t3   allreduce (exposed)
    optimizer.step(), device sync -> t4                             update

DDP overlaps the reduction with backward, so the allreduce phase is only what is
exposed, as with ChainerMN's double buffering; the timed comm hook
(``train.ddp_hook``) gives the reduction's own duration and the part hidden behind
backward. A plain pass (no barriers, no syncs) gives the throughput.
"""

from __future__ import annotations

import time

import numpy as np

from train import data, ddp_hook, torch_dist, torch_models
from train.errors import BenchmarkError


class TorchRunner:
    framework = "pytorch"
    barriers_per_iteration = 1  # the barrier before t0 (ChainerMN's loop has a second after compute)

    def __init__(self, args):
        import torch

        self.args, self.torch = args, torch
        d = torch_dist.init(args.communicator)
        self.launch, self.mpi, self.MPI, self.host_path = d["launch"], d["mpi"], d["MPI"], d["host_path"]
        self.backend = d["launch"]["backend"]
        self.rank, self.size = self.mpi.Get_rank(), self.mpi.Get_size()
        self.hosts = self.mpi.allgather(self.MPI.Get_processor_name())
        if args.scaling == "strong" and args.batchsize * self.size != args.global_batchsize:
            raise BenchmarkError(f"--global-batchsize {args.global_batchsize} is not {self.size} processes x "
                                 f"{args.batchsize}")
        self.cuda = None  # the CuPy paths of the shared code stay off
        if args.gpu:
            self.device = torch.device("cuda", self.launch["local_rank"] % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        mine = f"{self.hosts[self.rank]}:{self.device.index}" if args.gpu else "cpu"
        self.devices = self.mpi.allgather(mine)
        self._cached = None

    # -- device helpers -------------------------------------------------
    def sync(self) -> None:
        if self.args.gpu:
            self.torch.cuda.synchronize(self.device)

    def to_device(self, x, t):
        if self._cached is not None and self._cached[0] is x:  # synthetic: one batch, converted once
            return self._cached[1]
        pair = (self.torch.from_numpy(np.ascontiguousarray(x)).to(self.device),
                self.torch.from_numpy(np.asarray(t, dtype=np.int64)).to(self.device))
        if isinstance(self.dataset, data.SyntheticDataset):
            self._cached = (x, pair)
        return pair

    # -- setup ----------------------------------------------------------
    def setup(self) -> None:
        from torch.nn.parallel import DistributedDataParallel

        a, torch = self.args, self.torch
        if a.data == "synthetic":
            shape = (784,) if a.model == "mlp" else (3, a.insize, a.insize)
            dataset = data.SyntheticDataset(shape, a.classes, a.batchsize, a.seed + self.rank)
        else:
            dataset = data.load_dataset(a.data, a.model, a.insize, a.root)
            if dataset.max_label >= a.classes:
                raise BenchmarkError(f"{a.data}: label {dataset.max_label} needs --classes above {a.classes}")
        self.dataset = dataset
        self.batches = data.Batches(dataset, a.batchsize, self.rank, self.size, a.seed, workers=a.loaders,
                                    holdout=a.validation)
        torch.manual_seed(a.seed)
        net = torch_models.build(a.model, dataset.sample_shape, a.classes, a.unit).to(self.device)
        kwargs = {"device_ids": [self.device.index]} if a.gpu else {}
        # DDP broadcasts rank 0's parameters here; every bucket goes through the timed hook
        self.ddp = DistributedDataParallel(net, bucket_cap_mb=a.bucket_cap_mb, **kwargs)
        self.hook = ddp_hook.TimedAllreduce(self.size, cuda=a.gpu)
        self.ddp.register_comm_hook(self.hook, ddp_hook.timed_allreduce_hook)
        self.model = self.ddp
        if a.model == "mlp":  # Chainer's defaults: Adam(alpha=0.001), MomentumSGD(lr=0.1, momentum=0.9)
            self.actual = torch.optim.Adam(net.parameters(), lr=1e-3)
        else:
            self.actual = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        self.params = [p for p in net.parameters() if p.requires_grad]
        self.grad_bytes, self.grad_arrays, self.grad_elements = torch_models.gradient_size(net)
        self.own_durations: list[float] = []  # per instrumented iteration, this rank's reduction's own time
        self.ddp_iterations: list[dict] = []  # per instrumented iteration, the hook's figures

    # -- one step's parts -------------------------------------------------
    def backward(self, x, t) -> None:
        """zero_grad, forward, backward: DDP's hook reduces every bucket before backward returns."""
        self.actual.zero_grad(set_to_none=False)
        loss = self.torch.nn.functional.cross_entropy(self.ddp(x), t)
        loss.backward()

    def train_step(self, x, t) -> None:
        self.backward(x, t)
        self.actual.step()

    # -- passes ---------------------------------------------------------
    def warmup(self) -> None:
        # DDP rebuilds its buckets in the order the first backward made gradients ready
        for _ in range(self.args.warmup):
            self.train_step(*self.to_device(*self.batches.next()))
        self.sync()
        self.mpi.Barrier()

    def plain(self, n: int) -> float:
        """n iterations the way a training script runs them; returns seconds."""
        self.mpi.Barrier()
        start = time.perf_counter()
        for _ in range(n):
            self.train_step(*self.to_device(*self.batches.next()))
        self.sync()
        return time.perf_counter() - start

    def instrumented(self, n: int, origin: float) -> tuple[float, np.ndarray, np.ndarray]:
        """n timed iterations: (seconds, stamps[n, 5] t0..t4 from origin, data[n])."""
        stamps, loading = np.zeros((n, 5)), np.zeros(n)
        barrier, hook = self.mpi.Barrier, self.hook
        barrier()
        start = time.perf_counter()
        for i in range(n):
            d0 = time.perf_counter()
            x, t = self.to_device(*self.batches.next())
            loading[i] = time.perf_counter() - d0
            barrier()
            t0 = time.perf_counter()
            hook.start()
            self.backward(x, t)
            self.sync()
            t3 = time.perf_counter()
            fig = hook.finish()
            ready = t3 - t0 if fig["ready"] is None else min(fig["ready"], t3 - t0)
            self.actual.step()
            self.sync()
            stamps[i] = (t0, t0 + ready, t0 + ready, t3, time.perf_counter())
            self.ddp_iterations.append(fig)
            self.own_durations.append(fig["own"])
        elapsed = time.perf_counter() - start
        # wait: the slowest rank's compute minus this rank's, no more than what was left after compute
        compute = stamps[:, 1] - stamps[:, 0]
        slowest = compute.copy()
        self.mpi.Allreduce(self.MPI.IN_PLACE, slowest, op=self.MPI.MAX)
        stamps[:, 2] = stamps[:, 1] + np.minimum(slowest - compute, stamps[:, 3] - stamps[:, 1])
        return elapsed, stamps - origin, loading

    def read_own_duration(self) -> None:
        """Nothing pending: the hook's figures are read after every iteration."""

    # -- learning -------------------------------------------------------
    def _loss_accuracy(self, x, t) -> tuple[float, float]:
        torch = self.torch
        net = self.ddp.module
        net.eval()
        with torch.no_grad():
            y = net(x)
            loss = float(torch.nn.functional.cross_entropy(y, t))
            acc = float((y.argmax(dim=1) == t).float().mean())
        net.train()
        return loss, acc

    def _mean_over_ranks(self, values) -> np.ndarray:
        mine = np.array(values, dtype=np.float64)
        self.mpi.Allreduce(self.MPI.IN_PLACE, mine, op=self.MPI.SUM)
        return mine / self.size

    def evaluate(self) -> dict:
        """Loss and accuracy on each rank's next batch, mean over ranks (collective)."""
        loss, acc = self._mean_over_ranks(self._loss_accuracy(*self.to_device(*self.batches.next())))
        return {"loss": float(loss), "accuracy": float(acc)}

    def validate(self) -> dict:
        """Loss and accuracy over each rank's shard of the held-out samples, mean over ranks (collective)."""
        if getattr(self, "_validation_set", None) is None:
            self._validation_set = self.dataset.get(self.batches.validation)  # decoded once, untimed
        x, y = self._validation_set
        bs, sums = self.args.batchsize, np.zeros(2)
        for lo in range(0, len(x), bs):
            loss, acc = self._loss_accuracy(*self.to_device(x[lo:lo + bs], y[lo:lo + bs]))
            sums += np.array([loss, acc]) * len(x[lo:lo + bs])
        loss, acc = self._mean_over_ranks(sums / max(1, len(x)))
        return {"loss": float(loss), "accuracy": float(acc)}

    def instrumentation_cost(self, n: int = 100) -> tuple[float, float]:
        """Median seconds of one idle barrier and of the device syncs the timing adds (two here)."""
        barrier, syncs = np.zeros(n), np.zeros(n)
        self.mpi.Barrier()
        for i in range(n):
            t0 = time.perf_counter()
            self.mpi.Barrier()
            t1 = time.perf_counter()
            self.sync()
            self.sync()
            barrier[i], syncs[i] = t1 - t0, time.perf_counter() - t1
        return float(np.median(barrier)), float(np.median(syncs))
