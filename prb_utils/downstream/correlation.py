"""Rank agreement between a benchmark's RM ranking and a downstream RM ranking.

Both inputs are per-RM numbers where higher is better (benchmark accuracy; BoN or PPO quality).

Example:
    >>> r = rank_agreement([0.7, 0.6, 0.5], [0.9, 0.4, 0.5])
    >>> round(r["spearman"], 3), round(r["kendall"], 3), round(r["weighted_tau"], 4)
    (0.5, 0.333, 0.5455)
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from prb_utils.errors import PRBError

METRICS = ("spearman", "kendall", "weighted_tau", "pearson", "ndcg", "rbo")
RBO_P = 0.9


def _pair(benchmark_scores: Sequence[float], downstream_scores: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(benchmark_scores, dtype=float).ravel()
    y = np.asarray(downstream_scores, dtype=float).ravel()
    if x.shape != y.shape:
        raise PRBError(f"Benchmark and downstream scores differ in length ({x.size} vs {y.size}).")
    if x.size < 2:
        raise PRBError("Rank agreement needs at least two RMs.")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise PRBError("Rank agreement needs finite scores for every RM.")
    return x, y


def _check_top(top: int | None, n: int) -> int:
    if top is None:
        return n
    top = int(top)
    if top < 1:
        raise PRBError(f"top must be a positive integer, got {top}.")
    return min(top, n)


def ndcg(benchmark_scores: Sequence[float], downstream_scores: Sequence[float], *, top: int | None = None) -> float:
    """NDCG@top of the benchmark's ranking, with the downstream scores as graded relevance (linear gain).

    DCG = sum_i gain_i / log2(i + 1) over positions i = 1..top of the ranking by benchmark score
    (descending); ties in the benchmark are tie-averaged (each tied position gets the group's mean gain,
    McSherry and Najork 2008), so the value does not depend on input order. Divided by the DCG of the
    ranking by the downstream scores. Gains must be non-negative.

    >>> round(ndcg([3, 2, 1], [1, 2, 3]), 4)   # (1 + 2/log2(3) + 3/2) / (3 + 2/log2(3) + 1/2)
    0.79
    """
    x, y = _pair(benchmark_scores, downstream_scores)
    if (y < 0).any():
        raise PRBError("NDCG needs non-negative downstream scores (they are the gains); rescale them first.")
    n = x.size
    top = _check_top(top, n)
    discounts = 1.0 / np.log2(np.arange(2, n + 2))
    discounts[top:] = 0.0
    gains = np.empty(n)
    order = np.argsort(-x, kind="stable")
    xs, ys = x[order], y[order]
    start = 0
    while start < n:
        end = start + 1
        while end < n and xs[end] == xs[start]:
            end += 1
        gains[start:end] = ys[start:end].mean()
        start = end
    ideal = np.sort(y)[::-1]
    idcg = float((ideal * discounts).sum())
    if idcg == 0:
        return float("nan")
    return float((gains * discounts).sum() / idcg)


def _inclusion(scores: np.ndarray, depths: np.ndarray) -> np.ndarray:
    """P(item j is among the first d of the ranking by score), ties broken uniformly at random: (depths, items)."""
    above = (scores[None, :] > scores[:, None]).sum(axis=1)
    tied = (scores[None, :] == scores[:, None]).sum(axis=1)
    return np.clip(depths[:, None] - above[None, :], 0, tied[None, :]) / tied[None, :]


def rbo(benchmark_scores: Sequence[float], downstream_scores: Sequence[float], *, p: float = RBO_P,
        top: int | None = None) -> float:
    """Extrapolated rank-biased overlap (Webber, Moffat and Zobel 2010, eq. 32) of the two rankings.

    RBO_ext = X_t/t * p**t + (1-p)/p * sum_{d=1..t} X_d/d * p**d, where X_d is the overlap of the two
    top-d sets and t = ``top`` (default: all RMs). ``p`` = 0.9 weights the top ranks heavily (the first 10
    ranks carry about 86% of the weight). Tied scores are handled exactly in expectation: X_d is the
    expected overlap when each ranking's ties are broken uniformly at random. Identical rankings give 1.

    >>> rbo([3, 2, 1], [3, 2, 1])
    1.0
    >>> round(rbo([3, 2, 1], [1, 2, 3]), 4)   # X = 0, 1, 3 at d = 1, 2, 3
    0.855
    """
    x, y = _pair(benchmark_scores, downstream_scores)
    if not 0 < p < 1:
        raise PRBError(f"RBO persistence p must be in (0, 1), got {p}.")
    t = _check_top(top, x.size)
    depths = np.arange(1, t + 1)
    overlap = (_inclusion(x, depths) * _inclusion(y, depths)).sum(axis=1)
    total = float((overlap / depths * p**depths).sum())
    value = float(overlap[-1]) / t * p**t + (1 - p) / p * total
    return float(min(value, 1.0)) if np.isclose(value, 1.0) else float(value)


def _nan_if_constant(x: np.ndarray, y: np.ndarray, fn) -> float:
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(fn(x, y))


def rank_agreement(benchmark_scores: Sequence[float], downstream_scores: Sequence[float], *,
                   top: int | None = None) -> dict[str, float]:
    """Agreement of the two RM rankings: Spearman, Kendall (tau-b), weighted Kendall, Pearson, NDCG, RBO.

    ``weighted_tau`` is ``scipy.stats.weightedtau`` with its defaults (hyperbolic weights 1/(r+1) on the
    decreasing ranks, averaged over the rankings by each input), so disagreements among the top RMs weigh
    most. ``ndcg`` ranks the RMs by benchmark score and uses the downstream scores as gains
    (:func:`ndcg`); ``rbo`` is extrapolated RBO with p=0.9 (:func:`rbo`). ``top`` is the cutoff of NDCG and
    RBO; the correlation coefficients always use every RM. A coefficient undefined for constant input
    is NaN, and so is ``ndcg`` when a downstream score is negative (gains must be non-negative).

    >>> r = rank_agreement([1, 2, 3, 4], [10, 20, 30, 40])
    >>> [round(r[m], 3) for m in ("spearman", "kendall", "weighted_tau", "pearson", "ndcg", "rbo")]
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    """
    x, y = _pair(benchmark_scores, downstream_scores)
    return {
        "spearman": _nan_if_constant(x, y, lambda a, b: stats.spearmanr(a, b).statistic),
        "kendall": _nan_if_constant(x, y, lambda a, b: stats.kendalltau(a, b).statistic),
        "weighted_tau": _nan_if_constant(x, y, lambda a, b: stats.weightedtau(a, b).statistic),
        "pearson": _nan_if_constant(x, y, lambda a, b: stats.pearsonr(a, b).statistic),
        "ndcg": ndcg(x, y, top=top) if (y >= 0).all() else float("nan"),
        "rbo": rbo(x, y, top=top),
    }


def _names(benchmark_scores, downstream_scores, names) -> list[str]:
    if names is not None:
        return [str(n) for n in names]
    for obj in (benchmark_scores, downstream_scores):
        if isinstance(obj, pd.Series):
            return [str(i) for i in obj.index]
    return [str(i) for i in range(len(benchmark_scores))]


def rank_agreement_ci(
    benchmark_scores: Sequence[float],
    downstream_scores: Sequence[float],
    *,
    top: int | None = None,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Each coefficient with a percentile bootstrap CI over RMs (RMs resampled with replacement, seeded).

    Returns columns metric, estimate, ci_low, ci_high, n_models, n_boot_valid (resamples where the
    coefficient was defined; a resample of one repeated RM is not).

    >>> ci = rank_agreement_ci([1, 2, 3, 4, 5], [1, 3, 2, 5, 4], n_boot=200)
    >>> list(ci["metric"]) == list(METRICS)
    True
    """
    x, y = _pair(benchmark_scores, downstream_scores)
    est = rank_agreement(x, y, top=top)
    rng = np.random.default_rng(seed)
    boots = {m: [] for m in METRICS}
    n = x.size
    for _ in range(n_boot):
        idx = rng.integers(0, n, size=n)
        if np.unique(idx).size < 2:
            continue
        for m, v in rank_agreement(x[idx], y[idx], top=top).items():
            boots[m].append(v)
    rows = []
    for m in METRICS:
        b = np.asarray(boots[m], dtype=float)
        b = b[np.isfinite(b)]
        lo, hi = (np.quantile(b, [0.5 - level / 2, 0.5 + level / 2]) if b.size else (np.nan, np.nan))
        rows.append((m, est[m], float(lo), float(hi), n, int(b.size)))
    return pd.DataFrame(rows, columns=["metric", "estimate", "ci_low", "ci_high", "n_models", "n_boot_valid"])


