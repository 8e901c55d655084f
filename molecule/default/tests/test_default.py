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
@pytest.mark.battery("node: an mnc_mpi_user that clashes with an existing account")
def test_an_mpi_user_that_clashes_is_refused_before_any_change(host, extra, message):
    accounts = host.check_output("getent passwd; getent group")
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    proc, _ = run_playbook(Path(__file__).parents[1] / "converge.yml", "-e", json.dumps(extra),
                           inventory=inventory, json_output=True)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and message in out, out[-3000:]
    assert all(s["changed"] == 0 for s in json.loads(proc.stdout)["stats"].values())
    assert host.check_output("getent passwd; getent group") == accounts


# What a run of `common` may touch, read back so a check run can be shown to leave it as it was.
TOUCHED = (
    "getent passwd; getent group; dpkg-query -W -f '${Package} ${Version}\\n' | md5sum; "
    "stat -c '%n %U %G %a %s %Y' /home /home/* /home/*/mncluster /etc/hosts /etc/ansible/facts.d "
    "/etc/ansible/facts.d/* 2>&1; md5sum /etc/hosts /etc/ansible/facts.d/* 2>&1"
)


def _check_run(host, *extra):
    """converge.yml with --check --diff: (process, {task name: [result per host]}, listing before, after)."""
    before = host.run(TOUCHED).stdout
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    proc, _ = run_playbook(Path(__file__).parents[1] / "converge.yml", "--check", "--diff", *extra,
                           inventory=inventory, json_output=True)  # fmt: skip
    tasks = {}
    if proc.stdout.startswith("{"):
        for play in json.loads(proc.stdout)["plays"]:
            for task in play["tasks"]:
                name = task["task"]["name"].split(" : ")[-1]  # without the "role : " prefix
                tasks.setdefault(name, []).extend(task["hosts"].values())
    return proc, tasks, before, host.run(TOUCHED).stdout


def test_a_check_run_on_the_converged_node_reports_no_change(host):
    # Drift detection: on a converged node `--check --diff` reports changed=0, runs the read-only
    # probes (a skipped GPU count would decide CPU mode on a GPU node and report the recorded
    # mode as a change) and writes nothing.
    proc, tasks, before, after = _check_run(host)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    stats = json.loads(proc.stdout)["stats"]
    assert all(s["changed"] == 0 and s["failures"] == 0 for s in stats.values()), stats
    probe = tasks["Count NVIDIA 3D/VGA controllers"]
    assert probe and not any(r.get("skipped") for r in probe), probe
    assert after == before


def test_a_check_run_for_an_mpi_user_not_created_yet_changes_nothing(host):
    # What a fresh node looks like to `common` in check mode: the account does not exist yet, so
    # the work directory cannot be made as it (sudo to an unknown user). The check says so,
    # reports the account as a change, and creates nothing.
    proc, tasks, before, after = _check_run(host, "-e", json.dumps({"mnc_mpi_user": "mnccheck",
                                                                   "mnc_mpi_user_uid": 2100}))  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "check mode: mnccheck does not exist on mnc-default-node yet" in proc.stdout
    assert any(r.get("changed") for r in tasks["Create the MPI user"])
    assert after == before
    assert host.run("getent passwd mnccheck").rc == 2


def test_a_check_run_of_site_yml_on_a_node_without_the_mpi_user_changes_nothing(host, tmp_path):
    # The whole of site.yml in check mode, as on a fresh node (its MPI user does not exist yet):
    # the base stage says what it would change, every later stage stops for the node saying why
    # (they run as that user), verify measures nothing, the benchmark plans nothing; rc 0 and
    # nothing touched. site.yml's plays are on mnc_nodes: the node joins that group here.
    (tmp_path / "nodes.yml").write_text("mnc_nodes:\n  hosts:\n    mnc-default-node:\n")
    inventory = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent
    before = host.run(TOUCHED).stdout
    fresh = "mnc_mpi_user=mnccheck mnc_mpi_user_uid=2100"
    proc, wall = run_playbook(ROOT / "site.yml", "--check", "--diff", "-e", fresh,
                              inventory=[inventory, tmp_path / "nodes.yml"])  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert host.run(TOUCHED).stdout == before
    stopped = "check mode: mnc-default-node has no MPI user mnccheck yet"
    # gpu, mpi, python, network, chainer, scheduler (2 plays) and the benchmark's nodes' play
    assert out.count(stopped) >= 8, out[-3000:]
    assert "check mode: verify measures" in out
    assert "check mode: benchmark not planned, mnc-default-node" in out
    print(f"site.yml --check --diff on a node without the MPI user: {wall:.0f} s, rc 0, nothing touched")
