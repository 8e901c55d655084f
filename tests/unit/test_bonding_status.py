"""module_utils/mnc_bonding.py: /proc/net/bonding parsing and the health verdict.

The texts below are in the kernel's exact format (drivers/net/bonding/bond_procfs.c,
Linux 6.1): a healthy LACP bond, one whose switch ports are not set to LACP
(no partner, each link alone in its own aggregator) and one with a link down.
The module itself is also run by real Ansible against such a file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

import ansible_env
from ansible_collections.mncluster.core.plugins.module_utils.mnc_bonding import bond_problems, parse_bonding

SLAVE = """\
Slave Interface: {name}
MII Status: {mii}
Speed: 10000 Mbps
Duplex: full
Link Failure Count: 0
Permanent HW addr: {mac}
Slave queue ID: 0
Aggregator ID: {agg}
Actor Churn State: none
Partner Churn State: {churn}
Actor Churned Count: 0
Partner Churned Count: 0
details actor lacp pdu:
    system priority: 65535
    system mac address: 0c:42:a1:11:22:33
    port key: 15
    port priority: 255
    port number: {port}
    port state: 61
details partner lacp pdu:
    system priority: {ppri}
    system mac address: {pmac}
    oper key: 1
    port priority: 255
    port number: 1
    port state: 1
"""

HEAD = """\
Ethernet Channel Bonding Driver: v6.1.0-28-amd64

Bonding Mode: IEEE 802.3ad Dynamic link aggregation
Transmit Hash Policy: layer3+4 (1)
MII Status: up
MII Polling Interval (ms): 100
Up Delay (ms): 200
Down Delay (ms): 200
Peer Notification Delay (ms): 0

802.3ad info
LACP active: on
LACP rate: fast
Min links: 0
Aggregator selection policy (ad_select): stable
System priority: 65535
System MAC address: 0c:42:a1:11:22:33
Active Aggregator Info:
\tAggregator ID: 1
\tNumber of ports: {ports}
\tActor Key: 15
\tPartner Key: {pkey}
\tPartner Mac Address: {pmac}

"""

SWITCH = "00:1c:73:aa:bb:cc"
NONE = "00:00:00:00:00:00"


def bond_text(pmac=SWITCH, aggs=(1, 1), mii=("up", "up")):
    ports = sum(1 for a in aggs if a == 1)
    text = HEAD.format(ports=ports, pkey=1 if pmac != NONE else 0, pmac=pmac)
    for i, (name, agg, m) in enumerate(zip(("enp1s0f0", "enp1s0f1"), aggs, mii, strict=True)):
        text += (
            SLAVE.format(
                name=name,
                mii=m,
                mac=f"0c:42:a1:11:22:3{i + 3}",
                agg=agg,
                port=i + 1,
                churn="none" if pmac != NONE else "churned",
                ppri=32768 if pmac != NONE else 65535,
                pmac=pmac,
            )
            + "\n"
        )
    return text


NICS = ["enp1s0f0", "enp1s0f1"]


def test_healthy_lacp_bond():
    status = parse_bonding(bond_text())
    assert status["mode"] == "IEEE 802.3ad Dynamic link aggregation"
    assert status["xmit_hash_policy"] == "layer3+4"
    assert status["aggregator"] == {"id": "1", "ports": 2, "partner_mac": SWITCH}
    assert [
        (s["name"], s["mii_status"], s["speed_mbps"], s["aggregator_id"], s["partner_mac"])
        for s in status["slaves"]
    ] == [("enp1s0f0", "up", 10000, "1", SWITCH), ("enp1s0f1", "up", 10000, "1", SWITCH)]
    assert bond_problems(status, "802.3ad", NICS) == []


def test_switch_without_lacp_is_caught():
    # No LACPDUs from the switch: no partner, and each port sits in its own aggregator.
    problems = bond_problems(parse_bonding(bond_text(pmac=NONE, aggs=(1, 2))), "802.3ad", NICS)
    assert any(p.startswith("no LACP partner") for p in problems)
    assert any("enp1s0f1 is in aggregator 2, not the active one (1)" in p for p in problems)


def test_link_down_and_missing_nic_and_wrong_mode():
    status = parse_bonding(bond_text(mii=("up", "down")))
    problems = bond_problems(status, "802.3ad", [*NICS[:1], "enp1s0f1", "enp2s0"])
    assert "enp1s0f1 link is 'down'" in problems
    assert any(p.startswith("enp2s0 is not enslaved") for p in problems)
    assert any(
        "expected 'fault-tolerance (active-backup)'" in p
        for p in bond_problems(status, "active-backup", NICS)
    )


def run_module(args: dict) -> dict:
    return ansible_env.run_module("mncluster.core.mnc_bond_status", args)


@pytest.mark.parametrize(("text", "ok"), [(bond_text(), True), (bond_text(pmac=NONE, aggs=(1, 2)), False)])
def test_module_reads_the_file(tmp_path, text, ok):
    (tmp_path / "bond0").write_text(text)
    res = run_module({"name": "bond0", "interfaces": NICS, "proc_dir": str(tmp_path)})
    assert res.get("failed", False) is (not ok), res
    assert res["changed"] is False
    if not ok:
        assert res["msg"].startswith("bond0: no LACP partner")


def test_module_without_bonding_driver_says_so(tmp_path):
    res = run_module({"name": "bond0", "interfaces": NICS, "proc_dir": str(tmp_path / "absent")})
    assert res["failed"] is True
    assert "cannot read" in res["msg"] and "absent/bond0" in res["msg"]
