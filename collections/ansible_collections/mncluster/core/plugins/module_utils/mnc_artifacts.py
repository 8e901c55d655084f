"""Pure helpers for the mncluster artifact cache (roles/artifacts).

Cache layout (controller side)::

    <cache>/<name>/<version>/<filename>      one artifact, sha256-verified
    <cache>/wheels/<wheelhouse>/*.whl|*.tar.gz  pip wheelhouses (pip download)
    <cache>/manifest.json                    what is staged, written by stage.yml

These functions do no network access and are unit-tested on their own
(tests/unit/test_artifacts.py); mncluster.core.mnc_artifact_manifest is a thin
shell around them.
"""

import hashlib
import json
import os
import re

SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
MANIFEST_FORMAT = 1
WHEELHOUSE_SUFFIXES = (".whl", ".tar.gz", ".zip", ".tar.bz2")


class ArtifactError(ValueError):
    """A malformed artifact record or override."""


def _plain_name(value, what):
    value = str(value)
    if not value or "/" in value or value in (".", "..") or value.startswith("."):
        raise ArtifactError(f"{what} must be a plain, non-hidden file or directory name, got {value!r}")
    return value


def apply_override(artifact, overrides=None):
    """The artifact record with its per-artifact source override applied (no validation).

    The one place the override rule lives: the override's keys (``url``,
    ``path``, ``sha256``, ``filename``) replace the record's. Playbooks reach
    it as the ``mnc_artifact_source`` filter (plugins/filter/mnc.py);
    resolve_artifact validates its result.
    """
    merged = dict(artifact or {})
    merged.update((overrides or {}).get(merged.get("name", "")) or {})
    return merged


def resolve_artifact(artifact, overrides=None):
    """Apply a per-artifact source override and validate the result.

    ``artifact`` is ``{name, version, filename, url, sha256}``; ``overrides``
    maps names to ``{url | path, sha256, filename}``. Returns a new dict with
    ``name, version, filename, sha256`` and ``source`` (the URL, or
    ``file://<path>`` for a local file); roles/artifacts/tasks/fetch.yml
    applies the same override through the mnc_artifact_source filter.
    """
    if not isinstance(artifact, dict):
        raise ArtifactError(f"an artifact must be a mapping, got {artifact!r}")
    name = _plain_name(artifact.get("name", ""), "artifact name")
    override = (overrides or {}).get(name) or {}
    if not isinstance(override, dict):
        raise ArtifactError(f"mnc_artifact_overrides.{name} must be a mapping, got {override!r}")
    unknown = set(override) - {"url", "path", "sha256", "filename"}
    if unknown:
        raise ArtifactError(f"mnc_artifact_overrides.{name}: unknown keys {sorted(unknown)}")
    merged = apply_override(artifact, overrides)
    version = _plain_name(merged.get("version", ""), f"{name}: version")
    filename = _plain_name(merged.get("filename", ""), f"{name}: filename")
    sha256 = str(merged.get("sha256") or "").lower()
    if not SHA256_RE.match(sha256):
        raise ArtifactError(
            f"{name} {version}: no valid sha256 pinned ({sha256!r}); "
            "mncluster never installs an unverified download"
        )
    path = override.get("path") or ""
    if path:
        path = os.path.expanduser(str(path))
        if not os.path.isabs(path):
            raise ArtifactError(f"mnc_artifact_overrides.{name}.path must be absolute, got {path!r}")
        source = "file://" + path
    else:
        source = str(merged.get("url") or "")
        if not source:
            raise ArtifactError(f"{name} {version}: neither url nor path given")
    return {"name": name, "version": version, "filename": filename, "sha256": sha256, "source": source}


def malformed_artifacts(artifacts):
    """The records, of those given, that are incomplete or malformed: every artifact needs name,
    version, filename (no '/'), url, and sha256 empty or 64 lowercase hex digits."""
    bad = []
    for art in artifacts:
        art = art if isinstance(art, dict) else {}
        sha = str(art.get("sha256") or "")
        if not (
            str(art.get("name") or "")
            and str(art.get("version") or "")
            and str(art.get("filename") or "")
            and "/" not in str(art.get("filename") or "")
            and str(art.get("url") or "")
            and (not sha or re.fullmatch(r"[0-9a-f]{64}", sha))
        ):
            bad.append(art)
    return bad


def artifact_relpath(artifact):
    """``<name>/<version>/<filename>`` of a resolved artifact, relative to the cache."""
    return "/".join(
        (
            _plain_name(artifact["name"], "artifact name"),
            _plain_name(artifact["version"], "version"),
            _plain_name(artifact["filename"], "filename"),
        )
    )


