"""Plots of the tidy frames of :mod:`prb_utils.analysis.metrics` and :mod:`prb_utils.analysis.breakdowns`.

One function per plot; each takes a tidy frame plus keyword-only options, draws on ``ax`` (a new figure
when None) and returns the matplotlib Axes (``ax.figure`` is the Figure). Intervals are drawn from the
frame's ``ci_low``/``ci_high`` columns, never recomputed here. :func:`set_theme` applies the shared look:
seaborn's white grid and its colour-blind-safe "colorblind" palette; heatmaps use the colour-blind-safe
"cividis" map.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes

from prb_utils.errors import PRBError

PALETTE = "colorblind"
SEQUENTIAL_CMAP = "cividis"


def set_theme(*, context: str = "notebook", font_scale: float = 1.0) -> list[tuple[float, float, float]]:
    """Apply the shared theme (white grid, colour-blind palette) and return the palette's colours."""
    sns.set_theme(context=context, style="whitegrid", palette=PALETTE, font_scale=font_scale)
    plt.rcParams.update({"axes.titleweight": "bold", "figure.dpi": 100, "savefig.bbox": "tight"})
    return sns.color_palette(PALETTE)


def _cols(cols: str | Sequence[str] | None) -> list[str]:
    if cols is None:
        return []
    return [cols] if isinstance(cols, str) else list(cols)


def _labels(frame: pd.DataFrame, cols: str | Sequence[str] | None) -> pd.Series:
    cols = _cols(cols)
    if not cols:
        return pd.Series(["all"] * len(frame), index=frame.index)
    return frame[cols].astype(str).agg(" | ".join, axis=1)


def _need(frame: pd.DataFrame, cols: Sequence[str]) -> None:
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise PRBError(f"The table to plot lacks the column(s) {', '.join(missing)}.")


def _axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    _, ax = plt.subplots(figsize=size)
    return ax


def _order(values: pd.Series) -> list:
    if isinstance(values.dtype, pd.CategoricalDtype):
        present = set(values.dropna())
        return [c for c in values.cat.categories if c in present]
    seen = list(dict.fromkeys(values.dropna()))
    return seen


def _wrap(label, width: int = 16) -> str:
    """A tick label with underscores as spaces, wrapped onto lines of about ``width`` characters."""
    return textwrap.fill(str(label).replace("_", " "), width=width)


def _legend(ax: Axes, *, title: str | None = None) -> None:
    """Legend outside the plot area on the right, so it never hides data."""
    ax.legend(title=title, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)


def _err(frame: pd.DataFrame, y: str) -> np.ndarray | None:
    if "ci_low" not in frame or "ci_high" not in frame:
        return None
    low = (frame[y] - frame["ci_low"]).clip(lower=0).fillna(0).to_numpy(dtype=float)
    high = (frame["ci_high"] - frame[y]).clip(lower=0).fillna(0).to_numpy(dtype=float)
    return np.vstack([low, high])


