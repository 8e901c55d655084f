"""The PyTorch DDP engine: ``mpiexec -n 2 python -m train --framework pytorch --model mlp`` on the CPU.

Real runs (real mpiexec, real torch.distributed on gloo): the document has the
Chainer document's sections and keys, the ceiling at exactly L on the gloo path,
the correctness records, DDP's overlap from its timed comm hook, and a verdict;
a reduction that sums instead of averaging, or none, fails the run. torchrun
starts the same program with no MPI world.
"""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from tests.train.conftest import QUICK, ROOT, mlp_param_bytes, run_ok, run_train, torch_missing

pytestmark = [pytest.mark.mpi]
if torch_missing():
    pytest.fail(torch_missing(), pytrace=False)

PHASES = ("compute", "wait", "allreduce", "update")
# bucket_cap_mb 0.01: the MLP's 358 kB of gradient reduce in two buckets (a bucket closes when a
# gradient takes it past the cap: l3, l2 in one, l1 in the other), as a big model's reduce in many
TORCH = ["--framework", "pytorch", *QUICK, "--bucket-cap-mb", "0.01"]


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    d = tmp_path_factory.mktemp("ddp")
    proc = run_train([*TORCH, "--out", str(d / "bench.json"), "--trace", str(d / "trace.json"),
                      "--json-stdout"])
    assert proc.returncode == 0, proc.stderr
    return json.loads((d / "bench.json").read_text()), proc


@pytest.fixture(scope="module")
def chainer_doc(tmp_path_factory):
    return run_ok(QUICK, tmp_path_factory.mktemp("chainer") / "bench.json")


def test_the_document_has_the_chainer_documents_sections_and_keys(ddp, chainer_doc):
    doc, _ = ddp
    assert doc["schema"] == chainer_doc["schema"] == "mncluster.benchmark/1"
    assert set(doc) == set(chainer_doc)
    for section in ("config", "environment", "throughput", "instrumentation", "overlap", "correctness",
                    "learning", "phases", "breakdown", "gradient", "ceilings", "timeline"):
        assert set(doc[section]) - {"buckets"} == set(chainer_doc[section]), section
    assert set(doc["correctness"]["gradients"]) == set(chainer_doc["correctness"]["gradients"])
    assert set(doc["raw_allreduce"][0]) == set(chainer_doc["raw_allreduce"][0])
    cfg = doc["config"]
    assert (cfg["framework"], cfg["communicator"], cfg["model"]) == ("pytorch", "gloo", "mlp")
    assert cfg["processes"] == 2
    assert chainer_doc["config"]["framework"] == "chainer"
    env = doc["environment"]
    assert env["framework"] == "pytorch" and env["torch"].startswith("2.") and env["chainer"] is None
    assert env["communicator_class"] == "DistributedDataParallel"
    assert "Open MPI" in env["mpi_library"]


def test_L_is_the_same_model_bytes_as_chainers(ddp, chainer_doc):
    doc, _ = ddp
    assert doc["gradient"]["bytes"] == chainer_doc["gradient"]["bytes"] == mlp_param_bytes(784, 100, 10)
    assert doc["gradient"]["arrays"] == 6 and doc["allreduce"]["bytes"] == doc["gradient"]["bytes"]


def test_ranks_came_up_under_mpiexec(ddp):
    dist = ddp[0]["environment"]["distributed"]
    assert (dist["launcher"], dist["rank_from"], dist["size"], dist["backend"]) == \
        ("mpiexec", "OMPI_COMM_WORLD_RANK", 2, "gloo")
    assert dist["master_from"] == "rank 0's address, sent over MPI"
    assert dist["init_method"] == f"tcp://{dist['master_addr']}:{dist['master_port']}"
    assert dist["host_communicator"] == "host-mpi"


def test_ceiling_at_exactly_L_on_the_gloo_path(ddp):
    doc, _ = ddp
    ceil, L = doc["ceilings"], doc["gradient"]["bytes"]
    rows = {(r["path"], r["layout"]): r for r in ceil["rows"]}
    gloo = rows["gloo", "packed"]
    assert gloo["bytes"] == L and gloo["repetitions"] >= 10 and gloo["count"] == L // 4
    assert ceil["rows"][ceil["reference"]] == gloo
    assert doc["allreduce"]["ceiling"]["path"] == "gloo"
    assert rows["host-mpi", "packed"]["bytes"] == L  # MPI's row of the sweep, as for Chainer
    # DDP's own buckets, reduced one all_reduce each: the same L in all
    per_bucket = rows["gloo", "per-bucket"]
    assert per_bucket["bytes"] == L and per_bucket["arrays"] == len(ceil["buckets"]) > 1
    assert {x["path"] for x in ceil["skipped"]} == {"device-mpi", "nccl"}
    (at_l,) = [r for r in doc["raw_allreduce"] if r["at_L"]]
    assert at_l["bytes"] == L and at_l["repetitions"] >= 10


