"""roles/stack refuses GPU pins CuPy cannot load, and its defaults load together.

The rule is module_utils/mnc_gpu_matrix.py over the data in
roles/stack/defaults/main/cuda.yml (stack_cupy_support, cited there). The
Python tests read that very data; the playbook tests run the stack role's
real check with ansible-playbook on localhost (nothing is installed: the
role only asserts), and one shows the GPU stage's roles stop at the stack
check before any of their own tasks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from ansible_env import run_playbook

ROOT = Path(__file__).resolve().parents[2]
from ansible_collections.mncluster.core.plugins.module_utils import mnc_gpu_matrix

DEFAULTS = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main" / "cuda.yml").read_text())
SUPPORT = DEFAULTS["stack_cupy_support"]
PINS = {
    "stack_cuda_version": DEFAULTS["stack_cuda_version"],
    "stack_cupy_package": DEFAULTS["stack_cupy_package"],
    "stack_cupy_version": DEFAULTS["stack_cupy_version"],
    "stack_cudnn_version": DEFAULTS["stack_cudnn_version"],
    "stack_nccl_version": DEFAULTS["stack_nccl_version"],
}


def problems(**change):
    pins = {**PINS, **change}
    return mnc_gpu_matrix.gpu_stack_problems(
        SUPPORT,
        pins["stack_cuda_version"],
        pins["stack_cupy_package"],
        pins["stack_cupy_version"],
        pins["stack_cudnn_version"],
        pins["stack_nccl_version"],
    )


# Each refused combination: the pins changed from the defaults, and the words
# the message must carry (the versions it names, what to pin instead).
REFUSED = {
    "cudnn9-with-cupy13": (
        {"stack_cudnn_version": "9.5.1.17"},
        ["cupy-cuda12x 13.6.0", "cuDNN 9.5.1.17", "libcudnn.so.8", "without cuDNN"],
    ),
    "cudnn8-with-cupy14": (
        {"stack_cupy_version": "14.0.1"},
        ["cupy-cuda12x 14.0.1", "dropped cuDNN", "cuDNN 8.9.7.29", "pin CuPy 13.x"],
    ),
    "cuda11-with-cupy-cuda12x": (
        {"stack_cuda_version": "11.8"},
        ["cupy-cuda12x 13.6.0", "CUDA 12.0-12.9", "not CUDA 11.8", "cupy-cuda11x"],
    ),
    "cuda-minor-above-the-range": (
        {"stack_cuda_version": "12.10"},
        ["CUDA 12.0-12.9", "not CUDA 12.10"],
    ),
    "cuda13-with-cupy14-beyond-13.1": (
        {
            "stack_cuda_version": "13.2",
            "stack_cupy_package": "cupy-cuda13x",
            "stack_cupy_version": "14.0.1",
            "stack_cudnn_version": "",
        },
        ["cupy-cuda13x 14.0.1", "CUDA 13.0-13.1", "not CUDA 13.2"],
    ),
    "cupy-cuda13x-before-13.6": (
        {"stack_cuda_version": "13.0", "stack_cupy_package": "cupy-cuda13x", "stack_cupy_version": "13.5.1"},
        ["cupy-cuda13x 13.5.1", "from CuPy 13.6.0 on"],
    ),
    "cudnn-older-than-8.8": (
        {"stack_cudnn_version": "8.7.0.84"},
        ["cuDNN 8.8 or later", "not cuDNN 8.7.0.84"],
    ),
    "nccl3": (
        {"stack_nccl_version": "3.0.1"},
        ["NCCL 2.x", "not NCCL 3.0.1", "stack_nccl_version"],
    ),
    "nccl-older-than-2.16": (
        {"stack_nccl_version": "2.15.5"},
        ["2.16 or later", "not NCCL 2.15.5"],
    ),
    "cupy-release-not-in-the-matrix": (
        {"stack_cupy_version": "12.3.0"},
        ["cupy-cuda12x 12.3.0", "CuPy 12.x is not in the matrix"],
    ),
    "wheel-the-release-does-not-publish": (
        {"stack_cupy_package": "cupy-cuda11x", "stack_cupy_version": "14.0.1", "stack_cudnn_version": ""},
        ["no cupy-cuda11x wheel"],
    ),
}


def test_the_defaults_load_together():
    assert problems() == []
    # What the defaults pin: CUDA 12.6, cuDNN 8 (the v8 library CuPy 13 loads), NCCL 2.
    assert PINS["stack_cudnn_version"].startswith("8.9.")
    assert PINS["stack_cupy_package"] == "cupy-cuda12x"
    assert PINS["stack_cupy_version"].startswith("13.")


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_each_refused_combination_is_refused_with_a_message_naming_the_versions(name):
    change, words = REFUSED[name]
    found = problems(**change)
    assert len(found) == 1, found
    for word in words:
        assert word in found[0], (word, found[0])


def test_every_problem_is_reported_at_once():
    found = problems(stack_cudnn_version="9.5.1.17", stack_nccl_version="3.0.1", stack_cuda_version="12.10")
    assert len(found) == 3, found


def test_no_cudnn_is_fine_with_cupy14():
    assert problems(stack_cupy_version="14.0.1", stack_cudnn_version="") == []


def test_the_defaults_cite_cupys_installation_guide():
    text = (ROOT / "roles" / "stack" / "defaults" / "main" / "cuda.yml").read_text()
    assert "https://docs.cupy.dev/en/v13.6.0/install.html" in text
    assert "https://docs.cupy.dev/en/stable/install.html" in text


# --- the real check, through ansible-playbook --------------------------------

INVENTORY = "localhost ansible_connection=local ansible_python_interpreter={python}\n"
STACK_PLAY = """\
- name: The stack role's check
  hosts: localhost
  gather_facts: false
  tasks:
    - name: The check preflight runs
      ansible.builtin.import_role:
        name: stack
        tasks_from: check
