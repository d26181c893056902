"""Rank agreement: hand-worked NDCG, RBO and weighted tau; bootstrap CIs; leave-one-out; comparisons."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from prb_utils.downstream.correlation import (
    COEFFICIENTS,
    Coefficient,
    _agreement_rows,
    agreement_of,
    coefficient_names,
    compare_benchmarks,
    correlation_difference,
    downstream_table,
    leave_one_out,
    ndcg,
    rank_agreement,
    rank_agreement_ci,
    rank_coefficients,
    ranking_sufficiency,
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
    assert tuple(r) == coefficient_names()
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
    assert list(ci["metric"]) == list(coefficient_names())
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
    assert len(loo) == 4 * len(coefficient_names())


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
    assert (table["n"] == 4).all()
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


@pytest.mark.parametrize("seed", range(60))
def test_vectorized_coefficients_match_scipy_with_ties_and_resamples(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 10))
    x = rng.integers(0, 4, n).astype(float) if seed % 2 else rng.random(n)
    y = rng.integers(0, 3, n).astype(float) if seed % 3 == 0 else rng.random(n) - 0.5
    if seed % 5 == 0:  # a bootstrap resample: repeated RMs are joint ties
        idx = rng.integers(0, n, n)
        x, y = x[idx], y[idx]
    top = 3 if seed % 4 == 0 else None
    ref = rank_agreement(x, y, top=top)
    got = _agreement_rows(x[None], y[None], top)
    for m in coefficient_names():
        if math.isnan(ref[m]):
            assert math.isnan(got[m][0]), m
        else:
            assert got[m][0] == pytest.approx(ref[m], abs=1e-12), m


def test_ndcg_gains_are_min_shifted():
    # gains 0, 1, 3 (shifted from -1, 0, 2): a shift of the downstream scores changes nothing
    assert rank_agreement([3, 2, 1], [-1, 0, 2])["ndcg"] == pytest.approx(ndcg([3, 2, 1], [0, 1, 3]))
    assert rank_agreement([3, 2, 1], [9, 10, 12])["ndcg"] == pytest.approx(ndcg([3, 2, 1], [0, 1, 3]))


def test_chance_and_permutation_p_are_exact_for_small_n():
    x, y = [1.0, 2, 3, 4], [1.0, 2, 4, 3]
    ci = rank_agreement_ci(x, y, n_boot=50).set_index("metric")
    perms = list(itertools.permutations(y))
    for m in coefficient_names():
        null = np.array([rank_agreement(x, list(p))[m] for p in perms])
        assert ci.loc[m, "chance"] == pytest.approx(null.mean())
        assert ci.loc[m, "p_perm"] == pytest.approx(np.mean(null >= ci.loc[m, "estimate"] - 1e-9))
    assert ci.loc["spearman", "chance"] == pytest.approx(0.0, abs=1e-12)
    assert (ci["n_perm"] == 24).all() and (ci["n"] == 4).all()
    # the perfect ranking is matched by exactly one of 4! permutations
    best = rank_agreement_ci(x, x, n_boot=20).set_index("metric")
    assert best.loc["kendall", "p_perm"] == pytest.approx(1 / 24)


def test_random_rankings_of_8_rms_have_high_ndcg_and_rbo_by_chance():
    rng = np.random.default_rng(0)
    x, y = rng.random(8), rng.random(8)
    ci = rank_agreement_ci(x, y, n_boot=100).set_index("metric")
    assert (ci["n_perm"] == 40320).all()
    assert ci.loc["rbo", "chance"] > 0.5 and ci.loc["ndcg", "chance"] > 0.5
    assert abs(ci.loc["kendall", "chance"]) < 1e-12


def test_monte_carlo_permutations_beyond_8_rms_are_seeded():
    rng = np.random.default_rng(2)
    x = rng.random(10)
    y = x + 0.5 * rng.random(10)
    a = rank_agreement_ci(x, y, n_boot=100, n_perm=500, seed=1)
    pd.testing.assert_frame_equal(a, rank_agreement_ci(x, y, n_boot=100, n_perm=500, seed=1))
    assert (a["n_perm"] == 500).all()
    assert (a["p_perm"] >= 1 / 501).all() and (a["p_perm"] <= 1).all()
    assert a.set_index("metric").loc["spearman", "p_perm"] < 0.05


def test_correlation_difference_exact_diff_and_paired_bootstrap():
    rng = np.random.default_rng(4)
    down = rng.random(10)
    table = pd.DataFrame({"bon": down, "good": down + 0.1 * rng.random(10), "bad": rng.random(10)},
                         index=[f"rm{i}" for i in range(10)])
    r = correlation_difference(table, "bon", "good", "bad", n_boot=500, seed=3)
    for metric in ("spearman", "kendall", "ndcg"):
        d = correlation_difference(table, "bon", "good", "bad", metric=metric, n_boot=100)
        assert d["diff"] == (rank_agreement(table["good"], table["bon"])[metric]
                             - rank_agreement(table["bad"], table["bon"])[metric])
    assert r["ci_low"] <= r["diff"] <= r["ci_high"]
    assert r["n"] == 10 and r["n_boot_valid"] == 500
    assert r == correlation_difference(table, "bon", "good", "bad", n_boot=500, seed=3)
    flipped = correlation_difference(table, "bon", "bad", "good", n_boot=500, seed=3)
    assert flipped["diff"] == pytest.approx(-r["diff"]) and flipped["p_value"] == pytest.approx(r["p_value"])


def test_correlation_difference_of_identical_predictors_is_zero_with_p_one():
    rng = np.random.default_rng(5)
    table = pd.DataFrame({"bon": rng.random(7), "a": rng.random(7)})
    table["b"] = table["a"]
    r = correlation_difference(table, "bon", "a", "b", n_boot=300)
    assert r["diff"] == 0.0 and r["p_value"] == 1.0 and r["ci_low"] == 0.0 and r["ci_high"] == 0.0
    with pytest.raises(PRBError, match="metric"):
        correlation_difference(table, "bon", "a", "b", metric="tau")
    with pytest.raises(PRBError, match="lacks"):
        correlation_difference(table, "bon", "a", "zz")
    with pytest.raises(PRBError, match="at least 3"):
        correlation_difference(table.head(2), "bon", "a", "b")


def test_public_face_exports_the_downstream_entry_points():
    import prb_utils

    for name in ("rank_agreement", "rank_agreement_ci", "expected_best_of_k", "correlation_difference"):
        assert name in prb_utils.__all__ and callable(getattr(prb_utils, name))


def _rewardbench2() -> pd.DataFrame:
    from prb_utils.notebook.params import EXAMPLE_DOWNSTREAM

    return pd.read_csv(EXAMPLE_DOWNSTREAM, comment="#", index_col=0)


def _brute_force_difference(table, downstream, a, b, *, n_boot, seed, level=0.95):
    """The paired bootstrap written out: one resample of the RMs at a time, scipy's Spearman on each side."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(table), size=(n_boot, len(table)))  # the same stream the library draws
    diffs = []
    for rows in draws:
        if len(set(rows)) < 2:
            continue
        t = table.iloc[rows]
        diff = spearmanr(t[a], t[downstream])[0] - spearmanr(t[b], t[downstream])[0]
        if np.isfinite(diff):
            diffs.append(diff)
    diffs = np.array(diffs)
    lo, hi = np.quantile(diffs, [0.5 - level / 2, 0.5 + level / 2])
    far = min((diffs <= 0).sum(), (diffs >= 0).sum())
    return lo, hi, min(1.0, 2 * (far + 1) / (len(diffs) + 1)), len(diffs)


