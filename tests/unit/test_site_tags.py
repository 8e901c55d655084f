"""`site.yml --tags <stage>`: the plays the tags leave out still run their roles' argument
checks (Ansible tags those always) but skip their own fact gathering, and openmpi's defaults
read the node's architecture. Each stage play therefore gathers under any --tags where the run
has not (playbooks/tasks/facts-under-tags.yml). Run here on two local "nodes" with a tag no
task has: only what runs under every --tags runs (preflight, the argument checks, the
gathering), so nothing is installed; without the gathering it failed at openmpi's check."""

from __future__ import annotations

import json
import sys

import yaml
from ansible_env import ROOT, run_playbook

GATHER = "Gather the facts a --tags run did not (the roles' argument checks read them)"


def test_site_yml_under_a_tag_that_leaves_every_stage_out(tmp_path):
    hosts = {
        f"tags-node{i}": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                          "ansible_become": False, "mnc_private_ip": f"10.77.0.{10 + i}"}
        for i in (1, 2)
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"mnc_nodes": {"hosts": hosts}}))
    proc, _ = run_playbook(ROOT / "site.yml", "--tags", "no-such-stage", json_output=True,
                           inventory=[ROOT / "inventory" / "sandbox", tmp_path / "hosts.yml"], timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    doc = json.loads(proc.stdout)
    for host in hosts:
        assert doc["stats"][host]["failures"] == 0 and doc["stats"][host]["changed"] == 0, doc["stats"]
    tasks = [task for play in doc["plays"] for task in play["tasks"]]
    names = {task["task"]["name"] for task in tasks}
    # every stage's argument checks ran, openmpi's among them
    assert any(n.startswith("openmpi : Validating arguments against arg spec 'main'") for n in names), names
    gather = [task for task in tasks if task["task"]["name"] == GATHER]
    # gathered in the first stage play, skipped in the others
    assert sum(1 for task in gather for r in task["hosts"].values() if not r.get("skipped")) == len(hosts)
    assert len(gather) == 8
