"""The inventory rules playbooks/preflight.yml checks before any node is touched.

Pure functions over plain values: each returns a list of problems, one string
``"<host>: <variable>: <what is wrong>"`` per problem, so that the preflight
play can report every problem of an inventory in one message. Roles that check
the same rule at their own stage use the same pattern (the filter
``mnc_unsafe_names`` of plugins/filter/mnc.py), so the rule lives here once.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from pathlib import Path

# Names that reach shells, file paths and configuration files unquoted.
NAME_PATTERNS = {
    # a POSIX account name as useradd accepts it (no leading digit or dash)
    "user": r"^[a-z_][a-z0-9_-]{0,31}$",
    # a network interface name (bonding: eth0, enp1s0f0, bond0, eth0.100, ...)
    "interface": r"^[A-Za-z0-9_.@-]+$",
    # host, cluster and partition names
    "name": r"^[A-Za-z0-9_.-]+$",
}

# Variable -> kind of name it holds (a string or a list of strings).
NAME_VARS = {
    "mnc_mpi_user": "user",
    "ssh_mesh_user": "user",
    "mpi_hostfile_owner": "user",
    "chainer_user": "user",
    "pyenv_user": "user",
    "slurm_check_user": "user",
    "openmpi_env_users": "user",
    "bonding_name": "interface",
    "bonding_interfaces": "interface",
    "slurm_cluster_name": "name",
    "slurm_partition": "name",
    "mnc_private_hostname": "name",
}

# The MPI user and the roles' copies of it: never root.
MPI_USER_VARS = (
    "mnc_mpi_user", "ssh_mesh_user", "mpi_hostfile_owner", "chainer_user", "pyenv_user", "slurm_check_user",
)

# Integers that must be at least 1 when the inventory sets them.
POSITIVE_INT_VARS = ("mnc_slots_per_node", "mnc_mpi_user_uid", "mpi_hostfile_cpu_slots")

OTHER_VARS = (
    "mnc_private_ip", "mnc_private_prefix", "mnc_link_gbps", "mnc_shared_dirs", "shared_fs_export_options",
    "shared_fs_server",
)


def unsafe_names(values, kind: str = "name") -> list:
    """The values (a string or a list) that are not a safe ``kind`` name (NAME_PATTERNS)."""
    pattern = re.compile(NAME_PATTERNS[kind])
    items = values if isinstance(values, list | tuple) else [values]
    return [v for v in items if not isinstance(v, str) or not pattern.match(v)]


def checked_names(names) -> list:
    """The variable names, of those given, that node_problems has a rule for."""
    known = set(NAME_VARS) | set(MPI_USER_VARS) | set(POSITIVE_INT_VARS) | set(OTHER_VARS)
    return sorted(n for n in names if n in known or str(n).endswith("_timeout"))


def _as_int(value):
    """value as an int when it is one (or a string of digits), else None; booleans are not."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value):
        return int(value)
    return None


def _as_number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def ipv4_problem(value) -> str | None:
    """Why value is not a usable private IPv4 address of a node, or None."""
    if not isinstance(value, str):
        return f"must be an IPv4 address (a string), got {value!r}"
    try:
        addr = ipaddress.IPv4Address(value.strip())
    except ValueError:
        return f"{value!r} is not an IPv4 address (four numbers 0-255, e.g. 192.168.0.1)"
    if addr.is_loopback or addr.is_unspecified or addr.is_multicast or str(addr) == "255.255.255.255":
        return f"{value} cannot be a node's address (loopback, unspecified, multicast or broadcast)"
    return None