@pytest.mark.parametrize("which", ["random", "rewardbench2"])
def test_correlation_difference_matches_a_brute_force_paired_bootstrap(which):
    if which == "random":
        rng = np.random.default_rng(11)
        down = rng.random(9)
        table = pd.DataFrame({"down": down, "a": down + 0.3 * rng.random(9), "b": rng.random(9)})
        downstream, a, b = "down", "a", "b"
    else:  # does the RewardBench 2 score agree with the PPO outcome better than the BoN outcome does?
        table, downstream, a, b = _rewardbench2(), "ppo", "rbv2", "bon"
    r = correlation_difference(table, downstream, a, b, n_boot=400, seed=7)
    lo, hi, p, valid = _brute_force_difference(table, downstream, a, b, n_boot=400, seed=7)
    assert r["ci_low"] == pytest.approx(lo, abs=1e-12) and r["ci_high"] == pytest.approx(hi, abs=1e-12)
    assert r["p_value"] == pytest.approx(p) and r["n_boot_valid"] == valid


def test_rewardbench2_table_shows_pearson_and_spearman_disagree():
    """The published table's lesson (RewardBench 2, Table 8): three poor RMs carry a linear fit with PPO
    (Pearson 0.72) while the ranks do not agree (Spearman -0.04); without the poor RMs Pearson collapses too."""
    table = _rewardbench2()
    assert len(table) == 17 and set(table["group"]) == {"on-policy", "on-policy-poor", "off-policy"}
    full = rank_agreement(table["rbv2"], table["ppo"])
    assert round(full["pearson"], 2) == 0.72 and round(full["spearman"], 2) == -0.04
    good = table[table["group"] != "on-policy-poor"]
    assert rank_agreement(good["rbv2"], good["ppo"])["pearson"] < 0
    # the claim test on it: RewardBench 2 vs the BoN outcome as predictors of PPO, paired over the same RMs
    r = correlation_difference(table, "ppo", "rbv2", "bon", n_boot=1000, seed=0)
    assert r["diff"] == pytest.approx(full["spearman"] - rank_agreement(table["bon"], table["ppo"])["spearman"])
    assert r["ci_low"] < r["diff"] < r["ci_high"] and 0 < r["p_value"] <= 1 and r["n"] == 17


