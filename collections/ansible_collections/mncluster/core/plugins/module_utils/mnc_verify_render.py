"""verify's report text: the pass/fail table (``render_table``), verify.md
(``render_markdown``) and the point-to-point bandwidth matrix as a markdown table and as console
text. No Ansible imports (tests/unit/test_verify.py)."""

from __future__ import annotations

from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_rows import FAIL, PASS, SKIP


def render_markdown(result: dict, title: str = "Cluster acceptance checks", image: str | None = None) -> str:
    """verify.md: the pass/fail table and, where pairs were measured, the bandwidth matrix."""
    out = [f"# {title}", "", "```", result["table"], "```", ""]
    if result.get("failures"):
        out += ["## Failures", ""] + [f"* {f}" for f in result["failures"]] + [""]
    matrix = result.get("p2p_matrix")
    if matrix and matrix["hosts"]:
        out += ["## Point-to-point bandwidth between every pair of nodes", ""]
        out += ["Peak one-way ping-pong bandwidth (GB/s = 1e9 B/s) over the private network.", ""]
        out += [render_p2p_matrix(matrix), ""]
        if image:
            out += [f"![pair bandwidth]({image})", ""]
    return "\n".join(out)


def render_table(rows: list[dict], detail_width: int = 110) -> str:
    """A fixed-width text table, one line per row (long details wrap under DETAIL)."""
    heads = ("CHECK", "SUBJECT", "RESULT", "DETAIL")
    w0 = max([len(heads[0])] + [len(r["check"]) for r in rows])
    w1 = max([len(heads[1])] + [len(r["subject"]) for r in rows])
    w2 = len(heads[2])
    indent = " " * (w0 + w1 + w2 + 6)
    lines = [
        f"{heads[0]:<{w0}}  {heads[1]:<{w1}}  {heads[2]:<{w2}}  {heads[3]}",
        f"{'-' * w0}  {'-' * w1}  {'-' * w2}  {'-' * 6}",
    ]
    for r in rows:
        chunks = _wrap(r["detail"], detail_width)
        lines.append(f"{r['check']:<{w0}}  {r['subject']:<{w1}}  {r['status']:<{w2}}  {chunks[0]}")
        lines += [indent + c for c in chunks[1:]]
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in (PASS, FAIL, SKIP)}
    verdict = "PASSED" if counts[FAIL] == 0 else "FAILED"
    lines.append(f"{verdict}: {counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped")
    return "\n".join(lines)


def _wrap(text: str, width: int) -> list[str]:
    words, out, cur = text.split(" "), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            out.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    out.append(cur)
    return out


def render_p2p_matrix(matrix: dict) -> str:
    """The matrix as a markdown table (GB/s), one row and one column per node."""
    hosts = matrix["hosts"]
    lines = ["| GB/s | " + " | ".join(hosts) + " |", "|---|" + "---:|" * len(hosts)]
    for name, values in zip(hosts, matrix["gbps"], strict=True):
        cells = ["-" if v is None else f"{v:.2f}" for v in values]
        lines.append(f"| **{name}** | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_p2p_text(matrix: dict) -> str:
    """The matrix as fixed-width text for the console (GB/s)."""
    hosts = matrix["hosts"]
    w = max([6] + [len(h) for h in hosts])
    lines = [" " * w + "".join(f"  {h:>{w}}" for h in hosts)]
    for name, values in zip(hosts, matrix["gbps"], strict=True):
        lines.append(f"{name:<{w}}" + "".join(f"  {'-' if v is None else f'{v:.2f}':>{w}}" for v in values))
    return "\n".join(lines)
