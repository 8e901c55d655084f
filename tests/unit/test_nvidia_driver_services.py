"""roles/nvidia_driver's services (fabric manager, persistence daemon), decided and rendered for
Debian 12 and 13, Ubuntu 22.04 and 24.04 without a GPU.

The real task files run with ansible-playbook on localhost, each distribution's facts and PCI
listing injected: tasks/services-plan.yml (pure: decides and refuses) and, for the nvidia_repo
method, tasks/services-nvidia_repo.yml with nvidia_repo's render hook (nvidia_repo_apt_root),
which writes the exact-version pin and the hold list under a scratch directory and installs
nothing. What a node records (mnc_nvidia_services) is the plan after it. Bad input (a fabric
manager forced on a CPU node, one Debian does not ship, wrong types) is refused with a message
before anything is changed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from ansible_env import CASE_FACTS, CASE_GATHER, CASE_REFUSAL, run_cases, run_playbook

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "nvidia_driver"
MATRIX = yaml.safe_load((ROOT / "roles" / "stack" / "defaults" / "main" / "cuda.yml").read_text())
BRANCH, VERSION = MATRIX["stack_cuda_driver_branch"], MATRIX["stack_cuda_driver_version"]
# NVIDIA's repository names it nvidia-fabricmanager-<branch> up to 570, nvidia-fabricmanager from 575 on.
FABRICMANAGER = f"nvidia-fabricmanager-{BRANCH}" if int(BRANCH) < 575 else "nvidia-fabricmanager"
DISTROS = ["debian12", "debian13", "ubuntu2204", "ubuntu2404"]

# lspci -n of an 8-GPU HGX A100 board (GPUs 0302, NVSwitches 0680), and of a PCIe GPU server.
HGX = "\n".join(
    [f"{b:02x}:00.0 0302: 10de:20b0 (rev a1)" for b in range(7, 15)]
    + [f"{b:02x}:00.0 0680: 10de:1af1 (rev a1)" for b in range(0xC4, 0xCA)]
)
PCIE = "\n".join(f"{b:02x}:00.0 0302: 10de:20b5 (rev a1)" for b in range(1, 3))
# Ubuntu's installed -server driver (dpkg-query ${Version} of nvidia-kernel-common-535-server).
UBUNTU_DRIVER = {"ubuntu2204": "535.183.01-0ubuntu0.22.04.1", "ubuntu2404": "535.183.01-0ubuntu0.24.04.1"}

INVENTORY = "localhost ansible_connection=local ansible_python_interpreter={python}\n"

# Every knob a case may change, at its default: the cases run one after the other in one play
# (set as facts, which outrank the role's vars), so each sets them all.
BASE = {
    "mnc_use_gpu": True,
    "nvidia_driver_install_method": "nvidia_repo",
    "nvidia_driver_fabricmanager": "auto",
    "nvidia_driver_persistenced": True,
    "__nvidia_driver_distro_installed": {"stdout": ""},
}
# the role's dependency cuda_matrix (the GPU matrix check) reads the controller's facts
CASE_TASKS = CASE_GATHER + CASE_FACTS + """\
- name: "Decide ({{ case.name }})"
  block:
    - name: "Run the decision ({{ case.name }})"
      ansible.builtin.include_role:
        name: nvidia_driver
        tasks_from: services-plan
        public: true
    - name: "Render the pins ({{ case.name }})"
      ansible.builtin.include_tasks: render.yml
      when: case.root | length > 0
    - name: "Write what was decided ({{ case.name }})"
      ansible.builtin.copy:
        dest: "{{ case_out }}/{{ case.name }}.json"
        content: >-
          {{ {'plan': __nvidia_driver_services_plan,
              'packages': __nvidia_driver_services_packages,
              'enabled': __nvidia_driver_services_enabled,
              'record': __nvidia_driver_services_record} | to_json }}
        mode: "0644"
""" + CASE_REFUSAL


# The nvidia_repo render: the driver's own pin (install-nvidia_repo, as molecule/gpu_render
# renders it) and the services' pin, under the case's scratch root.
RENDER = """\
- name: Create the render directories
  ansible.builtin.file:
    path: "{{ case.root }}/etc/apt/preferences.d"
    state: directory
    mode: "0755"
