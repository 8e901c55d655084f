"""Every call between roles goes through a service entry point (docs/architecture.md).

A role or playbook may include its own task files freely, and another role
as a whole (`include_role: {name: X}`), but another role's task file only
through the entry points listed in docs/architecture.md's "Service entry
points" table. This test reads that table, so the document and the code
cannot drift apart: a new cross-role `tasks_from:` fails here until it is a
documented entry point (or goes away).
"""

import re
from pathlib import Path

import pytest
import yaml
from ansible_env import yaml_mappings

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
KEYS = ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role")


def documented_entry_points() -> set:
    """`role`/`tasks_from` pairs from the doc's "Service entry points" table."""
    text = DOC.read_text()
    section = text.split("## Service entry points", 1)[1].split("\n## ", 1)[0]
    pairs = set()
    for line in section.splitlines():
        m = re.match(r"^\|\s*`([a-z_]+)`\s*\|\s*(.+?)\s*\|", line)
        if m:
            pairs.update((m.group(1), entry) for entry in re.findall(r"`([A-Za-z0-9_-]+)`", m.group(2)))
    return pairs


def cross_role_calls():
    """(file, caller role or None, callee role, tasks_from) for every include/import_role with tasks_from."""
    files = sorted((ROOT / "roles").glob("*/tasks/*.yml")) + sorted((ROOT / "playbooks").glob("*.yml"))
    files.append(ROOT / "site.yml")
    for path in files:
        caller = path.parts[-3] if "roles" in path.parts else None
        for task in yaml_mappings(yaml.safe_load(path.read_text())):
            for key in KEYS:
                call = task.get(key)
                if isinstance(call, dict) and "tasks_from" in call and call.get("name") != caller:
                    entry = str(call["tasks_from"]).removesuffix(".yml")
                    yield path.relative_to(ROOT), caller, call["name"], entry


def test_the_document_lists_entry_points():
    expected = {
        ("artifacts", "fetch"),
        ("artifacts", "build_check"),
        ("artifacts", "build_install"),
        ("artifacts", "build_release"),
        ("common", "import_facts"),
        # the acceptance roles' later plays (playbooks/verify.yml, playbooks/benchmark.yml)
        ("verify", "table"),
        ("benchmark", "ready"),
        ("benchmark", "sweep"),
    }
    assert expected <= documented_entry_points()
    # and the scan finds the calls it is meant to judge
    assert {(callee, entry) for _p, _c, callee, entry in cross_role_calls()} >= expected


def test_cross_role_task_files_are_documented_entry_points():
    allowed = documented_entry_points()
    bad = sorted(
        f"{path}: {callee} tasks_from {entry}"
        for path, _caller, callee, entry in cross_role_calls()
        if (callee, entry) not in allowed
    )
    assert not bad, "another role's internal task file (not in docs/architecture.md):\n" + "\n".join(bad)


@pytest.mark.parametrize("callee,entry", sorted(documented_entry_points()))
def test_every_documented_entry_point_exists(callee, entry):
    assert (ROOT / "roles" / callee / "tasks" / f"{entry}.yml").is_file()


TASK_FILE_KEYS = (
    "ansible.builtin.include_tasks",
    "ansible.builtin.import_tasks",
    "include_tasks",
    "import_tasks",
)


def included_task_files():
    """(file, what include_tasks/import_tasks names) for every task file of every role."""
    for path in sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        for task in yaml_mappings(yaml.safe_load(path.read_text())):
            for key in TASK_FILE_KEYS:
                target = task.get(key)
                if isinstance(target, dict):
                    target = target.get("file")
                if target is not None:
                    yield path.relative_to(ROOT), str(target)


def test_no_role_includes_a_task_file_its_caller_names():
    """A service never calls back into its caller: every include_tasks names a file of the role's
    own tasks/ (a variable may choose among them, as pyenv's install-{{ provider }}.yml does, but
    a path that is a variable as a whole, or leaves the role, is a callback)."""
    files = list(included_task_files())
    assert len(files) > 20  # the scan sees the roles' includes
    bad = sorted(
        f"{path}: {target}"
        for path, target in files
        if target.lstrip().startswith("{{") or "/" in target or ".." in target
    )
    assert not bad, "include_tasks of a file outside the role's tasks/ (a callback):\n" + "\n".join(bad)