@pytest.mark.parametrize("flat_side", ["benchmark", "downstream"])
def test_a_constant_ranking_has_no_coefficient_anywhere(flat_side):
    """Constant BoN quality (a weak judge) or constant accuracy: every coefficient, interval and chance is
    undefined, NDCG and RBO included, and no_ranking says why."""
    from prb_utils.downstream.correlation import no_ranking, rank_agreement, rank_agreement_ci

    varied, flat = [0.6, 0.5, 0.4, 0.7, 0.3], [0.5] * 5
    x, y = (flat, varied) if flat_side == "benchmark" else (varied, flat)
    assert all(math.isnan(v) for v in rank_agreement(x, y).values())
    ci = rank_agreement_ci(x, y, n_boot=200)
    assert ci[["estimate", "ci_low", "ci_high", "chance", "p_perm"]].isna().all().all()
    assert "no ranking" in no_ranking(x, y)


def test_undefined_coefficients_are_written_na_not_drawn_as_bars():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from prb_utils.downstream.correlation import rank_agreement_ci
    from prb_utils.downstream.plots import coefficient_bars

    table = rank_agreement_ci([0.6, 0.5, 0.4, 0.7, 0.3], [0.5] * 5, n_boot=100)
    ax = coefficient_bars(table)
    assert [p.get_height() for p in ax.patches] == []
    assert [t.get_text() for t in ax.texts] == ["n/a"] * 6
    plt.close(ax.figure)


def test_the_chance_level_of_the_centred_coefficients_is_exactly_zero():
    from prb_utils.downstream.correlation import centred_coefficients, rank_agreement_ci

    ci = rank_agreement_ci([0.61, 0.7, 0.55, 0.4, 0.66], [0.4, 0.52, 0.31, 0.2, 0.5], n_boot=100).set_index("metric")
    assert [ci.loc[m, "chance"] for m in centred_coefficients()] == [0.0, 0.0, 0.0]
    assert ci.loc["rbo", "chance"] > 0   # the others keep their (positive) chance levels


# ----------------------------------------------- classical tests beside the (conservative) paired bootstrap
def test_williams_t_and_zou_interval_match_the_papers():
    from prb_utils.downstream.correlation import overlapping_correlation_tests

    # Williams' t by hand (Steiger 1980, eq. 7) for r_ya = .3, r_yb = .4, r_ab = .5, n = 100:
    # |R| = 1 - .09 - .16 - .25 + 2(.3)(.4)(.5) = .62; r̄ = .35; df = 97
    det, rbar = 1 - 0.09 - 0.16 - 0.25 + 2 * 0.3 * 0.4 * 0.5, 0.35
    t_hand = -0.1 * math.sqrt(99 * 1.5 / (2 * det * 99 / 97 + rbar**2 * 0.5**3))
    r = overlapping_correlation_tests(0.3, 0.4, 0.5, 100)
    assert r["williams_t"] == pytest.approx(t_hand, rel=1e-12)
    assert round(r["williams_t"], 4) == -1.0767 and round(r["williams_p"], 4) == 0.2843  # depcor (Silver et al. 2006)
    # Zou (2007), overlapping correlations: Fisher-z limits of each r, then his eq. for L and U
    z = 1.959963984540054
    lims = [(math.tanh(math.atanh(x) - z / math.sqrt(63)), math.tanh(math.atanh(x) + z / math.sqrt(63)))
            for x in (0.396, 0.179)]
    c = ((0.088 - 0.396 * 0.179 / 2) * (1 - 0.396**2 - 0.179**2 - 0.088**2) + 0.088**3) / (
        (1 - 0.396**2) * (1 - 0.179**2))
    low = 0.217 - math.sqrt((0.396 - lims[0][0]) ** 2 + (lims[1][1] - 0.179) ** 2
                            - 2 * c * (0.396 - lims[0][0]) * (lims[1][1] - 0.179))
    zou = overlapping_correlation_tests(0.396, 0.179, 0.088, 66)
    assert zou["zou_ci_low"] == pytest.approx(low, rel=1e-9)
    assert (round(zou["zou_ci_low"], 3), round(zou["zou_ci_high"], 3)) == (-0.093, 0.517)  # the paper's example
    assert math.isnan(overlapping_correlation_tests(0.3, 0.4, 0.5, 3)["williams_t"])  # df = n - 3 = 0


