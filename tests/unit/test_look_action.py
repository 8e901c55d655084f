"""mnc_look (action_plugins/mnc_look.py): a read-only command without a Python module on the node.

Real ansible-playbook runs on localhost: what a task registers must be what
ansible.builtin.command / shell would give, and a command that reads stdin must
not swallow the rest of the script (the script itself travels on stdin).
"""

from __future__ import annotations

import json

from ansible_env import ROOT, run_playbook

PLAY = """\
- name: Looks
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: A command, stdout and stderr apart, as command gives them
      mnc_look:
        argv: [sh, -c, 'echo "out $1"; echo err >&2', sh, "it's a b"]
      register: argv_look
    - name: A script whose first command reads stdin
      mnc_look:
        cmd: |
          cat
          echo "after cat: $GREETING in $(pwd)"
        executable: /bin/bash
        chdir: {tmp}
      environment:
        GREETING: "hello 'world'"
      register: script_look
    - name: A failing look, allowed
      mnc_look:
        cmd: exit 3
      register: failed_look
      failed_when: false
    - name: Say what the looks registered
      ansible.builtin.debug:
        msg: "{{{{ {{'argv': argv_look, 'script': script_look, 'failed': failed_look}} | to_json }}}}"
    - name: A failing look
      mnc_look:
        argv: ["false"]
"""


def _debug_msg(stdout: str) -> dict:
    doc = json.loads(stdout)
    for play in doc["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"] == "Say what the looks registered":
                return json.loads(task["hosts"]["localhost"]["msg"])
    raise AssertionError(stdout)


def test_a_look_registers_what_command_would_and_changes_nothing(tmp_path):
    book = tmp_path / "look.yml"
    book.write_text(PLAY.format(tmp=tmp_path))
    proc, _ = run_playbook(book, inventory="localhost,", json_output=True)
    # The last task fails: a non-zero exit fails a look, as it fails a command.
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    seen = _debug_msg(proc.stdout)
    assert seen["argv"]["stdout"] == "out it's a b"
    assert seen["argv"]["stderr"] == "err"
    assert seen["argv"]["rc"] == 0 and seen["argv"]["changed"] is False
    # cat read /dev/null, not the rest of the script; chdir and the environment applied.
    assert seen["script"]["stdout"] == f"after cat: hello 'world' in {tmp_path}"
    assert seen["failed"]["rc"] == 3 and seen["failed"]["changed"] is False
    doc = json.loads(proc.stdout)
    last = doc["plays"][0]["tasks"][-1]["hosts"]["localhost"]
    assert last["failed"] is True and last["rc"] == 1 and "non-zero return code" in last["msg"]


def test_a_look_runs_in_check_mode(tmp_path):
    book = tmp_path / "look.yml"
    book.write_text(PLAY.format(tmp=tmp_path))
    proc, _ = run_playbook(book, "--check", inventory="localhost,", json_output=True)
    seen = _debug_msg(proc.stdout)
    assert seen["argv"]["stdout"] == "out it's a b", proc.stdout[-2000:]


def test_the_script_runs_the_same_as_an_argument_of_the_shell(tmp_path):
    # Where stdin cannot carry the script (become via su, no pipelining), it is the shell's -c
    # argument: the same output, and a command that reads stdin still reads nothing of it.
    import subprocess
    import sys

    sys.path.insert(0, str(ROOT / "module_utils"))
    import mnc_shell

    script = mnc_shell.build_script("cat\necho \"after cat: $GREETING\"", str(tmp_path))
    for stdin in (True, False):
        cmd, data = mnc_shell.shell_command(script, "/bin/bash", "GREETING='hi there'", stdin)
        run = subprocess.run(["/bin/sh", "-c", cmd], input=data, capture_output=True, timeout=30, check=False)
        assert run.returncode == 0 and run.stdout == b"after cat: hi there\n", (stdin, run)


def test_bad_input_is_refused_with_a_clear_message():
    from ansible_env import run_module

    creates = run_module("mnc_look", {"argv": ["true"], "creates": "/x"})
    assert creates.get("failed") is True, creates
    assert "Invalid options for mnc_look: creates" in creates["msg"], creates
    both = run_module("mnc_look", {"argv": ["true"], "cmd": "true"})
    assert both.get("failed") is True and "exactly one of cmd" in both["msg"], both
