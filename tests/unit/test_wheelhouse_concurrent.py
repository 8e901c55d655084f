"""roles/artifacts/tasks/wheelhouse.yml: two runs that share one artifact cache and start at the
same moment (as make test's two lanes do) both succeed and leave one complete wheelhouse.

Real ansible-playbook, real `pip download` from the package index (a 11 kB wheel); skipped
where the index cannot be reached.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ansible_env import ANSIBLE_PLAYBOOK, ROOT, index_reachable, repo_ansible_env

PLAY = """\
---
- name: Build a wheelhouse
  hosts: all
  gather_facts: false
  tasks:
    - name: Build it
      ansible.builtin.include_role:
        name: artifacts
        tasks_from: wheelhouse
      vars:
        artifacts_wheelhouse_name: concurrent
        artifacts_wheelhouse_requirements: [six==1.17.0]
        artifacts_wheelhouse_python_version: "3.11"
"""


@pytest.mark.skipif(not index_reachable(), reason="the package index cannot be reached")
@pytest.mark.battery("concurrency: two runs staging one wheelhouse at the same moment", bound_s=900)
def test_two_runs_on_one_cache_both_pass_and_leave_one_complete_wheelhouse(tmp_path):
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    cache = tmp_path / "cache"
    env = repo_ansible_env(MNC_ARTIFACT_CACHE=str(cache))
    argv = [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", str(play),
            "-e", f"ansible_python_interpreter={sys.executable}"]  # fmt: skip
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    runs = [subprocess.Popen(argv, cwd=ROOT, env=env, **pipes) for _ in range(2)]
    results = [(p.communicate(timeout=600), p.returncode) for p in runs]
    for (out, err), rc in results:
        assert rc == 0, out[-3000:] + err[-2000:]
    wheels = cache / "wheels"
    assert sorted(p.name for p in wheels.iterdir()) == ["concurrent"], "a temporary wheelhouse was left"
    stamp = json.loads((wheels / "concurrent" / ".mncluster-wheelhouse.json").read_text())
    assert stamp["files"] == ["six-1.17.0-py2.py3-none-any.whl"]
    assert (wheels / "concurrent" / stamp["files"][0]).stat().st_size > 10_000
