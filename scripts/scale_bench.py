"""The scale benchmark's bookkeeping (scripts/scale-bench.sh runs the sandboxes).

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

and, from what the shell script measured around the run:

  controller CPU   user + system seconds of ansible-runner, ansible-playbook
                   and the processes they waited for (bash's `times` in the
                   subshell that ran them)
  node CPU         each node's container's CPU seconds during the run (its
                   cgroup's counter before and after): the table shows the mean
                   over the nodes and the busiest one, so work that grows with
                   N on every node, or on one (a launcher), shows there

Subcommands (the shell script calls them; only the standard library is
needed, and matplotlib for the PNG):

LOG is a run's artifacts directory, or a file of its events one a line
(what trim writes; gzipped or not).

  record  --log LOG --run NAME --n N --wall S [--cpus C] [--controller-cpu TIMES]
          [--node-cpu BEFORE AFTER] [--expect-unchanged] RESULTS
          summarize one run, append it to RESULTS (JSON lines), print one
          line; exit 1 when --expect-unchanged and something changed or failed
  report  RESULTS OUTDIR
          write OUTDIR/scale.md (the table) and OUTDIR/scale.png (time vs N),
          print the table
  trim    LOG
          the events, one a line, each cut to what record reads (a fixture
          that parses exactly as the full run does)
  profile LOG [--top K]
          where a run's time went: each task slot costs from its start to the
          next slot's start (the linear strategy runs one slot at a time), summed
          by module (action), by role and by play, with the slowest slots and
          the share of slots that ran on no node (skipped or controller-only)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
from datetime import datetime
from pathlib import Path

# ansible-runner's event kinds: a host's result of a task, a loop item's, a task starting.
RESULT_EVENTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_skipped": "skipped",
    "runner_on_unreachable": "unreachable",
}
ITEM_EVENTS = {
    "runner_item_on_ok": "ok",
    "runner_item_on_failed": "failed",
    "runner_item_on_skipped": "skipped",
}
START_EVENTS = {"playbook_on_task_start", "playbook_on_handler_task_start"}
CONTROLLER = {"localhost"}
SLOWEST = 5
# The runs the table shows, in its order; the others (sandbox, prepare,
# converge) are recorded but only the benchmark's subject is tabled.
TABLED = ["network-cold", "verify-cold", "noop"]
TITLES = {
    "sandbox": "sandbox up",
    "prepare": "stages before network, cold",
    "network-cold": "network stage, cold",
    "middle": "chainer + scheduler, cold",
    "verify-cold": "verify stage, cold",
    "converge": "site.yml converge",
    "noop": "site.yml no-op (2nd run)",
}
REFERENCE_N = 3


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
            names = {"ok": "ok", "changed": "changed", "failures": "failures", "dark": "unreachable"}
            hosts = {h for key in names for h in (data.get(key) or {})}
            stats = {h: {mine: (data.get(key) or {}).get(h, 0) for key, mine in names.items()} for h in hosts}
            continue
        uuid = data.get("task_uuid")
        if not uuid:
            continue
        if kind in START_EVENTS:
            start = _time(event["created"])
            role, name = data.get("role", ""), data.get("task", "")
            entry = {"name": f"{role} : {name}" if role else name, "play": play,
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
        }
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


def controller_cpu(text: str) -> float:
    """bash's `times` (the shell's own line, then its children's: "0m1.500s 0m0.250s")
    -> the children's user + system seconds."""
    lines = [x.split() for x in text.splitlines() if x.strip()]
    if len(lines) != 2 or any(len(x) != 2 for x in lines):
        raise ValueError(f"not the output of bash's times: {text!r}")
    total = 0.0
    for field in lines[1]:
        m = re.fullmatch(r"(\d+)m(\d+(?:\.\d+)?)s", field)
        if not m:
            raise ValueError(f"not the output of bash's times: {text!r}")
        total += int(m.group(1)) * 60 + float(m.group(2))
    return round(total, 2)


def node_cpu(before: str, after: str) -> dict[str, float]:
    """Two readings of "name seconds" lines -> each node's CPU seconds in between
    (a node in one reading only, or whose counter went back -- restarted -- is left out)."""
    def read(text):
        out = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = float(parts[1])
        return out
    a, b = read(before), read(after)
    return {h: round(b[h] - a[h], 2) for h in sorted(a.keys() & b.keys()) if b[h] >= a[h]}


