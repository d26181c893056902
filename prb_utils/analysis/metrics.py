"""Accuracy with honest uncertainty, computed from the per-item results table.

Conventions (see "How the numbers are computed" in the design):

- Accuracy = correct / n. Ties and invalids are counted in their own columns and count as not correct;
  ``half_credit=True`` gives a tie 0.5 and adds a ``credit`` column so it is never silent.
- One proportion: Wilson 95% interval (``statsmodels`` ``proportion_confint(method="wilson")``).
- Composite statistics (accuracy averaged over subsets, paired differences, profile lift): percentile
  bootstrap over pairs with a fixed seed (``seed=0``; ``n_boot=None`` by default: 2,000 resamples, 10,000
  when fewer than 50 units are resampled, :func:`default_n_boot`). Paired statistics
  resample whole pairs, so both members of a comparison move together (a cluster bootstrap with the pair
  as the cluster); averages over subsets resample pairs within each subset (stratified). ``units=`` (a
  column such as the question) resamples whole clusters instead, so a question's pairs for different users
  move together.
- The resampler, the percentile interval and the defaults ``LEVEL``, ``SEED``, ``N_BOOT`` live here only;
  every bootstrap in prb (the BoN curves, the rank agreement over RMs) uses them.
- Paired comparisons: exact McNemar (``statsmodels`` ``mcnemar(exact=True)``) on the pairs both levels
  scored, Holm-adjusted (``multipletests(method="holm")``) over every comparison in the returned frame.

One vocabulary (seaborn's): every function takes the interval level as ``level`` (0.95), the bootstrap
resamples as ``n_boot`` and the RNG seed as ``seed``; tables name counts ``n`` (``n_pairs`` for paired
units), accuracies ``accuracy*``, paired differences ``diff`` and bounds ``ci_low``/``ci_high``.

Example:
    >>> import pandas as pd
    >>> res = pd.DataFrame({"model": "m", "profile": ["none"] * 4 + ["full"] * 4,
    ...                     "subset": "s", "id": [1, 2, 3, 4] * 2,
    ...                     "outcome": ["correct", "wrong", "tie", "wrong",
    ...                                 "correct", "correct", "correct", "invalid"]})
    >>> accuracy_table(res)[["model", "profile", "n", "correct", "ties", "invalid", "accuracy"]]
      model profile  n  correct  ties  invalid  accuracy
    0     m    full  4        3     0        1      0.75
    1     m    none  4        1     1        0      0.25
    >>> row = compare(res, "profile", baseline="none").iloc[0]
    >>> row.level_a, row.level_b, int(row.a_only), int(row.b_only), float(row["diff"])
    ('none', 'full', 0, 2, 0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from prb_utils.analysis.resampling import (
    LEVEL,
    SEED,
    TWO_WAY_UNIT,
    bootstrap_ci,
    check_uncertainty,
    cluster_resamples,
    clustered_paired_test,
    default_n_boot,
    percentile_interval,
    resampled_means,
    two_way_bootstrap_ci,
    two_way_paired_test,
)
from prb_utils.data import user_key
from prb_utils.errors import PRBError
from prb_utils.schema import NO_PROFILE, OUTCOMES, is_oracle, stable_hash

PAIR_KEY = ("subset", "id")
MIN_PAIRS = 20  # a group with fewer scored pairs gets "n/a" instead of a fitted statistic (calibration, style)
IDENTITY = ("model", "profile", "subset", "id")

# ---------------------------------------------------------------------------------------------- helpers
def require_columns(frame: pd.DataFrame, columns: Sequence[str], *, what: str = "results") -> None:
    """Raise PRBError naming the columns of ``columns`` that ``frame`` lacks."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise PRBError(f"The {what} table lacks the column(s) {', '.join(missing)}.")


def as_list(by: str | Sequence[str] | None) -> list[str]:
    """Grouping columns as a list: None -> [], ``"a,b"`` -> ["a", "b"], a sequence as it is."""
    if by is None:
        return []
    if isinstance(by, str):
        return [c.strip() for c in by.split(",") if c.strip()]
    return list(by)


