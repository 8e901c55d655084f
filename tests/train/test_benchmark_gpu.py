"""The benchmark on GPUs: pure_nccl, double buffering and fp16 allreduce end to end.

Marked ``gpu``: skipped with the reason (no CuPy, no device) where there is no
CUDA GPU. On a GPU host they run one or two ranks (one GPU per rank when
there are two devices, else both ranks share the one).
"""

from __future__ import annotations

import pytest

from tests.train.conftest import QUICK, run_ok

pytestmark = [pytest.mark.mpi, pytest.mark.gpu]


def _gpus() -> int:
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


@pytest.fixture
def processes():
    return 2 if _gpus() >= 2 else 1


def test_pure_nccl_ceiling_is_nccl_at_L(tmp_path, processes):
    doc = run_ok([*QUICK, "--gpu", "--communicator", "pure_nccl"], tmp_path / "g.json", processes)
    rows = {(r["path"], r["layout"]): r for r in doc["ceilings"]["rows"]}
    nccl = rows["nccl", "packed"]
    assert nccl["bytes"] == doc["allreduce"]["bytes"] and nccl["repetitions"] >= 10
    assert doc["allreduce"]["ceiling"]["path"] == "nccl"
    assert doc["correctness"]["agree"] is True and doc["correctness"]["gradients"]["averaged"] is True
    assert {x["path"] for x in doc["ceilings"]["skipped"]} == {"device-mpi"}
    device = doc["environment"]["cuda_aware_mpi"]["device_buffer_allreduce"]
    # tried where ompi_info says CUDA support is built in, else skipped with the reason
    assert (device["works"] is True) if device["tried"] else device["reason"].startswith("ompi_info says")
    env = doc["environment"]
    assert env["nccl_version"] and env["cudnn_enabled"] in (True, False)
    assert all(g["name"] and g["pci_bus_id"] for g in env["gpus"])
    if processes > 1:  # NCCL connects ranks only when there are two
        assert env["nccl"]["transports"], env["nccl"]


def test_double_buffering_never_derives_busbw_from_the_exposed_wait(tmp_path, processes):
    doc = run_ok([*QUICK, "--gpu", "--communicator", "pure_nccl", "--double-buffering", "--warmup", "3"],
                 tmp_path / "db.json", processes)
    ar, ov = doc["allreduce"], doc["overlap"]
    assert ar["exposed_only"] is True and ar["busbw"] is None and ar["algbw"] is None
    assert ov["allreduce_own"]["median"] > 0  # CUDA events on the reduction's stream
    assert ov["hidden"] >= 0
    # what stands in for busbw: the reduction's own duration on its stream
    assert ar["own_duration"] == ov["allreduce_own"]["median"] > 0
    assert (ar["busbw_own_duration"] is None) == (processes == 1)  # no busbw at p = 1
    assert doc["correctness"]["agree"] is True
    g = doc["correctness"]["gradients"]
    assert g["averaged"] is True and g["source"] == "the double-buffering optimizer's second copy"


def test_fp16_allreduce_reduces_half_the_bytes(tmp_path, processes):
    doc = run_ok([*QUICK, "--gpu", "--communicator", "pure_nccl", "--allreduce-dtype", "float16"],
                 tmp_path / "h.json", processes)
    assert doc["allreduce"]["bytes"] == doc["gradient"]["elements"] * 2
    nccl = next(r for r in doc["ceilings"]["rows"] if r["path"] == "nccl")
    assert (nccl["dtype"], nccl["bytes"]) == ("float16", doc["allreduce"]["bytes"])
    assert doc["correctness"]["agree"] is True
    g = doc["correctness"]["gradients"]
    assert g["averaged"] is True and (g["allreduce_dtype"], g["tolerance"]) == ("float16", 2e-2)
