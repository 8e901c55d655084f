#!/usr/bin/python3 -Es
"""mncluster's Slurm health check (slurm.conf HealthCheckProgram; roles/slurm installs it as
/usr/local/lib/mncluster/healthcheck/mncluster-healthcheck, beside the rules it imports: Python
puts the program's own directory first on its path; -E and -s keep PYTHON* variables and a user
site out). slurmd runs it as root every HealthCheckInterval.

It runs the checks that have meaning on this node (/etc/slurm/mncluster-healthcheck.json, written
by roles/slurm): the shared directories mounted, the MPI prefix the openmpi role recorded
present, and with GPUs the GPUs answering in the number slurmd was configured with, persistence
mode, no uncorrectable ECC error or pending remapping, the nvidia-uvm nodes, no new Xid since
the last pass. A failure drains the node with "mncluster: <the failing check>" as the reason; a
pass resumes it only where that reason is ours (mnc_slurm_health.py decides). It
runs root's own programs only (system PATH), each bounded; what it did goes to
/var/lib/mncluster/healthcheck/last.json. Run by hand, it does the same and prints it.
"""

import json
import os
import subprocess
import sys

import mnc_nvsmi
import mnc_slurm_health as rules
import mnc_xid

CONFIG = "/etc/slurm/mncluster-healthcheck.json"
STATE = "/var/lib/mncluster/healthcheck"
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


def run(argv, timeout=20):
    try:
        p = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=ENV,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        return p.returncode, p.stdout, p.stderr.strip()
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{argv[0]}: no answer in {timeout} s"


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def shared_dirs(cfg):
    # mountpoint stats the directory: a hung NFS server is a timeout, reported as not mounted.
    dirs = cfg.get("shared_dirs") or []
    mounted = {d: run(["mountpoint", "-q", d], 10)[0] == 0 for d in dirs}
    exported = rules.exported_dirs(read("/etc/exports") + "\n" + read("/etc/exports.d/mncluster.exports"))
    return rules.shared_dir_failures(dirs, mounted, exported)


def mpi_prefix(cfg):
    try:
        fact = json.loads(read(cfg.get("mpi_fact") or "/etc/ansible/facts.d/mncluster_openmpi.fact") or "{}")
    except ValueError:
        return ["the openmpi record (mncluster_openmpi.fact) is unreadable"]
    prefix = fact.get("mnc_openmpi_prefix") if isinstance(fact, dict) else None
    if prefix and not os.path.isfile(os.path.join(prefix, "bin", "mpiexec")):
        return [f"MPI prefix {prefix} missing (no bin/mpiexec)"]
    return []


def gpus(cfg, state):
    want = int(cfg.get("gpus") or 0)
    if want <= 0:
        return []
    failures = []
    rc, out, err = run(["nvidia-smi", "-q"], 30)
    if rc != 0:
        failures.append(f"nvidia-smi does not answer ({err or rc})")
    else:
        doc = mnc_nvsmi.parse_query(out)
        if len(doc["gpus"]) != want:
            failures.append(f"{len(doc['gpus'])} GPU(s) answer, slurmd has {want}")
        failures += mnc_nvsmi.persistence_problems(doc) + mnc_nvsmi.ecc_problems(doc)
    failures += [
        f"{p} missing" for p in ("/dev/nvidia-uvm", "/dev/nvidia-uvm-tools") if not os.path.exists(p)
    ]
    rc, out, _ = run(["journalctl", "-k", "-b", "--no-pager", "-o", "cat"], 20)
    if rc != 0:
        rc, out, _ = run(["dmesg"], 20)
    xids = [x for x in mnc_xid.parse_xids(out) if x["code"] not in mnc_xid.APPLICATION_XIDS]
    boot_id = read("/proc/sys/kernel/random/boot_id").strip()
    fresh = rules.new_xids(state.get("xid") or {}, boot_id, len(xids))
    if fresh:
        failures.append(
            f"{fresh} new Xid since the last pass: " + "; ".join(mnc_xid.xid_problems(xids[-fresh:]))
        )
    state["xid"] = {"boot_id": boot_id, "count": len(xids)}
    return failures


def main():
    try:
        cfg = json.loads(read(CONFIG))
    except ValueError:
        print(f"mncluster-healthcheck: no configuration in {CONFIG}", file=sys.stderr)
        return 2
    os.makedirs(STATE, mode=0o700, exist_ok=True)
    try:
        state = json.loads(read(os.path.join(STATE, "last.json")) or "{}")
    except ValueError:
        state = {}
    failures = shared_dirs(cfg) + mpi_prefix(cfg) + gpus(cfg, state)
    rc, out, err = run(["scontrol", "-o", "show", "node", cfg["node"]], 20)
    if rc != 0:
        action, why = "none", f"scontrol show node {cfg['node']} failed: {err or rc}"
    else:
        action, why = rules.decide(rules.parse_node(out), failures)
        if action == "drain":
            rc, _, err = run(
                ["scontrol", "update", f"NodeName={cfg['node']}", "State=DRAIN", f"Reason={why}"]
            )
        elif action == "resume":
            rc, _, err = run(["scontrol", "update", f"NodeName={cfg['node']}", "State=RESUME"])
        if rc != 0:
            why += f" (scontrol update failed: {err or rc})"
    state.update(
        {"runs": int(state.get("runs") or 0) + 1, "failures": failures, "action": action, "why": why}
    )
    tmp = os.path.join(STATE, ".last.json.tmp")
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, os.path.join(STATE, "last.json"))
    print(f"{cfg['node']}: {action}: {why}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
