"""roles/cuda_matrix's check: the GPU roles' install choices, one message per broken rule.

The rules are module_utils/mnc_cuda_matrix.py (the role passes every value it reads through the
mnc_cuda_matrix_problems filter); these tests give them the stack's pinned records
(roles/stack/defaults/main/cuda.yml) as the role does, and break one choice at a time. The
gpu_render scenario refuses each broken rule end to end through the GPU roles.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible_collections.mncluster.core.plugins.filter.mnc import FilterModule
from ansible_collections.mncluster.core.plugins.module_utils.mnc_cuda_matrix import cuda_matrix_problems

ROOT = Path(__file__).resolve().parents[2]
STACK = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main" / "cuda.yml").read_text())
DEBIAN12 = yaml.safe_load((ROOT / "roles" / "cuda_matrix" / "vars" / "debian12.yml").read_text())


def inputs(**over):
    """What roles/cuda_matrix passes on a Debian 12 node in CPU mode, with the stack's pins."""
    values = {
        "distribution": "Debian",
        "distribution_version": "12.11",
        "distro_id": "debian12",
        "distros": ["debian12", "debian13", "ubuntu2204", "ubuntu2404"],
        "host": "node1",
        "cuda_version": STACK["stack_cuda_version"],
        "stack_cuda_version": STACK["stack_cuda_version"],
        "cupy_package": STACK["stack_cupy_package"],
        "cudnn_cuda_major": STACK["stack_cudnn_cuda_major"],
        "cuda_method": "nvidia_repo",
        "cudnn_method": "nvidia_repo",
        "nccl_method": "nvidia_repo",
        "driver_method": "nvidia_repo",
        "methods": ["nvidia_repo", "distro", "pip"],
        "wheels": STACK["stack_cuda_pip_wheels"] + STACK["stack_cuda_pip_math_wheels"],
        "repo_packages": STACK["stack_cuda_repo_packages"],
        "distro_version": DEBIAN12["__cuda_distro_version"],
        "repo_distro": DEBIAN12["__cuda_repo_distro"],
        "distro_nccl_packages": DEBIAN12["__cuda_distro_nccl_packages"],
        "repo_distros": STACK["stack_cuda_repo_distros"],
        "driver_branch": STACK["stack_cuda_driver_branch"],
        "driver_version": STACK["stack_cuda_driver_version"],
        "driver_min_version": STACK["stack_cuda_driver_min_version"],
        "use_gpu": False,
        "cudnn_without_gpu": False,
        "nccl_without_gpu": False,
        "cudnn_pip_wheel": STACK["stack_cudnn_pip_wheel"],
        "cudnn_version": STACK["stack_cudnn_version"],
        "cudnn_repo_packages": STACK["stack_cudnn_repo_packages"],
        "nccl_pip_wheel": STACK["stack_nccl_pip_wheel"],
        "nccl_version": STACK["stack_nccl_version"],
        "nccl_repo_packages": STACK["stack_nccl_repo_packages"],
    }
    values.update(over)
    return values


@pytest.mark.parametrize("method", ["nvidia_repo", "pip"])
@pytest.mark.parametrize("gpu", [False, True])
def test_the_pinned_stack_passes_with_either_method(method, gpu):
    v = inputs(cuda_method=method, cudnn_method=method, nccl_method=method, use_gpu=gpu)
    assert cuda_matrix_problems(v) == []


def test_the_filter_is_the_rule():
    assert FilterModule().filters()["mnc_cuda_matrix_problems"](inputs(cuda_version="11.8")) == (
        cuda_matrix_problems(inputs(cuda_version="11.8"))
    )


def test_an_unknown_distribution_is_the_only_message():
    problems = cuda_matrix_problems(inputs(distro_id="fedora40", cuda_method="apt-get", distro_version=""))
    assert problems == [
        "cuda: Debian 12.11 (fedora40) is not supported; mncluster's GPU roles support"
        " debian12, debian13, ubuntu2204, ubuntu2404."
    ]


def test_every_broken_rule_is_named_at_once():
    problems = cuda_matrix_problems(
        inputs(nccl_method="foo", cuda_version="13.0", driver_version="470.256.02", driver_branch="470")
    )
    assert [p.split(":")[1].strip().split(" ")[0] for p in problems] == [
        "unknown",
        "cuda_version",
        "packages",
        "driver",
    ]