"""
# The GPU stage's roles (playbooks/gpu.yml) without preflight, in check mode:
# their shared dependency cuda_matrix must refuse the matrix before any of
# their own tasks runs.
GPU_PLAY = """\
- name: The GPU stage's roles
  hosts: localhost
  gather_facts: true
  vars:
    mnc_use_gpu: true
    cuda_install_method: pip
  roles:
    - role: stack
    - role: nvidia_driver
    - role: cuda
    - role: cudnn
    - role: nccl
"""


def _run(tmp_path, play, extra_vars=None, *args):
    (tmp_path / "hosts").write_text(INVENTORY.format(python=sys.executable))
    (tmp_path / "play.yml").write_text(play)
    argv = list(args)
    if extra_vars:
        argv += ["-e", json.dumps(extra_vars)]
    proc, _elapsed = run_playbook(tmp_path / "play.yml", *argv, inventory=tmp_path / "hosts", timeout=300)
    return proc, proc.stdout


def test_the_stack_role_passes_the_defaults(tmp_path):
    proc, out = _run(tmp_path, STACK_PLAY)
    assert proc.returncode == 0, out
    assert "TASK [stack : Check the version matrix" in out


@pytest.mark.parametrize(
    "name", ["cudnn9-with-cupy13", "cudnn8-with-cupy14", "cuda11-with-cupy-cuda12x", "nccl3"]
)
def test_the_stack_role_refuses(tmp_path, name):
    change, words = REFUSED[name]
    if name == "cuda11-with-cupy-cuda12x":
        # A whole CUDA 11 matrix (cuDNN and NCCL builds for 11), so only CuPy's wheel is wrong.
        change = {**change, "stack_cudnn_cuda_major": 11, "stack_nccl_cuda_version": "11.8"}
    proc, out = _run(tmp_path, STACK_PLAY, change)
    assert proc.returncode != 0, out
    assert "cannot use this GPU stack" in out, out
    for word in words:
        assert word in out, (word, out)


def test_the_gpu_stage_stops_at_the_stack_check_before_anything_is_installed(tmp_path):
    proc, out = _run(tmp_path, GPU_PLAY, {"stack_cudnn_version": "9.5.1.17"}, "--check")
    assert proc.returncode != 0, out
    assert "cannot use this GPU stack" in out, out
    ran = [line for line in out.splitlines() if line.startswith("TASK [") and "Gathering Facts" not in line]
    assert ran and all(line.startswith("TASK [cuda_matrix : ") for line in ran), ran
