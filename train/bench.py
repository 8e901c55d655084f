"""The timed training loop, the communication ceilings, and the JSON document.

Per instrumented iteration, on every rank (DESIGN.md, "The benchmark"):

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

import datetime
import json
import os
import platform
import sys
import time

import numpy as np

from train import SCHEMA, data, metrics, models
from train.cli import BenchmarkError

PHASES = ("compute", "wait", "allreduce", "update")
DTYPE_BYTES = {"float16": 2, "float32": 4}


def log(rank: int, msg: str) -> None:
    if rank == 0:
        print(f"train: {msg}", flush=True)


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
        self.batches = data.Batches(dataset, a.batchsize, self.rank, self.size, a.seed)
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
            opt.swap_grad(opt.target_params_list[0], opt.target_params_list[1])
            opt.multi_node_mean_grad_async()
            self.sync()
            times.append(time.perf_counter())
            self.actual.update()
        self.sync()
        times.append(time.perf_counter())

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

    # -- ceilings -------------------------------------------------------
    def sweep_sizes(self, allreduce_bytes: int) -> list[int]:
        top = self.args.sweep_max_bytes
        if top == "auto":
            top = 1 << max(3, (allreduce_bytes - 1).bit_length())
        sizes, s = [], 8
        while s <= top:
            sizes.append(s)
            s *= 2
        if top >= 8 and sizes[-1] < top and top // 4 * 4 > sizes[-1]:
            sizes.append(top // 4 * 4)
        return sizes if top and top >= 8 else []

    def allreduce_sweep(self, sizes: list[int]) -> list[dict]:
        """Raw MPI_Allreduce of one float32 host buffer per size (nccl-tests style)."""
        MPI, mpi = self.MPI, self.mpi
        rows = []
        for size in sizes:
            buf = np.zeros(max(1, size // 4), dtype=np.float32)
            reps = max(2, min(self.args.sweep_iters, (256 << 20) // size))
            mpi.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
            mpi.Barrier()
            start = time.perf_counter()
            for _ in range(reps):
                mpi.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
            dt = mpi.allreduce((time.perf_counter() - start) / reps, op=MPI.MAX)
            rows.append({"bytes": buf.nbytes, "count": buf.size, "dtype": "float32", "iterations": reps,
                         "time": dt, "algbw": metrics.algbw(buf.nbytes, dt),
                         "busbw": metrics.busbw(buf.nbytes, dt, self.size)})
        return rows

    def p2p(self) -> list[dict]:
        """Ping-pong between rank 0 and one peer on its node and one on another node."""
        nbytes, reps = self.args.p2p_bytes, self.args.p2p_iters
        if not nbytes or self.size < 2:
            return []
        pairs = p2p_pairs(self.hosts)
        rows = []
        buf = np.zeros(nbytes, dtype=np.uint8)
        for kind, peer in pairs:
            self.mpi.Barrier()
            if self.rank == 0:
                for i in range(reps + 1):  # the first round trip sets up the connection
                    if i == 1:
                        start = time.perf_counter()
                    self.mpi.Send(buf, dest=peer, tag=7)
                    self.mpi.Recv(buf, source=peer, tag=7)
                one_way = (time.perf_counter() - start) / reps / 2
                rows.append({"kind": kind, "ranks": [0, peer], "hosts": [self.hosts[0], self.hosts[peer]],
                             "bytes": nbytes, "iterations": reps, "time": one_way,
                             "bandwidth": metrics.algbw(nbytes, one_way)})
            elif self.rank == peer:
                for _ in range(reps + 1):
                    self.mpi.Recv(buf, source=0, tag=7)
                    self.mpi.Send(buf, dest=0, tag=7)
        self.mpi.Barrier()
        return rows

    # -- environment ----------------------------------------------------
    def environment(self) -> dict:
        MPI = self.MPI
        import mpi4py

        counts: dict[str, int] = {}
        for h in self.hosts:
            counts[h] = counts.get(h, 0) + 1
        # Open MPI's string ends in a NUL, which is not whitespace.
        mpi_library = MPI.Get_library_version().replace("\x00", "").strip()
        mpi_library = mpi_library.splitlines()[0].strip().rstrip(",")
        env = {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "chainer": self.chainer.__version__,
            "numpy": np.__version__,
            "cupy": None,
            "mpi4py": mpi4py.__version__,
            "mpi_library": mpi_library,
            "mpi_standard": "{}.{}".format(*MPI.Get_version()),
            "communicator_class": type(self.comm).__name__,
            "hosts": self.hosts,
            "nodes": len(counts),
            "processes_per_node": counts,
            "device": "cpu",
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        }
        if self.cuda is not None:
            cupy = self.cuda.cupy
            env["cupy"] = cupy.__version__
            props = cupy.cuda.runtime.getDeviceProperties(self.device)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            env["device"] = f"cuda ({name})"
            env["gpus"] = self.devices
        return env


def p2p_pairs(hosts: list[str]) -> list[tuple[str, int]]:
    """(kind, peer of rank 0): the first rank on another node, then the first on rank 0's node."""
    pairs = []
    other = [r for r in range(1, len(hosts)) if hosts[r] != hosts[0]]
    same = [r for r in range(1, len(hosts)) if hosts[r] == hosts[0]]
    if other:
        pairs.append(("inter-node", other[0]))
    if same:
        pairs.append(("intra-node", same[0]))
    return pairs