def node_problems(host: str, values: dict, nodes=None) -> list:
    """Problems of one node's inventory values ``{variable: value}`` (only what it sets);
    ``nodes``: the inventory's mnc_nodes (None: the rules that need them are left out)."""
    out = []

    def bad(var, why):
        out.append(f"{host}: {var}: {why}")

    if unsafe_names(host, "name"):
        bad("inventory_hostname",
            f"{host!r} may hold only letters, digits and _ . - (it reaches shells and /etc/hosts)")
    for var, value in sorted(values.items()):
        kind = NAME_VARS.get(var)
        if kind:
            wrong = unsafe_names(value, kind)
            if wrong:
                bad(var, f"{', '.join(repr(w) for w in wrong)} is not a safe {kind} name "
                         f"(it reaches shells unquoted; allowed: {NAME_PATTERNS[kind]})")
        if var in MPI_USER_VARS and value in ("root", "0"):
            bad(var, "the MPI user must not be root (mpiexec, pip builds and the user's files run as it)")
        if var in POSITIVE_INT_VARS or var.endswith("_timeout"):
            number = _as_int(value)
            if number is None:
                bad(var, f"must be a whole number > 0, got {value!r}")
            elif number <= 0:
                what = " (0 would disable the limit)" if var.endswith("_timeout") else ""
                bad(var, f"must be > 0, got {number}{what}")
        if var == "mnc_private_ip":
            why = ipv4_problem(value)
            if why:
                bad(var, why)
        if var == "mnc_private_prefix":
            number = _as_int(value)
            if number is None or not 1 <= number <= 32:
                bad(var, f"must be a prefix length 1-32, got {value!r}")
        if var == "mnc_link_gbps":
            number = _as_number(value)
            if number is None or number <= 0:
                bad(var, f"must be a number of Gb/s > 0 (e.g. 10 or 25), got {value!r}; "
                         "verify.yml compares point-to-point bandwidth with it")
    out += launcher_without_scheduler(host, values.get("benchmark_launcher"), values.get("mnc_scheduler"))
    if {"mnc_shared_dirs", "shared_fs_export_options", "shared_fs_server"} & set(values):
        user = values.get("mnc_mpi_user", "mpiuser")
        out += shared_fs_problems(host, values.get("mnc_shared_dirs", []),
                                  values.get("mnc_mpi_home", f"/home/{user}"),
                                  values.get("shared_fs_export_options", SHARED_FS_DEFAULT_OPTIONS),
                                  values.get("shared_fs_server", ""), nodes)
    return out


def launcher_without_scheduler(host: str, launcher, scheduler) -> list:
    """``benchmark_launcher: slurm`` starts the ranks with srun: the cluster must run Slurm."""
    scheduler = scheduler or "none"
    if launcher != "slurm" or scheduler == "slurm":
        return []
    return [f"{host}: benchmark_launcher: slurm needs the cluster's Slurm: set mnc_scheduler: slurm "
            f"(the scheduler stage installs it), not {scheduler!r}"]


# The options exportfs(8) knows (exports(5)); key=value ones by their key.
SHARED_FS_OPTIONS = frozenset((
    "rw", "ro", "sync", "async", "secure", "insecure", "wdelay", "no_wdelay", "hide", "nohide", "crossmnt",
    "subtree_check", "no_subtree_check", "secure_locks", "insecure_locks", "auth_nlm", "no_auth_nlm",
    "mountpoint", "mp", "nordirplus", "pnfs", "no_pnfs", "security_label", "root_squash", "no_root_squash",
    "all_squash", "no_all_squash", "fsid", "anonuid", "anongid", "sec", "refer", "replicas",
))
SHARED_FS_DEFAULT_OPTIONS = "rw,sync,no_subtree_check,root_squash"
# Directories that are the node's own: sharing them would share its system.
SHARED_FS_SYSTEM = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/opt", "/proc", "/root",
                    "/run", "/sbin", "/sys", "/tmp", "/usr", "/var")