def leave_one_out(
    benchmark_scores: Sequence[float],
    downstream_scores: Sequence[float],
    *,
    names: Sequence[str] | None = None,
    top: int | None = None,
) -> pd.DataFrame:
    """Sensitivity to single RMs: every coefficient recomputed with each RM left out.

    Returns columns left_out, metric, value, full (with every RM), delta (value - full). Names come from
    ``names``, else the index of a Series input, else positions.

    >>> loo = leave_one_out([1, 2, 3, 4], [1, 2, 4, 3], names=list("abcd"))
    >>> loo[(loo.metric == "spearman")].set_index("left_out")["value"].round(2).to_dict()
    {'a': 0.5, 'b': 0.5, 'c': 1.0, 'd': 1.0}
    """
    x, y = _pair(benchmark_scores, downstream_scores)
    labels = _names(benchmark_scores, downstream_scores, names)
    if len(labels) != x.size:
        raise PRBError(f"names has {len(labels)} entries for {x.size} RMs.")
    if x.size < 3:
        raise PRBError("Leave-one-RM-out needs at least three RMs.")
    full = rank_agreement(x, y, top=top)
    rows = []
    keep = np.ones(x.size, dtype=bool)
    for i, label in enumerate(labels):
        keep[:] = True
        keep[i] = False
        for m, v in rank_agreement(x[keep], y[keep], top=top).items():
            rows.append((label, m, v, full[m], v - full[m]))
    return pd.DataFrame(rows, columns=["left_out", "metric", "value", "full", "delta"])


