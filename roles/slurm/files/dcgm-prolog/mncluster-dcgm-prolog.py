#!/usr/bin/python3 -Es
"""mncluster's DCGM prolog (slurm.conf Prolog with slurm_dcgm_prolog; roles/slurm installs it as
/usr/local/lib/mncluster/dcgm-prolog/mncluster-dcgm-prolog, beside the modules it imports: Python
puts the program's own directory first on its path; -E and -s keep PYTHON* variables and a user
site out). slurmd runs it as root on every node of a job before the job starts there
(PrologFlags=Alloc).

On a node with GPUs (settings.json beside it, written by roles/slurm) it runs
``dcgmi diag -r <level>`` within ``timeout`` seconds and reads its table with
mnc_dcgm.py (module_utils/mnc_dcgm.py, verify's parser, copied beside it). A pass exits 0. A
failure (a test that says Fail, dcgmi exiting non-zero, no result table, dcgmi missing or hanging)
drains the node with "mncluster dcgm: <the failing test or why>" as the reason (the health check's
rules, mnc_slurm_health.py's decide_dcgm: an administrator's drain is kept) and exits 1: Slurm then
requeues the job. A node without GPUs (a CPU node of a cluster with GPU nodes: slurm.conf is the
same everywhere) exits 0 at once.

Prologs of jobs starting together on one node take turns (a lock, waited on for a bounded time);
one that waited while another ran the diagnostic takes that result. It runs root's own programs
only (system PATH: slurmd gives a prolog none), each bounded; the last result is in
/run/mncluster-dcgm-prolog/last.json and dcgmi's output in last-diag.txt. Run by hand, it does
the same and prints it.
"""

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time

import mnc_dcgm
import mnc_slurm_health as rules

HERE = os.path.dirname(os.path.abspath(__file__))
SETTINGS = os.path.join(HERE, "settings.json")
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def run(argv, timeout, path):
    """(rc, stdout, why): 127 not found, 124 no answer in time (its process group killed)."""
    try:
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={"PATH": path, "LC_ALL": "C"},
            start_new_session=True,
        )
    except FileNotFoundError:
        return 127, "", f"{argv[0]} not found"
    except OSError as e:
        return 126, "", f"{argv[0]} cannot run ({e.strerror})"
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        # A child that left the group would hold the pipe: not waited for past 5 s.
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.communicate(timeout=5)
        return 124, "", f"{argv[0]} gave no answer in {timeout} s"
    return p.returncode, out, " ".join(err.split())[:300]


def judge(rc, out, why, level, timeout):
    """The failures of one ``dcgmi diag`` run: the failed tests (mnc_dcgm.py), or why
    there is no result; empty when it passed."""
    argv = f"dcgmi diag -r {level}"
    if rc == 127:
        return ["dcgmi not found (DCGM not installed on this node?)"]
    if rc == 124:
        return [f"{argv} gave no answer in {timeout} s"]
    if rc == 126:
        return [why]
    try:
        failed = mnc_dcgm.failures(mnc_dcgm.parse_diag(out))
    except ValueError:
        last = (out.strip().splitlines() or [""])[-1].strip()
        return [f"{argv} gave no result table (exit {rc}{': ' + (why or last) if why or last else ''})"]
    if failed:
        return failed
    if rc != 0:
        return [f"{argv} exited {rc} with no failed test named{': ' + why if why else ''}"]
    return []


def wait_turn(lock_path, deadline):
    """The lock's file descriptor once this prolog holds it, None past the deadline."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.2)


def read_json(path):
    try:
        with open(path) as f:
            doc = json.load(f)
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def write_atomic(state, name, text):
    tmp = os.path.join(state, f".{name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(state, name))


def drain(node, failures, path):
    """Drain ``node`` for ``failures`` unless an administrator drained it: (action, why)."""
    rc, out, why = run(["scontrol", "-o", "show", "node", node], 20, path)
    if rc != 0:
        return "none", f"scontrol show node {node} failed: {why or rc}"
    try:
        action, reason = rules.decide_dcgm(rules.parse_node(out), failures)
    except ValueError as e:
        return "none", str(e)
    if action == "drain":
        argv = ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]
        rc, _, why = run(argv, 20, path)
        if rc != 0:
            return "none", f"{reason} (scontrol update failed: {why or rc})"
    return action, reason


def main():
    cfg = read_json(SETTINGS)
    path = cfg.get("path") or SYSTEM_PATH
    node = os.environ.get("SLURMD_NODENAME") or cfg.get("node") or os.uname().nodename
    if not cfg:
        action, why = drain(node, [f"no settings in {SETTINGS}"], path)
        print(f"{node}: {action}: {why}")
        return 1
    if int(cfg.get("gpus") or 0) <= 0:
        return 0
    level, timeout = int(cfg.get("level") or 1), int(cfg.get("timeout") or 120)
    state = cfg.get("state") or "/run/mncluster-dcgm-prolog"
    os.makedirs(state, mode=0o700, exist_ok=True)
    started = time.time()
    # Another prolog runs at most timeout + its scontrol calls: a wait longer than that is a hang.
    lock = wait_turn(os.path.join(state, "lock"), time.monotonic() + timeout + 60)
    last = read_json(os.path.join(state, "last.json"))
    if lock is None:
        failures = [f"another prolog held the DCGM lock for more than {timeout + 60} s"]
    elif last.get("level") == level and float(last.get("time") or 0) >= started:
        # Another job's prolog ran the diagnostic while this one waited: its result stands.
        failures = last.get("failures") or []
        said = "; ".join(failures) or "pass"
        print(f"{node}: dcgmi diag -r {level} of a prolog that ran meanwhile: {said}")
        return 1 if failures else 0
    else:
        rc, out, why = run(["dcgmi", "diag", "-r", str(level)], timeout, path)
        write_atomic(state, "last-diag.txt", out + (f"\n[exit {rc}] {why}\n" if why or rc else ""))
        failures = judge(rc, out, why, level, timeout)
    action, why = drain(node, failures, path) if failures else ("keep", "dcgmi diag passed")
    result = {
        "time": time.time(),
        "level": level,
        "seconds": round(time.time() - started, 1),
        "failures": failures,
        "action": action,
        "why": why,
        "job": os.environ.get("SLURM_JOB_ID"),
    }
    if lock is not None:  # what a prolog waiting for the lock takes as its own result
        write_atomic(state, "last.json", json.dumps(result))
    print(f"{node}: {action}: {why}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