def shared_fs_problems(host: str, dirs, home, options, server="", nodes=None) -> list:
    """``mnc_shared_dirs`` (absolute directories the shared_fs server exports and every other
    node mounts), ``shared_fs_export_options`` (exports(5) options) and ``shared_fs_server``
    (one of ``nodes``, the inventory's mnc_nodes, when given; empty: the first): what is
    wrong, named.

    The MPI user's home cannot be one of them: shared_fs mounts in the network stage, after the
    base and python stages wrote the home (pyenv, the virtualenv), so the mount would hide what
    they wrote. A home the site already shares (mounted before mncluster runs) is supported:
    common finds the nodes that share it and one of them writes it."""
    out = []

    def bad(var, why):
        out.append(f"{host}: {var}: {why}")

    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        bad("mnc_shared_dirs", f"must be a list of absolute directories, got {dirs!r}")
        dirs = []
    home = posixpath.normpath(str(home or "/home/mpiuser"))
    seen = []
    for d in dirs:
        norm = posixpath.normpath(d) if d.startswith("/") else d
        parts = d.strip("/").split("/")
        if not d.startswith("/") or (parts != [""] and unsafe_names(parts, "name")) or ".." in parts:
            bad("mnc_shared_dirs", f"{d!r} is not an absolute directory of letters, digits and _ . - "
                                   "(it reaches /etc/exports, /etc/fstab and mount)")
        elif norm in SHARED_FS_SYSTEM or any(_nested(norm, s) for s in SHARED_FS_SYSTEM if s != "/"):
            bad("mnc_shared_dirs", f"{d!r} is (or is inside) the node's own system directory; share a "
                                   "directory of its own (e.g. /scratch, /data or /srv/<name>)")
        elif _nested(norm, home) or _nested(home, norm):
            bad("mnc_shared_dirs", f"{d!r} holds or is inside the MPI user's home {home}: "
                                   "shared_fs cannot serve the home (it mounts after the base and python "
                                   "stages wrote pyenv and the virtualenv there, and would hide them). "
                                   "Mount a shared home before mncluster runs, as HPC sites do (supported: "
                                   "one node per shared home writes it), or share a scratch or data "
                                   "directory")
        elif any(_nested(norm, s) or _nested(s, norm) for s in seen):
            bad("mnc_shared_dirs", f"{d!r} overlaps another shared directory ({', '.join(seen)})")
        else:
            seen.append(norm)
    if dirs and server and nodes is not None and server not in nodes:
        bad("shared_fs_server", f"{server!r} is not a node of mnc_nodes (the node that holds and exports "
                                f"{', '.join(dirs)}); name one of {', '.join(nodes)}, "
                                "or leave it empty for the first")
    if not isinstance(options, str) or not options.strip():
        bad("shared_fs_export_options", f"must be a comma-separated exports(5) option list, got {options!r}")
        return out
    unknown = [o for o in options.split(",") if o.split("=", 1)[0].strip() not in SHARED_FS_OPTIONS]
    if unknown:
        bad("shared_fs_export_options", f"{', '.join(repr(o) for o in unknown)}: not an exports(5) option "
                                        f"(known: {' '.join(sorted(SHARED_FS_OPTIONS))})")
    opts = [o.strip() for o in options.split(",")]
    if "no_root_squash" in opts:
        bad("shared_fs_export_options", "no_root_squash would make root on every node root on the share; "
                                        "mncluster writes users' files as the user, root_squash is enough")
    # Squashing to uid or gid 0 undoes root_squash (and all_squash makes everyone that).
    for o in opts:
        key, _, value = o.partition("=")
        if key in ("anonuid", "anongid") and value.strip().lstrip("0") == "" and value.strip():
            bad("shared_fs_export_options", f"{o}: squashed requests would act as root (uid or gid 0) "
                                            "on the share; leave anonuid/anongid unset (nobody)")
    if "insecure" in opts:
        bad("shared_fs_export_options", "insecure accepts requests from unprivileged ports: any user on a "
                                        "client could speak NFS as any uid; leave it out (secure)")
    return out


