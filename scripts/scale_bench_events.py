"""A run's events, as scripts/scale_bench.py reads them: what ran where, and where the time went.

Every timed run of the benchmark goes through ansible-runner
(scripts/playbook_runner.py), which keeps its events (one JSON file each in
the run's artifacts directory, written as they happen: a run that fails or
is interrupted still leaves events that parse). From a run's events this
module takes:

  tasks per node   tasks that ran on the node (not skipped), counted per host
                   of the run (localhost, the controller's plays, left out);
                   the table shows the busiest node
  items per node   the same with a loop counted by the items that ran
  slowest tasks    the five task executions that took longest, from the
                   task's start to its last host's result
  changed          each host's changed count from the recap, and which tasks
                   changed (a no-op run must have none)

and cuts the events to what it reads (trim: the tests' fixtures), and says
where a run's time went, by module, role and play (profile): each task slot
from its start to the next one's, and the workers' time (each host's result
from its start to its end, a skipped one too: Ansible forks a worker per task
and host either way, and what that worker templates is the controller's
CPU). Only the standard library.
"""

from __future__ import annotations

import gzip
import json
import re
from datetime import datetime
from pathlib import Path

from runner_events import ITEM_EVENTS, RECAP, RESULT_EVENTS, TASK_START_EVENTS, recap, task_name

CONTROLLER = {"localhost"}
SLOWEST = 5


