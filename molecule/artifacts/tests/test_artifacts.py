"""What the offline converge left on the node, and that it made no request."""

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
from ansible_env import podman_hosts

# One `podman exec` per check (tests/unit/ansible_env.py).
testinfra_hosts = podman_hosts("all")

OPENMPI_ORIG_SHA256 = "97f10c04e9b9a1771db3fd005009e4c07afa3ce739f940e41eb0fc7397cb9473"
DEMO_SHA256 = "344a42a9d20d998176228620d8b3be05b976b56264a2b70651b71fd7cc735e13"
WORK = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "work"
CACHE = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "offline-cache"


# One round trip to the node (testinfra's ansible backend pays seconds per call).
PROBE = r"""
import hashlib, json, os, stat, tarfile
def sha(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.isfile(p) else None
src = "/opt/mnc-artifacts/openmpi_5.0.7.orig.tar.xz"
names = tarfile.open(src).getnames() if os.path.isfile(src) else []
demo = "/opt/mnc-artifacts/demo/mnc-demo.bin"
print(json.dumps({
    "interfaces": sorted(os.listdir("/sys/class/net")),
    "openmpi_sha256": sha(src),
    "openmpi_has_configure": "openmpi-5.0.7/configure" in names,
    "demo_sha256": sha(demo),
    "demo_mode": stat.S_IMODE(os.stat(demo).st_mode) if os.path.exists(demo) else None,
    "failed_dir_exists": os.path.exists("/opt/mnc-failed"),
}))
"""


@pytest.fixture(scope="module")
def node(host):
    cmd = host.run("python3 -c %s", PROBE)
    assert cmd.rc == 0, cmd.stderr
    return json.loads(cmd.stdout)


def test_node_has_no_network(node):
    # podman network "none": only the loopback interface exists.
    assert node["interfaces"] == ["lo"]


def test_openmpi_source_installed_from_the_bundle(node):
    assert node["openmpi_sha256"] == OPENMPI_ORIG_SHA256
    # a real OpenMPI source tree
    assert node["openmpi_has_configure"]


def test_site_artifact_installed_with_its_mode(node):
    assert node["demo_sha256"] == DEMO_SHA256
    assert node["demo_mode"] == 0o640


def test_failed_fetches_installed_nothing(node):
    assert not node["failed_dir_exists"]


def test_offline_converge_made_no_request():
    before = (WORK / "upstream.log.before-converge").read_text()
    after = (WORK / "upstream.log").read_text()
    assert after == before, f"requests during the offline converge: {after[len(before):]!r}"


def test_manifest_lists_what_was_staged():
    manifest = json.loads((CACHE / "manifest.json").read_text())
    by_name = {e["name"]: e for e in manifest["artifacts"]}
    assert by_name["openmpi"]["sha256"] == OPENMPI_ORIG_SHA256
    assert by_name["openmpi"]["file"] == "openmpi/5.0.7/openmpi_5.0.7.orig.tar.xz"
    assert by_name["openmpi"]["source"].startswith("http://deb.debian.org/debian/pool/main/o/openmpi/")
    assert by_name["mnc-demo"]["sha256"] == DEMO_SHA256
    # nothing in the cache but the manifest and the verified artifacts
    files = sorted(str(p.relative_to(CACHE)) for p in CACHE.rglob("*") if p.is_file())
    assert files == sorted(["manifest.json", *(e["file"] for e in manifest["artifacts"])])
