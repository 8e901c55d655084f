"""roles/rdma's decision: which RDMA path a node has, and what each piece (the RDMA stack, the
memlock limit, nvidia-peermem) does there and why.

Pure functions, no Ansible imports. Used by Jinja as the ``mnc_rdma_link`` and ``mnc_rdma_plan``
filters (plugins/filter/mnc.py), read by every task of the role that names the plan (its report,
its include, its record, its final check): one short expression each, instead of a Jinja
cascade that every worker compiled again for every name. Tested through the role's own task
files in tests/unit/test_rdma.py.
"""

from __future__ import annotations

from ansible_collections.mncluster.core.plugins.module_utils import mnc_hw

DECLARED = ("infiniband", "roce")


def _adapters(lspci_text: str) -> tuple[int, int]:
    """InfiniBand controllers (class 0207) and Mellanox/NVIDIA Ethernet adapters (15b3, class
    0200: RoCE) in ``lspci -n`` output."""
    return (
        len(mnc_hw.pci_devices(lspci_text or "", "", "0207")),
        len(mnc_hw.pci_devices(lspci_text or "", "15b3", "0200")),
    )


def _counts(rdma_mode: str, lspci_text: str) -> tuple[int, int]:
    """The PCI listing's adapters, read only with ``auto`` (a declared or absent path reads none)."""
    return _adapters(lspci_text) if rdma_mode == "auto" else (0, 0)


def _link(rdma_mode: str, ib: int, roce: int) -> str:
    if rdma_mode in DECLARED:
        return rdma_mode
    if rdma_mode == "auto" and ib > 0:
        return "infiniband"
    if rdma_mode == "auto" and roce > 0:
        return "roce"
    return "none"


def link(rdma_mode: str, lspci_text: str = "") -> str:
    """``infiniband``, ``roce`` or ``none``: what rdma_mode declares, or with ``auto`` what the
    PCI listing holds (InfiniBand first)."""
    return _link(rdma_mode, *_counts(rdma_mode, lspci_text))


def _path_reason(rdma_mode: str, path: str, ib: int, roce: int) -> str:
    if rdma_mode in DECLARED:
        return f"declared (rdma_mode: {rdma_mode})"
    if path == "infiniband":
        return f"rdma_mode: auto found {ib} InfiniBand adapter(s) on the PCI bus"
    if path == "roce":
        return f"rdma_mode: auto found {roce} Mellanox/NVIDIA Ethernet adapter(s) on the PCI bus (RoCE)"
    if rdma_mode == "none":
        return "rdma_mode: none (the default): no InfiniBand/RoCE path"
    return (
        "rdma_mode: auto found no RDMA adapter on the PCI bus (no InfiniBand controller, class 0207,"
        " and no Mellanox/NVIDIA 15b3 Ethernet adapter)"
    )


def plan(
    rdma_mode: str,
    lspci_text: str = "",
    memlock: str = "",
    memlock_systemd: bool = True,
    use_gpu: bool = False,
    in_container: bool = False,
    gpudirect: bool = True,
) -> dict:
    """``{rdma, memlock, nvidia-peermem}``, each ``{state, reason}``: state ``enabled``,
    ``absent`` (its files are removed) or ``skipped`` (nvidia-peermem in CPU mode or in a
    container, where the module is the host kernel's)."""
    ib, roce = _counts(rdma_mode, lspci_text)  # the listing read once, for the path and its reason
    path = _link(rdma_mode, ib, roce)
    reason = _path_reason(rdma_mode, path, ib, roce)
    memlock = "" if memlock is None else str(memlock)
    none = path == "none"
    if none:
        memlock_reason = "no RDMA path: " + reason
    elif not memlock:
        memlock_reason = "rdma_memlock is empty: the limits are left as they are"
    else:
        memlock_reason = f"memlock {memlock} for every user"
        if memlock_systemd:
            memlock_reason += " and systemd service"
    if not use_gpu:
        peermem = ("skipped", "CPU mode (mnc_use_gpu false): no GPUDirect RDMA")
    elif in_container:
        peermem = ("skipped", "a container: nvidia-peermem is its host kernel's")
    elif none:
        peermem = ("absent", "no RDMA path: " + reason)
    elif not gpudirect:
        peermem = (
            "absent",
            "turned off (rdma_gpudirect: false): NCCL stages GPU buffers through host memory",
        )
    else:
        peermem = ("enabled", "GPUDirect RDMA wanted (rdma_gpudirect: true)")
    return {
        "rdma": {"state": "absent" if none else "enabled", "reason": reason},
        "memlock": {"state": "absent" if none or not memlock else "enabled", "reason": memlock_reason},
        "nvidia-peermem": {"state": peermem[0], "reason": peermem[1]},
    }