def sha256_file(path, blocksize=1 << 20):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(blocksize), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_distribution_filename(filename):
    """(project, version) of a wheel (PEP 427) or an sdist file name.

    >>> parse_distribution_filename("numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.whl")
    ('numpy', '1.26.4')
    >>> parse_distribution_filename("chainer-7.8.1.tar.gz")
    ('chainer', '7.8.1')
    """
    if filename.endswith(".whl"):
        parts = filename[: -len(".whl")].split("-")
        if len(parts) not in (5, 6):
            raise ArtifactError(f"not a wheel file name: {filename!r}")
        return parts[0], parts[1]
    for suffix in (".tar.gz", ".tar.bz2", ".zip"):
        if filename.endswith(suffix):
            stem = filename[: -len(suffix)]
            project, sep, version = stem.rpartition("-")
            if not sep or not project or not version or not version[0].isdigit():
                raise ArtifactError(f"not an sdist file name: {filename!r}")
            return project, version
    raise ArtifactError(f"not a Python distribution file: {filename!r}")


def missing_artifacts(cache, artifacts, checksum=sha256_file):
    """Which resolved artifacts are not staged with the right sha256.

    Returns a list of ``(artifact, reason)``; reason is ``missing`` or
    ``sha256 mismatch``. A ``file://`` source counts as staged when that file
    matches (fetch copies it into the cache without network access).
    """
    problems = []
    for artifact in artifacts:
        path = os.path.join(cache, artifact_relpath(artifact))
        if not os.path.isfile(path) and artifact["source"].startswith("file://"):
            path = artifact["source"][len("file://"):]
        if not os.path.isfile(path):
            problems.append((artifact, "missing"))
        elif checksum(path) != artifact["sha256"]:
            problems.append((artifact, "sha256 mismatch"))
    return problems


def format_missing(cache, problems, stage_command):
    """The error text for artifacts that are not staged (one line each)."""
    lines = [f"{len(problems)} artifact(s) not staged in {cache}:"]
    for artifact, reason in problems:
        lines.append(
            f"  - {artifact['name']} {artifact['version']} ({artifact['filename']}, "
            f"sha256 {artifact['sha256']}): {reason}"
        )
    lines.append(f"Stage them on a connected host: {stage_command}")
    return "\n".join(lines)


def build_manifest(cache, artifacts, wheelhouses=(), previous=None, checksum=sha256_file):
    """The manifest document of a staged cache.

    ``artifacts``: resolved artifacts (each must be in the cache with its
    pinned sha256, else ArtifactError). ``wheelhouses``: names of directories
    under ``<cache>/wheels/``; every distribution file in them is listed with
    its sha256 and ``source: pypi``. Output is deterministic (sorted, no
    timestamps) so that an unchanged cache rewrites nothing. Entries of a
    ``previous`` manifest (an earlier stage run, e.g. of other components)
    are kept when their file is still in the cache with the same sha256.
    """
    entries = []
    for artifact in artifacts:
        rel = artifact_relpath(artifact)
        path = os.path.join(cache, rel)
        if not os.path.isfile(path):
            raise ArtifactError(f"{artifact['name']} {artifact['version']}: {path} is not in the cache")
        actual = checksum(path)
        if actual != artifact["sha256"]:
            raise ArtifactError(
                f"{artifact['name']} {artifact['version']}: {path} has sha256 {actual}, "
                f"expected {artifact['sha256']}"
            )
        entries.append(
            {
                "kind": "file",
                "name": artifact["name"],
                "version": artifact["version"],
                "file": rel,
                "sha256": actual,
                "source": artifact["source"],
            }
        )
    for wheelhouse in sorted(set(wheelhouses)):
        directory = os.path.join(cache, "wheels", _plain_name(wheelhouse, "wheelhouse name"))
        if not os.path.isdir(directory):
            raise ArtifactError(f"wheelhouse {wheelhouse}: {directory} does not exist")
        found = False
        for filename in sorted(os.listdir(directory)):
            if not filename.endswith(WHEELHOUSE_SUFFIXES):
                continue
            found = True
            project, version = parse_distribution_filename(filename)
            entries.append(
                {
                    "kind": "wheel",
                    "wheelhouse": wheelhouse,
                    "name": project,
                    "version": version,
                    "file": f"wheels/{wheelhouse}/{filename}",
                    "sha256": checksum(os.path.join(directory, filename)),
                    "source": "pypi",
                }
            )
        if not found:
            raise ArtifactError(f"wheelhouse {wheelhouse}: {directory} holds no distributions")
    listed = {entry["file"] for entry in entries}
    stale = {id(entry) for entry, _ in verify_manifest(cache, previous or {}, checksum)}
    for entry in (previous or {}).get("artifacts", []):
        if entry.get("file") not in listed and id(entry) not in stale:
            entries.append(entry)
            listed.add(entry["file"])
    entries.sort(key=_entry_key)
    return {"format": MANIFEST_FORMAT, "artifacts": entries}


def _entry_key(entry):
    return (entry["kind"], entry.get("wheelhouse", ""), entry["name"].lower(), entry["version"],
            entry["file"])


def render_manifest(manifest):
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def verify_manifest(cache, manifest, checksum=sha256_file):
    """Entries of a manifest whose file is missing or differs: [(entry, reason)]."""
    problems = []
    for entry in manifest.get("artifacts", []):
        path = os.path.join(cache, entry["file"])
        if not os.path.isfile(path):
            problems.append((entry, "missing"))
        elif checksum(path) != entry["sha256"]:
            problems.append((entry, "sha256 mismatch"))
    return problems
