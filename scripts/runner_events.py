"""ansible-runner's event vocabulary, read the same way by everything that reads events
(scripts/playbook_runner.py as a run ends, scripts/scale_bench_events.py from an artifacts
directory): which kinds are a host's result, a loop item's or a task starting, a task's name
as Ansible prints it, and the recap. Only the standard library."""

from __future__ import annotations

# A host's final result of a task, and how it ended.
RESULT_EVENTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_skipped": "skipped",
    "runner_on_unreachable": "unreachable",
}
# A loop item's result, before its task's final one.
ITEM_EVENTS = {
    "runner_item_on_ok": "ok",
    "runner_item_on_failed": "failed",
    "runner_item_on_skipped": "skipped",
}
TASK_START_EVENTS = {"playbook_on_task_start", "playbook_on_handler_task_start"}
# The recap's counters, as the stats event names them -> as Ansible's PLAY RECAP prints them.
RECAP = {"ok": "ok", "changed": "changed", "dark": "unreachable", "failures": "failures",
         "skipped": "skipped", "rescued": "rescued", "ignored": "ignored"}  # fmt: skip


def task_name(data: dict) -> str:
    """A task's name as Ansible prints it: "role : task" inside a role (events carry the two apart)."""
    task, role = data.get("task", ""), data.get("role", "")
    return f"{role} : {task}" if role and not task.startswith(f"{role} : ") else task


def recap(stats: dict) -> dict[str, dict[str, int]]:
    """The playbook_on_stats event's data -> {host: {ok, changed, unreachable, failures, skipped,
    rescued, ignored}}, every host any counter names."""
    hosts = {h for key in RECAP for h in (stats.get(key) or {})}
    return {
        h: {mine: int((stats.get(key) or {}).get(h, 0)) for key, mine in RECAP.items()} for h in sorted(hosts)
    }