def test_correlation_difference_shows_williams_and_zou_beside_the_bootstrap():
    from scipy.stats import pearsonr, spearmanr

    from prb_utils.downstream.correlation import overlapping_correlation_tests

    rng = np.random.default_rng(8)
    down = rng.random(12)
    table = pd.DataFrame({"bon": down, "good": down + 0.3 * rng.random(12), "bad": rng.random(12)})
    r = correlation_difference(table, "bon", "good", "bad", n_boot=500)
    expected = overlapping_correlation_tests(spearmanr(table["good"], table["bon"])[0],
                                             spearmanr(table["bad"], table["bon"])[0],
                                             spearmanr(table["good"], table["bad"])[0], 12, spearman=True)
    for key, value in expected.items():
        assert r[key] == pytest.approx(value, rel=1e-9)
    assert r["zou_ci_low"] < r["diff"] < r["zou_ci_high"]
    p = correlation_difference(table, "bon", "good", "bad", metric="pearson", n_boot=200)
    assert p["williams_t"] == pytest.approx(overlapping_correlation_tests(
        pearsonr(table["good"], table["bon"])[0], pearsonr(table["bad"], table["bon"])[0],
        pearsonr(table["good"], table["bad"])[0], 12)["williams_t"], rel=1e-9)
    k = correlation_difference(table, "bon", "good", "bad", metric="kendall", n_boot=200)
    assert math.isnan(k["williams_t"]) and math.isnan(k["zou_ci_low"])  # no classical test for Kendall here


def test_chance_of_symmetric_coefficients_is_exactly_zero_beyond_enumeration():
    from prb_utils.downstream.correlation import EXACT_PERMUTATIONS_MAX_N, centred_coefficients

    n = EXACT_PERMUTATIONS_MAX_N + 2  # Monte Carlo permutations: their mean is only near 0
    ci = rank_agreement_ci(np.arange(n), np.arange(n)[::-1] ** 2, n_boot=200, n_perm=300).set_index("metric")
    assert (ci.loc[list(centred_coefficients()), "chance"] == 0.0).all()
    assert ci.loc["ndcg", "chance"] > 0.3  # the others keep their permutation mean


def test_floored_permutation_p_is_shown_as_below_its_floor():
    from prb_utils.downstream.correlation import p_display, p_text

    n = 12
    ci = rank_agreement_ci(np.arange(n), np.arange(n), n_boot=200, n_perm=10_000)
    spearman = ci.set_index("metric").loc["spearman"]
    assert spearman["p_perm"] == 1 / 10_001  # no permutation reached 1: the Monte Carlo floor
    shown = p_display(ci).set_index("metric")
    assert shown.loc["spearman", "p_perm"] == "< 0.001"  # as every p-value below 0.001 reads
    assert p_display(rank_agreement_ci(np.arange(n), np.arange(n), n_boot=200, n_perm=500)).loc[0, "p_perm"] == "< 0.002"
    exact = p_display(rank_agreement_ci(np.arange(5), np.arange(5), n_boot=200))  # 5! = 120: 1/120 is exact
    assert exact.set_index("metric").loc["spearman", "p_perm"] == "0.008"
    assert p_text(float("nan")) == "n/a" and p_text(0.04321) == "0.043"
    diff = pd.DataFrame([correlation_difference(pd.DataFrame({"y": np.arange(10.0), "a": np.arange(10.0),
                                                              "b": np.arange(10.0)[::-1]}), "y", "a", "b",
                                                n_boot=999)])
    assert p_display(diff)["p_value"].iloc[0] == "< 0.002"  # 2 / (1 + 999): no resample on the far side