def unit_labels(results: pd.DataFrame, data: pd.DataFrame | None = None, unit: str = "question", *,
                keys: bool = False) -> pd.Series:
    """The cluster of each row for ``unit``: ``question`` (a question asked for several users, and twin pairs,
    the same question and answers with the roles swapped, share one), ``user`` (one user's pairs share one: the
    record's ``user_id``, else the profile's hash, :func:`prb_utils.data.user_key`, or a ``user`` column of
    ``data``), ``question+user`` (one label per question-user cell; see :func:`two_way_labels`) or ``pair``. The
    values come from ``data``: benchmark records, whose question text is hashed as the store hashes it when it scores
    (:func:`prb_utils.scoring.unit_keys`), or, with ``keys=True``, the keys the store recorded
    (:func:`prb_utils.store.pair_units`), taken as they are; so a page and a command draw the same clusters in
    the same order. Without data, or for a pair it lacks, the pair itself.

    >>> res = pd.DataFrame({"subset": "s", "id": ["1", "2", "3"]})
    >>> data = pd.DataFrame({"subset": "s", "id": ["1", "2"], "question": ["q?", "q?"]})
    >>> labels = unit_labels(res, data)
    >>> labels[0] == labels[1] == stable_hash("q?"), labels[2]
    (True, 's/3')
    """
    pair = results["subset"].astype(str) + "/" + results["id"].astype(str)
    if data is None or unit == "pair":
        return pair
    if unit == TWO_WAY_UNIT:   # one label per (question, user) cell; two-way tests take two_way_labels' columns
        question, user = two_way_labels(results, data, keys=keys)
        return question + "+" + user
    if unit not in ("question", "user"):
        raise PRBError(f"Unknown unit {unit!r}; use question, user, {TWO_WAY_UNIT} or pair.")
    if unit == "user" and "user" not in data.columns:
        require_columns(data, ["subset", "id", "profile"], what="benchmark")
        user_ids = data["user_id"] if "user_id" in data.columns else [None] * len(data)
        data = data.assign(user=[user_key(p, u) for p, u in zip(data["profile"], user_ids, strict=True)])
    require_columns(data, ["subset", "id", unit], what="benchmark")
    values = data[unit]
    if unit == "question" and not keys:
        values = values.map(lambda q: stable_hash(str(q)) if isinstance(q, str) and q else None)
    index = data["subset"].astype(str) + "/" + data["id"].astype(str)
    lookup = {k: v for k, v in zip(index, values, strict=True) if isinstance(v, str) and v}
    return pair.map(lookup).fillna(pair)


def question_units(results: pd.DataFrame, data: pd.DataFrame | None = None) -> pd.Series:
    """:func:`unit_labels` by question, the unit every clustered interval and test of the pages resamples.

    >>> res = pd.DataFrame({"subset": "s", "id": ["1", "2", "3"]})
    >>> data = pd.DataFrame({"subset": "s", "id": ["1", "2"], "question": ["q?", "q?"]})
    >>> question_units(res, data).tolist() == [stable_hash("q?"), stable_hash("q?"), "s/3"]
    True
    """
    return unit_labels(results, data, "question")


def two_way_labels(results: pd.DataFrame, data: pd.DataFrame | None = None, *,
                   keys: bool = False) -> tuple[pd.Series, pd.Series]:
    """The two clusters of each row for the unit ``question+user`` (:data:`TWO_WAY_UNIT`): its question's and its
    user's label (:func:`unit_labels`; the user is the record's ``user_id`` when it has one, else its profile's
    hash), the ``rows_units`` and ``cols_units`` of :func:`prb_utils.analysis.resampling.two_way_bootstrap_ci` and
    :func:`prb_utils.analysis.resampling.two_way_paired_test`. ``unit_labels(..., "question+user")`` joins them
    into one label per (question, user) cell.

    >>> res = pd.DataFrame({"subset": "s", "id": ["1", "2"]})
    >>> data = pd.DataFrame({"subset": "s", "id": ["1", "2"], "question": ["q?", "r?"],
    ...                      "profile": [[{"text": "a"}], [{"text": "b"}]], "user_id": ["u1", "u1"]})
    >>> question, user = two_way_labels(res, data)
    >>> question[0] != question[1], user[0] == user[1] == user_key([], "u1")
    (True, True)
    """
    return (unit_labels(results, data, "question", keys=keys), unit_labels(results, data, "user", keys=keys))


def unit_columns(units: str | None) -> list[str]:
    """The columns a ``units`` name stands for: ``question`` and ``user`` for the two-way unit
    (:data:`prb_utils.analysis.resampling.TWO_WAY_UNIT`, whose own column joins them), else the column itself.

    >>> unit_columns("question+user"), unit_columns("question"), unit_columns(None)
    (['question', 'user'], ['question'], [])
    """
    return ["question", "user"] if units == TWO_WAY_UNIT else as_list(units)


