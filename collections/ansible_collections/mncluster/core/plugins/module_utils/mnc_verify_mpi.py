"""verify's MPI checks: the hostfile, every rank placed where the mapping puts it, the
point-to-point bandwidth of every node pair (and the pairs' matrix), and MPI-IO on the shared
directory. No Ansible imports (tests/unit/test_verify.py, tests/unit/test_shared_fs.py).

Units follow nccl-tests: bytes, seconds, GB/s = 1e9 B/s. Link speeds are
configured in Gbit/s (``mnc_link_gbps``): GB/s = Gbit/s / 8.
"""

from __future__ import annotations

import json
import re

from ansible_collections.mncluster.core.plugins.module_utils.mnc_hostfile import (
    parse_hostfile as _parse_hostfile,
)
from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_rows import (
    FAIL,
    PASS,
    SKIP,
    clip,
    gist,
    launch_failure,
    not_run,
    row,
)

# --- hostfile ----------------------------------------------------------------------------------


def parse_hostfile(text: str) -> list[dict]:
    """``<address> slots=<n>`` lines (comments and blank lines ignored), in file order."""
    return [{"address": host, "slots": slots} for host, slots in _parse_hostfile(text, strict=False)]


def check_hostfile(entries: list[dict], nodes: list[dict]) -> list[dict]:
    """Every node appears once, under its private address, with at least one slot."""
    if not entries:
        return [row("hostfile", "cluster", FAIL, "hostfile missing or empty")]
    by_addr = {}
    for e in entries:
        by_addr.setdefault(e["address"], []).append(e)
    problems = []
    for n in nodes:
        found = by_addr.get(n.get("private_ip"), [])
        if not found:
            problems.append(f"{n['name']} ({n.get('private_ip')}) missing")
        elif len(found) > 1:
            problems.append(f"{n['name']} ({n.get('private_ip')}) listed {len(found)} times")
    known = {n.get("private_ip") for n in nodes}
    problems += [f"{a} is no node of the inventory" for a in by_addr if a not in known]
    problems += [f"{e['address']} has slots={e['slots']}" for e in entries if e["slots"] < 1]
    total = sum(e["slots"] for e in entries)
    summary = ", ".join(f"{e['address']} slots={e['slots']}" for e in entries)
    if problems:
        return [row("hostfile", "cluster", FAIL, "; ".join(problems))]
    return [row("hostfile", "cluster", PASS, f"{len(entries)} nodes, {total} slots: {summary}")]


# --- ranks -------------------------------------------------------------------------------------


def parse_rank_lines(text: str) -> list[tuple[str, int]]:
    """``<hostname> <rank>`` lines printed by every rank; anything else is ignored."""
    out = []
    for line in (text or "").splitlines():
        m = re.fullmatch(r"\s*(\S+)\s+(\d+)\s*", line)
        if m:
            out.append((m.group(1), int(m.group(2))))
    return out