def test_the_reduced_gradient_is_the_mean_and_the_parameters_agree(ddp):
    c = ddp[0]["correctness"]
    assert c["agree"] is True and c["relative_diff"] <= c["tolerance"]
    g = c["gradients"]
    assert g["averaged"] is True and g["relative_error"] <= g["tolerance"] == 1e-5
    assert g["distinguishes"] is True and g["local_relative_spread"] > 100 * g["tolerance"]
    assert g["elements"] == ddp[0]["gradient"]["elements"]
    ranks = g["per_rank"]
    assert ranks[0]["local_sum"] != ranks[1]["local_sum"]
    for r in ranks:
        assert r["reduced_sum"] == pytest.approx(g["mean_sum"], abs=1e-5 * (abs(g["mean_sum"]) + 1))


def test_phases_add_up_and_the_allreduce_phase_is_only_what_is_exposed(ddp):
    doc, _ = ddp
    b = doc["breakdown"]
    assert sum(b[k]["mean"] for k in PHASES) == pytest.approx(b["total"]["mean"], rel=1e-9)
    ar = doc["allreduce"]
    assert ar["exposed_only"] is True and ar["busbw"] is None and ar["algbw"] is None
    assert ar["own_duration"] == doc["overlap"]["allreduce_own"]["median"] > 0
    assert ar["busbw_own_duration"] == pytest.approx(2 * ar["bytes"] * (2 - 1) / 2 / ar["own_duration"] / 1e9)
    for s in doc["timeline"]["stamps"]:
        for t0, t1, t2, t3, t4 in s:
            assert t0 <= t1 <= t2 <= t3 <= t4


def test_ddp_overlap_accounting(ddp):
    doc, _ = ddp
    ov = doc["overlap"]
    assert ov["mode"] == "ddp" and ov["double_buffering"] is False
    d = ov["ddp"]
    assert d["buckets"] == len(doc["ceilings"]["buckets"]) > 1
    assert sum(d["bucket_bytes"]) == doc["gradient"]["bytes"]
    assert 0 <= d["overlapped_percent"] <= 100
    assert 0 <= ov["hidden"] <= ov["allreduce_own"]["median"]
    # per iteration own = hidden + exposed (the critical rank's), so their means add up
    assert d["hidden"]["mean"] + d["exposed"]["mean"] == pytest.approx(ov["allreduce_own"]["mean"])
    med = {k: doc["phases"][k]["median"] for k in PHASES}
    own = ov["allreduce_own"]["median"]
    assert ov["perfect_overlap_step"] == pytest.approx(max(med["compute"], own) + med["update"])
    assert ov["measured_step"] == pytest.approx(doc["throughput"]["wall"] / doc["config"]["iterations"])


def test_the_report_gives_a_verdict(ddp):
    from ansible_collections.mncluster.core.plugins.module_utils import mnc_bench_report, mnc_verdict

    doc, _ = ddp
    report = mnc_bench_report.build_report([doc])
    verdict = mnc_verdict.assess(report)
    (run,) = verdict["runs"]
    assert run["overlap"]["mode"] == "ddp"
    text = " ".join(run["sentences"])
    assert "DDP" in text and "behind backward" in text, text
    assert "p = 2" in " ".join(verdict["headline"])


def test_one_process_with_torchvisions_resnet50(tmp_path):
    doc = run_ok(["--framework", "pytorch", "--model", "resnet50", "--batchsize", "2", "--insize", "32",
                  "--iterations", "2", "--warmup", "2", "--sweep-max-bytes", "0", "--p2p-bytes", "0"],
                 tmp_path / "r.json", processes=1)
    # torchvision's ResNet-50: 25,557,032 parameters in 161 tensors (53 convolutions, 53 batch norms, fc)
    assert doc["gradient"]["elements"] == 25_557_032 and doc["gradient"]["arrays"] == 161
    assert doc["gradient"]["bytes"] == 4 * 25_557_032 == doc["allreduce"]["bytes"]
    assert doc["allreduce"]["busbw"] is None and doc["allreduce"]["busbw_own_duration"] is None  # p = 1
    assert [(r["bytes"], r["at_L"]) for r in doc["raw_allreduce"]] == [(doc["gradient"]["bytes"], True)]
    assert doc["p2p"] == [] and doc["environment"]["distributed"]["master_addr"] == "127.0.0.1"
    assert doc["correctness"]["gradients"]["averaged"] is True


