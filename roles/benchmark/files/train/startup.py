"""What every rank settles before MPI starts (``before_mpi``, called by the command line), kept in
``BEFORE_MPI`` for the environment record (``train.environment``).

Rank 0 asks ``ompi_info`` whether the library was built with CUDA support and
which interfaces its TCP transport is pinned to (no fork after MPI_Init), and
every rank decides whether MPI should yield
when idle: ranks that busy-poll on a node with fewer usable CPUs than ranks
steal each other's time, which shows as a slow network and is not one.
With NCCL, every rank has NCCL write its INFO lines to a file of its own, read back
afterwards (``nccl_debug_read``) as NCCL's account of what it chose.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from train.launch import local_ranks
from train.node import _read, node_cpus

YIELD_VAR = "OMPI_MCA_mpi_yield_when_idle"
BEFORE_MPI: dict = {}


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