def _ranges(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ",".join(parts)


def expected_placement(expected: list[dict], launcher: str | None = None) -> list[tuple[str, list[int]]]:
    """The ranks each host should run, in rank order, for the mapping verify.yml asks for.

    Both mappings it uses (``--map-by ppr:<slots>:node`` when every node has the same
    slots, ``--map-by slot`` otherwise) fill a node's slots before the next node's.
    OpenMPI takes the node it is launched from first when that node is in the hostfile,
    then the others in hostfile order. ``expected``: hostfile order, as for
    :func:`check_ranks`; ``launcher``: what ``uname -n`` prints on the launching node.
    """
    order = [e for e in expected if e["host"] == launcher] + [e for e in expected if e["host"] != launcher]
    out, first = [], 0
    for e in order:
        out.append((e["host"], list(range(first, first + e["slots"]))))
        first += e["slots"]
    return out


def check_ranks(run: dict | None, expected: list[dict], launcher: str | None = None) -> list[dict]:
    """Every rank 0..N-1 printed exactly once, each host running exactly the ranks the
    mapping gives it (:func:`expected_placement`).

    ``expected``: hostfile order, ``{"host": <what `uname -n` prints>, "slots": n}``.
    ``run``: ``{"rc", "stdout", "stderr", "cmd"}`` of the mpiexec run, or None when not run.
    ``launcher``: what ``uname -n`` prints on the node mpiexec ran on.
    """
    check = "ranks"
    if run is None:
        return [row(check, "cluster", FAIL, "not run")]
    if run.get("skipped_reason"):
        return [row(check, "cluster", FAIL, f"not run: {run['skipped_reason']}")]
    total = sum(e["slots"] for e in expected)
    lines = parse_rank_lines(run.get("stdout", ""))
    problems = []
    if run.get("rc") not in (0, None):
        said = gist(run)
        timed_out = run.get("rc") in (124, 137)
        what = "timed out" if timed_out else f"mpiexec exited {run.get('rc')}"
        problems.append(what + (f": {said}" if said else ""))
    ranks = [r for _, r in lines]
    missing = sorted(set(range(total)) - set(ranks))
    dups = sorted({r for r in ranks if ranks.count(r) > 1})
    extra = sorted({r for r in ranks if r >= total})
    if missing:
        problems.append(f"ranks never printed: {_ranges(missing)}")
    if dups:
        problems.append(f"ranks printed more than once: {_ranges(dups)}")
    if extra:
        problems.append(f"ranks beyond {total - 1}: {_ranges(extra)}")
    per_host: dict[str, list[int]] = {}
    for host, r in lines:
        per_host.setdefault(host, []).append(r)
    want = expected_placement(expected, launcher)
    for host, wanted in want:
        got = len(per_host.get(host, []))
        if got != len(wanted):
            problems.append(f"{host} ran {got} rank(s), expected {len(wanted)}")
    for host in per_host:
        if host not in dict(want):
            problems.append(f"unexpected host {host} ran ranks {_ranges(per_host[host])}")
    placement = "; ".join(f"{h}: {_ranges(per_host.get(h, [])) or '-'}" for h, _ in want)
    wanted_text = "; ".join(f"{h}: {_ranges(r) or '-'}" for h, r in want)
    if run.get("rc") in (124, 137) and len(problems) == 1 and placement == wanted_text:
        # Every rank ran where it should and printed; only the launcher did not end.
        return [row(check, "cluster", FAIL,
                    f"all {total} ranks ran on the expected hosts and printed, but mpiexec did not exit "
                    "before the timeout: the launcher hung at the end of the job (OpenMPI 5's launcher "
                    "does so about once in a hundred short jobs without odls_base_max_threads = 0 in "
                    "<prefix>/etc/prte-mca-params.conf: roles/openmpi/README.md, \"The launcher's "
                    f"threads\") (placement {placement})")]
    if not problems and placement != wanted_text:
        start = f"the launcher {launcher} first, then" if launcher in dict(want) else "in"
        rule = f"each node's slots in turn, {start} hostfile order"
        problems.append(f"placement differs from the mapping ({rule}): expected {wanted_text}")
    if problems:
        return [row(check, "cluster", FAIL, "; ".join(problems) + f" (placement {placement})")]
    return [row(check, "cluster", PASS, f"{total} ranks, 0..{total - 1} once each; {placement}")]


# --- point-to-point bandwidth ------------------------------------------------------------------


def parse_p2p(stdout: str) -> dict:
    """The JSON document mnc_p2p_bandwidth.py prints on rank 0 (last line that parses)."""
    for line in reversed((stdout or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON document in the output")


def _median(values: list[float]) -> float:
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2.0


def p2p_matrix(doc: dict) -> dict:
    """The pairs' peak bandwidths as an N x N matrix (GB/s, symmetric; None on the
    diagonal and for a pair that was not measured), hosts in rank order."""
    hosts = list(doc.get("hosts") or [])
    gbps: list[list[float | None]] = [[None] * len(hosts) for _ in hosts]
    for p in doc.get("pairs", []):
        results = p.get("results") or []
        i, j = (p.get("ranks") or [None, None])[:2]
        if results and i is not None and j is not None and max(i, j) < len(hosts):
            gbps[i][j] = gbps[j][i] = max(r["gbps"] for r in results)
    return {"hosts": hosts, "gbps": gbps}


def check_p2p(
    run: dict | None, link_gbps: float | None, min_fraction: float, median_fraction: float | None = None
) -> list[dict]:
    """Peak ping-pong bandwidth of every node pair against the configured link speed,
    and (``median_fraction`` set) against the median pair: a pair below that fraction of
    the median is a bad link (cable, NIC, switch port) even where the link speed is not
    known."""
    check = "p2p bandwidth"
    nothing = not_run(check, "all pairs", run)
    if nothing:
        return nothing
    if run.get("rc") not in (0, None):
        return [row(check, "all pairs", FAIL, launch_failure(run))]
    try:
        doc = parse_p2p(run.get("stdout", ""))
    except ValueError as exc:
        tail = (run.get("stdout") or "")[-200:]
        return [row(check, "all pairs", FAIL, f"unreadable output ({exc}): {tail}")]
    pairs = doc.get("pairs", [])
    if not pairs:
        return [row(check, "all pairs", FAIL, f"no node pairs measured (hosts: {doc.get('hosts')})")]
    link_gBps = link_gbps / 8.0 if link_gbps else None
    peaks = [max(r["gbps"] for r in p["results"]) for p in pairs if p.get("results")]
    median = _median(peaks) if peaks else None
    rows = []
    for p in pairs:
        results = p.get("results", [])
        subject = f"{p['a']} <-> {p['b']}"
        if not results:
            rows.append(row(check, subject, FAIL, "no measurements"))
            continue
        best = max(results, key=lambda r: r["gbps"])
        small = min(results, key=lambda r: r["bytes"])
        detail = (
            f"peak {best['gbps']:.2f} GB/s at {_size(best['bytes'])}; "
            f"{small['gbps']:.3f} GB/s at {_size(small['bytes'])}"
        )
        problems = []
        judged_by_median = bool(median_fraction) and len(peaks) > 1 and bool(median)
        if judged_by_median:
            of_median = best["gbps"] / median
            detail += f"; {of_median:.0%} of the median pair ({median:.2f} GB/s)"
            if of_median < median_fraction:
                where = f"a slow link between {p['a']} and {p['b']}?"
                problems.append(f"below {median_fraction:.0%} of the median pair: {where}")
        if link_gBps is None:
            detail += "; no mnc_link_gbps to compare with"
        else:
            frac = best["gbps"] / link_gBps
            detail += f"; link {link_gbps:g} Gb/s = {link_gBps:.2f} GB/s -> {frac:.0%}"
            if frac < min_fraction:
                problems.append(f"< {min_fraction:.0%} of the link (wrong network? one link of a bond?)")
        if problems:
            rows.append(row(check, subject, FAIL, detail + "; " + "; ".join(problems)))
        elif link_gBps is None and not judged_by_median:
            rows.append(row(check, subject, SKIP, detail))
        else:
            rows.append(row(check, subject, PASS, detail))
    return rows


# --- shared filesystem ---------------------------------------------------------------------------


def check_mpiio(run: dict | None) -> list[dict]:
    """MPI-IO across the nodes on the shared directory (mnc_mpiio.py, one rank per node): every
    rank must read back, byte for byte, the block the rank on the next node wrote into the same
    file. A directory that is not really shared gives every node its own file, and the blocks
    read are not the peers'. ``run`` None: no shared directory, no row."""
    check = "shared filesystem"
    if run is None:
        return []
    subject = run.get("dir") or "shared directory"
    nothing = not_run(check, subject, run)
    if nothing:
        return nothing
    if run.get("rc") not in (0, None):
        return [row(check, subject, FAIL, launch_failure(run))]
    try:
        doc = json.loads((run.get("stdout") or "").strip().splitlines()[-1])
        ranks = doc["ranks"]
        subject = doc.get("dir") or subject
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        return [row(check, subject, FAIL, f"unreadable output ({exc}): {(run.get('stdout') or '')[-200:]}")]
    hosts = sorted({r["host"] for r in ranks})
    bad = [r for r in ranks if not r.get("ok")]
    if bad:
        # a step that failed is reported by every rank alike: once here
        errors = list(dict.fromkeys(r["error"] for r in bad if r.get("error")))
        errors += [f"rank {r['rank']} on {r['host']} read other bytes than rank {r['read_from']} on "
                   f"{r['read_from_host']} wrote" for r in bad if not r.get("error")]
        detail = clip("; ".join(errors), 400) + " (is the directory really shared?)"
        return [row(check, subject, FAIL, detail)]
    if len(hosts) < 2:
        detail = f"all {len(ranks)} rank(s) ran on {', '.join(hosts)}: nothing crossed a node"
        return [row(check, subject, FAIL, detail)]
    detail = (f"MPI-IO: {len(ranks)} ranks on {len(hosts)} nodes wrote one file ({_size(doc['block'])} "
              "each); each read back, byte for byte, the block the next node wrote")
    return [row(check, subject, PASS, detail)]


def _size(n: int) -> str:
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"
