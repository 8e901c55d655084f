"""How the repository's tests run Ansible: the environment (`repo_ansible_env`), a real
ansible-playbook run (`run_playbook`), a table of cases through one play (`run_cases`), and
the testinfra host list of a molecule scenario (`podman_hosts`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")


def repo_ansible_env(json_output: bool = True, **extra: str) -> dict:
    """This repository's ansible.cfg, roles, modules and module_utils; results as JSON on stdout
    unless json_output is false (then ansible.cfg's own output)."""
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(ROOT / "roles"),
        ANSIBLE_LIBRARY=str(ROOT / "library"),
        ANSIBLE_MODULE_UTILS=str(ROOT / "module_utils"),
    )
    if json_output:
        env.update(
            ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
            ANSIBLE_STDOUT_CALLBACK="json",
            # None of ansible.cfg's (they print to stdout, into the JSON). Empty is refused by
            # ansible-core 2.19+; a stdout callback other than the one in use is never loaded.
            ANSIBLE_CALLBACKS_ENABLED="ansible.builtin.json",
            # ansible-core 2.21+ returns a module's invocation only when asked.
            ANSIBLE_INJECT_INVOCATION="1",
        )
    env.update(extra)
    return env


def run_playbook(
    playbook, *extra: str, inventory, timeout: int = 600, json_output: bool = False
) -> tuple[subprocess.CompletedProcess, float]:
    """Run a real ansible-playbook from the repository root, uncoloured; ``inventory`` is one
    source or a list of sources (in order). The completed process and its wall time in s."""
    sources = inventory if isinstance(inventory, list | tuple) else [inventory]
    env = repo_ansible_env(json_output=json_output, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    argv = [str(ANSIBLE_PLAYBOOK), *[a for src in sources for a in ("-i", str(src))], str(playbook), *extra]
    t0 = time.monotonic()
    proc = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    return proc, time.monotonic() - t0


def task_results(stdout: str, task_name: str) -> list[dict]:
    """Every host result of the tasks named ``task_name``, the role prefix aside, in a run's
    json-callback output (``run_playbook(..., json_output=True)``)."""
    doc = json.loads(stdout)
    return [
        result
        for play in doc["plays"]
        for task in play["tasks"]
        if task["task"]["name"].split(" : ", 1)[-1] == task_name
        for result in task["hosts"].values()
    ]


CASE_PLAY = """\
- name: {title}
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run one case
      ansible.builtin.include_tasks: case.yml
      loop: "{{{{ cases }}}}"
      loop_control:
        loop_var: case
        label: "{{{{ case.name }}}}"
"""


# The start of a case in ``run_cases``' task text: the case's variables set as facts (they
# outrank the role's vars), so every case of the one play sees only its own.
CASE_FACTS = """\
- name: "Set the case's facts ({{ case.name }})"
  ansible.builtin.set_fact:
    "{{ item.key }}": "{{ item.value }}"
  loop: "{{ case.vars | dict2items }}"
  loop_control:
    label: "{{ item.key }}"
"""

# The end of a case's block in ``run_cases``' task text: a case the role refuses writes
# {"failed": <message>} as its document instead of the role's results.
CASE_REFUSAL = """\
  rescue:
    - name: "Write the refusal ({{ case.name }})"
      ansible.builtin.copy:
        dest: "{{ case_out }}/{{ case.name }}.json"
        content: "{{ {'failed': ansible_failed_result.msg | default(ansible_failed_result)} | to_json }}"
        mode: "0644"
"""


# A case of the openmpi role's inputs.yml in ``run_cases``: the controller's facts once, the
# case's facts, then inputs.yml with ``include_vars`` (YAML lines of the include's vars) and
# <name>.json holding the configure flags, the fingerprint, its hash and ``extra_doc`` (more
# ``'key': value`` pairs of the document), or the refusal.
def openmpi_inputs_case_tasks(include_vars: str, extra_doc: str = "") -> str:
    return (
        """\
- name: "Read the controller's facts once"
  ansible.builtin.setup:
    gather_subset: [min]
  when: ansible_facts.distribution is not defined
"""
        + CASE_FACTS
        + """\
- name: "Settle the inputs ({{ case.name }})"
  block:
    - name: "Settle ({{ case.name }})"
      ansible.builtin.include_role:
        name: openmpi
        tasks_from: inputs
      vars:
        @INCLUDE_VARS@
    - name: "Write what was decided ({{ case.name }})"
      ansible.builtin.copy:
        dest: "{{ case_out }}/{{ case.name }}.json"
        content: >-
          {{ {'flags': __openmpi_configure_flags,
              'fingerprint': __openmpi_fingerprint,
              'hash': (__openmpi_fingerprint | to_json(sort_keys=true)) | hash('sha256')
                      | truncate(16, true, '', 0)@EXTRA_DOC@} | to_json }}
        mode: "0644"
""".replace("@INCLUDE_VARS@", include_vars).replace("@EXTRA_DOC@", extra_doc)
        + CASE_REFUSAL
    )


def run_cases(tmp: Path, title: str, case_tasks: str, cases: list[dict], files: dict | None = None) -> dict:
    """Run ``case_tasks`` once per case (``case`` in the loop, ``case_out`` the directory where
    each case writes ``<name>.json``) in one real ansible-playbook on localhost; ``files`` are more
    task files beside case.yml. Returns {case name: its JSON document}; fails unless every case
    wrote one."""
    out = tmp / "out"
    out.mkdir()
    hosts = f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    (tmp / "hosts").write_text(hosts)
    (tmp / "case.yml").write_text(case_tasks)
    for name, text in (files or {}).items():
        (tmp / name).write_text(text)
    (tmp / "play.yml").write_text(CASE_PLAY.format(title=title))
    extra = json.dumps({"cases": cases, "case_out": str(out)})
    proc, _elapsed = run_playbook(tmp / "play.yml", "-e", extra, inventory=tmp / "hosts", timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    results = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert set(results) == {c["name"] for c in cases}, proc.stdout[-4000:]
    return results


def podman_hosts(group: str = "all") -> list[str]:
    """testinfra host specs for a molecule scenario's instances in ``group``: the instances are
    podman containers named as in the inventory, so each check is one `podman exec` rather than
    a whole ansible run (about 0.2 s instead of 3 s)."""
    import testinfra.utils.ansible_runner

    runner = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])
    return [f"podman://{name}" for name in runner.get_hosts(group)]


