"""State the `common` role leaves on a node, checked from outside with testinfra; the
account-clash cases run the real converge again against the molecule inventory."""

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "unit"))
from ansible_env import podman_hosts, run_playbook

# One `podman exec` per check (tests/unit/ansible_env.py).
testinfra_hosts = podman_hosts("all")


def test_node_runs_systemd(host):
    # The image is booted with systemd as PID 1, like a real node.
    assert host.run("cat /proc/1/comm").stdout.strip() == "systemd"
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state in ("running", "degraded"), state
    failed = host.run("systemctl --failed --no-legend --plain").stdout
    assert failed.strip() == "", f"failed units: {failed}"


def test_build_toolchain_works(host):
    cmd = host.run("printf 'int main(void){return 0;}' | gcc -x c - -o /tmp/t && /tmp/t")
    assert cmd.rc == 0, cmd.stderr


def test_mpi_user_and_work_dir(host):
    user = host.user("mpiuser")
    assert user.exists
    assert user.uid == 2000
    assert user.shell == "/bin/bash"
    work = host.file("/home/mpiuser/mncluster")
    assert work.is_directory
    assert work.user == "mpiuser"


def test_hosts_entry_for_private_address(host):
    hosts = host.file("/etc/hosts").content_string
    assert "10.89.81.11 mnc-default-node" in hosts


def test_cpu_mode_without_gpu(host):
    # No NVIDIA device in the test bed: the role must not claim one.
    assert host.run("lspci -n | grep -c ' 10de:' || true").stdout.strip() == "0"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"mnc_mpi_user_uid": 2001}, "the account mpiuser exists with uid 2000, not mnc_mpi_user_uid 2001"),
        ({"mnc_mpi_user": "www-data", "mnc_mpi_user_uid": 2000}, "the account www-data exists with uid 33"),
        ({"mnc_mpi_user": "mpiadmin", "mnc_mpi_user_uid": 0}, "uid 0 belongs to root"),
    ],
    ids=["renumber-the-mpi-user", "take-an-existing-account", "take-roots-uid"],
)
def test_an_mpi_user_that_clashes_is_refused_before_any_change(host, extra, message):
    accounts = host.check_output("getent passwd; getent group")
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    proc, _ = run_playbook(Path(__file__).parents[1] / "converge.yml", "-e", json.dumps(extra),
                           inventory=inventory, json_output=True)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and message in out, out[-3000:]
    assert all(s["changed"] == 0 for s in json.loads(proc.stdout)["stats"].values())
    assert host.check_output("getent passwd; getent group") == accounts
