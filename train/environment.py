"""What a reader needs to judge a run: versions, MPI library, hosts and devices of every rank."""

from __future__ import annotations

import os
import platform

import numpy as np


def environment(r) -> dict:
    MPI = r.MPI
    import mpi4py

    counts: dict[str, int] = {}
    for h in r.hosts:
        counts[h] = counts.get(h, 0) + 1
    # Open MPI's string ends in a NUL, which is not whitespace.
    mpi_library = MPI.Get_library_version().replace("\x00", "").strip()
    mpi_library = mpi_library.splitlines()[0].strip().rstrip(",")
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "chainer": r.chainer.__version__,
        "numpy": np.__version__,
        "cupy": None,
        "mpi4py": mpi4py.__version__,
        "mpi_library": mpi_library,
        "mpi_standard": "{}.{}".format(*MPI.Get_version()),
        "communicator_class": type(r.comm).__name__,
        "hosts": r.hosts,
        "nodes": len(counts),
        "processes_per_node": counts,
        "device": "cpu",
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    if r.cuda is not None:
        cupy = r.cuda.cupy
        env["cupy"] = cupy.__version__
        props = cupy.cuda.runtime.getDeviceProperties(r.device)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        env["device"] = f"cuda ({name})"
        env["gpus"] = r.devices
    return env
