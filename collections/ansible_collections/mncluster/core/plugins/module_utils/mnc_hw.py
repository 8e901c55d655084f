"""What a node's hardware listings say: PCI devices (``lspci -n``) and RDMA ports (``ibv_devinfo``).

Pure functions, no Ansible imports. Used by Jinja as the ``mnc_pci_devices`` and
``mnc_ibv_ports`` filters (plugins/filter/mnc.py): roles/nvidia_driver counts the
NVSwitches (fabric manager), roles/rdma finds RDMA adapters (``rdma_mode: auto``)
and the ACTIVE ports of its GPUDirect RDMA check. Unit-tested in
tests/unit/test_mnc_hw.py.
"""

from __future__ import annotations

import re

# lspci -n: "[domain:]bus:dev.fn class: vendor:device [(rev xx)] [(prog-if xx)]"
_LSPCI = re.compile(
    r"^(?P<slot>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<cls>[0-9a-fA-F]{4}):\s+(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\b"
)
# Port states as ibv_devinfo prints them: "PORT_ACTIVE (4)".
_STATE = re.compile(r"^(PORT_[A-Z_]+)")


def pci_devices(text: str | list | None, vendor: str = "", class_prefix: str = "") -> list[dict]:
    """``[{slot, class, vendor, device}]`` of ``lspci -n`` output (a string or its lines), lower
    case, in listing order; only those of ``vendor`` (e.g. ``10de``) and whose class starts with
    ``class_prefix`` (e.g. ``0680``, ``02``) when given. Lines that are not a device are skipped."""
    lines = text.splitlines() if isinstance(text, str) else list(text or [])
    out = []
    for line in lines:
        m = _LSPCI.match(str(line).strip())
        if not m:
            continue
        dev = {
            "slot": m.group("slot").lower(),
            "class": m.group("cls").lower(),
            "vendor": m.group("vendor").lower(),
            "device": m.group("device").lower(),
        }
        if vendor and dev["vendor"] != vendor.lower():
            continue
        if class_prefix and not dev["class"].startswith(class_prefix.lower()):
            continue
        out.append(dev)
    return out


def ibv_ports(text: str | None) -> list[dict]:
    """``[{device, port, state, active, link_layer}]`` of ``ibv_devinfo`` output, one per port
    (``state``: ``PORT_ACTIVE``, ``PORT_DOWN``, ...; ``link_layer``: ``InfiniBand`` or
    ``Ethernet``, RoCE). Output without an ``hca_id:`` ("No IB devices found") gives []."""
    ports: list[dict] = []
    device = None
    current = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or ":" not in line:
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            device, current = value, None
        elif key == "port" and device is not None:
            current = {"device": device, "port": int(value.split()[0]), "state": "", "active": False,
                       "link_layer": ""}  # fmt: skip
            ports.append(current)
        elif current is not None and key == "state":
            m = _STATE.match(value)
            current["state"] = m.group(1) if m else value
            current["active"] = current["state"] == "PORT_ACTIVE"
        elif current is not None and key == "link_layer":
            current["link_layer"] = value
    return ports
