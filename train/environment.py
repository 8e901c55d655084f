"""What a reader needs to judge a run: versions, MPI library, and every rank's host, CPUs and GPU.

Two parts run before MPI starts (``before_mpi``, called by the command line):
rank 0 asks ``ompi_info`` whether the library was built with CUDA support and
which interfaces its TCP transport is pinned to (no fork after MPI_Init), and
every rank decides whether MPI should yield
when idle: ranks that busy-poll on a node with fewer usable CPUs than ranks
steal each other's time, which shows as a slow network and is not one.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess

import numpy as np

from train import torch_environment

YIELD_VAR = "OMPI_MCA_mpi_yield_when_idle"
# What the ranks were told about transports, as mpiexec --mca / -x pass it.
TRANSPORT_VARS = ("OMPI_MCA_btl", "OMPI_MCA_pml", "OMPI_MCA_btl_tcp_if_include",
                  "OMPI_MCA_btl_tcp_if_exclude", "OMPI_MCA_oob_tcp_if_include", "NCCL_SOCKET_IFNAME",
                  "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_NET", "UCX_NET_DEVICES")
BEFORE_MPI: dict = {}


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


def slurm_tasks_on_node(tasks_per_node: str, node_id: str) -> int | None:
    """This node's task count from Slurm's ``SLURM_STEP_TASKS_PER_NODE`` ("2(x2),1") and ``SLURM_NODEID``."""
    if not node_id.isdigit():
        return None
    counts = []
    for part in tasks_per_node.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            return None
        counts += [int(m.group(1))] * int(m.group(2) or 1)
    index = int(node_id)
    return counts[index] if index < len(counts) else None


def local_ranks(env=None) -> int | None:
    """Ranks on this node, as the launcher tells a rank before MPI_Init (mpiexec's, or srun's)."""
    env = os.environ if env is None else env
    for var in ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"):
        if env.get(var, "").isdigit():
            return int(env[var])
    if "SLURM_STEP_TASKS_PER_NODE" in env:  # srun starts the ranks itself: no Open MPI variables yet
        return slurm_tasks_on_node(env["SLURM_STEP_TASKS_PER_NODE"], env.get("SLURM_NODEID", ""))
    return None


def scheduler_job(env=None) -> dict | None:
    """The batch job this rank runs in (Slurm or PBS), as its environment says; None outside one."""
    env = os.environ if env is None else env
    if env.get("SLURM_JOB_ID"):
        return {"name": "slurm", "job_id": env["SLURM_JOB_ID"], "step_id": env.get("SLURM_STEP_ID"),
                "nodelist": env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST"),
                "partition": env.get("SLURM_JOB_PARTITION")}
    if env.get("PBS_JOBID"):
        return {"name": "pbs", "job_id": env["PBS_JOBID"], "step_id": None, "nodelist": None,
                "partition": env.get("PBS_QUEUE")}
    return None


def decide_yield(env: dict, local: int | None, usable: float) -> dict:
    """Whether to ask Open MPI to yield when idle: the launcher's choice, else only when oversubscribed."""
    if YIELD_VAR in env:
        return {"value": env[YIELD_VAR], "source": "launcher (mpiexec --mca or the environment)"}
    if local and local > usable:
        return {"value": "1", "source": f"benchmark: {local} ranks on this node, {usable:g} usable CPUs "
                                        "(busy-polling ranks would steal each other's time)"}
    return {"value": None, "source": "not set (ranks no more than usable CPUs): Open MPI busy-polls"}


