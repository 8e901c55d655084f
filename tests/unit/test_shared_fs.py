"""Shared directories (roles/shared_fs, mnc_shared_dirs) and verify's MPI-IO check across nodes.

The MPI-IO program (roles/verify/files/mnc_mpiio.py) runs under the controller's real
mpiexec, every rank in a UTS and mount namespace of its own (unshare), so that each rank is
"a node" with its own host name: once with one directory they all see (shared), once with a
tmpfs of its own mounted over it on every rank (the directory not shared, the mutation the
check exists for). The exports(5) rules are preflight's, tested directly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_env import run_playbook

ROOT = Path(__file__).resolve().parents[2]

from ansible_collections.mncluster.core.plugins.module_utils import mnc_preflight
from ansible_collections.mncluster.core.plugins.module_utils import mnc_verify as v
from ansible_collections.mncluster.core.plugins.module_utils import mnc_verify_mpi as vmpi

MPIIO = ROOT / "roles" / "verify" / "files" / "mnc_mpiio.py"

needs_namespaces = pytest.mark.skipif(
    shutil.which("mpiexec") is None or shutil.which("unshare") is None or os.geteuid() != 0,
    reason="needs mpiexec, unshare and root (mount namespaces)",
)


def mpiio(tmp_path, n, private: bool):
    """mnc_mpiio.py on n ranks, each "a node" (its own host name); private: each its own tmpfs."""
    shared = tmp_path / "scratch"
    shared.mkdir()
    mount = f"mount -t tmpfs mnc-private {shared} && " if private else ""
    rank_cmd = f'hostname node$OMPI_COMM_WORLD_RANK && {mount}exec "{sys.executable}" "{MPIIO}" "{shared}"'
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    argv = ["timeout", "--kill-after=5", "90", "mpiexec", "-n", str(n), "--oversubscribe",
            "unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", rank_cmd]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)
    run = {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "cmd": " ".join(argv)}
    return run, shared


@pytest.mark.mpi
@needs_namespaces
def test_mpiio_on_a_shared_directory_passes_and_leaves_nothing(tmp_path):
    run, shared = mpiio(tmp_path, 3, private=False)
    assert run["rc"] == 0, run["stderr"][-2000:]
    doc = json.loads(run["stdout"].splitlines()[-1])
    assert [r["read_from"] for r in doc["ranks"]] == [1, 2, 0]
    assert all(r["ok"] for r in doc["ranks"]), doc
    assert {r["host"] for r in doc["ranks"]} == {"node0", "node1", "node2"}
    rows = vmpi.check_mpiio(dict(run, dir=str(shared)))
    assert [r["status"] for r in rows] == [v.PASS], rows
    assert "3 ranks on 3 nodes" in rows[0]["detail"]
    assert list(shared.iterdir()) == [], "the check's files stay behind"


@pytest.mark.mpi
@needs_namespaces
def test_mpiio_on_a_directory_each_node_has_of_its_own_fails_at_once(tmp_path):
    run, shared = mpiio(tmp_path, 3, private=True)
    assert run["rc"] == 0, run["stderr"][-2000:]  # the program reports; it neither hangs nor crashes
    rows = vmpi.check_mpiio(dict(run, dir=str(shared)))
    assert [r["status"] for r in rows] == [v.FAIL], rows
    detail = rows[0]["detail"]
    assert "rank 1 on node1: does not see the file rank 0 on node0 wrote" in detail
    assert "rank 2 on node2" in detail
    assert detail.count("rank 1 on node1: does not see") == 1, "one line per failure, not one per rank"


def test_mpiio_judging_without_a_run_or_across_no_node():
    assert vmpi.check_mpiio(None) == []  # nothing shared: no row
    single = vmpi.check_mpiio({"dir": "/scratch/u", "not_applicable": "a single node: nothing to share with"})
    assert [r["status"] for r in single] == [v.SKIP]
    down = vmpi.check_mpiio({"dir": "/scratch/u", "skipped_reason": "n2 did not answer"})
    assert down[0]["status"] == v.FAIL and "n2 did not answer" in down[0]["detail"]
    one_host = {"rc": 0, "stdout": json.dumps({"dir": "/scratch/u", "block": 1024, "ranks": [
        {"rank": r, "host": "a", "read_from": (r + 1) % 2, "read_from_host": "a", "ok": True, "error": ""}
        for r in range(2)]})}
    rows = vmpi.check_mpiio(one_host)
    assert rows[0]["status"] == v.FAIL and "nothing crossed a node" in rows[0]["detail"]
    timed_out = vmpi.check_mpiio({"dir": "/scratch/u", "rc": 124, "stdout": "", "stderr": "killed"})
    assert timed_out[0]["status"] == v.FAIL and "timed out" in timed_out[0]["detail"]


def test_the_mpiio_row_is_in_the_table_only_where_something_is_shared():
    nodes = [{"name": "n1", "private_ip": "10.0.0.1", "reachable": True}]
    without = v.evaluate(nodes, "10.0.0.1 slots=1\n", None, None, None, 0.5, False)
    assert not [r for r in without["rows"] if r["check"] == "shared filesystem"]
    down = v.evaluate(nodes, "10.0.0.1 slots=1\n", None, None, None, 0.5, False,
                      mpiio={"dir": "/scratch/u", "skipped_reason": "n2 did not answer"})
    assert any("shared filesystem [/scratch/u]" in f for f in down["failures"]), down["failures"]


@pytest.mark.parametrize(
    ("dirs", "options", "expect"),
    [
        (["/scratch"], mnc_preflight.SHARED_FS_DEFAULT_OPTIONS, None),
        (["/scratch", "/data/sets"], "ro,async,no_subtree_check,fsid=1", None),
        (["/home"], "rw", "shared_fs cannot serve the home"),
        (["/home/mpiuser/data"], "rw", "shared_fs cannot serve the home"),
        (["/"], "rw", "the node's own system directory"),
        (["/etc"], "rw", "the node's own system directory"),
        (["scratch"], "rw", "not an absolute directory"),
        (["/data/../etc"], "rw", "not an absolute directory"),
        (["/data;reboot"], "rw", "not an absolute directory"),
        (["/data", "/data/x"], "rw", "overlaps another shared directory"),
        ("/scratch", "rw", "must be a list"),
        (["/scratch"], "rw,bogus", "'bogus': not an exports(5) option"),
        (["/scratch"], "rw,no_root_squash", "no_root_squash would make root on every node root"),
        (["/scratch"], "", "comma-separated exports(5) option list"),
    ],
)
def test_shared_directory_rules(dirs, options, expect):
    _judge(dirs, options, expect)


def _battery(case):
    return pytest.mark.battery(f"preflight: {case} (root squash undone, or a system directory shared)")


@pytest.mark.parametrize(
    ("dirs", "options", "expect"),
    [
        pytest.param(["/scratch"], "rw,root_squash,anonuid=0", "anonuid=0: squashed requests would act",
                     marks=_battery("anonuid=0")),
        pytest.param(["/scratch"], "rw,anongid=00", "anongid=00: squashed requests would act as root",
                     marks=_battery("anongid=00")),
        pytest.param(["/scratch"], "rw,all_squash,anonuid=0,anongid=0", "anonuid=0: squashed requests",
                     marks=_battery("all_squash,anonuid=0")),
        pytest.param(["/scratch"], "rw,insecure", "insecure accepts requests from unprivileged ports",
                     marks=_battery("insecure")),
        pytest.param(["/var/lib"], "rw", "the node's own system directory", marks=_battery("/var/lib")),
        pytest.param(["/usr/local"], "rw", "the node's own system directory", marks=_battery("/usr/local")),
        pytest.param(["/etc/munge"], "rw", "the node's own system directory", marks=_battery("/etc/munge")),
        (["/scratch"], "rw,all_squash,anonuid=2000,anongid=2000", None),
        (["/srv/data"], "rw", None),
    ],
)  # fmt: skip
def test_root_squash_cannot_be_undone_and_no_system_directory_is_shared(dirs, options, expect):
    """Issue 38, item 4: these passed preflight."""
    _judge(dirs, options, expect)


def _judge(dirs, options, expect):
    problems = mnc_preflight.shared_fs_problems("n1", dirs, "/home/mpiuser", options)
    if expect is None:
        assert problems == []
    else:
        assert any(p.startswith("n1: ") and expect in p for p in problems), problems


def test_the_server_must_be_a_node_of_the_inventory():
    nodes = ["gpu01", "gpu02"]
    assert mnc_preflight.shared_fs_problems("gpu01", ["/scratch"], "/home/u", "rw", "gpu02", nodes) == []
    assert mnc_preflight.shared_fs_problems("gpu01", ["/scratch"], "/home/u", "rw", "", nodes) == []
    problems = mnc_preflight.shared_fs_problems("gpu01", ["/scratch"], "/home/u", "rw", "nfs01", nodes)
    assert problems == ["gpu01: shared_fs_server: 'nfs01' is not a node of mnc_nodes (the node that holds "
                        "and exports /scratch); name one of gpu01, gpu02, or leave it empty for the first"]
    # nothing shared: the server is not used
    assert mnc_preflight.shared_fs_problems("gpu01", [], "/home/u", "rw", "nfs01", nodes) == []


def test_preflight_reads_the_shared_directory_rules_from_the_inventory():
    problems = mnc_preflight.node_problems("n1", {"mnc_shared_dirs": ["/home"], "mnc_mpi_user": "alice"})
    assert any("mnc_shared_dirs" in p and "/home/alice" in p for p in problems), problems
    assert mnc_preflight.node_problems("n1", {"mnc_shared_dirs": ["/scratch"]}) == []
    server_elsewhere = {"mnc_shared_dirs": ["/scratch"], "shared_fs_server": "nfs01"}
    assert mnc_preflight.node_problems("n1", server_elsewhere) == []  # the nodes not known: not judged
    assert any(p.startswith("n1: shared_fs_server: ") for p in
               mnc_preflight.node_problems("n1", server_elsewhere, ["n1", "n2"]))


@pytest.mark.battery("bad input: shared_fs run alone with a server that is not a node, nothing changed")
def test_the_role_alone_refuses_a_server_that_is_not_a_node(tmp_path):
    """The role's first check is preflight's rule (after a read-only look): run on its own (no
    site.yml, no preflight), a shared_fs_server outside mnc_nodes fails the play before a package,
    directory or file is made."""
    shared = Path(f"/srv/mnc-test-{tmp_path.name}")  # not under /tmp: a system directory
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"mnc_nodes": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "mnc_private_ip": "10.0.0.1", "mnc_shared_dirs": [str(shared)], "shared_fs_server": "nfs01"}}}}))
    play = tmp_path / "play.yml"
    play.write_text("- hosts: mnc_nodes\n  gather_facts: false\n  roles: [stack, shared_fs]\n")
    proc, _ = run_playbook(play, inventory=inventory, timeout=120)
    assert proc.returncode != 0
    refusal = "localhost: shared_fs_server: 'nfs01' is not a node of mnc_nodes"
    assert refusal in proc.stdout, proc.stdout[-3000:]
    assert "Nothing was changed" in proc.stdout
    assert "changed=0" in proc.stdout
    assert not shared.exists()
    assert not Path("/etc/exports.d/mncluster.exports").exists()
