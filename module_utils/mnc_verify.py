"""The acceptance checks of playbooks/verify.yml as pure functions.

Each check turns what the nodes reported into table rows
``{"check", "subject", "status", "detail"}`` with status PASS, FAIL or SKIP;
``evaluate`` runs them all and ``render_table`` prints them. No Ansible
imports: unit-tested directly (tests/unit/test_verify*.py), used by
library/mnc_verify_table.py.

Units follow nccl-tests: bytes, seconds, GB/s = 1e9 B/s. Link speeds are
configured in Gbit/s (``mnc_link_gbps``): GB/s = Gbit/s / 8.
"""

from __future__ import annotations

import json
import re

try:  # as a module_utils of an Ansible module
    from ansible.module_utils.mnc_hostfile import parse_hostfile as _parse_hostfile
    from ansible.module_utils.mnc_verify_gpu_health import check_gpu_health
except ImportError:  # imported directly (unit tests)
    from mnc_hostfile import parse_hostfile as _parse_hostfile
    from mnc_verify_gpu_health import check_gpu_health

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"

# Components that must be identical on every node (key in mnc_versions.py's output -> label).
VERSION_KEYS = (
    ("python", "Python"),
    ("chainer", "Chainer"),
    ("numpy", "NumPy"),
    ("cupy", "CuPy"),
    ("mpi4py", "mpi4py"),
    ("mpi_library", "MPI library"),
    ("openmpi", "Open MPI (ompi_info)"),
)


def row(check, subject, status, detail):
    return {"check": check, "subject": subject, "status": status, "detail": detail}


# --- hostfile ----------------------------------------------------------------------------------


def parse_hostfile(text: str) -> list[dict]:
    """``<address> slots=<n>`` lines (comments and blank lines ignored), in file order."""
    return [{"address": host, "slots": slots} for host, slots in _parse_hostfile(text, strict=False)]


def check_hostfile(entries: list[dict], nodes: list[dict]) -> list[dict]:
    """Every node appears once, under its private address, with at least one slot."""
    if not entries:
        return [row("hostfile", "cluster", FAIL, "hostfile missing or empty")]
    by_addr = {}
    for e in entries:
        by_addr.setdefault(e["address"], []).append(e)
    problems = []
    for n in nodes:
        found = by_addr.get(n.get("private_ip"), [])
        if not found:
            problems.append(f"{n['name']} ({n.get('private_ip')}) missing")
        elif len(found) > 1:
            problems.append(f"{n['name']} ({n.get('private_ip')}) listed {len(found)} times")
    known = {n.get("private_ip") for n in nodes}
    problems += [f"{a} is no node of the inventory" for a in by_addr if a not in known]
    problems += [f"{e['address']} has slots={e['slots']}" for e in entries if e["slots"] < 1]
    total = sum(e["slots"] for e in entries)
    summary = ", ".join(f"{e['address']} slots={e['slots']}" for e in entries)
    if problems:
        return [row("hostfile", "cluster", FAIL, "; ".join(problems))]
    return [row("hostfile", "cluster", PASS, f"{len(entries)} nodes, {total} slots: {summary}")]


# --- ranks -------------------------------------------------------------------------------------


def parse_rank_lines(text: str) -> list[tuple[str, int]]:
    """``<hostname> <rank>`` lines printed by every rank; anything else is ignored."""
    out = []
    for line in (text or "").splitlines():
        m = re.fullmatch(r"\s*(\S+)\s+(\d+)\s*", line)
        if m:
            out.append((m.group(1), int(m.group(2))))
    return out


def _ranges(ranks: list[int]) -> str:
    ranks = sorted(ranks)
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ",".join(parts)


def expected_placement(expected: list[dict], launcher: str | None = None) -> list[tuple[str, list[int]]]:
    """The ranks each host should run, in rank order, for the mapping verify.yml asks for.

    Both mappings it uses (``--map-by ppr:<slots>:node`` when every node has the same
    slots, ``--map-by slot`` otherwise) fill a node's slots before the next node's.
    OpenMPI takes the node it is launched from first when that node is in the hostfile,
    then the others in hostfile order. ``expected``: hostfile order, as for
    :func:`check_ranks`; ``launcher``: what ``uname -n`` prints on the launching node.
    """
    order = [e for e in expected if e["host"] == launcher] + [e for e in expected if e["host"] != launcher]
    out, first = [], 0
    for e in order:
        out.append((e["host"], list(range(first, first + e["slots"]))))
        first += e["slots"]
    return out