def _model_frame(frame: pd.DataFrame, what: str, aliases: Mapping[str, str]) -> pd.DataFrame:
    df = frame.copy()
    if "model" in df.columns:
        df = df.set_index("model")
    df.index = [str(aliases.get(str(m), str(m))) for m in df.index]
    if df.index.duplicated().any():
        dup = df.index[df.index.duplicated()][0]
        raise PRBError(f"Model {dup!r} appears twice in the {what} table (after applying aliases).")
    df = df.select_dtypes(include="number")
    if df.empty:
        raise PRBError(f"The {what} table has no numeric columns.")
    return df


def compare_benchmarks(
    benchmarks: pd.DataFrame,
    downstream: pd.DataFrame,
    *,
    aliases: Mapping[str, str] | None = None,
    top: int | None = None,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """How well each benchmark's RM ranking agrees with each downstream metric, side by side.

    ``benchmarks``: one row per model (index or a ``model`` column), one numeric column per benchmark
    (e.g. ``prb``, ``rewardbench``, ``rm_bench``). ``downstream``: one row per model, one column per
    downstream metric (e.g. ``bon@8``, ``ppo``). ``aliases`` maps a model name as written in either table
    to the canonical name, so "Skywork/Skywork-Reward-V2-Llama-3.1-8B" and "skywork-8b" can join; names
    are otherwise matched exactly. Models missing from either side are left out with a warning; each
    (benchmark, metric) pair uses the models with values in both. Returns the tidy columns benchmark,
    downstream, metric, estimate, ci_low, ci_high, n_models, n_boot_valid.
    """
    aliases = dict(aliases or {})
    bench = _model_frame(benchmarks, "benchmark", aliases)
    down = _model_frame(downstream, "downstream", aliases)
    common = bench.index.intersection(down.index)
    unmatched = sorted(set(bench.index).symmetric_difference(down.index))
    if unmatched:
        warnings.warn(
            f"Models without a match in both tables are left out: {', '.join(unmatched)}; "
            "add them to aliases if they are the same RM.",
            stacklevel=2,
        )
    if common.size < 3:
        raise PRBError(f"Only {common.size} model(s) appear in both tables; at least 3 are needed.")
    parts = []
    for b in bench.columns:
        for d in down.columns:
            pair = pd.concat([bench.loc[common, b], down.loc[common, d]], axis=1).dropna()
            if len(pair) < 3:
                continue
            ci = rank_agreement_ci(pair.iloc[:, 0], pair.iloc[:, 1], top=top, n_boot=n_boot, level=level,
                                   seed=seed)
            ci.insert(0, "downstream", d)
            ci.insert(0, "benchmark", b)
            parts.append(ci)
    if not parts:
        raise PRBError("No benchmark/downstream pair has values for at least 3 common models.")
    return pd.concat(parts, ignore_index=True)


def downstream_table(*, bon: pd.DataFrame | None = None, ppo: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per RM (index ``model``), one column per downstream metric.

    ``bon``: the output of :func:`prb_utils.downstream.bon.bon_metrics`. ``ppo``: the tidy PPO frame of
    :func:`prb_utils.downstream.reference_files.read_ppo_csv` (columns rm, subset, score, n); it becomes column ``ppo``, the
    mean over subsets weighted by ``n`` where given.
    """
    parts = []
    if bon is not None:
        parts.append(bon)
    if ppo is not None:
        df = ppo.copy()
        w = df["n"].fillna(1.0) if "n" in df.columns else pd.Series(1.0, index=df.index)
        df["_w"] = w.astype(float)
        df["_ws"] = df["_w"] * df["score"].astype(float)
        grouped = df.groupby("rm")[["_ws", "_w"]].sum()
        parts.append((grouped["_ws"] / grouped["_w"]).rename("ppo").to_frame())
    if not parts:
        raise PRBError("downstream_table needs bon= or ppo=.")
    out = pd.concat(parts, axis=1)
    out.index.name = "model"
    return out
