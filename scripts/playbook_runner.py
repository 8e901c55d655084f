"""Run Ansible the way the project's scripts and tests do: through ansible-runner's Python API.

ansible-runner starts ansible-playbook (or `ansible` for one module) and turns its output into
an event stream: one event per play, task and host result, each with its task, host, result
and, for host results, its start, end and duration. What we read from a run comes from those
events (results, failures, recap, per-task timing), never from parsing Ansible's screen
output. Each run's artifacts directory (``job_events/``, ``stdout``, ``rc``, ``status``,
``command``) is kept where the caller says, or thrown away with a temporary directory.

As a command (``make demo``, ``make sandbox``, the scale benchmark)::

    python scripts/playbook_runner.py [--artifacts DIR] [--quiet] PLAYBOOK [ansible-playbook options]

shows Ansible's usual output as it runs, then the slowest tasks and every failure by node, and
exits with ansible-playbook's status. ``DIR`` (default: ``reports/runs/<UTC time>-<playbook>``)
keeps the run's artifacts beside the reports.

ansible-runner's own choices that we undo: it turns host key checking off unless the
environment sets it (we keep Ansible's default, on); everything else it sets (its stdout
callback, which wraps the configured one, and no retry files) changes nothing a run does.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import ansible_runner
from ansible_runner.exceptions import AnsibleRunnerException
from runner_events import ITEM_EVENTS, RECAP, RESULT_EVENTS, recap, task_name

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # ansible-playbook and ansible beside this Python (the venv)
# The fact cache ansible.cfg names (memory), as a plain ansible-playbook run has
# it. ansible-runner's default ("jsonfile" in the artifacts) makes Ansible read
# and decode a node's facts file for every task and every hostvars lookup:
# a third of the main process's variable work in a no-op site.yml, and facts
# no later run reads (each run has artifacts of its own).
FACT_CACHE = "memory"


@dataclass
class Run:
    """What a finished run left: its status, exit code, Ansible's output and its events."""

    rc: int
    status: str
    stdout: str
    events: list[dict] = field(repr=False)
    elapsed: float
    artifact_dir: Path | None = None

    @property
    def returncode(self) -> int:
        return self.rc

    def results(self, task: str | None = None, host: str | None = None, items: bool = False) -> list[dict]:
        """Each host's result (``res``) of the tasks named ``task`` (role prefix aside; every
        task when None), on ``host`` (every host when None), in event order; with ``items``,
        one per loop item instead of the loop's summary. Each result says ``failed`` and
        ``skipped`` (from the event's kind: ansible-core 2.19+ leaves them out of the result)
        and carries ``_host``, ``_task`` and ``_event`` (runner_on_ok, ..._failed, ...)."""
        kinds = ITEM_EVENTS if items else RESULT_EVENTS
        out = []
        for event in self.events:
            data = event.get("event_data", {})
            if event.get("event") not in kinds:
                continue
            name = task_name(data)
            if task is not None and task not in (name, name.split(" : ", 1)[-1]):
                continue
            if host is not None and data.get("host") != host:
                continue
            res = dict(data.get("res", {}))
            # Which way it ended is the event's kind (the result itself may not say it).
            kind = event["event"]
            res.setdefault("failed", kind.endswith("_failed"))
            res.setdefault("skipped", kind.endswith("_skipped"))
            if kind.endswith("_unreachable"):
                res.setdefault("unreachable", True)
            out.append({**res, "_host": data.get("host"), "_task": name, "_event": kind})
        return out

    def result(self, task: str, host: str = "localhost") -> dict:
        """The one result of ``task`` on ``host``; fails unless there is exactly one."""
        found = self.results(task, host)
        if len(found) != 1:
            raise AssertionError(f"{len(found)} results of {task!r} on {host}:\n{self.stdout[-3000:]}")
        return found[0]

    def task_names(self) -> list[str]:
        """The tasks that started, in order (role prefix kept, as Ansible prints them)."""
        return [
            task_name(e["event_data"]) for e in self.events if e.get("event") == "playbook_on_task_start"
        ]

    def stats(self) -> dict:
        """The recap: {"ok"|"changed"|"failures"|"dark"|"skipped"|"rescued"|"ignored": {host: n}}."""
        for event in reversed(self.events):
            if event.get("event") == "playbook_on_stats":
                return event.get("event_data", {})
        return {}

    def host_stats(self, host: str = "localhost") -> dict[str, int]:
        """One host's recap line: ok, changed, unreachable, failures, skipped, rescued, ignored."""
        return recap(self.stats()).get(host, dict.fromkeys(RECAP.values(), 0))

    def recap(self) -> dict[str, dict[str, int]]:
        """Every host's recap line: {host: host_stats(host)}."""
        return recap(self.stats())

    def changed(self) -> int:
        """How many task results changed something, over all hosts (the recap's changed)."""
        return sum((self.stats().get("changed") or {}).values())

    def changes(self) -> list[tuple[str, str]]:
        """(host, task) of every result that changed something, in event order (a loop once)."""
        return [(r["_host"], r["_task"]) for r in self.results() if r.get("changed")]

    def failures(self) -> list[tuple[str, str, str]]:
        """(host, task, message) of every failed or unreachable result not ignored; a failure a
        block rescued is listed too (the events do not say which were rescued)."""
        out = []
        for event in self.events:
            data = event.get("event_data", {})
            if event.get("event") not in ("runner_on_failed", "runner_on_unreachable") or data.get(
                "ignore_errors"
            ):
                continue
            res = data.get("res", {})
            msg = res.get("msg") or res.get("stderr") or res.get("stdout") or ""
            out.append((data.get("host", "?"), task_name(data), str(msg)))
        return out

    def task_times(self) -> list[tuple[str, str, float]]:
        """(task, host, seconds) of every host result, from the events' durations."""
        return [
            (
                task_name(e["event_data"]),
                e["event_data"].get("host", ""),
                float(e["event_data"]["duration"]),
            )
            for e in self.events
            if e.get("event") in RESULT_EVENTS and e.get("event_data", {}).get("duration") is not None
        ]

    def tail(self, chars: int = 6000) -> str:
        """The end of Ansible's output, for an assertion's message."""
        return self.stdout[-chars:]


