"""How the repository's tests run Ansible, always through ansible-runner
(scripts/playbook_runner.py): the environment (`repo_ansible_env`), a real ansible-playbook
run (`run_playbook`, read back from its events), one module (`run_module`), a table of cases
through one play (`run_cases`), and the testinfra host list of a molecule scenario
(`podman_hosts`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from playbook_runner import Run
from playbook_runner import run_module as _run_module
from playbook_runner import run_playbook as _run_playbook

ROOT = Path(__file__).resolve().parents[2]


def repo_ansible_env(**extra: str) -> dict[str, str]:
    """This repository's ansible.cfg (its collections_path finds our collection, mncluster.core)
    and roles, uncoloured, over the environment (ansible-runner adds this process's own): what
    every test run of Ansible gets."""
    return {
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        # ansible-core 2.21+ returns a module's invocation only when asked.
        "ANSIBLE_INJECT_INVOCATION": "1",
        **extra,
    }


def run_playbook(
    playbook, *extra: str, inventory, timeout: int = 600, env: dict | None = None
) -> tuple[Run, float]:
    """Run a real ansible-playbook from the repository root through ansible-runner;
    ``inventory`` is one source or a list of sources (in order), ``env`` more variables. The
    run (its rc, Ansible's output, its events) and its wall time in s."""
    run = _run_playbook(
        playbook, *extra, inventory=inventory, env=repo_ansible_env(**(env or {})), timeout=timeout
    )
    return run, run.elapsed


def task_results(run: Run, task_name: str) -> list[dict]:
    """Every host result of the tasks named ``task_name``, the role prefix aside."""
    return run.results(task_name)


CASE_PLAY = """\
- name: {title}
  hosts: localhost
  gather_facts: false
  # the version matrix and the shared mnc_* defaults: the play's first role, as in every play of ours
  roles:
    - role: stack
  tasks:
    - name: Run one case
      ansible.builtin.include_tasks: case.yml
      loop: "{{{{ cases }}}}"
      loop_control:
        loop_var: case
        label: "{{{{ case.name }}}}"
"""


# Before the cases in ``run_cases``' task text, where the tasks read the controller's facts
# (a role's inputs, or a GPU role's dependency cuda_matrix): gathered once, for every case.
CASE_GATHER = """\
- name: "Read the controller's facts once"
  ansible.builtin.setup:
    gather_subset: [min]
  when: ansible_facts.distribution is not defined
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
        CASE_GATHER
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
    assert proc.returncode == 0, proc.tail(9000)
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


def run_module(
    module: str, args: dict | str, *extra: str, timeout: int = 120, env: dict | None = None
) -> dict:
    """Run one of this repository's modules on localhost with real `ansible` through
    ansible-runner (``args`` a dict or key=value text; ``extra``: more command-line options,
    e.g. ``--check``); the module's result."""
    text = args if isinstance(args, str) else json.dumps(args)
    run = _run_module(
        module, text, "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}", *extra,
        env=repo_ansible_env(**(env or {})), timeout=timeout,
    )  # fmt: skip
    found = run.results(host="localhost")
    if len(found) != 1:
        return {"failed": True, "msg": f"ansible gave {len(found)} results (rc {run.rc}):\n{run.tail(3000)}"}
    return found[0]


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
