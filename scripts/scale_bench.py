"""The scale benchmark's bookkeeping (scripts/scale-bench.sh runs the sandboxes).

Every timed run of the benchmark goes through ansible-runner
(scripts/playbook_runner.py). This command records each run: what its events
say (tasks and loop items per node, the slowest tasks, what changed:
scripts/scale_bench_events.py) and what the shell script measured around it
(the controller's and each node's CPU seconds: scripts/scale_bench_cpu.py),
one JSON line per run; and it writes the report of the recorded runs, the
table and the plot (scripts/scale_bench_report.py).

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
import json
import os
import sys
from pathlib import Path

from scale_bench_cpu import controller_cpu, node_cpu
from scale_bench_events import parse_log, profile, read_events, summarize, trim
from scale_bench_report import TITLES, busiest, cpu_cells, markdown, plot, read_records


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
          f"{busiest(s['tasks_per_node'])}, changed {sum(s['changed'].values())}, node CPU (mean / busiest) "
          f"{' s, controller CPU '.join(cpu_cells(record)[:2])} s, load {record['load']}")
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
