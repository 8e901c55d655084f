"""The benchmark itself: ``mpiexec -n 2 python -m train --model mlp`` on the CPU.

One real 2-rank run (module-scoped) is checked for the properties a reader of
the document relies on: the phases account for the iteration, L is the
model's parameter bytes, busbw follows nccl-tests' definition, and the
ceilings, throughput, overhead and trace are consistent with each other.
"""

from __future__ import annotations

import itertools
import json

import pytest

from tests.train.conftest import CUDA_PROBLEM, QUICK, mlp_param_bytes, run_ok, run_train

pytestmark = pytest.mark.mpi

PHASES = ("compute", "wait", "allreduce", "update")


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    d = tmp_path_factory.mktemp("p2")
    out, trace = d / "bench.json", d / "trace.json"
    proc = run_train([*QUICK, "--out", str(out), "--trace", str(trace), "--json-stdout"], processes=2)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text()), json.loads(trace.read_text()), proc


def test_document_says_what_ran(two_ranks):
    doc, _, _ = two_ranks
    assert doc["schema"] == "mncluster.benchmark/1"
    cfg = doc["config"]
    assert (cfg["model"], cfg["processes"], cfg["batchsize"], cfg["iterations"]) == ("mlp", 2, 32, 20)
    assert (cfg["communicator"], cfg["gpu"], cfg["data"]) == ("naive", False, "synthetic")
    assert (cfg["scaling"], cfg["global_batchsize"]) == ("weak", 64)
    env = doc["environment"]
    assert env["chainer"] == "7.8.1"
    assert len(env["hosts"]) == 2 and env["nodes"] == 1
    assert "Open MPI" in env["mpi_library"] and env["mpi_library"].isprintable()


def test_gradient_bytes_are_the_models_parameter_bytes(two_ranks):
    doc, _, _ = two_ranks
    assert doc["gradient"]["bytes"] == mlp_param_bytes(784, 100, 10)
    assert doc["gradient"]["arrays"] == 6
    assert doc["allreduce"]["bytes"] == doc["gradient"]["bytes"]


def test_phase_statistics_are_ordered(two_ranks):
    doc, _, _ = two_ranks
    for name in (*PHASES, "total"):
        s = doc["phases"][name]
        assert 0 <= s["min"] <= s["median"] <= s["p95"] <= s["max"], name
        assert s["min"] <= s["mean"] <= s["max"]


def test_phases_sum_to_the_total(two_ranks):
    doc, _, _ = two_ranks
    # Every rank's phases are t1-t0 .. t4-t3, so they add up to t4-t0 exactly.
    b = doc["breakdown"]
    assert sum(b[k]["mean"] for k in PHASES) == pytest.approx(b["total"]["mean"], rel=1e-9)
    for r in doc["per_rank"]:
        assert sum(r["mean"][k] for k in PHASES) == pytest.approx(r["mean"]["total"], rel=1e-9)
    # The max across ranks of each phase (the critical path) can only over-count the
    # slowest rank's total, and by no more than how far the ranks differ in each phase.
    p = doc["phases"]
    total, summed = p["total"]["mean"], sum(p[k]["mean"] for k in PHASES)
    assert total <= summed * (1 + 1e-9)
    assert summed <= (total + sum(doc["spread"][k]["mean"] for k in PHASES)) * (1 + 1e-9)
    assert doc["imbalance"] == doc["spread"]["compute"]


def test_busbw_is_2L_p_minus_1_over_p_over_median_allreduce(two_ranks):
    doc, _, _ = two_ranks
    L, t, p = doc["allreduce"]["bytes"], doc["phases"]["allreduce"]["median"], 2
    assert doc["allreduce"]["time"] == t
    assert doc["allreduce"]["busbw"] == pytest.approx(2 * L * (p - 1) / p / t / 1e9)
    assert doc["allreduce"]["algbw"] == pytest.approx(L / t / 1e9)


