"""Calibration and confidence: is a reward model's preference a probability, and does it know when it is right?

Probabilities. Each scored pair gets ``p_chosen``, a probability that the chosen answer is preferred:

- judges (kind ``judge``): their own P(chosen), the mean of the two A/B orders (``p_chosen_ab``, ``p_chosen_ba``);
- every kind that scores each answer (classifiers, implicit RMs, embeddings and the ``length``/``lexical``
  baselines): a Bradley-Terry temperature on the score margin, P(chosen) = sigmoid(margin / T), with T fitted by
  maximum likelihood (:func:`fit_temperature`) **out of sample, cross-fitted over questions**: the questions are
  split into ``n_folds`` folds (:func:`question_folds`; the same question asked by two users stays in one fold),
  T is fitted on the other folds' pairs and applied to this fold's, so no pair's probability is fitted on itself.
  T is positive or infinite (P = 0.5: the margins carry no sign of the chosen answer), never negative, so
  P(chosen) > 0.5 exactly when the RM prefers the chosen answer and the temperature never changes accuracy.

Both orders. The chosen answer is always the preferred one, so a pair is read in both orders: P(first answer
preferred) is ``p_chosen`` when the chosen answer is first (outcome 1) and ``1 - p_chosen`` when it is second
(outcome 0) (:func:`both_orders`). The reliability diagram is then symmetric about (0.5, 0.5); the Brier score
is the mean of (1 - p_chosen)² and the log loss the mean of -log p_chosen.

Statistics: :func:`expected_calibration_error` (equal-width bins on [0, 1], :data:`N_BINS` by default: ECE = sum
over bins of (bin share) x |observed frequency - mean prediction|), :func:`brier_score`, :func:`log_loss`; each
with a percentile bootstrap interval resampling whole questions (:func:`resampled_statistics`; for a fitted
temperature, every fold's temperature is fitted again on each resample). Each statistic is one record
(:data:`CALIBRATION_STATISTICS`).
Degenerate groups (fewer than :data:`MIN_PAIRS` pairs, a constant score, or one outcome only: every
decided pair correct, or every one wrong) get NaN statistics and a ``note`` "n/a: <reason>", never a number; so
does a group whose margins vary but favour the rejected answer in every fold (:data:`INFINITE_TEMPERATURE_REASON`:
the best temperature is infinite, every probability 1/2), which is not called a constant score.

A judge in generate mode votes (its P(chosen) is 0 or 1) and gets :data:`VOTES_REASON`. Its mode is the one its
job recorded (``judge_mode``, a column of :func:`prb_utils.store.load_results` from the job's options); only for
a job that recorded none (a store written before prb recorded the mode) is it guessed from the raw answers that
generate mode keeps (``answer_ab``/``answer_ba``).

Example:
    >>> p = np.array([0.9, 0.8, 0.3])
    >>> q, y = both_orders(p)
    >>> q.tolist(), y.tolist()
    ([0.9, 0.8, 0.3, 0.09999999999999998, 0.19999999999999996, 0.7], [1, 1, 1, 0, 0, 0])
    >>> round(brier_score(q, y), 4), round(log_loss(q, y), 4)
    (0.18, 0.5108)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from prb_utils.analysis.breakdowns import score_margins
from prb_utils.analysis.features import pair_features
from prb_utils.analysis.metrics import MIN_PAIRS, accuracy_table, as_list, question_units, require_columns
from prb_utils.analysis.resampling import (
    LEVEL,
    SEED,
    cluster_weights,
    default_n_boot,
    percentile_interval,
)
from prb_utils.analysis.rm_inputs import job_retrievers, rm_inputs
from prb_utils.errors import PRBError

N_BINS = 10  # equal-width bins of the reliability diagram and the ECE
N_FOLDS = 5  # question folds of the cross-fitted temperature
N_QUANTILES = 5  # quantile bins of |margin| for accuracy against confidence
LOG_LOSS_EPS = 1e-15  # probabilities are clipped to [eps, 1 - eps] in the log loss
PROBABILITY_KINDS = ("judge",)  # kinds whose own P(chosen) is used; every other kind goes through a temperature
#: Why a generate-mode judge has no calibration: its P(chosen) is a vote, 0 or 1.
VOTES_REASON = "n/a: votes, not probabilities (a judge in generate mode answers A or B)"
#: Why a fitted temperature gives no calibration although the margins vary: they favour the rejected answer.
INFINITE_TEMPERATURE_REASON = ("n/a: the scores favour the rejected answer: the best temperature is infinite, "
                               "every probability 1/2")
PAIR_COLUMNS = ["model", "kind", "profile", "subset", "id", "question", "outcome", "margin", "p_chosen", "source",
                "temperature", "fold", "note"]


# ------------------------------------------------------------------------------------------ statistics
def _arrays(p, y) -> tuple[np.ndarray, np.ndarray]:
    p = np.asarray(p, dtype=float)
    y = np.asarray(y, dtype=float)
    if p.shape != y.shape:
        raise PRBError(f"Got {len(p)} predictions for {len(y)} outcomes.")
    return p, y


def both_orders(p_chosen) -> tuple[np.ndarray, np.ndarray]:
    """Each pair read in both orders: predictions ``[p, 1 - p]`` of "the first answer is preferred" and their
    outcomes ``[1, 0]`` (chosen first, then chosen second).

    >>> q, y = both_orders([0.75])
    >>> q.tolist(), y.tolist()
    ([0.75, 0.25], [1, 0])
    """
    p = np.asarray(p_chosen, dtype=float)
    return np.concatenate([p, 1 - p]), np.concatenate([np.ones(len(p), dtype=int), np.zeros(len(p), dtype=int)])


def bin_index(p, *, n_bins: int = N_BINS) -> np.ndarray:
    """The equal-width bin of each prediction: bin i holds [i/n_bins, (i+1)/n_bins), the last one also 1.0.

    >>> bin_index([0.0, 0.05, 0.1, 0.95, 1.0]).tolist()
    [0, 0, 1, 9, 9]
    """
    p = np.asarray(p, dtype=float)
    return np.clip(np.floor(p * n_bins).astype(int), 0, n_bins - 1)


def reliability_bins(p, y, *, n_bins: int = N_BINS) -> pd.DataFrame:
    """Reliability diagram data: per non-empty equal-width bin ``bin, bin_low, bin_high, n, mean_predicted,
    observed`` (the share of outcomes 1 in the bin).

    >>> reliability_bins([0.1, 0.15, 0.9], [0, 1, 1], n_bins=2)
       bin  bin_low  bin_high  n  mean_predicted  observed
    0    0      0.0       0.5  2           0.125       0.5
    1    1      0.5       1.0  1           0.900       1.0
    """
    p, y = _arrays(p, y)
    frame = pd.DataFrame({"bin": bin_index(p, n_bins=n_bins), "p": p, "y": y})
    out = frame.groupby("bin").agg(n=("p", "size"), mean_predicted=("p", "mean"), observed=("y", "mean")).reset_index()
    out.insert(1, "bin_low", out["bin"] / n_bins)
    out.insert(2, "bin_high", (out["bin"] + 1) / n_bins)
    return out


def expected_calibration_error(p, y, *, n_bins: int = N_BINS) -> float:
    """ECE with ``n_bins`` equal-width bins: sum over bins of n_bin / n x |observed - mean predicted|; NaN
    without predictions.

    >>> round(expected_calibration_error([0.1, 0.15, 0.9], [0, 1, 1], n_bins=2), 6)  # 2/3 x 0.375 + 1/3 x 0.1
    0.283333
    """
    p, y = _arrays(p, y)
    if len(p) == 0:
        return float("nan")
    bins = bin_index(p, n_bins=n_bins)
    n = np.bincount(bins, minlength=n_bins)
    gap = np.bincount(bins, weights=y, minlength=n_bins) - np.bincount(bins, weights=p, minlength=n_bins)
    return float(np.abs(gap).sum() / len(p)) if n.sum() else float("nan")


def brier_score(p, y) -> float:
    """Mean squared difference between prediction and outcome (0 is perfect, 0.25 a constant 0.5).

    >>> brier_score([0.5, 0.5], [1, 0]), brier_score([1.0, 0.2], [1, 0])
    (0.25, 0.020000000000000004)
    """
    p, y = _arrays(p, y)
    return float(np.mean((p - y) ** 2)) if len(p) else float("nan")


def log_loss(p, y) -> float:
    """Mean negative log-likelihood of the outcomes (natural log; ``p`` clipped to [eps, 1 - eps], eps =
    :data:`LOG_LOSS_EPS`). A constant 0.5 gives log 2 = 0.693.

    >>> round(log_loss([0.5, 0.5], [1, 0]), 4), round(log_loss([0.8], [1]), 4)
    (0.6931, 0.2231)
    """
    p, y = _arrays(p, y)
    if not len(p):
        return float("nan")
    p = np.clip(p, LOG_LOSS_EPS, 1 - LOG_LOSS_EPS)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def spearman(x, y) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN when either side is constant or has under
    three values.

    >>> round(spearman([1, 2, 3, 4], [10, 20, 30, 25]), 6)
    0.8
    >>> spearman([1, 1, 1], [1, 2, 3])
    nan
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    rx, ry = _average_ranks(x), _average_ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    return float(rx @ ry / np.sqrt((rx @ rx) * (ry @ ry)))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their average rank (``scipy.stats.rankdata``'s default, without its
    per-call overhead: the bootstrap calls this thousands of times)."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    new = np.empty(len(values), dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    bounds = np.append(np.flatnonzero(new), len(values))
    average = (bounds[:-1] + bounds[1:] + 1) / 2  # mean of the 1-based ranks start+1 .. end
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(average, np.diff(bounds))
    return ranks


def _weighted_ranks(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks of every row in each resample given as row weights (one row of ``weights`` per resample):
    the rank a row's value has among the resample's values, ties sharing their mean rank, as
    :func:`_average_ranks` gives it on the resample written out; and how many distinct values each resample has."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    new = np.ones(len(values), dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    group = np.cumsum(new) - 1   # the tie group of each sorted position
    per_group = np.add.reduceat(weights[:, order], np.flatnonzero(new), axis=1)
    below = np.cumsum(per_group, axis=1) - per_group
    ranks = np.empty_like(weights)
    ranks[:, order] = (below + (per_group + 1) / 2)[:, group]
    return ranks, (per_group > 0).sum(axis=1)


def _spearman_rows(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """:func:`spearman` of each resample given as row weights, all at once (NaN where it is undefined)."""
    total = weights.sum(axis=1)
    (rx, distinct_x), (ry, distinct_y) = _weighted_ranks(x, weights), _weighted_ranks(y, weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = rx - ((weights * rx).sum(axis=1) / total)[:, None]
        dy = ry - ((weights * ry).sum(axis=1) / total)[:, None]
        rho = (weights * dx * dy).sum(axis=1) / np.sqrt((weights * dx * dx).sum(axis=1) * (weights * dy * dy).sum(axis=1))
    rho[(total < 3) | (distinct_x < 2) | (distinct_y < 2)] = np.nan
    return rho


def spearman_interval(values, units, *, n_boot: int | None = None, seed: int = SEED,
                      level: float = LEVEL) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`spearman` of the two columns of ``values`` over resamples of whole
    ``units``: the resamples ``bootstrap_ci(values, spearman of the columns, units=units)`` draws (the same seed,
    the same clusters), computed at once as row weights (:func:`prb_utils.analysis.resampling.cluster_weights`).

    >>> v = np.array([[1, 10], [2, 20], [3, 30], [4, 25], [5, 50], [6, 40]], dtype=float)
    >>> low, high = spearman_interval(v, list("aabbcc"), n_boot=200)
    >>> bool(-1 <= low <= high <= 1)
    True
    """
    values = np.asarray(values, dtype=float)
    n_units = pd.Series(list(units)).nunique()
    stats = [_spearman_rows(values[:, 0], values[:, 1], weights)
             for weights in cluster_weights(units, default_n_boot(n_units, n_boot), np.random.default_rng(seed))]
    return percentile_interval(np.concatenate(stats) if stats else np.array([]), level)


