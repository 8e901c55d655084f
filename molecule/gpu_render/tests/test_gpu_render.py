"""What the nvidia_repo method writes for each supported distribution (rendered, not installed)."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
from ansible_env import podman_hosts

# One `podman exec` per check (tests/unit/ansible_env.py).
testinfra_hosts = podman_hosts("all")

DISTROS = ["debian12", "debian13", "ubuntu2204", "ubuntu2404"]
KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
NVIDIA = "https://developer.download.nvidia.com/compute/cuda/repos"
# The key NVIDIA signs each repository with: 3bf863cc, and 8793F200 for debian13 alone.
FINGERPRINTS = {
    "debian12": "EB693B3035CD5710E231E123A4B469963BF863CC",
    "debian13": "02182E60104FCDC26EAE1B8597A5D4CB8793F200",
    "ubuntu2204": "EB693B3035CD5710E231E123A4B469963BF863CC",
    "ubuntu2404": "EB693B3035CD5710E231E123A4B469963BF863CC",
}


def _persistenced(distro):
    """The persistence daemon's package in NVIDIA's repository: Debian's name or Ubuntu's."""
    return "nvidia-persistenced" if distro.startswith("debian") else "nvidia-compute-utils-580"


def _file(host, distro, path):
    f = host.file(f"/srv/mnc-render/{distro}{path}")
    assert f.is_file, f.path
    return f.content_string


def _pins(text):
    """apt preferences stanzas -> {package: (version, priority)}."""
    pins = {}
    for stanza in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if line and not line.startswith("#")
        )
        if fields:
            pins[fields["Package"]] = (fields["Pin"], fields["Pin-Priority"])
    return pins


@pytest.mark.parametrize("distro", DISTROS)
def test_repository_source_uses_the_keyring(host, distro):
    text = _file(host, distro, f"/etc/apt/sources.list.d/cuda-{distro}-x86_64.list")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines == [f"deb [signed-by={KEYRING}] {NVIDIA}/{distro}/x86_64/ /"]
    assert text.startswith("# managed by mncluster")


@pytest.mark.parametrize("distro", DISTROS)
def test_keyring_package_and_fingerprint(host, distro):
    record = json.loads(_file(host, distro, "/etc/apt/mncluster-cuda-keyring.json"))
    assert record["url"] == f"{NVIDIA}/{distro}/x86_64/cuda-keyring_1.1-1_all.deb"
    assert record["keyring"] == KEYRING
    assert record["fingerprint"] == FINGERPRINTS[distro]
    assert record["name"] == "cuda-keyring" and record["filename"] == "cuda-keyring_1.1-1_all.deb"
    assert record["version"] == f"1.1-1-{distro}"


@pytest.mark.parametrize("distro", DISTROS)
def test_exact_version_pins(host, distro):
    pins = {}
    for name in ("cuda", "cudnn", "nccl", "nvidia-driver"):
        pins.update(_pins(_file(host, distro, f"/etc/apt/preferences.d/mncluster-{name}")))
    assert pins == {
        "cuda-toolkit-12-6": ("version 12.6.3-1", "1001"),
        "libcudnn8": ("version 8.9.7.29-1+cuda12.2", "1001"),
        "libcudnn8-dev": ("version 8.9.7.29-1+cuda12.2", "1001"),
        "libnccl2": ("version 2.23.4-1+cuda12.6", "1001"),
        "libnccl-dev": ("version 2.23.4-1+cuda12.6", "1001"),
        "cuda-drivers-580": ("version 580.95.05*", "1001"),
        "/^(cuda-drivers|nvidia-|libnvidia-|libxnvctrl|xserver-xorg-video-nvidia|firmware-nvidia)/": (
            "version 580.95.05*",
            "1001",
        ),
    }


@pytest.mark.parametrize("distro", DISTROS)
def test_apt_accepts_the_pins(host, distro):
    # apt itself parses the rendered preferences: a malformed stanza is an error.
    cmd = host.run(
        f"apt-cache -o Dir::Etc::PreferencesParts=/srv/mnc-render/{distro}/etc/apt/preferences.d policy"
    )
    assert cmd.rc == 0, cmd.stderr
    assert "E:" not in cmd.stderr and "W:" not in cmd.stderr, cmd.stderr


@pytest.mark.parametrize("distro", DISTROS)
def test_holds_listed(host, distro):
    holds = _file(host, distro, "/etc/apt/mncluster-holds").split()
    assert sorted(holds) == sorted(
        [
            "cuda-toolkit-12-6",
            "libcudnn8",
            "libcudnn8-dev",
            "libnccl2",
            "libnccl-dev",
            "cuda-drivers-580",
            # DCGM, the matrix's version from the driver's repository
            "datacenter-gpu-manager-4-core",
            "datacenter-gpu-manager-4-cuda12",
            # the driver's services (NVSwitch board), at the driver's release
            "nvidia-fabricmanager",
            _persistenced(distro),
        ]
    )


@pytest.mark.parametrize("distro", DISTROS)
def test_fabric_manager_pinned_to_the_drivers_release(host, distro):
    driver = _pins(_file(host, distro, "/etc/apt/preferences.d/mncluster-nvidia-driver"))
    services = _pins(_file(host, distro, "/etc/apt/preferences.d/mncluster-nvidia-driver-services"))
    persistenced = _persistenced(distro)
    assert services == {
        "nvidia-fabricmanager": ("version 580.95.05*", "1001"),
        persistenced: ("version 580.95.05*", "1001"),
    }
    assert services["nvidia-fabricmanager"] == driver["cuda-drivers-580"]


@pytest.mark.parametrize("distro", DISTROS)
def test_dcgm_pinned_from_the_drivers_repository(host, distro):
    text = _file(host, distro, "/etc/apt/preferences.d/mncluster-dcgm")
    assert _pins(text) == {
        "datacenter-gpu-manager-4-core": ("version 1:4.4.1-1", "1001"),
        "datacenter-gpu-manager-4-cuda12": ("version 1:4.4.1-1", "1001"),
    }
    assert "managed by mncluster (roles/nvidia_driver)" in text
    # The same repository as the driver: its one source list, nothing added for DCGM.
    sources = host.run(f"ls /srv/mnc-render/{distro}/etc/apt/sources.list.d").stdout.split()
    assert sources == [f"cuda-{distro}-x86_64.list"]


@pytest.mark.parametrize("distro", DISTROS)
def test_rdma_files(host, distro):
    limits = _file(host, distro, "/etc/security/limits.d/90-mncluster-memlock.conf")
    assert [line.split() for line in limits.splitlines() if line and not line.startswith("#")] == [
        [who, kind, "memlock", "unlimited"] for who in ("*", "root") for kind in ("soft", "hard")
    ]
    systemd = _file(host, distro, "/etc/systemd/system.conf.d/90-mncluster-memlock.conf")
    assert "[Manager]\nDefaultLimitMEMLOCK=infinity\n" in systemd
    modules = _file(host, distro, "/etc/modules-load.d/mncluster-nvidia-peermem.conf")
    assert [line for line in modules.splitlines() if line and not line.startswith("#")] == ["nvidia-peermem"]


def test_nothing_was_installed(host):
    # Rendering and the refused bad inputs leave the node's own apt state alone.
    assert not host.file(KEYRING).exists
    assert host.run("ls /etc/apt/preferences.d/mncluster-* /etc/apt/sources.list.d/cuda-*").rc != 0
    assert host.check_output("dpkg --get-selections | awk '$2 == \"hold\"' | wc -l") == "0"
    # nor the RDMA path's files, the driver services' drop-in, or a loaded module list
    for path in (
        "/etc/security/limits.d/90-mncluster-memlock.conf",
        "/etc/systemd/system.conf.d/90-mncluster-memlock.conf",
        "/etc/modules-load.d/mncluster-nvidia-peermem.conf",
        "/etc/systemd/system/nvidia-persistenced.service.d/mncluster.conf",
    ):
        assert not host.file(path).exists, path
