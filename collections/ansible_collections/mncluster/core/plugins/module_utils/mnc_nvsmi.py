"""What ``nvidia-smi -q`` says about a node's GPUs, and what of it is a fault.

``nvidia-smi -q`` prints ``Key : value`` lines nested by indentation, one
``GPU <bus id>`` block per GPU. :func:`parse_query` reads them into a tree
and picks what verify and the Slurm health check judge: persistence mode,
ECC errors, retired pages, remapped rows and the PCIe link. The judging
functions return a list of problems (empty: fine), each naming the GPU.

Pure Python, no Ansible imports: unit-tested with recorded real outputs
(tests/unit/test_gpu_parsers.py), used by module_utils/mnc_verify_gpu_health.py
and the Slurm health check (roles/slurm/files/mncluster-healthcheck).
"""

from __future__ import annotations

import re

_LINE = re.compile(r"^(?P<indent> *)(?P<key>[^:]*?)\s*(?::\s?(?P<value>.*))?$")


def _tree(lines: list[str]) -> dict:
    """``Key : value`` lines nested by indentation into dicts (a key without a value opens one)."""
    root: dict = {}
    stack: list[tuple[int, dict]] = [(-1, root)]
    for raw in lines:
        if not raw.strip():
            continue
        m = _LINE.match(raw.rstrip())
        indent, key, value = len(m.group("indent")), m.group("key").strip(), m.group("value")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if value is None:
            node: dict = {}
            parent[key] = node
            stack.append((indent, node))
        else:
            parent[key] = value.strip()
    return root


def _int(value) -> int | None:
    """``"0"`` -> 0, ``"16x"`` -> 16, ``"N/A"`` or anything else -> None."""
    m = re.fullmatch(r"\s*(\d+)\s*x?\s*", str(value)) if value is not None else None
    return int(m.group(1)) if m else None


def _get(tree: dict, *path):
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def _sum_uncorrectable(block) -> int | None:
    """The sum of every ``... Uncorrectable ...`` counter in an ECC block (old and new layouts:
    ``Double Bit / Total``, ``DRAM Uncorrectable``, ``SRAM Uncorrectable Parity``); None when
    none is a number (N/A: ECC off or not supported)."""
    values = []

    def walk(node, inside_double=False):
        for key, val in (node or {}).items():
            if isinstance(val, dict):
                walk(val, inside_double or key.lower().startswith("double bit"))
            elif "uncorrectable" in key.lower() or (inside_double and key.lower() == "total"):
                n = _int(val)
                if n is not None:
                    values.append(n)

    walk(block if isinstance(block, dict) else {})
    return sum(values) if values else None


def parse_query(text: str) -> dict:
    """``{"driver", "cuda", "gpus": [...]}`` from ``nvidia-smi -q`` (whole or with ``-d``).

    Each GPU: ``bus_id``, ``name``, ``persistence`` (True/False/None), ``perf_state``
    (``P0``...), ``pcie`` (``gen_max``, ``gen_current``, ``width_max``, ``width_current``, ints or
    None), ``ecc_mode``, ``ecc_volatile_uncorrectable``, ``ecc_aggregate_uncorrectable``,
    ``retired`` (``sbe``, ``dbe``, ``pending``), ``remapped`` (``correctable``,
    ``uncorrectable``, ``pending``, ``failure``). What the output does not show is None.
    """
    lines = (text or "").splitlines()
    head, blocks, current = [], [], None
    for line in lines:
        m = re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$", line)
        if m:
            current = {"bus_id": m.group(1), "lines": []}
            blocks.append(current)
        elif current is not None:
            current["lines"].append(line)
        else:
            head.append(line)
    top = _tree(head)
    gpus = []
    for b in blocks:
        t = _tree(b["lines"])
        link = _get(t, "PCI", "GPU Link Info") or {}
        persistence = _get(t, "Persistence Mode")
        retired = _get(t, "Retired Pages") or {}
        remap = _get(t, "Remapped Rows") or {}
        pending_retire = retired.get("Pending Page Blacklist", retired.get("Pending Page Retirement"))
        gpus.append(
            {
                "bus_id": b["bus_id"],
                "name": _get(t, "Product Name"),
                "persistence": {"Enabled": True, "Disabled": False}.get(persistence),
                "perf_state": _get(t, "Performance State"),
                "pcie": {
                    "gen_max": _int(_get(link, "PCIe Generation", "Max")),
                    "gen_current": _int(_get(link, "PCIe Generation", "Current")),
                    "width_max": _int(_get(link, "Link Width", "Max")),
                    "width_current": _int(_get(link, "Link Width", "Current")),
                },
                "ecc_mode": _get(t, "Ecc Mode", "Current") or _get(t, "ECC Mode", "Current"),
                "ecc_volatile_uncorrectable": _sum_uncorrectable(_get(t, "ECC Errors", "Volatile")),
                "ecc_aggregate_uncorrectable": _sum_uncorrectable(_get(t, "ECC Errors", "Aggregate")),
                "retired": {
                    "sbe": _int(_get(retired, "Single Bit ECC")),
                    "dbe": _int(_get(retired, "Double Bit ECC")),
                    "pending": {"Yes": True, "No": False}.get(pending_retire),
                },
                "remapped": {
                    "correctable": _int(remap.get("Correctable Error")),
                    "uncorrectable": _int(remap.get("Uncorrectable Error")),
                    "pending": {"Yes": True, "No": False}.get(remap.get("Pending")),
                    "failure": {"Yes": True, "No": False}.get(remap.get("Remapping Failure Occurred")),
                },
            }
        )
    return {"driver": top.get("Driver Version"), "cuda": top.get("CUDA Version"), "gpus": gpus}


