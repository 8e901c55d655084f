"""The Slurm health check's rules (roles/slurm/files/healthcheck/mnc_slurm_health.py, a file of the
role the nodes run; pyproject.toml puts its directory on the tests' path): drain with our
reason, resume only our drains, leave an administrator's. The program under slurmd, the whole
cycle, is molecule/slurm's (tests/test_slurm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

import mnc_slurm_health as rules

# scontrol -o show node as Slurm printed it in molecule/slurm's containers: a node an
# administrator drained, and an idle one; Slurm 22.05.8 (Debian 12) and 24.11.5 (Debian 13, with
# MNC_NODE_IMAGE=localhost/mncluster-node:trixie: a new ResumeAfterTime= field, Reason= still
# last with its [user@time]). The rules' tests run on both.
FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
SLURM_VERSIONS = ["22.05", "24.11"]


def _scontrol(kind, version):
    return (FIXTURES / f"scontrol-o-show-node-{kind}-{version}.txt").read_text()


@pytest.fixture(params=SLURM_VERSIONS)
def slurm(request):
    """(idle, admin-drained) as this Slurm version prints them."""
    return _scontrol("idle", request.param), _scontrol("admin-drained", request.param)


def node(text):
    return rules.parse_node(text)


def test_parse_node_reads_state_flags_and_reason_without_user_and_time(slurm):
    idle, drained = slurm
    n = node(drained)
    assert n == {
        "name": "mnc-slurm-2",
        "state": "IDLE+DRAIN",
        "flags": {"IDLE", "DRAIN"},
        "reason": "disk swap planned",
    }
    assert node(idle)["reason"] is None and node(idle)["flags"] == {"IDLE"}
    with pytest.raises(ValueError, match="no NodeName= and State="):
        rules.parse_node("Node mnc-slurm-9 not found")


def test_a_failing_check_drains_with_our_reason(slurm):
    idle, drained = slurm
    action, reason = rules.decide(node(idle), ["shared directory /shared not mounted"])
    assert (action, reason) == ("drain", "mncluster: shared directory /shared not mounted")
    ours = drained.replace("Reason=disk swap planned", f"Reason={reason}")
    assert rules.decide(node(ours), ["shared directory /shared not mounted"]) == (
        "keep",
        "already drained for this",
    )
    # Another failure of ours replaces the reason.
    assert rules.decide(node(ours), ["MPI prefix /opt/openmpi/5 missing (no bin/mpiexec)"])[0] == "drain"


def test_passing_again_resumes_only_our_drain(slurm):
    idle, drained = slurm
    ours = drained.replace(
        "Reason=disk swap planned", "Reason=mncluster: shared directory /shared not mounted"
    )
    assert rules.decide(node(ours), [])[0] == "resume"
    assert rules.decide(node(drained), []) == (
        "keep",
        "drained by someone else (disk swap planned): left as it is",
    )
    assert rules.decide(node(idle), []) == ("keep", "every check passes")


def test_an_administrators_drain_is_kept_even_when_a_check_fails(slurm):
    _, drained = slurm
    action, why = rules.decide(node(drained), ["shared directory /shared not mounted"])
    assert action == "keep" and "disk swap planned" in why


def test_a_resumed_node_that_keeps_its_last_reason_counts_as_undrained():
    """Slurm 24.11 (Debian 13) leaves the last reason on a node resumed from a drain (idle, no
    DRAIN flag, Reason= ours still in scontrol show node; 22.05 clears it). The rules read the
    flag: every check passing keeps it, a failure drains it again, and so does the DCGM prolog."""
    resumed = node(_scontrol("resumed", "24.11"))
    assert resumed["flags"] == {"IDLE"} and rules.ours(resumed["reason"])
    assert rules.decide(resumed, []) == ("keep", "every check passes")
    failure = ["shared directory /shared not mounted"]
    assert rules.decide(resumed, failure) == ("drain", "mncluster: shared directory /shared not mounted")
    assert rules.decide_dcgm(resumed, ["Diagnostic failed: GPU 0"])[0] == "drain"


def test_reason_is_one_clipped_line_without_double_quotes():
    reason = rules.reason_text(['a "quoted"\ncheck', "x" * 300])
    assert reason.startswith("mncluster: a 'quoted' check; xxx") and len(reason) == rules.REASON_WIDTH
    assert "\n" not in reason


def test_shared_dirs_mounted_or_exported():
    exported = rules.exported_dirs("# comment\n/scratch 10.0.0.0/24(rw,sync)\n\n/data host(ro)\n")
    assert exported == {"/scratch", "/data"}
    assert rules.shared_dir_failures(["/scratch", "/shared", "/data"], {"/shared": True}, exported) == []
    assert rules.shared_dir_failures(["/scratch", "/shared"], {"/shared": False}, set()) == [
        "shared directory /scratch not mounted",
        "shared directory /shared not mounted",
    ]


def test_new_xids_counted_against_the_last_pass_of_this_boot():
    assert rules.new_xids({}, "boot-1", 3) == 3
    assert rules.new_xids({"boot_id": "boot-1", "count": 3}, "boot-1", 3) == 0
    assert rules.new_xids({"boot_id": "boot-1", "count": 3}, "boot-1", 5) == 2
    assert rules.new_xids({"boot_id": "boot-0", "count": 9}, "boot-1", 1) == 1
