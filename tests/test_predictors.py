"""The predictor table: benchmark statistics per RM and their agreement with a downstream outcome."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from prb_utils.downstream.correlation import correlation_difference, p_display, rank_agreement
from prb_utils.downstream.predictors import STATISTICS, benchmark_statistics, predictor_table
from prb_utils.errors import PRBError


def _results(n_models: int = 5, seed: int = 0) -> pd.DataFrame:
    """Per-item rows of ``n_models`` RMs whose accuracy grows with their index, over 2 subsets x 3 categories."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(n_models):
        for i in range(60):
            margin = rng.normal(0.2 * m - 0.3, 1.0)
            rows.append({"model": f"rm{m}", "profile": "top3", "subset": "ab"[i % 2], "category": "xyz"[i % 3],
                         "score_chosen": margin, "score_rejected": 0.0,
                         "outcome": "correct" if margin > 0 else "wrong"})
    return pd.DataFrame(rows)


def test_statistics_match_their_definitions():
    results = _results()
    stats = benchmark_statistics(results)
    assert list(stats.columns) == list(STATISTICS) and len(stats) == 5
    one = results[results["model"] == "rm3"]
    correct = one["outcome"] == "correct"
    assert stats.loc["rm3", "mean_accuracy"] == pytest.approx(correct.mean())
    assert stats.loc["rm3", "worst_subset"] == pytest.approx(correct.groupby(one["subset"]).mean().min())
    assert stats.loc["rm3", "category_q25"] == pytest.approx(correct.groupby(one["category"]).mean().quantile(0.25))
    margin = one["score_chosen"] - one["score_rejected"]
    assert stats.loc["rm3", "margin_effect"] == pytest.approx(margin.mean() / margin.std())


def test_small_categories_are_left_out_of_the_quantile():
    results = _results()
    results.loc[results.index[:2], "category"] = "tiny"   # two pairs of rm0 in a category of their own
    with_tiny = benchmark_statistics(results, min_pairs=1).loc["rm0", "category_q25"]
    without = benchmark_statistics(results, min_pairs=5).loc["rm0", "category_q25"]
    assert without == pytest.approx(benchmark_statistics(_results()).loc["rm0", "category_q25"], abs=0.05)
    assert with_tiny != without


def test_rows_of_two_conditions_are_refused():
    results = _results()
    results.loc[results.index[:10], "profile"] = "none"
    with pytest.raises(PRBError, match="one profile condition"):
        benchmark_statistics(results)


def test_predictor_table_ranks_statistics_and_tests_them_against_mean_accuracy():
    stats = benchmark_statistics(_results(n_models=6))
    downstream = pd.Series(np.arange(6, dtype=float) ** 2, index=stats.index)  # same order as the RMs' skill
    table = predictor_table(stats, downstream, n_boot=300, n_perm=500)
    assert set(table["predictor"]) == set(STATISTICS)
    assert list(table["estimate"]) == sorted(table["estimate"], reverse=True)
    mean = table.set_index("predictor").loc["mean_accuracy"]
    assert mean["estimate"] == pytest.approx(rank_agreement(stats["mean_accuracy"], downstream)["spearman"])
    assert np.isnan(mean["diff"])
    worst = table.set_index("predictor").loc["worst_subset"]
    joined = stats.assign(down=downstream)
    expected = correlation_difference(joined, "down", "worst_subset", "mean_accuracy", n_boot=300)
    assert worst["diff"] == pytest.approx(expected["diff"]) and worst["diff_p"] == pytest.approx(expected["p_value"])
    assert worst["diff_n_boot_valid"] == expected["n_boot_valid"]
    with pytest.raises(PRBError, match="at least 3"):
        predictor_table(stats.head(2), downstream)


def test_a_difference_p_value_at_its_floor_shows_as_below_it():
    """diff_p is a bootstrap p-value: 2 / (1 + valid draws) is its smallest value, shown as "< ..." and never as a
    number that reads as exact (the same rule as correlation_difference's p_value)."""
    table = pd.DataFrame({"predictor": ["a", "b", "mean_accuracy"], "diff_p": [2 / 301, 0.25, np.nan],
                          "diff_n_boot_valid": [300, 300, np.nan]})
    shown = p_display(table)["diff_p"].tolist()
    assert shown == ["< 0.007", "0.250", "n/a"]   # 3 decimals, as every p-value reads


def test_the_predictor_p_values_are_holm_adjusted_within_families_the_caption_names():
    """Page 03's predictor table tests every statistic twice (above chance; against mean accuracy): each set of
    tests is one family, Holm-adjusted over its own members, the raw p kept beside the adjusted one, and one
    sentence names the members and the correction."""
    from prb_utils.analysis.metrics import holm
    from prb_utils.downstream.predictors import FAMILIES, family_note

    stats = benchmark_statistics(_results(n_models=6))
    downstream = pd.Series(np.arange(6, dtype=float) ** 2, index=stats.index)
    table = predictor_table(stats, downstream, n_boot=300, n_perm=500)
    assert table["p_perm_holm"].to_numpy() == pytest.approx(holm(table["p_perm"]), nan_ok=True)
    compared = table[table["predictor"] != "mean_accuracy"]
    assert compared["diff_p_holm"].to_numpy() == pytest.approx(holm(compared["diff_p"]))
    assert np.isnan(table.set_index("predictor").loc["mean_accuracy", "diff_p_holm"])   # not a member
    assert (table["p_perm_holm"] >= table["p_perm"]).all() and (compared["diff_p_holm"] >= compared["diff_p"]).all()
    note = family_note(table)
    assert note.startswith("Holm-adjusted") and all(adjusted in note for adjusted, _ in FAMILIES.values())
    perm_part, diff_part = note.split(";")
    assert all(s in perm_part for s in STATISTICS)
    assert "mean_accuracy" not in diff_part.split(" of ", 1)[1] and all(
        s in diff_part for s in STATISTICS if s != "mean_accuracy")
    shown = p_display(table)
    assert {"p_perm", "p_perm_holm", "diff_p", "diff_p_holm"} <= set(shown.columns)
