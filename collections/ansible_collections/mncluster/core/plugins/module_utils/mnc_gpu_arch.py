"""Which driver branch the GPUs on a node's PCI bus need, from their PCI device IDs.

``lspci -n`` names a GPU by vendor and device ID (``10de:2901``, a B200). NVIDIA numbers its
chips in blocks per architecture; a driver branch older than the architecture's first does not
know the chip and nvidia-smi then sees no GPU. The blocks kept here are the ones a pinned branch
can be too old for:

* Blackwell and what follows it: device IDs from 0x2900 on (GB100/GB102: B200 0x2901, GB200
  0x2941; GB20x: RTX PRO 6000 Blackwell 0x2bb1/0x2bb5, GeForce RTX 50 series 0x2b85...); the
  first branch to support them is R570 (the CUDA 12.8 driver).
* Hopper: 0x2300-0x23ff (H100 0x2330/0x2331, H800 0x2324, H200 0x2335, GH200 0x2342): R525
  (the floor CUDA 12 sets anyway, stack_cuda_driver_min_version).

Pure Python, no Ansible imports; Jinja reaches it as the ``mnc_driver_gpu_problems`` filter
(plugins/filter/mnc.py), roles/nvidia_driver checks it before it installs anything.
Unit-tested in tests/unit/test_gpu_arch.py.
"""

from __future__ import annotations

from ansible_collections.mncluster.core.plugins.module_utils.mnc_hw import pci_devices

# (first device ID, last device ID, architecture, first driver branch that supports it)
ARCHITECTURES = (
    (0x2900, 0xFFFF, "Blackwell or newer", 570),
    (0x2300, 0x23FF, "Hopper", 525),
)
# NVIDIA display (0300) and 3D (0302) controllers: the GPUs, as roles/common counts them.
GPU_CLASSES = ("0300", "0302")


def gpus_by_architecture(lspci_text) -> list[dict]:
    """``[{slot, device, architecture, min_branch}]`` of every NVIDIA GPU of a known block."""
    out = []
    for dev in pci_devices(lspci_text, vendor="10de"):
        if dev["class"] not in GPU_CLASSES:
            continue
        ident = int(dev["device"], 16)
        for first, last, arch, branch in ARCHITECTURES:
            if first <= ident <= last:
                out.append({"slot": dev["slot"], "device": dev["device"], "architecture": arch,
                            "min_branch": branch})  # fmt: skip
                break
    return out


def driver_gpu_problems(branch, lspci_text) -> list[str]:
    """Why driver branch ``branch`` cannot drive the GPUs ``lspci -n`` shows (empty: it can)."""
    try:
        have = int(str(branch).split(".")[0])
    except ValueError:
        return [f"driver branch {branch!r} is not a number (e.g. 580)"]
    too_new: dict[tuple[str, int], list[str]] = {}
    for gpu in gpus_by_architecture(lspci_text):
        if have < gpu["min_branch"]:
            too_new.setdefault((gpu["architecture"], gpu["min_branch"]), []).append(
                f"{gpu['slot']} (10de:{gpu['device']})"
            )
    return [
        f"driver branch {have} does not support {arch} GPUs ({', '.join(slots)}): they need branch {need} or "
        f"newer (stack_cuda_driver_branch, stack_cuda_driver_version)"
        for (arch, need), slots in too_new.items()
    ]
