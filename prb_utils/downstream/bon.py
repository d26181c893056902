"""Best-of-N (BoN) selection: exact expected best-of-k quality, the reference "first k", and curves.

The tidy BoN form has one row per (model, subset, id, sample_idx): ``model`` is the RM that scored the
sample, ``sample_idx`` the sample's integer position among the question's N samples (the "first k" order),
``rm_score`` its score (higher is better) and ``quality`` the rubric score of the sample in [0, 1] (from a
rubric judge; the same for every RM). Curves carry percentile bootstrap intervals over questions
(``level``, ``n_boot``, ``seed``), which stay inside the quality's range.

Example:
    >>> round(expected_best_of_k([0.1, 0.9, 0.5], [0.0, 1.0, 0.5], 2), 4)
    0.8333
    >>> best_of_first_k([0.1, 0.9, 0.5], [0.0, 1.0, 0.5], 1)
    0.0
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np
import pandas as pd

from prb_utils.analysis.resampling import LEVEL, SEED, bootstrap_ci, check_uncertainty
from prb_utils.errors import PRBError

BON_COLUMNS = ("model", "subset", "id", "sample_idx", "rm_score", "quality")
DEFAULT_KS = (1, 2, 4, 8)


def _as_arrays(rm_scores: Sequence[float], quality: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(rm_scores, dtype=float).ravel()
    q = np.asarray(quality, dtype=float).ravel()
    if s.shape != q.shape:
        raise PRBError(f"rm_scores and quality differ in length ({s.size} vs {q.size}).")
    if s.size == 0:
        raise PRBError("Best-of-k needs at least one sample.")
    if not (np.isfinite(s).all() and np.isfinite(q).all()):
        raise PRBError("Best-of-k needs finite rm_scores and quality; drop invalid samples first.")
    return s, q


def _check_k(k: int, n: int) -> int:
    k = int(k)
    if k < 1 or k > n:
        raise PRBError(f"k must be between 1 and the number of samples ({n}), got {k}.")
    return k


def expected_best_of_k(rm_scores: Sequence[float], quality: Sequence[float], k: int) -> float:
    """Expected ``quality`` of the highest-``rm_scores`` sample in a uniformly random k-subset of the N.

    Exact, without enumeration: group the samples by distinct RM score; the subset's maximum equals the
    group value v with probability (C(L+g, k) - C(L, k)) / C(N, k), where L samples score below v and g
    equal it. Within the winning group the tied samples are split evenly, and by symmetry the expected
    mean quality of the tied samples drawn is the group's mean quality. O(N log N) per k; exact integer
    binomials, so large N stays accurate.

    >>> expected_best_of_k([1, 1, 0], [1.0, 0.0, 0.5], 1)   # k=1: the mean quality
    0.5
    >>> expected_best_of_k([1, 1, 0], [1.0, 0.0, 0.5], 3)   # all three: the tie is split evenly
    0.5
    """
    s, q = _as_arrays(rm_scores, quality)
    n = s.size
    k = _check_k(k, n)
    order = np.argsort(s, kind="stable")
    s, q = s[order], q[order]
    values, starts, counts = np.unique(s, return_index=True, return_counts=True)
    total = comb(n, k)
    acc = 0.0
    for start, count in zip(starts.tolist(), counts.tolist(), strict=True):
        ways = comb(start + count, k) - comb(start, k)
        if ways:
            acc += (ways / total) * float(q[start:start + count].mean())
    return float(acc)


def best_of_first_k(
    rm_scores: Sequence[float], quality: Sequence[float], k: int, *, ties: str = "first"
) -> float:
    """Quality of the best-scored sample among the first k, as the reference scripts select it.

    ``ties="first"`` keeps the earliest of tied samples (the reference's ``max``); ``"split"`` averages
    the qualities of the tied top samples.

    >>> best_of_first_k([0.2, 0.7, 0.7], [0.1, 0.4, 0.9], 3)
    0.4
    >>> best_of_first_k([0.2, 0.7, 0.7], [0.1, 0.4, 0.9], 3, ties="split")
    0.65
    """
    s, q = _as_arrays(rm_scores, quality)
    k = _check_k(k, s.size)
    s, q = s[:k], q[:k]
    top = s == s.max()
    if ties == "first":
        return float(q[int(np.argmax(top))])
    if ties == "split":
        return float(q[top].mean())
    raise PRBError(f"ties must be 'first' or 'split', got {ties!r}.")


def oracle_best_of_k(quality: Sequence[float], k: int) -> float:
    """Expected best quality in a random k-subset: the ceiling any RM could reach.

    >>> round(oracle_best_of_k([0.0, 0.5, 1.0], 2), 4)
    0.8333
    """
    return expected_best_of_k(quality, quality, k)


def _sample_index(values: pd.Series) -> pd.Series:
    """``sample_idx`` as int64 (``"10"`` is 10, so "first k" sorts 2 before 10); anything else raises.

    >>> _sample_index(pd.Series(["10", "2", 3.0])).tolist()
    [10, 2, 3]
    """
    num = pd.to_numeric(values, errors="coerce").astype(float).to_numpy()
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(num) | (num < 0) | (num % 1 != 0)
    if bad.any():
        raise PRBError(f"sample_idx must be a non-negative integer; got {values[bad].iloc[0]!r} "
                       f"({int(bad.sum())} such row(s)).")
    return pd.Series(num.astype("int64"), index=values.index, name=values.name)


def check_bon_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Validate the tidy BoN form and return it with the expected dtypes (``sample_idx`` an integer).

    >>> check_bon_frame(pd.DataFrame({"model": "rm", "subset": "s", "id": "q", "sample_idx": ["0", "10"],
    ...     "rm_score": [1, 2], "quality": [0.5, 1.0]}))["sample_idx"].tolist()
    [0, 10]
    """
    missing = [c for c in BON_COLUMNS if c not in frame.columns]
    if missing:
        raise PRBError(f"BoN frame lacks column(s) {', '.join(missing)}.")
    out = frame.copy()
    out["sample_idx"] = _sample_index(out["sample_idx"])
    out["rm_score"] = pd.to_numeric(out["rm_score"], errors="coerce").astype(float)
    out["quality"] = pd.to_numeric(out["quality"], errors="coerce").astype(float)
    dup = out.duplicated(["model", "subset", "id", "sample_idx"])
    if dup.any():
        row = out.loc[dup].iloc[0]
        raise PRBError(
            f"BoN frame has duplicate rows, e.g. model {row['model']} sample {row['subset']}/{row['id']}"
            f"#{row['sample_idx']}."
        )
    return out


def bootstrap_mean_ci(values: Sequence[float], *, level: float = LEVEL, n_boot: int | None = None,
                      seed: int = SEED) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (values resampled with replacement, seeded), by
    :func:`prb_utils.analysis.resampling.bootstrap_ci` (``n_boot=None``: its automatic number of resamples).

    Every resampled mean lies between the smallest and the largest value, so the interval never leaves
    the range of the data (a rubric quality in [0, 1] keeps its interval in [0, 1], where a t interval
    can pass 1). Fewer than two values give (NaN, NaN).

    >>> lo, hi = bootstrap_mean_ci([1.0, 1.0, 1.0, 1.0, 0.2], n_boot=500)
    >>> 0.2 <= lo <= hi <= 1.0
    True
    """
    v = np.asarray(values, dtype=float).ravel()
    check_uncertainty(level, n_boot)
    if v.size < 2:
        return float("nan"), float("nan")
    lo, hi = bootstrap_ci(v, n_boot=n_boot, seed=seed, level=level)
    return float(np.clip(lo, v.min(), v.max())), float(np.clip(hi, v.min(), v.max()))


def _quality_pool(df: pd.DataFrame) -> pd.DataFrame:
    """One quality per sample (subset, id, sample_idx), from every RM's rows that have one.

    The quality does not depend on the RM, so the pool ignores RM scores (an RM's invalid score never
    removes a sample from the baselines); an RM that disagrees on a sample's quality is an error.
    """
    keys = ["subset", "id", "sample_idx"]
    pool = df.loc[np.isfinite(df["quality"]), [*keys, "quality"]]
    spread = pool.groupby(keys, sort=False)["quality"].agg(["min", "max"])
    clash = spread[~np.isclose(spread["min"], spread["max"])]
    if not clash.empty:
        subset, qid, idx = clash.index[0]
        raise PRBError(f"Sample {subset}/{qid}#{idx} has different quality values for different RMs; "
                       "the quality must come from one rubric judgement per sample.")
    return pool.drop_duplicates(keys).sort_values(keys, kind="stable")


def _baseline_rows(pool: pd.DataFrame, ks: Sequence[int], methods: Sequence[str] = ("exact", "first")) -> list[tuple]:
    """The ``oracle`` and ``random`` rows of each method, each under the rule its RMs pick by.

    ``exact``: the best quality of a random k-subset, and one random answer of the N (the mean quality).
    ``first``: the best quality among the first k samples (``sample_idx`` order; the pool is sorted so), and
    one random answer of those k. A first-k pick can beat the exact oracle on a question (the first k are one
    subset, not the average subset), so each panel gets the ceiling of its own rule.
    """
    rows: list[tuple] = []
    for (subset, qid), grp in pool.groupby(["subset", "id"], sort=False):
        q = grp["quality"].to_numpy()
        for k in ks:
            if k > q.size:
                continue
            if "exact" in methods:
                rows.append(("oracle", subset, qid, "exact", k, q.size, oracle_best_of_k(q, k)))
                rows.append(("random", subset, qid, "exact", k, q.size, float(q.mean())))
            if "first" in methods:
                rows.append(("oracle", subset, qid, "first", k, q.size, float(q[:k].max())))
                rows.append(("random", subset, qid, "first", k, q.size, float(q[:k].mean())))
    return rows


def per_question_best_of_k(
    frame: pd.DataFrame,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    methods: Sequence[str] = ("exact", "first"),
    oracle: bool = True,
) -> pd.DataFrame:
    """Per-question best-of-k quality: columns model, subset, id, method, k, n (samples), value.

    ``method`` is ``exact`` (expectation over all k-subsets), ``first`` (the reference: best of the first k
    by integer ``sample_idx``, first wins ties) or, with ``oracle=True``, the rows of model ``oracle`` and
    ``random`` for each method, under that method's rule: ``exact`` the best quality of a random k-subset
    and the mean quality (the k=1 value for every k); ``first`` the best quality among the first k samples
    and their mean. For an RM, samples with a missing score or quality (invalid RM output, judge failure)
    are dropped; the baselines use the whole pool of samples with a quality, whatever any RM scored (so an
    RM that lost one of its first k samples picks among later ones). Questions with fewer than k samples
    have no row for that k.

    >>> frame = pd.DataFrame({"model": "rm", "subset": "s", "id": "q", "sample_idx": [0, 1],
    ...     "rm_score": [1.0, float("nan")], "quality": [0.0, 1.0]})
    >>> per_question_best_of_k(frame, [1], methods=["exact"])[["model", "n", "value"]].values.tolist()
    [['rm', 1, 0.0], ['oracle', 2, 0.5], ['random', 2, 0.5]]
    >>> per_question_best_of_k(frame, [1], methods=["first"])[["model", "method", "value"]].values.tolist()
    [['rm', 'first', 0.0], ['oracle', 'first', 0.0], ['random', 'first', 0.0]]
    """
    df = check_bon_frame(frame)
    for method in methods:
        if method not in ("exact", "first"):
            raise PRBError(f"Unknown best-of-k method {method!r}; use 'exact' or 'first'.")
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise PRBError("ks must be positive integers.")
    pool = _quality_pool(df)
    scored = df[np.isfinite(df["rm_score"]) & np.isfinite(df["quality"])]
    scored = scored.sort_values(["model", "subset", "id", "sample_idx"], kind="stable")
    rows: list[tuple] = []
    for (model, subset, qid), grp in scored.groupby(["model", "subset", "id"], sort=False):
        s = grp["rm_score"].to_numpy()
        q = grp["quality"].to_numpy()
        for k in ks:
            if k > s.size:
                continue
            if "exact" in methods:
                rows.append((model, subset, qid, "exact", k, s.size, expected_best_of_k(s, q, k)))
            if "first" in methods:
                rows.append((model, subset, qid, "first", k, s.size, best_of_first_k(s, q, k)))
    if oracle:
        rows.extend(_baseline_rows(pool, ks, methods))
    return pd.DataFrame(rows, columns=["model", "subset", "id", "method", "k", "n", "value"])


def bon_curves(
    frame: pd.DataFrame,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    methods: Sequence[str] = ("exact", "first"),
    oracle: bool = True,
    by: Sequence[str] = (),
    level: float = LEVEL,
    n_boot: int | None = None,
    seed: int = SEED,
    gain: bool = False,
) -> pd.DataFrame:
    """Best-of-k curves with CIs over questions, per RM (and per ``by`` columns, e.g. ``("subset",)``).

    Returns columns model, *by, method, k, n (questions), mean, ci_low, ci_high, gain. ``gain`` is the mean
    over the same questions of each question's value minus that question's mean quality (one random
    answer), computed per question before averaging, so an RM that lost questions (invalid scores, fewer
    than k samples) is compared with the random pick on its own questions. The interval is a
    percentile bootstrap over questions (:func:`bootstrap_mean_ci`: ``level``, ``n_boot``, ``seed``), so it
    stays within the range of the questions' values (a quality in [0, 1] keeps its interval in [0, 1]).
    ``gain=True`` reports each question's best-of-k quality minus its mean quality (one random sample),
    paired by question: the question-to-question spread cancels, so RMs separate more clearly. With
    ``oracle=True`` each method has its own ``oracle`` and ``random`` rows, under its own rule
    (:func:`per_question_best_of_k`): no RM's ``first`` curve passes the ``first`` oracle.

    >>> frame = pd.DataFrame({"model": "rm", "subset": "s", "id": ["a"] * 3 + ["b"] * 3,
    ...     "sample_idx": [0, 1, 2] * 2, "rm_score": [1, 2, 3, 3, 2, 1],
    ...     "quality": [0.0, 0.5, 1.0, 0.0, 0.5, 1.0]})
    >>> curves = bon_curves(frame, [1, 3], oracle=False, methods=["exact"])
    >>> curves[["k", "n", "mean"]].to_dict("records")
    [{'k': 1, 'n': 2, 'mean': 0.5}, {'k': 3, 'n': 2, 'mean': 0.5}]
    """
    check_uncertainty(level, n_boot)
    per_q = per_question_best_of_k(frame, ks, methods=[*methods, "exact"], oracle=True)
    exact_random = (per_q["model"] == "random") & (per_q["method"] == "exact")  # one random answer of the N
    base = per_q[exact_random][["subset", "id", "k", "value"]].rename(columns={"value": "_base"})
    per_q = per_q[per_q["method"].isin(methods)]
    per_q = per_q.merge(base, on=["subset", "id", "k"], how="left")
    per_q["_gain"] = per_q["value"] - per_q["_base"]
    best = per_q[per_q["model"] == "oracle"][["subset", "id", "k", "method", "value"]].rename(
        columns={"value": "_oracle"})
    per_q = per_q.merge(best, on=["subset", "id", "k", "method"], how="left")
    per_q["_room"] = per_q["_oracle"] - per_q["_base"]   # the pool's headroom on this question
    if gain:
        per_q["value"] = per_q["_gain"]
    if not oracle:
        per_q = per_q[~per_q["model"].isin(["oracle", "random"])]
    by = list(by)
    for col in by:
        if col not in per_q.columns:
            raise PRBError(f"Cannot group BoN curves by {col!r}; use subset.")
    keys = ["model", *by, "method", "k"]
    rows = []
    for key, grp in per_q.groupby(keys, sort=True):
        values = grp["value"].to_numpy(dtype=float)
        lo, hi = bootstrap_mean_ci(values, level=level, n_boot=n_boot, seed=seed)
        rows.append((*key, values.size, float(values.mean()), lo, hi, float(grp["_gain"].mean()),
                     float(grp["_room"].mean())))
    return pd.DataFrame(rows, columns=[*keys, "n", "mean", "ci_low", "ci_high", "gain", "room"])


def bon_metrics(curves: pd.DataFrame, *, method: str = "exact") -> pd.DataFrame:
    """Per-RM downstream metrics from :func:`bon_curves` (one row per RM, index ``model``).

    Columns ``bon@{k}`` (mean best-of-k quality) and ``bon_gain@{k}``: best-of-k minus the mean quality of
    one random sample, per question, then averaged over the RM's questions (the curves' ``gain``; for curves
    without it, such as older files, the difference of the two means when the ``random`` rows are there).
    The ``oracle`` and ``random`` reference rows are left out.
    """
    sub = curves[(curves["method"] == method) & ~curves["model"].isin(["oracle", "random"])]
    if "subset" in curves.columns:
        raise PRBError("bon_metrics needs curves pooled over subsets (call bon_curves without by=).")
    table = sub.pivot_table(index="model", columns="k", values="mean")
    table.columns = [f"bon@{k}" for k in table.columns]
    rand = curves[curves["model"] == "random"].set_index("k")["mean"]
    if "gain" in sub.columns:
        gains = sub.pivot_table(index="model", columns="k", values="gain", dropna=False)
        for k in gains.columns:
            table[f"bon_gain@{k}"] = gains[k]
    elif not rand.empty:
        for col in list(table.columns):
            k = int(col.split("@")[1])
            if k in rand.index:
                table[f"bon_gain@{k}"] = table[col] - float(rand.loc[k])
    table.index.name = "model"
    return table


def headroom(curves: pd.DataFrame, *, k: int | None = None, method: str = "exact") -> pd.DataFrame:
    """How much of the pool's headroom each RM realises at best-of-``k`` (default the largest k).

    The pool's headroom is ``oracle - random`` (what a perfect picker gains over a random answer); an RM's
    ``share`` is ``(rm - random) / (oracle - random)``, both averaged over the questions the RM scored (the
    curves' ``gain`` and ``room``), so an RM that scored some questions only is never compared with the pool's
    headroom elsewhere and its share is at most 1: 1 = as good as the oracle, 0 = no better than chance,
    negative = worse than a random pick; NaN when its questions have no headroom (every answer rated the same).
    Columns model, k, bon, random, oracle, headroom, share (``headroom``: the pool's, over every question).

    >>> curves = pd.DataFrame({"model": ["rm", "oracle", "random"], "method": "exact", "k": 4,
    ...                        "mean": [0.5, 0.75, 0.25]})
    >>> headroom(curves)[["model", "headroom", "share"]].to_dict("records")
    [{'model': 'rm', 'headroom': 0.5, 'share': 0.5}]
    """
    sub = curves[curves["method"] == method]
    k = int(sub["k"].max()) if k is None else int(k)
    at = sub[sub["k"] == k].set_index("model")["mean"]
    if "oracle" not in at.index or "random" not in at.index:
        raise PRBError("headroom needs the oracle and random rows of bon_curves (oracle=True).")
    oracle, rand = float(at["oracle"]), float(at["random"])
    room = oracle - rand
    own = sub[sub["k"] == k].set_index("model")
    rows = []
    for m, v in at.items():
        if m in ("oracle", "random"):
            continue
        if {"gain", "room"} <= set(own.columns) and np.isfinite(own.loc[m, "room"]):
            gain, mine = float(own.loc[m, "gain"]), float(own.loc[m, "room"])   # on the RM's own questions
        else:   # curves without them (older files): the pool's means
            gain, mine = float(v) - rand, room
        rows.append((m, k, float(v), rand, oracle, room, gain / mine if mine > 1e-12 else np.nan))
    return pd.DataFrame(rows, columns=["model", "k", "bon", "random", "oracle", "headroom", "share"])