def _time(stamp: str) -> float:
    """ansible-runner's stamps: 2026-12-05T20:30:00.123456+00:00 (or ...Z)."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def read_events(path: Path) -> list[dict]:
    """A run's events in order: ansible-runner's artifacts directory (its
    ``artifacts/<ident>/job_events/*.json``, or that ``job_events`` directory itself), or a
    file of one event a line (``trim``'s output, gzipped or not). A run that was interrupted
    leaves fewer events, which still parse; a line cut short is skipped."""
    path = Path(path)
    if path.is_dir():
        files = [path] if path.name == "job_events" else sorted(path.glob("**/job_events"))
        events = []
        for job_events in files:
            for f in job_events.glob("*.json"):
                if f.name.endswith("-partial.json"):
                    continue
                try:
                    events.append(json.loads(f.read_text()))
                except ValueError:
                    continue
        return sorted(events, key=lambda e: e.get("counter", 0))
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", errors="replace") as f:
        return list(_events(f))


def _events(lines):
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut short by an interrupted run
        if isinstance(event, dict) and "event" in event:
            yield event


def parse_log(events) -> dict:
    """One run's events (ansible-runner's, in order) -> its tasks, per-host counts and recap.
    A task slot starts at its task-start event and ends at its last host result's end."""
    tasks: list[dict] = []
    current: dict[str, dict] = {}  # task uuid -> its latest start
    items: dict[tuple[str, str], int] = {}  # (task uuid, host) -> loop items that ran
    play = ""
    stats: dict = {}
    for event in events:
        kind, data = event.get("event"), event.get("event_data", {})
        if kind == "playbook_on_play_start":
            play = data.get("play", data.get("name", ""))
            continue
        if kind == "playbook_on_stats":
            stats = recap(data)
            continue
        uuid = data.get("task_uuid")
        if not uuid:
            continue
        if kind in TASK_START_EVENTS:
            start = _time(event["created"])
            entry = {"name": task_name(data), "play": play,
                     "path": data.get("task_path", ""), "start": start, "end": start, "hosts": {},
                     "action": data.get("task_action", "")}  # fmt: skip
            current[uuid] = entry
            tasks.append(entry)
            continue
        if kind in ITEM_EVENTS:
            if ITEM_EVENTS[kind] != "skipped":
                items[(uuid, data.get("host", ""))] = items.get((uuid, data.get("host", "")), 0) + 1
            continue
        if kind not in RESULT_EVENTS or uuid not in current:
            continue
        entry, host, res = current[uuid], data.get("host", ""), data.get("res") or {}
        entry["action"] = data.get("resolved_action") or entry["action"]
        loop = isinstance(res.get("results"), list)
        entry["hosts"][host] = {
            "status": RESULT_EVENTS[kind],
            "changed": bool(res.get("changed")),
            "items": items.pop((uuid, host), 0) if loop else None,
            # the worker's time on this host's result (events trimmed before 2026-12-06 lack its start)
            "seconds": (_time(data["end"]) - _time(data["start"])
                        if data.get("start") and data.get("end") else None),
        }  # fmt: skip
        if data.get("end"):
            entry["end"] = max(entry["end"], _time(data["end"]))
    return {"tasks": tasks, "stats": stats}


def _ran_on_node(host: str, result: dict) -> bool:
    """The task ran (not skipped) on a node, not on the controller."""
    return result["status"] in ("ok", "failed") and host not in CONTROLLER


def summarize(parsed: dict) -> dict:
    """Counts per node, the slowest tasks, what changed or failed."""
    per_node: dict[str, int] = {}
    items_per_node: dict[str, int] = {}
    changed_tasks: list[str] = []
    for t in parsed["tasks"]:
        for host, r in t["hosts"].items():
            if _ran_on_node(host, r):
                per_node[host] = per_node.get(host, 0) + 1
                ran = r["items"] if r["items"] is not None else 1
                items_per_node[host] = items_per_node.get(host, 0) + ran
            if r["changed"]:
                changed_tasks.append(f"{host}: {t['name']}")
    slowest = sorted(parsed["tasks"], key=lambda t: t["end"] - t["start"], reverse=True)[:SLOWEST]
    stats = parsed["stats"]
    return {
        "tasks_per_node": dict(sorted(per_node.items())),
        "items_per_node": dict(sorted(items_per_node.items())),
        "slowest": [{"name": t["name"], "seconds": round(t["end"] - t["start"], 2)} for t in slowest],
        "changed": {h: s.get("changed", 0) for h, s in sorted(stats.items())},
        "failed": {h: s.get("failures", 0) + s.get("unreachable", 0) for h, s in sorted(stats.items())},
        "changed_tasks": changed_tasks,
        "complete": bool(stats),
    }


def trim(events):
    """Each event cut to the keys parse_log reads (one JSON line each): the same parse, a
    fraction of the size (the tests' fixtures are real runs cut this way)."""
    keep_data = ("play", "name", "task", "role", "task_uuid", "task_path", "task_action", "resolved_action",
                 "host", "start", "end", *RECAP)  # fmt: skip
    for event in events:
        data = event.get("event_data", {})
        small = {k: data[k] for k in keep_data if k in data}
        res = data.get("res")
        if isinstance(res, dict):
            small["res"] = {"changed": bool(res.get("changed"))}
            if isinstance(res.get("results"), list):
                small["res"]["results"] = [{} for _ in res["results"]]
        keep = {"event": event.get("event"), "counter": event.get("counter"), "created": event.get("created"),
                "event_data": small}  # fmt: skip
        yield json.dumps(keep, sort_keys=True, separators=(",", ":"))


def _role(task: dict) -> str:
    """roles/<role>/tasks/x.yml:12 -> <role>; else the "<role> : " of its name, or the playbook's name."""
    m = re.search(r"(?:^|/)roles/([^/]+)/", task.get("path", ""))
    if m:
        return m.group(1)
    if " : " in task["name"]:
        return task["name"].split(" : ", 1)[0]
    return Path(task.get("path", "").split(":")[0]).name or "?"


def profile(parsed: dict, top: int = 15) -> str:
    """A run's time by module, role and play, and its slowest task slots (markdown)."""
    tasks = sorted(parsed["tasks"], key=lambda t: t["start"])
    if not tasks:
        return "no task in the log\n"
    slots = []
    for t, nxt in zip(tasks, [*tasks[1:], None], strict=True):
        seconds = (nxt["start"] if nxt else t["end"]) - t["start"]
        ran = any(_ran_on_node(h, r) for h, r in t["hosts"].items())
        slots.append({**t, "seconds": max(seconds, 0.0), "ran": ran})
    total = sum(s["seconds"] for s in slots)
    idle = [s for s in slots if not s["ran"]]
    out = [f"{len(slots)} task slots, {total:.1f} s from the first task's start to the last one's end; "
           f"{len(idle)} slots ran on no node (skipped, or controller-only), "
           f"{sum(s['seconds'] for s in idle):.1f} s of it.", ""]
    for title, key in (("module", lambda s: s["action"] or "?"), ("role", _role),
                       ("play", lambda s: s["play"])):
        groups: dict[str, list] = {}
        for s in slots:
            groups.setdefault(key(s), []).append(s)
        rows = sorted(groups.items(), key=lambda kv: -sum(s["seconds"] for s in kv[1]))[:top]
        out += [f"| {title} | slots | seconds | per slot |", "|---|---|---|---|"]
        for name, group in rows:
            sec = sum(s["seconds"] for s in group)
            out.append(f"| {name} | {len(group)} | {sec:.1f} | {sec / len(group):.2f} |")
        out.append("")
    out += ["| slowest slots | role | module | seconds |", "|---|---|---|---|"]
    for s in sorted(slots, key=lambda s: -s["seconds"])[:top]:
        out.append(f"| {s['name']} | {_role(s)} | {s['action']} | {s['seconds']:.2f} |")
    return "\n".join(out + _workers(tasks, top)) + "\n"


def _workers(tasks: list[dict], top: int) -> list[str]:
    """The workers' time by module, and the tasks that took most of it: every host's result
    from its start to its end, skipped ones included (their worker evaluated the condition).
    On a host that shares its cores this is a worker's CPU and its waits together."""
    results = [(t, r) for t in tasks for r in t["hosts"].values() if r.get("seconds") is not None]
    if not results:
        return ["", "(these events carry no per-host start: no worker time)"]
    total = sum(r["seconds"] for _, r in results)
    skipped = sum(r["seconds"] for _, r in results if r["status"] == "skipped")
    out = ["", f"{len(results)} host results, {total:.1f} s of the workers' time "
           f"({skipped:.1f} s of it on skipped ones).", "",
           "| module | host results | worker seconds | per result |", "|---|---|---|---|"]  # fmt: skip
    by_module: dict[str, list[float]] = {}
    by_task: dict[int, tuple[dict, list[float]]] = {}
    for t, r in results:
        by_module.setdefault(t["action"] or "?", []).append(r["seconds"])
        by_task.setdefault(id(t), (t, []))[1].append(r["seconds"])
    for name, secs in sorted(by_module.items(), key=lambda kv: -sum(kv[1]))[:top]:
        out.append(f"| {name} | {len(secs)} | {sum(secs):.1f} | {1000 * sum(secs) / len(secs):.0f} ms |")
    out += ["", "| most worker time | module | host results | worker seconds |", "|---|---|---|---|"]
    for t, secs in sorted(by_task.values(), key=lambda x: -sum(x[1]))[:top]:
        out.append(f"| {t['name']} | {t['action']} | {len(secs)} | {sum(secs):.2f} |")
    return out

