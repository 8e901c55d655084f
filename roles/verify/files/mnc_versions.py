"""Print, as one JSON line, the versions that must match on every node.

Python, Chainer, NumPy, CuPy (where installed), mpi4py and the MPI library
mpi4py is linked to (MPI_Get_library_version, callable before MPI_Init, so
no MPI process is started). A component that fails to import is reported as
"error: <reason>", except CuPy, which is optional in CPU mode.
"""

import importlib
import json
import platform
import sys


def version_of(name):
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # any import failure is a finding, not a crash
        return f"error: {type(exc).__name__}: {exc}".splitlines()[0]
    return getattr(module, "__version__", "unknown")


def main():
    out = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "numpy": version_of("numpy"),
        "chainer": version_of("chainer"),
        "mpi4py": version_of("mpi4py"),
    }
    cupy = version_of("cupy")
    if not cupy.startswith("error:"):
        out["cupy"] = cupy
    try:
        import mpi4py

        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        from mpi4py import MPI

        out["mpi_library"] = MPI.Get_library_version().replace("\x00", "").strip().splitlines()[0]
    except Exception as exc:
        out["mpi_library"] = f"error: {type(exc).__name__}: {exc}".splitlines()[0]
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
