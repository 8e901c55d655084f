"""Every task that starts the MPI user's shell or Python is bounded (issue 38, item 7).

ansible.cfg sets no task_timeout (builds take long), so a task without `timeout:` that runs
as the MPI user (its ~/.bashrc, its virtualenv's Python) or starts a shell that reads the
user's dotfiles (`bash -l`, mpiexec and srun starting remote shells, ssh) would hang
provisioning for as long as a `sleep` the user put in ~/.bashrc. A static lint over every
task file in roles/ (block keywords inherited); the wiring scenario shows the bound at work.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
# become_user values that name the MPI user (or a role's variable for it).
USER = re.compile(
    r"mnc_mpi_user|pyenv_user|chainer_user|__benchmark_user|slurm_check_user|mpi_hostfile_owner"
)
# Commands that start a shell reading the user's dotfiles, or the user's Python.
USER_SHELL = re.compile(r"bash\W{1,6}-l|mpiexec|\bssh\b|\bsrun\b|sbatch|mnc_python|chainer_python")
RUNNERS = {"command", "shell", "script", "raw"}
LISTS = ("block", "rescue", "always")


def _tasks(items, user=None, timeout=None):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        u, t = task.get("become_user", user), task.get("timeout", timeout)
        if any(k in task for k in LISTS):
            for k in LISTS:
                yield from _tasks(task.get(k), u, t)
        else:
            yield task, u, t


def unbounded(paths) -> list[str]:
    out = []
    for path in paths:
        for task, user, timeout in _tasks(yaml.safe_load(path.read_text())):
            mod = next((k for k in task if k.rsplit(".", 1)[-1] in RUNNERS), None)
            if mod is None or timeout is not None:
                continue
            body = yaml.safe_dump(task[mod])
            if (user is not None and USER.search(str(user))) or USER_SHELL.search(body):
                out.append(f"{path.relative_to(ROOT)}: {task.get('name')!r}")
    return out


def test_every_task_that_starts_the_mpi_users_shell_or_python_has_a_timeout():
    assert unbounded(sorted((ROOT / "roles").glob("*/tasks/**/*.yml"))) == []


@pytest.mark.parametrize(
    ("task", "flagged"),
    [
        ({"name": "t", "ansible.builtin.command": {"argv": ["bash", "-lc", "x"]}}, True),
        ({"name": "t", "ansible.builtin.command": {"argv": ["id"]},
          "become_user": "{{ mnc_mpi_user }}"}, True),
        ({"name": "t", "ansible.builtin.command": {"argv": ["id"]}, "become_user": "{{ mnc_mpi_user }}",
          "timeout": 60}, False),
        ({"name": "t", "block": [{"name": "u", "ansible.builtin.shell": "mpiexec -n 2 x"}],
          "timeout": 9}, False),
        ({"name": "t", "ansible.builtin.command": {"argv": ["ldconfig"]}}, False),
    ],
)  # fmt: skip
def test_the_lint_finds_an_unbounded_user_shell(task, flagged):
    f = ROOT / ".cache" / "lint-case.yml"
    f.parent.mkdir(exist_ok=True)
    f.write_text(yaml.safe_dump([task]))
    try:
        assert bool(unbounded([f])) is flagged
    finally:
        f.unlink()