def forest(table: pd.DataFrame, *, label: str | Sequence[str] = ("model", "profile"), x: str = "accuracy",
           hue: str | None = None, reference: float | None = 0.5, ax: Axes | None = None,
           title: str | None = "Accuracy with 95% CI") -> Axes:
    """Forest plot: one row per table row, a point at ``x`` with its ``ci_low``–``ci_high`` interval.

    ``label`` names the column(s) shown on the y axis; ``hue`` colours rows by a column; ``reference``
    draws a dashed vertical line (chance = 0.5 by default; None for none).
    """
    _need(table, [x, *_cols(label), *_cols(hue)])
    ax = _axes(ax, (7, 0.45 * len(table) + 1.5))
    frame = table.reset_index(drop=True)
    ys = np.arange(len(frame))[::-1]
    colours = sns.color_palette(PALETTE)
    groups = _labels(frame, hue) if hue else pd.Series(["all"] * len(frame))
    for i, level in enumerate(_order(groups)):
        mask = (groups == level).to_numpy()
        ax.errorbar(frame.loc[mask, x], ys[mask], xerr=_err(frame.loc[mask], x), fmt="o", capsize=3,
                    color=colours[i % len(colours)], label=level if hue else None)
    ax.set_yticks(ys, _labels(frame, label).tolist())
    if reference is not None:
        ax.axvline(reference, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel(x.replace("_", " "))
    if hue:
        _legend(ax, title=hue)
    if title:
        ax.set_title(title)
    return ax


def heatmap(table: pd.DataFrame, *, rows: str | Sequence[str] = "model", cols: str = "subset",
            value: str = "accuracy", annot: bool = True, fmt: str = ".2f", vmin: float | None = 0.0,
            vmax: float | None = 1.0, ax: Axes | None = None, title: str | None = None) -> Axes:
    """Heatmap of ``value`` with one row per ``rows`` level and one column per ``cols`` level."""
    _need(table, [*_cols(rows), cols, value])
    frame = table.assign(_row=_labels(table, rows))
    grid = frame.pivot_table(index="_row", columns=cols, values=value, aggfunc="mean", observed=True)
    grid = grid.reindex(index=_order(frame["_row"]), columns=_order(frame[cols]))
    grid.index.name = " | ".join(_cols(rows))
    ax = _axes(ax, (1.6 * grid.shape[1] + 3, 0.5 * grid.shape[0] + 1.5))
    sns.heatmap(grid, annot=annot, fmt=fmt, cmap=SEQUENTIAL_CMAP, vmin=vmin, vmax=vmax, linewidths=0.5,
                cbar_kws={"label": value.replace("_", " ")}, ax=ax)
    ax.set_title(title or f"{value.replace('_', ' ')} by {grid.index.name} and {cols}")
    ax.set_xticks(ax.get_xticks(), [_wrap(c) for c in grid.columns], rotation=0)
    return ax


def lift_dumbbell(lift: pd.DataFrame, *, label: str | Sequence[str] = ("model", "profile"),
                  before: str = "accuracy_baseline", after: str = "accuracy_condition", ax: Axes | None = None,
                  title: str | None = "Profile lift (same pairs)") -> Axes:
    """Dumbbell per row of :func:`prb_utils.analysis.metrics.profile_lift`: accuracy without and with the profile,
    joined by a line, with the lift and its CI written beside it."""
    _need(lift, [before, after, *_cols(label)])
    frame = lift.reset_index(drop=True)
    ax = _axes(ax, (7, 0.5 * len(frame) + 1.5))
    ys = np.arange(len(frame))[::-1]
    c_before, c_after = sns.color_palette(PALETTE)[:2]
    ax.hlines(ys, frame[before], frame[after], color="grey", linewidth=2, zorder=1)
    ax.scatter(frame[before], ys, color=c_before, label="without profile", zorder=2)
    ax.scatter(frame[after], ys, color=c_after, label="with profile", zorder=2)
    if {"lift", "ci_low", "ci_high"} <= set(frame.columns):
        # the lift and its CI in a column right of the plot area (x in axes fraction, y in data units)
        for y, row in zip(ys, frame.itertuples(index=False), strict=True):
            ax.text(1.02, y, f"{row.lift:+.2f} [{row.ci_low:+.2f}, {row.ci_high:+.2f}]",
                    transform=ax.get_yaxis_transform(), va="center", fontsize="small")
        ax.text(1.02, 1.0, "lift [95% CI]", transform=ax.transAxes, va="bottom", fontsize="small",
                fontweight="bold")
    ax.set_yticks(ys, _labels(frame, label).tolist())
    ax.set_xlabel("accuracy")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, fontsize="small", frameon=False)
    if title:
        ax.set_title(title)
    return ax


LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P")


def _series_by_category(table: pd.DataFrame, *, x: str, y: str, hue: str | Sequence[str] | None,
                        ax: Axes, bars: bool, style: str | None = None, dodge: float = 0.0) -> list:
    """Draw one series per hue (x style) level over the ordered categories of ``x``; return the order."""
    order = _order(table[x])
    hue_of = _labels(table, hue)
    style_of = _labels(table, style) if style else pd.Series([""] * len(table), index=table.index)
    hues, styles = _order(hue_of), _order(style_of)
    series = [(h, st) for h in hues for st in styles if ((hue_of == h) & (style_of == st)).any()]
    colours = sns.color_palette(PALETTE)
    width = 0.8 / max(len(series), 1)
    pos = {c: i for i, c in enumerate(order)}
    for i, (h, st) in enumerate(series):
        part = table[((hue_of == h) & (style_of == st)).to_numpy()]
        part = part.assign(_pos=part[x].map(pos)).dropna(subset=["_pos"]).sort_values("_pos")
        xs = part["_pos"].to_numpy(dtype=float)
        label = " | ".join(v for v in (h if hue else "", st) if v) or None
        colour = colours[hues.index(h) % len(colours)]
        if bars:
            xs = xs - 0.4 + width * (i + 0.5)
            ax.bar(xs, part[y], width=width, color=colour, label=label)
            ax.errorbar(xs, part[y], yerr=_err(part, y), fmt="none", ecolor="black", capsize=2, linewidth=1)
        else:
            if dodge and len(series) > 1:
                xs = xs + dodge * (i / (len(series) - 1) - 0.5)
            j = styles.index(st)
            ax.errorbar(xs, part[y], yerr=_err(part, y), marker=MARKERS[j % len(MARKERS)],
                        linestyle=LINESTYLES[j % len(LINESTYLES)], capsize=3, color=colour, label=label)
    ax.set_xticks(range(len(order)), [str(c) for c in order])
    return order


