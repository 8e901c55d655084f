"""module_utils/mnc_hostfile.py: the one hostfile parser, and the callers that share it."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from ansible_collections.mncluster.core.plugins.filter import mnc as mnc_filters
from ansible_collections.mncluster.core.plugins.module_utils import mnc_bench, mnc_hostfile, mnc_verify_mpi

TEXT = "# managed by mncluster\n10.0.0.1 slots=4\n\n10.0.0.2 slots=4 max_slots=8  # node 2\nnode3\n"


def test_hosts_slots_in_file_order():
    assert mnc_hostfile.parse_hostfile(TEXT) == [("10.0.0.1", 4), ("10.0.0.2", 4), ("node3", 1)]


def test_strict_refuses_an_unreadable_field_and_lenient_skips_it():
    with pytest.raises(ValueError, match="line 1"):
        mnc_hostfile.parse_hostfile("node slots:2\n")
    assert mnc_hostfile.parse_hostfile("node slots:2 slots=3\n", strict=False) == [("node", 3)]


def test_every_caller_uses_the_same_parser():
    assert mnc_bench.parse_hostfile is mnc_hostfile.parse_hostfile
    assert mnc_verify_mpi.parse_hostfile(TEXT) == [
        {"address": h, "slots": s} for h, s in mnc_hostfile.parse_hostfile(TEXT)
    ]
    assert mnc_filters.mnc_hostfile_hosts(TEXT) == [
        {"host": h, "slots": s} for h, s in mnc_hostfile.parse_hostfile(TEXT)
    ]


def test_the_filter_reads_leniently_as_verify_does():
    text = "node1 slots=2 cpu:4\nnode2 max-slots=8\n# x slots=9\n"
    with pytest.raises(ValueError):
        mnc_filters.mnc_hostfile_hosts(text)
    assert mnc_filters.mnc_hostfile_hosts(text, strict=False) == [
        {"host": "node1", "slots": 2},
        {"host": "node2", "slots": 1},
    ]
    assert [h["slots"] for h in mnc_filters.mnc_hostfile_hosts(text, strict=False)] == [
        n["slots"] for n in mnc_verify_mpi.parse_hostfile(text)
    ]


def test_artifact_override_filter_is_the_module_utils_rule():
    record = {"name": "openmpi", "version": "5.0.7", "filename": "a.tar.bz2", "url": "https://x/a"}
    record["sha256"] = "0" * 64
    override = {"openmpi": {"url": "http://y/b.tar.xz", "filename": "b.tar.xz", "sha256": "1" * 64}}
    merged = mnc_filters.mnc_artifact_source(record, override)
    assert merged == dict(record, **override["openmpi"])
    assert mnc_filters.mnc_artifact_source(record, {}) == record
    assert mnc_filters.mnc_artifact_source(record, None) == record