def _who(i: int, gpu: dict) -> str:
    return f"GPU {i} ({gpu['bus_id']})"


def persistence_problems(doc: dict) -> list[str]:
    """Every GPU in persistence mode (nvidia-persistenced, or nvidia-smi -pm 1): without it the
    driver tears the GPU's state down between jobs and the next job's start pays for it."""
    return [
        f"{_who(i, g)} persistence mode {'off' if g['persistence'] is False else 'unknown'}"
        for i, g in enumerate(doc.get("gpus") or [])
        if g["persistence"] is not True
    ]


def ecc_problems(doc: dict) -> list[str]:
    """Uncorrectable ECC errors since the driver loaded (volatile), retired pages waiting for a
    reset, double-bit retirements, a row remapping pending (reset the GPU) or failed (the GPU
    has no spare rows left: replace it)."""
    out = []
    for i, g in enumerate(doc.get("gpus") or []):
        who = _who(i, g)
        if g["ecc_volatile_uncorrectable"]:
            out.append(
                f"{who} {g['ecc_volatile_uncorrectable']} uncorrectable ECC error(s) since the driver loaded"
            )
        if g["retired"]["pending"]:
            out.append(f"{who} retired pages pending (reset the GPU)")
        if g["remapped"]["failure"]:
            out.append(f"{who} row remapping failed (no spare rows: replace the GPU)")
        if g["remapped"]["pending"]:
            out.append(f"{who} row remapping pending (reset the GPU to activate it)")
    return out


def ecc_summary(doc: dict) -> str:
    """What the counters say for every GPU, in one line (the row's detail when nothing is wrong)."""
    parts = []
    for i, g in enumerate(doc.get("gpus") or []):
        r, m = g["retired"], g["remapped"]
        bits = [f"ECC {g['ecc_mode'] or '?'}"]
        if g["ecc_aggregate_uncorrectable"] is not None:
            bits.append(f"{g['ecc_aggregate_uncorrectable']} uncorrectable in its lifetime")
        if r["dbe"] is not None or r["sbe"] is not None:
            bits.append(f"retired pages sbe {r['sbe']}, dbe {r['dbe']}")
        if m["uncorrectable"] is not None:
            bits.append(f"remapped rows {m['correctable']} correctable, {m['uncorrectable']} uncorrectable")
        parts.append(f"GPU {i}: " + ", ".join(bits))
    return "; ".join(parts)


def pcie_problems(doc: dict) -> tuple[list[str], list[str]]:
    """(problems, notes) of every GPU's PCIe link. A width below the link's maximum is a fault (a
    badly seated card, a riser, a slot wired narrower). A generation below the maximum is one only
    while the GPU is busy (P0): an idle GPU trains its link down to save power, which is a note."""
    problems, notes = [], []
    for i, g in enumerate(doc.get("gpus") or []):
        p, who = g["pcie"], _who(i, g)
        if None in (p["width_max"], p["width_current"], p["gen_max"], p["gen_current"]):
            notes.append(f"{who} link not reported")
            continue
        if p["width_current"] < p["width_max"]:
            problems.append(f"{who} PCIe width x{p['width_current']} of x{p['width_max']}")
        if p["gen_current"] < p["gen_max"]:
            text = f"{who} PCIe Gen{p['gen_current']} of Gen{p['gen_max']}"
            if g["perf_state"] == "P0":
                problems.append(text + " while busy (P0)")
            else:
                notes.append(text + f" at {g['perf_state'] or '?'} (an idle link trains down to save power)")
    return problems, notes


def pcie_summary(doc: dict) -> str:
    return "; ".join(
        f"GPU {i}: Gen{g['pcie']['gen_current']}/{g['pcie']['gen_max']} x{g['pcie']['width_current']}/"
        f"x{g['pcie']['width_max']} {g['perf_state'] or ''}".rstrip()
        for i, g in enumerate(doc.get("gpus") or [])
    )