def _nested(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def slots_over_gpus(host: str, variable: str, slots, gpus) -> list:
    """In GPU mode every rank takes one GPU: a slot (or process-per-node) count above the GPUs
    counted on the node is a problem. ``gpus`` 0 or unset is "not counted" (``mnc_accelerator:
    gpu`` forces GPU mode without counting): nothing to compare with, no problem."""
    count, number = _as_int(gpus), _as_int(slots)
    if not count or count <= 0 or number is None or number <= count:
        return []
    return [f"{host}: {variable}: {number} ranks per node but the node has {count} GPU(s) (GPU mode: one "
            f"rank per GPU, counted by lspci); set {variable} to at most {count}, or mnc_accelerator: cpu"]


def cluster_problems(private_ips: dict) -> list:
    """Problems across the nodes ``{host: mnc_private_ip or None}`` (inventory order):
    every node has a private address, and no two nodes share one."""
    out = []
    seen: dict = {}
    for host, ip in private_ips.items():
        if ip is None or (isinstance(ip, str) and not ip.strip()):
            out.append(f"{host}: mnc_private_ip: not set (the hostfile, /etc/hosts and known_hosts need "
                       "every node's private address)")
            continue
        if ipv4_problem(ip) is None:
            seen.setdefault(str(ipaddress.IPv4Address(ip.strip())), []).append(host)
    for ip, hosts in seen.items():
        if len(hosts) > 1:
            out.extend(
                f"{h}: mnc_private_ip: {ip} is also the address of {', '.join(o for o in hosts if o != h)}"
                for h in hosts
            )
    return out


def spec_problems(host: str, results: list) -> list:
    """One problem per distinct argument-spec error of a host, naming every role entry point that
    refused it. ``results`` are validate_argument_spec loop results whose loop item is
    ``{role, entry, ...}``."""
    refused: dict = {}
    for res in results:
        # failed_when: false clears "failed"; the errors stay in argument_errors
        errors = res.get("argument_errors") or []
        if not errors and res.get("failed"):
            errors = [res.get("msg", "argument spec validation failed")]
        item = res.get(res.get("ansible_loop_var", "item")) or {}
        where = f"roles/{item.get('role', '?')} {item.get('entry', '?')}"
        for err in errors:
            refused.setdefault(str(err), []).append(where)
    return [f"{host}: {_CLASS.sub(_type_name, err)} (argument spec of {', '.join(where)})"
            for err, where in refused.items()]


def _type_name(match) -> str:
    """``<class 'ansible.utils.unsafe_proxy.AnsibleUnsafeText'>`` -> ``str`` (a plain type name)."""
    return match.group(1).rsplit(".", 1)[-1].replace("AnsibleUnsafeText", "str")


_CLASS = re.compile(r"<class '([\w.]+)'>")


def provided(specs: list, values: dict) -> list:
    """The entries of role_specs() that name a variable of ``values``, each with ``provided``:
    ``{variable: value}`` of those (what validate_argument_spec's provided_arguments takes), and
    ``options`` cut to those variables: validate_argument_spec also renders and checks every other
    option of its spec that is a variable where it runs (``stack``'s whole matrix, for one
    variable the inventory sets), which is not the inventory's to answer for."""
    out = []
    for spec in specs:
        given = {k: v for k, v in values.items() if k in spec["options"]}
        if given:
            out.append(dict(spec, options={k: spec["options"][k] for k in given}, provided=given))
    return out


def _strip_spec(options: dict) -> dict:
    """Options without ``default``/``required``: preflight validates only what the inventory sets,
    and a default may refer to a variable of a role that is not loaded here."""
    out = {}
    for name, opt in (options or {}).items():
        opt = {k: v for k, v in (opt or {}).items() if k not in ("default", "required")}
        if isinstance(opt.get("options"), dict):
            opt["options"] = _strip_spec(opt["options"])
        out[name] = opt
    return out


def role_specs(files: dict) -> list:
    """``[{role, entry, options}]`` from ``{role: parsed meta/argument_specs.yml}``, every entry
    point of every role, options stripped by _strip_spec."""
    out = []
    for role in sorted(files):
        for entry, spec in sorted(((files[role] or {}).get("argument_specs") or {}).items()):
            out.append({"role": role, "entry": entry, "options": _strip_spec((spec or {}).get("options"))})
    return out


def read_specs(roles_dir) -> dict:
    """``{role: parsed meta/argument_specs.yml}`` of every role under roles_dir."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return {
        path.parents[1].name: yaml.load(path.read_text(), Loader=loader)  # a safe loader
        for path in sorted(Path(roles_dir).glob("*/meta/argument_specs.yml"))
    }