def test_join_by_spec_matches_job_labels_to_specs_and_names_what_it_leaves_out():
    from prb_utils.downstream.correlation import join_by_spec

    accuracy = pd.Series({"length": 0.4, "lexical": 0.6, "Judge:x [generate]": 0.7, "c [seed=1]": 0.5,
                          "c [seed=2]": 0.55, "orphan": 0.3}, name="prb")
    specs = {"Judge:x [generate]": "Judge:x", "c [seed=1]": "c", "c [seed=2]": "c"}
    bon_table = pd.Series({"length": 0.2, "lexical": 0.3, "judge:x": 0.4, "c": 0.1, "ghost": 0.9}, name="bon@4")
    joined, note = join_by_spec(accuracy, bon_table, specs=specs, benchmark_name="accuracy under top3",
                                downstream_name="BoN results")
    # a job label with options joins its spec (the kind's case and spaces do not matter)
    assert joined.to_dict("index") == {"judge:x": {"prb": 0.7, "bon@4": 0.4}, "length": {"prb": 0.4, "bon@4": 0.2},
                                       "lexical": {"prb": 0.6, "bon@4": 0.3}}
    assert note == ("Left out: c (2 jobs: c [seed=1], c [seed=2]; name one with models=), ghost (no accuracy under "
                    "top3), orphan (no BoN results).")
    assert join_by_spec(accuracy[["length"]], bon_table[["length"]])[1] == ""
    with pytest.raises(PRBError, match="twice"):
        join_by_spec(accuracy, pd.Series([1.0, 2.0], index=["judge:x", "Judge:x"]))


# ------------------------------------------------------------------------ can a run rank its RMs at all?


def test_above_chance_needs_both_a_small_p_and_an_interval_clear_of_chance():
    from prb_utils.downstream.correlation import above_chance

    table = pd.DataFrame({"estimate": [0.9, 0.9, 0.9, 0.9, np.nan], "ci_low": [0.5, 0.5, -0.1, 0.88, np.nan],
                          "ci_high": 1.0, "chance": [0.0, 0.0, 0.0, 0.9, 0.0],
                          "p_perm": [0.01, 0.05, 0.01, 0.01, np.nan]})
    # evidence; p at alpha; interval reaches 0; interval reaches its chance 0.9; undefined
    assert above_chance(table).tolist() == [True, False, False, False, False]
    assert above_chance(table, alpha=0.1).tolist() == [True, True, False, False, False]
    with pytest.raises(PRBError, match="p_perm"):
        above_chance(table.drop(columns="p_perm"))


def test_three_rms_cannot_be_ranked_even_in_perfect_agreement():
    from prb_utils.downstream.correlation import ranking_sufficiency

    table = rank_agreement_ci([0.5, 0.6, 0.7], [0.1, 0.2, 0.3], n_boot=200)
    found = ranking_sufficiency(table, questions=4, headroom=0.25, k=8)
    floor = 1 / math.factorial(3)
    assert (table["p_perm"] >= floor).all()  # the smallest p three RMs allow is above 0.05
    assert found["verdict"] == "cannot rank" and found["above_chance"] == []
    assert found["n_rms"] == 3 and found["questions"] == 4 and found["headroom"] == 0.25
    sentence = found["sentence"]
    assert sentence.startswith("This run cannot rank these RMs: with 3 RMs and 4 questions (headroom 0.250")
    assert "best-of-8" in sentence and f"1/3! = {floor:.3f}" in sentence
    assert "none of the 5 rank coefficients" in sentence   # pearson is not a rank coefficient
    bare = ranking_sufficiency(table)
    assert "questions" not in bare["sentence"] and "headroom" not in bare["sentence"]
    assert "no headroom" in ranking_sufficiency(table, headroom=0.0)["sentence"]