def cpu_floor(r: dict) -> float | None:
    """The shortest wall time the host could give the run: all its CPU seconds (the
    controller's and every node's) over the host's CPUs. A wall time near it means the
    run waited for the host's CPUs, not for anything the code does in sequence."""
    nodes, ctl, cpus = r.get("node_cpu_s"), r.get("controller_cpu_s"), r.get("host_cpus")
    if not nodes or ctl is None or not cpus:
        return None
    return (ctl + sum(nodes.values())) / cpus


def _node_cpu_mean(r: dict) -> float | None:
    nodes = r.get("node_cpu_s")
    return sum(nodes.values()) / len(nodes) if nodes else None


def _cpu_cells(r: dict) -> tuple[str, str, str]:
    mean = _node_cpu_mean(r)
    node = "-" if mean is None else f"{mean:.1f} / {max(r['node_cpu_s'].values()):.1f}"
    ctl = r.get("controller_cpu_s")
    floor = cpu_floor(r)
    return node, ("-" if ctl is None else f"{ctl:.1f}"), ("-" if floor is None else f"{floor:.1f}")


def ratios(records: list[dict], reference: int = REFERENCE_N) -> dict[tuple[int, str], float | None]:
    """(N, run) -> wall time / the same run's wall time at N = reference (None without one)."""
    ref = {r["run"]: r["wall_s"] for r in records if r["n"] == reference}
    return {(r["n"], r["run"]): (r["wall_s"] / ref[r["run"]] if ref.get(r["run"]) else None) for r in records}


def _busiest(counts: dict[str, int]) -> str:
    return str(max(counts.values())) if counts else "-"