def interval_over_units(values: np.ndarray, rows: pd.DataFrame, units: str | None, *, n_boot: int | None,
                        seed: int, level: float) -> tuple[float, float]:
    """The percentile interval of the mean of ``values`` resampling whole ``units`` of ``rows`` (one row per
    value): :func:`prb_utils.analysis.resampling.two_way_bootstrap_ci` over the question and user columns for the
    two-way unit, :func:`prb_utils.analysis.resampling.bootstrap_ci` over one column (or pairs, None) otherwise."""
    if units == TWO_WAY_UNIT:
        return two_way_bootstrap_ci(values, rows["question"].to_numpy(), rows["user"].to_numpy(), n_boot=n_boot,
                                    seed=seed, level=level)
    clusters = None if units is None else rows[units].to_numpy()
    return bootstrap_ci(values, units=clusters, n_boot=n_boot, seed=seed, level=level)


def _check_outcomes(results: pd.DataFrame) -> None:
    bad = sorted(set(results["outcome"].dropna().astype(str)) - set(OUTCOMES))
    if bad or results["outcome"].isna().any():
        shown = ", ".join(bad) if bad else "missing"
        raise PRBError(f"The results table has unknown outcome values ({shown}); expected {', '.join(OUTCOMES)}.")


def wilson_ci(count, nobs, *, level: float = LEVEL):
    """Wilson interval (at ``level``) for ``count`` successes out of ``nobs``; NaN where nobs is 0.

    Arrays in, arrays out; two scalars in, two floats out.

    >>> low, high = wilson_ci(8, 10)
    >>> round(float(low), 4), round(float(high), 4)
    (0.4902, 0.9433)
    """
    scalar = np.ndim(count) == 0 and np.ndim(nobs) == 0
    count = np.atleast_1d(np.asarray(count, dtype=float))
    nobs = np.atleast_1d(np.asarray(nobs, dtype=float))
    count, nobs = np.broadcast_arrays(count, nobs)
    low = np.full(count.shape, np.nan)
    high = np.full(count.shape, np.nan)
    ok = nobs > 0
    if ok.any():
        low[ok], high[ok] = proportion_confint(count[ok], nobs[ok], alpha=1 - level, method="wilson")
        # rounding can put a bound a hair past the estimate at 0% and 100%; the interval always holds it
        share = count[ok] / nobs[ok]
        low[ok] = np.minimum(low[ok], share)
        high[ok] = np.maximum(high[ok], share)
    if scalar:
        return float(low[0]), float(high[0])
    return low, high


