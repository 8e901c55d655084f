"""Who started the ranks, and what each rank learns from its environment before any library starts.

The PyTorch engine needs a rank, a world size and a rendezvous (master address and
port) for ``torch.distributed``. Users start it three ways, and each says so in its
environment:

* ``mpiexec`` (Open MPI): ``OMPI_COMM_WORLD_RANK`` / ``_SIZE`` / ``_LOCAL_RANK``;
* ``srun --mpi=pmix`` (Slurm): ``SLURM_PROCID`` / ``SLURM_STEP_NUM_TASKS`` (else ``SLURM_NTASKS``) /
  ``SLURM_LOCALID``
  (``PMIX_RANK`` as well);
* ``torchrun``: ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` and ``MASTER_ADDR`` /
  ``MASTER_PORT`` (``TORCHELASTIC_RUN_ID`` marks it).

Under the MPI launchers the master address is rank 0's host, sent to the others
over MPI (``MASTER_ADDR`` / ``MASTER_PORT`` from the environment win where set).
Both engines also read, before MPI starts, how many ranks share this node (``local_ranks``:
mpiexec's variables, or Slurm's step layout) and the batch job the ranks run in
(``scheduler_job``). Pure functions over a mapping: no MPI, no torch.
"""

from __future__ import annotations

import os
import re

# (launcher, marker variable, rank, size, local rank, local size); the first whose marker is set wins.
LAUNCHERS = (
    ("torchrun", "TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
    ("mpiexec", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    # the job step's task count (a step may run fewer tasks than the job has)
    ("slurm", "SLURM_PROCID", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", None),
    ("mpiexec", "PMIX_RANK", "PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"),
    ("mpiexec", "PMI_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
)


def _int(env, name):
    value = env.get(name) if name else None
    return int(value) if value is not None and str(value).isdigit() else None


def detect(env) -> dict:
    """Launcher, rank, size, local rank and where each came from; ``launcher`` 'none' for a plain start.

    A Slurm job step started by ``srun`` sets ``SLURM_PROCID``; ``mpiexec`` inside a Slurm
    allocation also sets ``OMPI_COMM_WORLD_RANK``, which is checked first, so the launcher
    named is the one that started the ranks.
    """
    for name, marker, rank, size, local, local_size in LAUNCHERS:
        if env.get(marker) is None:
            continue
        if name == "slurm" and not env.get("SLURM_STEP_ID"):
            continue  # a batch script's own shell, not a task of a job step
        if name == "slurm" and env.get(size) is None:
            size = "SLURM_NTASKS"
        rec = {"launcher": name, "rank": _int(env, rank), "size": _int(env, size),
               "local_rank": _int(env, local) or 0, "local_size": _int(env, local_size),
               "rank_from": rank, "size_from": size,
               "master_addr": env.get("MASTER_ADDR"), "master_port": _int(env, "MASTER_PORT")}
        if name == "slurm" and rec["local_size"] is None:
            rec["local_size"] = slurm_tasks_on_node(env.get("SLURM_STEP_TASKS_PER_NODE", ""),
                                                    env.get("SLURM_NODEID", ""))
        if rec["rank"] is None or rec["size"] is None:
            continue
        return rec
    return {"launcher": "none", "rank": 0, "size": 1, "local_rank": 0, "local_size": 1, "rank_from": None,
            "size_from": None, "master_addr": env.get("MASTER_ADDR"), "master_port": _int(env, "MASTER_PORT")}


def uses_mpi(rec: dict) -> bool:
    """Whether the ranks share an MPI world for the host-side work (mpiexec, srun --mpi=pmix, or a plain
    start: an MPI singleton); torchrun's ranks have none and use a gloo group instead."""
    return rec["launcher"] != "torchrun"


def master_address(interfaces: list[list[dict]], hosts: list[str]) -> tuple[str, str | None]:
    """(address, interface) of rank 0 that every other node can reach: on one host the loopback,
    else rank 0's first IPv4 address whose subnet holds an address of every other host, else its
    first address off the loopback. ``interfaces[r]`` is rank r's ``node.interfaces()``."""
    import ipaddress

    mine = [i for i in interfaces[0] if not i["address"].startswith("127.")]
    others = [interfaces[r] for r in range(1, len(hosts)) if hosts[r] != hosts[0]]
    if not others:
        return "127.0.0.1", None
    for i in mine:
        net = ipaddress.IPv4Network(f"{i['address']}/{i['prefix']}", strict=False)
        if all(any(ipaddress.IPv4Address(j["address"]) in net for j in peer) for peer in others):
            return i["address"], i["name"]
    return (mine[0]["address"], mine[0]["name"]) if mine else ("127.0.0.1", None)


def interface_towards(interfaces: list[dict], address: str) -> str | None:
    """This rank's interface in the subnet of ``address`` (gloo binds to it), or None."""
    import ipaddress

    for i in interfaces:
        net = ipaddress.IPv4Network(f"{i['address']}/{i['prefix']}", strict=False)
        if ipaddress.IPv4Address(address) in net:
            return i["name"]
    return None


# -- what the launcher and the batch system tell every rank (both engines) -----------
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
