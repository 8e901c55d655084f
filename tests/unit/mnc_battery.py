"""Issue 16's fault and bad-input battery: one line per case and one total.

A case is a test that feeds the real playbooks a bad input or a fault (a node
down, a planted link, a tampered archive, a hung rank) and asserts that it is
refused or named, with the variable or node in the message, before anything
on the nodes changed. Cases live where their bed is (controller-side tests
here, node cases in the molecule scenarios); each is marked

    @pytest.mark.battery("what is wrong", bound_s=150)

or, for a table of cases inside one test, recorded with ``record(...)``. A case
passed = refused before any change; a case that ran ``bound_s`` or longer hung.
pytest prints the battery of its own session at the end; with MNC_BATTERY_LOG
set (scripts/test.sh sets it) every case is also appended there as one JSON
line, and ``python tests/unit/mnc_battery.py <log>`` prints the whole run's
battery (every stage, every scenario) as ``bad inputs: N tried, N refused
before any change, 0 hung``.

conftest.py files load the hooks: ``from mnc_battery import *``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

__all__ = ["pytest_configure", "pytest_runtest_makereport", "pytest_terminal_summary"]

DEFAULT_BOUND_S = 150
_session: list[dict] = []


def record(case: str, refused: bool, seconds: float, bound_s: float = DEFAULT_BOUND_S, where: str = ""):
    """One case's outcome: into this session's summary and, when MNC_BATTERY_LOG is set, the run's log."""
    entry = {"case": case, "refused": bool(refused), "hung": seconds >= bound_s, "seconds": round(seconds, 1),
             "where": where}  # fmt: skip
    _session.append(entry)
    log = os.environ.get("MNC_BATTERY_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def summary(entries: list[dict]) -> list[str]:
    lines = [
        f"  {'refused' if e['refused'] else 'NOT REFUSED'}{' (hung)' if e['hung'] else ''}: {e['case']}"
        f" -- {e['where']} {e['seconds']:.1f} s"
        for e in entries
    ]
    refused = sum(e["refused"] and not e["hung"] for e in entries)
    hung = sum(e["hung"] for e in entries)
    lines.append(f"bad inputs: {len(entries)} tried, {refused} refused before any change, {hung} hung")
    return lines


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "battery(case, bound_s=150): a case of the fault and bad-input battery (mnc_battery.py)"
    )


def _case_name(item) -> str:
    name = item.get_closest_marker("battery").args[0]
    spec = getattr(item, "callspec", None)
    if spec is None:
        return name
    ids = spec.id
    host = spec.params.get("_testinfra_host")
    if host is not None:  # testinfra's host part of the id is not the case
        hid = host.backend.get_pytest_id()
        ids = ids[len(hid) :].lstrip("-") if ids.startswith(hid) else ids
    return f"{name} [{ids}]" if ids else name


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("battery")
    # A skipped case (a per-node test on another node) was not tried; a failed setup was.
    if marker is None or report.skipped or (report.when != "call" and report.passed):
        return
    bound = marker.kwargs.get("bound_s", DEFAULT_BOUND_S)
    record(_case_name(item), report.passed, call.duration, bound, item.nodeid.split("::")[0])


def pytest_terminal_summary(terminalreporter):
    if _session:
        terminalreporter.section("fault and bad-input battery (issue 16)")
        for line in summary(_session):
            terminalreporter.write_line(line)


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else ".cache/test-logs/battery.jsonl")
    text = path.read_text() if path.exists() else ""
    entries = [json.loads(line) for line in text.splitlines() if line.strip()]
    print("\n".join(summary(entries)))
    sys.exit(0 if entries and all(e["refused"] and not e["hung"] for e in entries) else 1)
