"""Run a shell script on a node through an action plugin's connection, without a Python module.

Controller-side (action_plugins/): mnc_look, and the fronts of file, blockinfile, stat, getent,
slurp, service and mnc_write_files (ShellFront below). A Python module
costs a node about 0.13 CPU-seconds per run (Python starts and compiles ansible.module_utils from
the AnsiballZ zip) before it does anything; a shell reading a few lines costs a few milliseconds.
The script goes on the connection's stdin where Ansible would pipeline a module (else as the
shell's -c argument), with the task's become and environment.
"""

from __future__ import annotations

import shlex

from ansible.plugins.action import ActionBase

# As a Python module does (AnsibleModule): stay where the login put us when this user may,
# else go home (a become_user cannot enter root's home).
_REACHABLE_CWD = '{ [ -r . ] && [ -x . ]; } 2>/dev/null || cd "${HOME:-/}" 2>/dev/null || cd /\n'


def build_script(cmd: str, chdir: str | None = None) -> str:
    """The script the node's shell reads: ``cmd`` in a brace group whose stdin is /dev/null.

    The shell reads its script from stdin; a command in it that reads stdin (mpiexec, ssh)
    would swallow the rest of the script. The shell parses the whole brace group before it runs
    any of it, and the group's own stdin is /dev/null.
    """
    prologue = f"cd {shlex.quote(str(chdir))} || exit 1\n" if chdir else _REACHABLE_CWD
    return "{\n" + prologue + cmd.rstrip("\n") + "\n} </dev/null\n"


def stdin_usable(action) -> bool:
    """Whether the script can travel on stdin: where Ansible itself would pipeline a module
    (the connection can, pipelining is on, the become method is not su)."""
    return bool(action._is_pipelining_enabled("new"))


def shell_command(script: str, executable: str, env: str, stdin: bool) -> tuple[str, bytes | None]:
    """The command line and the stdin data that run ``script`` by ``executable``: the script on
    stdin (``-s``), or, where stdin cannot carry it, as the shell's ``-c`` argument."""
    if stdin:
        return f"{env} {shlex.quote(executable)} -s".strip(), script.encode()
    return f"{env} {shlex.quote(executable)} -c {shlex.quote(script)}".strip(), None


def run_script(action, script: str, executable: str = "/bin/sh") -> dict:
    """rc, stdout, stderr (no trailing newline, as ansible.builtin.command gives them) and their
    _lines of ``script`` run by ``executable`` on the action's node, with its become and the
    task's environment keyword."""
    cmd, data = shell_command(script, executable, action._compute_environment_string(), stdin_usable(action))
    out = action._low_level_execute_command(cmd, in_data=data, sudoable=True)
    out["stdout"] = out["stdout"].rstrip("\r\n")
    out["stderr"] = out["stderr"].rstrip("\r\n")
    return out


def path_word(path: str) -> str | None:
    """``path`` as a shell word, a leading ``~user`` left for the shell to expand (as the task's
    user, as the file module would); None for what a look should not guess at."""
    if path.startswith("~"):
        user, _, rest = path[1:].partition("/")
        if not all(c.isalnum() or c in "._-" for c in user):
            return None
        return "~" + user + (shlex.quote("/" + rest) if rest or path.endswith("/") else "")
    return shlex.quote(path) if path.startswith("/") else None


def path_argument(args: dict, names: tuple[str, ...], looked_at) -> tuple[str | None, str | None]:
    """The path a front's task names (the first of ``names`` given) and its shell word
    (path_word); the word is None where an argument outside ``looked_at`` is given, so the
    module decides."""
    path = next((args[n] for n in names if args.get(n)), None)
    if not isinstance(path, str) or not set(args) <= set(looked_at):
        return path, None
    return path, path_word(path)


# What is at "$p", without following a link at it: "absent", "link <target>", or
# "<directory|file> <mode> <owner> <group> <uid> <gid>".
STAT_LINE = """if [ -L "$p" ]; then printf 'link %s\\n' "$(readlink -- "$p")"
elif [ -d "$p" ]; then stat -c 'directory %a %U %G %u %g' -- "$p"
elif [ -e "$p" ]; then stat -c 'file %a %U %G %u %g' -- "$p"
else echo absent
fi"""


def attributes_match(line: str, mode, owner, group) -> bool | None:
    """Whether a STAT_LINE of a directory or file has the wanted mode (an octal string), owner and
    group (names or ids; None: any); None when a wanted value is one a look cannot compare."""
    parts = line.split()
    if len(parts) != 6 or parts[0] not in ("directory", "file"):
        return False
    if mode is not None:
        if not isinstance(mode, str) or not mode.isdigit() or not set(mode) <= set("01234567"):
            return None
        if int(mode, 8) != int(parts[1], 8):
            return False
    if owner is not None and str(owner) not in (parts[2], parts[4]):
        return False
    return group is None or str(group) in (parts[3], parts[5])


class ShellFront(ActionBase):
    """An action in front of a module (MODULE): ``look`` asks the node's shell whether the task
    has anything to do and returns the module's result where it has not; None (something
    differs, or the look cannot tell) runs MODULE with the task's arguments."""

    TRANSFERS_FILES = False
    MODULE = ""

    def look(self, args: dict) -> dict | None:
        raise NotImplementedError

    def shell(self, script: str, executable: str = "/bin/sh") -> dict:
        """``script`` run on the node from /, as the task's user (run_script)."""
        return run_script(self, build_script(script, "/"), executable)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        # Where the script cannot travel on stdin (su, no pipelining) the module does it all.
        answer = self.look(args) if stdin_usable(self) else None
        if answer is not None:
            result.update(answer, changed=False)
            return result
        result.update(self._execute_module(self.MODULE, module_args=args, task_vars=task_vars))
        return result