# -- before MPI_Init ---------------------------------------------------------------
def find_ompi_info(env=None, maps="/proc/self/maps") -> str | None:
    """The ``ompi_info`` of the Open MPI that launched this rank: on PATH, else in the bin/ beside
    the library directory the launcher names (Open MPI 5's ``OMPI_LIBDIR_LOC``) or under
    ``OPAL_PREFIX``, else beside the libmpi this process has loaded (``maps``: mpi4py's, once
    imported). A rank started by an mpiexec given by its full path (as the benchmark starts it)
    keeps the launcher's PATH, which need not hold Open MPI's bin/, and a rank a user starts with
    ``srun --mpi=pmix`` without ``module load openmpi`` has neither variable."""
    env = os.environ if env is None else env
    exe = shutil.which("ompi_info", path=env.get("PATH"))
    if exe:
        return exe
    dirs = []
    if env.get("OMPI_LIBDIR_LOC"):
        dirs.append(os.path.join(os.path.dirname(env["OMPI_LIBDIR_LOC"].rstrip("/")), "bin"))
    if env.get("OPAL_PREFIX"):
        dirs.append(os.path.join(env["OPAL_PREFIX"], "bin"))
    dirs += [os.path.join(os.path.dirname(os.path.dirname(lib)), "bin") for lib in loaded_libmpi(maps)]
    return shutil.which("ompi_info", path=os.pathsep.join(dirs)) if dirs else None


def loaded_libmpi(maps="/proc/self/maps") -> list[str]:
    """The paths of the libmpi.so this process has mapped (``/proc/self/maps``), in order, once each."""
    try:
        with open(maps) as f:
            fields = [line.split(None, 5) for line in f]
    except OSError:
        return []
    paths = [f[5].strip() for f in fields if len(f) == 6]
    return list(dict.fromkeys(p for p in paths if re.search(r"/libmpi\.so(\.\d+)*$", p)))


