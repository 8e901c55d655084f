#!/usr/bin/python
# Copyright: mncluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mnc_report
short_description: Write the ChainerMN scaling report (JSON, Markdown, PNG plots)
description:
  - Takes the benchmark documents of a sweep (from M(chainermn_benchmark)) and writes
    C(<dest>/<timestamp>/) with C(report.json), C(report.md), one C(p<N>.json) per run and PNG plots
    (throughput with the ideal line, scaling efficiency, stacked phase times, allreduce bandwidth
    against the ceilings at L, each labelled with its path, and point-to-point), then points
    C(<dest>/latest) at it; C(trace.json) merges every run's and rank's phases into one Chrome trace.
  - C(report.md) opens with the verdict per process count (share of the step in allreduce, busbw in
    Gb/s and GB/s against the ceiling at L, point-to-point and the declared link, where the time went,
    what is not the network) and a model of a step that predicts the efficiency at twice the nodes.
  - Meant to run on the controller (C(delegate_to) C(localhost)); the plots need matplotlib there.
version_added: "0.1.0"
author: mncluster contributors
options:
  documents:
    description: Benchmark documents, schema C(mncluster.benchmark/1); one per process count.
    type: list
    elements: dict
    required: true
  dest:
    description: Directory that holds the report directories and the C(latest) link.
    type: path
    required: true
  timestamp:
    description: Name of this report's directory.
    type: str
    required: true
  launcher:
    description: Host that launched the runs, for the report's header.
    type: str
  plots:
    description: Draw the PNG plots (needs matplotlib).
    type: bool
    default: true
  latest_link:
    description: Point C(<dest>/latest) at this report.
    type: bool
    default: true
  link_gbps:
    description:
      - The link speed the inventory declares (C(mnc_link_gbps)), in Gb/s; the verdict states the
        in-training busbw as a percent of it.
    type: float
  baseline:
    description:
      - A previous report (its directory or its C(report.json)) whose figures go beside the new ones
        with the change in percent; a throughput or busbw drop beyond O(baseline_tolerance) percent, or a
        point-to-point drop beyond O(baseline_p2p_tolerance), is flagged in the report.
    type: path
  baseline_tolerance:
    description: Percent drop of throughput or allreduce busbw that is flagged.
    type: float
    default: 10
  baseline_p2p_tolerance:
    description: Percent drop of point-to-point bandwidth that is flagged.
    type: float
    default: 20
  partial:
    description:
      - The sweep stopped before its last process count (C(failed_processes), the C(reason), the
        counts C(not_run) and the C(measured) ones); the report says so in its title and first lines
        and keeps it as C(partial) in C(report.json). C(playbooks/benchmark.yml) writes such a report
        to C(<timestamp>-partial) and leaves C(latest) alone.
    type: dict
  verify_json:
    description:
      - The verify.json whose nccl-tests results (C(all_reduce_perf) on each GPU node and across the
        nodes) go beside the in-training busbw, usually C(<verify_report_root>/verify-latest/verify.json).
        Per run the busbw at the size nearest the gradient's L bytes and the peak; C(report.json)
        keeps them as C(nccl_tests) with the file's path and time. Unset, missing, of other nodes
        than O(cluster_nodes), without a result, or on a CPU cluster, the report says why in one line.
    type: path
  cluster_nodes:
    description:
      - The cluster's nodes (inventory names, C(mnc_nodes)); a verify.json that checked other nodes is
        not used.
    type: list
    elements: str
  cluster_state:
    description:
      - Fingerprint of what was measured (nodes' stack records, hostfile, benchmark program and
        settings), kept in the report's C(meta.cluster_state). C(site.yml) skips the benchmark
        when C(<dest>/latest) already holds a report for the same state.
    type: str
"""

EXAMPLES = r"""
- name: Write the report on the controller
  mncluster.core.mnc_report:
    documents: "{{ bench.documents }}"
    dest: "{{ playbook_dir }}/../reports"
    timestamp: "{{ now(utc=true, fmt='%Y%m%dT%H%M%SZ') }}"
  delegate_to: localhost
"""

RETURN = r"""
report_dir:
  description: The directory written.
  returned: always
  type: str
files:
  description: Files written (or that would be, in check mode).
  returned: always
  type: list
  elements: str
frameworks:
  description: With documents of both frameworks, one sentence per process count comparing their throughput.
  returned: always
  type: list
  elements: str
partial:
  description: The O(partial) given, when the report is a partial one.
  returned: always
  type: dict
