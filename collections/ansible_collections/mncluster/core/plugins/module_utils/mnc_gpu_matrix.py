"""What CuPy can load: the GPU half of the version matrix (roles/stack).

The data is ``stack_cupy_support`` in roles/stack/defaults/main/cuda.yml (one
entry per CuPy major release, copied from that release's installation guide,
cited there); the rule that reads it lives here once, and roles/stack reaches
it through the ``mnc_gpu_stack_problems`` filter (plugins/filter/mnc.py). An
empty answer means the pins load together; otherwise each string names the
versions and says what to pin instead. Unit-tested in
tests/unit/test_stack_gpu_matrix.py.

Shape of one ``stack_cupy_support`` entry::

    {"cupy": "13",                       # CuPy major release
     "cuda": [{"package": "cupy-cuda12x", "first": "12.0", "last": "12.9",
               "cupy_first": "13.0.0"}],  # cupy_first optional
     "cudnn": {"major": 8, "first": "8.8"} | None,   # None: no cuDNN support
     "nccl": {"major": 2, "first": "2.16"}}
"""

import re


def _parts(version, n=3):
    """The first ``n`` numeric fields of a dotted version (missing ones are 0)."""
    fields = [int(x) for x in re.findall(r"\d+", str(version))[:n]]
    return tuple(fields + [0] * (n - len(fields)))


def _mm(version):
    return _parts(version, 2)


def _fmt(version_tuple):
    return ".".join(str(x) for x in version_tuple)


def _entry(support, cupy_version):
    major = str(_parts(cupy_version, 1)[0])
    for entry in support or []:
        if str(entry.get("cupy")) == major:
            return entry
    return None


def gpu_stack_problems(support, cuda_version, cupy_package, cupy_version, cudnn_version, nccl_version):
    """Why CuPy ``cupy_package`` ``cupy_version`` cannot use CUDA ``cuda_version``,
    cuDNN ``cudnn_version`` and NCCL ``nccl_version`` (a list of messages, empty when it can).

    ``cudnn_version`` empty (or None) means no cuDNN is installed.
    """
    cupy = f"{cupy_package} {cupy_version}"
    entry = _entry(support, cupy_version)
    if entry is None:
        known = ", ".join(sorted(str(e.get("cupy")) for e in support or []))
        return [
            f"{cupy}: CuPy {_parts(cupy_version, 1)[0]}.x is not in the matrix (stack_cupy_support knows "
            f"CuPy {known}); add an entry from that release's installation guide or pin a known CuPy."
        ]
    problems = []

    # CUDA: the wheel name carries the CUDA major, each release a minor range.
    cuda = _mm(cuda_version)
    rows = [r for r in entry.get("cuda", []) if r.get("package") == cupy_package]
    rows_for_release = [r for r in rows if _parts(cupy_version) >= _parts(r.get("cupy_first", "0"))]
    if not rows:
        wheels = ", ".join(r["package"] for r in entry.get("cuda", []))
        problems.append(
            f"{cupy}: CuPy {entry['cupy']} publishes no {cupy_package} wheel (its wheels: {wheels})."
        )
    elif not rows_for_release:
        first = min(_parts(r["cupy_first"]) for r in rows)
        problems.append(
            f"{cupy}: {cupy_package} exists from CuPy {_fmt(first)} on; pin that release or later."
        )
    else:
        ranges = [(_mm(r["first"]), _mm(r["last"])) for r in rows_for_release]
        if not any(lo <= cuda <= hi for lo, hi in ranges):
            span = " or ".join(f"{_fmt(lo)}-{_fmt(hi)}" for lo, hi in ranges)
            hint = (
                f"use the cupy-cuda{cuda[0]}x wheel for CUDA {cuda[0]}"
                if cuda[0] != ranges[0][0][0]
                else f"pin CUDA {span}"
            )
            problems.append(
                f"{cupy} supports CUDA {span}, not CUDA {_fmt(cuda)} (stack_cuda_version): {hint}."
            )

    # cuDNN: CuPy dlopens one cuDNN major (libcudnn.so.<major>); another major
    # is not found, and Chainer then runs silently without cuDNN.
    cudnn = entry.get("cudnn")
    if cudnn_version not in (None, ""):
        have = _parts(cudnn_version)
        if not cudnn:
            problems.append(
                f"{cupy}: CuPy {entry['cupy']} dropped cuDNN support (no cupy.cuda.cudnn), so cuDNN "
                f"{cudnn_version} would never be used and Chainer would run without cuDNN; "
                "pin CuPy 13.x with cuDNN 8 (stack_cupy_version, stack_cudnn_version)."
            )
        elif have[0] != int(cudnn["major"]):
            want = cudnn["major"]
            problems.append(
                f"{cupy} loads cuDNN {want} (libcudnn.so.{want}, {cudnn['first']} or later), "
                f"not cuDNN {cudnn_version} (libcudnn.so.{have[0]}): CuPy would not find it and "
                f"Chainer would run without cuDNN; pin cuDNN {want}.x >= {cudnn['first']} "
                "(stack_cudnn_version)."
            )
        elif have < _parts(cudnn["first"]):
            problems.append(
                f"{cupy} supports cuDNN {cudnn['first']} or later, not cuDNN {cudnn_version}; "
                f"pin cuDNN {cudnn['major']}.x >= {cudnn['first']} (stack_cudnn_version)."
            )

    # NCCL: CuPy dlopens libnccl.so.<major> and needs at least the first minor.
    nccl = entry.get("nccl") or {}
    have = _parts(nccl_version)
    if nccl and (have[0] != int(nccl["major"]) or have < _parts(nccl["first"])):
        problems.append(
            f"{cupy} loads NCCL {nccl['major']}.x ({nccl['first']} or later), not NCCL {nccl_version}: "
            f"pin NCCL {nccl['major']}.x >= {nccl['first']} (stack_nccl_version)."
        )
    return problems