def test_raw_allreduce_sweep_holds_exactly_L_with_ten_repetitions(two_ranks):
    doc, _, _ = two_ranks
    sweep, L = doc["raw_allreduce"], doc["allreduce"]["bytes"]
    sizes = [r["bytes"] for r in sweep]
    assert sizes[0] == 8 and sizes[-1] == L  # not the power of two above it
    assert all(b == 2 * a for a, b in itertools.pairwise(sizes[:-1])) and sizes[-2] < L
    (at_l,) = [r for r in sweep if r["at_L"]]
    assert at_l["bytes"] == L and at_l["repetitions"] >= 10  # QUICK asks for 3 per size
    # no size rests on a median of 2 or 3: at least 5 repetitions each (more for fast ones)
    assert all(r["repetitions"] >= 5 for r in sweep)
    assert "never fewer than 5 (10 at exactly L)" in doc["ceilings"]["repetition_rule"]
    for r in sweep:
        assert (r["path"], r["layout"], r["dtype"]) == ("host-mpi", "packed", "float32")
        s = r["spread"]
        assert r["time"] == s["median"] > 0 and s["q1"] <= s["median"] <= s["q3"]
        assert s["iqr"] == pytest.approx(s["q3"] - s["q1"])
        assert r["busbw"] == pytest.approx(2 * r["bytes"] * (2 - 1) / 2 / r["time"] / 1e9)


def test_ceilings_at_L_are_labelled_with_their_path(two_ranks):
    doc, _, _ = two_ranks
    ceil, L = doc["ceilings"], doc["allreduce"]["bytes"]
    rows = {(r["path"], r["layout"]): r for r in ceil["rows"]}
    # naive on the CPU: one packed host allreduce of L, and the same per-array allreduces
    assert set(rows) == {("host-mpi", "packed"), ("host-mpi", "per-array")}
    packed, per_array = rows["host-mpi", "packed"], rows["host-mpi", "per-array"]
    assert packed["bytes"] == per_array["bytes"] == L
    assert (packed["arrays"], per_array["arrays"]) == (1, doc["gradient"]["arrays"])
    assert all(r["repetitions"] >= 10 and r["label"] for r in ceil["rows"])
    assert ceil["rows"][ceil["reference"]] is packed or ceil["rows"][ceil["reference"]] == packed
    ar = doc["allreduce"]
    assert ar["ceiling"]["path"] == "host-mpi" and ar["ceiling"]["layout"] == "packed"
    assert ar["framework_overhead"] == pytest.approx(ar["time"] - packed["time"])
    assert ar["busbw_percent_of_ceiling"] == pytest.approx(100 * ar["busbw"] / packed["busbw"])
    assert ar["per_array_cost"] == pytest.approx(per_array["time"] - packed["time"])
    assert ar["exposed_only"] is False
    # the GPU paths were not measured on the CPU, and the document says why
    skipped = {x["path"]: x["reason"] for x in ceil["skipped"]}
    assert set(skipped) == {"device-mpi", "nccl"}
    assert all(reason.startswith("no --gpu") for reason in skipped.values())


def test_p2p_pair_on_one_node(two_ranks):
    doc, _, _ = two_ranks
    (row,) = doc["p2p"]
    assert (row["kind"], row["ranks"], row["bytes"]) == ("intra-node", [0, 1], 256 * 1024)
    assert row["bandwidth"] == pytest.approx(row["bytes"] / row["time"] / 1e9)


def test_throughput_and_overhead_are_consistent(two_ranks):
    doc, _, _ = two_ranks
    thr, ins = doc["throughput"], doc["instrumentation"]
    assert thr["samples"] == 2 * 32 * 20
    assert thr["samples_per_s"] == pytest.approx(thr["samples"] / thr["wall"])
    assert thr["wall"] == pytest.approx(ins["plain_wall"])
    rounds = ins["rounds"]
    assert sum(r["iterations"] for r in rounds) == 20 and len(rounds) == 4
    ratios = sorted(r["instrumented_wall"] / r["plain_wall"] for r in rounds)
    assert ins["overhead"] == pytest.approx((ratios[1] + ratios[2]) / 2 - 1)  # median of 4
    assert ins["overhead_percent"] == pytest.approx(100 * ins["overhead"])
    # what the timing adds per iteration, from its idle cost
    per_iteration = ins["plain_wall"] / 20
    assert 0 < ins["barrier"] < per_iteration
    added = 2 * ins["barrier"] + ins["device_syncs"]
    assert ins["estimated_overhead"] == pytest.approx(added / per_iteration)


def test_chrome_trace_has_every_rank_phase_and_iteration(two_ranks):
    doc, trace, _ = two_ranks
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(events) == 2 * 20 * 4
    assert {e["pid"] for e in events} == {0, 1}
    assert {e["name"] for e in events} == set(PHASES)
    assert all(e["dur"] >= 0 for e in events)
    # on each rank an iteration's phases follow each other
    rank0 = sorted((e for e in events if e["pid"] == 0), key=lambda e: e["ts"])
    for a, b in itertools.pairwise(rank0):
        assert b["ts"] >= a["ts"] + a["dur"] - 1e-3
    assert doc["trace"].endswith("trace.json")