def run_module(module: str, args: dict, *extra: str, timeout: int = 120) -> dict:
    """Run one of this repository's modules on localhost with real `ansible` (``extra``: more
    command-line options, e.g. ``--check``); the module's result."""
    import json

    argv = [
        str(ANSIBLE_PLAYBOOK.with_name("ansible")), "localhost", "-i", "localhost,", "-c", "local",
        "-m", module, "-a", json.dumps(args), "-e", f"ansible_python_interpreter={sys.executable}", *extra,
    ]  # fmt: skip
    proc = subprocess.run(
        argv, cwd=ROOT, env=repo_ansible_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


_TAMPER_CALLBACK = """\
import os
import shutil

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    \"\"\"After the task named TAMPER_TASK, replace TAMPER_PATH with TAMPER_WITH: what someone with
    write access on the way could do between a copy and its use.\"\"\"

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "tamper"
    CALLBACK_NEEDS_ENABLED = True

    def v2_runner_on_ok(self, result):
        if result._task.get_name().endswith(os.environ["TAMPER_TASK"]):
            shutil.copyfile(os.environ["TAMPER_WITH"], os.environ["TAMPER_PATH"])
"""


def tamper_env(plugin_dir: Path, after: str, path: Path, replacement: Path) -> dict[str, str]:
    """Environment for an ansible-playbook run in which ``path`` is replaced by ``replacement``
    right after the task whose name ends with ``after`` (a callback plugin written into
    ``plugin_dir``). Callbacks run before the next task starts: no timing involved."""
    plugin_dir.mkdir(parents=True, exist_ok=True)
    (plugin_dir / "tamper.py").write_text(_TAMPER_CALLBACK)
    return {
        "ANSIBLE_CALLBACK_PLUGINS": str(plugin_dir),
        "ANSIBLE_CALLBACKS_ENABLED": "tamper",
        "TAMPER_TASK": after,
        "TAMPER_WITH": str(replacement),
        "TAMPER_PATH": str(path),
    }


def index_reachable() -> bool:
    """Whether this machine reaches the Python package index (tests that download wheels)."""
    import urllib.request

    try:
        urllib.request.urlopen("https://pypi.org/simple/six/", timeout=10).close()
        return True
    except OSError:
        return False


def yaml_mappings(node):
    """Every mapping in a parsed YAML document (plays, tasks, blocks, ...), depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from yaml_mappings(value)
    elif isinstance(node, list):
        for item in node:
            yield from yaml_mappings(item)