def check_ranks(run: dict | None, expected: list[dict], launcher: str | None = None) -> list[dict]:
    """Every rank 0..N-1 printed exactly once, each host running exactly the ranks the
    mapping gives it (:func:`expected_placement`).

    ``expected``: hostfile order, ``{"host": <what `uname -n` prints>, "slots": n}``.
    ``run``: ``{"rc", "stdout", "stderr", "cmd"}`` of the mpiexec run, or None when not run.
    ``launcher``: what ``uname -n`` prints on the node mpiexec ran on.
    """
    check = "ranks"
    if run is None:
        return [row(check, "cluster", FAIL, "not run")]
    if run.get("skipped_reason"):
        return [row(check, "cluster", FAIL, f"not run: {run['skipped_reason']}")]
    total = sum(e["slots"] for e in expected)
    lines = parse_rank_lines(run.get("stdout", ""))
    problems = []
    if run.get("rc") not in (0, None):
        gist = _gist(run)
        timed_out = run.get("rc") in (124, 137)
        what = "timed out" if timed_out else f"mpiexec exited {run.get('rc')}"
        problems.append(what + (f": {gist}" if gist else ""))
    ranks = [r for _, r in lines]
    missing = sorted(set(range(total)) - set(ranks))
    dups = sorted({r for r in ranks if ranks.count(r) > 1})
    extra = sorted({r for r in ranks if r >= total})
    if missing:
        problems.append(f"ranks never printed: {_ranges(missing)}")
    if dups:
        problems.append(f"ranks printed more than once: {_ranges(dups)}")
    if extra:
        problems.append(f"ranks beyond {total - 1}: {_ranges(extra)}")
    per_host: dict[str, list[int]] = {}
    for host, r in lines:
        per_host.setdefault(host, []).append(r)
    want = expected_placement(expected, launcher)
    for host, wanted in want:
        got = len(per_host.get(host, []))
        if got != len(wanted):
            problems.append(f"{host} ran {got} rank(s), expected {len(wanted)}")
    for host in per_host:
        if host not in dict(want):
            problems.append(f"unexpected host {host} ran ranks {_ranges(per_host[host])}")
    placement = "; ".join(f"{h}: {_ranges(per_host.get(h, [])) or '-'}" for h, _ in want)
    wanted_text = "; ".join(f"{h}: {_ranges(r) or '-'}" for h, r in want)
    if run.get("rc") in (124, 137) and len(problems) == 1 and placement == wanted_text:
        # Every rank ran where it should and printed; only the launcher did not end.
        return [row(check, "cluster", FAIL,
                    f"all {total} ranks ran on the expected hosts and printed, but mpiexec did not exit "
                    "before the timeout: the launcher hung at the end of the job (OpenMPI 5's launcher "
                    "does so about once in a hundred short jobs without odls_base_max_threads = 0 in "
                    "<prefix>/etc/prte-mca-params.conf: roles/openmpi/README.md, \"The launcher's "
                    f"threads\") (placement {placement})")]
    if not problems and placement != wanted_text:
        start = f"the launcher {launcher} first, then" if launcher in dict(want) else "in"
        rule = f"each node's slots in turn, {start} hostfile order"
        problems.append(f"placement differs from the mapping ({rule}): expected {wanted_text}")
    if problems:
        return [row(check, "cluster", FAIL, "; ".join(problems) + f" (placement {placement})")]
    return [row(check, "cluster", PASS, f"{total} ranks, 0..{total - 1} once each; {placement}")]


# --- OpenMPI CUDA support ----------------------------------------------------------------------


def check_cuda(nodes: list[dict], require: bool) -> list[dict]:
    """``opal_built_with_cuda_support`` on every node (openmpi_facts' cuda_support.built_with); in
    GPU mode also that CUDA is usable at run time (cuda_support.runtime)."""
    rows = []
    for n in nodes:
        if not n.get("reachable", True):
            continue
        om = n.get("openmpi") or {}
        if n.get("openmpi_error") or not om:
            why = n.get("openmpi_error") or "openmpi_facts returned nothing"
            rows.append(row("openmpi cuda", n["name"], FAIL, f"no OpenMPI facts: {why}"))
            continue
        built = om.get("built_with")
        desc = f"Open MPI {om.get('version', '?')} at {om.get('prefix', '?')}: built_with_cuda={built}"
        if om.get("runtime") is not None:
            desc += f", runtime={om.get('runtime')}"
        if built is True and (require or n.get("use_gpu")) and om.get("runtime") is not True:
            # Built for CUDA but unable to use it here: every device buffer would fail or be staged.
            rows.append(row("openmpi cuda", n["name"], FAIL, desc + (
                " (GPU mode: CUDA is not usable at run time; the accelerator/cuda plugin did not open. "
                "Check that the NVIDIA driver's libcuda.so.1 loads for the MPI user: nvidia-smi, "
                "ldconfig -p | grep libcuda)")))
        elif built is True:
            rows.append(row("openmpi cuda", n["name"], PASS, desc))
        elif require:
            rows.append(row("openmpi cuda", n["name"], FAIL, desc + " (GPU mode needs --with-cuda)"))
        else:
            rows.append(row("openmpi cuda", n["name"], SKIP, desc + " (CPU mode: not required)"))
    return rows


# --- the GPUs (module_utils/mnc_gpu_probe.py's output) -----------------------------------------

CPU_MODE = "CPU mode (mnc_use_gpu false): the GPU checks (CUDA, cuDNN, NCCL, device-buffer MPI) are not run"


def parse_probe(stdout: str) -> dict:
    """The JSON document of mnc_gpu_probe.py (its last ``PROBE {...}`` line)."""
    for line in reversed((stdout or "").strip().splitlines()):
        if line.startswith("PROBE "):
            return json.loads(line[6:])
    raise ValueError("no PROBE line in the output")


def _cuda_text(code) -> str:
    return f"{code // 1000}.{code % 1000 // 10}" if isinstance(code, int) and code else "?"


def _cudnn_text(code) -> str:
    if not isinstance(code, int):
        return "?"
    if code >= 90000:  # cuDNN 9: major * 10000 + minor * 100 + patch
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _nccl_text(code) -> str:
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}" if isinstance(code, int) else "?"


def nccl_transport(lines: list[str]) -> dict:
    """What NCCL's INFO lines say about the network: ``network`` (IB, Socket, ... or None)
    and ``gdrdma`` (a channel runs over GPUDirect RDMA)."""
    network = None
    for line in lines or []:
        m = re.search(r"Using network (\w+)", line) or re.search(r"via NET/(\w+)", line)
        if m:
            network = m.group(1)
            if network == "IB":
                break
    return {"network": network, "gdrdma": any("GDRDMA" in line for line in lines or [])}


