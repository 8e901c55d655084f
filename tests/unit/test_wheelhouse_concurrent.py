"""roles/artifacts/tasks/wheelhouse.yml: two runs that share one artifact cache and start at the
same moment (as make test's two lanes do) both succeed and leave one complete wheelhouse.

Real ansible-playbook, real `pip download` from the package index (a 11 kB wheel); skipped
where the index cannot be reached.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from ansible_env import index_reachable, run_playbook

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
    argv = ["-c", "local", "-e", f"ansible_python_interpreter={sys.executable}"]

    def one(_):
        env = {"MNC_ARTIFACT_CACHE": str(cache)}
        run, _elapsed = run_playbook(play, *argv, inventory="localhost,", env=env, timeout=600)
        return run

    # Both ansible-playbook runs at once (each under its own ansible-runner, in a thread).
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(one, range(2)))
    for run in runs:
        assert run.rc == 0, run.tail(5000)
    wheels = cache / "wheels"
    assert sorted(p.name for p in wheels.iterdir()) == ["concurrent"], "a temporary wheelhouse was left"
    stamp = json.loads((wheels / "concurrent" / ".mncluster-wheelhouse.json").read_text())
    assert stamp["files"] == ["six-1.17.0-py2.py3-none-any.whl"]
    assert (wheels / "concurrent" / stamp["files"][0]).stat().st_size > 10_000
