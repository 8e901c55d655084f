"""What ``nvidia-smi topo -m`` says: how the GPUs and NICs of a node connect, and each GPU's
nearest NIC.

The matrix has one column per GPU and NIC (older drivers name the NICs, ``mlx5_0``; newer ones
write ``NIC0`` and a ``NIC Legend`` that names them), then ``CPU Affinity``, ``NUMA Affinity``
... columns. A cell is ``X`` (self), ``NV<n>`` (n bonded NVLinks), or a PCIe path, from the
closest: ``PIX`` (one PCIe bridge), ``PXB`` (several bridges), ``PHB`` (the host bridge), ``NODE``
(across host bridges of one NUMA node), ``SYS`` (across NUMA nodes). GPUDirect RDMA pays off
where the NIC is PIX or PXB from the GPU.

Pure Python, no Ansible imports (tests/unit/test_gpu_parsers.py), used by
module_utils/mnc_verify_gpu_health.py.
"""

from __future__ import annotations

import re

# From the closest to the farthest.
PCIE_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")


def _distance(cell: str) -> int:
    """A sortable distance: NVLink first (more links closer), then the PCIe paths in order."""
    m = re.fullmatch(r"NV(\d+)", cell)
    if m:
        return -int(m.group(1))
    return PCIE_PATHS.index(cell) if cell in PCIE_PATHS else len(PCIE_PATHS)


def parse_topo(text: str) -> dict:
    """``{"gpus": [...], "nics": [...], "matrix": {a: {b: cell}}, "affinity": {gpu: {...}},
    "nearest_nic": {gpu: {"nic", "path"} or None}}``; NIC names as the legend gives them."""
    lines = [line.rstrip("\n") for line in (text or "").splitlines()]
    header_at = next((i for i, line in enumerate(lines) if re.match(r"^\s+GPU0\b", line)), None)
    if header_at is None:
        raise ValueError("no matrix header (a line starting with GPU0) in the output")
    header = lines[header_at]
    # Columns are tab- or space-separated; the trailing ones have spaces inside their names.
    extra = [name for name in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID") if name in header]
    names_part = header
    for name in extra:
        names_part = names_part.replace(name, "")
    devices = names_part.split()
    legend = {}
    for line in lines[header_at + 1 :]:
        m = re.match(r"^\s+(NIC\d+):\s*(\S+)\s*$", line)
        if m:
            legend[m.group(1)] = m.group(2)
    matrix, affinity = {}, {}
    for line in lines[header_at + 1 :]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        cells = line.split()
        name, rest = cells[0], cells[1:]
        matrix[name] = dict(zip(devices, rest[: len(devices)], strict=False))
        if name.startswith("GPU"):
            affinity[name] = dict(zip(extra, rest[len(devices) :], strict=False))
    gpus = [d for d in devices if d.startswith("GPU")]
    # A NIC is a column, a row, or both (a terminal that clipped the header keeps the rows).
    nics = [d for d in devices if not d.startswith("GPU")]
    nics += [d for d in matrix if not d.startswith("GPU") and d not in nics]
    nearest = {}
    for g in gpus:
        paths = [(n, matrix.get(g, {}).get(n) or matrix.get(n, {}).get(g)) for n in nics]
        paths = [(n, c) for n, c in paths if c and c != "X"]
        if not paths:
            nearest[g] = None
            continue
        nic, cell = min(paths, key=lambda p: _distance(p[1]))
        nearest[g] = {"nic": legend.get(nic, nic), "path": cell}
    return {
        "gpus": gpus,
        "nics": [legend.get(n, n) for n in nics],
        "matrix": {
            legend.get(a, a): {legend.get(b, b): c for b, c in row.items()} for a, row in matrix.items()
        },
        "affinity": affinity,
        "nearest_nic": nearest,
    }


def summary(doc: dict) -> str:
    """``GPU0 -> mlx5_0 (PIX), ...`` or what is missing."""
    if not doc["gpus"]:
        return "no GPU in the matrix"
    if not doc["nics"]:
        return f"{len(doc['gpus'])} GPU(s), no NIC in the matrix"
    return ", ".join(
        f"{g} -> {n['nic']} ({n['path']})" if n else f"{g} -> none" for g, n in doc["nearest_nic"].items()
    )