def _active_ports(doc: dict) -> list[str]:
    ports = ((doc.get("infiniband") or {}).get("ports")) or []
    return [
        f"{p['device']}:{p['port']} {p.get('link_layer') or '?'}"
        for p in ports
        if "ACTIVE" in str(p.get("state"))
    ]


def check_gpu_node(n: dict) -> list[dict]:
    """A GPU-mode node's own GPU checks, from its ``gpu_probe`` run (mnc_gpu_probe.py node):
    every GPU it has visible to CUDA from the MPI user's Python, a kernel on each, Chainer's
    ``cudnn_enabled``, CuPy's NCCL binding (a single-rank allreduce)."""
    name = n["name"]
    run = n.get("gpu_probe")
    want = int(n.get("gpu_count") or 0)
    if not run or run.get("skipped_reason"):
        why = (run or {}).get("skipped_reason") or "no result"
        return [row("gpu cuda", name, FAIL, f"the GPU probe did not run: {why}")]
    try:
        doc = parse_probe(run.get("stdout", ""))
    except ValueError:
        what = "timed out" if run.get("rc") in (124, 137) else f"exited {run.get('rc')}"
        return [
            row(
                "gpu cuda",
                name,
                FAIL,
                f"the GPU probe {what} without a result: {_gist(run) or 'no output'}; run "
                "mnc_gpu_probe.py node (in /usr/local/lib/mncluster/verify) as the MPI user there to see why",
            )
        ]
    python = doc.get("python") or "the MPI user's Python"
    cuda = doc.get("cuda") or {}
    rows = []
    count = cuda.get("count") or 0
    usable = False
    if cuda.get("error") or not count:
        why = cuda.get("error") or "CuPy sees 0 CUDA devices"
        rows.append(
            row(
                "gpu cuda",
                name,
                FAIL,
                (
                    f"CUDA is not usable from {python}: {why}; this node has {want} GPU(s) (mnc_gpu_count). "
                    "Check nvidia-smi as the MPI user, that the driver supports the CUDA runtime "
                    f"(CuPy {cuda.get('cupy', '?')}), /dev/nvidia* permissions, CUDA_VISIBLE_DEVICES, and on "
                    "NVSwitch (HGX) machines that nvidia-fabricmanager runs"
                ),
            )
        )
    else:
        devs = cuda.get("devices") or []
        names = "; ".join(f"{d.get('name')} (cc {d.get('cc')})" for d in devs)
        detail = (
            f"{count} GPU(s) visible to CUDA from {python}: {names}; driver CUDA "
            f"{_cuda_text(cuda.get('driver'))}, "
            f"runtime {_cuda_text(cuda.get('runtime'))}, CuPy {cuda.get('cupy', '?')}"
        )
        broken = [
            f"GPU {i}" + (f" ({d['error']})" if d.get("error") else "")
            for i, d in enumerate(devs)
            if not d.get("kernel")
        ]
        if want and count != want:
            why = (
                f"; but the node has {want} (mnc_gpu_count, lspci): check CUDA_VISIBLE_DEVICES in "
                "the MPI user's environment, nvidia-smi -L, and the driver's messages (dmesg | grep -i nvrm)"
            )
            rows.append(row("gpu cuda", name, FAIL, detail + why))
        elif broken:
            why = (
                f"; a kernel failed or summed wrong on {', '.join(broken)}: check nvidia-smi -q "
                "(ECC, retired pages, Xid errors in dmesg)"
            )
            rows.append(row("gpu cuda", name, FAIL, detail + why))
        else:
            usable = True
            rows.append(row("gpu cuda", name, PASS, detail + "; a kernel ran on each"))
    if not usable:
        blocked = "not checked: CUDA is not usable here (see gpu cuda)"
        return [*rows, row("gpu cudnn", name, SKIP, blocked), row("gpu nccl", name, SKIP, blocked)]

    cudnn, chainer = doc.get("cudnn") or {}, doc.get("chainer") or {}
    cupy = str(cuda.get("cupy", "?"))
    loaded = (
        f"CuPy {cupy} loads cuDNN {_cudnn_text(cudnn['version'])}"
        if "version" in cudnn
        else f"CuPy {cupy} loads no cuDNN ({cudnn.get('error', '?')})"
    )
    if cupy.split(".")[0].isdigit() and int(cupy.split(".")[0]) >= 14:
        fix = (
            "CuPy 14 has no cuDNN support: pin CuPy 13.x with cuDNN 8 "
            "(stack_cupy_version, stack_cudnn_version)"
        )
    else:
        fix = (
            "CuPy 13 loads libcudnn.so.8 (cuDNN 8.8 or later): install cuDNN 8 with the cudnn role "
            "(stack_cudnn_version 8.9.x) and check ldconfig -p | grep libcudnn.so.8"
        )
    if chainer.get("error"):
        rows.append(row("gpu cudnn", name, FAIL, f"Chainer does not import in {python}: {chainer['error']}"))
    elif not chainer.get("available"):
        rows.append(
            row(
                "gpu cudnn",
                name,
                FAIL,
                (
                    f"Chainer {chainer.get('chainer')} cannot use CuPy {cupy}: {chainer.get('why') or '?'}; "
                    "install the pinned CuPy (stack_cupy_package, stack_cupy_version) into this Python"
                ),
            )
        )
    elif not chainer.get("cudnn_enabled"):
        rows.append(
            row(
                "gpu cudnn",
                name,
                FAIL,
                (
                    f"chainer.backends.cuda.cudnn_enabled is False: Chainer {chainer.get('chainer')} would "
                    "train "
                    f"without cuDNN; {loaded}; {fix}"
                ),
            )
        )
    else:
        rows.append(
            row("gpu cudnn", name, PASS, f"Chainer {chainer.get('chainer')}: cudnn_enabled True; {loaded}")
        )

    nccl = doc.get("nccl") or {}
    install = "install NCCL 2 with the nccl role so that libnccl.so.2 is on the loader path (ldconfig -p)"
    if nccl.get("missing"):
        rows.append(
            row("gpu nccl", name, FAIL, f"CuPy's NCCL binding finds no NCCL: {nccl['missing']}; {install}")
        )
    elif nccl.get("error"):
        rows.append(row("gpu nccl", name, FAIL, f"CuPy's NCCL binding: {nccl['error']}; {install}"))
    elif not nccl.get("ok"):
        rows.append(
            row(
                "gpu nccl",
                name,
                FAIL,
                (
                    f"NCCL {_nccl_text(nccl.get('version'))}: a single-rank allreduce gave "
                    f"{nccl.get('got')}, expected "
                    f"{nccl.get('want')}: check the GPU (nvidia-smi -q) and the NCCL build for this CUDA"
                ),
            )
        )
    else:
        rows.append(
            row(
                "gpu nccl",
                name,
                PASS,
                (
                    f"NCCL {_nccl_text(nccl.get('version'))} loads through cupy.cuda.nccl; a single-rank "
                    "allreduce "
                    f"on GPU {nccl.get('device', 0)} is right"
                ),
            )
        )
    return rows


