"""roles/rdma decided, rendered and checked for Debian 12 and 13, Ubuntu 22.04 and 24.04 without an adapter.

The real task files run with ansible-playbook on localhost: tasks/plan.yml (pure: decides and
refuses) and tasks/files.yml with the role's render hook (rdma_render_root), which writes the
limits, the systemd default and the module list under a scratch directory; each case injects a
distribution, a PCI listing and the knobs. tasks/check.yml runs against stand-in ibv_devinfo
output and a stand-in /sys/module. Bad input is refused with a message before anything changes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from ansible_env import CASE_FACTS, CASE_REFUSAL, run_cases, run_playbook

ROOT = Path(__file__).resolve().parents[2]
DISTROS = ["debian12", "debian13", "ubuntu2204", "ubuntu2404"]
PACKAGES = ["rdma-core", "ibverbs-providers", "ibverbs-utils", "rdmacm-utils", "infiniband-diags", "perftest"]
LIMITS = "etc/security/limits.d/90-mncluster-memlock.conf"
SYSTEMD = "etc/systemd/system.conf.d/90-mncluster-memlock.conf"
MODULES = "etc/modules-load.d/mncluster-nvidia-peermem.conf"

GPUS = "07:00.0 0302: 10de:20b0 (rev a1)\n0f:00.0 0302: 10de:20b0 (rev a1)\n"
IB = GPUS + "0c:00.0 0207: 15b3:101b\n"
ROCE = GPUS + "e1:00.0 0200: 15b3:101d\ne1:00.1 0200: 15b3:101d\n"
INVENTORY = "localhost ansible_connection=local ansible_python_interpreter={python}\n"

# Every fact a case may change, at its default: the cases run one after the other in one play
# (set as facts, which outrank the role's vars), so each sets them all.
BASE = {
    "mnc_use_gpu": True,
    "rdma_mode": "none",
    "rdma_memlock": "unlimited",
    "rdma_memlock_systemd": True,
    "rdma_gpudirect": True,
    "__rdma_lspci": {"stdout": ""},
    "__rdma_checked": {},
}
CASE_TASKS = CASE_FACTS + """\
- name: "Decide and render ({{ case.name }})"
  block:
    - name: "Decide ({{ case.name }})"
      ansible.builtin.include_role:
        name: rdma
        tasks_from: plan
        public: true
    - name: "Render ({{ case.name }})"
      ansible.builtin.include_role:
        name: rdma
        tasks_from: files
      vars:
        rdma_render_root: "{{ case_out }}/{{ case.name }}"
    - name: "Write what was decided ({{ case.name }})"
      ansible.builtin.copy:
        dest: "{{ case_out }}/{{ case.name }}.json"
        content: >-
          {{ {'plan': __rdma_plan, 'enabled': __rdma_enabled, 'record': __rdma_record,
              'packages': __rdma_packages} | to_json }}
        mode: "0644"