def test_enough_rms_in_agreement_can_be_ranked_and_the_evidence_is_named():
    from prb_utils.downstream.correlation import ranking_sufficiency

    x = np.arange(10, dtype=float)
    table = rank_agreement_ci(x, x + np.random.default_rng(0).normal(0, 0.3, 10), n_boot=300, n_perm=2000)
    found = ranking_sufficiency(table)
    spearman = table.set_index("metric").loc["spearman"]
    assert spearman["p_perm"] < 0.05 and spearman["ci_low"] > spearman["chance"]
    assert found["verdict"] == "can rank" and "spearman" in found["above_chance"]
    assert "pearson" not in found["above_chance"]
    assert found["sentence"].startswith("This run can rank these RMs: ") and "1/10!" not in found["sentence"]
    # a ranking against the benchmark is not evidence that the run ranks the RMs
    against = ranking_sufficiency(rank_agreement_ci(x, -x, n_boot=300, n_perm=2000))
    assert against["verdict"] == "cannot rank" and "1/" not in against["sentence"]


def test_pearson_alone_never_makes_a_run_rank():
    from prb_utils.downstream.correlation import ranking_sufficiency

    table = pd.DataFrame({"metric": ["spearman", "pearson"], "estimate": [0.1, 0.9], "ci_low": [-0.5, 0.6],
                          "ci_high": [0.6, 1.0], "chance": 0.0, "p_perm": [0.4, 0.001], "n": 12})
    found = ranking_sufficiency(table)
    assert found["verdict"] == "cannot rank" and "spearman 0.100 [-0.500, 0.600]" in found["sentence"]
    assert "the one rank coefficient is not above chance" in found["sentence"]
    flat = table.assign(estimate=np.nan, ci_low=np.nan, ci_high=np.nan, p_perm=np.nan)
    assert "no coefficient is defined" in ranking_sufficiency(flat)["sentence"]
    with pytest.raises(PRBError, match="none of the rank coefficients"):
        ranking_sufficiency(table[table["metric"] == "pearson"])


def test_zous_interval_for_a_spearman_difference_uses_bonett_wrights_standard_error():
    """The Fisher-z interval of a Spearman coefficient is wider than Pearson's by sqrt(1 + r^2/2) (Bonett and
    Wright 2000); Zou's interval for the difference of two Spearman correlations uses it."""
    import math

    from prb_utils.downstream.correlation import correlation_difference, overlapping_correlation_tests

    pearson = overlapping_correlation_tests(0.6, 0.3, 0.2, 12)
    ranks = overlapping_correlation_tests(0.6, 0.3, 0.2, 12, spearman=True)
    assert ranks["williams_t"] == pearson["williams_t"]
    assert ranks["zou_ci_low"] < pearson["zou_ci_low"] and ranks["zou_ci_high"] > pearson["zou_ci_high"]
    z = 1.959963984540054
    l_a = math.tanh(math.atanh(0.6) - z * math.sqrt((1 + 0.6**2 / 2) / 9))
    u_b = math.tanh(math.atanh(0.3) + z * math.sqrt((1 + 0.3**2 / 2) / 9))
    c = ((0.2 - 0.6 * 0.3 / 2) * (1 - 0.36 - 0.09 - 0.04) + 0.2**3) / ((1 - 0.36) * (1 - 0.09))
    low = 0.3 - math.sqrt((0.6 - l_a) ** 2 + (u_b - 0.3) ** 2 - 2 * c * (0.6 - l_a) * (u_b - 0.3))
    assert ranks["zou_ci_low"] == pytest.approx(low, rel=1e-9)
    table = pd.DataFrame({"y": [1, 2, 3, 4, 5, 6, 7, 8], "a": [2, 1, 3, 5, 4, 6, 8, 7], "b": [3, 1, 2, 8, 5, 4, 6, 7]})
    spearman = correlation_difference(table, "y", "a", "b", n_boot=200)
    pearson_rows = correlation_difference(table, "y", "a", "b", metric="pearson", n_boot=200)
    assert spearman["zou_ci_high"] - spearman["zou_ci_low"] > 0
    assert spearman["williams_t"] == pytest.approx(pearson_rows["williams_t"])  # the data are ranks already
    assert spearman["zou_ci_high"] - spearman["zou_ci_low"] > pearson_rows["zou_ci_high"] - pearson_rows["zou_ci_low"]


