"""Small statistics and bandwidth helpers for the benchmark document.

Units follow nccl-tests: bytes, seconds, GB/s = 1e9 B/s; ``algbw`` = size /
time and ``busbw`` = algbw * 2 (p - 1) / p for an allreduce, which makes the
number comparable with the link bandwidth whatever the process count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

GB = 1e9


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    xs = sorted(float(v) for v in values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(values: Sequence[float]) -> dict:
    """median, mean, p95, min, max, quartiles and IQR of a non-empty sequence."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("summarize needs at least one value")
    return {
        "median": percentile(xs, 50),
        "mean": sum(xs) / len(xs),
        "p95": percentile(xs, 95),
        "min": min(xs),
        "max": max(xs),
        "q1": percentile(xs, 25),
        "q3": percentile(xs, 75),
        "iqr": percentile(xs, 75) - percentile(xs, 25),
    }


def algbw(nbytes: float, seconds: float) -> float | None:
    """Algorithm bandwidth in GB/s: bytes / time."""
    if not seconds or seconds <= 0:
        return None
    return nbytes / seconds / GB


def busbw(nbytes: float, seconds: float, processes: int) -> float | None:
    """Allreduce bus bandwidth in GB/s: 2 L (p - 1) / p / t; None at p = 1."""
    if processes < 2 or not seconds or seconds <= 0:
        return None
    return 2.0 * nbytes * (processes - 1) / processes / seconds / GB