def _env(extra: dict[str, str] | None) -> dict[str, str]:
    env = dict(extra or {})
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', os.environ.get('PATH', ''))}"
    # ansible-runner turns host key checking off unless told: keep Ansible's default.
    env.setdefault("ANSIBLE_HOST_KEY_CHECKING", os.environ.get("ANSIBLE_HOST_KEY_CHECKING", "True"))
    return env


def _never() -> bool:
    """The cancel callback of a library call: ansible-runner's own would take this process's
    SIGINT and SIGTERM handlers for good."""
    return False


def _finish(runner, t0: float, keep: Path | None, timeout: int | None) -> Run:
    elapsed = time.monotonic() - t0
    try:
        with runner.stdout as f:
            stdout = f.read().replace("\r\n", "\n")
    except (AnsibleRunnerException, OSError):  # no stdout file: the command never started
        stdout = ""
    run = Run(
        rc=int(runner.rc if runner.rc is not None else 1),
        status=str(runner.status),
        stdout=stdout,
        events=list(runner.events),
        elapsed=elapsed,
        artifact_dir=keep and Path(runner.config.artifact_dir),
    )
    if run.status == "timeout":
        raise TimeoutError(f"ansible did not finish within {timeout} s; its last output:\n{run.tail(3000)}")
    return run


def run_playbook(
    playbook: str | Path,
    *args: str,
    inventory: str | Path | Iterable[str | Path] | None = None,
    env: dict[str, str] | None = None,
    timeout: int | None = None,
    artifacts: str | Path | None = None,
    quiet: bool = True,
    event_handler: Callable[[dict], bool] | None = None,
    handle_signals: bool = False,
) -> Run:
    """Run ``ansible-playbook [-i inventory ...] playbook args`` from the repository root
    through ansible-runner. ``env``: variables over this process's environment. ``timeout``:
    seconds before the run is stopped (TimeoutError). ``artifacts``: where the run's artifacts
    stay (a temporary directory removed afterwards when None). ``quiet``: False shows Ansible's
    output as it runs. ``event_handler``: called with each event as it comes (it must return
    True for the event to be kept). ``handle_signals``: let ansible-runner take SIGINT and SIGTERM for
    this process (they then cancel the run; it never gives them back), as a command does; a
    library caller keeps its own."""
    sources = (
        [] if inventory is None else [inventory] if isinstance(inventory, str | Path) else list(inventory)
    )
    argv = [a for src in sources for a in ("-i", str(src))] + [str(a) for a in args]
    with tempfile.TemporaryDirectory(prefix="mnc-run-") as tmp:
        private = Path(artifacts) if artifacts else Path(tmp)
        private.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        runner = ansible_runner.run(
            private_data_dir=str(private),
            project_dir=str(ROOT),
            playbook=str(playbook),
            cmdline=shlex.join(argv),
            envvars=_env(env),
            quiet=quiet,
            timeout=timeout,
            event_handler=event_handler,
            settings={"suppress_env_files": True},
            fact_cache_type=FACT_CACHE,
            **({} if handle_signals else {"cancel_callback": _never}),
        )
        return _finish(runner, t0, private if artifacts else None, timeout)


