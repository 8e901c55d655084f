"""The MPI user's files are the MPI user's business (CONTRIBUTING.md, "Root and the MPI user").

From root's point of view the MPI user and everything under its home (the
pyenv root and the virtualenv included) are untrusted: root follows none of
its links and runs none of its programs. A static lint over every task file in
roles/: a task that writes, creates, chowns or templates a path under the MPI
user's home, or runs a program of the user's (the virtualenv's python, pyenv),
runs as that user (`become_user`, or `runuser` in its command; roles/openmpi's conflict scan gets
the user in MNC_PYTHON_USER). A `become_user` expression that can come out as root
(`{{ user if ... else 'root' }}`) counts as root: that shape once let root chown a link's
target (common's work directory outside the home). Root makes a directory for the user
outside the home only through `mnc_user_dir`, which follows no link the user could have
planted (mncluster.core.mnc_user_dir). What may stay as root is listed below, each with the reason.

Also: no role defaults a path to world-writable /tmp or /var/tmp (root's
scratch is root's own, mode 0700: roles/artifacts build_check).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

# Jinja names (and path forms) that stand for the MPI user's home or a path under it.
HOME = re.compile(
    r"mnc_mpi_home|mnc_work_dir|__pyenv_home|__pyenv_root|__pyenv_live|__pyenv_venv_dir|__chainer_home"
    r"|getent_passwd\[|~\{\{|\.bashrc|pyenv_root"
)
# The MPI user's programs.
USER_PROGRAM = re.compile(
    r"chainer_python|mnc_python|__pyenv_venv_dir|__pyenv_root|__verify_python|__pyenv_home"
)

# Modules that write, create or chown what their path names.
WRITERS = {
    "file", "copy", "template", "blockinfile", "lineinfile", "replace", "unarchive", "get_url",
    "openssh_keypair", "authorized_key", "known_hosts", "tempfile", "ini_file", "mnc_write_files",
}  # fmt: skip
WRITE_ARGS = ("path", "dest")
RUNNERS = {"command", "shell", "script", "raw"}

# (role/tasks/file.yml, task name): why root may do it.
ALLOWED = {
    ("cuda/tasks/main.yml", "Look at the MPI user's home and the CUDA prefix"):
        "reads metadata only (test -d / -L of the home, no link taken for one): opens, writes and runs"
        " nothing of the user's",
    ("common/tasks/mpi_user.yml",
     "Read the node's accounts and groups, and look at the MPI user's home and work directory"):
        "reads metadata only (getent; test -d / -L and stat -c of the home and the work directory, no link"
        " taken for one): opens, writes and runs nothing of the user's",
    ("openmpi/tasks/verify.yml", "Run 2 ranks as the MPI user from a non-interactive SSH-style shell"):
        "runuser runs the ranks as the user; root only changes into the home (chdir) to start it",
}  # fmt: skip

TASK_LISTS = ("block", "rescue", "always")


def _module(task: dict) -> tuple[str, object] | None:
    for key, value in task.items():
        short = key.rsplit(".", 1)[-1]
        if short in WRITERS | RUNNERS | {"include_role", "import_role"}:
            return short, value
    return None


def _artifacts_as_root(task: dict, args) -> str:
    """An artifacts call that would have root write under the home: a fetch copy there
    without artifacts_fetch_owner, a build prefix there without artifacts_build_owner
    (with an owner, artifacts does that part as the owner)."""
    if not isinstance(args, dict) or args.get("name") != "artifacts":
        return ""
    v = task.get("vars") or {}
    if args.get("tasks_from") == "fetch" and HOME.search(_text(v.get("artifacts_fetch_dest", ""))):
        return "" if v.get("artifacts_fetch_owner") else "fetch copies under the home as root"
    if args.get("tasks_from") in ("build_check", "build_install") and HOME.search(
        _text(v.get("artifacts_build_prefix", ""))
    ):
        return "" if v.get("artifacts_build_owner") else "installs a build under the home as root"
    return ""


def _tasks(items, inherited: str | None, block_vars: dict | None = None):
    """Every task of a task list with the become_user in effect (block keywords inherited);
    the task's vars include its blocks' vars."""
    for task in items or []:
        if not isinstance(task, dict):
            continue
        user = task.get("become_user", inherited)
        merged = {**(block_vars or {}), **(task.get("vars") or {})}
        if any(k in task for k in TASK_LISTS):
            for k in TASK_LISTS:
                yield from _tasks(task.get(k), user, merged)
            continue
        yield {**task, "vars": merged}, user


def task_files():
    return sorted((ROOT / "roles").glob("*/tasks/**/*.yml"))


def _text(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True) if not isinstance(value, str) else value


def findings(paths: list[Path] | None = None, base: Path = ROOT / "roles") -> list[str]:
    out = []
    for path in paths or task_files():
        rel = str(path.relative_to(base))
        for task, user in _tasks(yaml.safe_load(path.read_text()), None):
            name = task.get("name", "?")
            mod = _module(task)
            if mod is None or (rel, name) in ALLOWED:
                continue
            short, args = mod
            as_user = (user is not None and str(user).strip() not in ("root", "")
                       and "root" not in str(user))  # an expression that may yield root is root
            if short in ("include_role", "import_role"):
                why = _artifacts_as_root(task, args)
                if why:
                    out.append(f"{rel}: {name!r} ({short} artifacts) {why}")
            elif short in WRITERS:
                targets = [args.get(a, "") for a in WRITE_ARGS] if isinstance(args, dict) else []
                if short == "mnc_write_files" and isinstance(args, dict):
                    # each file's dest, or the expression that builds the list (its names show)
                    files = args.get("files", "")
                    targets += [f.get("dest", "") for f in files] if isinstance(files, list) else [files]
                if any("item" in _text(t) for t in targets):
                    targets.append(task.get("loop", task.get("with_items", "")))
                if isinstance(args, dict) and short == "tempfile":
                    targets.append(args.get("path", "/tmp"))
                hit = [t for t in targets if HOME.search(_text(t))]
                if hit and not as_user:
                    out.append(f"{rel}: {name!r} ({short}) writes {hit[0]} as root")
            else:
                body = (
                    _text(args) + " " + _text(task.get("environment", "")) + " " + _text(task.get("vars", ""))
                )
                argv0 = args.get("argv", [""])[0] if isinstance(args, dict) and args.get("argv") else ""
                # runuser in the command, or find-mpi-conflicts.sh told whom to run the Pythons as.
                runs_as_user = (
                    as_user
                    or "runuser" in _text(args)
                    or "MNC_PYTHON_USER" in _text(task.get("environment", "")) + " " + _text(args)
                )
                touches = USER_PROGRAM.search(body) or HOME.search(body)
                if touches and not runs_as_user and not str(argv0).startswith("runuser"):
                    out.append(f"{rel}: {name!r} ({short}) runs or changes the MPI user's files as root")
    return out


def test_no_task_writes_under_the_mpi_home_or_runs_the_users_programs_as_root():
    assert findings() == []


def test_every_allowed_exception_still_exists():
    """An entry of the allow-list whose task is gone (or renamed) goes too."""
    names = set()
    for path in task_files():
        rel = str(path.relative_to(ROOT / "roles"))
        names.update((rel, t.get("name", "?")) for t, _ in _tasks(yaml.safe_load(path.read_text()), None))
    assert sorted(set(ALLOWED) - names) == []


BASHRC = {"path": "{{ mnc_mpi_home }}/.bashrc", "block": "x"}
AS_USER = {"become": True, "become_user": "{{ mnc_mpi_user }}"}
LINT_CASES = {
    "bashrc-as-root": ({"name": "t", "ansible.builtin.blockinfile": BASHRC}, True),
    "bashrc-as-user": ({"name": "t", "ansible.builtin.blockinfile": BASHRC, **AS_USER}, False),
    "venv-python-as-root": (
        {"name": "t", "ansible.builtin.command": {"argv": ["{{ chainer_python }}"]}},
        True,
    ),
    "dir-under-home-as-root": (
        {"name": "t", "ansible.builtin.file": {"path": "{{ mnc_mpi_home }}/x", "state": "directory"}},
        True,
    ),
    "files-under-home-as-root": (
        {"name": "t",
         "mncluster.core.mnc_write_files": {"files": [{"dest": "/etc/x"}, {"dest": "{{ __pyenv_root }}/v"}]}},
        True,
    ),
    "files-under-home-as-user": (
        {"name": "t", "mncluster.core.mnc_write_files": {"files": [{"dest": "{{ __pyenv_root }}/version"}]},
         **AS_USER},
        False,
    ),
    "venv-python-shell-as-root": (
        {"name": "t", "ansible.builtin.shell": {"cmd": "{{ chainer_python }} -V"}},
        True,
    ),
    "inherited-user": (
        {
            "name": "t",
            "block": [{"name": "u", "ansible.builtin.command": {"argv": ["{{ mnc_python }}"]}}],
            **AS_USER,
        },
        False,
    ),
    "fetch-under-home-without-owner": (
        {
            "name": "t",
            "ansible.builtin.include_role": {"name": "artifacts", "tasks_from": "fetch"},
            "vars": {"artifacts_fetch_dest": "{{ __pyenv_root }}/cache/x"},
        },
        True,
    ),
    "build-under-home-with-owner": (
        {
            "name": "t",
            "vars": {"artifacts_build_prefix": "{{ __pyenv_root }}/versions/3", "artifacts_build_owner": "u"},
            "block": [
                {
                    "name": "c",
                    "ansible.builtin.include_role": {"name": "artifacts", "tasks_from": "build_check"},
                }
            ],
        },
        False,
    ),
    "shell-moving-under-home-as-root": (
        {
            "name": "t",
            "ansible.builtin.shell": {"cmd": "mv $LIVE $LIVE.old"},
            "environment": {"LIVE": "{{ __pyenv_live }}"},
        },
        True,
    ),
    "expression-that-may-be-root": (
        {"name": "t", "ansible.builtin.file": {"path": "{{ mnc_work_dir }}", "state": "directory"},
         "become": True, "become_user": "{{ mnc_mpi_user if x else 'root' }}"},
        True,
    ),
    "user-dir-module-as-root": (
        {"name": "t", "mncluster.core.mnc_user_dir": {
            "path": "{{ mnc_work_dir }}", "owner": "u", "group": "u", "mode": "0755"}},
        False,
    ),
    "root-path": ({"name": "t", "ansible.builtin.file": {"path": "/etc/x", "state": "directory"}}, False),
    "explicit-root": (
        {"name": "t", "ansible.builtin.copy": {"dest": "{{ __pyenv_root }}/version"}, "become_user": "root"},
        True,
    ),
}


@pytest.mark.parametrize(("task", "flagged"), list(LINT_CASES.values()), ids=list(LINT_CASES))
def test_the_lint_tells_root_from_the_user(tmp_path, task, flagged):
    f = tmp_path / "r" / "tasks" / "main.yml"
    f.parent.mkdir(parents=True)
    f.write_text(yaml.safe_dump([task]))
    assert bool(findings([f], base=tmp_path)) is flagged


def _defaults(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _defaults(v)
    elif isinstance(value, list):
        for v in value:
            yield from _defaults(v)
    elif isinstance(value, str):
        yield value


def test_no_role_defaults_a_path_to_world_writable_tmp():
    bad = []
    for path in sorted((ROOT / "roles").glob("*/defaults/**/*.yml")):
        for value in _defaults(yaml.safe_load(path.read_text()) or {}):
            if re.match(r"^/(var/)?tmp(/|$)", value.strip()):
                bad.append(f"{path.relative_to(ROOT)}: {value}")
    assert bad == []


def test_every_node_play_runs_its_modules_without_the_user_site():
    """Issue 38, item 10: a module run as the MPI user started Python with that user's site
    directory, so a usercustomize.py it planted ran inside the module (and could add facts to
    its result, which later stages read as root). Every play of the stage playbooks that
    reaches a node sets PYTHONNOUSERSITE (the default scenario shows it at work)."""
    missing = []
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(path.read_text()) or []:
            if "hosts" not in play or play["hosts"] == "localhost" or path.name == "preflight.yml":
                continue
            if str((play.get("environment") or {}).get("PYTHONNOUSERSITE")) != "1":
                missing.append(f"{path.name}: {play.get('name')}")
    assert missing == []