- name: Render the driver's and its services' pins
  ansible.builtin.include_role:
    name: nvidia_driver
    tasks_from: "{{ item }}"
  loop: [install-nvidia_repo, services-nvidia_repo]
  vars:
    nvidia_repo_distro_id: "{{ case.distro }}"
    nvidia_repo_apt_root: "{{ case.root }}"
"""


def _case(name, distro, pci, render=False, installed="", **knobs):
    return {
        "name": name,
        "distro": distro,
        "render": render,
        "vars": {
            **BASE,
            "__nvidia_driver_distro_id": distro,
            "common_gpus_result": {"stdout": str(sum(" 030" in line for line in pci.splitlines()))},
            "__nvidia_driver_lspci": {"stdout": pci},
            "__nvidia_driver_distro_installed": {"stdout": installed},
            **knobs,
        },
    }


CASES = [
    *[
        _case(f"hgx-repo-{d}", d, HGX, render=True, nvidia_driver_install_method="nvidia_repo")
        for d in DISTROS
    ],
    *[
        _case(f"hgx-distro-{d}", d, HGX, installed=UBUNTU_DRIVER[d], nvidia_driver_install_method="distro")
        for d in ("ubuntu2204", "ubuntu2404")
    ],
    _case("pcie-distro-debian12", "debian12", PCIE, nvidia_driver_install_method="distro"),
    _case("pcie-distro-debian13", "debian13", PCIE, nvidia_driver_install_method="distro"),
    _case("pcie-forced", "ubuntu2204", PCIE, nvidia_driver_fabricmanager="always"),
    _case(
        "hgx-never", "ubuntu2404", HGX, nvidia_driver_fabricmanager="never", nvidia_driver_persistenced=False
    ),
    _case("cpu", "debian12", "", mnc_use_gpu=False),
    _case("cpu-with-gpus", "debian12", HGX, mnc_use_gpu=False),
    # refused
    _case("cpu-forced", "debian12", "", mnc_use_gpu=False, nvidia_driver_fabricmanager="always"),
    _case("hgx-distro-debian12", "debian12", HGX, nvidia_driver_install_method="distro"),
    _case("hgx-distro-debian13", "debian13", HGX, nvidia_driver_install_method="distro"),
]


@pytest.fixture(scope="module")
def decided(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nvidia_driver_services")
    cases = [{**c, "root": str(tmp / "root" / c["name"]) if c["render"] else ""} for c in CASES]
    title = "Decide the driver's services, case by case"
    results = run_cases(tmp, title, CASE_TASKS, cases, {"render.yml": RENDER})
    return results, tmp / "root"


def _pins(text):
    """apt preferences stanzas -> {package: version}."""
    pins = {}
    for stanza in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if line and not line.startswith("#")
        )
        if fields:
            pins[fields["Package"]] = fields["Pin"].removeprefix("version ")
    return pins


@pytest.mark.parametrize("distro", DISTROS)
def test_nvswitch_board_gets_the_fabric_manager_at_the_drivers_release(decided, distro):
    results, _root = decided
    got = results[f"hgx-repo-{distro}"]
    assert "failed" not in got, got
    fm, pd = got["plan"]["nvidia-fabricmanager"], got["plan"]["nvidia-persistenced"]
    assert (fm["state"], fm["reason"]) == ("enabled", "6 NVSwitch(es) on the PCI bus")
    assert fm["package"] == FABRICMANAGER
    assert pd["state"] == "enabled"
    # NVIDIA's repository follows each distribution's own package names
    assert pd["package"] == (
        "nvidia-persistenced" if distro.startswith("debian") else f"nvidia-compute-utils-{BRANCH}"
    )
    assert got["packages"] == [
        {"name": fm["package"], "version": f"{VERSION}*"},
        {"name": pd["package"], "version": f"{VERSION}*"},
    ]
    assert got["enabled"] == ["nvidia-fabricmanager", "nvidia-persistenced"]
    assert got["record"]["nvidia-fabricmanager"]["state"] == "enabled"


@pytest.mark.parametrize("distro", DISTROS)
def test_the_rendered_pin_of_the_fabric_manager_is_the_drivers(decided, distro):
    _results, root = decided
    prefs = root / f"hgx-repo-{distro}" / "etc" / "apt" / "preferences.d"
    driver = _pins((prefs / "mncluster-nvidia-driver").read_text())
    services = _pins((prefs / "mncluster-nvidia-driver-services").read_text())
    assert driver[f"cuda-drivers-{BRANCH}"] == f"{VERSION}*"
    persistenced = "nvidia-persistenced" if distro.startswith("debian") else f"nvidia-compute-utils-{BRANCH}"
    fabricmanager = FABRICMANAGER
    assert services == {fabricmanager: f"{VERSION}*", persistenced: f"{VERSION}*"}
    assert services[fabricmanager] == driver[f"cuda-drivers-{BRANCH}"]
    holds = (root / f"hgx-repo-{distro}" / "etc" / "apt" / "mncluster-holds").read_text().split()
    assert sorted(holds) == sorted([f"cuda-drivers-{BRANCH}", fabricmanager, persistenced])
    assert (
        "managed by mncluster (roles/nvidia_driver)"
        in (prefs / "mncluster-nvidia-driver-services").read_text()
    )


@pytest.mark.parametrize("distro", ["ubuntu2204", "ubuntu2404"])
def test_ubuntus_fabric_manager_takes_the_installed_drivers_upstream_release(decided, distro):
    got = decided[0][f"hgx-distro-{distro}"]
    assert got["packages"] == [
        {"name": "nvidia-fabricmanager-535", "version": "535.183.01-*"},
        {"name": "nvidia-compute-utils-535-server", "version": ""},
    ]


@pytest.mark.parametrize("distro", ["debian12", "debian13"])
def test_a_pcie_server_needs_no_fabric_manager(decided, distro):
    got = decided[0][f"pcie-distro-{distro}"]
    fm = got["plan"]["nvidia-fabricmanager"]
    assert fm["state"] == "absent" and "no NVSwitch on the PCI bus" in fm["reason"], fm
    assert got["packages"] == [{"name": "nvidia-persistenced", "version": ""}]
    assert got["record"]["nvidia-fabricmanager"] == {"state": "absent", "reason": fm["reason"]}


def test_forced_on_a_gpu_node_without_nvswitch(decided):
    fm = decided[0]["pcie-forced"]["plan"]["nvidia-fabricmanager"]
    assert (fm["state"], fm["reason"]) == ("enabled", "forced (nvidia_driver_fabricmanager: always)")


def test_turned_off_says_what_it_costs(decided):
    got = decided[0]["hgx-never"]
    fm, pd = got["plan"]["nvidia-fabricmanager"], got["plan"]["nvidia-persistenced"]
    assert fm["state"] == "absent"
    assert "nvidia_driver_fabricmanager: never" in fm["reason"]
    assert "6 NVSwitch(es)" in fm["reason"] and "CUDA cannot initialise" in fm["reason"]
    assert pd == {**pd, "state": "absent", "reason": "turned off (nvidia_driver_persistenced: false)"}
    assert got["packages"] == [] and got["enabled"] == []


@pytest.mark.parametrize("case", ["cpu", "cpu-with-gpus"])
def test_a_cpu_node_skips_every_service_with_its_reason(decided, case):
    got = decided[0][case]
    assert got["packages"] == [] and got["enabled"] == []
    for name in ("nvidia-fabricmanager", "nvidia-persistenced"):
        assert got["record"][name] == {
            "state": "skipped",
            "reason": "CPU mode (mnc_use_gpu false): no NVIDIA driver services",
        }


def test_a_fabric_manager_forced_on_a_cpu_node_is_refused(decided):
    msg = decided[0]["cpu-forced"]["failed"]
    assert "nvidia_driver_fabricmanager is always" in msg
    assert "CPU mode (mnc_use_gpu false" in msg and "Nothing was changed" in msg


@pytest.mark.parametrize("distro", ["debian12", "debian13"])
def test_debian_ships_no_fabric_manager(decided, distro):
    msg = decided[0][f"hgx-distro-{distro}"]["failed"]
    assert "6 NVSwitch(es) on the PCI bus" in msg
    assert f"{distro} ships none" in msg and "nvidia_driver_install_method: nvidia_repo" in msg


def test_the_persistenced_drop_in_switches_persistence_mode_on():
    text = (ROLE / "templates" / "nvidia-persistenced.conf.j2").read_text()
    assert "[Service]\nExecStartPost=/usr/bin/nvidia-smi --persistence-mode=1\n" in text


# --- wrong types, through the role's argument spec ---------------------------

BAD_PLAY = """\
- name: The driver role with bad input
  hosts: localhost
  # the role's dependency cuda_matrix (the GPU matrix check) reads the facts
  gather_facts: true
  roles:
    - role: stack
    - role: nvidia_driver