def markdown(records: list[dict]) -> str:
    ratio = ratios(records)
    rows = sorted((r for r in records if r["run"] in TABLED), key=lambda r: (TABLED.index(r["run"]), r["n"]))
    cpus = sorted({str(r.get("cpus") or "no cap") for r in records})
    out = [
        "# Scale benchmark",
        "",
        f"CPU share per node (podman --cpus): {', '.join(cpus)}. "
        f"Host: {records[0].get('host_cpus', '?')} CPUs when it ran. "
        "Tasks and loop items per node: the busiest node. "
        f"Ratio: wall time over the same run's at N = {REFERENCE_N}. "
        "Node CPU: CPU seconds a node's container used during the run, mean over the nodes / "
        "the busiest node. Controller CPU: the user + system seconds of ansible-runner and "
        "ansible-playbook ("
        "workers and ssh clients included). CPU floor: the controller's and all nodes' CPU "
        "seconds over the host's CPUs, the shortest wall time this host could give the run. "
        "Load: the host's 1-minute load average at the end of the run.",
        "",
        f"| N | run | wall (s) | ratio to N={REFERENCE_N} | tasks per node | loop items per node | "
        "node CPU (s) | controller CPU (s) | CPU floor (s) | load | five slowest tasks (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        q = ratio[(r["n"], r["run"])]
        slow = "; ".join(f"{s['name']} ({s['seconds']:.1f})" for s in r["slowest"]).replace("|", "\\|")
        out.append(
            f"| {r['n']} | {TITLES[r['run']]} | {r['wall_s']:.1f} | {'-' if q is None else f'{q:.2f}x'} | "
            f"{_busiest(r['tasks_per_node'])} | {_busiest(r['items_per_node'])} | "
            f"{' | '.join(_cpu_cells(r))} | {r.get('load', '-')} | {slow} |"
        )
    other = [r for r in records if r["run"] not in TABLED]
    if other:
        out += ["", "Other steps (not the benchmark's subject):", ""]
        out += ["| N | step | wall (s) | node CPU (s) | controller CPU (s) | CPU floor (s) |",
                "|---|---|---|---|---|---|"]
        out += [f"| {r['n']} | {TITLES.get(r['run'], r['run'])} | {r['wall_s']:.1f} | "
                f"{' | '.join(_cpu_cells(r))} |" for r in other]
    return "\n".join(out) + "\n"


def plot(records: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, cx) = plt.subplots(1, 2, figsize=(11, 5.6))
    cpus = ", ".join(sorted({str(r.get("cpus") or "no cap") for r in records}))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for run, colour in zip(TABLED, colours, strict=False):
        runs = sorted((r for r in records if r["run"] == run), key=lambda r: r["n"])
        if runs:
            ax.plot([r["n"] for r in runs], [r["wall_s"] for r in runs], marker="o", color=colour,
                    label=TITLES[run])
        nodes = [(r["n"], _node_cpu_mean(r)) for r in runs if r.get("node_cpu_s")]
        if nodes:
            cx.plot([p[0] for p in nodes], [p[1] for p in nodes], marker="o", color=colour,
                    label=f"{TITLES[run]}: a node")
        ctl = [(r["n"], r["controller_cpu_s"] / r["n"]) for r in runs
               if r.get("controller_cpu_s") is not None]
        if ctl:
            cx.plot([p[0] for p in ctl], [p[1] for p in ctl], marker="s", linestyle="--", color=colour,
                    label=f"{TITLES[run]}: controller / N")
    ax.set_title(f"wall time ({cpus} CPU per node)")
    ax.set_ylabel("wall time (s)")
    cx.set_title("CPU time per node")
    cx.set_ylabel("CPU seconds")
    for a in (ax, cx):
        a.set_xticks(sorted({r["n"] for r in records}))
        a.set_xlabel("nodes (N)")
        a.set_ylim(bottom=0)
        a.grid(True, alpha=0.3)
        if a.get_lines():
            # below the axes: the lines stay readable wherever they run
            a.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    fig.suptitle("mncluster scale benchmark")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def trim(events):
    """Each event cut to the keys parse_log reads (one JSON line each): the same parse, a
    fraction of the size (the tests' fixtures are real runs cut this way)."""
    keep_data = ("play", "name", "task", "role", "task_uuid", "task_path", "task_action", "resolved_action",
                 "host", "end", "ok", "changed", "failures", "dark")  # fmt: skip
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
    return "\n".join(out) + "\n"


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "-"


def cmd_record(a) -> int:
    s = summarize(parse_log(read_events(a.log)))
    record = {"n": a.n, "run": a.run, "wall_s": round(a.wall, 1), "cpus": a.cpus, "load": _load(),
              "host_cpus": os.cpu_count(), "log": str(a.log), **s}
    if a.controller_cpu:
        record["controller_cpu_s"] = controller_cpu(a.controller_cpu.read_text())
    if a.node_cpu:
        record["node_cpu_s"] = node_cpu(a.node_cpu[0].read_text(), a.node_cpu[1].read_text())
    with open(a.results, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
    print(f"  {TITLES.get(a.run, a.run)} at N={a.n}: {a.wall:.1f} s, tasks per node "
          f"{_busiest(s['tasks_per_node'])}, changed {sum(s['changed'].values())}, node CPU (mean / busiest) "
          f"{' s, controller CPU '.join(_cpu_cells(record)[:2])} s, load {record['load']}")
    if a.expect_unchanged:
        bad = []
        if not s["complete"]:
            bad.append("the run has no recap (it did not finish)")
        if any(s["failed"].values()):
            bad.append(f"failed/unreachable: {s['failed']}")
        if s["changed_tasks"]:
            bad.append("changed (a no-op run must report changed=0): " + "; ".join(s["changed_tasks"]))
        if bad:
            print("FAIL: " + " | ".join(bad), file=sys.stderr)
            return 1
    return 0


def cmd_report(a) -> int:
    records = read_records(a.results)
    if not records:
        print(f"no runs recorded in {a.results}", file=sys.stderr)
        return 1
    a.outdir.mkdir(parents=True, exist_ok=True)
    text = markdown(records)
    (a.outdir / "scale.md").write_text(text)
    plot(records, a.outdir / "scale.png")
    print(text, end="")
    print(f"\nwritten: {a.outdir / 'scale.md'}, {a.outdir / 'scale.png'}")
    return 0


def cmd_trim(a) -> int:
    for line in trim(read_events(a.log)):
        print(line)
    return 0


def cmd_profile(a) -> int:
    print(profile(parse_log(read_events(a.log)), a.top), end="")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--log", type=Path, required=True)
    r.add_argument("--run", required=True, choices=sorted(TITLES))
    r.add_argument("--n", type=int, required=True)
    r.add_argument("--wall", type=float, required=True)
    r.add_argument("--cpus", default="")
    r.add_argument("--controller-cpu", type=Path, help="bash's `times` output of the subshell that ran it")
    r.add_argument("--node-cpu", type=Path, nargs=2, metavar=("BEFORE", "AFTER"),
                   help='"name seconds" lines per node, read before and after the run')
    r.add_argument("--expect-unchanged", action="store_true")
    r.add_argument("results", type=Path)
    r.set_defaults(func=cmd_record)
    s = sub.add_parser("report")
    s.add_argument("results", type=Path)
    s.add_argument("outdir", type=Path)
    s.set_defaults(func=cmd_report)
    t = sub.add_parser("trim")
    t.add_argument("log", type=Path)
    t.set_defaults(func=cmd_trim)
    f = sub.add_parser("profile")
    f.add_argument("log", type=Path)
    f.add_argument("--top", type=int, default=15)
    f.set_defaults(func=cmd_profile)
    a = p.parse_args(argv)
    return a.func(a)


if __name__ == "__main__":
    sys.exit(main())
