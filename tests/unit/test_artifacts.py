"""module_utils/mnc_artifacts.py: override resolution, cache layout, manifest.

Real files in a temporary cache, real sha256 (hashlib); no network.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from ansible_collections.mncluster.core.plugins.module_utils.mnc_artifacts import (
    ArtifactError,
    artifact_relpath,
    build_manifest,
    format_missing,
    malformed_artifacts,
    missing_artifacts,
    parse_distribution_filename,
    render_manifest,
    resolve_artifact,
    verify_manifest,
)

PAYLOAD = b"openmpi source, pretend\n" * 100
SHA = hashlib.sha256(PAYLOAD).hexdigest()
OPENMPI = {
    "name": "openmpi",
    "version": "5.0.7",
    "filename": "openmpi-5.0.7.tar.bz2",
    "url": "https://download.open-mpi.org/release/open-mpi/v5.0/openmpi-5.0.7.tar.bz2",
    "sha256": SHA,
}


def stage(cache: Path, artifact: dict, payload: bytes = PAYLOAD) -> Path:
    path = cache / artifact_relpath(artifact)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)
    return path


def test_resolve_without_override_keeps_the_pin():
    got = resolve_artifact(OPENMPI, {})
    assert got == {
        "name": "openmpi",
        "version": "5.0.7",
        "filename": "openmpi-5.0.7.tar.bz2",
        "sha256": SHA,
        "source": OPENMPI["url"],
    }


def test_url_override_replaces_source_filename_and_sha256():
    debian = {
        "url": "http://deb.debian.org/debian/pool/main/o/openmpi/openmpi_5.0.7.orig.tar.xz",
        "filename": "openmpi_5.0.7.orig.tar.xz",
        "sha256": "97F10C04E9B9A1771DB3FD005009E4C07AFA3CE739F940E41EB0FC7397CB9473",
    }
    got = resolve_artifact(OPENMPI, {"openmpi": debian})
    assert got["source"] == debian["url"]
    assert got["filename"] == "openmpi_5.0.7.orig.tar.xz"
    # sha256 compared in lower case, as sha256sum prints it
    assert got["sha256"] == debian["sha256"].lower()
    assert artifact_relpath(got) == "openmpi/5.0.7/openmpi_5.0.7.orig.tar.xz"


def test_path_override_becomes_a_file_url_and_keeps_the_pinned_sha256(tmp_path):
    local = tmp_path / "openmpi-5.0.7.tar.bz2"
    got = resolve_artifact(OPENMPI, {"openmpi": {"path": str(local)}})
    assert got["source"] == f"file://{local}"
    assert got["sha256"] == SHA


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sha256": ""}, "no valid sha256"),
        ({"sha256": "abc"}, "no valid sha256"),
        ({"filename": "../../etc/passwd"}, "filename"),
        ({"filename": ".hidden"}, "filename"),
        ({"version": ""}, "version"),
        ({"name": "a/b"}, "artifact name"),
        ({"url": ""}, "neither url nor path"),
    ],
)
def test_malformed_records_are_refused(change, message):
    with pytest.raises(ArtifactError, match=message):
        resolve_artifact(dict(OPENMPI, **change), {})


def test_relative_path_and_unknown_override_keys_are_refused():
    with pytest.raises(ArtifactError, match="absolute"):
        resolve_artifact(OPENMPI, {"openmpi": {"path": "openmpi.tar.bz2"}})
    with pytest.raises(ArtifactError, match="unknown keys"):
        resolve_artifact(OPENMPI, {"openmpi": {"sha": SHA}})


def test_missing_lists_every_unstaged_artifact_with_the_stage_command(tmp_path):
    cache = tmp_path / "cache"
    good = resolve_artifact(OPENMPI, {})
    stage(cache, good)
    corrupt = resolve_artifact(dict(OPENMPI, name="pyenv", filename="pyenv.tar.gz"), {})
    stage(cache, corrupt, b"truncated")
    absent = resolve_artifact(dict(OPENMPI, name="cpython", filename="Python.tar.xz"), {})
    problems = missing_artifacts(str(cache), [good, corrupt, absent])
    assert [(a["name"], reason) for a, reason in problems] == [
        ("pyenv", "sha256 mismatch"),
        ("cpython", "missing"),
    ]
    text = format_missing(str(cache), problems, "ansible-playbook playbooks/stage.yml")
    assert "2 artifact(s) not staged" in text
    assert "pyenv 5.0.7 (pyenv.tar.gz" in text and "cpython" in text
    assert text.endswith("Stage them on a connected host: ansible-playbook playbooks/stage.yml")


def test_a_matching_local_file_override_counts_as_staged(tmp_path):
    local = tmp_path / "shared" / "openmpi-5.0.7.tar.bz2"
    local.parent.mkdir()
    local.write_bytes(PAYLOAD)
    art = resolve_artifact(OPENMPI, {"openmpi": {"path": str(local)}})
    assert missing_artifacts(str(tmp_path / "cache"), [art]) == []
    local.write_bytes(b"other")
    assert missing_artifacts(str(tmp_path / "cache"), [art])[0][1] == "sha256 mismatch"


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", ("numpy", "1.26.4")),
        ("cupy_cuda12x-13.6.0-cp311-cp311-manylinux2014_x86_64.whl", ("cupy_cuda12x", "13.6.0")),
        ("mpi4py-4.1.1.tar.gz", ("mpi4py", "4.1.1")),
        ("chainer-7.8.1.tar.gz", ("chainer", "7.8.1")),
        ("typing_extensions-4.12.2-py3-none-any.whl", ("typing_extensions", "4.12.2")),
        ("pkg-1.0-1-py3-none-any.whl", ("pkg", "1.0")),  # with a build tag
    ],
)
def test_distribution_file_names(filename, expected):
    assert parse_distribution_filename(filename) == expected


@pytest.mark.parametrize("filename", ["README", "numpy.whl", "chainer.tar.gz", "x-y.tar.gz"])
def test_non_distribution_file_names_are_refused(filename):
    with pytest.raises(ArtifactError):
        parse_distribution_filename(filename)


def test_manifest_lists_files_and_wheels_deterministically(tmp_path):
    cache = tmp_path / "cache"
    art = resolve_artifact(OPENMPI, {})
    stage(cache, art)
    wheels = cache / "wheels" / "python"
    wheels.mkdir(parents=True)
    (wheels / "numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl").write_bytes(b"n")
    (wheels / "chainer-7.8.1.tar.gz").write_bytes(b"c")
    (wheels / "pip-download.log").write_text("ignored")
    manifest = build_manifest(str(cache), [art], ["python"])
    assert manifest["format"] == 1
    files = [(e["kind"], e["name"], e["version"], e["file"]) for e in manifest["artifacts"]]
    assert files == [
        ("file", "openmpi", "5.0.7", "openmpi/5.0.7/openmpi-5.0.7.tar.bz2"),
        ("wheel", "chainer", "7.8.1", "wheels/python/chainer-7.8.1.tar.gz"),
        ("wheel", "numpy", "1.26.4", "wheels/python/numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl"),
    ]
    assert manifest["artifacts"][0]["sha256"] == SHA
    assert manifest["artifacts"][0]["source"] == OPENMPI["url"]
    assert manifest["artifacts"][1]["sha256"] == hashlib.sha256(b"c").hexdigest()
    # same cache, same bytes: an unchanged cache does not rewrite the manifest
    assert render_manifest(build_manifest(str(cache), [art], ["python"])) == render_manifest(manifest)
    assert json.loads(render_manifest(manifest)) == manifest


def test_manifest_refuses_a_file_that_does_not_match_its_pin(tmp_path):
    cache = tmp_path / "cache"
    art = resolve_artifact(OPENMPI, {})
    stage(cache, art, b"tampered")
    with pytest.raises(ArtifactError, match="expected " + SHA):
        build_manifest(str(cache), [art])


def test_manifest_keeps_earlier_entries_that_still_verify(tmp_path):
    cache = tmp_path / "cache"
    first = resolve_artifact(OPENMPI, {})
    stage(cache, first)
    earlier = build_manifest(str(cache), [first])
    cpython = dict(OPENMPI, name="cpython", version="3.11.14", filename="Python-3.11.14.tar.xz")
    other = resolve_artifact(cpython, {})
    stage(cache, other)
    merged = build_manifest(str(cache), [other], previous=earlier)
    assert sorted(e["name"] for e in merged["artifacts"]) == ["cpython", "openmpi"]
    # an earlier entry whose file changed or vanished is dropped
    (cache / artifact_relpath(first)).write_bytes(b"changed")
    merged = build_manifest(str(cache), [other], previous=earlier)
    assert [e["name"] for e in merged["artifacts"]] == ["cpython"]


def test_verify_manifest_reports_missing_and_changed_files(tmp_path):
    cache = tmp_path / "cache"
    art = resolve_artifact(OPENMPI, {})
    path = stage(cache, art)
    manifest = build_manifest(str(cache), [art])
    assert verify_manifest(str(cache), manifest) == []
    path.write_bytes(b"x")
    assert verify_manifest(str(cache), manifest)[0][1] == "sha256 mismatch"
    path.unlink()
    assert verify_manifest(str(cache), manifest)[0][1] == "missing"


def test_malformed_artifacts_names_every_bad_record():
    """roles/stack's matrix check: every record complete, filename without '/', sha256 hex or empty."""
    good = dict(OPENMPI)
    unpinned = dict(OPENMPI, sha256="")
    bad = [
        dict(OPENMPI, filename="sub/openmpi.tar.bz2"),
        dict(OPENMPI, sha256=SHA.upper()),
        {k: v for k, v in OPENMPI.items() if k != "url"},
        dict(OPENMPI, version=""),
        "not a record",
    ]
    assert malformed_artifacts([good, unpinned]) == []
    assert len(malformed_artifacts([good, *bad, unpinned])) == len(bad)
