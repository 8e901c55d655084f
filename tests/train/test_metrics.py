"""train/metrics.py: the statistics and bandwidths the document reports."""

from __future__ import annotations

import numpy as np
import pytest

from train import metrics
from train.ceilings import p2p_pairs


def test_summary_statistics_match_numpy():
    rng = np.random.default_rng(3)
    xs = rng.exponential(0.01, size=101)
    s = metrics.summarize(xs)
    assert s["median"] == pytest.approx(np.median(xs))
    assert s["mean"] == pytest.approx(np.mean(xs))
    assert s["p95"] == pytest.approx(np.percentile(xs, 95))
    assert (s["min"], s["max"]) == (xs.min(), xs.max())
    assert (s["q1"], s["q3"]) == pytest.approx((np.percentile(xs, 25), np.percentile(xs, 75)))
    assert s["iqr"] == pytest.approx(s["q3"] - s["q1"])


def test_summary_of_one_value_and_of_none():
    assert metrics.summarize([0.5]) == {"median": 0.5, "mean": 0.5, "p95": 0.5, "min": 0.5, "max": 0.5,
                                        "q1": 0.5, "q3": 0.5, "iqr": 0.0}
    with pytest.raises(ValueError):
        metrics.summarize([])


def test_busbw_is_nccl_tests_definition():
    # 100 MB in 0.1 s at p = 4: algbw 1 GB/s, busbw 2 * 3/4 = 1.5 GB/s
    assert metrics.algbw(100e6, 0.1) == pytest.approx(1.0)
    assert metrics.busbw(100e6, 0.1, 4) == pytest.approx(1.5)
    assert metrics.busbw(100e6, 0.1, 2) == pytest.approx(1.0)


def test_busbw_is_null_for_one_process_or_no_time():
    assert metrics.busbw(100e6, 0.1, 1) is None
    assert metrics.busbw(100e6, 0.0, 4) is None
    assert metrics.algbw(100e6, 0.0) is None


def test_p2p_pairs_follow_the_rank_to_node_mapping():
    # --map-by ppr:2:node over three nodes: ranks 0,1 on a, 2,3 on b, 4,5 on c
    hosts = ["a", "a", "b", "b", "c", "c"]
    assert p2p_pairs(hosts) == [("inter-node", 2), ("intra-node", 1)]
    assert p2p_pairs(["a", "b"]) == [("inter-node", 1)]  # one slot per node
    assert p2p_pairs(["a", "a"]) == [("intra-node", 1)]
    assert p2p_pairs(["a"]) == []


def test_sweep_sizes_end_at_exactly_L():
    from train.ceilings import sweep_sizes

    L = 102_228_384  # ResNet-50's fp32 gradient
    sizes = sweep_sizes(L, "auto")
    assert sizes[0] == 8 and sizes[-1] == L and sizes[-2] == 1 << 26
    assert sweep_sizes(64, "auto") == [8, 16, 32, 64]
    assert sweep_sizes(L, 0) == [L]
    assert sweep_sizes(100, 1024) == [8, 16, 32, 64, 100, 128, 256, 512, 1024]


def test_ten_repetitions_at_L_whatever_its_size():
    from train.ceilings import repetitions

    assert repetitions(102_228_384, 20, at_l=True) == 10
    assert repetitions(102_228_384, 20, at_l=True, probe=2.0) == 10  # even when one takes 2 s
    assert repetitions(4096, 3, at_l=True) == 10


def test_no_sweep_size_rests_on_two_repetitions():
    from train.ceilings import repetitions

    # the count asked for, but never fewer than 5, however big the buffer
    assert repetitions(4096, 3, at_l=False) == 5
    assert repetitions(1 << 27, 20, at_l=False) == 5
    assert repetitions(4096, 20, at_l=False, probe=1.0) == 20
    # fast ones are repeated until they have been timed for 0.05 s, up to 1000 times
    assert repetitions(8, 20, at_l=False, probe=1e-3) == 50
    assert repetitions(8, 20, at_l=False, probe=1e-6) == 1000
