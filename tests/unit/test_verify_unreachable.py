"""playbooks/verify.yml when nodes do not answer: it fails naming them, and does not hang.

Real nodes that cannot answer: a container of the node image that exists but
is stopped (podman connection), and a host at 192.0.2.1 (TEST-NET-1, never
routed) over SSH. The whole playbook must finish well inside a minute or two
and print both names in its table and its failure message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ansible_env import run_playbook

ROOT = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("MNC_NODE_IMAGE", "localhost/mncluster-node:bookworm")


def podman_ok() -> bool:
    if shutil.which("podman") is None:
        return False
    return (
        subprocess.run(["podman", "image", "exists", IMAGE], capture_output=True, check=False).returncode == 0
    )


pytestmark = [pytest.mark.podman, pytest.mark.skipif(not podman_ok(), reason=f"podman or {IMAGE} missing")]


@pytest.fixture
def stopped_container():
    name = f"mnc-verify-down-{os.getpid()}"
    subprocess.run(["podman", "create", "--name", name, IMAGE, "/sbin/init"], check=True, capture_output=True)
    yield name
    subprocess.run(["podman", "rm", "-f", name], check=False, capture_output=True)


INVENTORY = """\
mnc_nodes:
  hosts:
    node-stopped:
      ansible_connection: containers.podman.podman
      ansible_host: {stopped}
      mnc_private_ip: 10.89.251.11
    node-blackhole:
      ansible_host: 192.0.2.1
      ansible_user: root
      ansible_timeout: 5
      ansible_ssh_common_args: -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=/dev/null
      mnc_private_ip: 192.0.2.1
"""



@pytest.mark.battery("fault: nodes down during verify.yml (stopped, unroutable) named", bound_s=150)
def test_nodes_that_do_not_answer_fail_verify_by_name(tmp_path, stopped_container):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY.format(stopped=stopped_container))
    proc, elapsed = run_playbook(ROOT / "playbooks" / "verify.yml", inventory=inventory)
    out = proc.stdout
    assert proc.returncode != 0, out
    assert elapsed < 150, f"verify.yml took {elapsed:.0f}s with dead nodes"
    table = [line for line in out.splitlines() if "node answers" in line]
    assert any("node-stopped" in line and "FAIL" in line for line in table), out
    assert any("node-blackhole" in line and "FAIL" in line for line in table), out
    assert "did not answer: node-stopped, node-blackhole" in out, out
    # The MPI checks were not attempted against nodes that are down.
    assert "not run: node-stopped, node-blackhole did not answer" in out or "FAILED:" in out, out


@pytest.mark.battery("fault: nodes down during benchmark.yml named, no report", bound_s=150)
def test_benchmark_names_the_nodes_that_do_not_answer(tmp_path, stopped_container):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY.format(stopped=stopped_container))
    reports = f"benchmark_report_root={tmp_path}/reports"
    proc, elapsed = run_playbook(ROOT / "playbooks" / "benchmark.yml", "-e", reports, inventory=inventory)
    out = proc.stdout
    assert proc.returncode != 0, out
    assert elapsed < 150, f"benchmark.yml took {elapsed:.0f}s with dead nodes"
    assert "not measuring, node-stopped, node-blackhole did not answer" in out, out
    assert "HostVarsVars" not in out, out
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("playbook", ["verify.yml", "benchmark.yml"])
@pytest.mark.battery("fault: verify/benchmark --limit leaving nodes out refused", bound_s=60)
def test_a_limited_run_is_refused_before_any_node_is_contacted(tmp_path, stopped_container, playbook):
    # Limited to the node that is down: refused by the controller, so no time is spent on it.
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY.format(stopped=stopped_container))
    proc, elapsed = run_playbook(
        ROOT / "playbooks" / playbook, "--limit", "node-stopped", inventory=inventory
    )
    out = proc.stdout
    assert proc.returncode != 0, out
    assert "measures the whole cluster" in out or "checks the whole cluster" in out, out
    assert "--limit left out node-blackhole" in out, out
    assert "UNREACHABLE" not in out and elapsed < 60, out
