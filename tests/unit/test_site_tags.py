"""`site.yml --tags <stage>`: the plays the tags leave out skip their own fact gathering, but
what is tagged always still runs there (preflight, the base play's gathering, common's import_facts),
and the roles' defaults read the node's facts. Each stage play therefore gathers under any
--tags where the run has not (playbooks/tasks/facts-under-tags.yml, common's import_facts).
Run here on two local "nodes" with a tag no task has: only what runs under every --tags runs
(preflight, the gathering), so nothing is installed. The inventory is checked against every
role's argument spec once per run, by preflight, or where no preflight passed, by the start of
each stage play; the install stages' roles do not check it again."""

from __future__ import annotations

import shutil
import sys

import pytest
import yaml
from ansible_env import ROOT, run_playbook

GATHER = "Gather the facts a --tags run did not (the roles' argument checks read them)"
LEAVE = "common : Leave the play's start where there is nothing to gather, load, stop or check"
IMPORT = ("common : Gather facts under --tags, load the facts of earlier stages, stop a check run on a node "
          "without the MPI user")


def local_nodes(path) -> dict:
    """Two "nodes" that are this machine (local connection), with the sandbox's settings."""
    hosts = {
        f"tags-node{i}": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                          "ansible_become": False, "mnc_private_ip": f"10.77.0.{10 + i}"}
        for i in (1, 2)
    }
    # The sandbox's settings (its group_vars), not its nodes: a hosts.yml a sandbox left is not ours.
    shutil.copytree(ROOT / "inventory" / "sandbox" / "group_vars", path / "group_vars")
    (path / "hosts.yml").write_text(yaml.safe_dump({"mnc_nodes": {"hosts": hosts}}))
    return hosts


def test_site_yml_under_a_tag_that_leaves_every_stage_out(tmp_path):
    hosts = local_nodes(tmp_path)
    proc, _ = run_playbook(ROOT / "site.yml", "--tags", "no-such-stage", inventory=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.tail(3000)
    for host in hosts:
        stats = proc.host_stats(host)
        assert stats["failures"] == 0 and stats["changed"] == 0, proc.stats()
    names = set(proc.task_names())
    # the inventory was checked against every role's argument spec once, by preflight; of the
    # roles, only a dependency (cuda_matrix: Ansible checks a dependency's arguments always)
    # checks its arguments again: every play imports its roles without their own check (verify
    # and benchmark, whose playbooks run alone, without preflight, too: their play's start,
    # common's import_facts, checks every role's where no preflight passed)
    assert "Validate them against every role's argument spec" in names, names
    checked = {n.split(" : ")[0] for n in names if " : Validating arguments against arg spec" in n}
    assert checked == {"cuda_matrix"}, checked
    # gathered in the first stage play, skipped in the others
    gathered = [r for r in proc.results(GATHER) if r["_event"] != "runner_on_skipped"]
    assert len(gathered) == len(hosts)
    # every node play after the base one (verify and benchmark too) starts with common's
    # import_facts, which includes the gathering (and the facts' loading) only where a node
    # needs it: here, nowhere. Such a node leaves the play's start by a meta task (judged in
    # the controller's main process, once per node), so the include is never reached: no task
    # slot, no result
    started = proc.task_names()
    assert started.count(LEAVE) == 9 * len(hosts), started.count(LEAVE)
    assert IMPORT not in started
    assert not proc.results(IMPORT)


@pytest.mark.parametrize(
    "extra,check,words",
    [
        # stack has no tasks of its own: the play's start checks the version matrix
        ("stack_cupy_version=14.0.0", "common : Check the version matrix where this run's preflight did not",
         "CuPy 14"),
        # the stage plays import their roles without the roles' own argument checks: the play's
        # start checks what the inventory sets against every role's argument spec
        ("openmpi_keep_build_dir=sometimes",
         "common : Check the inventory against every role's argument spec where this run's preflight did not",
         "openmpi_keep_build_dir"),
    ],
    ids=["matrix", "argument spec"],
)
def test_a_stage_without_preflight_still_refuses_bad_input(tmp_path, extra, check, words):
    """Where no preflight passed in the run, the play's start (common's import_facts) makes
    preflight's checks on every node, before any role of the play runs."""
    hosts = local_nodes(tmp_path)
    proc, _ = run_playbook(ROOT / "playbooks" / "mpi.yml", "--tags", "no-such-stage",
                           "--skip-tags", "preflight", "-e", extra, inventory=tmp_path, timeout=300)
    assert proc.returncode != 0, proc.tail(3000)
    for host in hosts:
        failed = [r for r in proc.results(host=host) if r["_event"] == "runner_on_failed"]
        assert [r["_task"] for r in failed] == [check], failed
        # the task's message, or (a loop) its failed items' messages
        msgs = [r.get("msg", "") for r in failed[0].get("results", [failed[0]]) if r.get("failed", True)]
        assert any(words in m for m in msgs), failed[0]
        assert proc.host_stats(host)["changed"] == 0, proc.stats()
    # nothing of the play's roles ran: the check came first
    assert not any(n.startswith("openmpi : ") for n in proc.task_names()), proc.task_names()