# ------------------------------------------------------------------------------------------ temperature
def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(0.5 * z))


def fit_temperature(margins) -> float:
    """Maximum-likelihood Bradley-Terry temperature T of P(chosen) = sigmoid(margin / T), T in (0, inf].

    ``inf`` when the margins favour the rejected answer on average (the best non-negative slope is 0: P =
    0.5). Raises PRBError when no margin is non-zero, or when no margin is negative (every pair decided for the
    chosen answer: the likelihood grows without bound as T -> 0). The log-likelihood is concave in 1/T; its
    maximum is found by bisection on the derivative.

    >>> round(fit_temperature([2.0, 1.0, -1.0, 3.0]), 4)
    1.0678
    >>> fit_temperature([-2.0, 1.0])
    inf
    """
    m = np.asarray(margins, dtype=float)
    m = m[np.isfinite(m) & (m != 0)]
    if not len(m):
        raise PRBError("every margin is zero: the score does not separate the answers")
    if not (m < 0).any():
        raise PRBError("every decided pair favours the chosen answer: the likelihood has no maximum (T -> 0)")
    scale = float(np.sqrt(np.mean(m ** 2)))
    x = m / scale

    def slope(beta: float) -> float:  # derivative of the negative log-likelihood in beta = scale / T
        return float(-np.sum(x * _sigmoid(-beta * x)))

    if slope(0.0) >= 0:
        return float("inf")
    low, high = 0.0, 1.0
    while slope(high) < 0:
        low, high = high, high * 2
    for _ in range(200):
        mid = (low + high) / 2
        if slope(mid) < 0:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * high:
            break
    return scale / ((low + high) / 2)