def run_module(
    module: str,
    module_args: str,
    *args: str,
    host_pattern: str = "localhost",
    inventory: str = "localhost,",
    env: dict[str, str] | None = None,
    timeout: int | None = None,
) -> Run:
    """Run one module with `ansible` (``host_pattern -m module -a module_args args``)."""
    with tempfile.TemporaryDirectory(prefix="mnc-run-") as tmp:
        t0 = time.monotonic()
        runner = ansible_runner.run(
            private_data_dir=tmp,
            host_pattern=host_pattern,
            module=module,
            module_args=module_args,
            cmdline=shlex.join(["-i", inventory, *args]),
            envvars=_env(env),
            quiet=True,
            timeout=timeout,
            settings={"suppress_env_files": True},
            fact_cache_type=FACT_CACHE,
            cancel_callback=_never,
        )
        return _finish(runner, t0, None, timeout)


def summary(run: Run, slowest: int = 10) -> str:
    """The slowest tasks (the slowest host's time, which host, on how many) and every failure by node."""
    by_task: dict[str, list[tuple[float, str]]] = {}
    for task, host, seconds in run.task_times():
        by_task.setdefault(task, []).append((seconds, host))
    top = sorted(by_task.items(), key=lambda kv: -max(s for s, _ in kv[1]))[:slowest]
    lines = [
        f"{run.status}: rc {run.rc} in {run.elapsed:.1f} s, {len(by_task)} tasks, {run.changed()} changed"
    ]
    if top:
        lines.append("slowest tasks (the slowest host's time; where; on how many hosts it ran):")
        for task, times in top:
            seconds, host = max(times)
            ran_on = len({h for _, h in times})
            hosts = f"{ran_on} hosts" if ran_on > 1 else "1 host"
            lines.append(f"  {seconds:8.1f} s  {task}  ({host}; {hosts})")
    # A run that succeeded rescued every failure it had (a block's rescue): say so, not FAILED.
    said = "FAILED" if run.rc else "failed, then rescued:"
    for host, task, msg in run.failures():
        first = msg.strip().splitlines()[0] if msg.strip() else "(no message)"
        lines.append(f"{said} {host}: {task}: {first}")
    if run.artifact_dir:
        lines.append(f"events and output: {run.artifact_dir}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--artifacts", help="where the run's artifacts stay (default: reports/runs/<time>-<playbook>)"
    )
    parser.add_argument("--quiet", action="store_true", help="only the summary, not Ansible's output")
    parser.add_argument(
        "--summary-json",
        metavar="FILE",
        help="also write the run's outcome there as JSON: rc, status, recap by host, the "
        "(host, task) of every change and the tasks that started, in order",
    )
    parser.add_argument("playbook")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="ansible-playbook options")
    a = parser.parse_args(argv)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    artifacts = Path(a.artifacts or ROOT / "reports" / "runs" / f"{stamp}-{Path(a.playbook).stem}")
    # Ansible runs on ansible-runner's terminal, so it would colour its output even where ours
    # goes to a file or a pipe: colour only what a person reads on a terminal.
    env = {} if sys.stdout.isatty() else {"ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}
    run = run_playbook(a.playbook, *a.args, artifacts=artifacts, quiet=a.quiet, handle_signals=True, env=env)
    print("\n" + summary(run), flush=True)
    if a.summary_json:
        outcome = {
            "rc": run.rc,
            "status": run.status,
            "recap": run.recap(),
            "changes": run.changes(),
            "tasks": run.task_names(),
            "artifacts": str(artifacts),
        }
        Path(a.summary_json).write_text(json.dumps(outcome, indent=1) + "\n")
    return run.rc


if __name__ == "__main__":
    sys.exit(main())
