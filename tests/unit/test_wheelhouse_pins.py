"""roles/artifacts/tasks/wheelhouse.yml pins every file by the sha256 its stamp recorded at
download: a file altered in the cache or on the node is refused, naming it, and pip installs
the default set in hash-checking mode (--require-hashes).

Real ansible-playbook on localhost (the node), offline (mnc_offline: true) from a wheelhouse
planted in the cache as a download leaves it: a small real wheel made here, its stamp with the
inputs the role computes. No package index is needed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
import zipfile
from pathlib import Path

import pytest
from ansible_env import index_reachable, run_playbook, tamper_env

WHEEL = "demo_pin-1.0-py3-none-any.whl"

PLAY = """\
---
- name: Install from a pinned wheelhouse
  hosts: all
  gather_facts: false
  tasks:
    - name: Copy the wheelhouse and install from it
      ansible.builtin.include_role:
        name: artifacts
        tasks_from: wheelhouse
      vars:
        artifacts_wheelhouse_name: pins
        artifacts_wheelhouse_requirements: [demo-pin==1.0]
        artifacts_wheelhouse_dest: "{dest}"
        artifacts_wheelhouse_python: "{python}"
        artifacts_wheelhouse_pip_args: [--target, "{target}"]
"""

def make_wheel(path: Path, says: str) -> None:
    """A minimal, installable wheel of demo_pin 1.0 whose module holds ``says``."""
    files = {
        "demo_pin/__init__.py": f"SAYS = {says!r}\n",
        "demo_pin-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: demo-pin\nVersion: 1.0\n",
        "demo_pin-1.0.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append("demo_pin-1.0.dist-info/RECORD,,")
    files["demo_pin-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), text)


@pytest.fixture
def bed(tmp_path):
    cache = tmp_path / "cache"
    house = cache / "wheels" / "pins"
    house.mkdir(parents=True)
    make_wheel(house / WHEEL, "pinned")
    stamp = {
        # What wheelhouse.yml computes for the play's inputs (defaults for the rest).
        "spec": {
            "requirements": ["demo-pin==1.0"],
            "no_binary": [],
            "python_version": "3.11",
            "platforms": ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"],
            "implementation": "cp",
            "abi": "cp311",
        },
        "files": [WHEEL],
        "sha256": {WHEEL: hashlib.sha256((house / WHEEL).read_bytes()).hexdigest()},
    }
    (house / ".mncluster-wheelhouse.json").write_text(json.dumps(stamp))
    dest, target = tmp_path / "node" / "wheels", tmp_path / "node" / "site"
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(dest=dest, python=sys.executable, target=target))
    evil = tmp_path / "evil" / WHEEL
    evil.parent.mkdir()
    make_wheel(evil, "evil")

    def run(**env_extra: str) -> dict:
        run, _ = run_playbook(play, "-c", "local", "-e", "mnc_offline=true",
                              "-e", f"ansible_python_interpreter={sys.executable}",
                              inventory="localhost,", env={"MNC_ARTIFACT_CACHE": str(cache), **env_extra},
                              timeout=300)  # fmt: skip
        failures = [msg for _host, _task, msg in run.failures()]
        return {"failures": failures, "results": run.results()}

    def installed() -> str | None:
        module = target / "demo_pin" / "__init__.py"
        return module.read_text() if module.exists() else None

    def tamper(path: Path, after: str) -> dict:
        return tamper_env(tmp_path / "callback_plugins", after, path, evil)

    return {"run": run, "installed": installed, "house": house, "dest": dest, "evil": evil, "tamper": tamper}


def test_pinned_wheelhouse_installs_with_require_hashes(bed):
    res = bed["run"]()
    assert res["failures"] == [], res["failures"]
    assert bed["installed"]() == "SAYS = 'pinned'\n"
    pins = (bed["dest"] / ".mncluster-requirements.txt").read_text()
    digest = hashlib.sha256((bed["house"] / WHEEL).read_bytes()).hexdigest()
    assert f"demo-pin==1.0 --hash=sha256:{digest}\n" in pins.replace("demo_pin==", "demo-pin==")
    (install,) = [r for r in res["results"] if r["_task"].endswith("Install from the wheelhouse")]
    assert "--require-hashes" in install["cmd"]


@pytest.mark.battery("tamper: a wheel altered in the cache is refused (offline)", bound_s=600)
def test_a_wheel_altered_in_the_cache_is_refused(bed):
    (bed["house"] / WHEEL).write_bytes(bed["evil"].read_bytes())
    res = bed["run"]()
    (msg,) = res["failures"]
    assert WHEEL in msg and "Altered or damaged" in msg and "never copied to a node" in msg
    assert not (bed["dest"] / WHEEL).exists()
    assert bed["installed"]() is None


@pytest.mark.battery("tamper: a wheelhouse stamp without sha256 values is not trusted", bound_s=600)
def test_a_stamp_without_sha256_is_not_trusted(bed):
    stamp_path = bed["house"] / ".mncluster-wheelhouse.json"
    stamp = json.loads(stamp_path.read_text())
    del stamp["sha256"]
    stamp_path.write_text(json.dumps(stamp))
    res = bed["run"]()
    assert len(res["failures"]) == 1
    assert WHEEL in res["failures"][0] and bed["installed"]() is None


@pytest.mark.battery("tamper: a wheel altered on the node is refused", bound_s=600)
def test_a_wheel_altered_on_the_node_is_refused(bed):
    copy = bed["dest"] / WHEEL
    res = bed["run"](**bed["tamper"](copy, after="Copy the files that are missing or differ"))
    (msg,) = res["failures"]
    assert WHEEL in msg and str(bed["dest"]) in msg and "Nothing was installed" in msg
    assert bed["installed"]() is None
    # The next run copies the pinned file again and installs it.
    again = bed["run"]()
    assert again["failures"] == [] and bed["installed"]() == "SAYS = 'pinned'\n"


@pytest.mark.battery("tamper: pip --require-hashes refuses a wheel altered after the check", bound_s=600)
def test_pip_refuses_a_wheel_altered_after_the_check(bed):
    """--require-hashes: a file swapped between the node-side check and pip is refused by pip."""
    copy = bed["dest"] / WHEEL
    res = bed["run"](**bed["tamper"](copy, after="Write the hash-pinned requirements for pip on the node"))
    assert len(res["failures"]) == 1
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in json.dumps(res["results"])
    assert bed["installed"]() is None


ONLINE_PLAY = """\
---
- name: Build a wheelhouse
  hosts: all
  gather_facts: false
  tasks:
    - name: Build it
      ansible.builtin.include_role:
        name: artifacts
        tasks_from: wheelhouse
      vars:
        artifacts_wheelhouse_name: online
        artifacts_wheelhouse_requirements: [six==1.17.0]
