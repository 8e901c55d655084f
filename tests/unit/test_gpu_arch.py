"""Which driver branch the GPUs on the PCI bus need (module_utils/mnc_gpu_arch.py), through the
filter roles/nvidia_driver uses (mncluster.core's plugins/filter/mnc.py), with lspci -n listings of real
boards."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from ansible_collections.mncluster.core.plugins.filter import mnc
from ansible_collections.mncluster.core.plugins.module_utils import mnc_gpu_arch

# An HGX B200 board: 8 GPUs (10de:2901) and its NVSwitches (bridges, 0680), a NIC beside them.
B200 = "\n".join(
    [f"{bus}:00.0 0302: 10de:2901 (rev a1)" for bus in ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")]
    + ["05:00.0 0680: 10de:2901 (rev a1)", "0c:00.0 0207: 15b3:1021"]
)
# Two RTX PRO 6000 Blackwell Server Edition (10de:2bb5, the DCGM fixture's device IDs).
RTX_PRO = "01:00.0 0302: 10de:2bb5 (rev a1)\n02:00.0 0302: 10de:2bb5 (rev a1)\n"
# An H100 PCIe and an older A100 (an architecture no branch here is too old for).
MIXED = "17:00.0 0302: 10de:2331 (rev a1)\n65:00.0 0302: 10de:20b5 (rev a1)\n"


def test_blackwell_board_refuses_an_older_branch_naming_the_gpus():
    problems = mnc.mnc_driver_gpu_problems(B200, "560")
    assert len(problems) == 1
    assert problems[0].startswith(
        "driver branch 560 does not support Blackwell or newer GPUs (18:00.0 (10de:2901), "
    )
    assert (
        "they need branch 570 or newer (stack_cuda_driver_branch, stack_cuda_driver_version)" in problems[0]
    )
    # The NVSwitch bridge (class 0680) is no GPU.
    assert "05:00.0" not in problems[0]
    assert mnc.mnc_driver_gpu_problems(RTX_PRO, "565")[0].startswith(
        "driver branch 565 does not support Blackwell"
    )


def test_a_branch_that_supports_them_passes():
    assert mnc.mnc_driver_gpu_problems(B200, "570") == []
    assert mnc.mnc_driver_gpu_problems(B200, "580") == []
    assert mnc.mnc_driver_gpu_problems(RTX_PRO, 580) == []
    assert mnc.mnc_driver_gpu_problems(MIXED, "525") == []
    assert mnc.mnc_driver_gpu_problems("", "470") == []


def test_hopper_needs_525():
    assert mnc.mnc_driver_gpu_problems(MIXED, "515") == [
        "driver branch 515 does not support Hopper GPUs (17:00.0 (10de:2331)): they need branch 525 or newer "
        "(stack_cuda_driver_branch, stack_cuda_driver_version)"
    ]
    assert [g["architecture"] for g in mnc_gpu_arch.gpus_by_architecture(MIXED)] == ["Hopper"]


def test_a_branch_that_is_no_number_is_named():
    assert mnc.mnc_driver_gpu_problems(B200, "latest") == [
        "driver branch 'latest' is not a number (e.g. 580)"
    ]


def test_the_matrix_default_supports_blackwell():
    import yaml

    matrix = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main" / "cuda.yml").read_text())
    branch = matrix["stack_cuda_driver_branch"]
    assert mnc.mnc_driver_gpu_problems(B200 + "\n" + RTX_PRO + MIXED, branch) == []
    assert matrix["stack_cuda_driver_version"].startswith(f"{branch}.")