def theme_bars(table: pd.DataFrame, *, x: str = "theme", y: str = "accuracy",
               hue: str | Sequence[str] | None = "model", reference: float | None = 0.5,
               ax: Axes | None = None, title: str | None = "Accuracy by rubric theme") -> Axes:
    """Grouped bars of accuracy per rubric theme (:func:`prb_utils.analysis.breakdowns.by_theme`) with CI whiskers."""
    _need(table, [x, y, *_cols(hue)])
    n_themes = table[x].nunique()
    ax = _axes(ax, (max(6.0, 0.9 * n_themes + 2), 4.5))
    _series_by_category(table, x=x, y=y, hue=hue, ax=ax, bars=True)
    plt.setp(ax.get_xticklabels(), rotation=35, ha="right", rotation_mode="anchor")
    _finish(ax, x=x, y=y, hue=hue, reference=reference, title=title)
    return ax


def _finish(ax: Axes, *, x: str, y: str, hue, reference: float | None, title: str | None,
            style: str | None = None) -> None:
    if reference is not None:
        ax.axhline(reference, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel(y.replace("_", " "))
    if y == "accuracy":
        ax.set_ylim(0, 1.05)
    if hue or style:
        _legend(ax, title=" | ".join([*_cols(hue), *_cols(style)]))
    if title:
        ax.set_title(title)


def inferability_curve(table: pd.DataFrame, *, x: str = "inferability_bin", y: str = "accuracy",
                       hue: str | Sequence[str] | None = "model", style: str | None = "profile",
                       reference: float | None = 0.5, dodge: float = 0.2, ax: Axes | None = None,
                       title: str | None = "Accuracy by rubric inferability from the profile") -> Axes:
    """Accuracy per inferability bin (:func:`prb_utils.analysis.breakdowns.by_inferability`): colour = ``hue``,
    line style and marker = ``style`` (None for one style); points are dodged sideways by ``dodge``."""
    style = style if style in table.columns else None
    _need(table, [x, y, *_cols(hue)])
    ax = _axes(ax, (7.5, 4.5))
    _series_by_category(table, x=x, y=y, hue=hue, style=style, ax=ax, bars=False, dodge=dodge)
    _finish(ax, x=x, y=y, hue=hue, style=style, reference=reference, title=title)
    return ax


def length_bias_curve(table: pd.DataFrame, *, x: str = "length_bin", y: str = "accuracy",
                      hue: str | Sequence[str] | None = "model", style: str | None = None,
                      reference: float | None = 0.5, dodge: float = 0.2, ax: Axes | None = None,
                      title: str | None = "Accuracy by chosen - rejected length (characters)") -> Axes:
    """Accuracy per length-difference bin (:func:`prb_utils.analysis.breakdowns.length_bias`): colour = ``hue``,
    line style = ``style``. Left of the middle bin ("-20..20") the chosen answer is the shorter one."""
    _need(table, [x, y, *_cols(hue), *_cols(style)])
    ax = _axes(ax, (8, 4.5))
    _series_by_category(table, x=x, y=y, hue=hue, style=style, ax=ax, bars=False, dodge=dodge)
    _finish(ax, x=x, y=y, hue=hue, style=style, reference=reference, title=title)
    return ax


def margin_densities(margins: pd.DataFrame, *, x: str = "margin_std", hue: str | Sequence[str] | None = "model",
                     ax: Axes | None = None,
                     title: str | None = "Standardized score margin (chosen - rejected)") -> Axes:
    """Density of the per-item margin (:func:`prb_utils.analysis.breakdowns.score_margins`) per hue level.

    Levels whose margins do not vary (or have under two values) are drawn as a vertical tick at their
    value instead of a density. The dashed line at 0 is the decision boundary (right of it = correct).
    """
    _need(margins, [x, *_cols(hue)])
    ax = _axes(ax, (7, 4.5))
    groups = _labels(margins, hue)
    colours = sns.color_palette(PALETTE)
    for i, level in enumerate(_order(groups)):
        values = margins.loc[(groups == level).to_numpy(), x].dropna().to_numpy(dtype=float)
        colour = colours[i % len(colours)]
        label = level if hue else None
        if len(values) >= 2 and np.ptp(values) > 0:
            sns.kdeplot(x=values, ax=ax, color=colour, label=label, fill=True, alpha=0.15, warn_singular=False)
        elif len(values):
            ax.axvline(values[0], color=colour, label=label, linewidth=2)
    ax.axvline(0, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel("density")
    if hue:
        _legend(ax, title=" | ".join(_cols(hue)))
    if title:
        ax.set_title(title)
    return ax
