"""verify's GPU checks (module_utils/mnc_verify.py check_gpu, over mnc_verify_gpu.py and
mnc_verify_gpu_cluster.py, of roles/verify/files/mnc_gpu_probe.py's output).

No GPU here: the probe runs for real on this machine's Python (no CuPy), which
is exactly a GPU-mode node whose CUDA is not usable, and under a real
mpiexec for the cross-node shapes; what only a GPU produces (device counts,
cudnn_enabled, NCCL's log lines) is fed in the probe's own output shape.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

import mnc_gpu_probe
from ansible_collections.mncluster.core.plugins.module_utils import mnc_verify as v
from ansible_collections.mncluster.core.plugins.module_utils import mnc_verify_gpu as vgpu
from ansible_collections.mncluster.core.plugins.module_utils import mnc_verify_render as vrender

PROBE = ROOT / "roles" / "verify" / "files" / "mnc_gpu_probe.py"
needs_mpiexec = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec on this host")


def probe_run(doc: dict, rc: int = 0) -> dict:
    return {"rc": rc, "stdout": "PROBE " + json.dumps(doc), "stderr": ""}


H200 = {"name": "NVIDIA H200", "cc": "9.0", "mem_gib": 139.8, "kernel": True}
GOOD_NODE_DOC = {
    "python": "/home/mpiuser/.venvs/mncluster/bin/python",
    "cuda": {"cupy": "13.6.0", "count": 2, "driver": 12080, "runtime": 12060, "devices": [H200, H200],
             "kernel": True},
    "cudnn": {"version": 8907},
    "chainer": {"chainer": "7.8.1", "available": True, "cudnn_enabled": True},
    "nccl": {"host": "g1", "rank": 0, "version": 22304, "device": 0, "ok": True, "want": 1.0,
             "bytes": 1 << 24},
    "infiniband": {"ports": [], "peermem": False},
}  # fmt: skip


def gpu_node(name="g1", doc=None, count=2, **extra):
    d = json.loads(json.dumps(GOOD_NODE_DOC if doc is None else doc))
    node = {"name": name, "nodename": name, "reachable": True, "use_gpu": True, "gpu_count": count,
            "gpu_probe": probe_run(d)}  # fmt: skip
    node.update(extra)
    return node


def by_check(rows):
    return {(r["check"], r["subject"]): r for r in rows}


# --- a GPU-mode node whose CUDA is not usable -----------------------------------------------------


def test_a_gpu_mode_row_fails_when_cuda_is_not_usable_with_the_real_probe():
    # The probe, run for real by a Python without a usable CUDA (no CuPy here).
    proc = subprocess.run([sys.executable, str(PROBE), "node"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    node = {"name": "g1", "nodename": "g1", "reachable": True, "private_ip": "10.0.0.1", "use_gpu": True,
            "gpu_count": 8, "gpu_probe": {"rc": 0, "stdout": proc.stdout, "stderr": proc.stderr},
            "versions": {"python": "3.11.9", "chainer": "7.8.1"},
            "openmpi": {"version": "5.0.7", "built_with": True, "runtime": True}}  # fmt: skip
    ranks = {"rc": 0, "stdout": "".join(f"g1 {i}\n" for i in range(8))}
    single = {"not_applicable": "a single node"}
    res = v.evaluate([node], "10.0.0.1 slots=8\n", ranks, single, 10, 0.5, True, "g1",
                     gpu_nccl=single, gpu_send=single)  # fmt: skip
    rows = by_check(res["rows"])
    cuda = rows[("gpu cuda", "g1")]
    assert cuda["status"] == v.FAIL, res["table"]
    assert "CUDA is not usable from" in cuda["detail"] and "8 GPU(s)" in cuda["detail"]
    assert "nvidia-smi" in cuda["detail"]  # what to do
    assert rows[("openmpi cuda", "g1")]["status"] == v.PASS  # the build flag alone passed before
    assert res["passed"] is False
    assert any(f.startswith("gpu cuda [g1]: CUDA is not usable") for f in res["failures"])
    assert res["table"].splitlines()[-1].startswith("FAILED:")


def test_openmpi_without_cuda_at_run_time_fails_on_a_gpu_node_even_when_not_required():
    built = {"version": "5.0.7", "prefix": "/opt/ompi", "built_with": True, "runtime": False}
    node = {"name": "g1", "use_gpu": True, "openmpi": built}
    [row] = vgpu.check_cuda([node], require=False)
    assert row["status"] == v.FAIL and "libcuda.so.1" in row["detail"]


def test_fewer_gpus_visible_than_the_node_has_fails():
    doc = json.loads(json.dumps(GOOD_NODE_DOC))
    doc["cuda"].update(count=1, devices=[H200])
    rows = by_check(vgpu.check_gpu_node(gpu_node(doc=doc, count=2)))
    assert rows[("gpu cuda", "g1")]["status"] == v.FAIL
    assert "the node has 2" in rows[("gpu cuda", "g1")]["detail"]
    assert "CUDA_VISIBLE_DEVICES" in rows[("gpu cuda", "g1")]["detail"]


def test_a_kernel_failing_on_one_gpu_fails():
    doc = json.loads(json.dumps(GOOD_NODE_DOC))
    doc["cuda"]["devices"][1] = dict(H200, kernel=False, error="CUDARuntimeError: cudaErrorECCUncorrectable")
    rows = by_check(vgpu.check_gpu_node(gpu_node(doc=doc)))
    assert rows[("gpu cuda", "g1")]["status"] == v.FAIL
    assert "GPU 1 (CUDARuntimeError: cudaErrorECCUncorrectable)" in rows[("gpu cuda", "g1")]["detail"]


def test_a_good_gpu_node_passes_its_rows():
    rows = vgpu.check_gpu_node(gpu_node())
    assert [(r["check"], r["status"]) for r in rows] == [
        ("gpu cuda", v.PASS), ("gpu cudnn", v.PASS), ("gpu nccl", v.PASS)]  # fmt: skip
    assert "2 GPU(s) visible to CUDA" in rows[0]["detail"] and "driver CUDA 12.8" in rows[0]["detail"]
    assert "cuDNN 8.9.7" in rows[1]["detail"] and "NCCL 2.23.4" in rows[2]["detail"]


@pytest.mark.parametrize(
    ("change", "check", "words"),
    [
        ({"chainer": {"chainer": "7.8.1", "available": True, "cudnn_enabled": False},
          "cudnn": {"error": "CuPyError: libcudnn.so.8: cannot open shared object file"}},
         "gpu cudnn", ["cudnn_enabled is False", "libcudnn.so.8", "cudnn role"]),
        ({"cuda": dict(GOOD_NODE_DOC["cuda"], cupy="14.0.1"), "cudnn": {"error": "ModuleNotFoundError"},
          "chainer": {"chainer": "7.8.1", "available": True, "cudnn_enabled": False}},
         "gpu cudnn", ["CuPy 14 has no cuDNN", "stack_cupy_version"]),
        ({"chainer": {"chainer": "7.8.1", "available": False, "why": "No module named 'cupy'"}},
         "gpu cudnn", ["cannot use CuPy", "stack_cupy_version"]),
        ({"nccl": {"missing": "libnccl.so.2: cannot open shared object file"}},
         "gpu nccl", ["finds no NCCL", "nccl role"]),
        ({"nccl": {"version": 22304, "ok": False, "got": 0.0, "want": 1.0}},
         "gpu nccl", ["gave 0.0, expected 1.0"]),
    ],
)  # fmt: skip
def test_each_gpu_node_failure_says_what_to_do(change, check, words):
    doc = dict(json.loads(json.dumps(GOOD_NODE_DOC)), **change)
    row = by_check(vgpu.check_gpu_node(gpu_node(doc=doc)))[(check, "g1")]
    assert row["status"] == v.FAIL, row
    for w in words:
        assert w in row["detail"], (w, row["detail"])


def test_a_probe_that_did_not_run_or_died_fails():
    [row] = vgpu.check_gpu_node(dict(gpu_node(), gpu_probe={"skipped_reason": "no python for mpiuser"}))
    assert row["status"] == v.FAIL and "no python for mpiuser" in row["detail"]
    died = {"rc": 139, "stdout": "", "stderr": "Segmentation fault"}
    [row] = vgpu.check_gpu_node(dict(gpu_node(), gpu_probe=died))
    assert row["status"] == v.FAIL and "exited 139" in row["detail"] and "Segmentation fault" in row["detail"]


# --- CPU nodes ------------------------------------------------------------------------------------


def test_cpu_nodes_skip_the_gpu_checks_with_the_reason_in_the_table():
    nodes = [{"name": f"n{i}", "nodename": f"n{i}", "reachable": True, "use_gpu": False} for i in (1, 2)]
    rows = v.check_gpu(nodes, None, None)
    assert [(r["check"], r["subject"], r["status"]) for r in rows] == [
        ("gpu", "n1", v.SKIP), ("gpu", "n2", v.SKIP), ("gpu across nodes", "cluster", v.SKIP)]  # fmt: skip
    assert "CPU mode (mnc_use_gpu false)" in rows[0]["detail"]
    table = vrender.render_table(rows)
    assert "CPU mode (mnc_use_gpu false)" in table and "no node in GPU mode" in table


def test_a_node_in_cpu_mode_among_gpu_nodes_fails_the_cross_node_checks():
    nodes = [gpu_node("g1"), {"name": "c2", "nodename": "c2", "reachable": True, "use_gpu": False}]
    rows = by_check(v.check_gpu(nodes, None, None))
    assert rows[("gpu nccl allreduce", "cluster")]["status"] == v.FAIL
    assert "c2 in CPU mode" in rows[("gpu nccl allreduce", "cluster")]["detail"]


# --- across the nodes -----------------------------------------------------------------------------

NCCL_IB_LOG = [
    "g1:1234:1234 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.1<0>",
    "g1:1234:1234 [0] NCCL INFO Using network IB",
    "g1:1234:1240 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
]
NCCL_IB_NO_GDR_LOG = [line.replace("/GDRDMA", "") for line in NCCL_IB_LOG]
NCCL_SOCKET_LOG = [
    "g1:1234:1234 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
    "g1:1234:1234 [0] NCCL INFO Using network Socket",
    "g1:1234:1240 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0",
]


def nccl_run(size=2, ok=True, log=(), error=None):
    ranks = []
    for r in range(size):
        part = {"host": f"g{r + 1}", "rank": r, "version": 22304, "device": 0, "want": size * (size + 1) / 2,
                "bytes": 1 << 24, "ok": ok, "nccl_log": list(log)}  # fmt: skip
        if not ok:
            part["got"] = 1.0
        if error and r == 1:
            part = {"host": "g2", "rank": 1, "error": error}
        ranks.append(part)
    return probe_run({"size": size, "ranks": ranks})


def send_run(size=2, ok=True, error=None):
    ranks = [{"host": f"g{r + 1}", "rank": r, "kind": "gpu", "ok": ok, "from": (r - 1) % size,
              "bytes": 1 << 22} for r in range(size)]  # fmt: skip
    if error:
        ranks[1] = {"host": "g2", "rank": 1, "kind": "gpu", "error": error}
    return probe_run({"size": size, "ranks": ranks})


def test_the_cross_node_checks_pass_on_good_runs():
    rows = by_check(v.check_gpu([gpu_node("g1"), gpu_node("g2")], nccl_run(log=NCCL_SOCKET_LOG), send_run()))
    nccl = rows[("gpu nccl allreduce", "cluster")]
    assert nccl["status"] == v.PASS and "gave 3 on every rank" in nccl["detail"]
    assert "network Socket" in nccl["detail"]
    send = rows[("gpu device send", "cluster")]
    assert send["status"] == v.PASS and "CUDA-aware MPI in use" in send["detail"]
    assert not [k for k in rows if k[0] == "gpu ib transport"]  # no InfiniBand port: no IB row


@pytest.mark.parametrize(
    ("nccl", "send", "check", "words"),
    [
        (nccl_run(ok=False), send_run(), "gpu nccl allreduce",
         ["got 1.0, expected 3.0", "NCCL_SOCKET_IFNAME"]),
        (nccl_run(error="NcclError: NCCL_ERROR_SYSTEM_ERROR"), send_run(), "gpu nccl allreduce",
         ["rank 1 on g2: NcclError"]),
        ({"rc": 124, "stdout": "", "stderr": ""}, send_run(), "gpu nccl allreduce", ["timed out"]),
        ({"skipped_reason": "g2 did not answer"}, send_run(), "gpu nccl allreduce",
         ["not run: g2 did not answer"]),
        (nccl_run(), send_run(ok=False), "gpu device send", ["arrived wrong", "--with-cuda"]),
        (nccl_run(), send_run(error="MPIException: MPI_ERR_BUFFER"), "gpu device send",
         ["rank 1 on g2: MPIException", "mpi4py built against it"]),
    ],
)  # fmt: skip
def test_each_cross_node_failure_says_what_to_do(nccl, send, check, words):
    row = by_check(v.check_gpu([gpu_node("g1"), gpu_node("g2")], nccl, send))[(check, "cluster")]
    assert row["status"] == v.FAIL, row
    for w in words:
        assert w in row["detail"], (w, row["detail"])


def test_a_single_gpu_node_skips_the_cross_node_checks():
    na = {"not_applicable": "a single node: nothing crosses a node"}
    rows = by_check(v.check_gpu([gpu_node("g1")], na, na))
    assert rows[("gpu nccl allreduce", "cluster")]["status"] == v.SKIP
    assert rows[("gpu device send", "cluster")]["status"] == v.SKIP


def _ib_node(name, peermem):
    doc = json.loads(json.dumps(GOOD_NODE_DOC))
    port = {"device": "mlx5_0", "port": "1", "state": "4: ACTIVE", "link_layer": "InfiniBand"}
    doc["infiniband"] = {"peermem": peermem, "ports": [port]}
    return gpu_node(name, doc=doc)


@pytest.mark.parametrize(
    ("log", "peermem", "status", "words"),
    [
        (NCCL_IB_LOG, True, v.PASS, ["mlx5_0:1 InfiniBand", "NET/IB with GPUDirect RDMA"]),
        (NCCL_IB_NO_GDR_LOG, False, v.PASS, ["nvidia_peermem not loaded"]),
        (NCCL_IB_NO_GDR_LOG, True, v.FAIL, ["not GPUDirect RDMA", "topo -m"]),
        (NCCL_SOCKET_LOG, False, v.FAIL, ["NCCL uses Socket, not NET/IB", "rdma-core", "NCCL_IB_HCA"]),
    ],
)
def test_on_infiniband_nccl_must_use_its_ib_transport(log, peermem, status, words):
    nodes = [_ib_node("g1", peermem), _ib_node("g2", peermem)]
    rows = by_check(v.check_gpu(nodes, nccl_run(log=log), send_run()))
    for name in ("g1", "g2"):
        row = rows[("gpu ib transport", name)]
        assert row["status"] == status, row
        for w in words:
            assert w in row["detail"], (w, row["detail"])


def test_nccl_transport_reads_nccls_lines():
    assert vgpu.nccl_transport(NCCL_IB_LOG) == {"network": "IB", "gdrdma": True}
    assert vgpu.nccl_transport(NCCL_SOCKET_LOG) == {"network": "Socket", "gdrdma": False}
    assert vgpu.nccl_transport([]) == {"network": None, "gdrdma": False}


def test_the_probe_reads_infiniband_ports_and_peermem_from_sys(tmp_path):
    port = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "link_layer").write_text("InfiniBand\n")
    (tmp_path / "module" / "nvidia_peermem").mkdir(parents=True)
    assert mnc_gpu_probe.probe_infiniband(str(tmp_path)) == {
        "ports": [{"device": "mlx5_0", "port": "1", "state": "4: ACTIVE", "link_layer": "InfiniBand"}],
        "peermem": True,
    }
    assert mnc_gpu_probe.probe_infiniband(str(tmp_path / "none")) == {"ports": [], "peermem": False}


# --- the probe's cross-rank runs under a real mpiexec ---------------------------------------------


def _mpiexec(*args):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")  # fmt: skip
    argv = ["timeout", "--kill-after=5", "120", "mpiexec", "-n", "2", "--oversubscribe",
            sys.executable, str(PROBE)]  # fmt: skip
    proc = subprocess.run([*argv, *args], capture_output=True, text=True, env=env, timeout=150, check=False)
    return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


@pytest.mark.mpi
@needs_mpiexec
def test_real_ring_send_of_host_buffers_arrives_and_device_buffers_fail_without_cupy():
    host = vgpu.parse_probe(_mpiexec("send", "cpu")["stdout"])
    assert host["size"] == 2 and all(r["ok"] for r in host["ranks"]), host
    assert [r["from"] for r in host["ranks"]] == [1, 0]
    run = _mpiexec("send", "gpu")
    nodes = [gpu_node("g1"), gpu_node("g2")]
    row = by_check(v.check_gpu(nodes, nccl_run(), run))[("gpu device send", "cluster")]
    assert row["status"] == v.FAIL and "No module named 'cupy'" in row["detail"], row


@pytest.mark.mpi
@needs_mpiexec
def test_real_nccl_run_without_cupy_fails_naming_the_rank():
    run = _mpiexec("nccl-allreduce")
    assert run["rc"] == 0, run["stderr"]
    rows = by_check(v.check_gpu([gpu_node("g1"), gpu_node("g2")], run, send_run()))
    row = rows[("gpu nccl allreduce", "cluster")]
    assert row["status"] == v.FAIL and "rank 0 on" in row["detail"] and "cupy" in row["detail"], row


# --- the services real GPU servers need (nvidia_driver's and rdma's records) ----------------


SANDBOX_SERVICES = {
    "nvidia-fabricmanager": {"state": "skipped", "reason": "CPU mode"},
    "nvidia-persistenced": {"state": "skipped", "reason": "CPU mode"},
    "rdma": {"state": "absent", "reason": "rdma_mode is none"},
    "memlock": {"state": "absent", "reason": "no RDMA path"},
    "nvidia-peermem": {"state": "skipped", "reason": "CPU mode"},
}


def services_row(services) -> dict:
    (r,) = vgpu.check_services([{"name": "n1", "services": services}])
    return r


def test_services_on_a_cpu_node_are_skipped_with_each_reason():
    r = services_row(SANDBOX_SERVICES)
    assert r["status"] == v.SKIP
    assert "nvidia-fabricmanager skipped (CPU mode)" in r["detail"]
    assert "rdma absent (rdma_mode is none)" in r["detail"]


def test_a_failed_service_fails_the_row_and_names_why():
    failed = {"state": "failed", "reason": "nv-fabricmanager is inactive"}
    r = services_row(dict(SANDBOX_SERVICES, **{"nvidia-fabricmanager": failed}))
    assert r["status"] == v.FAIL
    assert "nvidia-fabricmanager failed (nv-fabricmanager is inactive)" in r["detail"]


def test_an_enabled_service_passes_and_no_record_is_a_skip_that_says_so():
    svc = dict(SANDBOX_SERVICES, **{"nvidia-persistenced": {"state": "enabled", "reason": ""}})
    assert services_row(svc)["status"] == v.PASS
    none = services_row({})
    assert none["status"] == v.SKIP and "have not run" in none["detail"]
    assert services_row({"rdma": {"state": "bogus"}})["status"] == v.FAIL


def test_evaluate_shows_the_services_row():
    node = {"name": "n1", "reachable": True, "services": SANDBOX_SERVICES}
    out = v.evaluate([node], None, None, None, None, 0.5, False)
    assert [r for r in out["rows"] if r["check"] == "services"] == [services_row(SANDBOX_SERVICES)]
