"""module_utils/mnc_hw.py: the PCI listing and the RDMA ports, as the roles read them."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
from ansible_collections.mncluster.core.plugins.module_utils import mnc_hw

# An 8-GPU HGX A100 board (lspci -n): GPUs (0302), NVSwitches (0680), ConnectX-6 InfiniBand (0207)
# and a ConnectX Ethernet port (0200, vendor 15b3), among the host's own devices.
HGX = """\
0000:00:00.0 0600: 8086:09a2 (rev 04)
07:00.0 0302: 10de:20b0 (rev a1)
0f:00.0 0302: 10de:20b0 (rev a1)
c4:00.0 0680: 10de:1af1 (rev a1)
c5:00.0 0680: 10de:1af1 (rev a1)
c6:00.0 0680: 10de:1af1 (rev a1)
c7:00.0 0680: 10de:1af1 (rev a1)
c8:00.0 0680: 10de:1af1 (rev a1)
c9:00.0 0680: 10de:1af1 (rev a1)
0c:00.0 0207: 15b3:101b
e1:00.1 0200: 15b3:101d
e2:00.0 0300: 1a03:2000 (rev 41) (prog-if 00 [VGA controller])
not a device line
"""

IBV = """\
hca_id:\tmlx5_0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t20.31.1014
\tphys_port_cnt:\t\t\t1
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tlink_layer:\t\tInfiniBand

hca_id:\tmlx5_1
\ttransport:\t\t\tInfiniBand (0)
\tphys_port_cnt:\t\t\t2
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_DOWN (1)
\t\t\tlink_layer:\t\tEthernet
\t\tport:\t2
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tlink_layer:\t\tEthernet
"""


def test_nvswitches_are_nvidia_bridges():
    switches = mnc_hw.pci_devices(HGX, "10de", "0680")
    assert [d["slot"] for d in switches] == [f"{b}:00.0" for b in ("c4", "c5", "c6", "c7", "c8", "c9")]
    assert {d["device"] for d in switches} == {"1af1"}


def test_filters_and_forms():
    assert len(mnc_hw.pci_devices(HGX)) == 12
    assert len(mnc_hw.pci_devices(HGX, "10de", "03")) == 2
    assert mnc_hw.pci_devices(HGX, "", "0207") == [
        {"slot": "0c:00.0", "class": "0207", "vendor": "15b3", "device": "101b"}
    ]
    # the domain is kept; a list of lines reads like the text
    assert mnc_hw.pci_devices(HGX.splitlines(), "8086")[0]["slot"] == "0000:00:00.0"
    assert mnc_hw.pci_devices("") == mnc_hw.pci_devices(None) == []


def test_ibv_ports():
    assert mnc_hw.ibv_ports(IBV) == [
        {"device": "mlx5_0", "port": 1, "state": "PORT_ACTIVE", "active": True, "link_layer": "InfiniBand"},
        {"device": "mlx5_1", "port": 1, "state": "PORT_DOWN", "active": False, "link_layer": "Ethernet"},
        {"device": "mlx5_1", "port": 2, "state": "PORT_ACTIVE", "active": True, "link_layer": "Ethernet"},
    ]


def test_no_devices():
    assert mnc_hw.ibv_ports("No IB devices found\n") == []
    assert mnc_hw.ibv_ports(None) == []
