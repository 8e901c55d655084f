"""verify's checks of each node's own GPU stack: Open MPI's CUDA support (openmpi_facts), what
the MPI user's Python can do with the node's GPUs (the ``node`` output of
roles/verify/files/mnc_gpu_probe.py: CUDA, cuDNN as Chainer sees it, NCCL) and the services a
real GPU server needs (the nvidia_driver and rdma roles' records). The checks across nodes are
mnc_verify_gpu_cluster. No Ansible imports (tests/unit/test_verify_gpu.py)."""

from __future__ import annotations

import json
import re

from ansible_collections.mncluster.core.plugins.module_utils.mnc_verify_rows import (
    FAIL,
    PASS,
    SKIP,
    gist,
    row,
)

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


# --- the GPUs (roles/verify/files/mnc_gpu_probe.py's output) ---------------------------------

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


def nccl_text(code) -> str:
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


def active_ports(doc: dict) -> list[str]:
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
                f"the GPU probe {what} without a result: {gist(run) or 'no output'}; run "
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
                    f"NCCL {nccl_text(nccl.get('version'))}: a single-rank allreduce gave "
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
                    f"NCCL {nccl_text(nccl.get('version'))} loads through cupy.cuda.nccl; a single-rank "
                    "allreduce "
                    f"on GPU {nccl.get('device', 0)} is right"
                ),
            )
        )
    return rows


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
