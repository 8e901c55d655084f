"""scripts/scale_bench.py (and its scale_bench_*.py) on real runs, and scripts/scale-bench.sh's refusals.

The fixtures are three runs of scripts/scale-bench.sh at N = 1 (2 CPUs per
node, 2026-12-05), ansible-runner's events cut with `scale_bench.py trim`
(each event reduced to the keys the summary reads): the network stage cold,
the verify stage cold and the no-op site.yml. Their recaps say how many
tasks ran (ok) and changed on the node, so the counts here are checked
against Ansible's own.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest
import scale_bench as sb
import scale_bench_cpu as cpu
import scale_bench_events as ev
import scale_bench_report as rep

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "unit" / "fixtures"
NODE = "mnc-scale1"


def fixture(run: str) -> Path:
    return FIXTURES / f"scale-bench-n1-{run}.events.jsonl.gz"


def lines(run: str) -> list[str]:
    with gzip.open(fixture(run), "rt") as f:
        return f.read().splitlines()


def events(run: str) -> list[dict]:
    return ev.read_events(fixture(run))


def summary(run: str) -> dict:
    return ev.summarize(ev.parse_log(events(run)))


def recap(run: str) -> dict:
    """The recap as ansible-runner's stats event has it: {"ok": {host: n}, "failures": ...}."""
    return next(e for e in events(run) if e["event"] == "playbook_on_stats")["event_data"]


@pytest.mark.parametrize(
    ("run", "tasks", "items", "changed"),
    [("network-cold", 85, 96, 21), ("verify-cold", 20, 34, 2), ("noop", 368, 398, 0)],
)
def test_tasks_per_node_agree_with_the_recap(run, tasks, items, changed):
    s = summary(run)
    # Only the node: the controller's plays (localhost) are not per-node work.
    assert s["tasks_per_node"] == {NODE: tasks}
    assert recap(run)["ok"][NODE] + recap(run)["failures"].get(NODE, 0) == tasks
    assert recap(run)["changed"].get(NODE, 0) == changed
    # A loop counts its items that ran (ssh_mesh's per-peer loops show here).
    assert s["items_per_node"] == {NODE: items}
    assert s["changed"][NODE] == changed == len([t for t in s["changed_tasks"] if t.startswith(NODE)])
    assert s["complete"] and not any(s["failed"].values())


def test_the_five_slowest_tasks_of_the_noop_run():
    slowest = summary("noop")["slowest"]
    assert slowest == [
        {"name": "chainer : Run the ChainerMN smoke test on 2 ranks (naive)", "seconds": 0.8},
        {"name": "Gathering Facts", "seconds": 0.74},
        {"name": "chainer : Read the installed versions as the MPI user", "seconds": 0.71},
        {"name": "verify : Read the Python, Chainer and MPI versions", "seconds": 0.69},
        {"name": "slurm : Enable and start munge", "seconds": 0.64},
    ]


def test_the_slowest_tasks_of_the_network_stage_and_what_it_changed():
    s = summary("network-cold")
    assert [t["name"] for t in s["slowest"]][:2] == [
        "shared_fs : Install the NFS server",
        "bonding : Install ifupdown and the bonding helpers",
    ]
    assert s["slowest"][0]["seconds"] == 3.67
    assert f"{NODE}: ssh_mesh : Create the MPI user's key pair" in s["changed_tasks"]


def test_trim_changes_nothing_the_summary_reads(tmp_path):
    for run in ("network-cold", "verify-cold", "noop"):
        trimmed = tmp_path / f"{run}.jsonl"
        trimmed.write_text("\n".join(ev.trim(events(run))) + "\n")
        assert ev.summarize(ev.parse_log(ev.read_events(trimmed))) == summary(run)


def test_an_artifacts_directory_reads_as_its_events(tmp_path):
    """What ansible-runner leaves (artifacts/<ident>/job_events/<counter>-<uuid>.json, and a
    -partial.json it did not finish) reads as the same events, in counter order."""
    job_events = tmp_path / "artifacts" / "some-ident" / "job_events"
    job_events.mkdir(parents=True)
    for e in reversed(events("verify-cold")):
        (job_events / f"{e['counter']}-x.json").write_text(json.dumps(e))
    (job_events / "x-partial.json").write_text("{")
    assert ev.summarize(ev.parse_log(ev.read_events(tmp_path))) == summary("verify-cold")


def test_an_interrupted_run_still_parses_and_is_not_a_noop(tmp_path):
    cut = "\n".join(lines("noop"))[: 100_000]  # ends mid-line, no recap
    log = tmp_path / "cut.jsonl"
    log.write_text(cut + "\nPLAY RECAP (not json)\n")
    s = ev.summarize(ev.parse_log(ev.read_events(log)))
    assert not s["complete"] and s["tasks_per_node"][NODE] < 368


