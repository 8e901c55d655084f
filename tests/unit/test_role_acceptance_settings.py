"""The acceptance roles' settings come from the inventory: group_vars of mnc_nodes are honoured.

verify and benchmark are roles (roles/verify, roles/benchmark) whose settings
are role defaults, the lowest precedence there is. Had they stayed play vars
of playbooks/verify.yml and playbooks/benchmark.yml, a setting in group_vars
would be silently ignored (play vars win over the inventory). Three checks:

* the playbooks set none of their role's options as play vars (or in any
  other place that outranks the inventory);
* verify.yml, run for real against a node that cannot answer (ssh to a closed
  port on 127.0.0.1: refused at once, nothing runs anywhere), judges with the
  table settings of the inventory's group_vars and writes its report where
  they say; the table's play runs on the controller, which does not see the
  group_vars of mnc_nodes, so this is the case a play var would hide;
* benchmark.yml, run in check mode on the controller as a one-node cluster
  (nothing is measured), plans the sweep with group_vars' benchmark_iterations.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from ansible_env import run_playbook, yaml_mappings
from ansible_env import task_results as results

ROOT = Path(__file__).resolve().parents[2]
ACCEPTANCE = {"verify": ROOT / "playbooks" / "verify.yml", "benchmark": ROOT / "playbooks" / "benchmark.yml"}
# Play keywords through which a variable outranks group_vars.
OUTRANKING = ("vars", "vars_files", "vars_prompt")


def role_options(role: str) -> set:
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    names = {name for entry in spec["argument_specs"].values() for name in (entry.get("options") or {})}
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
    return names | set(defaults)


@pytest.mark.parametrize("role", sorted(ACCEPTANCE))
def test_the_playbook_sets_no_setting_of_its_role(role):
    options = {name for name in role_options(role) if not name.startswith("__")}
    assert options, role
    set_here = []
    for node in yaml_mappings(yaml.safe_load(ACCEPTANCE[role].read_text())):
        for key in OUTRANKING:
            if node.get(key):
                names = set(node[key]) if isinstance(node[key], dict) else {str(node[key])}
                set_here += sorted(f"{key}: {name}" for name in names if name in options or key != "vars")
    assert not set_here, f"{ACCEPTANCE[role].name} outranks the inventory for: {set_here}"


def write_inventory(tmp_path: Path, hosts: dict, group_vars: dict) -> Path:
    inv = tmp_path / "inventory"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "hosts.yml").write_text(yaml.safe_dump({"mnc_nodes": {"hosts": hosts}}))
    (inv / "group_vars" / "mnc_nodes.yml").write_text(yaml.safe_dump(group_vars))
    return inv


def test_verify_judges_with_the_group_vars_settings(tmp_path):
    reports = tmp_path / "verify-reports"
    group_vars = {
        "verify_report_root": str(reports),
        "verify_p2p_min_fraction": 0.25,
        "verify_p2p_median_fraction": 0.125,
        "verify_link_gbps": 3,
        "verify_require_cuda": True,
        "verify_timeout": 7,
    }
    node = {
        "ansible_connection": "ssh",
        "ansible_host": "127.0.0.1",
        "ansible_port": 9,  # discard: closed, so the connection is refused at once
        "ansible_user": "nobody",
        "ansible_ssh_common_args": "-o BatchMode=yes -o UserKnownHostsFile=/dev/null",
        "mnc_private_ip": "10.77.0.10",
    }
    inventory = write_inventory(tmp_path, {"node-refused": node}, group_vars)
    proc, elapsed = run_playbook(ACCEPTANCE["verify"], inventory=inventory, timeout=300)
    assert proc.returncode != 0, proc.stdout[-3000:]  # the node did not answer
    (judged,) = results(proc, "Judge the checks")
    args = judged["invocation"]["module_args"]
    assert args["p2p_min_fraction"] == 0.25, args
    assert args["p2p_median_fraction"] == 0.125, args
    assert args["link_gbps"] == 3.0, args
    assert args["require_cuda"] is True, args
    assert args["report_dir"].startswith(str(reports) + "/verify-"), args
    report = json.loads((reports / "verify-latest" / "verify.json").read_text())
    assert "node-refused" in json.dumps(report)
    (probe,) = results(proc, "Check that the node answers")
    assert probe["unreachable"], probe
    print(f"\nverify.yml against a refused node: {elapsed:.1f} s")


def benchmark_inventory(tmp_path, **settings):
    """The controller as a one-node, two-slot cluster, with these group_vars."""
    (tmp_path / "hostfile").write_text("localhost slots=2\n")
    # Check mode creates nothing: the program's directory must exist for the copy's check.
    (tmp_path / "lib" / "train").mkdir(parents=True)
    node = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "mnc_mpi_user": "root",
        "mnc_work_dir": str(tmp_path / "work"),
        "mnc_hostfile": str(tmp_path / "hostfile"),
        "mnc_python": sys.executable,
        "mnc_slots_per_node": 2,
        "mnc_use_gpu": False,
    }
    group_vars = {
        "benchmark_become": False,
        "benchmark_program_dir": str(tmp_path / "lib"),
        "benchmark_report_root": str(tmp_path / "reports"),
        "benchmark_iterations": 7,
        "benchmark_warmup": 3,
        "benchmark_process_counts": [2],
        **settings,
    }
    return write_inventory(tmp_path, {"localhost": node}, group_vars)


def test_benchmark_plans_with_the_group_vars_settings(tmp_path):
    inventory = benchmark_inventory(tmp_path)
    proc, elapsed = run_playbook(ACCEPTANCE["benchmark"], "--check", inventory=inventory)
    assert proc.returncode == 0, proc.tail(5000)
    (plan,) = results(proc, "Plan the process counts (runs nothing)")
    args = plan["invocation"]["module_args"]
    assert (args["iterations"], args["warmup"], args["chdir"]) == (7, 3, str(tmp_path / "lib")), args
    assert plan["process_counts"] == [2], plan
    assert not (tmp_path / "reports").exists()  # check mode: nothing measured, no report
    print(f"\nbenchmark.yml --check on the controller: {elapsed:.1f} s")


@pytest.mark.battery("bad input: benchmark_launcher slurm on a cluster without Slurm")
def test_benchmark_through_slurm_needs_the_clusters_slurm(tmp_path):
    """benchmark_launcher: slurm on a cluster without Slurm is refused before anything is copied."""
    inventory = benchmark_inventory(tmp_path, benchmark_launcher="slurm", mnc_scheduler="none")
    proc, _ = run_playbook(ACCEPTANCE["benchmark"], inventory=inventory)
    assert proc.returncode != 0
    (refusal,) = results(
        proc, "Refuse a run limited to part of the cluster, or the Slurm launcher on a cluster without Slurm"
    )
    assert refusal["msg"].startswith("benchmark_launcher is slurm but mnc_scheduler is none"), refusal
    assert not list((tmp_path / "lib" / "train").iterdir())  # nothing copied
    assert not (tmp_path / "reports").exists()
