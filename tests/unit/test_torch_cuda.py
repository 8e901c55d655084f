"""PyTorch's two builds: the CUDA build on GPU nodes, the CPU build on CPU nodes, and the
driver the CUDA build needs.

* The pins of roles/stack/defaults/main/torch.yml: every wheel of the CUDA build's closure
  pinned whole (name, version, file, sha256, size) and, against the package index's metadata
  (marked like the other tests that reach the index: skipped where it cannot be reached), that
  these pins are exactly what pip installs for torch on the nodes' Python: every dependency
  pinned, nothing pinned that nothing needs, each file the one the index lists with that sha256.
  No wheel is downloaded: the index's metadata files (PEP 658), or the wheel's zip directory and
  METADATA read by HTTP range requests where the index has none.
* One real ansible-playbook on localhost renders, per case, what the chainer role installs
  (its wheelhouses and pins in GPU and CPU mode, from its own vars and defaults over the stack's)
  and runs the stack role's matrix check and the chainer role's input check (validate.yml, with
  the look's driver reading set by the case): a driver older than torch's CUDA needs is refused
  before anything is installed, naming the setting to change.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
import yaml
from ansible_env import CASE_FACTS, CASE_PLAY, CASE_REFUSAL, index_reachable, run_playbook
from mnc_battery import record
from packaging import tags
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version
from pip._internal.models.index import PyPI

ROOT = Path(__file__).resolve().parents[2]
TORCH = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main" / "torch.yml").read_text())
CUDA = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main" / "cuda.yml").read_text())
VERSION = TORCH["stack_torch_version"]
TORCH_WHEEL = TORCH["stack_torch_cuda_wheel"].replace("{{ stack_torch_version }}", VERSION)
WHEELS = TORCH["stack_torch_cuda_wheels"]
DEPENDENCIES = [Requirement(r) for r in TORCH["stack_torch_dependencies"]]
FLOOR = TORCH["stack_torch_cuda_driver_min_version"]


# ---- the pins, as the matrix holds them ---------------------------------------------------------


def test_every_wheel_of_the_cuda_build_is_pinned_whole():
    names = [canonicalize_name(w["name"]) for w in WHEELS]
    assert len(names) == len(set(names)), names
    shared = {canonicalize_name(r.name) for r in DEPENDENCIES}
    assert not shared & set(names), "a CPU dependency pinned twice"
    for w in WHEELS:
        name, version, _build, _tags = parse_wheel_filename(w["filename"])
        assert (name, version) == (canonicalize_name(w["name"]), Version(w["version"])), w
        assert re.fullmatch(r"[0-9a-f]{64}", w["sha256"]), w
        assert isinstance(w["size"], int) and w["size"] > 0, w
    assert parse_wheel_filename(TORCH_WHEEL)[:2] == ("torch", Version(VERSION))
    assert re.fullmatch(r"[0-9a-f]{64}", TORCH["stack_torch_cuda_sha256"])
    # The CUDA the build needs is the cuda-toolkit its closure pins; the matrix's driver runs it.
    (toolkit,) = [w for w in WHEELS if w["name"] == "cuda-toolkit"]
    assert Version(toolkit["version"]).release[:2] == Version(TORCH["stack_torch_cuda_version"]).release
    assert Version(CUDA["stack_cuda_driver_version"]) >= Version(FLOOR)


# ---- the pins, against the package index's metadata (no wheel downloaded) -----------------------

# The index pip downloads the wheelhouse from (the controller's own pip; PIP_INDEX_URL where set).
INDEX = (os.environ.get("PIP_INDEX_URL") or PyPI.simple_url).rstrip("/")
# The nodes' Python (CPython 3.11) on Linux x86_64 with glibc 2.28 or later.
PLATFORMS = [f"manylinux_2_{i}_x86_64" for i in range(28, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]
TAGS = list(tags.cpython_tags((3, 11), abis=["cp311"], platforms=PLATFORMS)) + list(
    tags.compatible_tags((3, 11), "cp311", PLATFORMS)
)
RANK = {tag: i for i, tag in enumerate(TAGS)}
ENVIRONMENT = {
    "python_version": "3.11",
    "python_full_version": "3.11.13",
    "platform_system": "Linux",
    "sys_platform": "linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}
# torch asks for setuptools>=77 to build C++ extensions; both builds leave it out on purpose
# (it breaks Chainer 7's import): torch.yml says so.
LEFT_OUT = {"setuptools"}


def _get(url: str, headers: dict | None = None) -> bytes:
    for attempt in range(3):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=60) as r:
                return r.read()
        except urllib.error.HTTPError:
            raise
        except OSError:
            if attempt == 2:
                raise
            time.sleep(2)
    raise AssertionError("unreachable")


class _Ranged:
    """A wheel on the index read by HTTP range requests: only its zip directory and METADATA."""

    def __init__(self, url: str, size: int):
        self.url, self.size, self.pos = url, size, 0

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=0):
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def read(self, n=-1):
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        data = _get(self.url, {"Range": f"bytes={self.pos}-{end - 1}"})
        assert len(data) == end - self.pos, "the index answered no range request"
        self.pos = end
        return data


def _files(name: str) -> list[dict]:
    accept = {"Accept": "application/vnd.pypi.simple.v1+json"}
    return json.loads(_get(f"{INDEX}/{canonicalize_name(name)}/", accept))["files"]


def _wheel(name: str, version: str) -> dict:
    """The file pip takes for ``name==version`` on the nodes: the best-ranked tag."""
    found = []
    for f in _files(name):
        if not f["filename"].endswith(".whl") or f.get("yanked"):
            continue
        _n, v, _b, file_tags = parse_wheel_filename(f["filename"])
        ranks = [RANK[t] for t in file_tags if t in RANK]
        if ranks and v == Version(version):
            found.append((min(ranks), f))
    assert found, f"the index has no wheel of {name}=={version} for CPython 3.11 on Linux x86_64"
    return min(found, key=lambda x: x[0])[1]


def _requires(f: dict) -> list[str]:
    try:
        text = _get(f["url"] + ".metadata").decode()
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise
        archive = zipfile.ZipFile(_Ranged(f["url"], f["size"]))
        (meta,) = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        text = archive.read(meta).decode()
    return Parser().parsestr(text).get_all("Requires-Dist") or []


@pytest.mark.skipif(not index_reachable(), reason="the package index cannot be reached")
def test_the_cuda_build_pins_are_what_pip_installs_from_the_index():
    pins = {
        canonicalize_name(w["name"]): (w["version"], w["filename"], w["sha256"], w["size"]) for w in WHEELS
    }
    pins["torch"] = (VERSION, TORCH_WHEEL, TORCH["stack_torch_cuda_sha256"], None)
    for r in DEPENDENCIES:
        (spec,) = r.specifier
        pins[canonicalize_name(r.name)] = (spec.version, None, None, None)
    problems, needed, extras = [], {"torch"}, {}
    todo = [Requirement(f"torch=={VERSION}")]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in LEFT_OUT:
            continue
        if name not in pins:
            problems.append(f"{req} is not pinned")
            continue
        version, filename, sha256, size = pins[name]
        if not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req} does not accept the pin {name}=={version}")
        new = ({""} | set(req.extras)) - extras.get(name, set())
        if not new:
            continue
        first = name not in extras
        extras[name] = extras.get(name, set()) | new
        needed.add(name)
        f = _wheel(name, version)
        if first and filename is not None:
            if f["filename"] != filename:
                problems.append(f"{name}=={version}: pip takes {f['filename']}, the pin names {filename}")
            if f["hashes"].get("sha256") != sha256:
                problems.append(
                    f"{filename}: the index lists sha256 {f['hashes'].get('sha256')}, pinned {sha256}"
                )
            if size is not None and f["size"] != size:
                problems.append(f"{filename}: the index lists {f['size']} bytes, pinned {size}")
        for text in _requires(f):
            dep = Requirement(text)
            if dep.marker is None or any(dep.marker.evaluate({**ENVIRONMENT, "extra": e}) for e in new):
                todo.append(dep)
    problems += [f"{n} is pinned but nothing installs it" for n in sorted(set(pins) - needed)]
    assert not problems, "\n".join(problems)


# ---- what the roles render, and what they refuse --------------------------------------------------

CASE_TASKS = (
    """\
