"""Rank agreement: hand-worked NDCG, RBO and weighted tau; bootstrap CIs; leave-one-out; comparisons."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from prb_utils.downstream.correlation import (
    METRICS,
    compare_benchmarks,
    downstream_table,
    leave_one_out,
    ndcg,
    rank_agreement,
    rank_agreement_ci,
    rbo,
)
from prb_utils.errors import PRBError

L3 = math.log2(3)


def test_ndcg_hand_worked():
    # benchmark ranks the RMs 0,1,2; their downstream gains are 1,2,3
    assert ndcg([3, 2, 1], [1, 2, 3]) == pytest.approx((1 + 2 / L3 + 3 / 2) / (3 + 2 / L3 + 1 / 2))
    assert ndcg([3, 2, 1], [1, 2, 3], top=1) == pytest.approx(1 / 3)
    assert ndcg([3, 2, 1], [1, 2, 3], top=2) == pytest.approx((1 + 2 / L3) / (3 + 2 / L3))
    assert ndcg([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)


def test_ndcg_ties_are_averaged():
    # RMs 0 and 1 tie in the benchmark: positions 1 and 2 both get gain (0+2)/2 = 1
    expected = (1 + 1 / L3 + 1 / 2) / (2 + 1 / L3)
    assert ndcg([1, 1, 0], [0, 2, 1]) == pytest.approx(expected)
    assert ndcg([1, 1, 0], [2, 0, 1]) == pytest.approx(expected)  # input order does not matter
    with pytest.raises(PRBError, match="non-negative"):
        ndcg([1, 2], [-1, 1])


def test_ndcg_matches_sklearn():
    from sklearn import metrics  # installed with the stack (pinned in constraints.txt)

    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.integers(0, 4, size=6).astype(float)
        y = rng.random(6)
        for top in (None, 3):
            ref = metrics.ndcg_score([y], [x], k=top)
            assert ndcg(x, y, top=top) == pytest.approx(ref)


def test_rbo_hand_worked():
    p = 0.9
    assert rbo([3, 2, 1], [3, 2, 1]) == pytest.approx(1.0)
    # reversed: overlaps X = 0, 1, 3 at depths 1, 2, 3
    rev = 3 / 3 * p**3 + (1 - p) / p * (0 + 1 / 2 * p**2 + 3 / 3 * p**3)
    assert rbo([3, 2, 1], [1, 2, 3]) == pytest.approx(rev)
    # truncated at depth 2: X = 0, 1
    assert rbo([3, 2, 1], [1, 2, 3], top=2) == pytest.approx(1 / 2 * p**2 + (1 - p) / p * (1 / 2 * p**2))
    assert rbo([4, 3, 2, 1], [4, 3, 1, 2], p=0.5) == pytest.approx(
        4 / 4 * 0.5**4 + 1 * (0.5 + 0.25 + 2 / 3 * 0.125 + 1 * 0.0625))


def test_rbo_ties_are_the_mean_over_tie_breaks():
    p = 0.9
    # benchmark ties RMs 1 and 2; the two tie-breaks give X = (1,2,3) and (1,1,3)
    identical = 1.0
    swapped = p**3 + (1 - p) / p * (p + 1 / 2 * p**2 + p**3)
    assert rbo([2, 1, 1], [3, 2, 1]) == pytest.approx((identical + swapped) / 2)


def test_weighted_tau_hand_worked():
    # weights 1/(r+1) summed per pair: concordant 1.5 and 4/3, discordant 5/6 -> 2 / (11/3) = 6/11
    assert rank_agreement([3, 2, 1], [3, 1, 2])["weighted_tau"] == pytest.approx(6 / 11)
    # the top pair swapped costs more than the bottom pair swapped
    top = rank_agreement([4, 3, 2, 1], [3, 4, 2, 1])["weighted_tau"]
    bottom = rank_agreement([4, 3, 2, 1], [4, 3, 1, 2])["weighted_tau"]
    assert top < bottom
    assert rank_agreement([4, 3, 2, 1], [3, 4, 2, 1])["kendall"] == pytest.approx(
        rank_agreement([4, 3, 2, 1], [4, 3, 1, 2])["kendall"])


def test_rank_agreement_keys_and_values():
    r = rank_agreement([0.7, 0.6, 0.5, 0.4], [0.1, 0.2, 0.3, 0.4])
    assert tuple(r) == METRICS
    assert r["spearman"] == pytest.approx(-1.0)
    assert r["kendall"] == pytest.approx(-1.0)
    assert r["pearson"] == pytest.approx(-1.0)
    assert r["weighted_tau"] == pytest.approx(-1.0)
    assert 0 < r["ndcg"] < 1 and 0 <= r["rbo"] < 1
    const = rank_agreement([1, 1, 1], [1, 2, 3])
    assert math.isnan(const["spearman"]) and math.isnan(const["pearson"])
    with pytest.raises(PRBError):
        rank_agreement([1, 2], [1, 2, 3])
    with pytest.raises(PRBError):
        rank_agreement([1, float("nan")], [1, 2])


def test_bootstrap_ci_is_seeded_and_brackets():
    rng = np.random.default_rng(1)
    x = rng.random(8)
    y = x + 0.3 * rng.random(8)
    ci = rank_agreement_ci(x, y, n_boot=300, seed=3)
    again = rank_agreement_ci(x, y, n_boot=300, seed=3)
    pd.testing.assert_frame_equal(ci, again)
    assert list(ci["metric"]) == list(METRICS)
    assert (ci["ci_low"] <= ci["ci_high"]).all()
    assert (ci["n_boot_valid"] > 250).all()
    other = rank_agreement_ci(x, y, n_boot=300, seed=4)
    assert not np.allclose(ci["ci_low"], other["ci_low"])


def test_leave_one_out():
    loo = leave_one_out(pd.Series([1, 2, 3, 4], index=list("abcd")), [1, 2, 4, 3])
    sp = loo[loo.metric == "spearman"].set_index("left_out")
    assert sp.loc["c", "value"] == pytest.approx(1.0)
    assert sp.loc["a", "value"] == pytest.approx(0.5)
    assert sp.loc["a", "full"] == pytest.approx(0.8)
    assert sp.loc["a", "delta"] == pytest.approx(-0.3)
    assert len(loo) == 4 * len(METRICS)


def test_compare_benchmarks_with_aliases():
    bench = pd.DataFrame({"model": ["org/rm-a", "rm-b", "rm-c", "rm-d", "lonely"],
                          "prb": [0.8, 0.7, 0.6, 0.5, 0.4],
                          "rewardbench": [0.5, 0.9, 0.6, 0.7, 0.1]})
    down = pd.DataFrame({"bon@8": [0.9, 0.8, 0.5, 0.4], "ppo": [0.7, 0.6, 0.5, 0.55]},
                        index=["a", "rm-b", "rm-c", "rm-d"])
    with pytest.warns(UserWarning, match="lonely"):
        table = compare_benchmarks(bench, down, aliases={"org/rm-a": "a"}, n_boot=100)
    assert set(table["benchmark"]) == {"prb", "rewardbench"}
    assert set(table["downstream"]) == {"bon@8", "ppo"}
    assert (table["n_models"] == 4).all()
    row = table[(table.benchmark == "prb") & (table.downstream == "bon@8") & (table.metric == "spearman")]
    assert row["estimate"].iloc[0] == pytest.approx(1.0)
    with pytest.warns(UserWarning), pytest.raises(PRBError, match="at least 3"):
        compare_benchmarks(bench, down.drop(index="rm-d"), aliases={}, n_boot=10)


def test_downstream_table():
    ppo = pd.DataFrame({"rm": ["a", "a", "b"], "subset": ["x", "y", "x"], "score": [1.0, 0.0, 0.5],
                        "n": [3, 1, 2]})
    bon = pd.DataFrame({"bon@2": [0.4, 0.6]}, index=pd.Index(["a", "b"], name="model"))
    table = downstream_table(bon=bon, ppo=ppo)
    assert table.loc["a", "ppo"] == pytest.approx(0.75)
    assert table.loc["b", "bon@2"] == pytest.approx(0.6)