@pytest.mark.parametrize(
    ("over", "expect"),
    [
        (
            {"nccl_method": "foo"},
            "unknown install method (cuda_install_method=nvidia_repo, cudnn_install_method="
            "nvidia_repo, nccl_install_method=foo); choose one of nvidia_repo, distro, pip.",
        ),
        (
            {"cuda_method": "pip", "cuda_version": "12.4"},
            "wheels that do not belong to CUDA 12.4: nvidia-cuda-runtime-cu12",
        ),
        (
            {"cuda_method": "pip", "wheels": [{"name": "nvidia-cublas-cu11", "version": "11.11.3.6"}]},
            "wheels that do not belong to CUDA 12.6: nvidia-cublas-cu11 11.11.3.6.",
        ),
        (
            {"repo_packages": [{"name": "cuda-toolkit-12-5", "version": "12.5.1-1"}]},
            "packages that are not CUDA 12.6's: cuda-toolkit-12-5=12.5.1-1",
        ),
        (
            {"cuda_method": "distro", "cudnn_method": "pip", "nccl_method": "pip"},
            "debian12 packages CUDA 11.8, but the matrix is CUDA 12.6 (cuDNN for CUDA 12, cupy-cuda12x).",
        ),
        (
            {"use_gpu": True, "cudnn_method": "distro"},
            "the cuDNN/NCCL records do not fit CUDA 12.6 (cudnn distro:",
        ),
        ({"nccl_without_gpu": True, "nccl_method": "distro"}, "nccl distro:"),
        ({"use_gpu": True, "cudnn_version": "8.9.0.1"}, "the cuDNN/NCCL records do not fit CUDA 12.6"),
        (
            {"use_gpu": True, "nccl_repo_packages": [{"name": "libnccl2", "version": "2.23.4-1+cuda11.8"}]},
            "the cuDNN/NCCL records do not fit CUDA 12.6",
        ),
        (
            {
                "use_gpu": True,
                "cudnn_method": "pip",
                "cudnn_pip_wheel": {"name": "nvidia-cudnn-cu11", "version": "8.9.7.29"},
            },
            "(cudnn pip: nvidia-cudnn-cu11 version 8.9.7.29;",
        ),
        ({"driver_version": "560.1.2"}, "driver 560.1.2 (branch 580) cannot run CUDA 12.6"),
        ({"driver_version": "580.1.2", "driver_min_version": "580.95.05"}, "be at least 580.95.05."),
        (
            {"distro_id": "debian13", "use_gpu": True},
            "cuda: cuda_install_method, cudnn_install_method, "
            "nccl_install_method, nvidia_driver_install_method: nvidia_repo on node1 (debian13), but"
            " NVIDIA's debian13 repository is not known to carry the matrix's packages"
            " (stack_cuda_repo_distros: debian12, ubuntu2204, ubuntu2404); it has no driver branch 580",
        ),
        (
            {
                "distro_id": "debian13",
                "cuda_method": "pip",
                "cudnn_method": "pip",
                "nccl_method": "pip",
                "use_gpu": True,
            },
            "cuda: nvidia_driver_install_method: nvidia_repo on node1 (debian13)",
        ),
    ],
)
def test_each_broken_rule_says_what_and_how(over, expect):
    problems = cuda_matrix_problems(inputs(**over))
    assert len(problems) == 1, problems
    assert expect in problems[0]


@pytest.mark.parametrize("version", ["12", "11.8", "12.6.3"])
def test_cuda_version_is_the_matrixs_major_minor(version):
    problems = cuda_matrix_problems(inputs(cuda_version=version))
    assert problems[0] == (
        f"cuda: cuda_version {version} must be major.minor and have the matrix's CUDA major"
        " (stack_cuda_version 12.6): cuDNN, NCCL and cupy-cuda12x are chosen for it."
    )


def test_cpu_mode_does_not_judge_the_gpu_libraries():
    # cuDNN and NCCL are installed in GPU mode only (or with *_install_without_gpu)
    assert cuda_matrix_problems(inputs(cudnn_method="distro", cudnn_version="8.9.0.1")) == []


def test_the_driver_is_compared_as_a_version_not_as_text():
    assert cuda_matrix_problems(inputs(driver_branch="1000", driver_version="1000.1.1")) == []
    assert cuda_matrix_problems(inputs(driver_min_version="580.100.1"))[0].startswith(
        "cuda: driver 580.95.05"
    )