"""


@pytest.mark.parametrize(
    "bad,words",
    [
        ({"nvidia_driver_fabricmanager": "yes"}, ["nvidia_driver_fabricmanager", "auto, always, never"]),
        ({"nvidia_driver_persistenced": "maybe"}, ["nvidia_driver_persistenced", "bool"]),
    ],
)
def test_wrong_types_are_refused_by_the_argument_spec(tmp_path, bad, words):
    (tmp_path / "hosts").write_text(INVENTORY.format(python=sys.executable))
    (tmp_path / "play.yml").write_text(BAD_PLAY)
    proc, _ = run_playbook(
        tmp_path / "play.yml", "-e", json.dumps(bad), inventory=tmp_path / "hosts", timeout=300
    )
    out = proc.stdout
    assert proc.returncode != 0, out
    assert "Validating arguments against arg spec 'main'" in out, out
    for word in words:
        assert word in out, (word, out[-3000:])


# --- the services' check, against stand-in commands ---------------------------

CHECK_PLAY = """\
- name: The driver services' check
  hosts: localhost
  # the role's dependency cuda_matrix (the GPU matrix check) reads the facts
  gather_facts: true
  roles:
    - role: stack
  vars:
    __nvidia_driver_services_plan:
      nvidia-fabricmanager:
        {state: enabled, reason: 6 NVSwitch(es) on the PCI bus, package: nvidia-fabricmanager-560}
      nvidia-persistenced: {state: enabled, reason: persistence, package: nvidia-persistenced}
    mnc_nvidia_driver_version: "560.35.05"
  tasks:
    - name: Check the services
      ansible.builtin.include_role:
        name: nvidia_driver
        tasks_from: services-verify
        public: true
    - name: Write the record
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ __nvidia_driver_services_record | to_json }}"
        mode: "0644"