def _not_run(check: str, subject: str, run: dict | None) -> list[dict] | None:
    """The row of a run that gave nothing to judge (never run, not applicable, skipped), else None."""
    if run is None:
        return [row(check, subject, FAIL, "not run")]
    if run.get("not_applicable"):
        return [row(check, subject, SKIP, run["not_applicable"])]
    if run.get("skipped_reason"):
        return [row(check, subject, FAIL, f"not run: {run['skipped_reason']}")]
    return None


def _launch_failure(run: dict) -> str:
    """How a launch ended that gave no result: timed out or mpiexec's exit code, with what it said."""
    what = "timed out" if run.get("rc") in (124, 137) else f"mpiexec exited {run.get('rc')}"
    gist = _gist(run)
    return what + (f": {gist}" if gist else "")


def _ranks_of(check: str, run: dict | None, fix: str) -> tuple[list[dict] | None, list[dict]]:
    """(the per-rank parts of a cross-node probe run, or None, and the rows when it did not give them)."""
    not_run = _not_run(check, "cluster", run)
    if not_run:
        return None, not_run
    try:
        doc = parse_probe(run.get("stdout", ""))
    except ValueError:
        return None, [row(check, "cluster", FAIL, f"{_launch_failure(run)}; {fix}")]
    return list(doc.get("ranks") or []), []


def check_gpu_cluster(nodes: list[dict], nccl_run: dict | None, send_run: dict | None) -> list[dict]:
    """Across the nodes, one rank per node: an NCCL allreduce of device buffers (the right sum on
    every rank; on InfiniBand/RoCE, NCCL's IB transport, with GPUDirect RDMA where nvidia_peermem is
    loaded) and an mpi4py ring send of CuPy device buffers (CUDA-aware MPI, proven by use)."""
    answered = [n for n in nodes if n.get("reachable", True)]
    gpu = [n for n in answered if n.get("use_gpu")]
    if not gpu:
        return [row("gpu across nodes", "cluster", SKIP, "no node in GPU mode (mnc_use_gpu): not run")]
    cpu = [n["name"] for n in answered if not n.get("use_gpu")]
    if cpu:
        why = (
            f"not run: {', '.join(cpu)} in CPU mode; ChainerMN on GPUs needs every node in GPU mode "
            "(mnc_accelerator)"
        )
        return [row("gpu nccl allreduce", "cluster", FAIL, why), row("gpu device send", "cluster", FAIL, why)]
    by_host = {n.get("nodename") or n["name"]: n for n in gpu}
    rows = []

    nccl_fix = (
        "check the gpu nccl rows, NCCL_SOCKET_IFNAME / NCCL_IB_HCA in /etc/nccl.conf (mpi_network), and that "
        "the nodes reach each other on the private network"
    )
    ranks, rows_nccl = _ranks_of("gpu nccl allreduce", nccl_run, nccl_fix)
    rows += rows_nccl
    if ranks is not None:
        problems = []
        for r in ranks:
            who = f"rank {r.get('rank')} on {r.get('host')}"
            if r.get("missing"):
                problems.append(f"{who}: CuPy finds no NCCL ({r['missing']})")
            elif r.get("error"):
                problems.append(f"{who}: {r['error']}")
            elif not r.get("ok"):
                problems.append(f"{who} got {r.get('got')}, expected {r.get('want')}")
        hosts = sorted({r.get("host") for r in ranks})
        missing = sorted(set(by_host) - set(hosts))
        if missing:
            problems.append(f"no rank on {', '.join(missing)}")
        if len(ranks) < 2:
            problems.append(f"{len(ranks)} rank(s): nothing crossed a node")
        transport = nccl_transport([line for r in ranks for line in r.get("nccl_log") or []])
        net = transport["network"] or "?"
        if problems:
            rows.append(row("gpu nccl allreduce", "cluster", FAIL, "; ".join(problems) + f"; {nccl_fix}"))
        else:
            r0 = ranks[0]
            rows.append(
                row(
                    "gpu nccl allreduce",
                    "cluster",
                    PASS,
                    (
                        f"{len(ranks)} ranks, one per node: allreduce of {r0.get('bytes', 0) >> 20} MiB "
                        "float32 device "
                        f"buffers gave {r0.get('want'):g} on every rank; NCCL "
                        f"{_nccl_text(r0.get('version'))}, "
                        f"network {net}"
                    ),
                )
            )
            rows += _check_ib(ranks, by_host)

    send_fix = (
        "OpenMPI must be built --with-cuda (see openmpi cuda) and mpi4py built against it "
        "(mnc_openmpi_prefix); a device pointer given to an MPI that is not CUDA-aware crashes or arrives "
        "wrong"
    )
    ranks, rows_send = _ranks_of("gpu device send", send_run, send_fix)
    rows += rows_send
    if ranks is not None:
        problems = [
            f"rank {r.get('rank')} on {r.get('host')}: "
            + (r["error"] if r.get("error") else f"the buffer from rank {r.get('from')} arrived wrong")
            for r in ranks
            if not r.get("ok")
        ]
        if len(ranks) < 2:
            problems.append(f"{len(ranks)} rank(s): nothing crossed a node")
        if problems:
            rows.append(row("gpu device send", "cluster", FAIL, "; ".join(problems) + f"; {send_fix}"))
        else:
            rows.append(
                row(
                    "gpu device send",
                    "cluster",
                    PASS,
                    (
                        f"{len(ranks)} ranks, one per node: {ranks[0].get('bytes', 0) >> 20} MiB CuPy device "
                        "buffers "
                        "sent around the ring with mpi4py arrived intact (CUDA-aware MPI in use)"
                    ),
                )
            )
    return rows


