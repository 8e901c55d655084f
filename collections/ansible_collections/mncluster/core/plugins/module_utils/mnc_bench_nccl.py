# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl-tests beside the in-training busbw: the yardstick everyone knows for "framework overhead".

verify runs nccl-tests' ``all_reduce_perf`` on every GPU node and across the nodes and keeps each
run's busbw per message size in verify.json (``gpu_health.<node>.nccl_tests`` and
``gpu_health.cluster.nccl_tests``: docs/verify-json.md). The benchmark's report reads the latest
verify.json and takes, for each run, the row whose size is nearest the gradient's L bytes and the
highest busbw of any size; each benchmark run is then set against the run of the same kind (across
the nodes when it spans nodes, else the launcher's node). Where there is nothing to read the report
says why, in one line, and shows no number.

Pure functions, except :func:`load_verify_json`, the one that reads the file (mncluster.core.mnc_report
calls it on the controller); no Ansible. Tests: tests/unit/test_bench_nccl_tests.py.
"""

from __future__ import annotations

import json
import os
import re
import time

from ansible_collections.mncluster.core.plugins.module_utils.mnc_frameworks import FRAMEWORK_NAMES

NO_GPU = "nccl-tests: not run on this cluster (no GPU)"
# verify's report directory: <verify_report_root>/verify-<UTC time>/ (roles/verify/tasks/table.yml)
_VERIFY_DIR = re.compile(r"^verify-(\d{8}T\d{6}Z)$")


def load_verify_json(path):
    """(verify.json as a dict or None, its real path, its time, why it could not be used or None).

    The time is the one in its directory's name (``verify-<UTC time>``, what verify-latest points
    at), else the file's modification time, both as ``%Y%m%dT%H%M%SZ`` (UTC)."""
    if not path:
        return None, None, None, "nccl-tests: no verify.json to read (benchmark_verify_json is empty)"
    if not os.path.isfile(path):
        return None, path, None, f"nccl-tests: no verify.json found at {path} (playbooks/verify.yml not run)"
    real = os.path.realpath(path)
    m = _VERIFY_DIR.match(os.path.basename(os.path.dirname(real)))
    try:
        stamp = m.group(1) if m else time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(os.path.getmtime(real)))
        with open(real, encoding="utf-8") as f:
            doc = json.load(f)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        return None, real, None, f"nccl-tests: {real} could not be read ({e})"
    return doc, real, stamp, None


def nearest_size(by_size, nbytes):
    """The row of ``by_size`` whose size is nearest ``nbytes`` (the smaller distance in bytes; a tie
    goes to the larger size). None without rows."""
    rows = [r for r in by_size or [] if r.get("busbw") is not None]
    if not rows or not nbytes:
        return None
    return min(rows, key=lambda r: (abs(r["bytes"] - nbytes), -r["bytes"]))


def figures(record, nbytes):
    """One all_reduce_perf run as verify.json keeps it (``by_size``...), at L and at its peak:
    ``{"at_L": {bytes, busbw, algbw}, "peak": {bytes, busbw, algbw}}``; None without a row."""
    at = nearest_size((record or {}).get("by_size"), nbytes)
    if at is None:
        return None
    rows = [r for r in record["by_size"] if r.get("busbw") is not None]
    top = max(rows, key=lambda r: (r["busbw"], r["bytes"]))

    def pick(r):
        return {"bytes": r["bytes"], "busbw": r["busbw"], "algbw": r.get("algbw")}

    return {"at_L": pick(at), "peak": pick(top)}


def _why_none(verify, where):
    """Why verify.json holds no nccl-tests result: its nccl-tests rows (SKIP or FAIL) say."""
    if not (verify.get("gpu_health") or {}):
        return f"nccl-tests: not run on this cluster (verify found no GPU node; {where})"
    rows = [r for r in verify.get("rows") or [] if r.get("check") == "nccl-tests"]
    if rows:
        r = next((x for x in rows if x.get("subject") == "cluster"), rows[0])
        return f"nccl-tests: no result in {where}: {r.get('subject')}: {r.get('status')} {r.get('detail')}"
    return f"nccl-tests: no result in {where}"