""" + CASE_REFUSAL


def _case(name, distro="debian12", **knobs):
    return {"name": name, "vars": {**BASE, "__rdma_distro_id": distro, **knobs}}


CASES = [
    *[_case(f"ib-{d}", d, rdma_mode="infiniband") for d in DISTROS],
    _case("auto-ib", "ubuntu2204", rdma_mode="auto", __rdma_lspci={"stdout": IB}),
    _case("auto-roce", "ubuntu2404", rdma_mode="auto", __rdma_lspci={"stdout": ROCE}),
    _case("auto-nothing", "debian12", rdma_mode="auto", __rdma_lspci={"stdout": GPUS}),
    _case("cpu-default", "debian12", mnc_use_gpu=False),
    _case("cpu-ib", "debian12", mnc_use_gpu=False, rdma_mode="infiniband"),
    _case("no-gpudirect", "ubuntu2204", rdma_mode="roce", rdma_gpudirect=False),
    _case(
        "memlock-kib",
        "ubuntu2404",
        rdma_mode="infiniband",
        rdma_memlock="67108864",
        rdma_memlock_systemd=False,
    ),
    _case("memlock-left", "debian12", rdma_mode="infiniband", rdma_memlock=""),
    # refused
    _case("memlock-bad", "debian12", rdma_mode="infiniband", rdma_memlock="64G"),
    _case("distro-unknown", "fedora40"),
]


@pytest.fixture(scope="module")
def decided(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rdma")
    results = run_cases(tmp, "Decide the RDMA path, case by case", CASE_TASKS, CASES)
    return results, tmp / "out"


def _states(got):
    return {name: svc["state"] for name, svc in got["plan"].items()}


@pytest.mark.parametrize("distro", DISTROS)
def test_a_declared_infiniband_path_renders_everything(decided, distro):
    results, out = decided
    got = results[f"ib-{distro}"]
    assert "failed" not in got, got
    assert _states(got) == {"rdma": "enabled", "memlock": "enabled", "nvidia-peermem": "enabled"}
    assert got["plan"]["rdma"]["reason"] == "declared (rdma_mode: infiniband)"
    assert got["packages"] == PACKAGES
    root = out / f"ib-{distro}"
    limits = (root / LIMITS).read_text()
    assert limits.startswith("# managed by mncluster (roles/rdma)")
    body = [line.split() for line in limits.splitlines() if line and not line.startswith("#")]
    assert body == [
        ["*", "soft", "memlock", "unlimited"],
        ["*", "hard", "memlock", "unlimited"],
        ["root", "soft", "memlock", "unlimited"],
        ["root", "hard", "memlock", "unlimited"],
    ]
    assert "[Manager]\nDefaultLimitMEMLOCK=infinity\n" in (root / SYSTEMD).read_text()
    modules = [
        line for line in (root / MODULES).read_text().splitlines() if line and not line.startswith("#")
    ]
    assert modules == ["nvidia-peermem"]


def test_auto_finds_infiniband_and_roce_adapters(decided):
    results, _out = decided
    ib, roce, nothing = results["auto-ib"], results["auto-roce"], results["auto-nothing"]
    assert ib["plan"]["rdma"] == {
        "state": "enabled",
        "reason": "rdma_mode: auto found 1 InfiniBand adapter(s) on the PCI bus",
    }
    assert roce["plan"]["rdma"]["state"] == "enabled"
    assert (
        "found 2 Mellanox/NVIDIA Ethernet adapter(s) on the PCI bus (RoCE)" in roce["plan"]["rdma"]["reason"]
    )
    assert _states(nothing) == {"rdma": "absent", "memlock": "absent", "nvidia-peermem": "absent"}
    assert "auto found no RDMA adapter" in nothing["plan"]["rdma"]["reason"]


def test_a_cpu_node_is_left_alone_with_the_reasons_recorded(decided):
    results, out = decided
    record = results["cpu-default"]["record"]
    assert record == {
        "rdma": {"state": "absent", "reason": "rdma_mode: none (the default): no InfiniBand/RoCE path"},
        "memlock": {
            "state": "absent",
            "reason": "no RDMA path: rdma_mode: none (the default): no InfiniBand/RoCE path",
        },
        "nvidia-peermem": {"state": "skipped", "reason": "CPU mode (mnc_use_gpu false): no GPUDirect RDMA"},
    }
    assert not any((out / "cpu-default" / f).exists() for f in (LIMITS, SYSTEMD, MODULES))


def test_a_cpu_node_with_infiniband_gets_the_path_but_no_gpudirect(decided):
    results, out = decided
    got = results["cpu-ib"]
    assert _states(got) == {"rdma": "enabled", "memlock": "enabled", "nvidia-peermem": "skipped"}
    assert (out / "cpu-ib" / LIMITS).is_file() and not (out / "cpu-ib" / MODULES).exists()


def test_gpudirect_turned_off(decided):
    results, out = decided
    got = results["no-gpudirect"]
    assert got["plan"]["nvidia-peermem"] == {
        "state": "absent",
        "reason": "turned off (rdma_gpudirect: false): NCCL stages GPU buffers through host memory",
    }
    assert not (out / "no-gpudirect" / MODULES).exists()


def test_memlock_in_kib_and_left_alone(decided):
    results, out = decided
    limits = (out / "memlock-kib" / LIMITS).read_text()
    assert "*    hard memlock 67108864" in limits
    assert not (out / "memlock-kib" / SYSTEMD).exists()
    left = results["memlock-left"]["plan"]["memlock"]
    assert left == {"state": "absent", "reason": "rdma_memlock is empty: the limits are left as they are"}
    assert not (out / "memlock-left" / LIMITS).exists()


def test_a_memlock_limits_conf_cannot_take_is_refused(decided):
    msg = decided[0]["memlock-bad"]["failed"]
    assert "rdma_memlock is '64G'" in msg and "Nothing was changed" in msg


def test_a_distribution_without_packages_is_refused_naming_it(decided):
    results, out = decided
    msg = results["distro-unknown"]["failed"]
    assert "runs fedora40" in msg and "debian12, debian13, ubuntu2204, ubuntu2404" in msg, msg
    assert "Nothing was changed" in msg
    assert not (out / "distro-unknown").exists()


# --- the check, against stand-in ibv_devinfo output ----------------------------

IBV_ACTIVE = """\
hca_id:\tmlx5_0
\ttransport:\t\t\tInfiniBand (0)
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tlink_layer:\t\tInfiniBand
"""
IBV_DOWN = IBV_ACTIVE.replace("PORT_ACTIVE (4)", "PORT_DOWN (1)")
CHECK_PLAY = """\
- name: The RDMA check
  hosts: localhost
  gather_facts: false
  roles:
    - role: stack
  vars:
    rdma_mode: infiniband
    mnc_use_gpu: true
  tasks:
    - name: Decide
      ansible.builtin.include_role:
        name: rdma
        tasks_from: plan
        public: true
      vars:
        __rdma_distro_id: debian12
    - name: Check
      ansible.builtin.include_role:
        name: rdma
        tasks_from: check
      vars:
        __rdma_sys_module: "{{ sys_module }}"
    - name: Write the record
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ __rdma_record | to_json }}"
        mode: "0644"
