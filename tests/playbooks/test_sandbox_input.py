"""playbooks/sandbox.yml refuses bad input before it creates anything."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from ansible_env import run_playbook

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")


def _podman_names(kind: str) -> set[str]:
    argv = ["podman", "network", "ls"] if kind == "network" else ["podman", "ps", "-a"]
    out = subprocess.run([*argv, "--format", "json"], capture_output=True, text=True, check=True)
    items = json.loads(out.stdout or "[]")
    if kind == "network":
        return {n["name"] for n in items}
    return {name for c in items for name in c["Names"]}


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"sandbox_state": "bogus"}, "sandbox_state must be 'present' or 'absent' (got 'bogus')"),
        ({"sandbox_nodes": 0}, "sandbox_nodes a whole number from 1 to 200 (got '0')"),
        ({"sandbox_nodes": "three"}, "(got 'three')"),
        ({"sandbox_node_cpus": "half"}, "a number of CPUs such as 0.6 (got 'half')"),
    ],
)
def test_bad_input_fails_clearly_and_creates_nothing(extra, needle, tmp_path):
    # Only this test's names: other scenarios may create containers meanwhile.
    def ours():
        return {n for n in _podman_names("network") | _podman_names("ps") if n.startswith("mnc-badinput")}

    extra = {**extra, "sandbox_network": "mnc-badinput", "sandbox_name_prefix": "mnc-badinput-",
             "sandbox_inventory_dir": str(tmp_path)}
    run, _ = run_playbook("playbooks/sandbox.yml", "-e", json.dumps(extra), inventory=[], timeout=120)
    assert run.returncode != 0
    assert needle in run.stdout
    assert "Nothing was created" in run.stdout
    assert ours() == set()
    assert list(tmp_path.iterdir()) == []