runs:
  description: Per process count, throughput, efficiency, phase medians and bandwidths.
  returned: always
  type: list
  elements: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_markdown import render_markdown
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_nccl import apply as apply_nccl_tests
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_nccl import load_verify_json, yardstick
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_plots import (
    FRAMEWORKS_PLOT,
    PLOTS,
    draw,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_report import build_report
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bench_trace import chrome_trace
from ansible_collections.mncluster.core.plugins.module_utils.mnc_files import point_link, write_atomic
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verdict import assess
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verdict_compare import compare


def _nccl_tests(report, path, nodes):
    """nccl-tests' figures at L from the verify.json at ``path`` (report.json's ``nccl_tests``)."""
    device = str((report.get("environment") or {}).get("device") or "cpu")
    gpu = device.startswith("cuda")
    nbytes = (report.get("gradient") or {}).get("bytes") or next(
        (r["allreduce_bytes"] for r in report["runs"] if r.get("allreduce_bytes")), None)
    verify, real, stamp, error = load_verify_json(path) if gpu else (None, path, None, None)
    return yardstick(verify, real, stamp, nbytes, gpu, nodes=nodes, error=error)


def _partial(given):
    """The partial sweep's record with its counts as numbers (a template may hand them as strings)."""
    def count(value):
        return int(value) if str(value).strip().lstrip("-").isdigit() else value

    out = dict(given)
    out["failed_processes"] = count(given.get("failed_processes"))
    for key in ("measured", "not_run"):
        out[key] = [count(v) for v in given.get(key) or []]
    out["reason"] = str(given.get("reason") or "")
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            documents=dict(type="list", elements="dict", required=True),
            dest=dict(type="path", required=True),
            timestamp=dict(type="str", required=True),
            launcher=dict(type="str"),
            plots=dict(type="bool", default=True),
            latest_link=dict(type="bool", default=True),
            cluster_state=dict(type="str"),
            partial=dict(type="dict"),
            link_gbps=dict(type="float"),
            baseline=dict(type="path"),
            baseline_tolerance=dict(type="float", default=10.0),
            baseline_p2p_tolerance=dict(type="float", default=20.0),
            verify_json=dict(type="path"),
            cluster_nodes=dict(type="list", elements="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p["documents"]:
        module.fail_json(msg="no benchmark documents to report on")
    if "/" in p["timestamp"] or p["timestamp"] in ("", ".", "..", "latest"):
        module.fail_json(msg=f"timestamp {p['timestamp']!r} cannot name a report directory")
    try:
        meta = {"timestamp": p["timestamp"], "launcher": p["launcher"]}
        if p["cluster_state"]:
            meta["cluster_state"] = p["cluster_state"]
        if p["link_gbps"]:
            meta["link_gbps"] = p["link_gbps"]
        report = build_report(p["documents"], meta)
        report["nccl_tests"] = _nccl_tests(report, p["verify_json"], p["cluster_nodes"])
        for sub in (report, *(report.get("frameworks") or {}).values()):
            apply_nccl_tests(sub, report["nccl_tests"])
        report["verdict"] = assess(report, p["link_gbps"])
        for sub in (report.get("frameworks") or {}).values():
            sub["verdict"] = assess(sub, p["link_gbps"])
        if p["partial"]:
            report["partial"] = _partial(p["partial"])
    except (KeyError, TypeError, ValueError) as e:
        module.fail_json(msg=f"the documents are not benchmark documents: {e!r}")
    if p["baseline"]:
        path = p["baseline"]
        if os.path.isdir(path):
            path = os.path.join(path, "report.json")
        try:
            with open(path, encoding="utf-8") as f:
                baseline = json.load(f)
            if baseline.get("schema") != report["schema"]:
                raise ValueError(f"schema {baseline.get('schema')!r}, not {report['schema']!r}")
            report["comparison"] = compare(report, baseline, p["baseline_tolerance"],
                                           p["baseline_p2p_tolerance"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            module.fail_json(msg=f"baseline {path} is not a report this module wrote: {e}")

    report_dir = os.path.join(p["dest"], p["timestamp"])
    plots = list(PLOTS) if p["plots"] else []
    if plots and report.get("framework_comparison"):
        plots.append(FRAMEWORKS_PLOT)
    others = [(name, d) for name, sub in (report.get("frameworks") or {}).items() for d in sub["documents"]]
    trace = chrome_trace(report["documents"])
    if trace["traceEvents"]:
        report["trace"] = "trace.json"
    files = [os.path.join(report_dir, n) for n in ("report.json", "report.md")]
    if report.get("trace"):
        files.append(os.path.join(report_dir, report["trace"]))
    files += [os.path.join(report_dir, f"p{r['processes']}.json") for r in report["runs"]]
    files += [os.path.join(report_dir, f"p{d['config']['processes']}-{name}.json") for name, d in others]
    files += [os.path.join(report_dir, n) for n, _ in plots]
    summary = [dict(r, verdict=v["headline"]) for r, v in zip(report["runs"], report["verdict"]["runs"])]  # noqa: B905
    if module.check_mode:
        module.exit_json(changed=True, report_dir=report_dir, files=files, runs=summary)

    plt = None
    if plots:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            module.fail_json(msg=f"the plots need matplotlib on the controller ({e}); "
                                 "install it or set plots: false")
    os.makedirs(report_dir, exist_ok=True)
    for d in report["documents"]:
        name = f"p{d['config']['processes']}.json"
        write_atomic(os.path.join(report_dir, name), json.dumps(d, indent=1) + "\n")
    for name, d in others:
        write_atomic(os.path.join(report_dir, f"p{d['config']['processes']}-{name}.json"),
                     json.dumps(d, indent=1) + "\n")
    write_atomic(os.path.join(report_dir, "report.json"), json.dumps(report, indent=1) + "\n")
    write_atomic(os.path.join(report_dir, "report.md"), render_markdown(report, plots))
    if report.get("trace"):
        write_atomic(os.path.join(report_dir, report["trace"]), json.dumps(trace) + "\n")
    if plt is not None:
        draw(plt, report, report_dir, plots)
    if p["latest_link"]:
        link = os.path.join(p["dest"], "latest")
        point_link(link, p["timestamp"])  # relative: the reports tree can move
    module.exit_json(changed=True, report_dir=report_dir, files=files, runs=summary,
                     comparison=report.get("comparison"), partial=report.get("partial"),
                     frameworks=(report.get("framework_comparison") or {}).get("sentences") or [])


if __name__ == "__main__":
    main()