def test_json_stdout_line_is_the_document(two_ranks):
    doc, _, proc = two_ranks
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("MNCBENCH_JSON ")]
    assert len(lines) == 1
    assert json.loads(lines[0].split(" ", 1)[1]) == doc


def test_one_process_has_no_busbw_and_no_p2p(tmp_path):
    doc = run_ok(QUICK, tmp_path / "p1.json", processes=1)
    assert doc["config"]["processes"] == 1
    assert doc["allreduce"]["busbw"] is None
    assert doc["allreduce"]["algbw"] > 0
    assert doc["p2p"] == []
    assert all(r["busbw"] is None for r in doc["raw_allreduce"])


def test_resnet50_at_a_small_input_size(tmp_path):
    # The real network at 32x32 (global average pooling): same parameters as at 224.
    doc = run_ok(["--model", "resnet50", "--batchsize", "2", "--insize", "32", "--iterations", "2",
                  "--warmup", "2", "--sweep-max-bytes", "0", "--p2p-bytes", "0"], tmp_path / "r.json",
                 processes=1)
    # torchvision's ResNet-50 has 25,557,032 parameters; Chainer's conv1 also has a bias (64).
    assert doc["gradient"]["elements"] == 25_557_032 + 64
    assert doc["gradient"]["bytes"] == 4 * (25_557_032 + 64)
    assert doc["gradient"]["arrays"] == 162
    # --sweep-max-bytes 0 leaves the one row the comparison needs: exactly L
    assert [(r["bytes"], r["at_L"]) for r in doc["raw_allreduce"]] == [(doc["gradient"]["bytes"], True)]


def test_real_mnist_and_image_list_data(tmp_path):
    import numpy as np
    from PIL import Image

    from tests.train.test_data import write_idx

    rng = np.random.default_rng(0)
    write_idx(tmp_path / "train-images-idx3-ubyte", rng.integers(0, 256, (64, 28, 28)), gz=True)
    write_idx(tmp_path / "train-labels-idx1-ubyte", rng.integers(0, 10, 64), gz=True)
    doc = run_ok([*QUICK, "--data", str(tmp_path)], tmp_path / "mnist.json")
    assert doc["config"]["data_format"] == "mnist-idx"
    assert doc["gradient"]["bytes"] == mlp_param_bytes(784, 100, 10)

    lines = []
    for i in range(8):
        Image.new("RGB", (20 + i, 18), (30 * i, 0, 0)).save(tmp_path / f"{i}.jpg", "JPEG")
        lines.append(f"{i}.jpg {i % 3}")
    (tmp_path / "list.txt").write_text("\n".join(lines))
    doc = run_ok([*QUICK, "--data", str(tmp_path / "list.txt"), "--insize", "12", "--batchsize", "4"],
                 tmp_path / "list.json")
    assert doc["config"]["data_format"] == "list"
    assert doc["gradient"]["bytes"] == mlp_param_bytes(3 * 12 * 12, 100, 10)

    # ImageNet's class folders, decoded by two worker processes per rank ahead of the loop
    for i in range(9):
        cls = tmp_path / "folders" / f"n0{i % 3}"
        cls.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (16 + i, 14), (0, 25 * i, 0)).save(cls / f"{i}.JPEG", "JPEG")
    doc = run_ok([*QUICK, "--data", str(tmp_path / "folders"), "--insize", "8", "--batchsize", "4",
                  "--loaders", "2"], tmp_path / "folders.json")
    cfg = doc["config"]
    assert (cfg["data_format"], cfg["data_samples"], cfg["data_classes"]) == ("folder", 9, 3)
    assert cfg["loaders"] == 2
    assert cfg["insize"] == 8 and doc["gradient"]["bytes"] == mlp_param_bytes(3 * 8 * 8, 100, 10)
    assert doc["correctness"]["gradients"]["averaged"] is True


