"""playbooks/sandbox.yml -e sandbox_node_cpus=0.5 gives each node a CPU cap of half a core
(what docs/times.md's 1-node vs 3-node provisioning comparison relies on). A 1-node sandbox of
its own (own names, label, network, subnet, inventory directory), removed at the end."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from ansible_env import run_playbook

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")


def test_node_cpus_caps_each_node(tmp_path):
    own = {
        "sandbox_nodes": 1,
        "sandbox_name_prefix": "mnc-cputest-",
        "sandbox_label": "mncluster.cputest",
        "sandbox_network": "mnc-cputest",
        "sandbox_net_prefix": "10.89.102",
        "sandbox_inventory_dir": str(tmp_path),
    }

    def sandbox(**extra):
        run, _ = run_playbook("playbooks/sandbox.yml", "-e", json.dumps({**own, **extra}), inventory=[],
                              timeout=300)  # fmt: skip
        return run

    try:
        run = sandbox(sandbox_node_cpus="0.5")
        assert run.returncode == 0, run.stdout[-3000:]
        inspect = subprocess.run(
            ["podman", "inspect", "mnc-cputest-1", "--format",
             "{{.HostConfig.CpuQuota}} {{.HostConfig.CpuPeriod}} "
             '{{index .Config.Labels "mncluster.cputest"}}'],
            capture_output=True, text=True, check=True,
        )
        quota, period, label = inspect.stdout.split()
        assert int(quota) / int(period) == 0.5
        assert label == "1"
        assert (tmp_path / "hosts.yml").is_file()
    finally:
        gone = sandbox(sandbox_state="absent")
    assert gone.returncode == 0, gone.stdout[-3000:]
    names = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True)
    assert "mnc-cputest-1" not in names.stdout.split()