def holm(p_values) -> np.ndarray:
    """Holm-adjusted p-values, equal to ``statsmodels`` ``multipletests(method="holm")[1]`` (the tests compare them);
    NaNs stay NaN. The step-down is written out because statsmodels' Holm branch runs a full ``gc.collect()`` on
    every call (statsmodels pull request #8671): a quarter of a second each in a notebook's or a test's heap, and
    a report adjusts hundreds of families.

    >>> [round(float(p), 3) for p in holm([0.01, 0.04, 0.03])]
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        tested = p[ok]
        order = np.argsort(tested)
        step_down = np.maximum.accumulate(tested[order] * np.arange(tested.size, 0, -1))
        adjusted = np.empty_like(tested)
        adjusted[order] = np.minimum(step_down, 1.0)
        out[ok] = adjusted
    return out


def mcnemar_exact(a_only: int, b_only: int, *, both: int = 0, neither: int = 0) -> float:
    """Exact McNemar p-value from the discordant counts (``statsmodels``; 1.0 when both are 0).

    >>> round(mcnemar_exact(2, 9), 4)
    0.0654
    """
    table = np.array([[both, a_only], [b_only, neither]], dtype=np.int64)
    return float(mcnemar(table, exact=True).pvalue)


# --------------------------------------------------------------------------------------------- accuracy
def failed_mask(results: pd.DataFrame) -> pd.Series:
    """Which rows failed (the ``failed`` column, all false without one): no outcome yet, scored by the next run.

    >>> failed_mask(pd.DataFrame({"failed": [True, None, False]})).tolist()
    [True, False, False]
    """
    if "failed" not in results.columns:
        return pd.Series(False, index=results.index)
    return results["failed"].fillna(False).astype(bool)


#: Machine epsilon of each dtype a score can be computed in (bfloat16 keeps 8 significant bits). A pair whose two
#: scores differ by no more than this, relative to the larger one, is a near tie: its outcome is decided by the
#: dtype's rounding, not by the model. A job without a recorded dtype is taken as float64.
DTYPE_EPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def near_tie_mask(results: pd.DataFrame) -> pd.Series:
    """True for a decided pair (correct or wrong) whose two scores are within the resolution of the dtype they
    were computed in (``score_dtype``, from the job's record; :data:`DTYPE_EPS`); all false without scores.

    >>> rows = pd.DataFrame({"score_chosen": [1.0, 1.0, 2.0], "score_rejected": [1.004, 1.0, 1.0],
    ...                      "outcome": ["wrong", "tie", "correct"], "score_dtype": "bfloat16"})
    >>> near_tie_mask(rows).tolist()
    [True, False, False]
    """
    if not {"score_chosen", "score_rejected"} <= set(results.columns):
        return pd.Series(False, index=results.index)
    chosen = pd.to_numeric(results["score_chosen"], errors="coerce").to_numpy(dtype=float)
    rejected = pd.to_numeric(results["score_rejected"], errors="coerce").to_numpy(dtype=float)
    dtypes = results["score_dtype"] if "score_dtype" in results.columns else pd.Series(None, index=results.index)
    eps = dtypes.map(DTYPE_EPS).fillna(DTYPE_EPS["float64"]).to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        close = np.abs(chosen - rejected) <= eps * np.maximum(np.abs(chosen), np.abs(rejected))
    return pd.Series(close, index=results.index) & results["outcome"].isin(["correct", "wrong"])


def accuracy_table(
    results: pd.DataFrame,
    by: str | Sequence[str] = ("model", "profile"),
    *,
    half_credit: bool = False,
    ci: str | None = "wilson",
    units: str | None = None,
    level: float = LEVEL,
    n_boot: int | None = None,
    seed: int = SEED,
) -> pd.DataFrame:
    """Accuracy per group: columns ``*by, n, correct, ties, invalid, accuracy, ci_low, ci_high`` (at ``level``),
    and ``near_ties`` after ``ties`` when the rows carry their scores (:func:`near_tie_mask`: decided pairs whose
    scores are within the dtype's resolution; they keep their outcome, the count says how many there are).

    ``ci`` is ``"wilson"`` (default), ``"bootstrap"`` (percentile, over rows, fixed ``seed``) or ``None``
    (NaN bounds). ``units`` (seaborn's word) names a column of clusters, e.g. ``"question"`` when one
    question is asked for several users: the interval is then a bootstrap that resamples whole units (all
    pairs of a drawn question together), in place of Wilson's, which treats pairs as independent. With ``half_credit=True`` a tie counts 0.5, a ``credit`` column (correct + ties/2) is
    added and the Wilson interval uses that credit as the count. When ``by`` holds ``profile`` and a row is
    the diagnostic oracle ``rubric`` (the RM saw the answer key), an ``oracle`` column follows ``profile`` so
    that no table shows the oracle unmarked. Failed rows (``failed`` true: the model or its server raised, and the
    next run scores the pair again) are no outcome: they count in no column but a ``failed`` one, which follows
    ``invalid`` when there are any (a failed pair is never counted as wrong).

    >>> res = pd.DataFrame({"model": "m", "profile": ["none", "rubric"], "outcome": ["wrong", "correct"]})
    >>> accuracy_table(res)[["profile", "oracle", "accuracy"]].values.tolist()
    [['none', False, 0.0], ['rubric', True, 1.0]]
    """
    by = as_list(by)
    require_columns(results, [*by, "outcome", *unit_columns(units)])
    _check_outcomes(results)
    if ci not in ("wilson", "bootstrap", None):
        raise PRBError(f"Unknown confidence interval method {ci!r}; use 'wilson', 'bootstrap' or None.")
    failed = failed_mask(results)
    frame = results.assign(
        _correct=(results["outcome"] == "correct").astype(float),
        _tie=(results["outcome"] == "tie").astype(float),
        _near=near_tie_mask(results).astype(float),
        _invalid=((results["outcome"] == "invalid") & ~failed).astype(float),
        _failed=failed.astype(float),
        _counted=(~failed).astype(float),
    )
    frame["_credit"] = frame["_correct"] + (0.5 * frame["_tie"] if half_credit else 0.0)
    if by:
        grouped = frame.groupby(by, sort=True, observed=True, dropna=False)
        table = grouped.agg(
            n=("_counted", "sum"), correct=("_correct", "sum"), ties=("_tie", "sum"), near_ties=("_near", "sum"),
            invalid=("_invalid", "sum"), failed=("_failed", "sum"), credit=("_credit", "sum"),
        ).reset_index()
    else:
        table = pd.DataFrame({
            "n": [frame["_counted"].sum()], "correct": [frame["_correct"].sum()], "ties": [frame["_tie"].sum()],
            "near_ties": [frame["_near"].sum()], "invalid": [frame["_invalid"].sum()], "failed": [frame["_failed"].sum()], "credit": [frame["_credit"].sum()],
        })
    for col in ("n", "correct", "ties", "near_ties", "invalid", "failed"):
        table[col] = table[col].astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        table["accuracy"] = table["credit"] / table["n"].where(table["n"] > 0)
    if ci == "wilson" and units is None:
        table["ci_low"], table["ci_high"] = wilson_ci(table["credit"], table["n"], level=level)
    elif ci is not None:
        bounds = []
        groups = frame.groupby(by, sort=True, observed=True, dropna=False) if by else [((), frame)]
        for _, g in groups:
            g = g[g["_failed"] == 0]
            bounds.append(interval_over_units(g["_credit"].to_numpy(), g, units, n_boot=n_boot, seed=seed,
                                              level=level))
        table["ci_low"] = [b[0] for b in bounds]
        table["ci_high"] = [b[1] for b in bounds]
    else:
        table["ci_low"] = np.nan
        table["ci_high"] = np.nan
    scored = {"score_chosen", "score_rejected"} <= set(results.columns)
    columns = [*by, "n", "correct", "ties", *(["near_ties"] if scored else []), "invalid",
               *(["failed"] if failed.any() else []), "accuracy", "ci_low", "ci_high"]
    if half_credit:
        columns.insert(columns.index("accuracy"), "credit")
    if "profile" in by and table["profile"].map(is_oracle).any():
        table["oracle"] = table["profile"].map(is_oracle)
        columns.insert(columns.index("profile") + 1, "oracle")
    return table[columns]


def macro_accuracy(
    results: pd.DataFrame,
    by: str | Sequence[str] = ("model", "profile"),
    *,
    over: str = "subset",
    half_credit: bool = False,
    units: str | None = None,
    n_boot: int | None = None,
    seed: int = SEED,
    level: float = LEVEL,
) -> pd.DataFrame:
    """Accuracy averaged over the levels of ``over`` (each subset weighs the same), with a bootstrap CI.

    Columns ``*by, n, n_levels, accuracy, ci_low, ci_high``. The interval is a percentile bootstrap that
    resamples pairs within each level of ``over`` (stratified; fixed ``seed``); with ``units`` (a column,
    e.g. ``"question"``) it resamples whole units within each level instead (clustered). ``n_boot=None``:
    :func:`default_n_boot` of the group's pairs (or units).

    >>> import pandas as pd
    >>> res = pd.DataFrame({"model": "m", "profile": "none", "subset": ["a"] * 4 + ["b"] * 2,
    ...                     "id": range(6), "outcome": ["correct"] * 4 + ["wrong"] * 2})
    >>> float(macro_accuracy(res)["accuracy"].iloc[0])
    0.5
    """
    by = as_list(by)
    require_columns(results, [*by, over, "outcome", *unit_columns(units)])
    _check_outcomes(results)
    check_uncertainty(level, n_boot)
    units = "question" if units == TWO_WAY_UNIT else units   # the macro average resamples questions within levels
    credit = (results["outcome"] == "correct").astype(float)
    if half_credit:
        credit = credit + 0.5 * (results["outcome"] == "tie")
    frame = results.assign(_credit=credit)
    rows = []
    groups = frame.groupby(by, sort=True, observed=True, dropna=False) if by else [((), frame)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        strata = g[over].astype(str).to_numpy()
        values = g["_credit"].to_numpy()
        codes, _ = pd.factorize(strata, sort=True)
        rng = np.random.default_rng(seed)
        if units is None:
            draws = default_n_boot(len(g), n_boot)
            level_means = [resampled_means(values[codes == c], rng, draws) for c in np.unique(codes)]
        else:
            clusters = g[units].to_numpy()
            draws = default_n_boot(pd.Series(clusters).nunique(), n_boot)
            level_means = [cluster_resamples(values[codes == c], clusters[codes == c], None, rng, draws)
                           for c in np.unique(codes)]
        low, high = percentile_interval(np.mean(level_means, axis=0), level)
        point = float(np.mean([values[codes == c].mean() for c in np.unique(codes)]))
        rows.append({**dict(zip(by, key, strict=True)), "n": len(g), "n_levels": int(codes.max()) + 1,
                     "accuracy": point, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows, columns=[*by, "n", "n_levels", "accuracy", "ci_low", "ci_high"])


# ------------------------------------------------------------------------------------------- comparisons
def _default_within(results: pd.DataFrame, column: str) -> list[str]:
    return [c for c in ("model", "profile") if c != column and c in results.columns]


def compare(
    results: pd.DataFrame,
    column: str,
    *,
    baseline: str | None = None,
    by: str | Sequence[str] | None = None,
    units: str | None = None,
    n_boot: int | None = None,
    seed: int = SEED,
    level: float = LEVEL,
) -> pd.DataFrame:
    """Paired comparisons between the levels of ``column`` on the pairs both levels scored.

    Within each group of ``by`` (default: the other of ``model``/``profile``, so profiles are compared
    per model and models per profile condition), every level is compared with ``baseline`` (or, when
    ``baseline`` is None, every two levels in sorted order, with ``"none"`` first, so profile conditions
    are compared as none → condition). A unit is a row identity
    (model, profile, subset, id) minus ``column``; units scored by only one level are left out.

    Returns one row per comparison: ``*by, level_a, level_b, n_pairs, both_correct, a_only, b_only,
    neither, accuracy_a, accuracy_b, diff`` (accuracy_b − accuracy_a), ``ci_low, ci_high`` (percentile
    bootstrap over pairs at ``level``,
    fixed seed; with ``units``, a column such as ``"question"``, whole units are resampled, so the pairs
    of one question for different users move together), ``p_value`` (exact McNemar; with ``units``, the same
    test clustered by unit: :func:`clustered_paired_test`) and ``p_holm`` (Holm over all rows of the frame).
    Ties and invalids count as not correct.
    """
    within = _default_within(results, column) if by is None else as_list(by)
    if column in within:
        raise PRBError(f"Cannot compare the levels of {column!r} within groups of the same column.")
    named = JOB_COLUMNS if column in JOB_COLUMNS else (column,)   # comparing jobs: the model is no key either
    keys = [c for c in IDENTITY if c not in named and c not in within and c in results.columns]
    clusters_of = unit_columns(units)
    require_columns(results, [column, *within, *PAIR_KEY, "outcome", *clusters_of])
    if units is not None and set(clusters_of) & {column, *within, *keys}:
        raise PRBError(f"units={units!r} is already a key of the comparison; name a cluster column such as question.")
    _check_outcomes(results)
    frame = results[[*within, *keys, *clusters_of, column, "outcome"]].copy()
    frame["_correct"] = (frame["outcome"] == "correct").astype(np.int8)
    dup = frame.duplicated([*within, *keys, column])
    if dup.any():
        raise PRBError(f"The results hold {int(dup.sum())} duplicate row(s) for the same pair and {column} "
                       "(e.g. two jobs of one model and profile with different options); keep one job each.")
    levels_all = sorted(frame[column].dropna().astype(str).unique(), key=lambda lvl: (lvl != NO_PROFILE, lvl))
    if baseline is not None and baseline not in levels_all:
        raise PRBError(f"The baseline {baseline!r} is not a level of {column!r} ({', '.join(levels_all)}).")
    frame[column] = frame[column].astype(str)
    wide_all = frame.pivot_table(index=[*within, *keys, *clusters_of], columns=column, values="_correct",
                                 aggfunc="first", observed=True)
    rows = []
    group_iter = wide_all.groupby(level=within, sort=True) if within else [((), wide_all)]
    for key, wide in group_iter:
        key = key if isinstance(key, tuple) else (key,)
        levels = [lvl for lvl in levels_all if lvl in wide.columns and wide[lvl].notna().any()]
        if baseline is not None:
            if baseline not in levels:
                continue
            pairs = [(baseline, lvl) for lvl in levels if lvl != baseline]
        else:
            pairs = list(combinations(levels, 2))
        for a, b in pairs:
            both = wide[[a, b]].dropna()
            ca, cb = both[a].to_numpy(dtype=int), both[b].to_numpy(dtype=int)
            n = len(both)
            counts = {
                "both_correct": int(((ca == 1) & (cb == 1)).sum()),
                "a_only": int(((ca == 1) & (cb == 0)).sum()),
                "b_only": int(((ca == 0) & (cb == 1)).sum()),
                "neither": int(((ca == 0) & (cb == 0)).sum()),
            }
            cells = both.index.to_frame(index=False)
            low, high = interval_over_units(cb - ca, cells, units, n_boot=n_boot, seed=seed, level=level)
            if not n:
                p = np.nan
            elif units is None:
                p = mcnemar_exact(counts["a_only"], counts["b_only"])
            elif units == TWO_WAY_UNIT:
                p = two_way_paired_test(ca, cb, cells["question"].to_numpy(), cells["user"].to_numpy())
            else:
                p = clustered_paired_test(ca, cb, cells[units].to_numpy())
            rows.append({
                **dict(zip(within, key, strict=True)), "level_a": a, "level_b": b, "n_pairs": n, **counts,
                "accuracy_a": ca.mean() if n else np.nan, "accuracy_b": cb.mean() if n else np.nan,
                "diff": (cb.mean() - ca.mean()) if n else np.nan, "ci_low": low, "ci_high": high,
                "p_value": p,
            })
    columns = [*within, "level_a", "level_b", "n_pairs", "both_correct", "a_only", "b_only", "neither",
               "accuracy_a", "accuracy_b", "diff", "ci_low", "ci_high", "p_value", "p_holm"]
    out = pd.DataFrame(rows, columns=columns[:-1])
    out["p_holm"] = holm(out["p_value"].to_numpy(dtype=float))
    return out


def profile_lift(
    results: pd.DataFrame,
    *,
    baseline: str = "none",
    by: str | Sequence[str] = "model",
    include_oracle: bool = False,
    units: str | None = None,
    n_boot: int | None = None,
    seed: int = SEED,
    level: float = LEVEL,
) -> pd.DataFrame:
    """Per group of ``by`` (default the model; use ``"job_label"`` to keep jobs apart), the accuracy change
    of each profile condition over ``baseline`` on the same pairs. The oracle condition ``rubric`` is no lift
    of a profile (the RM saw the answer key): it is left out unless ``include_oracle``.

    Columns ``*by, profile, baseline, n_pairs, accuracy_baseline, accuracy_condition, lift, ci_low, ci_high,
    p_value, p_holm`` (lift = accuracy_condition − accuracy_baseline; paired bootstrap CI at ``level``;
    exact McNemar; Holm over all rows; with ``units``, both clustered: :func:`compare`).

    >>> import pandas as pd
    >>> res = pd.DataFrame({"model": "m", "profile": ["none"] * 3 + ["top3"] * 3, "subset": "s",
    ...                     "id": [1, 2, 3] * 2, "outcome": ["wrong", "wrong", "correct"] + ["correct"] * 3})
    >>> profile_lift(res)[["model", "profile", "baseline", "n_pairs", "lift"]]
      model profile baseline  n_pairs      lift
    0     m    top3     none        3  0.666667
    """
    by = as_list(by)
    require_columns(results, [*by, "profile"])
    if baseline not in set(results["profile"].astype(str)):
        raise PRBError(f"No results for the baseline profile condition {baseline!r}.")
    if not include_oracle:
        results = results[~results["profile"].map(is_oracle) | (results["profile"].astype(str) == baseline)]
    cmp = compare(results, "profile", baseline=baseline, by=by, units=units, n_boot=n_boot, seed=seed,
                  level=level)
    out = cmp.rename(columns={"level_a": "baseline", "level_b": "profile", "accuracy_a": "accuracy_baseline",
                              "accuracy_b": "accuracy_condition", "diff": "lift"})
    return out[[*by, "profile", "baseline", "n_pairs", "accuracy_baseline", "accuracy_condition", "lift",
                "ci_low", "ci_high", "p_value", "p_holm"]].reset_index(drop=True)


# ------------------------------------------------------------------------------------------- summarize
#: How a tie is counted, in the words every table that counts one prints beside it (key: ``half_credit``).
TIE_RULES = {
    False: "ties (equal scores) count as not correct (strict, as the reference scripts); near ties (scores within "
           "the dtype's resolution) keep their outcome and are counted beside them",
    True: "ties (equal scores) count 0.5 (half credit, as RewardBench 2); near ties (scores within the dtype's "
          "resolution) keep their outcome and are counted beside them",
}


def summarize(
    results: pd.DataFrame,
    by: str | Sequence[str] = ("model", "profile"),
    compare: str | None = None,
    *,
    baseline: str | None = None,
    half_credit: bool = False,
    units: str | None = None,
    level: float = LEVEL,
    n_boot: int | None = None,
    seed: int = SEED,
    members: pd.Series | None = None,
) -> pd.DataFrame:
    """The table ``prb summarize`` prints: one row per group of ``by`` with
    ``n, correct, ties, tie_rate, invalid, accuracy, ci_low, ci_high`` (``near_ties`` too when the rows carry
    scores: :func:`accuracy_table`) (Wilson 95%; with ``units``, e.g. ``"question"``, a bootstrap over whole
    units, and the paired tests clustered by them too). :data:`TIE_RULES` words how ties were counted.

    With ``compare`` (e.g. ``"profile"`` or ``"model"``), that column is added to ``by`` when missing and
    each row is tested against the baseline level of its group on the same pairs: added columns ``vs``,
    ``n_pairs``, ``diff`` (row − baseline), ``diff_ci_low``, ``diff_ci_high``, ``p_value`` (exact McNemar; the
    clustered test with ``units``), ``p_holm``: Holm within the row's family, as the findings adjust it: for
    profiles, the lifts under one condition (the jobs of that condition; the oracle condition is no lift and gets
    no test); for models, every pair of jobs of one condition (the family of its ranks), of which the rows against
    the baseline are shown. ``members`` (a boolean per row of ``results``) leaves the other rows out of every test
    (a model that can get no verdict: a profile-blind kind for profiles, a position-locked judge). The baseline is
    ``baseline`` when given, else ``"none"`` for profiles when present, else the first level in sorted order;
    baseline rows have NaN there.
    For all pairwise comparisons between levels use :func:`compare`. ``half_credit`` with ``compare`` is
    refused: the paired tests count strict correctness, so ``diff`` would not match a half-credit accuracy.

    >>> import pandas as pd
    >>> res = pd.DataFrame({"model": "m", "profile": ["none"] * 3 + ["full"] * 3, "subset": "s",
    ...                     "id": [1, 2, 3] * 2, "outcome": ["wrong"] * 3 + ["correct"] * 3})
    >>> summarize(res, "profile", compare="profile")[["profile", "accuracy", "vs", "diff"]]
      profile  accuracy    vs  diff
    0    full       1.0  none   1.0
    1    none       0.0   NaN   NaN
    """
    by = as_list(by)
    if compare is not None and half_credit:
        raise PRBError("Half credit and paired comparisons do not combine: the McNemar tests and diff count "
                       "ties as not correct; drop half credit or the comparison.")
    if compare is not None and compare not in by:
        by = [*by, compare]
    table = accuracy_table(results, by, half_credit=half_credit, ci="bootstrap" if units else "wilson", units=units,
                           n_boot=n_boot, seed=seed, level=level)
    table.insert(table.columns.get_loc("ties") + 1, "tie_rate", table["ties"] / table["n"].where(table["n"] > 0))
    if compare is None:
        return table
    levels = sorted(results[compare].dropna().astype(str).unique())
    if not levels:
        return table.assign(vs=None, n_pairs=pd.array([None] * len(table), dtype="Int64"), diff=np.nan,
                            diff_ci_low=np.nan, diff_ci_high=np.nan, p_value=np.nan, p_holm=np.nan)
    if baseline is None:
        baseline = NO_PROFILE if compare == "profile" and NO_PROFILE in levels else levels[0]
    within = [c for c in by if c != compare]
    tested = results[~failed_mask(results)]
    if members is not None:
        tested = tested[members.reindex(tested.index).fillna(False).astype(bool)]
    if compare == "profile":   # the oracle is no lift of a profile: no member of the lifts' families
        tested = tested[~tested["profile"].map(is_oracle) | (tested["profile"].astype(str) == baseline)]
        cmp = _compare_fn(tested, compare, baseline=baseline, by=within, units=units, n_boot=n_boot, seed=seed,
                          level=level)
        family = ["level_b", *(c for c in within if c not in JOB_COLUMNS)]   # one family per condition
    else:   # every pair of levels is in the family (as the ranks' tests); the rows against the baseline are shown
        cmp = _compare_fn(tested, compare, by=within, units=units, n_boot=n_boot, seed=seed, level=level)
        family = within
        flip = cmp["level_b"] == baseline
        cmp.loc[flip, ["level_a", "level_b"]] = cmp.loc[flip, ["level_b", "level_a"]].to_numpy()
        cmp.loc[flip, "diff"] = -cmp.loc[flip, "diff"]
        cmp.loc[flip, ["ci_low", "ci_high"]] = -cmp.loc[flip, ["ci_high", "ci_low"]].to_numpy()
    cmp["p_holm"] = family_holm(cmp, family)
    if compare != "profile":
        cmp = cmp[cmp["level_a"] == baseline]
    cmp = cmp.rename(columns={"level_a": "vs", "level_b": compare, "ci_low": "diff_ci_low",
                              "ci_high": "diff_ci_high"})
    keep = [*within, compare, "vs", "n_pairs", "diff", "diff_ci_low", "diff_ci_high", "p_value", "p_holm"]
    cmp = cmp[keep]
    table = table.assign(**{compare: table[compare].astype(str)})
    for col in within:
        cmp[col] = cmp[col].astype(table[col].dtype)
    merged = table.merge(cmp, on=[*within, compare], how="left")
    merged["n_pairs"] = merged["n_pairs"].astype("Int64")
    return merged


_compare_fn = compare
#: The columns that name a job: a family of paired tests spans the jobs of one condition.
JOB_COLUMNS = ("model", "job_label")


def family_holm(tests: pd.DataFrame, family: Sequence[str]) -> np.ndarray:
    """Holm-adjusted ``p_value`` of ``tests`` within each family: the rows that share the values of ``family``
    (every row one family when it is empty).

    >>> tests = pd.DataFrame({"profile": ["a", "a", "b"], "p_value": [0.01, 0.04, 0.03]})
    >>> [round(float(p), 2) for p in family_holm(tests, ["profile"])]
    [0.02, 0.04, 0.03]
    """
    if tests.empty:
        return np.array([], dtype=float)
    if not family:
        return holm(tests["p_value"].to_numpy(dtype=float))
    out = pd.Series(np.nan, index=tests.index)
    for _, part in tests.groupby(list(family), sort=False, dropna=False):
        out[part.index] = holm(part["p_value"].to_numpy(dtype=float))
    return out.to_numpy()