BAD = [
    (["--model", "vgg16"], "argument --model/-m: invalid choice: 'vgg16'"),
    (["--communicator", "hierarchical"], "argument --communicator: invalid choice: 'hierarchical'"),
    (["--communicator", "pure_nccl"], "communicator 'pure_nccl' runs on GPUs only"),
    # Bad input only where there is no GPU: with CuPy and no device the message names the device.
    pytest.param(["--gpu"], "--gpu needs CuPy" if (CUDA_PROBLEM or "").startswith("CuPy") else "--gpu: no",
                 marks=pytest.mark.skipif(CUDA_PROBLEM is None, reason="a CUDA GPU is here: --gpu is valid"),
                 id="gpu-without-cuda"),
    (["--double-buffering"], "--double-buffering needs --communicator pure_nccl"),
    (["--data", "/no/such/mnist.npz"], "data path /no/such/mnist.npz does not exist"),
    (["--warmup", "1"], "--warmup must be at least 2"),
    (["--validation", "10"], "--validation needs --data: synthetic data has no samples to hold out"),
    (["--global-batchsize", "64"], "--batchsize (per process, weak scaling) and --global-batchsize (over all "
                                   "processes, strong scaling) exclude each other"),
]


@pytest.mark.parametrize(("args", "message"), BAD,
                         ids=[b.id if hasattr(b, "id") else b[0][-1] for b in BAD])
def test_bad_input_fails_every_rank_before_running(tmp_path, args, message):
    out = tmp_path / "never.json"
    proc = run_train([*QUICK, *args, "--out", str(out)], processes=2, timeout=60)
    assert proc.returncode != 0
    # Each rank checks before MPI starts; mpiexec may stop the second before it prints.
    assert message in proc.stderr, proc.stderr
    assert "train: mlp on" not in proc.stdout  # nothing started
    assert not out.exists()


def _without_batchsize(args: list[str]) -> list[str]:
    i = args.index("--batchsize")
    return args[:i] + args[i + 2:]


def test_strong_scaling_splits_the_global_batch(tmp_path):
    doc = run_ok([*_without_batchsize(QUICK), "--global-batchsize", "64"], tmp_path / "s.json", processes=2)
    cfg = doc["config"]
    assert (cfg["scaling"], cfg["global_batchsize"], cfg["batchsize"]) == ("strong", 64, 32)
    assert doc["throughput"]["samples"] == 64 * 20  # the global batch, not 2 x 64
    never = tmp_path / "n.json"
    proc = run_train([*_without_batchsize(QUICK), "--global-batchsize", "63", "--out", str(never)],
                     processes=2, timeout=60)
    assert proc.returncode != 0
    assert "--global-batchsize 63 is not a multiple of the 2 processes" in proc.stderr, proc.stderr
    assert not never.exists()


def test_held_out_samples_through_the_multi_node_evaluator(tmp_path):
    # A learnable set: a bright band whose row says the label, on noise.
    import numpy as np

    from tests.train.test_data import write_idx

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 400)
    images = rng.integers(0, 40, (400, 28, 28))
    for i, k in enumerate(labels):
        images[i, 2 * k:2 * k + 3, :] = 255
    write_idx(tmp_path / "train-images-idx3-ubyte", images, gz=False)
    write_idx(tmp_path / "train-labels-idx1-ubyte", labels, gz=False)
    doc = run_ok([*QUICK, "--data", str(tmp_path), "--validation", "100"], tmp_path / "v.json")
    v = doc["learning"]["validation"]
    assert v["samples"] == 100 and v["per_rank"] == [50, 50]  # each rank evaluates its own half
    assert "create_multi_node_evaluator" in v["evaluator"]
    # samples no rank trained on: the distributed training generalises to them
    assert v["after"]["loss"] < v["before"]["loss"] / 2
    assert v["after"]["accuracy"] >= 0.9 > v["before"]["accuracy"]


def test_a_rank_that_fails_mid_run_takes_the_job_down(tmp_path):
    from tests.train.test_data import write_idx

    img = write_idx(tmp_path / "train-images-idx3-ubyte", __import__("numpy").zeros((50, 28, 28)), gz=False)
    write_idx(tmp_path / "train-labels-idx1-ubyte", __import__("numpy").zeros(50), gz=False)
    img.write_bytes(img.read_bytes()[:2000])  # header passes the pre-MPI check; the payload is short
    proc = run_train([*QUICK, "--data", str(img)], processes=2, timeout=60)
    assert proc.returncode != 0
    assert "train: error:" in proc.stderr and "truncated" in proc.stderr
    assert "[rank " in proc.stderr


def test_the_distributed_training_learns(two_ranks):
    # The same synthetic batch every iteration: 20 + 2 Adam steps fit it, on every rank at once.
    doc, _, _ = two_ranks
    before, after = doc["learning"]["before"], doc["learning"]["after"]
    assert after["loss"] < before["loss"] / 2
    assert after["accuracy"] >= before["accuracy"]