"""


@pytest.mark.parametrize(
    "ibv,loaded,expect",
    [
        (IBV_ACTIVE, True, {"rdma": "enabled", "nvidia-peermem": "enabled"}),
        (IBV_ACTIVE, False, {"rdma": "enabled", "nvidia-peermem": "failed"}),
        (IBV_DOWN, True, {"rdma": "failed", "nvidia-peermem": "failed"}),
    ],
    ids=["gpudirect-on", "peermem-missing", "port-down"],
)
def test_the_check_says_whether_gpudirect_rdma_is_on(tmp_path, monkeypatch, ibv, loaded, expect):
    bin_dir, sys_module = tmp_path / "bin", tmp_path / "sys-module"
    bin_dir.mkdir()
    sys_module.mkdir()
    if loaded:
        (sys_module / "nvidia_peermem").mkdir()
    (tmp_path / "ibv.txt").write_text(ibv)
    (bin_dir / "ibv_devinfo").write_text(f"#!/bin/sh\ncat {tmp_path / 'ibv.txt'}\n")
    (bin_dir / "ibv_devinfo").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    (tmp_path / "hosts").write_text(INVENTORY.format(python=sys.executable))
    (tmp_path / "play.yml").write_text(CHECK_PLAY)
    out = tmp_path / "record.json"
    extra = json.dumps({"out": str(out), "sys_module": str(sys_module)})
    proc, _ = run_playbook(tmp_path / "play.yml", "-e", extra, inventory=tmp_path / "hosts", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    record = json.loads(out.read_text())
    assert {k: record[k]["state"] for k in expect} == expect
    if expect["nvidia-peermem"] == "enabled":
        assert (
            record["nvidia-peermem"]["reason"] == "GPUDirect RDMA on: nvidia-peermem loaded, mlx5_0/1 ACTIVE"
        )
        assert record["rdma"]["reason"].endswith("1 port(s) ACTIVE (InfiniBand): mlx5_0/1")
    elif expect["rdma"] == "failed":
        assert "ibv_devinfo shows no InfiniBand port ACTIVE (mlx5_0 PORT_DOWN)" in record["rdma"]["reason"]
        assert "no RDMA port is ACTIVE" in record["nvidia-peermem"]["reason"]
    else:
        assert record["nvidia-peermem"]["reason"].startswith(
            "GPUDirect RDMA is off: nvidia-peermem is not loaded"
        )
        assert "rdma_gpudirect: false" in record["nvidia-peermem"]["reason"]


# --- wrong types, through the role's argument spec ---------------------------

BAD_PLAY = """\
- name: The RDMA role with bad input
  hosts: localhost
  gather_facts: false
  roles:
    - role: stack
    - role: rdma
"""


@pytest.mark.parametrize(
    "bad,words",
    [
        ({"rdma_mode": "infinband"}, ["rdma_mode must be one of: none, auto, infiniband, roce"]),
        ({"rdma_gpudirect": "sometimes"}, ["rdma_gpudirect", "bool"]),
    ],
)
def test_wrong_types_are_refused_by_the_argument_spec(tmp_path, bad, words):
    (tmp_path / "hosts").write_text(INVENTORY.format(python=sys.executable))
    (tmp_path / "play.yml").write_text(BAD_PLAY)
    extra = json.dumps(bad)
    proc, _ = run_playbook(tmp_path / "play.yml", "-e", extra, inventory=tmp_path / "hosts", timeout=300)
    out = proc.stdout
    assert proc.returncode != 0, out
    assert "Validating arguments against arg spec 'main'" in out, out
    for word in words:
        assert word in out, (word, out[-3000:])
