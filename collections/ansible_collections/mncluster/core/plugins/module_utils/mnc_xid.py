"""The NVIDIA driver's Xid lines in the kernel log (``NVRM: Xid (PCI:<bus>): <code>, ...``).

An Xid is the driver's report of a GPU error: 48 a double-bit ECC error, 63/64 a row
remapping, 79 the GPU fell off the bus, 94/95 contained/uncontained errors, 13/31/43 most often
an application's fault. Pure Python, no Ansible imports (tests/unit/test_gpu_parsers.py).
"""

from __future__ import annotations

import re

_XID = re.compile(r"NVRM: Xid \(PCI:(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d+)(?:, (?P<text>.*))?")

# Codes an application's own bug raises (an illegal address, a kernel killed): reported, not a
# fault of the node. NVIDIA's Xid catalogue lists them as "user application" causes.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68})


def parse_xids(text: str) -> list[dict]:
    """``[{"bus", "code", "text", "line"}]`` in log order."""
    out = []
    for line in (text or "").splitlines():
        m = _XID.search(line)
        if m:
            out.append(
                {
                    "bus": m.group("bus"),
                    "code": int(m.group("code")),
                    "text": (m.group("text") or "").strip(),
                    "line": line.strip(),
                }
            )
    return out


def xid_problems(xids: list[dict]) -> list[str]:
    """One line per GPU and code, application codes left out."""
    seen: dict[tuple[str, int], int] = {}
    for x in xids:
        if x["code"] not in APPLICATION_XIDS:
            seen[(x["bus"], x["code"])] = seen.get((x["bus"], x["code"]), 0) + 1
    return [f"Xid {code} on {bus}" + (f" ({n} times)" if n > 1 else "") for (bus, code), n in seen.items()]
