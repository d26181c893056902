"""Best-of-N (BoN) selection: exact expected best-of-k quality, the reference "first k", and curves.

The tidy BoN form has one row per (model, subset, id, sample_idx): ``model`` is the RM that scored the
sample, ``rm_score`` its score (higher is better) and ``quality`` the rubric score of the sample in [0, 1]
(from a rubric judge; the same for every RM).

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
from scipy import stats

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


def check_bon_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Validate the tidy BoN form and return it with the expected dtypes."""
    missing = [c for c in BON_COLUMNS if c not in frame.columns]
    if missing:
        raise PRBError(f"BoN frame lacks column(s) {', '.join(missing)}.")
    out = frame.copy()
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


def _mean_ci(values: np.ndarray, *, ci: str, level: float, n_boot: int, seed: int) -> tuple[float, float]:
    n = values.size
    if n < 2:
        return float("nan"), float("nan")
    mean = float(values.mean())
    if ci == "t":
        se = float(values.std(ddof=1)) / np.sqrt(n)
        if se == 0:
            return mean, mean
        half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
        return mean - half, mean + half
    if ci == "bootstrap":
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, n, size=(n_boot, n))
        boots = values[idx].mean(axis=1)
        lo, hi = np.quantile(boots, [0.5 - level / 2, 0.5 + level / 2])
        return float(lo), float(hi)
    raise PRBError(f"ci must be 't' or 'bootstrap', got {ci!r}.")


def per_question_best_of_k(
    frame: pd.DataFrame,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    methods: Sequence[str] = ("exact", "first"),
    oracle: bool = True,
) -> pd.DataFrame:
    """Per-question best-of-k quality: columns model, subset, id, method, k, n_samples, value.

    ``method`` is ``exact`` (expectation over all k-subsets), ``first`` (the reference: best of the first k
    by ``sample_idx``, first wins ties) or, with ``oracle=True``, the rows of model ``oracle`` (best quality
    of a random k-subset; method ``exact``) and ``random`` (mean quality, the k=1 value for every k).
    Samples with a missing score or quality (invalid RM output, judge failure) are dropped first;
    questions with fewer than k samples have no row for that k.
    """
    df = check_bon_frame(frame)
    df = df[np.isfinite(df["rm_score"]) & np.isfinite(df["quality"])]
    for method in methods:
        if method not in ("exact", "first"):
            raise PRBError(f"Unknown best-of-k method {method!r}; use 'exact' or 'first'.")
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise PRBError("ks must be positive integers.")
    rows: list[tuple] = []
    df = df.sort_values(["model", "subset", "id", "sample_idx"], kind="stable")
    for (model, subset, qid), grp in df.groupby(["model", "subset", "id"], sort=False):
        s = grp["rm_score"].to_numpy()
        q = grp["quality"].to_numpy()
        for k in ks:
            if k > s.size:
                continue
            if "exact" in methods:
                rows.append((model, subset, qid, "exact", k, s.size, expected_best_of_k(s, q, k)))
            if "first" in methods:
                rows.append((model, subset, qid, "first", k, s.size, best_of_first_k(s, q, k)))
    if oracle and not df.empty:
        # quality does not depend on the RM: take it once per question (from the first model)
        first_model = df["model"].iloc[0]
        base = df[df["model"] == first_model]
        for (subset, qid), grp in base.groupby(["subset", "id"], sort=False):
            q = grp["quality"].to_numpy()
            for k in ks:
                if k > q.size:
                    continue
                rows.append(("oracle", subset, qid, "exact", k, q.size, oracle_best_of_k(q, k)))
                rows.append(("random", subset, qid, "exact", k, q.size, float(q.mean())))
    return pd.DataFrame(rows, columns=["model", "subset", "id", "method", "k", "n_samples", "value"])


def bon_curves(
    frame: pd.DataFrame,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    methods: Sequence[str] = ("exact", "first"),
    oracle: bool = True,
    by: Sequence[str] = (),
    ci: str = "t",
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
    gain: bool = False,
) -> pd.DataFrame:
    """Best-of-k curves with CIs over questions, per RM (and per ``by`` columns, e.g. ``("subset",)``).

    Returns columns model, *by, method, k, n_questions, mean, ci_low, ci_high. ``ci="t"`` is a t interval
    over the questions' values; ``ci="bootstrap"`` a percentile bootstrap over questions with ``seed``.
    ``gain=True`` reports each question's best-of-k quality minus its mean quality (one random sample),
    paired by question: the question-to-question spread cancels, so RMs separate more clearly.

    >>> frame = pd.DataFrame({"model": "rm", "subset": "s", "id": ["a"] * 3 + ["b"] * 3,
    ...     "sample_idx": [0, 1, 2] * 2, "rm_score": [1, 2, 3, 3, 2, 1],
    ...     "quality": [0.0, 0.5, 1.0, 0.0, 0.5, 1.0]})
    >>> curves = bon_curves(frame, [1, 3], oracle=False, methods=["exact"])
    >>> curves[["k", "n_questions", "mean"]].to_dict("records")
    [{'k': 1, 'n_questions': 2, 'mean': 0.5}, {'k': 3, 'n_questions': 2, 'mean': 0.5}]
    """
    per_q = per_question_best_of_k(frame, ks, methods=methods, oracle=True if gain else oracle)
    if gain:
        base = per_q[per_q["model"] == "random"][["subset", "id", "k", "value"]].rename(columns={"value": "_base"})
        per_q = per_q.merge(base, on=["subset", "id", "k"], how="inner")
        per_q["value"] = per_q["value"] - per_q["_base"]
        per_q = per_q.drop(columns="_base")
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
        lo, hi = _mean_ci(values, ci=ci, level=level, n_boot=n_boot, seed=seed)
        rows.append((*key, values.size, float(values.mean()), lo, hi))
    return pd.DataFrame(rows, columns=[*keys, "n_questions", "mean", "ci_low", "ci_high"])


def bon_metrics(curves: pd.DataFrame, *, method: str = "exact") -> pd.DataFrame:
    """Per-RM downstream metrics from :func:`bon_curves` (one row per RM, index ``model``).

    Columns ``bon@{k}`` (mean best-of-k quality) and, when the ``random`` baseline is present,
    ``bon_gain@{k}`` (best-of-k minus the mean quality of one random sample). The ``oracle`` and
    ``random`` reference rows are left out.
    """
    sub = curves[(curves["method"] == method) & ~curves["model"].isin(["oracle", "random"])]
    if "subset" in curves.columns:
        raise PRBError("bon_metrics needs curves pooled over subsets (call bon_curves without by=).")
    table = sub.pivot_table(index="model", columns="k", values="mean")
    table.columns = [f"bon@{k}" for k in table.columns]
    rand = curves[curves["model"] == "random"].set_index("k")["mean"]
    if not rand.empty:
        for col in list(table.columns):
            k = int(col.split("@")[1])
            if k in rand.index:
                table[f"bon_gain@{k}"] = table[col] - float(rand.loc[k])
    table.index.name = "model"
    return table
