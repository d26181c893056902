"""Plots for the downstream analysis: BoN curves, benchmark-vs-downstream scatter, rank-rank, coefficients.

Same conventions as :mod:`prb_utils.analysis.plots`: one function per plot, tidy input plus keyword-only options,
draws on ``ax`` (a new figure when None) and returns the Axes; intervals come from the frame's
``ci_low``/``ci_high`` columns; a reward model takes its colour from
:func:`prb_utils.analysis.plots.model_palette` (the same as on every other page). ``judge_label`` (e.g. from :func:`prb_utils.downstream.rubric_judge.judge_label`)
names the quality's judge on the axis, so a proxy judge is always marked as one.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import seaborn as sns
import statsmodels.api as sm
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from prb_utils.analysis.leaderboard import ALPHA
from prb_utils.analysis.metrics import require_columns
from prb_utils.analysis.plots import PALETTE, REFERENCE_COLOUR, axes_or_new, model_palette
from prb_utils.analysis.resampling import LEVEL
from prb_utils.downstream.correlation import above_chance
from prb_utils.errors import PRBError


def _colors(n: int) -> list:
    """``n`` colours for levels that are not models (benchmarks, downstream outcomes)."""
    return list(sns.color_palette(PALETTE, n)) if n > 0 else []


def bon_curve_plot(curves: pd.DataFrame, *, method: str = "exact", ax: Axes | None = None,
                   palette: dict | None = None, judge_label: str | None = None, reference: bool = True, ylabel: str = "rubric quality",
                   title: str | None = "Best-of-k rubric quality (95% CI over questions)") -> Axes:
    """Mean best-of-k quality against k (log2 axis) per RM, with CI bands, from :func:`prb_utils.downstream.bon.bon_curves`.

    Each RM in its :func:`~prb_utils.analysis.plots.model_palette` colour (or ``palette``); the ``oracle`` and
    ``random`` rows of the same ``method`` are drawn as grey reference lines when ``reference`` (for ``first``:
    the best and a random one of the first k samples, the ceiling and floor of that rule; curves without
    them, such as older files, get no reference line rather than another rule's).
    """
    require_columns(curves, ["model", "method", "k", "mean", "ci_low", "ci_high"], what="plotted")
    ax = axes_or_new(ax, (7, 4.5))
    sub = curves[curves["method"] == method]
    models = [m for m in dict.fromkeys(sub["model"]) if m not in ("oracle", "random")]
    colours = {**model_palette(models), **(palette or {})}
    for model in models:
        color = colours[model]
        d = sub[sub["model"] == model].sort_values("k")
        ax.plot(d["k"], d["mean"], marker="o", color=color, label=model)
        ax.fill_between(d["k"], d["ci_low"], d["ci_high"], color=color, alpha=0.1, linewidth=0)
    if reference:
        for name, style in (("oracle", "--"), ("random", ":")):
            d = sub[sub["model"] == name].sort_values("k")
            if not d.empty:
                ax.plot(d["k"], d["mean"], linestyle=style, color=REFERENCE_COLOUR,
                        label=name if method == "exact" else f"{name} of the {method} k")
    ks = sorted(sub["k"].unique())
    if ks:
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_xlabel("k (samples the RM chooses from)")
    ax.set_ylabel(ylabel + ("\n" + textwrap.fill(f"[{judge_label}]", 36) if judge_label else ""))
    if title:
        ax.set_title(title)
    ax.legend(fontsize="small", frameon=False, loc="best")
    return ax


def _pair_frame(benchmark: pd.Series, downstream: pd.Series) -> pd.DataFrame:
    df = pd.concat([benchmark.rename("benchmark"), downstream.rename("downstream")], axis=1, join="inner")
    df = df.dropna()
    if len(df) < 2:
        raise PRBError("Need at least two RMs with both a benchmark and a downstream score to plot.")
    return df


def _scatter_points(ax: Axes, x: pd.Series, y: pd.Series, groups: pd.Series | None) -> None:
    """Labelled points: each in its model's colour, or, with ``groups`` (a Series indexed like ``x``), one
    colour and marker per group with a legend entry each."""
    if groups is None:
        colours = model_palette(x.index.astype(str))
        ax.scatter(x, y, color=[colours[str(m)] for m in x.index], zorder=3)
    else:
        levels = list(dict.fromkeys(groups.reindex(x.index).fillna("other").astype(str)))
        member = groups.reindex(x.index).fillna("other").astype(str)
        for level, colour, marker in zip(levels, _colors(len(levels)), "osD^v<>p*h", strict=False):
            keep = (member == level).to_numpy()
            ax.scatter(x[keep], y[keep], color=colour, marker=marker, zorder=3, label=level)
    for name in x.index:
        ax.annotate(str(name), (x[name], y[name]), textcoords="offset points", xytext=(4, 4), fontsize="small")


def scatter_fit(benchmark: pd.Series, downstream: pd.Series, *, ax: Axes | None = None,
                xlabel: str = "benchmark score", ylabel: str = "downstream score", level: float = LEVEL,
                groups: pd.Series | None = None, title: str | None = None) -> Axes:
    """Benchmark (x) vs downstream (y) per RM, labelled points, an OLS fit with its CI band (statsmodels).

    Inputs are Series indexed by model name (joined on the index); each point has its model's colour, or
    its group's colour and marker with ``groups`` (e.g. the on-policy / off-policy groups of a study).
    The legend gives slope, R² and n.
    """

    df = _pair_frame(benchmark, downstream)
    ax = axes_or_new(ax, (6, 4.5))
    _scatter_points(ax, df["benchmark"], df["downstream"], groups)
    if groups is not None:
        ax.legend(fontsize="small", frameon=False)
    if len(df) >= 3 and df["benchmark"].nunique() > 1:
        fit = sm.OLS(df["downstream"].to_numpy(float), sm.add_constant(df["benchmark"].to_numpy(float))).fit()
        grid = np.linspace(df["benchmark"].min(), df["benchmark"].max(), 50)
        pred = fit.get_prediction(sm.add_constant(grid)).summary_frame(alpha=1 - level)
        ax.plot(grid, pred["mean"], color="0.3",
                label=f"OLS: slope {fit.params[1]:.3g}, R² {fit.rsquared:.2f}, n={len(df)}")
        ax.fill_between(grid, pred["mean_ci_lower"], pred["mean_ci_upper"], color="0.3", alpha=0.15, linewidth=0)
        ax.legend(fontsize="small", frameon=False)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def rank_rank(benchmark: pd.Series, downstream: pd.Series, *, ax: Axes | None = None,
              xlabel: str = "benchmark rank", ylabel: str = "downstream rank", groups: pd.Series | None = None,
              title: str | None = None) -> Axes:
    """Rank by benchmark (x) vs rank by downstream (y), 1 = best, labelled and in each model's colour (or
    its group's, as in :func:`scatter_fit`); the diagonal is perfect agreement.

    >>> ax = rank_rank(pd.Series([0.7, 0.6, 0.5], index=["a", "b", "c"]), pd.Series([0.2, 0.3, 0.1], index=["a", "b", "c"]))
    >>> sorted(t.get_text() for t in ax.texts)
    ['a', 'b', 'c']
    >>> import matplotlib.pyplot as plt
    >>> plt.close(ax.figure)
    """
    df = _pair_frame(benchmark, downstream)
    rx = df["benchmark"].rank(ascending=False, method="average")
    ry = df["downstream"].rank(ascending=False, method="average")
    ax = axes_or_new(ax, (5, 5))
    n = len(df)
    ax.plot([1, n], [1, n], linestyle="--", color="0.6", zorder=1)
    _scatter_points(ax, rx, ry, groups)
    if groups is not None:
        ax.legend(fontsize="small", frameon=False)
    ax.set_xlim(n + 0.5, 0.5)
    ax.set_ylim(n + 0.5, 0.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def coefficient_bars(table: pd.DataFrame, *, hue: str | None = None, ax: Axes | None = None,
                     title: str | None = "Rank agreement with 95% bootstrap CI over RMs") -> Axes:
    """Bars of each coefficient (``metric``) with its CI, from :func:`prb_utils.downstream.correlation.rank_agreement_ci`
    or :func:`~prb_utils.downstream.correlation.compare_benchmarks` (then ``hue="benchmark"`` sets benchmarks side by side).
    A black tick marks each coefficient's ``chance`` value (a random ranking) when the table has it. An
    undefined coefficient (NaN: e.g. a constant ranking) is written "n/a" where its bar would be. With
    ``p_perm`` in the table, a coefficient that is not above chance
    (:func:`~prb_utils.downstream.correlation.above_chance`) is drawn hollow, its outline and interval only,
    and the legend says what a hollow bar means.

    >>> from prb_utils.downstream.correlation import rank_agreement_ci
    >>> ax = coefficient_bars(rank_agreement_ci([1, 2, 3], [1, 2, 3], n_boot=50))  # 3 RMs: nothing above chance
    >>> sorted({float(p.get_facecolor()[3]) for p in ax.patches})  # every face transparent
    [0.0]
    >>> import matplotlib.pyplot as plt
    >>> plt.close(ax.figure)
    """
    require_columns(table, ["metric", "estimate", "ci_low", "ci_high"], what="plotted")
    ax = axes_or_new(ax, (7, 4))
    metrics = list(dict.fromkeys(table["metric"]))
    groups = list(dict.fromkeys(table[hue])) if hue else [None]
    width = 0.8 / len(groups)
    judged = {"p_perm", "chance", "ci_low"} <= set(table.columns)
    any_hollow = False
    for gi, (color, group) in enumerate(zip(_colors(len(groups)), groups, strict=True)):
        d = table if group is None else table[table[hue] == group]
        d = d.set_index("metric").reindex(metrics)
        x = np.arange(len(metrics)) + (gi - (len(groups) - 1) / 2) * width
        est = d["estimate"].to_numpy(float)
        ok = np.isfinite(est)   # an undefined coefficient gets the words "n/a", never a bar at 0
        err = np.vstack([(est - d["ci_low"].to_numpy(float)).clip(min=0),
                         (d["ci_high"].to_numpy(float) - est).clip(min=0)])
        solid = ok & (above_chance(d).to_numpy(bool) if judged else True)
        hollow = ok & ~solid   # not above chance: an outline, never a filled bar
        name = None if group is None else str(group)   # one legend entry per group: on its solid bars if any
        ax.bar(x[solid], est[solid], width=width, color=color, label=name if solid.any() else None)
        ax.bar(x[hollow], est[hollow], width=width, facecolor="none", edgecolor=color, linewidth=1.5,
               label=None if solid.any() else name)
        ax.errorbar(x[ok], est[ok], yerr=np.nan_to_num(err[:, ok]), fmt="none", ecolor="0.2", capsize=3)
        any_hollow = any_hollow or bool(hollow.any())
        for xi in x[~ok]:
            ax.text(xi, 0.05, "n/a", ha="center", va="bottom", fontsize="small", color="0.3", rotation=90)
        if "chance" in d.columns:
            chance = d["chance"].to_numpy(float)
            ax.scatter(x[ok], chance[ok], marker="_", s=300, color="black", zorder=4,
                       label="chance (random ranking)" if gi == 0 and ok.any() else None)
    ax.axhline(0, color="0.3", linewidth=0.8)
    ax.set_xticks(np.arange(len(metrics)), metrics)
    ax.set_ylim(-1.05, 1.05)
    ax.set_ylabel("coefficient")
    handles, labels = ax.get_legend_handles_labels()
    if any_hollow:  # a legend entry only, no patch on the axes
        handles.append(Patch(facecolor="none", edgecolor="0.3"))
        labels.append(f"hollow: not above chance (p_perm ≥ {ALPHA:g} or CI reaches it)")
    if (hue or "chance" in table.columns or any_hollow) and handles:
        ax.legend(handles, labels, fontsize="small", frameon=False)
    if title:
        ax.set_title(title)
    return ax
