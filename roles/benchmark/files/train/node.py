"""What a node gives its ranks, read from /proc and /sys: the CPUs its cgroup allows, and its
network interfaces (and which of them Open MPI's TCP transport selects)."""

from __future__ import annotations

import os


# -- CPUs a rank can use -------------------------------------------------------
def _cgroup_paths() -> list[tuple[str, str]]:
    """(controllers, path) of this process's cgroups from /proc/self/cgroup."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            out.append((parts[1], parts[2]))
    return out


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def _ancestors(root: str, path: str) -> list[str]:
    """``root/path`` and each parent up to ``root`` (a container sees its own cgroup as /)."""
    dirs, p = [], path.strip("/")
    while True:
        dirs.append(os.path.join(root, p) if p else root)
        if not p:
            return dirs
        p = os.path.dirname(p)


def cpu_quota() -> float | None:
    """CPUs the cgroup CPU quota allows (cgroup v2 cpu.max, v1 cfs_quota_us), None when unlimited."""
    limits = []
    for controllers, path in _cgroup_paths():
        if controllers == "":  # v2
            for d in _ancestors("/sys/fs/cgroup", path):
                text = _read(os.path.join(d, "cpu.max"))
                if text and not text.startswith("max"):
                    quota, period = text.split()[:2]
                    limits.append(int(quota) / int(period))
        elif "cpu" in controllers.split(","):
            for base in ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"):
                for d in _ancestors(base, path):
                    quota, period = _read(os.path.join(d, "cpu.cfs_quota_us")), _read(
                        os.path.join(d, "cpu.cfs_period_us"))
                    if quota and period and int(quota) > 0:
                        limits.append(int(quota) / int(period))
    return min(limits) if limits else None


def parse_cpu_list(text: str) -> set[int]:
    """'0-3,6' -> {0, 1, 2, 3, 6}."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def node_cpus() -> dict:
    """CPUs the node (container) gives its ranks: its cpuset, capped by the CPU quota.

    Not the rank's own affinity: MPI binds each rank to a core of its own, which
    is no shortage.
    """
    cpuset = None
    for controllers, path in _cgroup_paths():
        names = ("cpuset.cpus.effective",) if controllers == "" else ("cpuset.cpus",)
        base = "/sys/fs/cgroup" if controllers == "" else "/sys/fs/cgroup/cpuset"
        if controllers == "" or "cpuset" in controllers.split(","):
            for d in _ancestors(base, path):
                for name in names:
                    text = _read(os.path.join(d, name))
                    if text:
                        cpuset = len(parse_cpu_list(text))
                        break
                if cpuset:
                    break
    total = cpuset or os.cpu_count() or 1
    quota = cpu_quota()
    usable = min(float(total), quota) if quota else float(total)
    return {"cpuset_cpus": total, "cpu_quota": quota, "usable_cpus": usable}


# -- network interfaces ------------------------------------------------------------------
SIOCGIFADDR, SIOCGIFNETMASK = 0x8915, 0x891B


def interfaces() -> list[dict]:
    """This node's interfaces with an IPv4 address: name, address, prefix, operstate, speed in Mb/s
    (sysfs; None for virtual links, which report none)."""
    import fcntl
    import ipaddress
    import socket
    import struct

    out = []
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return out
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name in names:
            req = struct.pack("256s", name[:15].encode())
            try:
                addr = socket.inet_ntoa(fcntl.ioctl(s.fileno(), SIOCGIFADDR, req)[20:24])
                mask = socket.inet_ntoa(fcntl.ioctl(s.fileno(), SIOCGIFNETMASK, req)[20:24])
            except OSError:  # no IPv4 address
                continue
            speed = _read(f"/sys/class/net/{name}/speed")
            out.append({"name": name, "address": addr,
                        "prefix": ipaddress.IPv4Network(f"0.0.0.0/{mask}").prefixlen,
                        "operstate": _read(f"/sys/class/net/{name}/operstate"),
                        "speed_mbps": int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0
                        else None})
    return out


# Open MPI's default btl_tcp_if_exclude (4.x and 5.x): loopback and PPP links.
OMPI_DEFAULT_EXCLUDE = "127.0.0.1/8,sppp"


def _matches(iface: dict, entries: str) -> bool:
    import ipaddress

    for entry in (e.strip() for e in entries.split(",")):
        if not entry:
            continue
        if "/" in entry:
            try:
                if ipaddress.IPv4Address(iface["address"]) in ipaddress.IPv4Network(entry, strict=False):
                    return True
            except ValueError:
                continue
        elif iface["name"] == entry:
            return True
    return False


def tcp_interfaces(ifaces: list[dict], include: str | None, exclude: str | None) -> list[dict]:
    """The interfaces Open MPI's TCP transport uses on a node, given btl_tcp_if_include / _exclude
    (interface names or CIDR subnets, as ompi_info resolves them): the included ones, else every
    one that is not excluded."""
    if include:
        return [i for i in ifaces if _matches(i, include)]
    return [i for i in ifaces if not _matches(i, exclude or OMPI_DEFAULT_EXCLUDE)]