def _check_ib(ranks: list[dict], by_host: dict) -> list[dict]:
    """On a node with an active InfiniBand/RoCE port, NCCL must use its IB transport, and GPUDirect
    RDMA where nvidia_peermem is loaded."""
    rows = []
    for r in ranks:
        n = by_host.get(r.get("host"))
        if n is None:
            continue
        try:
            doc = parse_probe((n.get("gpu_probe") or {}).get("stdout", ""))
        except ValueError:
            doc = {}
        ports = _active_ports(doc)
        if not ports:
            continue
        peermem = bool((doc.get("infiniband") or {}).get("peermem"))
        t = nccl_transport(r.get("nccl_log") or [])
        where = f"active port(s) {', '.join(ports)}"
        if t["network"] != "IB":
            rows.append(
                row(
                    "gpu ib transport",
                    n["name"],
                    FAIL,
                    (
                        f"{where}, but NCCL uses {t['network'] or 'an unknown network'}, not NET/IB: install "
                        "rdma-core "
                        "(libibverbs) for NCCL, check NCCL_IB_HCA (mpi_network_ib_hca) and that "
                        "NCCL_IB_DISABLE is unset"
                    ),
                )
            )
        elif peermem and not t["gdrdma"]:
            rows.append(
                row(
                    "gpu ib transport",
                    n["name"],
                    FAIL,
                    (
                        f"{where}; NCCL uses NET/IB, but not GPUDirect RDMA although nvidia_peermem is "
                        "loaded: "
                        "check nvidia-smi topo -m (GPU and HCA under one PCIe switch) and NCCL_NET_GDR_LEVEL"
                    ),
                )
            )
        else:
            gdr = (
                "with GPUDirect RDMA" if t["gdrdma"] else "without GPUDirect RDMA (nvidia_peermem not loaded)"
            )
            rows.append(row("gpu ib transport", n["name"], PASS, f"{where}; NCCL uses NET/IB {gdr}"))
    return rows


def check_gpu(nodes: list[dict], nccl_run: dict | None = None, send_run: dict | None = None) -> list[dict]:
    """Every GPU check: each GPU-mode node's own (:func:`check_gpu_node`), a SKIP row naming CPU
    mode for the others, then the checks across nodes (:func:`check_gpu_cluster`)."""
    rows = []
    for n in nodes:
        if not n.get("reachable", True):
            continue
        rows += check_gpu_node(n) if n.get("use_gpu") else [row("gpu", n["name"], SKIP, CPU_MODE)]
    return rows + check_gpu_cluster(nodes, nccl_run, send_run)


# --- what real GPU servers need (nvidia_driver's and rdma's records) ----------------------------

SERVICE_STATES = {"enabled": PASS, "failed": FAIL, "skipped": SKIP, "absent": SKIP}


def check_services(nodes: list[dict]) -> list[dict]:
    """One row per node for the services a real GPU server needs, as the roles recorded them
    (``services``: {name: {state, reason}} from mnc_nvidia_services and mnc_rdma_services):
    FAIL when one failed, PASS when one is on and none failed, else SKIP; the detail names each
    with its state and reason (on the sandbox: why each is not there)."""
    rows = []
    for n in nodes:
        if not n.get("reachable", True):
            continue
        services = n.get("services") or {}
        if not services:
            rows.append(
                row("services", n["name"], SKIP, "no record of the driver's services or the RDMA path "
                    "(the gpu and network stages have not run on this node)")
            )
            continue
        states = {name: (svc or {}).get("state", "?") for name, svc in services.items()}
        detail = "; ".join(
            f"{name} {states[name]}" + (f" ({svc['reason']})" if (svc or {}).get("reason") else "")
            for name, svc in sorted(services.items())
        )
        if any(st == "failed" for st in states.values()):
            status = FAIL
        elif any(st == "enabled" for st in states.values()):
            status = PASS
        else:
            status = SKIP
        unknown = sorted(name for name, st in states.items() if st not in SERVICE_STATES)
        if unknown:
            status, detail = FAIL, f"unknown state of {', '.join(unknown)}: " + detail
        rows.append(row("services", n["name"], status, detail))
    return rows


