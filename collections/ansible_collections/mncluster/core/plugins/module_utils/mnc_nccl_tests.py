"""What nccl-tests' ``all_reduce_perf`` prints, and whether its bus bandwidth is enough.

The output: ``#`` lines (the parameters, the devices of every rank, the column heads), one row
per message size (``size count type redop root`` then ``time algbw busbw #wrong`` out of place
and again in place), ``# Out of bounds values : N OK|FAILED`` and ``# Avg bus bandwidth : X``.
Bandwidths are GB/s (1e9 B/s); busbw is the figure that is comparable across rank counts
(nccl-tests' doc/PERFORMANCE.md). ``#wrong`` is the count of wrong results (``N/A`` without
validation).

Pure Python, no Ansible imports (tests/unit/test_gpu_parsers.py), used by
module_utils/mnc_verify_gpu_health.py.
"""

from __future__ import annotations

import re

_NUM = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_ROW = re.compile(
    rf"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>\w+)\s+(?P<redop>\w+)\s+(?P<root>-?\d+)\s+"
    rf"(?P<oop_time>{_NUM})\s+(?P<oop_algbw>{_NUM})\s+(?P<oop_busbw>{_NUM})\s+(?P<oop_wrong>\S+)\s+"
    rf"(?P<ip_time>{_NUM})\s+(?P<ip_algbw>{_NUM})\s+(?P<ip_busbw>{_NUM})\s+(?P<ip_wrong>\S+)\s*$"
)
_DEVICE = re.compile(
    r"^#\s+Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device\s+"
    r"(?P<device>\d+)\s+\[(?P<bus>[^\]]+)\]\s+(?P<name>.*)$"
)


def _wrong(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def parse_perf(text: str) -> dict:
    """``{"rows": [{"bytes", "type", "redop", "oop": {time_us, algbw, busbw, wrong}, "ip": {...}}],
    "ranks": [{"rank", "host", "device", "bus", "name"}], "avg_busbw", "out_of_bounds_ok"}``."""
    rows, ranks, avg, oob = [], [], None, None
    for line in (text or "").splitlines():
        m = _ROW.match(line)
        if m:
            g = m.groupdict()
            rows.append(
                {
                    "bytes": int(g["size"]),
                    "type": g["type"],
                    "redop": g["redop"],
                    "oop": {
                        "time_us": float(g["oop_time"]),
                        "algbw": float(g["oop_algbw"]),
                        "busbw": float(g["oop_busbw"]),
                        "wrong": _wrong(g["oop_wrong"]),
                    },
                    "ip": {
                        "time_us": float(g["ip_time"]),
                        "algbw": float(g["ip_algbw"]),
                        "busbw": float(g["ip_busbw"]),
                        "wrong": _wrong(g["ip_wrong"]),
                    },
                }
            )
            continue
        m = _DEVICE.match(line)
        if m:
            d = m.groupdict()
            ranks.append(
                {
                    "rank": int(d["rank"]),
                    "host": d["host"],
                    "device": int(d["device"]),
                    "bus": d["bus"],
                    "name": d["name"].strip(),
                }
            )
            continue
        m = re.match(rf"^#\s*Avg bus bandwidth\s*:\s*({_NUM})", line)
        if m:
            avg = float(m.group(1))
            continue
        m = re.match(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(\w+)", line)
        if m:
            oob = m.group(2) == "OK" and m.group(1) == "0"
    if not rows:
        raise ValueError(
            "no result rows (size count type redop root time algbw busbw #wrong ...) in the output"
        )
    return {"rows": rows, "ranks": ranks, "avg_busbw": avg, "out_of_bounds_ok": oob}


def peak(doc: dict) -> dict:
    """The largest message's row, with its better busbw of out-of-place and in-place: the figure
    a threshold is compared with (small messages measure latency, not bandwidth)."""
    r = max(doc["rows"], key=lambda x: x["bytes"])
    return {
        "bytes": r["bytes"],
        "busbw": max(r["oop"]["busbw"], r["ip"]["busbw"]),
        "algbw": max(r["oop"]["algbw"], r["ip"]["algbw"]),
    }


def problems(doc: dict, min_busbw: float | None) -> list[str]:
    """Wrong results, out-of-bounds values, and a busbw at the largest size below ``min_busbw``."""
    out = []
    wrong = [r["bytes"] for r in doc["rows"] if (r["oop"]["wrong"] or 0) + (r["ip"]["wrong"] or 0) > 0]
    if wrong:
        out.append(f"wrong results at {len(wrong)} size(s), from {wrong[0]} B")
    if doc["out_of_bounds_ok"] is False:
        out.append("out-of-bounds values reported")
    top = peak(doc)
    if min_busbw and top["busbw"] < min_busbw:
        out.append(f"busbw {top['busbw']:.2f} GB/s at {top['bytes']} B is below {min_busbw:g} GB/s")
    return out


def by_size(doc: dict) -> list[dict]:
    """``[{"bytes", "algbw", "busbw"}]`` per size (the better of out-of-place and in-place): what
    verify.json records."""
    return [
        {
            "bytes": r["bytes"],
            "algbw": max(r["oop"]["algbw"], r["ip"]["algbw"]),
            "busbw": max(r["oop"]["busbw"], r["ip"]["busbw"]),
        }
        for r in doc["rows"]
    ]
