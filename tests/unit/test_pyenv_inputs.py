"""roles/pyenv's input check (tasks/validate.yml) and its package names, run by a real
ansible-playbook on this machine: the names come from vars/main.yml by the node's OS family, and
a family the role has no names for is refused by the check, naming it, before anything runs."""

from __future__ import annotations

from ansible_env import CASE_FACTS, CASE_GATHER, CASE_REFUSAL, run_cases

CASE_TASKS = (
    CASE_GATHER
    + CASE_FACTS
    + """\
- name: "Check ({{ case.name }})"
  block:
    - name: "The pyenv role's input check ({{ case.name }})"
      ansible.builtin.include_role:
        name: pyenv
        tasks_from: validate
        public: true
    - name: "Write the package names ({{ case.name }})"
      ansible.builtin.copy:
        dest: "{{ case_out }}/{{ case.name }}.json"
        content: "{{ {'family': ansible_facts.os_family, 'build': __pyenv_build_packages,
                       'system': __pyenv_system_packages} | to_json }}"
        mode: "0644"
"""
    + CASE_REFUSAL
)

# What the inventory's group_vars give every role (the artifact overrides: none here).
BASE = {"mnc_artifact_overrides": {}, "pyenv_system_python": "python3.11"}
CASES = [
    {"name": "this-family", "vars": BASE},
    # a role that knows only another family: this machine's is then one it has no names for
    {
        "name": "unknown-family",
        "vars": {**BASE, "__pyenv_os_packages": {"RedHat": {"build": ["gcc"], "system": ["python3"]}}},
    },
]


def test_the_package_names_come_by_os_family_and_an_unknown_family_is_refused(tmp_path):
    results = run_cases(tmp_path, "pyenv's input check, case by case", CASE_TASKS, CASES)
    got = results["this-family"]
    assert "failed" not in got, got
    assert got["family"] == "Debian"
    assert {"build-essential", "libssl-dev", "libffi-dev", "acl"} <= set(got["build"])
    assert got["system"] == ["python3.11", "python3.11-venv", "python3.11-dev", "build-essential", "acl"]
    msg = results["unknown-family"]["failed"]
    assert "is of the OS family Debian" in msg and "it knows RedHat" in msg, msg
