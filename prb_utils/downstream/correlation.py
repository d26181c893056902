"""Rank agreement between a benchmark's RM ranking and a downstream RM ranking.

Both inputs are per-RM numbers where higher is better (benchmark accuracy; BoN or PPO quality). With a
handful of RMs every coefficient is noisy and some are high by construction (NDCG and RBO of a *random*
ranking of 8 RMs are far above 0), so :func:`rank_agreement_ci` reports each coefficient with a bootstrap
interval over RMs, its value expected by chance and a permutation p-value, and
:func:`correlation_difference` compares two benchmarks on the same RMs with a paired bootstrap.

Uncertainty keywords are the same on every call: ``level`` (0.95), ``n_boot`` (bootstrap resamples) and
``seed``.

Example:
    >>> r = rank_agreement([0.7, 0.6, 0.5], [0.9, 0.4, 0.5])
    >>> round(r["spearman"], 3), round(r["kendall"], 3), round(r["weighted_tau"], 4)
    (0.5, 0.333, 0.5455)
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from prb_utils.analysis.leaderboard import ALPHA
from prb_utils.analysis.resampling import (
    LEVEL,
    SEED,
    check_uncertainty,
    default_n_boot,
    percentile_interval,
    resample_indices,
)
from prb_utils.errors import PRBError
from prb_utils.formatting import P_FLOOR, P_VALUE, PROPORTION, format_interval, format_value
from prb_utils.schema import canonical_spec

RANKING_VERDICTS = ("can rank", "cannot rank")
RBO_P = 0.9
EXACT_PERMUTATIONS_MAX_N = 8   # up to 8! = 40,320 permutations are enumerated; larger n is Monte Carlo
N_PERM = 10_000                # Monte Carlo permutations beyond that
_TOL = 1e-9                    # ties between a permuted and the observed coefficient count as "as large"
_CELLS = 2**20                 # rows x n x n cells per vectorized chunk (memory bound)


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
    ranking by the downstream scores. Gains must be non-negative; :func:`rank_agreement` passes the
    downstream scores min-shifted (score - min), so the worst RM has gain 0.

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


def no_ranking(benchmark_scores: Sequence[float], downstream_scores: Sequence[float], *,
               benchmark: str = "benchmark score", downstream: str = "downstream score") -> str | None:
    """The sentence to show instead of rank agreement when a side gives every RM the same value (then no
    coefficient is defined: there is no ranking to agree with), or None when both sides vary.

    >>> no_ranking([0.6, 0.5, 0.7], [0.5, 0.5, 0.5], downstream="bon@4")
    'Every RM has the same bon@4 (0.5): there is no ranking to agree with, so every coefficient is n/a.'
    >>> no_ranking([0.6, 0.5, 0.7], [0.1, 0.5, 0.3]) is None
    True
    """
    for values, name in ((benchmark_scores, benchmark), (downstream_scores, downstream)):
        v = np.asarray(values, dtype=float)
        if v.size and np.ptp(v) == 0:
            return (f"Every RM has the same {name} ({float(v[0]):.3g}): there is no ranking to agree with, so every "
                    "coefficient is n/a.")
    return None


def join_by_spec(benchmark: pd.Series, downstream: pd.Series, *, specs: Mapping[str, str] | None = None,
                 benchmark_name: str = "benchmark score", downstream_name: str = "downstream score",
                 excluded: Mapping[str, str] | None = None) -> tuple[pd.DataFrame, str]:
    """The RMs of both sides, matched by model spec, and one sentence naming each RM left out and why.

    ``benchmark`` and ``downstream``: one value per RM, indexed by name; ``specs`` maps a benchmark index
    label (e.g. a job label such as ``length [seed=1]``) to its model spec. Both sides are matched on the
    canonical spec (:func:`prb_utils.schema.canonical_spec`). A spec with several benchmark rows (several
    jobs under one condition) is left out, as is a spec on one side only or without a value. ``excluded`` maps
    benchmark index labels that get no rank (e.g. a position-locked judge, by the rule of
    :func:`prb_utils.analysis.difficulty.counted_rms`) to the reason: they are left out before the match,
    the reason said, and their spec on the downstream side goes with them. Returns a frame indexed by spec with
    the columns ``benchmark.name`` and ``downstream.name`` (RMs sorted), and the sentence ("" when nothing was
    left out).

    >>> joined, note = join_by_spec(pd.Series({"a": 0.6, "b": 0.7, "c [seed=1]": 0.5, "c [seed=2]": 0.4},
    ...     name="prb"), pd.Series({"a": 1.0, "B": 2.0, "d": 3.0}, name="bon"),
    ...     specs={"c [seed=1]": "c", "c [seed=2]": "c"}, downstream_name="BoN results")
    >>> joined.index.tolist()
    ['a', 'b']
    >>> note
    'Left out: c (2 jobs: c [seed=1], c [seed=2]; name one with models=), d (no benchmark score).'
    >>> join_by_spec(pd.Series({"a": 0.6, "b": 0.7}, name="prb"), pd.Series({"a": 1.0, "b": 2.0}, name="bon"),
    ...              excluded={"b": "position-locked judge"})[1]
    'Left out: b (position-locked judge).'
    """
    specs = {} if specs is None else dict(specs)
    excluded = {str(label): str(why) for label, why in (excluded or {}).items()}
    reasons: dict[str, str] = {}
    unranked = [str(m) in excluded for m in benchmark.index]
    for label in benchmark.index[unranked]:
        reasons[str(label)] = excluded[str(label)]
    gone = {canonical_spec(str(specs.get(str(m), m))) for m in benchmark.index[unranked]}
    benchmark = benchmark[[not u for u in unranked]]
    labels = pd.Series([canonical_spec(str(specs.get(str(m), m))) for m in benchmark.index], index=benchmark.index)
    for spec, group in labels.groupby(labels, sort=True):
        if len(group) > 1:
            reasons[spec] = f"{len(group)} jobs: {', '.join(map(str, group.index))}; name one with models="
    bench = pd.Series(benchmark.to_numpy(dtype=float), index=labels.to_numpy()).loc[lambda x: ~x.index.isin(reasons)]
    down_index = [canonical_spec(str(m)) for m in downstream.index]
    if len(set(down_index)) < len(down_index):
        dup = pd.Index(down_index)[pd.Index(down_index).duplicated()][0]
        raise PRBError(f"The {downstream_name} table names the RM {dup!r} twice.")
    down = pd.Series(downstream.to_numpy(dtype=float), index=down_index)
    for spec in bench.index.difference(down.index):
        reasons[spec] = f"no {downstream_name}"
    for spec in down.index.difference(bench.index).difference([*reasons, *gone]):
        reasons[spec] = f"no {benchmark_name}"
    common = sorted(bench.index.intersection(down.index))
    for spec in common:
        if not (math.isfinite(bench[spec]) and math.isfinite(down[spec])):
            reasons[spec] = "no value"
    keep = [spec for spec in common if spec not in reasons]
    joined = pd.DataFrame({benchmark.name or "benchmark": bench.loc[keep], downstream.name or "downstream":
                           down.loc[keep]}, index=pd.Index(keep, name="model"))
    note = ("Left out: " + ", ".join(f"{spec} ({why})" for spec, why in sorted(reasons.items())) + ".") if reasons else ""
    return joined, note


#: The fewest RMs whose rankings a rank agreement compares.
MIN_RMS = 3


@dataclass(frozen=True)
class Agreement:
    """A benchmark against a downstream outcome over the RMs both name (:func:`agreement_of`): the joined values
    (indexed by model spec), who was left out and why (``dropped``, "" for nobody), why no ranking can be read
    when a side is flat (``flat``), and the coefficients when there are at least :data:`MIN_RMS` RMs and both
    sides vary (``table``, :func:`compare_benchmarks`; None otherwise)."""

    joined: pd.DataFrame
    dropped: str
    flat: str | None
    table: pd.DataFrame | None

    @property
    def rms(self) -> list[str]:
        """The RMs both sides have, by model spec."""
        return [str(m) for m in self.joined.index]

    @property
    def too_few(self) -> bool:
        return len(self.joined) < MIN_RMS


def agreement_of(benchmark: pd.Series, downstream: pd.Series, *, specs: Mapping[str, str] | None = None,
                 benchmark_name: str = "benchmark score", downstream_name: str = "downstream score",
                 benchmark_label: str = "PRB accuracy", downstream_label: str | None = None,
                 n_boot: int | None = None, excluded: Mapping[str, str] | None = None) -> Agreement:
    """The RMs of both sides matched by model spec (:func:`join_by_spec`; ``excluded``: the benchmark's RMs that
    get no rank, each with its reason), and their rank agreement (:func:`compare_benchmarks`) when there are at
    least :data:`MIN_RMS` of them and both sides vary (:func:`no_ranking` words why not, with ``benchmark_label``
    and ``downstream_label``).

    >>> found = agreement_of(pd.Series({"a": 0.6, "b": 0.7}, name="prb"), pd.Series({"a": 1.0, "b": 2.0}, name="bon"))
    >>> found.rms, found.too_few, found.table is None
    (['a', 'b'], True, True)
    """
    joined, dropped = join_by_spec(benchmark, downstream, specs=specs, benchmark_name=benchmark_name,
                                   downstream_name=downstream_name, excluded=excluded)
    if len(joined) < MIN_RMS:
        return Agreement(joined, dropped, None, None)
    first, second = joined.columns
    flat = no_ranking(joined[first], joined[second], benchmark=benchmark_label,
                      downstream=downstream_label or downstream_name)
    if flat:
        return Agreement(joined, dropped, flat, None)
    return Agreement(joined, dropped, None, compare_benchmarks(joined[[first]], joined[[second]], n_boot=n_boot))


def rank_agreement(benchmark_scores: Sequence[float], downstream_scores: Sequence[float], *,
                   top: int | None = None) -> dict[str, float]:
    """Agreement of the two RM rankings: Spearman, Kendall (tau-b), weighted Kendall, Pearson, NDCG, RBO.

    ``weighted_tau`` is ``scipy.stats.weightedtau`` with its defaults (hyperbolic weights 1/(r+1) on the
    decreasing ranks, averaged over the rankings by each input), so disagreements among the top RMs weigh
    most. ``ndcg`` ranks the RMs by benchmark score and uses the downstream scores as gains, min-shifted
    to be non-negative (gain = score - min score, so the worst RM adds nothing and a constant shift of
    the downstream scores changes nothing; :func:`ndcg`); ``rbo`` is extrapolated RBO with p=0.9
    (:func:`rbo`). ``top`` is the cutoff of NDCG and RBO; the correlation coefficients always use every
    RM. When either side gives every RM the same value there is no ranking, and every coefficient (NDCG
    and RBO too) is NaN (:func:`no_ranking` says why). Even a random ranking scores well above 0 on NDCG and
    RBO: read them against the ``chance`` column of :func:`rank_agreement_ci`.

    >>> r = rank_agreement([0.6, 0.5, 0.4, 0.7, 0.3], [0.5] * 5)
    >>> sorted(m for m, v in r.items() if not math.isnan(v))
    []

    >>> round(rank_agreement([1, 2, 3], [-1.0, 0.0, 2.0])["ndcg"], 4)   # gains 0, 1, 3
    1.0

    >>> r = rank_agreement([1, 2, 3, 4], [10, 20, 30, 40])
    >>> [round(r[m], 3) for m in ("spearman", "kendall", "weighted_tau", "pearson", "ndcg", "rbo")]
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    """
    x, y = _pair(benchmark_scores, downstream_scores)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return dict.fromkeys(coefficient_names(), math.nan)
    return {name: coefficient.one(x, y, top) for name, coefficient in COEFFICIENTS.items()}




# ------------------------------------------------------------------- the coefficients, vectorized over rows
# Each helper takes (rows, n) arrays: row r pairs benchmark scores x[r] with downstream scores y[r]. They
# reproduce rank_agreement (scipy's coefficients) for many resamples or permutations at once; a test holds
# them to scipy on inputs with ties.


def _above_tied(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per entry of each row: how many entries of its row are greater, and how many equal (itself included)."""
    above = (v[:, None, :] > v[:, :, None]).sum(axis=2)
    tied = (v[:, None, :] == v[:, :, None]).sum(axis=2)
    return above, tied