def records(walls: dict[int, float], run: str = "noop") -> list[dict]:
    s = summary(run)
    return [{"n": n, "run": run, "wall_s": w, "cpus": "2", "load": "0.5", "host_cpus": 2, **s}
            for n, w in walls.items()]


def test_ratio_to_three_nodes():
    r = rep.ratios(records({1: 40.0, 3: 50.0, 16: 70.0}) + records({3: 20.0}, "network-cold"))
    assert r[(3, "noop")] == 1.0
    assert r[(16, "noop")] == pytest.approx(1.4)
    assert r[(1, "noop")] == pytest.approx(0.8)
    assert r[(3, "network-cold")] == 1.0
    # Without a run at N = 3 there is nothing to compare with.
    assert rep.ratios(records({1: 40.0, 8: 60.0})) == {(1, "noop"): None, (8, "noop"): None}


def test_the_report_writes_the_table_and_the_picture(tmp_path):
    results = tmp_path / "results.jsonl"
    rs = records({1: 40.0, 3: 50.0, 16: 70.0}) + records({1: 31.1}, "network-cold")
    results.write_text("".join(json.dumps(r) + "\n" for r in rs))
    assert sb.main(["report", str(results), str(tmp_path / "out")]) == 0
    table = (tmp_path / "out" / "scale.md").read_text().splitlines()
    rows = [x for x in table if x.startswith("| ") and not x.startswith("| N ")]
    # network first, then the no-op run, each by N
    assert [x.split(" | ")[:4] for x in rows] == [
        ["| 1", "network stage, cold", "31.1", "-"],
        ["| 1", "site.yml no-op (2nd run)", "40.0", "0.80x"],
        ["| 3", "site.yml no-op (2nd run)", "50.0", "1.00x"],
        ["| 16", "site.yml no-op (2nd run)", "70.0", "1.40x"],
    ]
    assert rows[1].split(" | ")[4:6] == ["368", "398"]
    assert "chainer : Run the ChainerMN smoke test on 2 ranks (naive) (0.8)" in rows[1]
    assert (tmp_path / "out" / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_record_fails_a_noop_run_that_changed_something(tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    for run, expected in (("noop", 0), ("verify-cold", 1)):
        log = tmp_path / f"{run}.jsonl"
        log.write_text("\n".join(lines(run)) + "\n")
        rc = sb.main(["record", "--log", str(log), "--run", "noop", "--n", "1", "--wall", "12.5",
                      "--expect-unchanged", str(results)])
        assert rc == expected
    err = capsys.readouterr().err
    assert f"{NODE}: verify : Copy the checks' programs" in err
    recorded = rep.read_records(results)
    assert [r["tasks_per_node"] for r in recorded] == [{NODE: 368}, {NODE: 20}]
    assert recorded[0]["wall_s"] == 12.5


@pytest.mark.parametrize(
    "args",
    [["0"], ["3", "x"], ["01"], ["201"], ["-c", "abc", "1"], ["-c", "0", "1"], ["-c", "-1", "3"],
     ["-c", "1.", "3"]],
)
def test_the_script_refuses_bad_input_before_creating_anything(tmp_path, args):
    # Stand-ins that leave a mark: none of them may run.
    for tool in ("podman", "ansible-playbook", "python3"):
        (tmp_path / tool).write_text(f"#!/bin/sh\ntouch {tmp_path}/ran-{tool}\n")
        (tmp_path / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "VIRTUAL_ENV": "set"}
    p = subprocess.run(["bash", str(ROOT / "scripts" / "scale-bench.sh"), *args],
                       env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p.stderr
    assert "nothing was created" in p.stderr
    assert not list(tmp_path.glob("ran-*"))


def test_profile_accounts_for_the_whole_run_by_role_and_play():
    """`scale_bench.py profile`: every task slot is counted once, so each grouping sums to the
    run's span, and the slowest slot of the no-op run is named with its role."""
    parsed = ev.parse_log(events("noop"))
    tasks = sorted(parsed["tasks"], key=lambda t: t["start"])
    span = max(t["end"] for t in tasks) - tasks[0]["start"]
    text = ev.profile(parsed, top=100)
    assert f"{len(tasks)} task slots, {span:.1f} s" in text
    for title in ("module", "role", "play"):
        table = text.split(f"| {title} | slots | seconds | per slot |")[1].split("\n\n")[0]
        rows = [r.split("|") for r in table.splitlines()[2:]]
        assert sum(int(r[2]) for r in rows) == len(tasks)
        assert abs(sum(float(r[3]) for r in rows) - span) < 0.05 * len(rows) + 0.1
    slowest = text.split("| slowest slots | role | module | seconds |")[1].splitlines()[2]
    assert slowest.startswith("| chainer : Run the ChainerMN smoke test on 2 ranks (naive) | chainer |")


def test_cpu_readings():
    """The controller's CPU is the children's line of bash's `times`; a node's is the
    difference of its cgroup counter, only where both readings have it and it did not go back."""
    assert cpu.controller_cpu("0m0.010s 0m0.020s\n1m2.500s 0m3.250s\n") == 65.75
    for bad in ("", "0m1.0s 0m2.0s\n", "0m1s 0m2s\nx y\n"):
        with pytest.raises(ValueError, match="times"):
            cpu.controller_cpu(bad)
    before = "mnc-scale1 10.5\nmnc-scale2 20\nmnc-scale3 30\n"
    after = "mnc-scale1 14.25\nmnc-scale2 1.5\nmnc-scale4 9\n"
    assert cpu.node_cpu(before, after) == {"mnc-scale1": 3.75}


def test_record_keeps_the_cpu_time_and_the_report_shows_it(tmp_path):
    results = tmp_path / "results.jsonl"
    log = tmp_path / "noop.jsonl"
    log.write_text("\n".join(lines("noop")) + "\n")
    (tmp_path / "times").write_text("0m0.100s 0m0.050s\n0m30.500s 0m20.250s\n")
    (tmp_path / "before").write_text("mnc-scale1 100.0\nmnc-scale2 50.0\n")
    (tmp_path / "after").write_text("mnc-scale1 112.0\nmnc-scale2 58.0\n")
    for n in (3, 16):
        assert sb.main(["record", "--log", str(log), "--run", "noop", "--n", str(n), "--wall", "40",
                        "--controller-cpu", str(tmp_path / "times"),
                        "--node-cpu", str(tmp_path / "before"), str(tmp_path / "after"), str(results)]) == 0
    r = rep.read_records(results)[0]
    assert r["controller_cpu_s"] == 50.75
    assert r["node_cpu_s"] == {"mnc-scale1": 12.0, "mnc-scale2": 8.0}
    assert sb.main(["report", str(results), str(tmp_path / "out")]) == 0
    row = next(x for x in (tmp_path / "out" / "scale.md").read_text().splitlines() if x.startswith("| 16 |"))
    # node CPU: the mean over the nodes / the busiest; the controller's; the floor on this
    # host: (50.75 + 12 + 8) s over the host's CPUs
    host_cpus = os.cpu_count()
    assert row.split(" | ")[6:9] == ["10.0 / 12.0", "50.8", f"{70.75 / host_cpus:.1f}"]


def test_profile_counts_every_workers_time_skipped_ones_too():
    """The workers' time (each host's result from its start to its end) on a real 3-node
    no-op of site.yml (2026-12-06, ansible-core 2.19; trimmed with `trim`, which keeps the
    start): every host result is counted once, in its module's row, the skipped ones too
    (Ansible forks a worker for them as well). Events trimmed without the start say that
    there is no worker time, rather than showing zeros."""
    noop3 = ev.read_events(FIXTURES / "noop-3nodes.events.jsonl.gz")
    parsed = ev.parse_log(noop3)
    results = [r for t in parsed["tasks"] for r in t["hosts"].values()]
    assert len(results) == sum(e["event"] in ev.RESULT_EVENTS for e in noop3) == 735
    assert all(r["seconds"] is not None and r["seconds"] >= 0 for r in results)
    total = sum(r["seconds"] for r in results)
    skipped = sum(r["seconds"] for r in results if r["status"] == "skipped")
    assert skipped > 0
    text = ev.profile(parsed, top=100)
    assert f"{len(results)} host results, {total:.1f} s of the workers' time ({skipped:.1f} s" in text
    table = text.split("| module | host results | worker seconds | per result |")[1].split("\n\n")[0]
    rows = {r.split("|")[1].strip(): int(r.split("|")[2]) for r in table.splitlines()[2:]}
    assert sum(rows.values()) == len(results)
    includes = [
        r
        for t in parsed["tasks"]
        if t["action"] == "ansible.builtin.include_tasks"
        for r in t["hosts"].values()
    ]
    assert rows["ansible.builtin.include_tasks"] == len(includes)
    assert any(r["status"] == "skipped" for r in includes)
    most = text.split("| most worker time | module | host results | worker seconds |")[1].splitlines()[2]
    assert most.startswith(
        "| chainer : Run the ChainerMN smoke test on 2 ranks (naive) | ansible.builtin.command | 3 |"
    )
    # trim keeps what the workers' time is read from
    assert ev.profile(ev.parse_log([json.loads(line) for line in ev.trim(noop3)]), top=100) == text
    old = ev.profile(ev.parse_log(events("noop")))
    assert "(these events carry no per-host start: no worker time)" in old
