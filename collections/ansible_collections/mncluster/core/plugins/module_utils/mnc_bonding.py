"""Parse /proc/net/bonding/<bond> and check it against what the inventory asked for.

Pure functions (no Ansible imports) so that they are unit-tested on text in
the kernel's format; mncluster.core.mnc_bond_status is the thin module around them.
"""

from __future__ import annotations

import re

# `bonding_mode` (the sysfs/netplan name) -> what /proc/net/bonding prints.
KERNEL_MODE_NAMES = {
    "balance-rr": "load balancing (round-robin)",
    "active-backup": "fault-tolerance (active-backup)",
    "balance-xor": "load balancing (xor)",
    "broadcast": "fault-tolerance (broadcast)",
    "802.3ad": "IEEE 802.3ad Dynamic link aggregation",
    "balance-tlb": "transmit load balancing",
    "balance-alb": "adaptive load balancing",
}

NO_MAC = "00:00:00:00:00:00"


def parse_bonding(text: str) -> dict:
    """Return the bond's mode, MII status, active aggregator and its slaves."""
    bond: dict = {"mode": None, "xmit_hash_policy": None, "mii_status": None, "aggregator": {}, "slaves": []}
    section = "bond"
    slave: dict | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        key, sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "Slave Interface":
            slave = {
                "name": value,
                "mii_status": None,
                "speed_mbps": None,
                "aggregator_id": None,
                "partner_mac": None,
            }
            bond["slaves"].append(slave)
            section = "slave"
            continue
        if line == "Active Aggregator Info:":
            section = "aggregator"
            continue
        if line.startswith("details actor lacp pdu"):
            section = "actor"
            continue
        if line.startswith("details partner lacp pdu"):
            section = "partner"
            continue
        if not sep:
            continue
        if section in ("bond", "aggregator") and slave is None:
            if key == "Bonding Mode":
                bond["mode"] = value
            elif key == "Transmit Hash Policy":
                bond["xmit_hash_policy"] = re.sub(r"\s*\(\d+\)$", "", value)
            elif key == "MII Status":
                bond["mii_status"] = value
            elif section == "aggregator" and key == "Aggregator ID":
                bond["aggregator"]["id"] = value
            elif section == "aggregator" and key == "Number of ports":
                bond["aggregator"]["ports"] = int(value)
            elif section == "aggregator" and key == "Partner Mac Address":
                bond["aggregator"]["partner_mac"] = value.lower()
        elif slave is not None:
            if section == "slave" and key == "MII Status":
                slave["mii_status"] = value
            elif section == "slave" and key == "Speed":
                m = re.match(r"(\d+)", value)
                slave["speed_mbps"] = int(m.group(1)) if m else None
            elif section == "slave" and key == "Aggregator ID":
                slave["aggregator_id"] = value
            elif section == "partner" and key == "system mac address":
                slave["partner_mac"] = value.lower()
    return bond


def bond_problems(status: dict, mode: str, interfaces: list[str]) -> list[str]:
    """What is wrong with the bond, in words; an empty list means healthy."""
    problems = []
    want = KERNEL_MODE_NAMES.get(mode, mode)
    if status.get("mode") != want:
        problems.append(f"mode is {status.get('mode')!r}, expected {want!r} ({mode})")
    if status.get("mii_status") != "up":
        problems.append(f"bond MII status is {status.get('mii_status')!r}")
    slaves = {s["name"]: s for s in status.get("slaves", [])}
    for name in interfaces:
        s = slaves.get(name)
        if s is None:
            problems.append(f"{name} is not enslaved (slaves: {sorted(slaves) or 'none'})")
        elif s.get("mii_status") != "up":
            problems.append(f"{name} link is {s.get('mii_status')!r}")
    if mode == "802.3ad":
        agg = status.get("aggregator", {})
        if agg.get("partner_mac") in (None, NO_MAC):
            problems.append(
                "no LACP partner (partner MAC 00:00:00:00:00:00): is the switch port group set to LACP?"
            )
        for name in interfaces:
            s = slaves.get(name)
            if s and agg.get("id") and s.get("aggregator_id") != agg["id"]:
                problems.append(
                    f"{name} is in aggregator {s.get('aggregator_id')}, not the active one ({agg['id']}):"
                    " it carries no traffic (switch ports in different LAGs?)"
                )
    return problems