def write_json(path: str, doc: dict) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def chrome_trace(stamps: list[np.ndarray], hosts: list[str]) -> dict:
    """Chrome trace events ('X' complete events, microseconds), one process per rank."""
    events = []
    for rank, st in enumerate(stamps):
        events.append({"name": "process_name", "ph": "M", "pid": rank,
                       "args": {"name": f"rank {rank} ({hosts[rank]})"}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": rank, "args": {"sort_index": rank}})
        for i, row in enumerate(st):
            for k, phase in enumerate(PHASES):
                events.append({"name": phase, "cat": "phase", "ph": "X", "pid": rank, "tid": 0,
                               "ts": row[k] * 1e6, "dur": (row[k + 1] - row[k]) * 1e6,
                               "args": {"iteration": i}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"schema": SCHEMA, "clock": "seconds since a common barrier, per rank"}}


def chunk_sizes(iterations: int, rounds: int) -> list[int]:
    return [iterations // rounds + (1 if i < iterations % rounds else 0) for i in range(rounds)]


def run(args) -> dict | None:
    r = Runner(args)
    rank, size = r.rank, r.size
    log(rank, f"{args.model} on {size} process(es), {args.communicator} communicator, "
        f"batch {args.batchsize}/process, {args.iterations} iterations x 2 passes")
    r.setup()
    log(rank, f"gradient: {r.grad_bytes} bytes in {r.grad_arrays} arrays; warm-up {args.warmup} iterations")
    r.warmup()

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
    log(rank, "timed passes done; measuring raw allreduce and point-to-point bandwidth")

    allreduce_bytes = r.grad_bytes
    if args.allreduce_dtype:
        allreduce_bytes = r.grad_elements * DTYPE_BYTES[args.allreduce_dtype]
    sweep = r.allreduce_sweep(r.sweep_sizes(allreduce_bytes))
    p2p = r.p2p()
    cost = r.instrumentation_cost()

    gathered = r.mpi.gather((stamps, loading, np.array(walls), cost), root=0)
    if rank != 0:
        r.mpi.Barrier()
        return None

    doc = document(args, r, gathered, sweep, p2p, allreduce_bytes)
    if args.trace:
        write_json(args.trace, chrome_trace([g[0] for g in gathered], r.hosts))
        doc["trace"] = os.path.abspath(args.trace)
    if args.out:
        write_json(args.out, doc)
    if args.json_stdout:
        print("MNCBENCH_JSON " + json.dumps(doc, separators=(",", ":")), flush=True)
    thr = doc["throughput"]
    log(rank, f"throughput {thr['samples_per_s']:.1f} samples/s; "
        f"instrumentation overhead {doc['instrumentation']['overhead_percent']:+.2f}% measured, "
        f"{doc['instrumentation']['estimated_overhead_percent']:.2f}% from barrier cost; "
        f"allreduce median {doc['phases']['allreduce']['median'] * 1e3:.3f} ms"
        + (f" -> {args.out}" if args.out else ""))
    r.mpi.Barrier()
    return doc


def document(args, r, gathered, sweep, p2p, allreduce_bytes) -> dict:
    size = r.size
    # durations[rank, iteration, phase]; phases sum to total on every rank by construction
    durations = np.stack([np.diff(g[0], axis=1) for g in gathered])
    totals = durations.sum(axis=2)
    critical = durations.max(axis=0)  # max across ranks, per iteration and phase
    phases = {name: metrics.summarize(critical[:, k]) for k, name in enumerate(PHASES)}
    phases["total"] = metrics.summarize(totals.max(axis=0))
    # The average rank's iteration: these do add up to the total, and wait is the
    # mean time a rank idles for the slowest one. The report's stacked bars use them.
    average = durations.mean(axis=0)
    breakdown = {name: metrics.summarize(average[:, k]) for k, name in enumerate(PHASES)}
    breakdown["total"] = metrics.summarize(totals.mean(axis=0))
    spread = durations.max(axis=0) - durations.min(axis=0)  # [iteration, phase], slowest - fastest rank
    imbalance = spread[:, 0]
    data_time = np.stack([g[1] for g in gathered]).max(axis=0)

    n = args.iterations
    walls = np.stack([g[2] for g in gathered]).max(axis=0)  # [round, (plain, instrumented)], slowest rank
    plain_s, instr_s = (float(x) for x in walls.sum(axis=0))
    samples = args.batchsize * size * n
    # The median of the per-round ratios: one round hit by a noisy neighbour does not decide it.
    overhead = float(np.median(walls[:, 1] / walls[:, 0])) - 1.0
    barrier_s = max(g[3][0] for g in gathered)
    syncs_s = max(g[3][1] for g in gathered)
    estimated = (2 * barrier_s + syncs_s) / (plain_s / n)
    t_ar = phases["allreduce"]["median"]

    per_rank = []
    for rk in range(size):
        means = {name: float(durations[rk, :, k].mean()) for k, name in enumerate(PHASES)}
        means["total"] = float(totals[rk].mean())
        per_rank.append({"rank": rk, "host": r.hosts[rk], "mean": means,
                         "data": float(gathered[rk][1].mean())})

    a = args
    return {
        "schema": SCHEMA,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv[1:],
        "units": {"time": "s", "bandwidth": "GB/s (1e9 B/s)", "size": "bytes"},
        "config": {
            "model": a.model, "batchsize": a.batchsize, "unit": a.unit if a.model == "mlp" else None,
            "insize": a.insize if a.model == "resnet50" or r.dataset.format == "list" else None,
            "classes": a.classes, "communicator": a.communicator, "gpu": a.gpu,
            "processes": size, "iterations": n, "warmup": a.warmup, "rounds": a.rounds,
            "data": a.data, "data_format": r.dataset.format,
            "allreduce_dtype": a.allreduce_dtype, "double_buffering": a.double_buffering,
            "optimizer": type(r.actual).__name__, "seed": a.seed,
        },
        "environment": r.environment(),
        "gradient": {"bytes": r.grad_bytes, "arrays": r.grad_arrays, "elements": r.grad_elements,
                     "dtype": "float32", "allreduce_bytes": allreduce_bytes},
        "phases": phases,
        "phases_note": ("per iteration the max across ranks of each phase (the critical path); "
                        "total is the max across ranks of each rank's t4 - t0, so the phases "
                        "add up to more than the total by about the imbalance"),
        "breakdown": breakdown,
        "breakdown_note": "per iteration the mean across ranks of each phase; compute + wait + "
                          "allreduce + update = total for every iteration",
        "imbalance": metrics.summarize(imbalance),
        "imbalance_note": "per iteration the slowest minus the fastest rank's compute",
        "spread": {name: metrics.summarize(spread[:, k]) for k, name in enumerate(PHASES)},
        "spread_note": "per iteration and phase the slowest minus the fastest rank; the max-across-ranks "
                       "phases add up to at most the total plus these",
        "data_loading": metrics.summarize(data_time),
        "per_rank": per_rank,
        "throughput": {
            "samples_per_s": samples / plain_s,
            "samples_per_s_per_process": samples / plain_s / size,
            "iterations": n, "samples": samples, "wall": plain_s,
            "instrumented_samples_per_s": samples / instr_s,
        },
        "instrumentation": {
            "plain_wall": plain_s, "instrumented_wall": instr_s,
            "rounds": [{"iterations": int(c), "plain_wall": float(w[0]), "instrumented_wall": float(w[1])}
                       for c, w in zip(chunk_sizes(n, args.rounds), walls, strict=True)],
            "overhead": overhead, "overhead_percent": overhead * 100.0,
            "overhead_total_percent": (instr_s / plain_s - 1.0) * 100.0,
            "barrier": barrier_s, "device_syncs": syncs_s,
            "estimated_overhead": estimated, "estimated_overhead_percent": estimated * 100.0,
            "note": "median over rounds of instrumented / plain wall time - 1 (same iterations, "
                    "alternating passes); the instrumented pass adds two barriers and three device "
                    "syncs per iteration. estimated_overhead is their idle cost (median barrier and "
                    "syncs, slowest rank) over the plain iteration time, which a busy shared machine "
                    "does not blur",
        },
        "allreduce": {
            "bytes": allreduce_bytes, "arrays": r.grad_arrays, "time": t_ar,
            "algbw": metrics.algbw(allreduce_bytes, t_ar),
            "busbw": metrics.busbw(allreduce_bytes, t_ar, size),
            "note": "multi_node_mean_grad, median over iterations of the max across ranks",
        },
        "raw_allreduce": sweep,
        "raw_allreduce_memory": "host",
        "p2p": p2p,
        "trace": None,
    }
