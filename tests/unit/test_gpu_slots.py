"""More ranks per node than GPUs in GPU mode (issue 16): refused, naming the node and the
variable, before anything is written.

Controller-side beds with the real role and playbook: mpi_hostfile (the network stage's
hostfile) through a case play on localhost, and playbooks/benchmark.yml against the controller
as a one-node mnc_nodes group (as test_chainermn_benchmark_module_report.py runs it). The GPU
count is the fact common records (mnc_gpu_count); the base stage's own check, which counts
with lspci on a node, is tested in molecule/default.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from ansible_env import CASE_FACTS, CASE_REFUSAL, run_cases, run_playbook

ROOT = Path(__file__).resolve().parents[2]

from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight

HOSTFILE_TASKS = CASE_FACTS + """\
- name: "Write the hostfile ({{ case.name }})"
  block:
    - name: "Run mpi_hostfile ({{ case.name }})"
      ansible.builtin.include_role:
        name: mpi_hostfile
    - name: "Write what was decided ({{ case.name }})"
      ansible.builtin.copy:
        dest: "{{ case_out }}/{{ case.name }}.json"
        content: "{{ {'slots': mnc_slots_per_node} | to_json }}"
        mode: "0644"
""" + CASE_REFUSAL


def test_the_rule():
    assert mnc_preflight.slots_over_gpus("n1", "mnc_slots_per_node", 4, 2) == [
        "n1: mnc_slots_per_node: 4 ranks per node but the node has 2 GPU(s) (GPU mode: one rank per GPU,"
        " counted by lspci); set mnc_slots_per_node to at most 2, or mnc_accelerator: cpu"
    ]
    assert mnc_preflight.slots_over_gpus("n1", "mnc_slots_per_node", "2", "2") == []
    # not counted (mnc_accelerator: gpu forces GPU mode without lspci): nothing to compare with
    assert mnc_preflight.slots_over_gpus("n1", "mnc_slots_per_node", 8, 0) == []


@pytest.mark.battery("bad input: hostfile slots > GPUs in GPU mode refused, no hostfile written", bound_s=150)
def test_a_hostfile_with_more_slots_than_gpus_is_refused(tmp_path):
    work = tmp_path / "work"
    paths = [str(work / "hostfile"), str(tmp_path / "etc" / "hostfile")]
    base = {"mnc_use_gpu": True, "mnc_gpu_count": 2, "mpi_hostfile_paths": paths,
            "mnc_work_dir": str(work), "mnc_mpi_user": "root", "mnc_private_ip": "10.77.0.10"}  # fmt: skip
    cases = [{"name": "slots-over-gpus", "vars": {**base, "mnc_slots_per_node": 4}}]
    results = run_cases(tmp_path, "mpi_hostfile with more slots than GPUs", HOSTFILE_TASKS, cases)
    msg = results["slots-over-gpus"]["failed"]
    assert "localhost: mnc_slots_per_node: 4 ranks per node but the node has 2 GPU(s)" in msg, msg
    assert "the hostfile was not written" in msg
    # Nothing was written: neither copy of the hostfile, nor their directories.
    assert not work.exists() and not (tmp_path / "etc").exists()


@pytest.mark.battery("bad input: benchmark ranks per node > GPUs refused before any copy", bound_s=150)
def test_a_benchmark_with_more_ranks_per_node_than_gpus_is_refused(tmp_path):
    (tmp_path / "hostfile").write_text("localhost slots=1\n")
    node = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "mnc_mpi_user": "root",
        "mnc_work_dir": str(tmp_path / "work"),
        "mnc_hostfile": str(tmp_path / "hostfile"),
        "mnc_python": sys.executable,
        "mnc_use_gpu": True,
        "mnc_gpu_count": 1,
    }
    (tmp_path / "hosts.yml").write_text(json.dumps({"mnc_nodes": {"hosts": {"localhost": node}}}))
    extra = {
        "benchmark_become": False,
        "benchmark_program_dir": str(tmp_path / "lib"),
        "benchmark_report_root": str(tmp_path / "reports"),
        "benchmark_slots_per_node": 2,
    }
    proc, wall = run_playbook(ROOT / "playbooks" / "benchmark.yml", "-e", json.dumps(extra),
                              inventory=tmp_path / "hosts.yml", timeout=150)  # fmt: skip
    out = proc.stdout
    assert proc.returncode != 0, out[-3000:]
    named = "localhost: benchmark_slots_per_node: 2 ranks per node but the node has 1 GPU(s)"
    assert named in out, out[-3000:]
    assert "nothing was copied or run" in out
    # Nothing copied to the node, nothing measured, no report.
    assert not (tmp_path / "lib").exists() and not (tmp_path / "reports").exists()
    assert not (tmp_path / "work").exists()
    print(f"benchmark.yml refused in {wall:.1f} s")
