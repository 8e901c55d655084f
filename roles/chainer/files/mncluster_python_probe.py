#!/usr/bin/env python3
# Managed by mncluster (roles/chainer): prints what the virtualenv holds, as JSON.
"""What the chainer role reads of the MPI user's virtualenv, in one run of its python.

Run as the MPI user with the virtualenv's python. Without arguments: the
versions of the Python stack and the MPI library mpi4py is linked to. The
role's first look passes more (all optional):

  --user NAME         the account's home directory (passwd)
  --mpicc PATH        whether our mpicc is there
  REQUIREMENT ...     the pins the virtualenv does not satisfy (any doubt: all)

It always exits 0 when it could run at all; what failed to import is listed
under "errors" (before the install nothing may be there yet).
"""

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import sysconfig


def installed(dist):
    """A distribution's version from its metadata, without importing it (torch takes seconds)."""
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def version_of(module_name):
    try:
        module = __import__(module_name)
    except ImportError:
        return None
    return getattr(module, "__version__", None)


def mpi4py_libmpi():
    """The libmpi mpi4py's extension loads (ldd, without importing it: the library may be gone)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("mpi4py.MPI")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    ldd = subprocess.run(["ldd", spec.origin], capture_output=True, text=True, check=False)
    match = re.search(r"libmpi\.so[.0-9]*\s+=>\s+(\S+)", ldd.stdout)
    if not match:
        return None
    if not match.group(1).startswith("/"):  # "not found"
        return "not found"
    return os.path.realpath(match.group(1))


def nvidia_driver():
    """The loaded NVIDIA kernel module's version (/proc/driver/nvidia/version), None without one."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    match = re.search(r"Kernel Module(?:\s+for\s+\S+)?\s+([0-9]+(?:\.[0-9]+)+)", text)
    return match.group(1) if match else None


def unsatisfied(requirements):
    """The pins the virtualenv does not satisfy (its own metadata, pip's requirement parser)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        from pip._vendor.packaging.requirements import Requirement
    except ImportError:
        return list(requirements)
    out = []
    for text in requirements:
        try:
            req = Requirement(text)
            ok = req.specifier.contains(version(req.name), prereleases=True)
        except PackageNotFoundError:
            ok = False
        except Exception:  # any doubt counts as unsatisfied
            ok = False
        if not ok:
            out.append(text)
    return out


def stack(errors):
    """The versions of the stack, importing it (MPI not initialised)."""
    result = {"numpy": None, "chainer": None, "chainermn": False, "mpi4py": None, "mpi_library_version": None}
    try:
        import mpi4py

        result["mpi4py"] = mpi4py.__version__
        # Do not initialise MPI: Get_library_version() is valid before MPI_Init.
        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        from mpi4py import MPI

        result["mpi_library_version"] = MPI.Get_library_version().strip()
    except Exception as exc:
        errors.append(f"mpi4py: {exc}")
    try:
        import chainer

        result["chainer"] = chainer.__version__
        import chainermn  # noqa: F401  (bundled with chainer; must import)

        result["chainermn"] = True
    except Exception as exc:
        errors.append(f"chainer: {exc}")
    try:
        import numpy

        result["numpy"] = numpy.__version__
    except Exception as exc:
        errors.append(f"numpy: {exc}")
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--user")
    parser.add_argument("--mpicc")
    parser.add_argument("requirements", nargs="*")
    args = parser.parse_args()
    errors = []
    result = {
        "python": sys.executable,
        "python_version": platform.python_version(),
        "python_id": "{}.{}.{} {}".format(*sys.version_info[:3], sysconfig.get_platform()),
        "prefix": os.path.realpath(sys.prefix),
        "mpi4py_libmpi": mpi4py_libmpi(),
        **stack(errors),
        "cupy": version_of("cupy"),
        "torch": installed("torch"),
        "nvidia_driver": nvidia_driver(),
    }
    if args.user:
        import pwd

        result["home"] = pwd.getpwnam(args.user).pw_dir
    if args.mpicc:
        result["mpicc"] = os.path.isfile(args.mpicc) and os.access(args.mpicc, os.X_OK)
    if args.requirements:
        result["unsatisfied"] = unsatisfied(args.requirements)
    result["errors"] = errors
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
