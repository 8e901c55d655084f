"""roles/nvidia_driver's reboot rule (tasks/reboot.yml), without a GPU (issue 16).

A reboot loads a new kernel module, so the role plans one only when this run changed the
driver's packages (``__nvidia_driver_changed``, set by install-*.yml) and nvidia-smi then says
the loaded module is not the installed one (NVML's "Driver/library version mismatch", or no
module yet after a first install). It never reboots for any other nvidia-smi failure, nor for
a driver it did not change. The real task file runs on localhost, case by case, with a stand-in
nvidia-smi on PATH that prints what the real one prints in each situation; the connection is
local, so the role itself never reboots (it never reboots the controller) and what it decided is
read from ``__nvidia_driver_needs_reboot`` and its report. The reboot of a remote node (over
SSH, check mode) is tested in molecule/default.
"""

from __future__ import annotations

import json

import pytest
from ansible_env import CASE_FACTS, CASE_GATHER, CASE_REFUSAL, run_cases

MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 560.35"
NO_MODULE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
    "latest NVIDIA driver is installed and running."
)
OFF_THE_BUS = "Unable to determine the device handle for GPU0000:07:00.0: Unknown Error"
NO_DEVICES = "No devices were found"

# (name, the driver changed in this run, nvidia-smi's exit code, its output, reboot planned)
CASES = [
    ("changed, version mismatch", True, 18, MISMATCH, True),
    ("changed, no module loaded yet", True, 9, NO_MODULE, True),
    ("changed, nvidia-smi works", True, 0, "560.35.05", False),
    ("changed, GPU fallen off the bus", True, 255, OFF_THE_BUS, False),
    ("changed, no devices found", True, 6, NO_DEVICES, False),
    ("unchanged, version mismatch (an upgrade made by someone else)", False, 18, MISMATCH, False),
    ("unchanged, no module", False, 9, NO_MODULE, False),
    ("unchanged, GPU fallen off the bus", False, 255, OFF_THE_BUS, False),
    ("unchanged, nvidia-smi works", False, 0, "560.35.05", False),
]

# the role's dependency cuda_matrix (the GPU matrix check) reads the controller's facts
CASE_TASKS = CASE_GATHER + CASE_FACTS + """\
- name: "Decide ({{ case.name }})"
  environment:
    PATH: "{{ case.bin }}:{{ lookup('ansible.builtin.env', 'PATH') }}"
  block:
    - name: "Run the reboot rule ({{ case.name }})"
      ansible.builtin.include_role:
        name: nvidia_driver
        tasks_from: reboot
        public: true
    - name: "Write what was decided ({{ case.name }})"
      ansible.builtin.copy:
        dest: "{{ case_out }}/{{ case.name }}.json"
        content: >-
          {{ {'needs_reboot': __nvidia_driver_needs_reboot | bool,
              'local': __nvidia_driver_local | bool} | to_json }}
        mode: "0644"
""" + CASE_REFUSAL


def _fake_smi(directory, rc, output):
    directory.mkdir(parents=True)
    script = directory / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}\nEOF\nexit {rc}\n")
    script.chmod(0o755)
    return str(directory)


@pytest.fixture(scope="module")
def decided(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nvidia_driver_reboot")
    cases = [
        {
            "name": f"case{i}",
            "bin": _fake_smi(tmp / "bin" / f"case{i}", rc, output),
            # nvidia_driver_reboot: true everywhere: the rule, not the switch, decides.
            "vars": {"__nvidia_driver_changed": changed, "nvidia_driver_reboot": True},
        }
        for i, (_name, changed, rc, output, _want) in enumerate(CASES)
    ]
    return run_cases(tmp, "The driver role's reboot rule, case by case", CASE_TASKS, cases)


@pytest.mark.parametrize(("i", "case"), list(enumerate(CASES)), ids=[c[0] for c in CASES])
def test_a_reboot_only_after_a_driver_change_that_needs_one(decided, i, case):
    name, _changed, _rc, _output, want = case
    got = decided[f"case{i}"]
    assert "failed" not in got, got
    assert got["local"] is True  # the controller: the role never reboots it, whatever it decides
    assert got["needs_reboot"] is want, (name, got)


def test_the_rule_reads_nothing_else(decided):
    # Every case that plans a reboot is a changed driver with a new-module message, and only those.
    planned = {CASES[int(k[4:])][0] for k, v in decided.items() if v.get("needs_reboot")}
    assert planned == {"changed, version mismatch", "changed, no module loaded yet"}
    print(json.dumps(decided, indent=1, sort_keys=True))