"""


@pytest.mark.parametrize(
    "fm_version,modes,expect",
    [
        (
            "560.35.05",
            "Enabled\\nEnabled",
            {"nvidia-fabricmanager": "enabled", "nvidia-persistenced": "enabled"},
        ),
        (
            "560.35.03",
            "Enabled\\nDisabled",
            {"nvidia-fabricmanager": "failed", "nvidia-persistenced": "failed"},
        ),
    ],
)
def test_the_check_compares_the_fabric_manager_with_the_loaded_driver(
    tmp_path, monkeypatch, fm_version, modes, expect
):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in {
        "systemctl": "echo active",
        "nv-fabricmanager": f'echo "Fabric Manager version is : {fm_version}"',
        "nvidia-smi": f'printf "{modes}\\n"',
    }.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{text}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    (tmp_path / "hosts").write_text(INVENTORY.format(python=sys.executable))
    (tmp_path / "play.yml").write_text(CHECK_PLAY)
    out = tmp_path / "record.json"
    proc, _ = run_playbook(
        tmp_path / "play.yml", "-e", json.dumps({"out": str(out)}), inventory=tmp_path / "hosts", timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    record = json.loads(out.read_text())
    assert {name: svc["state"] for name, svc in record.items()} == expect
    if expect["nvidia-fabricmanager"] == "failed":
        assert record["nvidia-fabricmanager"]["reason"].startswith(
            "fabric manager 560.35.03 with driver 560.35.05: they must be the same release"
        )
        assert "Enabled, Disabled" in record["nvidia-persistenced"]["reason"]
    else:
        assert record["nvidia-fabricmanager"]["reason"] == "6 NVSwitch(es) on the PCI bus; running"
