"""Which benchmark statistic predicts downstream quality best: the predictor table.

The benchmark's claim is about *mean* accuracy, but other summaries of the same per-item results could rank
RMs closer to their downstream order. :func:`benchmark_statistics` computes, per RM (one job per row):

- ``mean_accuracy``: correct / pairs (ties and invalids count as not correct);
- ``worst_subset``: the lowest accuracy over subsets;
- ``category_q25``: the lower quartile of the accuracies over categories with at least ``min_pairs`` pairs;
- ``margin_effect``: the mean margin ``score_chosen - score_rejected`` in units of its standard deviation
  (a standardised mean margin: the raw margins of different kinds - probabilities, log-probabilities,
  cosines - are not on one scale, their standardised means are).

:func:`predictor_table` puts each statistic's agreement with one downstream outcome side by side (estimate,
bootstrap CI over RMs, chance level, permutation p-value) and tests each against ``mean_accuracy`` with the
paired bootstrap of :func:`~prb_utils.downstream.correlation.correlation_difference` on the same RMs.

Its p-values come in two families, each Holm-adjusted over its own members (:data:`FAMILIES`; the raw p stays
beside the adjusted one, and :func:`family_note` names each family's members once, for the table's caption):
``p_perm`` -> ``p_perm_holm`` over every statistic's test against chance, and ``diff_p`` -> ``diff_p_holm`` over
every statistic's comparison with ``mean_accuracy`` (the baseline is not a member: it is not compared with
itself).

>>> import pandas as pd
>>> rows = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "subset": ["s", "s", "t", "t"] * 2,
...     "category": "c", "outcome": ["correct", "wrong", "correct", "correct", "correct"] + ["wrong"] * 3,
...     "score_chosen": [1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0], "score_rejected": 0.5})
>>> benchmark_statistics(rows, min_pairs=1)[["mean_accuracy", "worst_subset"]].to_dict("index")
{'a': {'mean_accuracy': 0.75, 'worst_subset': 0.5}, 'b': {'mean_accuracy': 0.25, 'worst_subset': 0.0}}
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from prb_utils.analysis.metrics import holm
from prb_utils.analysis.resampling import LEVEL, SEED
from prb_utils.downstream.correlation import N_PERM, correlation_difference, rank_agreement_ci
from prb_utils.errors import PRBError

STATISTICS = ("mean_accuracy", "worst_subset", "category_q25", "margin_effect")
#: The predictor table's test families: raw p column -> (its Holm-adjusted column, what its members test).
FAMILIES = {
    "p_perm": ("p_perm_holm", "the tests of agreement above chance (one-sided permutation)"),
    "diff_p": ("diff_p_holm", "the comparisons with {baseline} (two-sided paired bootstrap)"),
}


def _accuracy(frame: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    return (frame.assign(_c=(frame["outcome"] == "correct").astype(float))
            .groupby(list(by), observed=True)["_c"].agg(["mean", "size"]).reset_index())


def benchmark_statistics(results: pd.DataFrame, *, model: str = "model", min_pairs: int = 5,
                         quantile: float = 0.25) -> pd.DataFrame:
    """One row per RM (index ``model``), one column per statistic of :data:`STATISTICS` (see the module
    docstring). ``results`` are per-item rows of one profile condition (filter it first); ``model`` names the
    column that tells RMs apart (``job_label`` when one spec has several jobs)."""
    missing = [c for c in (model, "subset", "category", "outcome", "score_chosen", "score_rejected")
               if c not in results.columns]
    if missing:
        raise PRBError(f"benchmark_statistics needs the column(s) {', '.join(missing)}.")
    if "profile" in results.columns and results["profile"].nunique() > 1:
        raise PRBError("benchmark_statistics needs the rows of one profile condition; filter by profile first.")
    per_subset = _accuracy(results, [model, "subset"])
    per_category = _accuracy(results, [model, "category"])
    per_category = per_category[per_category["size"] >= int(min_pairs)]
    margin = (results["score_chosen"].astype(float) - results["score_rejected"].astype(float)).rename("_m")
    margins = pd.concat([results[model], margin], axis=1).dropna().groupby(model)["_m"]
    sd = margins.std(ddof=1).replace(0.0, np.nan)
    table = pd.DataFrame({
        "mean_accuracy": _accuracy(results, [model]).set_index(model)["mean"],
        "worst_subset": per_subset.groupby(model)["mean"].min(),
        "category_q25": per_category.groupby(model)["mean"].quantile(quantile),
        "margin_effect": margins.mean() / sd,
    })
    table.index.name = "model"
    return table


def predictor_table(statistics: pd.DataFrame, downstream: pd.Series, *, metric: str = "spearman",
                    baseline: str = "mean_accuracy", level: float = LEVEL, n_boot: int | None = None,
                    seed: int = SEED,
                    n_perm: int = N_PERM) -> pd.DataFrame:
    """Each statistic's ``metric`` agreement with ``downstream`` (a Series indexed like ``statistics``), best
    first: columns predictor, estimate, ci_low, ci_high, chance, p_perm, p_perm_holm, n, n_perm, and the paired test
    against ``baseline``: diff, diff_ci_low, diff_ci_high, diff_p, diff_p_holm and diff_n_boot_valid (the bootstrap
    draws its p-value counts, so :func:`~prb_utils.downstream.correlation.p_display` shows its floor; NaN for the
    baseline itself). Each ``*_holm`` column is Holm-adjusted over the rows that have its raw p (:data:`FAMILIES`,
    worded by :func:`family_note`)."""
    joined = statistics.join(downstream.rename("_downstream"), how="inner")
    if len(joined) < 3:
        raise PRBError(f"Only {len(joined)} RM(s) have both benchmark statistics and the downstream outcome; "
                       "at least 3 are needed.")
    rows = []
    for name in statistics.columns:
        pair = joined[[name, "_downstream"]].dropna()
        if len(pair) < 3:
            continue
        ci = rank_agreement_ci(pair[name], pair["_downstream"], level=level, n_boot=n_boot, seed=seed,
                               n_perm=n_perm).set_index("metric").loc[metric]
        row = {"predictor": name, **{k: ci[k] for k in ("estimate", "ci_low", "ci_high", "chance", "p_perm", "n",
                                                          "n_perm")}}
        if name != baseline and baseline in joined.columns:
            d = correlation_difference(joined, "_downstream", name, baseline, metric=metric, level=level,
                                       n_boot=n_boot, seed=seed)
            row.update(diff=d["diff"], diff_ci_low=d["ci_low"], diff_ci_high=d["ci_high"], diff_p=d["p_value"],
                       diff_n_boot_valid=d["n_boot_valid"])
        rows.append(row)
    if not rows:
        raise PRBError("No benchmark statistic has values for at least 3 RMs.")
    columns = ["predictor", "estimate", "ci_low", "ci_high", "chance", "p_perm", "p_perm_holm", "n", "n_perm", "diff",
               "diff_ci_low", "diff_ci_high", "diff_p", "diff_p_holm", "diff_n_boot_valid"]
    table = pd.DataFrame(rows).reindex(columns=columns)
    for raw, (adjusted, _) in FAMILIES.items():
        table[adjusted] = holm(table[raw].to_numpy(dtype=float))
    return table.sort_values("estimate", ascending=False, ignore_index=True)


def family_note(table: pd.DataFrame, *, baseline: str = "mean_accuracy") -> str:
    """One sentence naming each test family of a :func:`predictor_table` (its members and its correction), for
    the caption of the table that shows the adjusted p-values; "" for a table without them.

    >>> t = pd.DataFrame({"predictor": ["mean_accuracy", "worst_subset"], "p_perm": [0.01, 0.2],
    ...                   "diff_p": [float("nan"), 0.3]})
    >>> print(family_note(t))
    Holm-adjusted p-values beside the raw ones, each family named with its members: `p_perm_holm`: the tests of agreement above chance (one-sided permutation) of mean_accuracy, worst_subset; `diff_p_holm`: the comparisons with mean_accuracy (two-sided paired bootstrap) of worst_subset.
    """
    parts = []
    for raw, (adjusted, what) in FAMILIES.items():
        if raw not in table.columns:
            continue
        members = [str(m) for m, p in zip(table["predictor"], table[raw], strict=True) if not pd.isna(p)]
        if members:
            parts.append(f"`{adjusted}`: {what.format(baseline=baseline)} of {', '.join(members)}")
    return ("Holm-adjusted p-values beside the raw ones, each family named with its members: " + "; ".join(parts)
            + ".") if parts else ""
