"""What ``dcgmi diag -r <level>`` says: every test's result, and the ones that failed.

The output is a table of ``| name | result |`` lines under section rulers (``Metadata``,
``Deployment``, ``Integration``, ``Hardware``, ``Stress``). A line with an empty name continues
the entry above it: DCGM 4 lists each GPU's result there (``GPU0: Pass``), DCGM 3 the rest of an
``Error``/``Info``/``Warning`` text, which itself is an entry after the test it explains.
Results are ``Pass``, ``Fail``, ``Warn``, ``Skip`` (``Pass - All``, ``Skip - All`` ...).

Levels: 1 (quick, seconds: deployment checks), 2 (medium, about two minutes: adds PCIe and
memory), 3 (long, tens of minutes per node: the stress tests, NVIDIA's burn-in), 4 (longer).

Pure Python, no Ansible imports (tests/unit/test_gpu_parsers.py), used by
module_utils/mnc_verify_gpu_health.py.
"""

from __future__ import annotations

import re

_ROW = re.compile(r"^\|\s?(?P<name>[^|]*?)\s*\|\s?(?P<value>.*?)\s*\|\s*$")
_SECTION = re.compile(r"^[|+]-+\s+(?P<name>[A-Za-z ]+?)\s+-+\+")
_NOTES = ("Error", "Info", "Warning")
# DCGM 3 cuts a note into chunks of this many characters (dcgmi's DATA_INFO_TAG_LEN), padded.
_WIDTH = 45


def parse_diag(text: str) -> dict:
    """``{"metadata": {...}, "tests": [{"section", "name", "result", "gpus": {...}, "error",
    "info", "warning"}]}``. Only the last table counts when the output holds several (some
    versions print the table twice)."""
    tables, tests, metadata, section = [], [], {}, None
    last = None  # the entry a continuation line belongs to: a test, or a note of it
    for raw in (text or "").splitlines():
        line = raw.strip()
        if line.startswith("| Diagnostic") or line.startswith("|Diagnostic"):
            if tests or metadata:
                tables.append((metadata, tests))
            tests, metadata, section, last = [], {}, None, None
            continue
        m = _SECTION.match(line)
        if m:
            section, last = m.group("name").strip(), None
            continue
        m = _ROW.match(line)
        if not m or set(line) <= set("+=-|"):
            continue
        name, value = m.group("name").strip(), m.group("value").strip()
        if section == "Metadata":
            metadata[name] = value
            continue
        if name in _NOTES and tests:
            key = name.lower()
            tests[-1][key + "_raw"] = raw.split("|")[2][1 : _WIDTH + 1]
            tests[-1][key] = value
            last = (tests[-1], key)
        elif name:
            entry = {"section": section, "name": name, "result": value, "gpus": {}}
            tests.append(entry)
            last = (entry, None)
        elif last is not None:
            entry, key = last
            g = re.match(r"^GPU\s?(\d+):\s*(.*)$", value)
            if key is None and g:
                entry["gpus"][int(g.group(1))] = g.group(2)
            elif key is None:
                entry["result"] = (entry["result"] + " " + value).strip()
            else:
                # DCGM 3 wraps a note at the column's width, inside words: the cell's text as
                # printed (its padding kept) joins the chunks; runs of spaces become one.
                entry[key + "_raw"] += raw.split("|")[2][1 : _WIDTH + 1]
                entry[key] = " ".join(entry[key + "_raw"].split())
    if tests or metadata:
        tables.append((metadata, tests))
    if not tables:
        raise ValueError("no diagnostic table in the output")
    metadata, tests = tables[-1]
    for t in tests:
        for key in [k for k in t if k.endswith("_raw")]:
            del t[key]
    return {"metadata": metadata, "tests": tests}


def _status(result: str) -> str:
    word = (result or "").split()[0].lower() if (result or "").split() else ""
    return {"pass": "pass", "fail": "fail", "warn": "warn", "skip": "skip"}.get(word, word or "?")


def failures(doc: dict) -> list[str]:
    """One line per failed test (and per failed GPU of it), with DCGM's error text."""
    out = []
    for t in doc["tests"]:
        bad_gpus = [i for i, r in sorted(t["gpus"].items()) if _status(r) == "fail"]
        if _status(t["result"]) == "fail" or bad_gpus:
            where = f" on GPU {', '.join(map(str, bad_gpus))}" if bad_gpus else ""
            why = f": {t['error']}" if t.get("error") else ""
            out.append(f"{t['name']}{where} failed{why}")
    return out


def summary(doc: dict) -> str:
    """``N passed, M skipped (names), K warned`` and the DCGM and driver versions."""
    counts: dict[str, list[str]] = {}
    for t in doc["tests"]:
        counts.setdefault(_status(t["result"]), []).append(t["name"])
    parts = [f"{len(counts.get('pass', []))} passed"]
    if counts.get("skip"):
        parts.append(f"{len(counts['skip'])} skipped ({', '.join(counts['skip'])})")
    if counts.get("warn"):
        parts.append(f"{len(counts['warn'])} warned ({', '.join(counts['warn'])})")
    meta = doc["metadata"]
    versions = ", ".join(f"{k} {meta[k]}" for k in ("DCGM Version", "Driver Version Detected") if meta.get(k))
    return "; ".join(parts) + (f" ({versions})" if versions else "")
