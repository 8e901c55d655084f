"""roles/nvidia_repo installs a pinned keyring package only as the file its sha256 names, and
refuses an unpinned one offline: a file that does not match its pin, or no pin offline, fails
the run before anything is installed, naming the variable. Real ansible-playbook on
localhost; both cases fail on the controller, before any task changes the node (no apt, no
network).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_env import run_playbook

KEYRING = Path("/usr/share/keyrings/cuda-archive-keyring.gpg")
DEBS = Path("/var/cache/mncluster/debs")

PLAY = """\
---
- name: NVIDIA's repository
  hosts: all
  gather_facts: true
  gather_subset: [min]
  roles:
    - role: stack
  tasks:
    - name: Set up the repository
      ansible.builtin.include_role:
        name: nvidia_repo
      vars:
        nvidia_repo_distro_id: debian12
"""


def run(tmp_path: Path, *extra: str) -> dict:
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    run, _ = run_playbook(play, "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}", *extra,
                          inventory="localhost,", env={"MNC_ARTIFACT_CACHE": str(tmp_path / "cache")},
                          timeout=300)  # fmt: skip
    results = run.results(host="localhost")
    failed = [r for r in results if r.get("failed")]
    changed = [r["_task"] for r in results if r.get("changed")]
    return {"failed": failed, "changed": changed, "stats": run.host_stats()}


def nothing_installed() -> bool:
    dpkg = subprocess.run(["dpkg", "-s", "cuda-keyring"], capture_output=True, text=True, check=False)
    return dpkg.returncode != 0 and not KEYRING.exists() and not list(DEBS.glob("cuda-keyring*"))


pytestmark = pytest.mark.skipif(
    KEYRING.exists() or not Path("/usr/bin/dpkg").exists(),
    reason="needs a Debian-family controller without NVIDIA's keyring installed",
)


@pytest.mark.battery("bad input: an unpinned CUDA keyring offline is refused", bound_s=150)
def test_an_unpinned_keyring_is_not_installed_offline(tmp_path):
    res = run(tmp_path, "-e", '{"stack_cuda_repo_keyring_sha256": {}, "mnc_offline": true}')
    assert res["stats"]["failures"] == 1 and res["changed"] == []
    (task,) = res["failed"]
    msg = task["msg"]
    assert "stack_cuda_repo_keyring_sha256.debian12 is not pinned" in msg and "offline" in msg
    assert "nothing was installed" in msg and "Packages" in msg
    assert nothing_installed()


@pytest.mark.battery("tamper: a CUDA keyring not matching its sha256 pin is not installed", bound_s=150)
def test_a_keyring_that_does_not_match_its_pin_is_not_installed(tmp_path):
    fake = tmp_path / "cuda-keyring_1.1-1_all.deb"
    fake.write_bytes(b"not NVIDIA's keyring package\n")
    pin = hashlib.sha256(b"the file that was measured\n").hexdigest()
    extra = {
        "stack_cuda_repo_keyring_sha256": {"debian12": pin},
        # The file comes from elsewhere (no network); the pin still has to match.
        "mnc_artifact_overrides": {"cuda-keyring": {"path": str(fake)}},
    }
    res = run(tmp_path, "-e", json.dumps(extra))
    # Only the controller's cache directory was made; nothing changed on the node.
    assert res["stats"]["failures"] == 1
    assert [n for n in res["changed"] if not n.endswith("Create the artifact's cache directory")] == []
    # get_url's own failure is rescued; the run ends with fetch's message.
    msg = res["failed"][-1]["msg"]
    assert "cuda-keyring" in msg and pin in msg and "nothing was installed" in msg
    assert not list((tmp_path / "cache").rglob("cuda-keyring*.deb"))
    assert nothing_installed()