"""


@pytest.mark.skipif(not index_reachable(), reason="the package index cannot be reached")
@pytest.mark.battery("tamper: online, a wheel altered in the cache is named and fetched again", bound_s=600)
def test_online_a_wheel_altered_in_the_cache_is_named_and_downloaded_again(tmp_path):
    play = tmp_path / "play.yml"
    play.write_text(ONLINE_PLAY)
    env = {"MNC_ARTIFACT_CACHE": str(tmp_path / "cache")}
    argv = ["-c", "local", "-e", f"ansible_python_interpreter={sys.executable}"]

    def run():
        proc, _ = run_playbook(play, *argv, inventory="localhost,", env=env, timeout=300)
        assert proc.returncode == 0, proc.tail(3000)
        return proc

    run()
    house = tmp_path / "cache" / "wheels" / "online"
    stamp = json.loads((house / ".mncluster-wheelhouse.json").read_text())
    (wheel,) = stamp["files"]
    assert stamp["sha256"][wheel] == hashlib.sha256((house / wheel).read_bytes()).hexdigest()
    (house / wheel).write_bytes(b"altered")
    said = [
        r["msg"]
        for r in run().results("Report the wheelhouse's files that differ from their stamp")
        if "msg" in r and r["_event"] != "runner_on_skipped"
    ]
    assert len(said) == 1 and wheel in said[0] and "downloaded again" in said[0]
    assert hashlib.sha256((house / wheel).read_bytes()).hexdigest() == stamp["sha256"][wheel]


SIX = "six-1.17.0-py2.py3-none-any.whl"
SIX_SHA256 = "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274"  # the index's file
PINNED_PLAY = """\
---
- name: Build a wheelhouse whose record pins a file's sha256
  hosts: all
  gather_facts: false
  vars:
    stack_pinned_wheelhouse:
      name: pinned
      requirements: [six==1.17.0]
      sha256: {"six-1.17.0-py2.py3-none-any.whl": "%s"}
  tasks:
    - name: Build it
      ansible.builtin.include_role:
        name: artifacts
        tasks_from: wheelhouse
      vars:
        artifacts_wheelhouse_name: pinned
        artifacts_wheelhouse_requirements: [six==1.17.0]
"""


@pytest.mark.skipif(not index_reachable(), reason="the package index cannot be reached")
@pytest.mark.battery("tamper: a download that is not the version matrix's sha256 pin is refused", bound_s=600)
def test_a_download_that_is_not_the_matrix_pin_is_refused(tmp_path):
    play = tmp_path / "play.yml"
    play.write_text(PINNED_PLAY % ("0" * 64))
    env = {"MNC_ARTIFACT_CACHE": str(tmp_path / "cache")}
    argv = ["-c", "local", "-e", f"ansible_python_interpreter={sys.executable}"]
    proc, _ = run_playbook(play, *argv, inventory="localhost,", env=env, timeout=300)
    assert proc.returncode != 0
    (_host, task, msg), *_ = proc.failures()
    assert task.endswith("Refuse a download whose sha256 is not the matrix's pin")
    assert f"downloaded {SIX} with sha256 {SIX_SHA256}" in msg
    assert "the version matrix pins " + "0" * 64 in msg and "Nothing was put in the cache" in msg
    assert not (tmp_path / "cache" / "wheels" / "pinned").exists()
    # the right pin: the wheelhouse is built
    play.write_text(PINNED_PLAY % SIX_SHA256)
    proc, _ = run_playbook(play, *argv, inventory="localhost,", env=env, timeout=300)
    assert proc.returncode == 0, proc.tail(3000)
    assert (tmp_path / "cache" / "wheels" / "pinned" / SIX).is_file()
