"""One resampler for every interval in prb, and the clustered paired test of every verdict.

The uncertainty defaults (:data:`LEVEL`, :data:`SEED`, :data:`N_BOOT`; seaborn's ``level``/``n_boot``/``seed``)
live here only. :func:`bootstrap_ci` is the percentile bootstrap over rows, strata or whole clusters (``units``);
:func:`sign_flip_p` and :func:`clustered_paired_test` are the paired test over clusters (exact; with one pair per
cluster it is the exact McNemar test). Accuracy tables, comparisons, calibration, the Best-of-N curves and the
rank agreement over RMs all draw from this module.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from prb_utils.errors import PRBError

#: The uncertainty defaults of every interval in prb (their one home; seaborn's ``level``/``n_boot``/``seed``).
LEVEL = 0.95
SEED = 0
N_BOOT = 2000
#: ``n_boot=None`` resolves to N_BOOT_SMALL when fewer than SMALL_SAMPLE units (pairs, questions, RMs) are
#: resampled: a small input is cheap to resample, and the percentile bounds then move less between seeds.
N_BOOT_SMALL = 10_000
SMALL_SAMPLE = 50


def default_n_boot(n_units: int, n_boot: int | None = None) -> int:
    """The number of bootstrap resamples: ``n_boot`` when given, else :data:`N_BOOT_SMALL` (10,000) for fewer
    than :data:`SMALL_SAMPLE` (50) resampled units and :data:`N_BOOT` (2,000) otherwise.

    >>> default_n_boot(12), default_n_boot(500), default_n_boot(12, 300)
    (10000, 2000, 300)
    """
    if n_boot is not None:
        return int(n_boot)
    return N_BOOT_SMALL if n_units < SMALL_SAMPLE else N_BOOT


def check_uncertainty(level: float, n_boot: int | None) -> None:
    """Raise PRBError unless ``level`` is in (0, 1) and ``n_boot`` is None (automatic) or a positive integer.

    >>> check_uncertainty(0.95, None)
    >>> check_uncertainty(1.5, 100)
    Traceback (most recent call last):
    ...
    prb_utils.errors.PRBError: level must be between 0 and 1 (e.g. 0.95), got 1.5.
    """
    if not 0 < level < 1:
        raise PRBError(f"level must be between 0 and 1 (e.g. {LEVEL}), got {level}.")
    if n_boot is not None and int(n_boot) < 1:
        raise PRBError(f"n_boot must be a positive integer, got {n_boot}.")


def resample_indices(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` resamples of ``range(n)`` with replacement, one per row: shape (n_boot, n).

    >>> resample_indices(3, 2, np.random.default_rng(0)).shape
    (2, 3)
    """
    return rng.integers(0, n, size=(int(n_boot), n))


def percentile_interval(stats: np.ndarray, level: float) -> tuple[float, float]:
    """Percentile interval at ``level`` of the finite values of ``stats``; (NaN, NaN) when there are none.

    >>> percentile_interval(np.arange(21.0), 0.5)
    (5.0, 15.0)
    """
    stats = np.asarray(stats, dtype=float)
    stats = stats[np.isfinite(stats)]
    if not stats.size:
        return (np.nan, np.nan)
    low, high = np.quantile(stats, [0.5 - level / 2, 0.5 + level / 2])
    return float(low), float(high)