# --- point-to-point bandwidth ------------------------------------------------------------------


def parse_p2p(stdout: str) -> dict:
    """The JSON document mnc_p2p_bandwidth.py prints on rank 0 (last line that parses)."""
    for line in reversed((stdout or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON document in the output")


def _median(values: list[float]) -> float:
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2.0


def p2p_matrix(doc: dict) -> dict:
    """The pairs' peak bandwidths as an N x N matrix (GB/s, symmetric; None on the
    diagonal and for a pair that was not measured), hosts in rank order."""
    hosts = list(doc.get("hosts") or [])
    gbps: list[list[float | None]] = [[None] * len(hosts) for _ in hosts]
    for p in doc.get("pairs", []):
        results = p.get("results") or []
        i, j = (p.get("ranks") or [None, None])[:2]
        if results and i is not None and j is not None and max(i, j) < len(hosts):
            gbps[i][j] = gbps[j][i] = max(r["gbps"] for r in results)
    return {"hosts": hosts, "gbps": gbps}


def render_p2p_matrix(matrix: dict) -> str:
    """The matrix as a markdown table (GB/s), one row and one column per node."""
    hosts = matrix["hosts"]
    lines = ["| GB/s | " + " | ".join(hosts) + " |", "|---|" + "---:|" * len(hosts)]
    for name, values in zip(hosts, matrix["gbps"], strict=True):
        cells = ["-" if v is None else f"{v:.2f}" for v in values]
        lines.append(f"| **{name}** | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_p2p_text(matrix: dict) -> str:
    """The matrix as fixed-width text for the console (GB/s)."""
    hosts = matrix["hosts"]
    w = max([6] + [len(h) for h in hosts])
    lines = [" " * w + "".join(f"  {h:>{w}}" for h in hosts)]
    for name, values in zip(hosts, matrix["gbps"], strict=True):
        lines.append(f"{name:<{w}}" + "".join(f"  {'-' if v is None else f'{v:.2f}':>{w}}" for v in values))
    return "\n".join(lines)


def check_p2p(
    run: dict | None, link_gbps: float | None, min_fraction: float, median_fraction: float | None = None
) -> list[dict]:
    """Peak ping-pong bandwidth of every node pair against the configured link speed,
    and (``median_fraction`` set) against the median pair: a pair below that fraction of
    the median is a bad link (cable, NIC, switch port) even where the link speed is not
    known."""
    check = "p2p bandwidth"
    not_run = _not_run(check, "all pairs", run)
    if not_run:
        return not_run
    if run.get("rc") not in (0, None):
        return [row(check, "all pairs", FAIL, _launch_failure(run))]
    try:
        doc = parse_p2p(run.get("stdout", ""))
    except ValueError as exc:
        tail = (run.get("stdout") or "")[-200:]
        return [row(check, "all pairs", FAIL, f"unreadable output ({exc}): {tail}")]
    pairs = doc.get("pairs", [])
    if not pairs:
        return [row(check, "all pairs", FAIL, f"no node pairs measured (hosts: {doc.get('hosts')})")]
    link_gBps = link_gbps / 8.0 if link_gbps else None
    peaks = [max(r["gbps"] for r in p["results"]) for p in pairs if p.get("results")]
    median = _median(peaks) if peaks else None
    rows = []
    for p in pairs:
        results = p.get("results", [])
        subject = f"{p['a']} <-> {p['b']}"
        if not results:
            rows.append(row(check, subject, FAIL, "no measurements"))
            continue
        best = max(results, key=lambda r: r["gbps"])
        small = min(results, key=lambda r: r["bytes"])
        detail = (
            f"peak {best['gbps']:.2f} GB/s at {_size(best['bytes'])}; "
            f"{small['gbps']:.3f} GB/s at {_size(small['bytes'])}"
        )
        problems = []
        judged_by_median = bool(median_fraction) and len(peaks) > 1 and bool(median)
        if judged_by_median:
            of_median = best["gbps"] / median
            detail += f"; {of_median:.0%} of the median pair ({median:.2f} GB/s)"
            if of_median < median_fraction:
                where = f"a slow link between {p['a']} and {p['b']}?"
                problems.append(f"below {median_fraction:.0%} of the median pair: {where}")
        if link_gBps is None:
            detail += "; no mnc_link_gbps to compare with"
        else:
            frac = best["gbps"] / link_gBps
            detail += f"; link {link_gbps:g} Gb/s = {link_gBps:.2f} GB/s -> {frac:.0%}"
            if frac < min_fraction:
                problems.append(f"< {min_fraction:.0%} of the link (wrong network? one link of a bond?)")
        if problems:
            rows.append(row(check, subject, FAIL, detail + "; " + "; ".join(problems)))
        elif link_gBps is None and not judged_by_median:
            rows.append(row(check, subject, SKIP, detail))
        else:
            rows.append(row(check, subject, PASS, detail))
    return rows


# --- shared filesystem ---------------------------------------------------------------------------


def check_mpiio(run: dict | None) -> list[dict]:
    """MPI-IO across the nodes on the shared directory (mnc_mpiio.py, one rank per node): every
    rank must read back, byte for byte, the block the rank on the next node wrote into the same
    file. A directory that is not really shared gives every node its own file, and the blocks
    read are not the peers'. ``run`` None: no shared directory, no row."""
    check = "shared filesystem"
    if run is None:
        return []
    subject = run.get("dir") or "shared directory"
    not_run = _not_run(check, subject, run)
    if not_run:
        return not_run
    if run.get("rc") not in (0, None):
        return [row(check, subject, FAIL, _launch_failure(run))]
    try:
        doc = json.loads((run.get("stdout") or "").strip().splitlines()[-1])
        ranks = doc["ranks"]
        subject = doc.get("dir") or subject
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        return [row(check, subject, FAIL, f"unreadable output ({exc}): {(run.get('stdout') or '')[-200:]}")]
    hosts = sorted({r["host"] for r in ranks})
    bad = [r for r in ranks if not r.get("ok")]
    if bad:
        # a step that failed is reported by every rank alike: once here
        errors = list(dict.fromkeys(r["error"] for r in bad if r.get("error")))
        errors += [f"rank {r['rank']} on {r['host']} read other bytes than rank {r['read_from']} on "
                   f"{r['read_from_host']} wrote" for r in bad if not r.get("error")]
        detail = _clip("; ".join(errors), 400) + " (is the directory really shared?)"
        return [row(check, subject, FAIL, detail)]
    if len(hosts) < 2:
        detail = f"all {len(ranks)} rank(s) ran on {', '.join(hosts)}: nothing crossed a node"
        return [row(check, subject, FAIL, detail)]
    detail = (f"MPI-IO: {len(ranks)} ranks on {len(hosts)} nodes wrote one file ({_size(doc['block'])} "
              "each); each read back, byte for byte, the block the next node wrote")
    return [row(check, subject, PASS, detail)]


def _size(n: int) -> str:
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


# --- versions ----------------------------------------------------------------------------------


def check_versions(nodes: list[dict]) -> list[dict]:
    """The same Python, Chainer, NumPy, CuPy, mpi4py and MPI on every node that answered."""
    check = "versions"
    rows = []
    seen = []
    for n in nodes:
        if not n.get("reachable", True):
            continue
        v = n.get("versions")
        if not v or n.get("versions_error"):
            why = n.get("versions_error") or "nothing"
            rows.append(row(check, n["name"], FAIL, f"could not read versions: {why}"))
            continue
        v = dict(v)
        if (n.get("openmpi") or {}).get("version"):
            v["openmpi"] = n["openmpi"]["version"]
        errors = {k: val for k, val in v.items() if isinstance(val, str) and val.startswith("error:")}
        for k, val in sorted(errors.items()):
            rows.append(row(check, n["name"], FAIL, f"{k}: {val}"))
        seen.append((n["name"], v))
    if not seen:
        return rows or [row(check, "cluster", FAIL, "no node reported versions")]
    differing = []
    agreed = []
    for key, label in VERSION_KEYS:
        # Import errors are reported per node above; compare what did import.
        values = {name: v.get(key) for name, v in seen if key in v and not str(v[key]).startswith("error:")}
        if not values:
            continue
        distinct = sorted({str(x) for x in values.values()})
        if len(distinct) == 1:
            agreed.append(f"{label} {_short(distinct[0])}")
        else:
            groups = {d: sorted(nm for nm, x in values.items() if str(x) == d) for d in distinct}
            where = "; ".join(f"{_short(d)} on {', '.join(h)}" for d, h in groups.items())
            differing.append(f"{label} differs: {where}")
    down = [n["name"] for n in nodes if not n.get("reachable", True)]
    unchecked = f"; not checked: {', '.join(down)}" if down else ""
    if differing:
        rows.append(row(check, "cluster", FAIL, "; ".join(differing) + unchecked))
    else:
        broken = f"; import errors on {', '.join(sorted({r['subject'] for r in rows}))}" if rows else ""
        rows.append(
            row(
                check,
                "cluster",
                PASS if not rows else FAIL,
                f"same on {len(seen)} node(s): " + ", ".join(agreed) + broken + unchecked,
            )
        )
    return rows


def _gist(run: dict, width: int = 300) -> str:
    """What a failed run said: its meaningful lines (no blank or ----- box lines), joined, clipped."""
    text = run.get("stderr") or run.get("stdout") or ""
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and set(line) != {"-"}]
    # "[node:pid] ..." lines are launcher warnings; the explanation is OpenMPI's message box.
    plain = [line for line in lines if not re.match(r"\[[^\]]+:\d+\] ", line)]
    return _clip(" ".join(plain or lines), width) if lines else ""


def _clip(text: str, width: int = 160) -> str:
    """One line of at most `width` characters (connection errors can be paragraphs)."""
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: width - 3] + "..."


def _short(value: str) -> str:
    """The first line, first two comma-separated parts ("Open MPI v5.0.7, package: ...")."""
    line = value.strip().splitlines()[0] if value.strip() else value
    return ", ".join(line.split(", ")[:2])[:80]


# --- the whole table ---------------------------------------------------------------------------


def check_reachable(nodes: list[dict]) -> list[dict]:
    return [
        row("node answers", n["name"], PASS, f"{n.get('nodename') or n['name']} ({n.get('private_ip', '?')})")
        if n.get("reachable", True)
        else row("node answers", n["name"], FAIL, f"did not answer: {_clip(n.get('error') or 'unreachable')}")
        for n in nodes
    ]


def evaluate(
    nodes,
    hostfile_text,
    ranks_run,
    p2p_run,
    link_gbps,
    p2p_min_fraction,
    require_cuda,
    launcher=None,
    p2p_median_fraction=0.7,
    gpu_nccl=None,
    gpu_send=None,
    mpiio=None,
    nccl_tests=None,
    nccl_cluster_min_busbw_gbs=None,
) -> dict:
    """Every check's rows, the rendered table, and whether the cluster passed.

    ``launcher``: the inventory name of the node mpiexec ran on (None: not known).
    ``nccl_tests``: nccl-tests' all_reduce_perf across the nodes (one rank per GPU), judged against
    ``nccl_cluster_min_busbw_gbs`` or, without it, ``p2p_min_fraction`` of one link.
    ``gpu_nccl``, ``gpu_send``: the cross-node GPU runs (mnc_gpu_probe.py nccl-allreduce, send gpu),
    shaped like ``p2p_run``; see :func:`check_gpu`. ``mpiio``: the MPI-IO run on the shared
    directory (mnc_mpiio.py), None where nothing is shared; see :func:`check_mpiio`.
    """
    entries = parse_hostfile(hostfile_text) if hostfile_text is not None else []
    by_ip = {n.get("private_ip"): n for n in nodes}
    expected = [
        {"host": (by_ip.get(e["address"]) or {}).get("nodename") or e["address"], "slots": e["slots"]}
        for e in entries
    ]
    rows = check_reachable(nodes)
    rows += (
        check_hostfile(entries, nodes)
        if hostfile_text is not None
        else [row("hostfile", "cluster", FAIL, "not read (no node answered)")]
    )
    launcher_node = next((n for n in nodes if n.get("name") == launcher), {})
    rows += check_ranks(ranks_run, expected, launcher_node.get("nodename") or launcher)
    rows += check_cuda(nodes, require_cuda)
    rows += check_gpu(nodes, gpu_nccl, gpu_send)
    rows += check_services(nodes)
    # DCGM, nccl-tests and the node-health checks (module_utils/mnc_verify_gpu_health.py).
    # The cluster's nccl-tests run is judged against its threshold, else a fraction of one link.
    cluster_floor = nccl_cluster_min_busbw_gbs or (p2p_min_fraction * link_gbps / 8.0 if link_gbps else None)
    health_rows, gpu_health = check_gpu_health(
        nodes, p2p_median_fraction, nccl_tests, cluster_floor, declared=bool(nccl_cluster_min_busbw_gbs)
    )
    rows += health_rows
    rows += check_p2p(p2p_run, link_gbps, p2p_min_fraction, p2p_median_fraction)
    rows += check_mpiio(mpiio)
    rows += check_versions(nodes)
    failures = [f"{r['check']} [{r['subject']}]: {r['detail']}" for r in rows if r["status"] == FAIL]
    down = [n["name"] for n in nodes if not n.get("reachable", True)]
    matrix = _matrix_of(p2p_run)
    return {
        "rows": rows,
        "table": render_table(rows),
        "passed": not failures,
        "failures": failures,
        "not_answering": down,
        "p2p_matrix": matrix,
        "p2p_matrix_text": render_p2p_text(matrix) if matrix else "no pair measured",
        "gpu_health": gpu_health,
    }


def _matrix_of(run: dict | None) -> dict | None:
    """The p2p run's matrix, or None where it did not produce one."""
    if not run or run.get("rc") not in (0, None) or not run.get("stdout"):
        return None
    try:
        return p2p_matrix(parse_p2p(run["stdout"]))
    except (ValueError, KeyError, TypeError):
        return None


def render_markdown(result: dict, title: str = "Cluster acceptance checks", image: str | None = None) -> str:
    """verify.md: the pass/fail table and, where pairs were measured, the bandwidth matrix."""
    out = [f"# {title}", "", "```", result["table"], "```", ""]
    if result.get("failures"):
        out += ["## Failures", ""] + [f"* {f}" for f in result["failures"]] + [""]
    matrix = result.get("p2p_matrix")
    if matrix and matrix["hosts"]:
        out += ["## Point-to-point bandwidth between every pair of nodes", ""]
        out += ["Peak one-way ping-pong bandwidth (GB/s = 1e9 B/s) over the private network.", ""]
        out += [render_p2p_matrix(matrix), ""]
        if image:
            out += [f"![pair bandwidth]({image})", ""]
    return "\n".join(out)


def render_table(rows: list[dict], detail_width: int = 110) -> str:
    """A fixed-width text table, one line per row (long details wrap under DETAIL)."""
    heads = ("CHECK", "SUBJECT", "RESULT", "DETAIL")
    w0 = max([len(heads[0])] + [len(r["check"]) for r in rows])
    w1 = max([len(heads[1])] + [len(r["subject"]) for r in rows])
    w2 = len(heads[2])
    indent = " " * (w0 + w1 + w2 + 6)
    lines = [
        f"{heads[0]:<{w0}}  {heads[1]:<{w1}}  {heads[2]:<{w2}}  {heads[3]}",
        f"{'-' * w0}  {'-' * w1}  {'-' * w2}  {'-' * 6}",
    ]
    for r in rows:
        chunks = _wrap(r["detail"], detail_width)
        lines.append(f"{r['check']:<{w0}}  {r['subject']:<{w1}}  {r['status']:<{w2}}  {chunks[0]}")
        lines += [indent + c for c in chunks[1:]]
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in (PASS, FAIL, SKIP)}
    verdict = "PASSED" if counts[FAIL] == 0 else "FAILED"
    lines.append(f"{verdict}: {counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped")
    return "\n".join(lines)


def _wrap(text: str, width: int) -> list[str]:
    words, out, cur = text.split(" "), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            out.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    out.append(cur)
    return out