def ompi_settings() -> dict:
    """From one ``ompi_info --parsable --all`` (the settings every job gets, MCA files included):
    ``mpi_built_with_cuda_support`` and the TCP BTL's interface selection (None when unknown)."""
    unknown = {"built_with_cuda_support": None, "btl_tcp_if_include": None, "btl_tcp_if_exclude": None}
    exe = find_ompi_info()
    if exe is None:
        return dict(unknown, source="ompi_info not found (not on PATH, nor beside the launcher's Open MPI)")
    try:
        out = subprocess.run([exe, "--parsable", "--all"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return dict(unknown, source=f"{exe}: {e}")

    def value(param: str) -> str | None:
        m = re.search(rf"^mca:\w+:\w+:param:{param}:value:(.*)$", out, re.M)
        return None if m is None else m.group(1)

    cuda = value("mpi_built_with_cuda_support")
    return {"built_with_cuda_support": None if cuda is None else cuda == "true",
            "btl_tcp_if_include": value("btl_tcp_if_include") or None,
            "btl_tcp_if_exclude": value("btl_tcp_if_exclude") or None, "source": exe}


NCCL_CONF_KEYS = ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_DISABLE", "NCCL_NET")


def nccl_conf(paths=None) -> dict:
    """The interface settings NCCL reads from its configuration files (the later file wins, as in
    NCCL; the environment wins over both and is recorded under ``transport``)."""
    found = {}
    for path in paths or ("/etc/nccl.conf", os.path.expanduser("~/.nccl.conf")):
        for line in (_read(path) or "").splitlines():
            key, sep, val = line.strip().partition("=")
            if sep and key in NCCL_CONF_KEYS:
                found[key] = {"value": val, "file": path}
    return found


def before_mpi(nccl: bool = False) -> None:
    """Run on every rank before mpi4py initialises MPI (and, with ``nccl``, before NCCL starts)."""
    if nccl:
        nccl_debug_setup()
    cpus = node_cpus()
    decision = decide_yield(dict(os.environ), local_ranks(), cpus["usable_cpus"])
    if decision["value"] is not None and YIELD_VAR not in os.environ:
        os.environ[YIELD_VAR] = decision["value"]
    BEFORE_MPI.update(cpus=cpus, yield_when_idle=decision)
    env = os.environ
    rank_vars = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK")  # RANK: torchrun's
    if next((env[v] for v in rank_vars if v in env), "0") == "0":
        settings = ompi_settings()
        BEFORE_MPI["cuda_aware_mpi"] = {k: settings[k] for k in ("built_with_cuda_support", "source")}
        BEFORE_MPI["network_pinning"] = {
            "btl_tcp_if_include": settings["btl_tcp_if_include"],
            "btl_tcp_if_exclude": settings["btl_tcp_if_exclude"],
            "nccl_conf": nccl_conf(),
            "note": "what every job gets: ompi_info (MCA files and environment), NCCL's configuration files",
        }


# -- NCCL's own account of what it chose -----------------------------------------------
NCCL_LINE = re.compile(r"NCCL INFO (.*)$")


def nccl_debug_setup() -> None:
    """Have NCCL write its INFO lines (init and network only) to a file of this rank's own.

    Only when the user has not asked for NCCL_DEBUG themselves: then their setting stands
    and NCCL prints where they expect.
    """
    if "NCCL_DEBUG" in os.environ:
        return
    import tempfile

    fd, path = tempfile.mkstemp(prefix="mncbench-nccl-", suffix=".log")
    os.close(fd)
    os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=path)
    BEFORE_MPI["nccl_debug_file"] = path


def parse_nccl_info(text: str) -> dict:
    """NCCL's version, network, interfaces and channel transports from its INFO lines."""
    out = {"version": None, "network": None, "interfaces": [], "transports": []}
    for raw in text.splitlines():
        m = NCCL_LINE.search(raw)
        if m is None:
            continue
        line = m.group(1).strip()
        v = re.match(r"NCCL version (\S+)", line)
        if v:
            out["version"] = v.group(1)
        n = re.match(r"Using network (\S+)", line)
        if n:
            out["network"] = n.group(1)
        u = re.match(r"NET/(\w+) ?: Using (.*)$", line)
        if u:
            for dev in re.findall(r"\[\d+\](\S+?)(?::[\d.]+<\d+>|\s|$)", u.group(2) + " "):
                name = f"{u.group(1)}:{dev}"
                if name not in out["interfaces"]:
                    out["interfaces"].append(name)
        t = re.search(r" via (\S+)", line)
        if line.startswith("Channel") and t and t.group(1) not in out["transports"]:
            out["transports"].append(t.group(1))
    return out


def nccl_debug_read() -> dict | None:
    """This rank's parsed NCCL INFO lines (and the file removed), or None when not collected."""
    path = BEFORE_MPI.get("nccl_debug_file")
    if not path:
        return None
    text = ""
    for candidate in (path, f"{path}.{os.getpid()}"):
        try:
            with open(candidate, encoding="utf-8", errors="replace") as f:
                text += f.read()
            os.unlink(candidate)
        except OSError:
            pass
    return parse_nccl_info(text)


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


def mpi_tcp_interfaces(ranks: list[dict], pinning: dict | None) -> dict:
    """Per host, the interfaces Open MPI's TCP transport uses (when TCP carries the traffic)."""
    pinning = pinning or {}
    # ompi_info (rank 0, before MPI_Init) resolved both from the MCA files and the environment;
    # without it, what the ranks were told
    include = pinning.get("btl_tcp_if_include") or os.environ.get(TRANSPORT_VARS[2])
    exclude = pinning.get("btl_tcp_if_exclude") or os.environ.get(TRANSPORT_VARS[3])
    hosts: dict[str, list[dict]] = {}
    for rec in ranks:
        if rec["host"] not in hosts and rec.get("interfaces") is not None:
            hosts[rec["host"]] = [{k: i[k] for k in ("name", "address", "prefix", "speed_mbps")}
                                  for i in tcp_interfaces(rec["interfaces"], include, exclude)]
    rule = f"btl_tcp_if_include={include}" if include else \
        f"btl_tcp_if_exclude={exclude or OMPI_DEFAULT_EXCLUDE}" + ("" if exclude else " (Open MPI's default)")
    return {"rule": rule, "hosts": hosts,
            "note": "the interfaces with an IPv4 address that the rule selects on each host; Open MPI's TCP "
                    "transport stripes over all of them when it carries the traffic (not with a UCX or "
                    "InfiniBand pml/btl)"}


# -- after ---------------------------------------------------------------------------
def rank_record(r) -> dict:
    """This rank's host, CPUs and device (every rank; gathered by the caller)."""
    cpus = BEFORE_MPI.get("cpus") or node_cpus()
    rec = {
        "rank": r.rank, "host": r.hosts[r.rank], "pid": os.getpid(),
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        **cpus,
        "yield_when_idle": (BEFORE_MPI.get("yield_when_idle") or {}).get("value"),
        # One kernel, one machine: containers (the sandbox's nodes) on one host share it, and
        # with it the host's cores, which no cpuset inside them shows.
        "boot_id": _read("/proc/sys/kernel/random/boot_id"),
        "interfaces": interfaces(),
        "gpu": None,
        "nccl": nccl_debug_read(),
    }
    if getattr(r, "framework", "chainer") == "pytorch":
        rec["gpu"] = torch_environment.torch_gpu(r)
    elif r.cuda is not None:
        cupy = r.cuda.cupy
        props = cupy.cuda.runtime.getDeviceProperties(r.device)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        rec["gpu"] = {"device": r.device, "name": name,
                      "pci_bus_id": "{:04x}:{:02x}:{:02x}.0".format(
                          props.get("pciDomainID", 0), props.get("pciBusID", 0), props.get("pciDeviceID", 0))}
    return rec


def device_buffer_allreduce(r) -> dict | None:
    """Collective, GPU runs only: does MPI reduce a device (CuPy) buffer correctly?

    What ``ompi_info`` says the library was built with is not what a job gets (a UCX or
    transport without CUDA support); one small MPI_Allreduce of a device buffer says it.
    Handed a device pointer, an MPI without CUDA support may crash the process, so it is
    tried only where ompi_info says CUDA support is built in, or where the communicator
    (naive, flat on GPUs) has just handed MPI device buffers itself.
    """
    if r.cuda is None:
        return None
    built = r.mpi.bcast((BEFORE_MPI.get("cuda_aware_mpi") or {}).get("built_with_cuda_support"), root=0)
    if built is not True and r.args.communicator not in ("naive", "flat"):
        return {"tried": False, "works": None,
                "reason": f"ompi_info says built_with_cuda_support={built}; a device pointer handed to MPI "
                          "could crash the run"}
    cupy = r.cuda.cupy
    buf = cupy.full(16, r.rank + 1, dtype=cupy.float32)
    try:
        r.mpi.Allreduce(r.MPI.IN_PLACE, buf, op=r.MPI.SUM)
        r.sync()
        ok, error = bool((buf.get() == r.size * (r.size + 1) / 2).all()), None
    except Exception as e:  # mpi4py refuses the buffer, or MPI returns an error
        ok, error = False, f"{type(e).__name__}: {e}"
    results = r.mpi.allgather((ok, error))
    return {"tried": True, "works": all(x[0] for x in results),
            "errors": sorted({x[1] for x in results if x[1]}),
            "note": "one MPI_Allreduce (SUM) of a 16-element CuPy buffer, checked on every rank"}


def oversubscribed_hosts(ranks: list[dict]) -> list[dict]:
    """Hosts whose ranks outnumber the CPUs they can use (node CPUs, or the union of their affinities)."""
    by_host: dict[str, list[dict]] = {}
    for rec in ranks:
        by_host.setdefault(rec["host"], []).append(rec)
    out = []
    for host, recs in by_host.items():
        affinity = set()
        for rec in recs:
            affinity.update(rec.get("affinity") or [])
        usable = min([rec["usable_cpus"] for rec in recs] + ([len(affinity)] if affinity else []))
        if len(recs) > usable:
            out.append({"host": host, "ranks": len(recs), "usable_cpus": usable})
    return out


def shared_machines(ranks: list[dict]) -> list[dict]:
    """Machines (one kernel boot id) that run several of the run's nodes, with ranks and CPUs.

    ``oversubscribed`` is true when the ranks on the machine outnumber the CPUs they can run on
    (the union of their affinities, which containers report in the machine's numbering), the
    sandbox's case: 3 containers x 2 ranks on a 2-core host look fine node by node.
    """
    by_boot: dict[str, list[dict]] = {}
    for rec in ranks:
        if rec.get("boot_id"):
            by_boot.setdefault(rec["boot_id"], []).append(rec)
    out = []
    for boot, recs in by_boot.items():
        hosts = sorted({rec["host"] for rec in recs})
        if len(hosts) < 2:
            continue
        affinity = set()
        for rec in recs:
            affinity.update(rec.get("affinity") or [])
        usable = len(affinity) if affinity else max(rec["usable_cpus"] for rec in recs)
        out.append({"boot_id": boot, "hosts": hosts, "ranks": len(recs), "usable_cpus": usable,
                    "oversubscribed": len(recs) > usable})
    return out


def _mpi_versions(r) -> dict:
    """mpi4py's and the MPI library's versions; None where the ranks have no MPI world (torchrun)."""
    if getattr(r, "host_path", "host-mpi") != "host-mpi":
        return {"mpi4py": None, "mpi_library": None, "mpi_standard": None}
    import mpi4py

    MPI = r.MPI
    # Open MPI's string ends in a NUL, which is not whitespace.
    mpi_library = MPI.Get_library_version().replace("\x00", "").strip()
    mpi_library = mpi_library.splitlines()[0].strip().rstrip(",")
    return {"mpi4py": mpi4py.__version__, "mpi_library": mpi_library,
            "mpi_standard": "{}.{}".format(*MPI.Get_version())}


def environment(r, ranks: list[dict]) -> dict:
    counts: dict[str, int] = {}
    for h in r.hosts:
        counts[h] = counts.get(h, 0) + 1
    fw = torch_environment.framework_record(r)
    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "framework": fw["framework"],
        "chainer": fw["chainer"],
        "torch": fw["torch"],
        "numpy": np.__version__,
        "cupy": None,
        **_mpi_versions(r),
        "cuda_aware_mpi": BEFORE_MPI.get("cuda_aware_mpi"),
        "communicator_class": fw["communicator_class"],
        "distributed": fw["distributed"],
        "hosts": r.hosts,
        "nodes": len(counts),
        "processes_per_node": counts,
        "ranks": ranks,
        "oversubscribed": oversubscribed_hosts(ranks),
        "shared_machines": shared_machines(ranks),
        "mpi_yield_when_idle": BEFORE_MPI.get("yield_when_idle"),
        "transport": {k: os.environ.get(k) for k in TRANSPORT_VARS},
        "network_pinning": BEFORE_MPI.get("network_pinning"),
        "mpi_tcp_interfaces": mpi_tcp_interfaces(ranks, BEFORE_MPI.get("network_pinning")),
        "transport_note": "as the ranks were told (mpiexec --mca, -x); unset: Open MPI's TCP transport "
                          "uses every interface that is up, NCCL picks its own",
        "device": "cpu",
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "scheduler": scheduler_job(),
    }
    if fw["framework"] == "pytorch" and r.args.gpu:
        env.update(torch_environment.gpu_environment(r, ranks))
    if r.cuda is not None:
        cupy = r.cuda.cupy
        env["cupy"] = cupy.__version__
        env["device"] = f"cuda ({ranks[0]['gpu']['name']})"
        env["gpus"] = [dict(rec["gpu"], rank=rec["rank"], host=rec["host"]) for rec in ranks]
        env["cudnn_enabled"] = bool(r.cuda.cudnn_enabled) and r.chainer.should_use_cudnn(">=auto")
        try:
            from cupy.cuda import nccl

            env["nccl_version"] = nccl.get_version()
        except Exception:
            env["nccl_version"] = None
        seen = [rec["nccl"] for rec in ranks if rec.get("nccl")]
        env["nccl"] = None if not seen else {
            "network": sorted({x["network"] for x in seen if x["network"]}),
            "interfaces": sorted({i for x in seen for i in x["interfaces"]}),
            "transports": sorted({t for x in seen for t in x["transports"]}),
            "note": "from one NCCL_DEBUG=INFO initialisation per rank (subsystems INIT, NET)",
        }
    return env