def test_agreement_of_reads_a_ranking_only_with_three_varying_rms():
    """The step page 03 takes for Best-of-N and RL alike: too few RMs, a flat side, or the coefficients of
    compare_benchmarks on the RMs both sides name."""
    prb = pd.Series({"a": 0.6, "b": 0.7, "c": 0.5, "d [seed=1]": 0.4}, name="prb")
    bon = pd.Series({"a": 1.0, "b": 2.0, "c": 0.5, "e": 3.0}, name="bon@4")
    found = agreement_of(prb, bon, n_boot=200)
    assert found.rms == ["a", "b", "c"] and not found.too_few and found.flat is None
    assert "d [seed=1] (no downstream score)" in found.dropped and "e (no benchmark score)" in found.dropped
    expected = compare_benchmarks(found.joined[["prb"]], found.joined[["bon@4"]], n_boot=200)
    pd.testing.assert_frame_equal(found.table, expected)
    flat = agreement_of(prb, pd.Series(1.0, index=bon.index, name="bon@4"), downstream_label="bon@4 (proxy)")
    assert flat.table is None and flat.flat.startswith("Every RM has the same bon@4 (proxy)")
    few = agreement_of(prb[["a", "b"]], bon)
    assert few.too_few and few.table is None and few.flat is None


def test_an_rm_that_gets_no_rank_is_no_member_of_the_agreement_and_the_page_says_why():
    """A position-locked judge gets no rank anywhere; page 03 leaves it out of the RM ranking compared with
    Best-of-N and names it with the reason (not "no benchmark score")."""
    from prb_utils.downstream.correlation import agreement_of

    bench = pd.Series({"a": 0.6, "b": 0.7, "c": 0.5, "judge:x": 0.9}, name="prb")
    down = pd.Series({"a": 1.0, "b": 3.0, "c": 2.0, "judge:x": 4.0}, name="bon")
    found = agreement_of(bench, down, excluded={"judge:x": "position-locked judge: no rank"})
    assert found.rms == ["a", "b", "c"] and "judge:x" not in found.joined.index
    assert found.dropped == "Left out: judge:x (position-locked judge: no rank)."
    assert "no benchmark score" not in found.dropped
    everyone = agreement_of(bench, down)
    assert "judge:x" in everyone.rms and everyone.dropped == ""


def test_page_03_leaves_out_the_locked_judge_by_page_04s_rule_and_keeps_the_baselines():
    from prb_utils.notebook.downstream_page import unranked_rms

    rows = []
    for model, kind, ab, ba in (("judge:locked", "judge", "chosen", "rejected"),   # always "A": locked
                                ("judge:fair", "judge", "chosen", "chosen"), ("length", "length", None, None)):
        for i in range(6):
            rows.append({"model": model, "kind": kind, "profile": "top3", "subset": "s", "id": str(i),
                         "outcome": "correct", "verdict_ab": ab, "verdict_ba": ba})
    left_out = unranked_rms(pd.DataFrame(rows))
    assert list(left_out) == ["judge:locked"] and left_out["judge:locked"].startswith("position-locked judge")
    assert unranked_rms(pd.DataFrame(rows).iloc[0:0]) == {}


def test_a_coefficient_registered_later_is_read_by_every_table(monkeypatch):
    """The registry is read when called, never snapshotted at import: a coefficient added to COEFFICIENTS after
    import (here: does the benchmark's best RM win downstream?) is computed, bootstrapped, given its exact chance
    level (1/n under a random permutation) and judged by ranking_sufficiency, with no other edit."""
    top1 = Coefficient("top1", lambda x, y, top: float(np.argmax(x) == np.argmax(y)),
                       lambda x, y, top: (x.argmax(axis=1) == y.argmax(axis=1)).astype(float))
    monkeypatch.setitem(COEFFICIENTS, "top1", top1)
    assert coefficient_names()[-1] == "top1" and "top1" in rank_coefficients()
    bench, down = [1, 2, 3, 4, 5], [1, 3, 2, 4, 5]
    assert rank_agreement(bench, down)["top1"] == 1.0
    assert rank_agreement(bench, [1, 3, 2, 5, 4])["top1"] == 0.0
    ci = rank_agreement_ci(bench, down, n_boot=200).set_index("metric")
    assert list(ci.index) == list(coefficient_names())
    assert ci.loc["top1", "estimate"] == 1.0
    assert ci.loc["top1", "chance"] == pytest.approx(1 / 5) and ci.loc["top1", "p_perm"] == pytest.approx(1 / 5)
    said = ranking_sufficiency(ci.reset_index())["sentence"]   # its default: the rank coefficients, read now
    assert len(rank_coefficients()) == 6 and "of the 6 rank coefficients" in said and "top1" not in said