def yardstick(verify, path, stamp, nbytes, gpu, nodes=None, error=None):
    """What report.json keeps as ``nccl_tests``: where it came from, L, the cross-node run's and each
    node's figures, and ``missing`` (one line: why there are none) or None.

    ``verify``: verify.json (None where it could not be read, ``error`` then saying why); ``gpu``:
    whether the benchmark ran on GPUs; ``nodes``: the cluster's inventory names (mnc_nodes), to refuse
    a verify.json of other nodes (verify's ``node answers`` rows name every node it was run on)."""
    out = {"source": {"path": path, "time": stamp}, "gradient_bytes": nbytes, "cluster": None,
           "nodes": {}, "missing": None}
    if not gpu:
        out["missing"] = NO_GPU
        return out
    if verify is None:
        out["missing"] = error or "nccl-tests: no verify.json"
        return out
    where = f"{path} ({stamp})"
    checked = [r.get("subject") for r in verify.get("rows") or [] if r.get("check") == "node answers"]
    if nodes and checked and set(checked) != {str(n) for n in nodes}:
        out["missing"] = ("nccl-tests: {} checked nodes {}, not this cluster's {}: run playbooks/verify.yml "
                          "again".format(where, ", ".join(checked), ", ".join(str(n) for n in nodes)))
        return out
    health = verify.get("gpu_health") or {}
    out["cluster"] = figures((health.get("cluster") or {}).get("nccl_tests"), nbytes)
    for name, rec in health.items():
        if name == "cluster" or not isinstance(rec, dict):
            continue
        f = figures(rec.get("nccl_tests"), nbytes)
        if f:
            out["nodes"][name] = f
    if out["cluster"] is None and not out["nodes"]:
        out["missing"] = _why_none(verify, where)
    return out


def _in_training(run):
    """(busbw GB/s, over what): the allreduce phase's, else the reduction's own duration's."""
    if run.get("busbw") is not None:
        return run["busbw"], "allreduce phase"
    if run.get("busbw_own_duration") is not None:
        return run["busbw_own_duration"], "reduction's own duration"
    return None, None


def _node_run(yard, launcher):
    """The per-node run a one-node benchmark run is set against: the launcher's (its ranks run there),
    else the first node verify recorded (its inventory order: the launcher is the first that answered)."""
    nodes = yard.get("nodes") or {}
    if launcher in nodes:
        return launcher, nodes[launcher]
    return next(iter(nodes.items()), (None, None))


def apply(report, yard):
    """Each run of ``report`` (p > 1) against nccl-tests at L: ``nccl_tests_run`` (``cluster`` or
    the node's name), ``nccl_tests_bytes`` (the size nearest L), ``nccl_tests_busbw`` (GB/s),
    ``nccl_tests_peak_busbw``, ``busbw_percent_of_nccl_tests`` (the in-training busbw, or the
    reduction's own duration's where the phase is only its exposed part: ``nccl_tests_busbw_over``
    says which). Changes ``report``."""
    launcher = (report.get("meta") or {}).get("launcher")
    for run in report.get("runs") or []:
        name, f = None, None
        if run["processes"] > 1 and not (yard or {}).get("missing"):
            if (run.get("nodes") or 1) > 1:
                name, f = "cluster", yard.get("cluster")
            else:
                name, f = _node_run(yard, launcher)
        busbw, over = _in_training(run)
        run["nccl_tests_run"] = name if f else None
        run["nccl_tests_bytes"] = f["at_L"]["bytes"] if f else None
        run["nccl_tests_busbw"] = f["at_L"]["busbw"] if f else None
        run["nccl_tests_peak_busbw"] = f["peak"]["busbw"] if f else None
        run["busbw_percent_of_nccl_tests"] = (100.0 * busbw / f["at_L"]["busbw"]
                                              if f and busbw is not None and f["at_L"]["busbw"] else None)
        run["nccl_tests_busbw_over"] = over if f else None
    return report


def run_label(name):
    return "across the nodes" if name == "cluster" else f"on {name}"


def sentence(run, framework):
    """One sentence for the verdict: the in-training busbw as a percent of nccl-tests' at L."""
    pct = run.get("busbw_percent_of_nccl_tests")
    if pct is None:
        return None
    who = FRAMEWORK_NAMES.get(framework, framework or "ChainerMN")
    own = run.get("nccl_tests_busbw_over") == "reduction's own duration"
    what = " (over the reduction's own duration)" if own else ""
    return ("{}{} reached {:.0f}% of nccl-tests' bus bandwidth at {:.2f} MB ({:.2f} GB/s, the size nearest "
            "L, all_reduce_perf {}; its peak {:.2f} GB/s).".format(
                who, what, pct, run["nccl_tests_bytes"] / 1e6, run["nccl_tests_busbw"],
                run_label(run["nccl_tests_run"]), run["nccl_tests_peak_busbw"]))


def summary_line(yard):
    """One line for report.md: where the figures came from and what they are, or why there are none."""
    if not yard:
        return None
    if yard.get("missing"):
        return yard["missing"]
    src = yard["source"]
    parts = []

    def one(label, f):
        a, p = f["at_L"], f["peak"]
        return "{} {:.2f} GB/s at {} B (nearest L), peak {:.2f} GB/s at {} B".format(
            label, a["busbw"], a["bytes"], p["busbw"], p["bytes"])

    if yard.get("cluster"):
        parts.append(one("across the nodes", yard["cluster"]))
    for name, f in (yard.get("nodes") or {}).items():
        parts.append(one(f"on {name}", f))
    return "nccl-tests' all_reduce_perf (verify.json at {}, {}; L = {} B): {}.".format(
        src.get("path"), src.get("time"), yard.get("gradient_bytes"), "; ".join(parts))