def question_folds(units, *, n_folds: int = N_FOLDS, seed: int = SEED) -> np.ndarray:
    """Fold number (0 .. k-1) of each row, whole units (questions) per fold, k = min(n_folds, units). The
    assignment depends on the set of units and ``seed`` only, never on scores or outcomes.

    >>> question_folds(["q1", "q2", "q1", "q3"], n_folds=3).tolist()
    [1, 2, 1, 0]
    """
    labels = pd.Series(list(units)).astype(str)
    distinct = np.array(sorted(labels.unique()))
    k = max(1, min(n_folds, len(distinct)))
    order = np.random.default_rng(seed).permutation(len(distinct))
    fold_of = {distinct[j]: rank % k for rank, j in enumerate(order)}
    return labels.map(fold_of).to_numpy(dtype=int)


def cross_fit_temperature(margins, units, *, n_folds: int = N_FOLDS, seed: int = SEED
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Out-of-sample P(chosen) = sigmoid(margin / T_fold): T_fold is fitted on the rows of every other fold
    (:func:`question_folds`). Returns ``(p_chosen, temperature, fold)`` per row. PRBError (with the reason)
    when there are fewer than two units or a fold's fit is degenerate (:func:`fit_temperature`).

    >>> p, t, fold = cross_fit_temperature([1.0, -1.0, 2.0, -0.5, 1.5, 0.5], list("aabbcc"), n_folds=3)
    >>> fold.tolist(), bool(t[0] == t[1]), bool(np.all((p > 0.5) == (np.array([1, -1, 2, -0.5, 1.5, 0.5]) > 0)))
    ([1, 1, 2, 2, 0, 0], True, True)
    """
    m = np.asarray(margins, dtype=float)
    folds = question_folds(units, n_folds=n_folds, seed=seed)
    if folds.max(initial=0) < 1:
        raise PRBError("one question only: there is nothing to fit the temperature on out of sample")
    temperature = np.empty(len(m))
    for fold in np.unique(folds):
        inside = folds == fold
        try:
            temperature[inside] = fit_temperature(m[~inside])
        except PRBError as exc:
            raise PRBError(f"the temperature for fold {fold + 1} of {folds.max() + 1} cannot be fitted: {exc}"
                           ) from None
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(np.isinf(temperature), 0.5, _sigmoid(m / temperature))
    return p, temperature, folds


# -------------------------------------------------------------------------------------------- per pair
def degenerate_reason(values, outcomes, *, min_pairs: int = MIN_PAIRS) -> str | None:
    """Why a group's calibration is undefined ("n/a: ..."), or None: fewer than ``min_pairs`` pairs, a
    constant score, or one outcome only among the decided (correct or wrong) pairs.

    >>> degenerate_reason([0.5] * 30, ["correct", "wrong"] * 15)
    'n/a: constant score (every pair gets 0.5)'
    >>> print(degenerate_reason([0.1, 0.9] * 15, ["correct", "wrong"] * 15))
    None
    """
    values = np.asarray(values, dtype=float)
    outcomes = pd.Series(list(outcomes), dtype=object)
    if len(values) < min_pairs:
        return f"n/a: too few pairs ({len(values)} < {min_pairs})"
    if np.ptp(values) == 0:
        return f"n/a: constant score (every pair gets {values[0]:.3g})"
    decided = set(outcomes[outcomes.isin(["correct", "wrong"])])
    if len(decided) < 2:
        which = "no pair is decided" if not decided else f"every decided pair is {decided.pop()}"
        return f"n/a: one outcome only ({which})"
    return None


def pair_probabilities(results: pd.DataFrame, data: pd.DataFrame | None = None, *,
                       by: str | Sequence[str] = ("model", "profile"), n_folds: int = N_FOLDS, seed: int = SEED,
                       min_pairs: int = MIN_PAIRS) -> pd.DataFrame:
    """Per scored pair (invalid rows left out): :data:`PAIR_COLUMNS`. ``source`` is ``judge`` (the judge's own
    P(chosen)) or ``temperature`` (cross-fitted per group of ``by``, :func:`cross_fit_temperature`, folds of
    questions taken from ``data``; without ``data`` each pair is its own unit). ``note`` holds "n/a: <reason>"
    for every row of a degenerate group (:func:`degenerate_reason`, or a temperature that cannot be fitted),
    whose ``p_chosen`` is then NaN.

    >>> rows = pd.DataFrame({"model": "length", "kind": "length", "profile": "none", "subset": "s",
    ...                      "id": [str(i) for i in range(6)], "score_chosen": [3, 1, 5, 2, 4, 6],
    ...                      "score_rejected": [1, 2, 3, 4, 3, 7], "outcome": ["correct", "wrong"] * 3})
    >>> probs = pair_probabilities(rows, min_pairs=4)
    >>> probs[["margin", "source", "fold", "temperature", "p_chosen"]].round(3)
       margin       source  fold  temperature  p_chosen
    0     2.0  temperature     4          inf     0.500
    1    -1.0  temperature     0        0.988     0.267
    2     2.0  temperature     1          inf     0.500
    3    -2.0  temperature     0        0.988     0.117
    4     1.0  temperature     3          inf     0.500
    5    -1.0  temperature     2        3.413     0.427

    (Where the other folds' margins favour the rejected answer on average, T is infinite and P = 0.5.)
    """
    by = as_list(by)
    require_columns(results, [*by, "subset", "id", "score_chosen", "score_rejected", "outcome"])
    rows = score_margins(results)
    if "kind" not in rows.columns:
        rows["kind"] = None
    for column in ("p_chosen_ab", "p_chosen_ba"):
        if column not in rows.columns:
            rows[column] = np.nan
    rows["question"] = question_units(rows, data).to_numpy()
    judge_p = (pd.to_numeric(rows["p_chosen_ab"], errors="coerce") + pd.to_numeric(rows["p_chosen_ba"],
                                                                                     errors="coerce")) / 2
    votes = _voted(rows)
    rows["source"] = np.where(rows["kind"].isin(PROBABILITY_KINDS) & (judge_p.notna() | votes),
                              np.where(votes, "votes", "judge"), "temperature")
    rows["p_chosen"] = np.where(rows["source"] == "judge", judge_p, np.nan)
    rows["temperature"] = np.nan
    rows["fold"] = pd.array([pd.NA] * len(rows), dtype="Int64")
    rows["note"] = None
    for _, group in (rows.groupby([*by, "source"], sort=True, observed=True) if len(rows) else []):
        index = group.index
        judged = group["source"].iloc[0] != "temperature"
        values = group["p_chosen"] if judged else group["margin"]
        reason = (VOTES_REASON if group["source"].iloc[0] == "votes"
                  else degenerate_reason(values, group["outcome"], min_pairs=min_pairs))
        if reason is None and not judged:
            try:
                p, t, folds = cross_fit_temperature(group["margin"], group["question"], n_folds=n_folds, seed=seed)
                rows.loc[index, "p_chosen"] = p
                rows.loc[index, "temperature"] = t
                rows.loc[index, "fold"] = folds
                if np.isinf(t).all():   # the margins vary, yet no fold's fit separates them: no probability but 1/2
                    reason = INFINITE_TEMPERATURE_REASON
            except PRBError as exc:
                reason = f"n/a: {exc}"
        if reason is not None:
            rows.loc[index, "note"] = reason
            rows.loc[index, "p_chosen"] = np.nan
    columns = [*dict.fromkeys([*by, *PAIR_COLUMNS])]
    return rows[columns].reset_index(drop=True)


def _voted(rows: pd.DataFrame) -> pd.Series:
    """True for the rows of a judge in generate mode: its P(chosen) is a 0/1 vote. The job's recorded
    ``judge_mode`` decides; a row without one (a job that recorded no mode) falls back to the old guess: generate
    mode keeps the judge's raw answers (``answer_ab``/``answer_ba``).

    >>> _voted(pd.DataFrame({"judge_mode": ["generate", "logprob", None], "answer_ab": ["A", "A", "A"]})).tolist()
    [True, False, True]
    """
    answers = [c for c in ("answer_ab", "answer_ba") if c in rows.columns]
    guess = rows[answers].notna().any(axis=1) if answers else pd.Series(False, index=rows.index)
    if "judge_mode" not in rows.columns:
        return guess
    mode = rows["judge_mode"]
    return mode.eq("generate").where(mode.notna(), guess).astype(bool)


def _newton_slopes(x: np.ndarray, weights: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per row of ``weights`` (one resample's row weights), the maximum-likelihood slope beta >= 0 of
    P(chosen) = sigmoid(beta * x), by safeguarded Newton steps from ``start`` (the likelihood is concave in beta):
    0 where the weighted margins favour the rejected answer on average, NaN where no weighted margin is negative
    (no maximum, as :func:`fit_temperature` refuses)."""
    slope_at_zero = -0.5 * (weights @ x)
    bounded = (weights * (x < 0)).sum(axis=1) > 0
    beta = np.where(slope_at_zero < 0, np.maximum(start, 1e-3), 0.0)
    live = (slope_at_zero < 0) & bounded
    for _ in range(100):
        if not live.any():
            break
        b = beta[live][:, None]
        s = _sigmoid(-b * x)
        gradient = -(weights[live] * x * s).sum(axis=1)
        curvature = (weights[live] * x * x * s * (1 - s)).sum(axis=1)
        step = gradient / np.maximum(curvature, 1e-300)
        updated = np.clip(b[:, 0] - step, b[:, 0] / 4, b[:, 0] * 4)
        done = np.abs(updated - b[:, 0]) <= 1e-10 * updated
        beta[live] = updated
        live[np.flatnonzero(live)[done]] = False
    return np.where(bounded | (slope_at_zero >= 0), beta, np.nan)


def _start_slope(x: np.ndarray) -> float:
    """The full-sample slope of :func:`fit_temperature` on the normalised margins ``x`` (1.0 where undefined)."""
    try:
        t = fit_temperature(x)
    except PRBError:
        return 1.0
    return 1.0 if np.isinf(t) else 1.0 / t


# ------------------------------------------------------------------------------ the statistics as records
def _ece_rows(p: np.ndarray, weights: np.ndarray, n_bins: int) -> np.ndarray:
    """ECE of each row of P(chosen) read in both orders (:func:`expected_calibration_error` of
    :func:`both_orders`), each pair weighted."""
    size = len(p)
    offset = np.arange(size)[:, None] * n_bins
    miss = (weights * (1 - p)).ravel()   # chosen first: outcome 1, prediction p; chosen second: outcome 0, 1 - p
    gap = (np.bincount((offset + bin_index(p, n_bins=n_bins)).ravel(), weights=miss, minlength=size * n_bins)
           - np.bincount((offset + bin_index(1 - p, n_bins=n_bins)).ravel(), weights=miss, minlength=size * n_bins))
    return np.abs(gap.reshape(size, n_bins)).sum(axis=1) / (2 * weights.sum(axis=1))


def _brier_rows(p: np.ndarray, weights: np.ndarray, n_bins: int) -> np.ndarray:
    return (weights * (1 - p) ** 2).sum(axis=1) / weights.sum(axis=1)


def _log_loss_rows(p: np.ndarray, weights: np.ndarray, n_bins: int) -> np.ndarray:
    return -(weights * np.log(np.clip(p, LOG_LOSS_EPS, 1 - LOG_LOSS_EPS))).sum(axis=1) / weights.sum(axis=1)


@dataclass(frozen=True)
class CalibrationStatistic:
    """One calibration statistic of P(chosen), defined once: ``rows`` gives it for many rows of probabilities at
    once, each pair weighted (a row of weights per resample: :func:`prb_utils.analysis.resampling.cluster_weights`),
    and :meth:`one` is its value on one group. A test holds both to :func:`expected_calibration_error`,
    :func:`brier_score` and :func:`log_loss` on the pairs read in both orders. A new statistic is one record here
    and its test."""

    name: str
    rows: Callable[[np.ndarray, np.ndarray, int], np.ndarray]

    def one(self, p_chosen, *, n_bins: int = N_BINS) -> float:
        """The statistic of one group's P(chosen) (NaN without pairs).

        >>> round(CALIBRATION_STATISTICS["brier"].one([0.9, 0.8, 0.3, 0.6]), 4)
        0.175
        """
        p = np.asarray(p_chosen, dtype=float)
        return float(self.rows(p[None, :], np.ones((1, len(p))), n_bins)[0]) if len(p) else float("nan")


#: Every calibration statistic, in table order.
CALIBRATION_STATISTICS: dict[str, CalibrationStatistic] = {s.name: s for s in (
    CalibrationStatistic("ece", _ece_rows),
    CalibrationStatistic("brier", _brier_rows),
    CalibrationStatistic("log_loss", _log_loss_rows),
)}


def resampled_statistics(p_chosen, units, *, margins=None, folds=None, n_bins: int = N_BINS,
                         n_boot: int | None = None, seed: int = SEED, level: float = LEVEL
                         ) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap intervals of every :data:`CALIBRATION_STATISTICS` over resamples of whole ``units``
    (questions; :func:`prb_utils.analysis.resampling.cluster_weights`). With the ``margins`` and ``folds`` of a
    cross-fitted temperature (:func:`cross_fit_temperature`), every fold's temperature is fitted again on each
    resample, so the interval carries the temperature's own uncertainty, not only the pairs'; resamples where a
    fold's temperature has no maximum are left out. Without them, ``p_chosen`` (a judge's own) is held fixed.

    >>> m = np.array([1.0, -1.0, 2.0, -0.5, 1.5, 0.5, 3.0, -2.0])
    >>> ci = resampled_statistics(None, list("aabbccdd"), margins=m, folds=[0, 0, 1, 1, 2, 2, 0, 1], n_boot=200)
    >>> list(ci), all(low <= high for low, high in ci.values())
    (['ece', 'brier', 'log_loss'], True)
    """
    n_units = pd.Series(list(units)).nunique()
    if not n_units:
        return {name: (np.nan, np.nan) for name in CALIBRATION_STATISTICS}
    n_boot = default_n_boot(n_units, n_boot)
    refit = margins is not None
    if refit:
        m, folds = np.asarray(margins, dtype=float), np.asarray(folds, dtype=int)
        x = m / (float(np.sqrt(np.mean(m ** 2))) or 1.0)
        start = {f: _start_slope(x[folds != f]) for f in np.unique(folds)}
    else:
        p_fixed = np.asarray(p_chosen, dtype=float)
    found: dict[str, list[np.ndarray]] = {name: [] for name in CALIBRATION_STATISTICS}
    for weights in cluster_weights(units, n_boot, np.random.default_rng(seed)):
        if refit:
            slope = np.empty(weights.shape)
            for f, first in start.items():
                slope[:, folds == f] = _newton_slopes(x, weights * (folds != f), np.full(len(weights), first))[:, None]
            defined = np.isfinite(slope).all(axis=1)
            p = _sigmoid(np.where(defined[:, None], slope, 0.0) * x)
        else:
            defined, p = np.ones(len(weights), dtype=bool), np.broadcast_to(p_fixed, weights.shape)
        for name, statistic in CALIBRATION_STATISTICS.items():
            found[name].append(np.where(defined, statistic.rows(p, weights, n_bins), np.nan))
    return {name: percentile_interval(np.concatenate(values), level) for name, values in found.items()}


# -------------------------------------------------------------------------------------- group tables
def _groups(probs: pd.DataFrame, by: list[str]):
    return probs.groupby([*by, "source"], sort=True, observed=True) if len(probs) else []


def calibration_table(probs: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"),
                      n_bins: int = N_BINS, min_pairs: int = MIN_PAIRS, n_boot: int | None = None, seed: int = SEED,
                      level: float = LEVEL) -> pd.DataFrame:
    """ECE, Brier score and log loss per group of ``by`` (tidy: one row per statistic) from
    :func:`pair_probabilities`: columns ``*by, source, statistic, n, n_questions, value, ci_low, ci_high, note``.
    Intervals: percentile bootstrap at ``level`` resampling whole questions (fixed ``seed``); for a
    ``temperature`` group every fold's temperature is fitted again on each resample (:func:`resampled_statistics`).
    A degenerate
    group (a ``note`` from :func:`pair_probabilities`, or one of ``by`` with under ``min_pairs`` pairs or one
    outcome) has NaN values and its reason in ``note``.

    >>> probs = pd.DataFrame({"model": "m", "profile": "none", "question": list("abcd"), "source": "judge",
    ...                       "outcome": ["correct", "correct", "wrong", "correct"],
    ...                       "p_chosen": [0.9, 0.8, 0.3, 0.6], "note": None})
    >>> table = calibration_table(probs, min_pairs=4, n_boot=200)
    >>> table[["statistic", "n", "value"]].round(4).values.tolist()
    [['ece', 4, 0.35], ['brier', 4, 0.175], ['log_loss', 4, 0.5108]]
    """
    by = as_list(by)
    require_columns(probs, [*by, "source", "question", "outcome", "p_chosen", "note"], what="probabilities")
    rows = []
    for key, group in _groups(probs, by):
        key = dict(zip([*by, "source"], key if isinstance(key, tuple) else (key,), strict=True))
        notes = group["note"].dropna()
        p = group["p_chosen"].to_numpy(dtype=float)
        reason = notes.iloc[0] if len(notes) else _probability_reason(group, min_pairs=min_pairs)
        units = group["question"].astype(str).to_numpy()
        refitted = (reason is None and key["source"] == "temperature" and {"margin", "fold"} <= set(group.columns)
                    and group["fold"].notna().all())
        intervals = {} if reason is not None else resampled_statistics(
            p, units, margins=group["margin"] if refitted else None,
            folds=group["fold"].astype(int) if refitted else None, n_bins=n_bins, n_boot=n_boot, seed=seed,
            level=level)
        for name, statistic in CALIBRATION_STATISTICS.items():
            if reason is None:
                value = statistic.one(p, n_bins=n_bins)
                low, high = intervals[name]
            else:
                value = low = high = np.nan
            rows.append({**key, "statistic": name, "n": len(group), "n_questions": len(set(units)),
                         "value": value, "ci_low": low, "ci_high": high, "note": reason})
    return pd.DataFrame(rows, columns=[*by, "source", "statistic", "n", "n_questions", "value", "ci_low", "ci_high",
                                       "note"])


def _probability_reason(group: pd.DataFrame, *, min_pairs: int) -> str | None:
    """:func:`degenerate_reason` of a group's P(chosen), except that probabilities all 1/2 because every pair's
    temperature is infinite (a subset of pairs whose folds favour the rejected answer) say so
    (:data:`INFINITE_TEMPERATURE_REASON`), never "constant score"."""
    reason = degenerate_reason(group["p_chosen"].to_numpy(dtype=float), group["outcome"], min_pairs=min_pairs)
    temperature = pd.to_numeric(group.get("temperature", pd.Series(np.nan, index=group.index)), errors="coerce")
    if reason and reason.startswith("n/a: constant score") and len(temperature) and np.isinf(temperature).all():
        return INFINITE_TEMPERATURE_REASON
    return reason


def calibration_wide(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`calibration_table` with one row per group: ``n``, then ``<statistic>``, ``<statistic>_low``,
    ``<statistic>_high`` for ECE, Brier and log loss, then ``note`` ("n/a: ..." where undefined).

    >>> long = pd.DataFrame({"model": "m", "source": "judge", "statistic": ["ece", "brier", "log_loss"], "n": 30,
    ...                      "n_questions": 30, "value": [0.1, 0.2, 0.6], "ci_low": [0.0, 0.1, 0.5],
    ...                      "ci_high": [0.2, 0.3, 0.7], "note": None})
    >>> calibration_wide(long).columns.tolist()[:5]
    ['model', 'source', 'n', 'n_questions', 'ece']
    """
    keys = [c for c in table.columns if c not in ("statistic", "value", "ci_low", "ci_high")]
    frame = table.assign(note=table["note"].fillna(""))
    # one row per group that exists (a pivot over every key would build their Cartesian product)
    wide = frame.set_index([*keys, "statistic"])[["value", "ci_low", "ci_high"]].unstack("statistic", sort=False)
    out = pd.DataFrame(index=wide.index)
    for name in CALIBRATION_STATISTICS:
        out[name] = wide[("value", name)] if ("value", name) in wide.columns else np.nan
        out[f"{name}_low"] = wide[("ci_low", name)] if ("ci_low", name) in wide.columns else np.nan
        out[f"{name}_high"] = wide[("ci_high", name)] if ("ci_high", name) in wide.columns else np.nan
    out = out.reset_index()
    out["note"] = out["note"].replace("", None)
    return out[[*[k for k in keys if k != "note"], *out.columns[len(keys):], "note"]]


def probability_sources(probs: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile")) -> pd.DataFrame:
    """How each group's P(chosen) was obtained: ``*by, kind, source, n, n_folds, temperature_min,
    temperature_max, note`` (the temperatures fitted over the folds; NaN for a judge's own probability).

    >>> probs = pd.DataFrame({"model": "m", "kind": "length", "source": "temperature", "fold": [0, 1, 0],
    ...                       "temperature": [2.0, 3.0, 2.0], "note": None})
    >>> probability_sources(probs, by="model").values.tolist()
    [['m', 'length', 'temperature', 3, 2, 2.0, 3.0, None]]
    """
    by = as_list(by)
    columns = [*by, "kind", "source", "n", "n_folds", "temperature_min", "temperature_max", "note"]
    rows = []
    for key, group in _groups(probs, by):
        rows.append({**dict(zip([*by, "source"], key if isinstance(key, tuple) else (key,), strict=True)),
                     "kind": group["kind"].iloc[0], "n": len(group), "n_folds": int(group["fold"].nunique()),
                     "temperature_min": group["temperature"].min(), "temperature_max": group["temperature"].max(),
                     "note": group["note"].dropna().iloc[0] if group["note"].notna().any() else None})
    return pd.DataFrame(rows, columns=columns)


def undefined_groups(table: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile")) -> pd.DataFrame:
    """The groups of a table with a ``note`` column whose statistics are n/a, one row per reason: ``note``
    and ``groups`` (each group's ``by`` values joined by " | ").

    >>> table = pd.DataFrame({"model": ["a", "b", "c"], "profile": "none",
    ...                       "note": ["n/a: too few pairs (9 < 20)", None, "n/a: too few pairs (9 < 20)"]})
    >>> undefined_groups(table).values.tolist()
    [['n/a: too few pairs (9 < 20)', ['a | none', 'c | none']]]
    """
    by = as_list(by)
    undefined = table[table["note"].notna()].drop_duplicates([*by, "note"])
    labels = undefined[by].astype(str).agg(" | ".join, axis=1) if len(undefined) else pd.Series(dtype=object)
    grouped = pd.DataFrame({"note": undefined["note"], "group": labels}).groupby("note", sort=False)["group"]
    return grouped.agg(list).rename("groups").reset_index()


def reliability_table(probs: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"),
                      n_bins: int = N_BINS, min_pairs: int = MIN_PAIRS) -> pd.DataFrame:
    """The reliability diagram per group of ``by`` (pairs read in both orders, :func:`both_orders`): columns
    ``*by, source, bin, bin_low, bin_high, n, mean_predicted, observed``; degenerate groups are left out (see
    :func:`calibration_table` for their reason)."""
    by = as_list(by)
    parts = []
    for key, group in _groups(probs, by):
        p = group["p_chosen"].to_numpy(dtype=float)
        if group["note"].notna().any() or degenerate_reason(p, group["outcome"], min_pairs=min_pairs):
            continue
        bins = reliability_bins(*both_orders(p), n_bins=n_bins)
        for name, value in zip([*by, "source"], key if isinstance(key, tuple) else (key,), strict=True):
            bins[name] = value
        parts.append(bins)
    columns = [*by, "source", "bin", "bin_low", "bin_high", "n", "mean_predicted", "observed"]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def accuracy_by_margin(results: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"),
                       n_quantiles: int = N_QUANTILES) -> pd.DataFrame:
    """Accuracy against confidence: per group of ``by``, pairs binned by |margin| into quantiles (``margin_bin``
    "Q1" = the least confident fifth ... by default; ties of |margin| may merge bins), with
    :func:`~prb_utils.analysis.metrics.accuracy_table` columns (Wilson interval) and ``mean_abs_margin``. A group
    whose |margin| does not vary is left out. Invalid rows have no margin and are left out.

    >>> rows = pd.DataFrame({"model": "m", "profile": "none", "score_chosen": [1, 2, 3, 4, 5, 6],
    ...                      "score_rejected": [1.5, 1, 4.5, 1, 8, 0], "outcome": ["wrong", "correct"] * 3})
    >>> accuracy_by_margin(rows, n_quantiles=3)[["margin_bin", "n", "accuracy", "mean_abs_margin"]]
      margin_bin  n  accuracy  mean_abs_margin
    0         Q1  2  0.500000             0.75
    1         Q2  3  0.333333             2.50
    2         Q3  1  1.000000             6.00
    """
    by = as_list(by)
    margins = score_margins(results)
    margins["abs_margin"] = margins["margin"].abs()
    parts = []
    for _, group in (margins.groupby(by, sort=True, observed=True) if len(margins) else []):
        if group["abs_margin"].nunique() < 2:
            continue
        codes = pd.qcut(group["abs_margin"], n_quantiles, labels=False, duplicates="drop")
        parts.append(group.assign(_code=codes.to_numpy()))
    columns = [*by, "margin_bin", "n", "correct", "ties", "invalid", "accuracy", "ci_low", "ci_high",
               "mean_abs_margin"]
    if not parts:
        return pd.DataFrame(columns=columns)
    binned = pd.concat(parts, ignore_index=True)
    labels = [f"Q{i + 1}" for i in range(int(binned["_code"].max()) + 1)]
    binned["margin_bin"] = pd.Categorical.from_codes(binned["_code"].astype(int), categories=labels, ordered=True)
    table = accuracy_table(binned, [*by, "margin_bin"])
    means = binned.groupby([*by, "margin_bin"], observed=True)["abs_margin"].mean().rename("mean_abs_margin")
    return table.merge(means.reset_index(), on=[*by, "margin_bin"], how="left")[columns]


# ------------------------------------------------------------------------------------------- lengths
LENGTH_STATISTICS = {
    "score ~ answer length": "each answer's score against its length in characters (two points per pair)",
    "margin ~ length difference": "the margin against chosen minus rejected length in characters",
    "margin ~ profile length": "the margin against the characters the profile adds to the RM's user message",
}


def length_correlations(results: pd.DataFrame, data: pd.DataFrame, *, run_metadata: pd.DataFrame | None = None,
                        by: str | Sequence[str] = ("model", "profile"), n_boot: int | None = None, seed: int = SEED,
                        level: float = LEVEL) -> pd.DataFrame:
    """Spearman correlations of scores with lengths per group of ``by`` (the statistics of
    :data:`LENGTH_STATISTICS`), with a percentile bootstrap interval resampling whole questions: columns
    ``*by, statistic, n, rho, ci_low, ci_high, note``. Profile length is rebuilt from ``data`` as the RM saw it
    (:func:`~prb_utils.analysis.rm_inputs.rm_inputs`; top-K conditions need ``run_metadata`` or a
    ``retriever`` column). An undefined correlation (a constant side, e.g. no profile under ``none``) is NaN
    with "n/a: <reason>" in ``note``.
    """
    by = as_list(by)
    margins = score_margins(results).reset_index(drop=True)
    if margins.empty:
        return pd.DataFrame(columns=[*by, "statistic", "n", "rho", "ci_low", "ci_high", "note"])
    feats = pair_features(data)[["subset", "id", "chosen_chars", "rejected_chars", "length_diff_chars"]]
    margins = margins.assign(subset=margins["subset"].astype(str), id=margins["id"].astype(str))
    joined = margins.merge(feats, on=["subset", "id"], how="inner")
    if joined.empty:
        raise PRBError("No result row matches a pair of the benchmark data (join on subset and id).")
    inputs = rm_inputs(joined, data, retrievers=job_retrievers(joined, run_metadata))
    joined["question"] = inputs["question"].to_numpy()
    joined["profile_chars"] = (inputs["input_size"] - inputs["question"].str.len()).to_numpy()
    rows = []
    for key, g in joined.groupby(by, sort=True, observed=True):
        key = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        units = g["question"].to_numpy()
        answer = np.column_stack([np.concatenate([g["score_chosen"], g["score_rejected"]]),
                                  np.concatenate([g["chosen_chars"], g["rejected_chars"]])]).astype(float)
        cases = {
            "score ~ answer length": (answer, np.concatenate([units, units]), ("the score", "the answer length")),
            "margin ~ length difference": (g[["margin", "length_diff_chars"]].to_numpy(dtype=float), units,
                                           ("the margin", "the length difference")),
            "margin ~ profile length": (g[["margin", "profile_chars"]].to_numpy(dtype=float), units,
                                        ("the margin", "the profile length")),
        }
        for name, (values, unit, sides) in cases.items():
            rho = spearman(values[:, 0], values[:, 1])
            note = None
            if np.isnan(rho):
                constant = [side for col, side in enumerate(sides) if np.ptp(values[:, col]) == 0]
                note = (f"n/a: {' and '.join(constant)} does not vary" if constant
                        else f"n/a: too few values ({len(values)})")
                low = high = np.nan
            else:
                low, high = spearman_interval(values, unit, n_boot=n_boot, seed=seed, level=level)
            rows.append({**key, "statistic": name, "n": len(g), "rho": rho, "ci_low": low, "ci_high": high,
                         "note": note})
    return pd.DataFrame(rows, columns=[*by, "statistic", "n", "rho", "ci_low", "ci_high", "note"])
