"""The sandbox's choice of Python (playbooks/tasks/sandbox-python.yml), run for real on the
controller: without a pyenv checkout it falls back to the system provider, takes a stale mirror
file out of the inventory and says why; a bad choice is refused before anything is touched.
The pyenv branch (a checkout at hand: the mirror staged, CPython built once) is what the
`cluster` scenario converges with on this project's test machines."""

from __future__ import annotations

import sys

import pytest
from ansible_env import ROOT, run_playbook, task_results

PLAY = """\
- name: Choose the sandbox's Python
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Choose
      ansible.builtin.include_tasks: {tasks}
      vars:
        sandbox_python_vars: {vars_file}
        sandbox_repo_dir: {root}
"""


def _choose(tmp_path, monkeypatch, *extra):
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv-here"))
    vars_file = tmp_path / "group_vars" / "all" / "python-mirror.yml"
    vars_file.parent.mkdir(parents=True)
    vars_file.write_text("---\npython_mirror_overrides: {}\n")  # a stale file from an earlier run
    play = tmp_path / "play.yml"
    tasks = ROOT / "playbooks/tasks/sandbox-python.yml"
    play.write_text(PLAY.format(tasks=tasks, vars_file=vars_file, root=ROOT))
    hosts = f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    (tmp_path / "hosts").write_text(hosts)
    proc, _ = run_playbook(play, *extra, inventory=tmp_path / "hosts", timeout=120)
    return proc, vars_file


def test_no_checkout_falls_back_to_the_system_provider_saying_why(tmp_path, monkeypatch):
    proc, vars_file = _choose(tmp_path, monkeypatch, "-e", "sandbox_python=auto")
    assert proc.returncode == 0, proc.tail(5000)
    assert not vars_file.exists(), "the stale mirror file would still switch the sandbox to pyenv"
    said = [r["msg"] for r in task_results(proc, "Say which Python the sandbox gets")]
    assert len(said) == 1 and said[0].startswith("Python: FALLBACK to the system provider"), said
    assert str(tmp_path / "no-pyenv-here") in said[0], said


@pytest.mark.battery("sandbox_python neither auto nor system")
def test_a_bad_choice_is_refused_before_anything_changes(tmp_path, monkeypatch):
    proc, vars_file = _choose(tmp_path, monkeypatch, "-e", "sandbox_python=conda")
    assert proc.returncode != 0
    said = [r["msg"] for r in task_results(proc, "Check the sandbox's Python choice")]
    assert len(said) == 1 and said[0].startswith("sandbox_python must be auto"), proc.stdout[-3000:]
    assert said[0].endswith('not "conda"'), said
    assert vars_file.exists(), "the refused run touched the inventory"
