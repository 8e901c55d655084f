"""scripts/playbook_runner.py, the one way the project's scripts and tests run Ansible: real
ansible-playbook runs through ansible-runner on localhost, read back from their events."""

from __future__ import annotations

import json
import signal
import sys

import playbook_runner as pr
from ansible_env import repo_ansible_env

PLAY = """\
- name: A play with every kind of result
  hosts: all
  gather_facts: false
  tasks:
    - name: Say something
      ansible.builtin.debug:
        msg: hello
    - name: Change something
      ansible.builtin.copy:
        content: "x\\n"
        dest: "{dest}"
        mode: "0644"
    - name: Skip this one
      ansible.builtin.debug:
        msg: never
      when: false
    - name: Loop over three, skipping one
      ansible.builtin.command: "echo {{{{ item }}}}"
      loop: [1, 2, 3]
      when: item != 2
      changed_when: false
    - name: Fail and go on
      ansible.builtin.fail:
        msg: ignored on purpose
      ignore_errors: true
    - name: Fail for real
      ansible.builtin.fail:
        msg: "the reason, named"
"""


def _run(tmp_path, *args, **kw):
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(dest=tmp_path / "out.txt"))
    argv = ["-c", "local", "-e", f"ansible_python_interpreter={sys.executable}", *args]
    return pr.run_playbook(play, *argv, inventory="localhost,", env=repo_ansible_env(), **kw)


def test_a_run_reads_back_from_its_events(tmp_path):
    run = _run(tmp_path)
    assert run.rc == 2 and run.status == "failed"
    assert run.result("Say something")["msg"] == "hello"
    assert run.result("Change something")["changed"] is True
    skipped = run.result("Skip this one")
    assert skipped["skipped"] is True and skipped["failed"] is False
    items = run.results("Loop over three, skipping one", items=True)
    kinds = [r["_event"] for r in items]
    assert kinds == ["runner_item_on_ok", "runner_item_on_skipped", "runner_item_on_ok"]
    # the ignored failure is a failed result, but not a failure of the run
    assert run.result("Fail and go on")["failed"] is True
    assert run.failures() == [("localhost", "Fail for real", "the reason, named")]
    assert run.host_stats() == {"ok": 4, "changed": 1, "unreachable": 0, "failures": 1, "skipped": 1,
                                "rescued": 0, "ignored": 1}  # fmt: skip
    assert run.changed() == 1
    assert run.changes() == [("localhost", "Change something")]
    assert run.task_names() == [
        "Say something", "Change something", "Skip this one", "Loop over three, skipping one",
        "Fail and go on", "Fail for real",
    ]  # fmt: skip
    assert {t for t, _h, s in run.task_times() if s >= 0} >= {"Say something", "Fail for real"}
    assert "the reason, named" in run.stdout  # Ansible's own output is kept as it printed it


def test_the_command_keeps_the_run_and_says_what_failed(tmp_path, capsys, monkeypatch):
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(dest=tmp_path / "out.txt"))
    for key, value in repo_ansible_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("ANSIBLE_HOST_KEY_CHECKING", raising=False)
    keep = tmp_path / "kept"
    outcome = tmp_path / "outcome.json"
    rc = pr.main(["--quiet", "--artifacts", str(keep), "--summary-json", str(outcome), str(play),
                  "-i", "localhost,", "-c", "local",
                  "-e", f"ansible_python_interpreter={sys.executable}"])  # fmt: skip
    assert rc == 2
    # what a caller in another process (the compatibility lane's checks) reads back
    said = json.loads(outcome.read_text())
    assert said["rc"] == 2 and said["status"] == "failed"
    assert said["recap"]["localhost"]["changed"] == 1 and said["recap"]["localhost"]["failures"] == 1
    assert said["changes"] == [["localhost", "Change something"]]
    assert said["tasks"][0] == "Say something" and said["tasks"][-1] == "Fail for real"
    out = capsys.readouterr().out
    assert "FAILED localhost: Fail for real: the reason, named" in out
    assert "slowest tasks" in out and str(keep) in out
    (ident,) = (keep / "artifacts").iterdir()
    assert (ident / "rc").read_text() == "2"
    events = [json.loads(p.read_text()) for p in (ident / "job_events").glob("*.json")]
    assert any(e["event"] == "playbook_on_stats" for e in events)
    # ansible-runner would turn host key checking off: the run kept Ansible's default
    command = json.loads((ident / "command").read_text())
    assert command["env"]["ANSIBLE_HOST_KEY_CHECKING"] == "True"


def test_a_library_call_leaves_the_signal_handlers_alone(tmp_path):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    _run(tmp_path)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_a_module_runs_through_the_same_path():
    python = f"ansible_python_interpreter={sys.executable}"
    run = pr.run_module("ansible.builtin.command", "echo hi", "-c", "local", "-e", python,
                        env=repo_ansible_env())
    (res,) = run.results(host="localhost")
    assert run.rc == 0 and res["stdout"] == "hi"