def resampled_means(values: np.ndarray, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    """Means of ``n_boot`` resamples (with replacement, same size) of the 1-D ``values``.

    When the values take few distinct levels (0/1 outcomes, half credit) the resample is drawn as
    multinomial counts of those levels, which has exactly the distribution of index resampling and
    costs nothing per pair.
    """
    n = len(values)
    levels, counts = np.unique(values, return_counts=True)
    if len(levels) <= 16:
        draws = rng.multinomial(n, counts / n, size=n_boot)
        return draws @ levels / n
    out = np.empty(n_boot)
    chunk = max(1, 2_000_000 // n)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        out[start:stop] = values[resample_indices(n, stop - start, rng)].mean(axis=1)
    return out


def bootstrap_ci(
    values,
    statistic: Callable[[np.ndarray], float] | None = None,
    *,
    strata=None,
    units=None,
    n_boot: int | None = None,
    seed: int = SEED,
    level: float = LEVEL,
) -> tuple[float, float]:
    """Percentile bootstrap interval (at ``level``) of ``statistic`` over the rows of ``values`` (fixed seed).

    Rows are the resampling units (pairs). ``statistic`` maps a resampled array (same shape as
    ``values``) to a number; ``None`` means the mean, computed without a Python loop. With ``strata``
    (one label per row) rows are resampled within each stratum, so a resample has the same rows per
    stratum at the same positions and ``statistic`` may use the original strata labels. With ``units``
    (one label per row, as seaborn's ``units``: e.g. the question, when one question appears for two
    users) whole clusters are resampled instead of rows (a clustered bootstrap): all rows of a drawn
    unit enter together, so the interval accounts for rows of one unit being alike; ``statistic`` then
    sees a resample of varying length. ``strata`` and ``units`` do not combine. NaN when there are no rows.
    ``n_boot=None`` takes :func:`default_n_boot` of the number of resampled units (rows, or clusters).

    >>> bootstrap_ci([0, 1] * 50, seed=0) == bootstrap_ci([0, 1] * 50, seed=0)
    True
    >>> low, high = bootstrap_ci([1.0] * 20)
    >>> float(low), float(high)
    (1.0, 1.0)
    >>> low, high = bootstrap_ci([1, 1, 0, 0], units=["q1", "q1", "q2", "q2"], n_boot=200)
    >>> float(low), float(high)
    (0.0, 1.0)
    """
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n == 0:
        return (np.nan, np.nan)
    if units is not None and strata is not None:
        raise PRBError("bootstrap_ci takes strata or units, not both.")
    check_uncertainty(level, n_boot)
    rng = np.random.default_rng(seed)
    if units is not None:
        n_units = pd.Series(list(units)).nunique() if len(units) == n else n
        return percentile_interval(cluster_resamples(values, units, statistic, rng, default_n_boot(n_units, n_boot)),
                                   level)
    n_boot = default_n_boot(n, n_boot)
    if strata is None:
        groups = [np.arange(n)]
    else:
        codes = pd.factorize(pd.Series(strata), sort=True)[0]
        groups = [np.flatnonzero(codes == c) for c in np.unique(codes)]
    if statistic is None and values.ndim == 1:
        stats = sum(len(g) / n * resampled_means(values[g], rng, n_boot) for g in groups)
        return percentile_interval(np.asarray(stats), level)
    stats = np.empty(n_boot)
    for r in range(n_boot):
        idx = np.empty(n, dtype=np.int64)
        for g in groups:
            idx[g] = g[rng.integers(0, len(g), size=len(g))]
        stats[r] = statistic(values[idx]) if statistic is not None else float(np.mean(values[idx]))
    return percentile_interval(stats, level)


def cluster_weights(units, n_boot: int, rng: np.random.Generator, *, max_cells: int = 4_000_000):
    """Resamples of whole clusters as row weights, in chunks: each yielded array has one row per resample and one
    column per row of the data, holding how many times that row's cluster (``units``, one label per row) was
    drawn. The clusters are drawn as :func:`cluster_resamples` draws them (the same seed draws the same clusters),
    so weighting a statistic's rows by them is resampling the clusters' rows; a chunk holds at most ``max_cells``
    weights.

    >>> chunks = list(cluster_weights(["a", "a", "b"], 5, np.random.default_rng(0)))
    >>> chunks[0].shape, bool((chunks[0][:, 0] == chunks[0][:, 1]).all()), set(chunks[0].sum(axis=1) % 1) == {0}
    ((5, 3), True, True)
    """
    codes = pd.factorize(pd.Series(list(units)), sort=True)[0]
    n_units = int(codes.max()) + 1 if len(codes) else 0
    if not n_units:
        return
    draws = resample_indices(n_units, n_boot, rng)
    step = max(1, max_cells // max(1, len(codes)))
    for first in range(0, int(n_boot), step):
        chunk = draws[first:first + step]
        offset = np.arange(len(chunk))[:, None] * n_units
        counts = np.bincount((chunk + offset).ravel(), minlength=len(chunk) * n_units).reshape(len(chunk), n_units)
        yield counts[:, codes].astype(float)


def cluster_resamples(values: np.ndarray, units, statistic: Callable[[np.ndarray], float] | None,
                   rng: np.random.Generator, n_boot: int) -> np.ndarray:
    """``statistic`` (default: the mean over rows) of ``n_boot`` resamples of whole units."""
    if len(units) != len(values):
        raise PRBError(f"bootstrap_ci got {len(units)} units for {len(values)} rows.")
    codes = pd.factorize(pd.Series(list(units)), sort=True)[0]
    members = [np.flatnonzero(codes == c) for c in range(codes.max() + 1)]
    if statistic is None and values.ndim == 1:  # mean over rows = sum of unit sums / sum of unit sizes
        sums = np.array([values[m].sum() for m in members])
        sizes = np.array([len(m) for m in members], dtype=float)
        draws = resample_indices(len(members), n_boot, rng)
        return sums[draws].sum(axis=1) / sizes[draws].sum(axis=1)
    stats = np.empty(n_boot)
    for r, drawn in enumerate(resample_indices(len(members), n_boot, rng)):
        stats[r] = (statistic or np.mean)(values[np.concatenate([members[d] for d in drawn])])
    return stats


def sign_flip_p(cluster_differences) -> float:
    """Two-sided p-value of the clustered paired test: under the null the two sides of every cluster are
    exchangeable, so each cluster's difference ``d_k`` (its pairs only ``b`` gets right minus those only ``a``
    gets right) is as likely to be ``+d_k`` as ``-d_k``; the p-value is the share of the ``2**K`` sign flips
    whose ``|sum|`` is at least the observed one, computed exactly (a convolution over the integer sums, no
    sampling). With one pair per cluster it is the exact McNemar test; its normal approximation is Durkalski's
    clustered McNemar statistic ``(sum d_k)**2 / sum d_k**2``. 1.0 when no cluster differs.

    >>> from scipy.stats import binomtest   # the exact McNemar test: 9 pairs one way, 2 the other
    >>> bool(round(sign_flip_p([1] * 9 + [-1] * 2), 6) == round(binomtest(2, 11).pvalue, 6))
    True
    >>> sign_flip_p([0, 0]), round(sign_flip_p([5, -1, 4, 3]), 3)
    (1.0, 0.25)
    """
    d = np.abs(np.asarray(cluster_differences, dtype=float).round()).astype(np.int64)
    observed = abs(int(np.asarray(cluster_differences, dtype=float).round().sum()))
    d = d[d != 0]
    if not d.size:
        return 1.0
    total = int(d.sum())
    dist = np.zeros(2 * total + 1)
    dist[total] = 1.0  # index = sum + total
    for k in d:
        dist = 0.5 * (np.roll(dist, k) + np.roll(dist, -k))
    sums = np.arange(-total, total + 1)
    return float(min(1.0, dist[np.abs(sums) >= observed].sum()))


def clustered_paired_test(a, b, units=None) -> float:
    """The p-value of :func:`sign_flip_p` for two 0/1 outcome vectors on the same pairs, clustered by ``units``
    (one label per pair, e.g. the question; None: every pair its own cluster, the exact McNemar test).

    >>> clustered_paired_test([1, 1, 0, 0], [0, 0, 1, 1], units=["q1", "q1", "q2", "q2"])
    1.0
    """
    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    if units is None:
        return sign_flip_p(diff)
    codes = pd.factorize(pd.Series(list(units)), sort=True)[0]
    return sign_flip_p(np.bincount(codes, weights=diff)) if len(diff) else 1.0