def _constant(v: np.ndarray) -> np.ndarray:
    return np.ptp(v, axis=1) == 0


def _pearson_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    a = x - x.mean(axis=1, keepdims=True)
    b = y - y.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (a * b).sum(axis=1) / np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    r[_constant(x) | _constant(y)] = np.nan
    return np.clip(r, -1.0, 1.0)


def _midranks(v: np.ndarray) -> np.ndarray:
    above, tied = _above_tied(v)
    return v.shape[1] - above - (tied - 1) / 2.0


def _lexrank(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """0-based rank by decreasing (a, b), remaining ties: the later entry first (scipy's reversed lexsort)."""
    n = a.shape[1]
    ai, aj, bi, bj = a[:, :, None], a[:, None, :], b[:, :, None], b[:, None, :]
    later = np.arange(n)[None, :] > np.arange(n)[:, None]
    before = (aj > ai) | ((aj == ai) & ((bj > bi) | ((bj == bi) & later)))
    return before.sum(axis=2)


def _tau_rows(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """Kendall's tau-b with pair weights ``weights`` (rows, n, n); None = unweighted."""
    sx = np.sign(x[:, None, :] - x[:, :, None])
    sy = np.sign(y[:, None, :] - y[:, :, None])
    w = 1.0 if weights is None else weights
    num = (w * sx * sy).sum(axis=(1, 2))
    den = np.sqrt((w * (sx != 0)).sum(axis=(1, 2)) * (w * (sy != 0)).sum(axis=(1, 2)))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = num / den
    tau[den == 0] = np.nan
    return np.clip(tau, -1.0, 1.0)


def _weighted_tau_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``scipy.stats.weightedtau`` defaults: additive hyperbolic weights 1/(r+1), averaged over both rankings."""
    taus = []
    for a, b in ((x, y), (y, x)):
        w = 1.0 / (1.0 + _lexrank(a, b))
        taus.append(_tau_rows(x, y, w[:, :, None] + w[:, None, :]))
    return (taus[0] + taus[1]) / 2.0


def _ndcg_rows(x: np.ndarray, gains: np.ndarray, top: int | None) -> np.ndarray:
    """:func:`ndcg` per row; tie-averaged gains equal tie-averaged discounts."""
    n = x.shape[1]
    discounts = 1.0 / np.log2(np.arange(2, n + 2))
    discounts[_check_top(top, n):] = 0.0
    cum = np.concatenate([[0.0], np.cumsum(discounts)])
    above, tied = _above_tied(x)
    dcg = ((cum[above + tied] - cum[above]) / tied * gains).sum(axis=1)
    idcg = (-np.sort(-gains, axis=1) * discounts).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = dcg / idcg
    value[idcg == 0] = np.nan
    return value


def _inclusion_rows(v: np.ndarray, depths: np.ndarray) -> np.ndarray:
    above, tied = _above_tied(v)
    return np.clip(depths[None, :, None] - above[:, None, :], 0, tied[:, None, :]) / tied[:, None, :]


def _rbo_rows(x: np.ndarray, y: np.ndarray, top: int | None, p: float = RBO_P) -> np.ndarray:
    t = _check_top(top, x.shape[1])
    depths = np.arange(1, t + 1)
    overlap = (_inclusion_rows(x, depths) * _inclusion_rows(y, depths)).sum(axis=2)
    value = overlap[:, -1] / t * p**t + (1 - p) / p * (overlap / depths * p**depths).sum(axis=1)
    return np.where(np.isclose(value, 1.0), np.minimum(value, 1.0), value)


@dataclass(frozen=True)
class Coefficient:
    """One rank-agreement coefficient: its name, its value on one pair of score lists (``one``: scipy's where scipy
    has it), the same for many rows at once (``rows``, held to ``one`` by a test), whether its mean over every
    permutation of one ranking is exactly 0 (``centred``), and whether it compares rankings (``ranking``; Pearson
    compares the values). A new coefficient is one record here and its test."""

    name: str
    one: Callable[[np.ndarray, np.ndarray, int | None], float]
    rows: Callable[[np.ndarray, np.ndarray, int | None], np.ndarray]
    centred: bool = False
    ranking: bool = True


def _scipy(name: str) -> Callable[[np.ndarray, np.ndarray, int | None], float]:
    function = getattr(stats, name)
    return lambda x, y, top: _nan_if_constant(x, y, lambda a, b: function(a, b).statistic)


#: Every coefficient of :func:`rank_agreement`, in its order.
COEFFICIENTS: dict[str, Coefficient] = {c.name: c for c in (
    Coefficient("spearman", _scipy("spearmanr"), lambda x, y, top: _pearson_rows(_midranks(x), _midranks(y)),
                centred=True),
    Coefficient("kendall", _scipy("kendalltau"), lambda x, y, top: _tau_rows(x, y, None), centred=True),
    Coefficient("weighted_tau", _scipy("weightedtau"), lambda x, y, top: _weighted_tau_rows(x, y)),
    Coefficient("pearson", _scipy("pearsonr"), lambda x, y, top: _pearson_rows(x, y), centred=True, ranking=False),
    Coefficient("ndcg", lambda x, y, top: ndcg(x, y - y.min(), top=top),
                lambda x, y, top: _ndcg_rows(x, y - y.min(axis=1, keepdims=True), top)),
    Coefficient("rbo", lambda x, y, top: rbo(x, y, top=top), lambda x, y, top: _rbo_rows(x, y, top)),
)}


def coefficient_names() -> tuple[str, ...]:
    """The names of every coefficient of :data:`COEFFICIENTS`, in its order (read when called, so a coefficient
    registered later is one of them).

    >>> coefficient_names()
    ('spearman', 'kendall', 'weighted_tau', 'pearson', 'ndcg', 'rbo')
    """
    return tuple(COEFFICIENTS)


def rank_coefficients() -> tuple[str, ...]:
    """The coefficients that compare rankings (Pearson compares the values themselves)."""
    return tuple(name for name, c in COEFFICIENTS.items() if c.ranking)


def centred_coefficients() -> tuple[str, ...]:
    """The coefficients whose mean over every permutation of one ranking is exactly 0 (each term has a mirror
    image)."""
    return tuple(name for name, c in COEFFICIENTS.items() if c.centred)


def _agreement_chunk(x: np.ndarray, y: np.ndarray, top: int | None) -> dict[str, np.ndarray]:
    found = {name: coefficient.rows(x, y, top) for name, coefficient in COEFFICIENTS.items()}
    constant = _constant(x) | _constant(y)   # no ranking on a side: no coefficient (as rank_agreement)
    for values in found.values():
        values[constant] = np.nan
    return found


def _agreement_rows(x: np.ndarray, y: np.ndarray, top: int | None = None) -> dict[str, np.ndarray]:
    """Every coefficient of :func:`rank_agreement` for each row of ``x`` and ``y`` (rows, n), in chunks.

    >>> r = _agreement_rows(np.array([[1.0, 2, 3], [1, 2, 3]]), np.array([[1.0, 2, 3], [3, 2, 1]]))
    >>> r["spearman"].tolist(), float(r["rbo"][0])
    ([1.0, -1.0], 1.0)
    """
    step = max(1, _CELLS // (x.shape[1] ** 2))
    parts = [_agreement_chunk(x[i:i + step], y[i:i + step], top) for i in range(0, x.shape[0], step)]
    return {m: np.concatenate([p[m] for p in parts]) if parts else np.empty(0) for m in coefficient_names()}


# ------------------------------------------------------------------- uncertainty and chance


def _boot_indices(n: int, n_boot: int | None, rng: np.random.Generator) -> np.ndarray:
    """Resamples of n RMs with replacement (``n_boot``, or :func:`~prb_utils.analysis.resampling.default_n_boot`
    of n), without those that repeat a single RM."""
    idx = resample_indices(n, default_n_boot(n, n_boot), rng)
    distinct = 1 + (np.diff(np.sort(idx, axis=1), axis=1) != 0).sum(axis=1)
    return idx[distinct >= 2]


def _permutations(n: int, n_perm: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Every permutation of range(n) when n <= 8 (exact), else ``n_perm`` random ones (Monte Carlo)."""
    if n <= EXACT_PERMUTATIONS_MAX_N:
        return np.array(list(itertools.permutations(range(n))), dtype=np.intp), True
    if int(n_perm) < 1:
        raise PRBError(f"n_perm must be a positive integer, got {n_perm}.")
    return rng.permuted(np.tile(np.arange(n), (int(n_perm), 1)), axis=1), False


def _chance_and_p(null: np.ndarray, estimate: float, exact: bool) -> tuple[float, float]:
    """Mean of the permutation distribution and the one-sided p-value P(null >= estimate)."""
    null = null[np.isfinite(null)]
    if not null.size:
        return math.nan, math.nan
    chance = float(null.mean())
    if not math.isfinite(estimate):
        return chance, math.nan
    hits = int((null >= estimate - _TOL).sum())
    return chance, hits / null.size if exact else (hits + 1) / (null.size + 1)


def rank_agreement_ci(
    benchmark_scores: Sequence[float],
    downstream_scores: Sequence[float],
    *,
    top: int | None = None,
    level: float = LEVEL,
    n_boot: int | None = None,
    seed: int = SEED,
    n_perm: int = N_PERM,
) -> pd.DataFrame:
    """Each coefficient of :func:`rank_agreement` with a bootstrap CI, its chance value and a permutation p.

    Columns: ``metric``; ``estimate`` (on all RMs); ``ci_low``/``ci_high``, the percentile bootstrap
    interval at ``level`` over RMs (RMs resampled with replacement, ``n_boot`` times, seeded; a resample
    of one repeated RM is skipped and ``n_boot_valid`` counts the resamples where the coefficient was
    defined); ``chance``, the coefficient's expectation when the downstream ranking is a uniformly random
    permutation of the RMs; ``p_perm``, the one-sided permutation p-value P(coefficient under a random
    permutation >= estimate); ``n`` (RMs) and ``n_perm`` (permutations used). For n <= 8 RMs both
    ``chance`` and ``p_perm`` are exact (all n! permutations); beyond that they are Monte Carlo over
    ``n_perm`` seeded permutations, with p = (1 + hits) / (1 + n_perm), so it is never below 1 / (1 + n_perm)
    (:func:`p_text` shows it as "< 0.001"); the chance level of the symmetric coefficients
    (:func:`centred_coefficients`) is 0 exactly for any n. Compare each estimate with its
    ``chance``, not with 0: NDCG and RBO of a random ranking are far above 0. NDCG uses the downstream
    scores as gains, min-shifted to be non-negative (the worst RM has gain 0).

    >>> ci = rank_agreement_ci([1, 2, 3, 4, 5], [1, 3, 2, 5, 4], n_boot=200)
    >>> list(ci["metric"]) == list(coefficient_names())
    True
    >>> row = ci.set_index("metric").loc["spearman"]
    >>> [round(float(row[c]), 4) + 0.0 for c in ("estimate", "chance", "p_perm")], int(row["n_perm"])
    ([0.8, 0.0, 0.0667], 120)
    """
    x, y = _pair(benchmark_scores, downstream_scores)
    check_uncertainty(level, n_boot)
    est = rank_agreement(x, y, top=top)
    boot_rng, perm_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    idx = _boot_indices(x.size, n_boot, boot_rng)
    boots = _agreement_rows(x[idx], y[idx], top)
    perms, exact = _permutations(x.size, n_perm, perm_rng)
    null = _agreement_rows(np.broadcast_to(x, perms.shape), y[perms], top)
    rows, centred = [], centred_coefficients()
    for m in coefficient_names():
        lo, hi = percentile_interval(boots[m], level)
        chance, p = _chance_and_p(null[m], est[m], exact)
        if m in centred and math.isfinite(chance):
            chance = 0.0   # their mean over all n! permutations is 0 exactly, for any n (Monte Carlo or not)
        rows.append((m, est[m], lo, hi, chance, p, x.size, int(np.isfinite(boots[m]).sum()), len(perms)))
    return pd.DataFrame(rows, columns=["metric", "estimate", "ci_low", "ci_high", "chance", "p_perm", "n",
                                       "n_boot_valid", "n_perm"])


def above_chance(table: pd.DataFrame, *, alpha: float = ALPHA) -> pd.Series:
    """Per row of an agreement table (:func:`rank_agreement_ci`, :func:`compare_benchmarks`): True where the
    coefficient has chance-corrected evidence, i.e. its permutation ``p_perm`` is below ``alpha`` *and* its
    interval lies above its ``chance`` value; False for an undefined coefficient.

    >>> t = pd.DataFrame({"estimate": [0.9, 0.9, 0.4], "ci_low": [0.5, -0.2, 0.1], "ci_high": [1.0, 1.0, 0.6],
    ...                   "chance": [0.0, 0.0, 0.0], "p_perm": [0.01, 0.01, 0.2]})
    >>> above_chance(t).tolist()
    [True, False, False]
    """
    for column in ("estimate", "ci_low", "chance", "p_perm"):
        if column not in table.columns:
            raise PRBError(f"The agreement table lacks the column {column!r}.")
    values = {c: pd.to_numeric(table[c], errors="coerce").astype(float) for c in ("estimate", "ci_low", "chance",
                                                                                   "p_perm")}
    defined = np.isfinite(values["estimate"]) & np.isfinite(values["p_perm"]) & np.isfinite(values["ci_low"])
    return (defined & (values["p_perm"] < alpha) & (values["ci_low"] > values["chance"].fillna(0.0))).astype(bool)


def ranking_sufficiency(table: pd.DataFrame, *, questions: int | None = None, headroom: float | None = None,
                        k: int | None = None, alpha: float = ALPHA,
                        metrics: Sequence[str] | None = None) -> dict[str, object]:
    """Can this downstream run rank these RMs? The verdict of an agreement table's rank coefficients
    (``metrics``; default :func:`rank_coefficients`, Pearson left out: it compares values, not rankings) under
    :func:`above_chance`.

    ``verdict`` is ``can rank`` when at least one rank coefficient is above chance, else ``cannot rank``;
    ``reason`` says why with the numbers behind it: the RMs, the ``questions`` of the run and its
    ``headroom`` (the oracle's pick minus a random pick at best-of-``k``, :func:`prb_utils.downstream.bon.headroom`)
    when given, the coefficient closest to evidence (smallest ``p_perm``), and, with so few RMs that no permutation p-value can be below
    ``alpha`` (1 / n!), that floor. ``sentence`` is what a page shows; ``above_chance`` names the coefficients
    with evidence, and ``n_rms``, ``questions``, ``headroom``, ``k``, ``alpha`` repeat the inputs.

    >>> t = rank_agreement_ci([0.5, 0.6, 0.7], [0.2, 0.3, 0.4], n_boot=200)
    >>> r = ranking_sufficiency(t, questions=4, headroom=0.2, k=8)
    >>> r["verdict"], r["above_chance"]
    ('cannot rank', [])
    >>> print(r["sentence"])  # doctest: +NORMALIZE_WHITESPACE
    This run cannot rank these RMs: with 3 RMs and 4 questions (headroom 0.200: the oracle's pick minus a random
    pick at best-of-8), none of the 5 rank coefficients is above chance (p_perm < 0.05 and its 95% interval above its
    chance value); the closest to evidence, spearman 1.000 [1.000, 1.000] (chance 0.000), has p_perm 0.167, and with 3 RMs no
    permutation p-value can be below 1/3! = 0.167.
    """
    metrics = rank_coefficients() if metrics is None else metrics
    rows = table[table["metric"].isin(metrics)] if "metric" in table.columns else table.iloc[0:0]
    if rows.empty:
        raise PRBError(f"The agreement table has none of the rank coefficients {', '.join(metrics)}.")
    evidence = above_chance(rows, alpha=alpha)
    above = list(dict.fromkeys(rows.loc[evidence, "metric"].astype(str)))
    n = int(pd.to_numeric(rows["n"], errors="coerce").max()) if "n" in rows.columns else None
    facts = []
    if n is not None:
        facts.append(f"{n} RMs")
    if questions is not None:
        facts.append(f"{int(questions)} questions")
    scope = f"with {' and '.join(facts)}" if facts else "here"
    if headroom is not None and math.isfinite(headroom):
        at = f" at best-of-{int(k)}" if k is not None else ""
        scope += (f" (headroom {format_value(headroom, sense=PROPORTION)}: the oracle's pick minus a random pick{at})"
                  if headroom > 1e-12 else f" (no headroom{at}: the judge rates every answer of the pool alike)")
    floor = 1 / math.factorial(n) if n is not None and n <= EXACT_PERMUTATIONS_MAX_N else None
    out: dict[str, object] = {"above_chance": above, "n_rms": n, "questions": questions, "headroom": headroom,
                              "k": k, "alpha": alpha}
    rule = f"p_perm < {alpha:g} and its 95% interval above its chance value"
    if above:
        reason = (f"{', '.join(above)} {'is' if len(above) == 1 else 'are'} above chance ({rule}) {scope}; "
                  f"{len(rows) - len(above)} of the {len(rows)} rank coefficients are not")
        return {"verdict": RANKING_VERDICTS[0], "reason": reason,
                "sentence": f"This run can rank these RMs: {reason}.", **out}
    defined = rows[np.isfinite(pd.to_numeric(rows["p_perm"], errors="coerce").astype(float))]
    none = f"none of the {len(rows)} rank coefficients is" if len(rows) > 1 else "the one rank coefficient is not"
    reason = f"{scope}, {none} above chance ({rule})"
    if defined.empty:
        reason += "; no coefficient is defined"
    else:
        margin = pd.to_numeric(defined["estimate"]) - pd.to_numeric(defined["chance"]).fillna(0.0)
        best = defined.assign(_margin=margin).sort_values(["p_perm", "_margin"], ascending=[True, False],
                                                          kind="stable").iloc[0]
        shown = format_interval(float(best["estimate"]), float(best["ci_low"]), float(best["ci_high"]))
        chance = format_value(float(best["chance"]), sense=PROPORTION)
        reason += f"; the closest to evidence, {best['metric']} {shown} (chance {chance}), has p_perm {p_text(float(best['p_perm']))}"
    if floor is not None and floor >= alpha:
        reason += f", and with {n} RMs no permutation p-value can be below 1/{n}! = {floor:.3f}"
    return {"verdict": RANKING_VERDICTS[1], "reason": reason,
            "sentence": f"This run cannot rank these RMs: {reason}.", **out}


def _ceil_power(x: float) -> str:
    """``x`` rounded up to one significant digit: 0.00167 -> "0.002"."""
    exp = math.floor(math.log10(x))
    mant = math.ceil(x / 10**exp - 1e-9)
    if mant == 10:
        mant, exp = 1, exp + 1
    return f"{mant * 10.0**exp:.{max(0, -exp)}f}"


def p_text(p: float, floor: float | None = None) -> str:
    """A p-value as every page shows it (:func:`prb_utils.formatting.format_value`: 3 decimals, "< 0.001" below
    that), "n/a" when undefined, and "< FLOOR" when it sits at the smallest value its method can give above
    0.001 (a Monte Carlo permutation p with no hit is 1 / (1 + n_perm): the true p is below that).

    >>> p_text(1 / 10001, floor=1 / 10001), p_text(1 / 501, floor=1 / 501), p_text(0.0312), p_text(float("nan"))
    ('< 0.001', '< 0.002', '0.031', 'n/a')
    """
    if p is None or not math.isfinite(p):
        return "n/a"
    if floor is not None and floor > P_FLOOR and p <= floor * (1 + 1e-9):
        return f"< {_ceil_power(floor)}"
    return format_value(p, sense=P_VALUE)


def p_display(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of an agreement table for display, its p-values as :func:`p_text`: ``p_perm`` (floor
    1 / (1 + n_perm) when Monte Carlo, i.e. more than :data:`EXACT_PERMUTATIONS_MAX_N` RMs), ``p_value`` of
    :func:`correlation_difference` (floor 2 / (1 + n_boot_valid)), ``diff_p`` of
    :func:`~prb_utils.downstream.predictors.predictor_table` (the same floor, from ``diff_n_boot_valid``) and
    ``williams_p``.

    >>> t = pd.DataFrame({"metric": ["spearman"], "p_perm": [1 / 10001], "n": [17], "n_perm": [10000]})
    >>> p_display(t)["p_perm"].tolist()
    ['< 0.001']
    """
    out = table.copy()
    if "p_perm" in out.columns:
        floors = [1 / (1 + k) if n > EXACT_PERMUTATIONS_MAX_N else None
                  for n, k in zip(out.get("n", pd.Series(np.inf, index=out.index)),
                                  out.get("n_perm", pd.Series(N_PERM, index=out.index)), strict=True)]
        out["p_perm"] = [p_text(p, f) for p, f in zip(out["p_perm"], floors, strict=True)]
    # a bootstrap p-value's floor is 2 / (1 + its valid draws); a p_value without its draws is left as it is
    for col, draws in (("p_value", "n_boot_valid"), ("diff_p", "diff_n_boot_valid"), ("williams_p", None)):
        if col not in out.columns or (col == "p_value" and draws not in out.columns):
            continue
        counts = out[draws] if draws in out.columns else pd.Series(np.nan, index=out.index)
        out[col] = [p_text(p, 2 / (1 + k) if k and not pd.isna(k) else None)
                    for p, k in zip(out[col], counts, strict=True)]
    return out


def _difference_columns(table: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise PRBError(f"The table lacks the column(s) {', '.join(map(str, missing))}.")
    frame = table[list(dict.fromkeys(columns))].apply(pd.to_numeric, errors="coerce").dropna()
    if len(frame) < 3:
        raise PRBError(f"Only {len(frame)} RM(s) have values in every column; at least 3 are needed.")
    return frame


def _bootstrap_p(diffs: np.ndarray) -> float:
    """Two-sided p for diff = 0 from the bootstrap distribution (percentile inversion, add-one corrected)."""
    if not diffs.size:
        return math.nan
    below, above = int((diffs <= 0).sum()), int((diffs >= 0).sum())
    return float(min(1.0, 2 * (min(below, above) + 1) / (diffs.size + 1)))


def overlapping_correlation_tests(r_ya: float, r_yb: float, r_ab: float, n: int, *,
                                  level: float = LEVEL, spearman: bool = False) -> dict[str, float]:
    """Williams' t and Zou's interval for ``r_ya - r_yb``, two correlations that share the variable y.

    Williams' t (Williams 1959, as recommended by Steiger 1980, Psychological Bulletin 87:245, eq. 7), with
    |R| = 1 - r_ya² - r_yb² - r_ab² + 2 r_ya r_yb r_ab and r̄ = (r_ya + r_yb) / 2:
    t = (r_ya - r_yb) √[(n - 1)(1 + r_ab) / (2 |R| (n - 1)/(n - 3) + r̄² (1 - r_ab)³)], df = n - 3,
    two-sided ``williams_p``. Zou's (2007, Psychological Methods 12:399, "overlapping correlations") interval
    at ``level``: with (l_i, u_i) each correlation's Fisher-z interval and c the correlation of the two
    estimates, c = [(r_ab - r_ya r_yb / 2)(1 - r_ya² - r_yb² - r_ab²) + r_ab³] / [(1 - r_ya²)(1 - r_yb²)],
    L = d - √[(r_ya - l_a)² + (u_b - r_yb)² - 2c (r_ya - l_a)(u_b - r_yb)] and
    U = d + √[(u_a - r_ya)² + (r_yb - l_b)² - 2c (u_a - r_ya)(r_yb - l_b)], d = r_ya - r_yb. Both assume
    bivariate normality; NaN when n < 4 or a correlation is ±1. With ``spearman`` (rank correlations), each
    Fisher-z interval uses Bonett and Wright's (2000, Psychometrika 65:23) standard error √[(1 + r²/2)/(n - 3)]
    instead of Pearson's 1/√(n - 3), which is too narrow for a Spearman coefficient.

    Zou's worked example (r = .396, .179, r_ab = .088, n = 66) gives (-0.093, 0.517):

    >>> r = overlapping_correlation_tests(0.396, 0.179, 0.088, 66)
    >>> round(r["zou_ci_low"], 3), round(r["zou_ci_high"], 3)
    (-0.093, 0.517)
    """
    nan = {"williams_t": math.nan, "williams_p": math.nan, "zou_ci_low": math.nan, "zou_ci_high": math.nan}
    if n < 4 or not all(map(math.isfinite, (r_ya, r_yb, r_ab))) or max(abs(r_ya), abs(r_yb), abs(r_ab)) > 1 - 1e-9:
        return nan
    det = 1 - r_ya**2 - r_yb**2 - r_ab**2 + 2 * r_ya * r_yb * r_ab
    mean = (r_ya + r_yb) / 2
    denominator = 2 * det * (n - 1) / (n - 3) + mean**2 * (1 - r_ab) ** 3
    if denominator <= 0:
        return nan
    t = (r_ya - r_yb) * math.sqrt((n - 1) * (1 + r_ab) / denominator)
    z = float(stats.norm.ppf(0.5 + level / 2))
    def se(r: float) -> float:
        return math.sqrt((1 + r**2 / 2 if spearman else 1.0) / (n - 3))

    (l_a, u_a), (l_b, u_b) = ((math.tanh(math.atanh(r) - z * se(r)), math.tanh(math.atanh(r) + z * se(r)))
                              for r in (r_ya, r_yb))
    c = ((r_ab - r_ya * r_yb / 2) * (1 - r_ya**2 - r_yb**2 - r_ab**2) + r_ab**3) / ((1 - r_ya**2) * (1 - r_yb**2))
    d = r_ya - r_yb
    low = d - math.sqrt(max(0.0, (r_ya - l_a) ** 2 + (u_b - r_yb) ** 2 - 2 * c * (r_ya - l_a) * (u_b - r_yb)))
    high = d + math.sqrt(max(0.0, (u_a - r_ya) ** 2 + (r_yb - l_b) ** 2 - 2 * c * (u_a - r_ya) * (r_yb - l_b)))
    return {"williams_t": t, "williams_p": float(2 * stats.t.sf(abs(t), n - 3)), "zou_ci_low": low,
            "zou_ci_high": high}


def correlation_difference(
    table: pd.DataFrame,
    downstream: str,
    a: str,
    b: str,
    *,
    metric: str = "spearman",
    top: int | None = None,
    level: float = LEVEL,
    n_boot: int | None = None,
    seed: int = SEED,
) -> dict[str, float | int | str]:
    """Does benchmark ``a`` agree with ``downstream`` better than benchmark ``b`` does, on the same RMs?

    ``table`` has one row per RM and numeric columns ``a``, ``b`` and ``downstream`` (rows missing any of
    them are left out). ``diff`` = metric(table[a], table[downstream]) - metric(table[b], table[downstream])
    with ``metric`` one of :func:`coefficient_names` (:func:`rank_agreement`). ``ci_low``/``ci_high``: the percentile
    interval at ``level`` of a *paired* bootstrap over the rows (the same resampled RMs for both
    benchmarks, ``n_boot`` times, seeded), so what the two benchmarks share cancels. ``p_value``: two-sided
    for diff = 0, by inverting that bootstrap, 2 * (1 + #{boot diff on the far side of 0}) / (1 + n_boot_valid),
    capped at 1; two identical benchmarks give diff 0 and p 1. Also returned: ``estimate_a``,
    ``estimate_b``, ``n`` (RMs) and ``n_boot_valid``.

    With a handful of RMs this bootstrap is **conservative**: a resample of n RMs holds about 63% of them,
    the percentile interval is wide and the add-one p-value cannot go below 2 / (1 + n_boot_valid), so it
    rejects a true null less often than ``level`` promises and misses real differences that Williams' t
    finds. Beside it, for ``spearman`` and ``pearson`` (Spearman as the Pearson correlation of the ranks),
    the classical tests for two correlations that share the downstream variable
    (:func:`overlapping_correlation_tests`): ``williams_t``, ``williams_p`` (Williams' t, Steiger 1980) and
    ``zou_ci_low``/``zou_ci_high`` (Zou 2007; for Spearman with Bonett-Wright's standard error); NaN for the
    other metrics.

    >>> t = pd.DataFrame({"prb": [1, 2, 3, 4, 5, 6], "rb": [2, 1, 4, 3, 6, 5], "bon": [1, 2, 3, 4, 5, 6]})
    >>> r = correlation_difference(t, "bon", "prb", "rb", n_boot=500)
    >>> round(r["diff"], 4), r["estimate_a"], round(r["estimate_b"], 4)
    (0.1714, 1.0, 0.8286)
    >>> correlation_difference(t, "bon", "prb", "prb", n_boot=200)["p_value"]
    1.0
    """
    if metric not in coefficient_names():
        raise PRBError(f"Unknown agreement metric {metric!r}; use one of {', '.join(coefficient_names())}.")
    check_uncertainty(level, n_boot)
    frame = _difference_columns(table, [a, b, downstream])
    xa, xb, y = (frame[c].to_numpy(dtype=float) for c in (a, b, downstream))
    est_a = rank_agreement(xa, y, top=top)[metric]
    est_b = rank_agreement(xb, y, top=top)[metric]
    idx = _boot_indices(len(frame), n_boot, np.random.default_rng(seed))
    diffs = _agreement_rows(xa[idx], y[idx], top)[metric] - _agreement_rows(xb[idx], y[idx], top)[metric]
    diffs = diffs[np.isfinite(diffs)]
    lo, hi = percentile_interval(diffs, level)
    classical = dict.fromkeys(("williams_t", "williams_p", "zou_ci_low", "zou_ci_high"), math.nan)
    if metric in ("spearman", "pearson"):
        cols = [stats.rankdata(v) if metric == "spearman" else v for v in (xa, xb, y)]
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.corrcoef(np.vstack(cols))
        classical = overlapping_correlation_tests(float(r[0, 2]), float(r[1, 2]), float(r[0, 1]), len(frame),
                                                  level=level, spearman=metric == "spearman")
    return {"metric": metric, "diff": est_a - est_b, "ci_low": lo, "ci_high": hi, "p_value": _bootstrap_p(diffs),
            "estimate_a": est_a, "estimate_b": est_b, "n": len(frame), "n_boot_valid": int(diffs.size),
            **classical}


def _names(benchmark_scores, downstream_scores, names) -> list[str]:
    if names is not None:
        return [str(n) for n in names]
    for obj in (benchmark_scores, downstream_scores):
        if isinstance(obj, pd.Series):
            return [str(i) for i in obj.index]
    return [str(i) for i in range(len(benchmark_scores))]


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
    level: float = LEVEL,
    n_boot: int | None = None,
    seed: int = SEED,
    n_perm: int = N_PERM,
) -> pd.DataFrame:
    """How well each benchmark's RM ranking agrees with each downstream metric, side by side.

    ``benchmarks``: one row per model (index or a ``model`` column), one numeric column per benchmark
    (e.g. ``prb``, ``rewardbench``, ``rm_bench``). ``downstream``: one row per model, one column per
    downstream metric (e.g. ``bon@8``, ``ppo``). ``aliases`` maps a model name as written in either table
    to the canonical name, so "Skywork/Skywork-Reward-V2-Llama-3.1-8B" and "skywork-8b" can join; names
    are otherwise matched exactly. Models missing from either side are left out with a warning; each
    (benchmark, metric) pair uses the models with values in both. Returns the tidy columns benchmark,
    downstream and the columns of :func:`rank_agreement_ci` (metric, estimate, ci_low, ci_high, chance,
    p_perm, n, n_boot_valid, n_perm). To test whether one benchmark agrees better than another on the
    same RMs, use :func:`correlation_difference`.
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
    if common.size < MIN_RMS:
        raise PRBError(f"Only {common.size} model(s) appear in both tables; at least {MIN_RMS} are needed.")
    parts = []
    for b in bench.columns:
        for d in down.columns:
            pair = pd.concat([bench.loc[common, b], down.loc[common, d]], axis=1).dropna()
            if len(pair) < MIN_RMS:
                continue
            ci = rank_agreement_ci(pair.iloc[:, 0], pair.iloc[:, 1], top=top, level=level, n_boot=n_boot,
                                   seed=seed, n_perm=n_perm)
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