def test_held_out_samples_and_the_ddp_training_learns(tmp_path):
    import numpy as np

    from tests.train.test_data import write_idx

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 400)
    images = rng.integers(0, 40, (400, 28, 28))
    for i, k in enumerate(labels):
        images[i, 2 * k:2 * k + 3, :] = 255
    write_idx(tmp_path / "train-images-idx3-ubyte", images, gz=False)
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels, gz=False)
    doc = run_ok([*TORCH, "--data", str(tmp_path), "--validation", "100"], tmp_path / "v.json")
    assert doc["config"]["data_format"] == "mnist-idx"
    v = doc["learning"]["validation"]
    assert v["samples"] == 100 and v["per_rank"] == [50, 50]
    assert v["after"]["loss"] < v["before"]["loss"] / 2
    assert v["after"]["accuracy"] >= 0.9 > v["before"]["accuracy"]


def _mutated(tmp_path, old: str, new: str):
    shutil.copytree(ROOT / "train", tmp_path / "train", ignore=shutil.ignore_patterns("__pycache__"))
    hook = tmp_path / "train" / "ddp_hook.py"
    text = hook.read_text()
    assert text.count(old) == 1, "the hook's reduction moved; update this test"
    hook.write_text(text.replace(old, new))


MUTATIONS = {
    # a sum where the mean belongs: the ranks still agree, only the gradient check sees it
    "sum-not-mean": ("tensor.div_(state.world)", "pass"),
    # no reduction: every rank keeps its own gradient
    "reduction-removed": ("dist.all_reduce(tensor, async_op=True).get_future()",
                          "(lambda f: (f.set_result([tensor]), f)[1])(__import__('torch').futures.Future())"),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_ddp_reduction_that_does_not_average_fails_the_run(tmp_path, mutation):
    _mutated(tmp_path, *MUTATIONS[mutation])
    out = tmp_path / "never.json"
    proc = run_train([*TORCH, "--out", str(out)], cwd=tmp_path)
    assert proc.returncode != 0
    assert "the reduced gradient is not the mean of the ranks' gradients, so the gradients were not " \
           "averaged" in proc.stderr, proc.stderr
    assert not out.exists()


def test_a_rank_whose_parameters_differ_fails_the_run(tmp_path):
    out = tmp_path / "never.json"
    proc = run_train([*TORCH, "--out", str(out)], env={"MNCBENCH_TEST_PERTURB_RANK": "1"})
    assert proc.returncode != 0
    assert "the ranks' parameters differ after the timed passes" in proc.stderr, proc.stderr
    assert not out.exists()


def test_torchrun_starts_the_same_benchmark_without_mpi(tmp_path):
    out = tmp_path / "torchrun.json"
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
            "-m", "train", *TORCH, "--out", str(out)]
    import subprocess

    from tests.train.conftest import mpi_env

    proc = subprocess.run(argv, cwd=ROOT, env=mpi_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    dist = doc["environment"]["distributed"]
    assert (dist["launcher"], dist["rank_from"]) == ("torchrun", "RANK")
    assert dist["host_communicator"] == "host-gloo"
    assert doc["environment"]["mpi_library"] is None
    assert {r["path"] for r in doc["raw_allreduce"]} == {"host-gloo"}
    assert doc["correctness"]["gradients"]["averaged"] is True and doc["correctness"]["agree"] is True
    assert [r["kind"] for r in doc["p2p"]] == ["intra-node"]


BAD = [
    (["--framework", "pytorch", "--communicator", "nccl"], "--communicator nccl runs on GPUs only"),
    (["--framework", "pytorch", "--communicator", "naive"],
     "--communicator naive is a ChainerMN communicator"),
    (["--communicator", "gloo"], "--communicator gloo is a PyTorch process group backend"),
    (["--framework", "pytorch", "--double-buffering"], "--double-buffering is a ChainerMN pure_nccl option"),
    (["--framework", "pytorch", "--bucket-cap-mb", "0"], "--bucket-cap-mb must be above 0"),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_input_fails_every_rank_before_running(tmp_path, args, message):
    out = tmp_path / "never.json"
    proc = run_train([*QUICK, *args, "--out", str(out)], timeout=60)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    assert not out.exists()


@pytest.mark.torch_gpu
def test_nccl_ceiling_and_overlap_on_gpus(tmp_path):
    import torch

    p = 2 if torch.cuda.device_count() >= 2 else 1
    doc = run_ok(["--framework", "pytorch", *QUICK, "--gpu"], tmp_path / "g.json", processes=p)
    rows = {(r["path"], r["layout"]): r for r in doc["ceilings"]["rows"]}
    nccl = rows["nccl", "packed"]
    assert nccl["bytes"] == doc["gradient"]["bytes"] and nccl["repetitions"] >= 10
    assert doc["allreduce"]["ceiling"]["path"] == "nccl" and doc["config"]["communicator"] == "nccl"
    assert doc["correctness"]["agree"] is True and doc["correctness"]["gradients"]["averaged"] is True
    assert doc["environment"]["gpus"][0]["name"]