# -- gradients proven reduced -----------------------------------------------------------------
def test_every_rank_ends_with_the_same_parameters(two_ranks):
    doc, _, _ = two_ranks
    c = doc["correctness"]
    assert c["agree"] is True
    assert [r["rank"] for r in c["per_rank"]] == [0, 1]
    assert {r["host"] for r in c["per_rank"]} == set(doc["environment"]["hosts"])
    # one model: the same bytes on both ranks, and the largest difference within the tolerance
    assert len({r["sha256"] for r in c["per_rank"]}) == 1 and c["bitwise_identical"] is True
    assert c["relative_diff"] <= c["tolerance"] == 1e-5
    assert c["elements"] == doc["gradient"]["elements"]


def test_a_rank_whose_parameters_differ_fails_the_run(tmp_path):
    out = tmp_path / "never.json"
    proc = run_train([*QUICK, "--out", str(out)], processes=2, env={"MNCBENCH_TEST_PERTURB_RANK": "1"})
    assert proc.returncode != 0
    assert "the ranks' parameters differ after the timed passes, so the gradients were not averaged" \
        in proc.stderr, proc.stderr
    assert "rank 0" in proc.stderr and "rank 1" in proc.stderr
    assert not out.exists()


def test_the_reduced_gradient_is_the_mean_of_the_ranks_gradients(two_ranks):
    doc, _, _ = two_ranks
    g = doc["correctness"]["gradients"]
    assert g["averaged"] is True and g["relative_error"] <= g["tolerance"] == 1e-5
    assert g["source"] == "model" and g["elements"] == doc["gradient"]["elements"]
    # The ranks trained on different batches, so a missing reduction would have shown.
    assert g["distinguishes"] is True and g["local_relative_spread"] > 100 * g["tolerance"]
    ranks = g["per_rank"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert ranks[0]["local_sum"] != ranks[1]["local_sum"]
    # every rank holds the mean of the local gradients: its sum is the mean of their sums
    mean_of_sums = sum(r["local_sum"] for r in ranks) / 2
    scale = max(abs(r["local_sum"]) for r in ranks) + 1.0
    assert g["mean_sum"] == pytest.approx(mean_of_sums, abs=1e-5 * scale)
    for r in ranks:
        assert r["reduced_sum"] == pytest.approx(g["mean_sum"], abs=1e-5 * scale)


REDUCTION = "comm.multi_node_mean_grad(model, opt.zero_fill)"
MUTATIONS = {
    # the timed loop's allreduce removed: every rank keeps its own gradient
    "reduction-removed": "pass",
    # a sum where the mean belongs: the ranks still agree with each other, so only the
    # gradient check (reduced = mean of the local gradients) can see it
    "sum-not-mean": REDUCTION + "; [p.grad.__imul__(comm.size) for p in model.params()]",
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_benchmark_whose_reduction_does_not_average_fails(tmp_path, mutation):
    import shutil

    from tests.train.conftest import ROOT

    shutil.copytree(ROOT / "train", tmp_path / "train", ignore=shutil.ignore_patterns("__pycache__"))
    loop = tmp_path / "train" / "loop.py"
    text = loop.read_text()
    assert text.count(REDUCTION) == 1, "the timed loop's reduction call moved; update this test"
    loop.write_text(text.replace(REDUCTION, MUTATIONS[mutation]))
    out = tmp_path / "never.json"
    proc = run_train([*QUICK, "--out", str(out)], processes=2, cwd=tmp_path)
    assert proc.returncode != 0
    assert "the reduced gradient is not the mean of the ranks' gradients, so the gradients were not " \
           "averaged" in proc.stderr, proc.stderr
    assert not out.exists()


def test_perfect_overlap_bound_against_the_measured_step(two_ranks):
    doc, _, _ = two_ranks
    ov, med = doc["overlap"], {k: doc["phases"][k]["median"] for k in PHASES}
    assert ov["double_buffering"] is False
    # without double buffering the reduction's own duration is its phase, and nothing is hidden
    assert ov["allreduce_own"] == doc["phases"]["allreduce"] and ov["hidden"] == 0.0
    assert ov["perfect_overlap_step"] == pytest.approx(max(med["compute"], med["allreduce"]) + med["update"])
    assert ov["measured_step"] == pytest.approx(doc["throughput"]["wall"] / doc["config"]["iterations"])
    assert ov["could_gain"] == pytest.approx(ov["measured_step"] - ov["perfect_overlap_step"])