- name: "Load the matrix and the chainer role's values once (the case's facts outrank them)"
  ansible.builtin.include_vars:
    file: "{{ item }}"
  loop: "{{ query('ansible.builtin.fileglob', root ~ '/roles/stack/defaults/main/*.yml')
            + [root ~ '/roles/chainer/defaults/main.yml', root ~ '/roles/chainer/vars/main.yml'] }}"
  when: __chainer_torch_version is not defined
"""
    + CASE_FACTS
    + """\
- name: "Check and render ({{ case.name }})"
  block:
    - name: "The stack role's matrix check ({{ case.name }})"
      ansible.builtin.include_role:
        name: stack
        tasks_from: check
    - name: "The chainer role's input check, the look's driver reading set by the case ({{ case.name }})"
      ansible.builtin.include_role:
        name: chainer
        tasks_from: validate
      when: case.vars.__chainer_look_result is defined
    - name: "Write what the chainer role installs ({{ case.name }})"
      ansible.builtin.copy:
        dest: "{{ case_out }}/{{ case.name }}.json"
        content: >-
          {{ {'torch': __chainer_torch, 'version': __chainer_torch_version,
              'wheelhouses': __chainer_wheelhouses, 'links': __chainer_links} | to_json }}
        mode: "0644"
"""
    + CASE_REFUSAL
)

OLD_DRIVER = {"stack_cuda_driver_branch": "570", "stack_cuda_driver_version": "570.195.03"}
DEFAULT_DRIVER = {k: CUDA[k] for k in OLD_DRIVER}
# The look of validate.yml as a node answers it (the probe ran, our mpicc found), with the
# loaded driver the case names.
LOOK = {"mpicc": True, "errors": [], "unsatisfied": [], "home": "/root"}


def _case(name, torch, gpu, accelerator="auto", driver=None, loaded=None):
    facts = {
        "chainer_torch": torch,
        "chainer_use_gpu": gpu,
        "mnc_accelerator": accelerator,
        **(driver or DEFAULT_DRIVER),
    }
    if loaded is not None:
        facts |= {
            "chainer_python": sys.executable,
            "chainer_user": "root",
            "chainer_openmpi_prefix": "/nonexistent",
            "ansible_become_method": "su",
            "__chainer_look_result": {**LOOK, "nvidia_driver": loaded},
        }
    return {"name": name, "vars": facts}


CASES = [
    _case("cpu", torch=True, gpu=False, accelerator="cpu"),
    _case("gpu", torch=True, gpu=True, accelerator="gpu"),
    _case("gpu-without-torch", torch=False, gpu=True),
    _case("old-driver", torch=True, gpu=True, driver=OLD_DRIVER),
    _case("old-driver-without-torch", torch=False, gpu=True, driver=OLD_DRIVER),
    _case("old-driver-cpu-only", torch=True, gpu=False, accelerator="cpu", driver=OLD_DRIVER),
    _case("node-driver-too-old", torch=True, gpu=True, loaded="535.288.01"),
    _case("node-driver-new-enough", torch=True, gpu=True, loaded="580.95.05"),
    _case("node-without-driver-reading", torch=True, gpu=True, loaded=""),
    _case("node-driver-too-old-cpu-mode", torch=True, gpu=False, accelerator="cpu", loaded="535.288.01"),
]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("torch-cases")
    out = tmp / "out"
    out.mkdir()
    (tmp / "hosts").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    )
    (tmp / "case.yml").write_text(CASE_TASKS)
    (tmp / "play.yml").write_text(CASE_PLAY.format(title="PyTorch's builds and driver"))
    extra = json.dumps({"cases": CASES, "case_out": str(out), "root": str(ROOT)})
    start = time.monotonic()
    proc, _ = run_playbook(tmp / "play.yml", "-e", extra, inventory=tmp / "hosts", timeout=600)
    assert proc.returncode == 0, proc.tail(9000)
    results = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert set(results) == {c["name"] for c in CASES}, proc.stdout[-4000:]
    return results, time.monotonic() - start


def test_gpu_mode_installs_the_cuda_build_from_its_own_wheelhouse(rendered):
    results, _ = rendered
    gpu, cpu = results["gpu"], results["cpu"]
    assert "failed" not in gpu and "failed" not in cpu, (gpu, cpu)
    cuda_pins = [f"{w['name']}=={w['version']}" for w in WHEELS]
    assert gpu["torch"] == [f"torch==={VERSION}", *TORCH["stack_torch_dependencies"], *cuda_pins]
    assert gpu["version"] == VERSION
    assert [w["name"] for w in gpu["wheelhouses"]] == ["python", "cuda", "torch_cuda"]
    (house,) = [w for w in gpu["wheelhouses"] if w["name"] == "torch_cuda"]
    assert house["gpu_only"] is True and house["requirements"] == gpu["torch"]
    assert house["sha256"] == {TORCH_WHEEL: TORCH["stack_torch_cuda_sha256"]} | {
        w["filename"]: w["sha256"] for w in WHEELS
    }
    # every wheel's tags are among the platforms pip is given (the wheelhouse adds the record's)
    platforms = set(house["platforms"])
    for filename in [TORCH_WHEEL] + [w["filename"] for w in WHEELS]:
        assert {t.platform for t in parse_wheel_filename(filename)[3]} & (platforms | {"any"}), filename
    assert not any(link.endswith("/torch") for link in gpu["links"]), gpu["links"]
    # CPU mode: the +cpu build from the torch wheelhouse, nothing of the CUDA build
    assert cpu["torch"] == [f"torch=={VERSION}+cpu", *TORCH["stack_torch_dependencies"]]
    assert cpu["version"] == f"{VERSION}+cpu"
    assert [w["name"] for w in cpu["wheelhouses"]] == ["python", "torch"]
    assert not any(link.endswith("/torch_cuda") for link in cpu["links"]), cpu["links"]
    off = results["gpu-without-torch"]
    assert (
        off["torch"] == []
        and off["version"] == ""
        and [w["name"] for w in off["wheelhouses"]] == ["python", "cuda"]
    )


def test_a_driver_too_old_for_torchs_cuda_is_refused_naming_the_setting(rendered):
    results, seconds = rendered
    matrix = results["old-driver"].get("failed", "")
    node = results["node-driver-too-old"].get("failed", "")
    refused_matrix = all(
        w in matrix
        for w in (
            "driver 570.195.03",
            "stack_cuda_driver_version",
            FLOOR,
            "chainer_torch: false",
            "stack_torch_cuda_driver_min_version",
        )
    )
    refused_node = all(
        w in node for w in ("535.288.01", FLOOR, "stack_cuda_driver_version", "chainer_torch: false")
    )
    record(
        "preflight: a driver too old for torch's CUDA build (stack_cuda_driver_version)",
        refused_matrix,
        seconds,
        where="tests/unit/test_torch_cuda.py",
    )
    record(
        "chainer: a loaded driver too old for torch's CUDA build, before the install",
        refused_node,
        seconds,
        where="tests/unit/test_torch_cuda.py",
    )
    assert refused_matrix, matrix
    assert refused_node, node
    for fine in (
        "old-driver-without-torch",
        "old-driver-cpu-only",
        "node-driver-new-enough",
        "node-without-driver-reading",
        "node-driver-too-old-cpu-mode",
    ):
        assert "failed" not in results[fine], (fine, results[fine])
