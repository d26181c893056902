"""Plots of the tidy frames of :mod:`prb_utils.analysis.metrics`, :mod:`~prb_utils.analysis.breakdowns` and
:mod:`~prb_utils.analysis.calibration`.

One function per plot; each takes a tidy frame plus keyword-only options, draws on ``ax`` (a new figure
when None) and returns the matplotlib Axes (``ax.figure`` is the Figure); the small-multiples plots
(:func:`theme_panels`, :func:`margin_panels`: one panel per model, same axes) return the Figure. Intervals
are drawn from the frame's ``ci_low``/``ci_high`` columns, never recomputed here. :func:`set_theme` applies
the shared look: seaborn's white grid and its colour-blind-safe "colorblind" palette; heatmaps use the
colour-blind-safe "cividis" map. One model, one colour: every figure here and in
:mod:`prb_utils.downstream.plots` colours a model by :func:`model_palette`; the profile condition is told
apart by marker and line style. Figures are at most :data:`PAGE_WIDTH_IN` wide, so a report page shows
them unscaled and their text stays at least :data:`MIN_TEXT_PX` high (:func:`smallest_text_px`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text
from matplotlib.ticker import Formatter

from prb_utils.analysis.marks import ORACLE_MARK, current_marks, mark_label
from prb_utils.analysis.marks import set_marks as set_marks  # the page's marks: one home, in analysis.marks
from prb_utils.analysis.metrics import require_columns
from prb_utils.profile import condition_sort_key
from prb_utils.schema import DEFAULT_ZOO

PALETTE = "colorblind"
SEQUENTIAL_CMAP = "cividis"
PAGE_WIDTH_IN = 12.0  # widest figure (inches at 100 dpi = 1200 px): shown unscaled on a 1234 px page
DISPLAY_WIDTH_PX = 1234  # the width a report page shows a figure at
MIN_TEXT_PX = 9.0  # the smallest text a figure may show at that width
# The model colours: seaborn's "colorblind" palette without its grey (grey marks references: chance, oracle,
# random). The default zoo keeps the first slots whether or not its models are present.
MODEL_COLOURS = tuple(c for i, c in enumerate(sns.color_palette(PALETTE)) if i != 7)
FIXED_MODELS = DEFAULT_ZOO
REFERENCE_COLOUR = (0.4, 0.4, 0.4)
_UNIVERSE: list[str] = []  # the models registered by set_theme(models=...): every figure colours them alike


def set_theme(*, context: str = "notebook", font_scale: float = 1.0,
              models: Iterable[str] | None = None) -> list[tuple[float, float, float]]:
    """Apply the shared theme (white grid, colour-blind palette) and return the palette's colours.

    ``models`` (e.g. every job label of the store) registers the models of a page, so that
    :func:`model_palette` gives each the same colour in every figure, whichever of them a figure shows.
    """
    sns.set_theme(context=context, style="whitegrid", palette=PALETTE, font_scale=font_scale)
    plt.rcParams.update({"axes.titleweight": "bold", "figure.dpi": 100, "savefig.bbox": "tight"})
    _UNIVERSE[:] = sorted({str(m) for m in (() if models is None else models)})
    return sns.color_palette(PALETTE)


class _Marked(Formatter):
    """A tick formatter that appends the marks (:func:`prb_utils.analysis.marks.mark_label`) to the labels of the
    formatter it wraps, so they survive every redraw (a tick label's text is made anew from its formatter)."""

    def __init__(self, inner: Formatter, marks: dict[str, str]) -> None:
        self.inner, self.marks = inner, marks

    def __call__(self, x: float, pos: int | None = None) -> str:
        return mark_label(self.inner(x, pos), self.marks)

    def set_axis(self, axis) -> None:
        super().set_axis(axis)
        self.inner.set_axis(axis)

    def set_locs(self, locs) -> None:
        super().set_locs(locs)
        self.inner.set_locs(locs)

    def format_ticks(self, values) -> list[str]:
        return [mark_label(label, self.marks) for label in self.inner.format_ticks(values)]


def mark_figure(fig: Figure, marks: dict[str, str] | None = None) -> Figure:
    """Append its mark to every tick label, legend entry, title and text of ``fig`` that names a marked model, and
    to every tick label and legend entry that names the oracle condition (``rubric`` is also a word of titles:
    "rubric quality"), once (``marks``, default those of :func:`~prb_utils.analysis.marks.set_marks`).

    >>> fig, ax = plt.subplots(); _ = ax.plot([0, 1], label="judge:x"); _ = ax.legend(); _ = ax.set_title("none")
    >>> _ = ax.set_yticks([0, 1], ["judge:x | none", "length | none"])
    >>> _ = mark_figure(fig, {"judge:x": "⚠ position-locked"}); fig.canvas.draw()
    >>> ax.get_legend().get_texts()[0].get_text(), ax.get_yticklabels()[0].get_text()
    ('judge:x ⚠ position-locked', 'judge:x | none ⚠ position-locked')
    >>> plt.close(fig)
    """
    marks = current_marks() if marks is None else dict(marks)
    if not marks:
        return fig
    legends = [t for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    legends += [t for legend in fig.legends for t in legend.get_texts()]
    for text in legends:
        text.set_text(mark_label(text.get_text(), marks))
    prose = [t for ax in fig.axes for t in (ax.title, *ax.texts)]
    prose += [fig._suptitle] if getattr(fig, "_suptitle", None) is not None else []
    models = {name: mark for name, mark in marks.items() if mark != ORACLE_MARK}  # "rubric" is a word of titles too
    for text in prose:
        text.set_text(mark_label(text.get_text(), models))
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            shown = [t.get_text() for t in axis.get_ticklabels()]
            if isinstance(axis.get_major_formatter(), _Marked) or all(mark_label(t, marks) == t for t in shown):
                continue
            axis.set_major_formatter(_Marked(axis.get_major_formatter(), marks))
    return fig


def model_palette(models: Iterable[str] = (), *, universe: Iterable[str] | None = None
                  ) -> dict[str, tuple[float, float, float]]:
    """One colour per model, the same in every figure and page: the default zoo
    (:data:`~prb_utils.schema.DEFAULT_ZOO`) holds the first slots of :data:`MODEL_COLOURS` in its own
    order, the other models of ``universe`` (default: those registered by :func:`set_theme`) and of
    ``models`` follow in sorted order. So a model's colour does not depend on which other models a figure
    shows. Beyond the 9 colour-blind-safe colours, more come from seaborn's "husl" palette.

    >>> palette = model_palette(["length", "classifier:b"])
    >>> palette["length"] == model_palette(["length"])["length"] == MODEL_COLOURS[3]
    True
    >>> palette["classifier:b"] == MODEL_COLOURS[5]
    True
    """
    wanted = [str(m) for m in dict.fromkeys(models)]
    pool = set(_UNIVERSE if universe is None else (str(m) for m in universe)) | set(wanted)
    order = [*FIXED_MODELS, *sorted(pool - set(FIXED_MODELS))]
    colours = list(MODEL_COLOURS)
    if len(order) > len(colours):
        colours += sns.color_palette("husl", len(order) - len(colours))
    slot = {m: colours[i] for i, m in enumerate(order)}
    return {m: slot[m] for m in wanted}


def smallest_text_px(fig: Figure, *, display_px: float = DISPLAY_WIDTH_PX) -> float:
    """The size in pixels of the smallest visible text of ``fig`` once its PNG (saved with a tight
    bounding box at the figure's dpi) is shown ``display_px`` wide or narrower (never enlarged)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width_px = fig.get_tightbbox(renderer).width * fig.dpi
    scale = min(1.0, display_px / width_px) if width_px > 0 else 1.0
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min(sizes, default=np.inf) * fig.dpi / 72 * scale


def _model_of(frame: pd.DataFrame) -> pd.Series | None:
    return frame["model"].astype(str) if "model" in frame.columns else None


def _constant_counts(frame: pd.DataFrame, level: pd.Series, counts: str | None) -> dict | None:
    """``level -> count`` when ``counts`` is a column and every row of a level has the same count."""
    if not counts or counts not in frame.columns:
        return None
    per = frame.assign(_level=level.to_numpy()).groupby("_level", sort=False)[counts].nunique()
    if (per > 1).any():
        return None
    return frame.assign(_level=level.to_numpy()).groupby("_level", sort=False)[counts].first().to_dict()


def _cols(cols: str | Sequence[str] | None) -> list[str]:
    if cols is None:
        return []
    return [cols] if isinstance(cols, str) else list(cols)


def _labels(frame: pd.DataFrame, cols: str | Sequence[str] | None) -> pd.Series:
    cols = _cols(cols)
    if not cols:
        return pd.Series(["all"] * len(frame), index=frame.index)
    return frame[cols].astype(str).agg(" | ".join, axis=1)


def axes_or_new(ax: Axes | None, size: tuple[float, float]) -> Axes:
    """``ax``, or the axes of a new figure of ``size`` inches when it is None."""
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


def _colour_of_rows(frame: pd.DataFrame, palette: dict | None) -> list | None:
    """Colour per row from its ``model`` (``palette`` or :func:`model_palette`); None without a model column."""
    models = _model_of(frame)
    if models is None:
        return None
    palette = {**model_palette(models), **(palette or {})}
    return [palette[m] for m in models]


def forest(table: pd.DataFrame, *, label: str | Sequence[str] = ("model", "profile"), x: str = "accuracy",
           hue: str | None = None, palette: dict | None = None, reference: float | None = 0.5,
           ax: Axes | None = None, title: str | None = "Accuracy with 95% CI") -> Axes:
    """Forest plot: one row per table row, a point at ``x`` with its ``ci_low``–``ci_high`` interval.

    ``label`` names the column(s) shown on the y axis. Points take their model's colour
    (:func:`model_palette`, or ``palette``); ``hue`` adds a legend of that column's levels (a column
    other than ``model`` is then coloured by level). ``reference`` draws a dashed vertical line (chance =
    0.5 by default; None for none).
    """
    require_columns(table, [x, *_cols(label), *_cols(hue)], what="plotted")
    ax = axes_or_new(ax, (7, 0.45 * len(table) + 1.5))
    frame = table.reset_index(drop=True)
    ys = np.arange(len(frame))[::-1]
    by_model = hue in (None, "model") and "model" in frame.columns
    if by_model:
        colours = _colour_of_rows(frame, palette)
        groups = _labels(frame, "model")
    else:
        groups = _labels(frame, hue) if hue else pd.Series(["all"] * len(frame))
        generic = sns.color_palette(PALETTE)
        levels = _order(groups)
        colours = [generic[levels.index(g) % len(generic)] for g in groups]
    for level in _order(groups):
        mask = (groups == level).to_numpy()
        colour = colours[int(np.flatnonzero(mask)[0])]
        ax.errorbar(frame.loc[mask, x], ys[mask], xerr=_err(frame.loc[mask], x), fmt="o", capsize=3,
                    color=colour, label=level if hue else None)
    ax.set_yticks(ys, _labels(frame, label).tolist())
    if reference is not None:
        ax.axvline(reference, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel(x.replace("_", " "))
    if hue:
        _legend(ax, title=hue)
    if title:
        ax.set_title(title)
    return ax


def heatmap(table: pd.DataFrame, *, rows: str | Sequence[str] = "model", cols: str | Sequence[str] = "subset",
            value: str = "accuracy", counts: str | None = "n", annot: bool = True, fmt: str = ".2f",
            vmin: float | None = 0.0, vmax: float | None = 1.0, fontsize: float = 10.0, ax: Axes | None = None,
            title: str | None = None) -> Axes:
    """Heatmap of ``value`` with one row per ``rows`` level and one column per ``cols`` level.

    ``counts`` (default ``n``, None for none) shows the number of pairs behind each cell: in the row label
    (``cooking (n=3)``) when it is the same along the row, else under each cell's value. A new figure is
    sized to the grid and at most :data:`PAGE_WIDTH_IN` wide, with ``fontsize``-point text, so that labels
    stay readable on a report page; put the longer dimension (e.g. categories) on ``rows``.
    """
    require_columns(table, [*_cols(rows), *_cols(cols), value], what="plotted")
    frame = table.assign(_row=_labels(table, rows), _col=_labels(table, cols))
    grid = frame.pivot_table(index="_row", columns="_col", values=value, aggfunc="mean", observed=True)
    row_order, col_order = _order(frame["_row"]), _order(frame["_col"])
    grid = grid.reindex(index=row_order, columns=col_order)
    per_row = _constant_counts(frame, frame["_row"], counts)
    labels = np.full(grid.shape, "", dtype=object)
    if annot:
        values = grid.to_numpy(dtype=float)
        cells = None
        if counts and counts in frame.columns and per_row is None:
            cells = frame.pivot_table(index="_row", columns="_col", values=counts, aggfunc="sum",
                                      observed=True).reindex(index=row_order, columns=col_order).to_numpy()
        for (i, j), v in np.ndenumerate(values):
            if np.isfinite(v):
                labels[i, j] = f"{v:{fmt}}" + (f"\n(n={int(cells[i, j])})" if cells is not None else "")
    row_names = [f"{r} (n={int(per_row[r])})" if per_row else str(r) for r in grid.index]
    few = grid.shape[1] <= 6  # few columns: wrapped labels, level; many: one line per part, slanted if long
    col_names = ["\n".join(_wrap(part, 16) if few else part for part in str(c).split(" | ")) for c in grid.columns]
    longest = 0 if few else max((len(line) for c in col_names for line in c.splitlines()), default=0)
    label_in = 0.085 * max((len(r) for r in row_names), default=4) * fontsize / 10
    lines = max((c.count("\n") + 1 for c in col_names), default=1) + (0.6 * longest / 10 if longest > 10 else 0)
    if ax is None:
        width = min(PAGE_WIDTH_IN, label_in + 0.95 * grid.shape[1] + 1.6)
        height = (0.42 if per_row is not None or not counts else 0.6) * grid.shape[0] + 0.22 * lines + 1.3
        _, ax = plt.subplots(figsize=(width, height))
    sns.heatmap(grid, annot=labels if annot else False, fmt="", cmap=SEQUENTIAL_CMAP, vmin=vmin, vmax=vmax,
                linewidths=0.5, annot_kws={"fontsize": fontsize},
                cbar_kws={"label": value.replace("_", " "), "shrink": min(1.0, 6 / max(grid.shape[0], 1))},
                ax=ax)
    ax.set_title(title or f"{value.replace('_', ' ')} by {' | '.join(_cols(rows))} and {' | '.join(_cols(cols))}",
                 fontsize=fontsize + 2)
    slanted = longest > 10  # long names (e.g. model specs) slant so that neighbours never overlap
    ax.set_xticks(np.arange(grid.shape[1]) + 0.5, col_names, rotation=35 if slanted else 0,
                  ha="left" if slanted else "center", rotation_mode="anchor", fontsize=fontsize)
    ax.set_yticks(np.arange(grid.shape[0]) + 0.5, row_names, rotation=0, fontsize=fontsize)
    ax.xaxis.tick_top()
    ax.set_xlabel(" | ".join(_cols(cols)), fontsize=fontsize, labelpad=8)
    ax.xaxis.set_label_position("top")
    ax.set_ylabel(" | ".join(_cols(rows)), fontsize=fontsize)
    ax.figure.axes[-1].tick_params(labelsize=fontsize)
    ax.figure.axes[-1].yaxis.label.set_size(fontsize)
    return ax


def lift_dumbbell(lift: pd.DataFrame, *, label: str | Sequence[str] = ("model", "profile"),
                  before: str = "accuracy_baseline", after: str = "accuracy_condition", palette: dict | None = None,
                  ax: Axes | None = None, title: str | None = "Profile lift (same pairs)") -> Axes:
    """Dumbbell per row of :func:`prb_utils.analysis.metrics.profile_lift`: accuracy without the profile
    (hollow marker) and with it (filled), joined by a line in the model's colour, with the lift and its
    CI written beside it."""
    require_columns(lift, [before, after, *_cols(label)], what="plotted")
    frame = lift.reset_index(drop=True)
    ax = axes_or_new(ax, (7, 0.5 * len(frame) + 1.5))
    ys = np.arange(len(frame))[::-1]
    colours = _colour_of_rows(frame, palette) or [MODEL_COLOURS[0]] * len(frame)
    ax.hlines(ys, frame[before], frame[after], colors=colours, linewidth=2, zorder=1)
    ax.scatter(frame[before], ys, facecolors="white", edgecolors=colours, linewidths=2, zorder=2)
    ax.scatter(frame[after], ys, color=colours, zorder=2)
    if {"lift", "ci_low", "ci_high"} <= set(frame.columns):
        # the lift and its CI in a column right of the plot area (x in axes fraction, y in data units)
        for y, row in zip(ys, frame.itertuples(index=False), strict=True):
            ax.text(1.02, y, f"{row.lift:+.2f} [{row.ci_low:+.2f}, {row.ci_high:+.2f}]",
                    transform=ax.get_yaxis_transform(), va="center", fontsize="small")
        ax.text(1.02, 1.0, "lift [95% CI]", transform=ax.transAxes, va="bottom", fontsize="small",
                fontweight="bold")
    ax.set_yticks(ys, _labels(frame, label).tolist())
    ax.set_xlabel("accuracy   (○ without profile, ● with profile)")
    if title:
        ax.set_title(title)
    return ax


def sensitivity_dumbbell(verdicts: pd.DataFrame, *, palette: dict | None = None, ax: Axes | None = None,
                         title: str | None = "Accuracy lost with another user's profile (own minus swapped)") -> Axes:
    """Per model of :func:`prb_utils.analysis.probe_effects.reading_verdicts` (rows with a sensitivity): the
    sensitivity (accuracy with the own profile minus with the swapped one) as a bar from 0 with its 95% interval
    as a line, the verdict and the twin split (both right / both wrong / one right) written beside it."""
    require_columns(verdicts, ["model", "sensitivity", "sensitivity_low", "sensitivity_high", "verdict"],
                    what="plotted")
    frame = verdicts[verdicts["sensitivity"].notna()].reset_index(drop=True)
    ax = axes_or_new(ax, (7, 0.5 * len(frame) + 1.5))
    ys = np.arange(len(frame))[::-1]
    colours = _colour_of_rows(frame, palette) or [MODEL_COLOURS[0]] * len(frame)
    ax.axvline(0, color=REFERENCE_COLOUR, linestyle="--", linewidth=1)
    ax.barh(ys, frame["sensitivity"], height=0.5, color=colours, alpha=0.85, zorder=1)
    ax.hlines(ys, frame["sensitivity_low"], frame["sensitivity_high"], colors="black", linewidth=1.5, zorder=2)
    for y, row in zip(ys, frame.itertuples(index=False), strict=True):
        sets = getattr(row, "twin_sets", None)
        twins = (f"; twins {row.both_right} both right, {row.both_wrong} both wrong, {row.one_right} one right"
                 if pd.notna(sets) and sets else "")
        ax.text(1.02, y, f"{row.verdict}{twins}", transform=ax.get_yaxis_transform(), va="center",
                fontsize="small")
    ax.set_yticks(ys, frame["model"].astype(str).tolist())
    ax.set_xlabel("sensitivity: accuracy with the own profile minus with another user's [95% CI]")
    if title:
        ax.set_title(title)
    return ax


def control_flips(effects: pd.DataFrame, *, palette: dict | None = None, ax: Axes | None = None,
                  title: str | None = "Flips toward the changed rejected answer: probe vs its control") -> Axes:
    """Per model of the rows of :func:`prb_utils.analysis.probe_effects.probe_effects` tested against a control
    (``parrot`` against ``parrot-control``; rows with a ``flip_rate``): the probe's flip rate (right under the base,
    wrong under the probe) as a filled dot and its control's as an open one, each with its 95% interval, the verdict
    written beside them."""
    require_columns(effects, ["model", "probe", "control_probe", "flip_rate", "flip_low", "flip_high",
                              "control_flip_rate", "control_flip_low", "control_flip_high", "control_verdict"],
                    what="plotted")
    frame = effects[effects["flip_rate"].notna()].reset_index(drop=True)
    ax = axes_or_new(ax, (7, 0.6 * len(frame) + 1.5))
    ys = np.arange(len(frame))[::-1].astype(float)
    colours = _colour_of_rows(frame, palette) or [MODEL_COLOURS[0]] * len(frame)
    for y, colour, row in zip(ys, colours, frame.itertuples(index=False), strict=True):
        ax.hlines(y + 0.12, row.flip_low, row.flip_high, colors=colour, linewidth=1.5)
        ax.plot([row.flip_rate], [y + 0.12], "o", color=colour, label=row.probe if y == ys[0] else None)
        ax.hlines(y - 0.12, row.control_flip_low, row.control_flip_high, colors=REFERENCE_COLOUR, linewidth=1.5)
        ax.plot([row.control_flip_rate], [y - 0.12], "o", mfc="white", color=REFERENCE_COLOUR,
                label=row.control_probe if y == ys[0] else None)
        ax.text(1.02, y, str(row.control_verdict), transform=ax.get_yaxis_transform(), va="center", fontsize="small")
    ax.set_yticks(ys, frame["model"].astype(str).tolist())
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("share of pairs right under the base and wrong under the probe [95% CI]")
    if len(frame):
        ax.legend(loc="lower right", fontsize="small")
    if title:
        ax.set_title(title)
    return ax


def decisive_position_bars(positions: pd.DataFrame, *, palette: dict | None = None, ax: Axes | None = None,
                           title: str | None = None) -> Axes:
    """One model's decisive posts (:func:`prb_utils.analysis.attribution.decisive_positions`, its rows of one base):
    per position, the verdicts that hinge on the post shown there alone (a solid bar), and beside it, where the
    frame has them, those that hinge on the post of that relevance rank (a hatched bar); each bar's share of the
    hinged verdicts is written above it.

    >>> frame = pd.DataFrame({"model": "m", "position": [1, 2, 3], "pairs": [1, 5, 0], "share": [1/6, 5/6, 0],
    ...                       "rank_pairs": [4, 2, 0], "rank_share": [4/6, 2/6, 0]})
    >>> [round(p.get_height()) for p in decisive_position_bars(frame).patches]
    [1, 5, 0, 4, 2, 0]
    """
    require_columns(positions, ["model", "position", "pairs", "share"], what="plotted")
    frame = positions.sort_values("position").reset_index(drop=True)
    ax = axes_or_new(ax, (max(5.0, 0.9 * len(frame) + 2.5), 3.0))
    colour = (_colour_of_rows(frame, palette) or [MODEL_COLOURS[0]])[0]
    xs = frame["position"].astype(int).to_numpy()
    sets = [("pairs", "share", "by position shown", None)]
    if {"rank_pairs", "rank_share"} <= set(frame.columns):
        sets.append(("rank_pairs", "rank_share", "by relevance rank (BM25+)", "//"))
    width = 0.8 / len(sets)
    for i, (count, share, label, hatch) in enumerate(sets):
        at = xs + (i - (len(sets) - 1) / 2) * width
        ax.bar(at, frame[count], width=width, color=colour, alpha=0.45 if hatch else 0.9, hatch=hatch,
               edgecolor="black" if hatch else colour, label=label)
        for x, n, part in zip(at, frame[count], frame[share], strict=True):
            if pd.notna(part):
                ax.text(x, n, f"{part:.0%}", ha="center", va="bottom", fontsize="x-small")
    ax.set_xticks(xs.tolist())
    ax.set_xlabel("decisive post: position shown / relevance rank (1 = first / most relevant)")
    ax.set_ylabel("verdicts hinging on it")
    if len(sets) > 1:
        ax.legend(fontsize="small", frameon=False)
    default = f"{frame['model'].iloc[0]}: which shown post the verdict hinges on" if len(frame) else ""
    ax.set_title(title if title is not None else default)
    return ax

LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P")


def _series_by_category(table: pd.DataFrame, *, x: str, y: str, hue: str | Sequence[str] | None,
                        ax: Axes, style: str | None = None, dodge: float = 0.0,
                        palette: dict | None = None) -> list:
    """Draw one line per hue (x style) level over the ordered categories of ``x``; return the order.

    The colour is the row's model colour (:func:`model_palette`); the line style and marker follow
    ``style``, or, without one, the hue levels that share a model (e.g. its profile conditions)."""
    order = _order(table[x])
    hue_of = _labels(table, hue)
    style_of = _labels(table, style) if style else pd.Series([""] * len(table), index=table.index)
    hues, styles = _order(hue_of), _order(style_of)
    series = [(h, st) for h in hues for st in styles if ((hue_of == h) & (style_of == st)).any()]
    models = _model_of(table)
    colours = {**model_palette(models), **(palette or {})} if models is not None else None
    generic = sns.color_palette(PALETTE)
    pos = {c: i for i, c in enumerate(order)}
    seen: dict[str, list] = {}
    for i, (h, st) in enumerate(series):
        part = table[((hue_of == h) & (style_of == st)).to_numpy()]
        model = str(part["model"].iloc[0]) if colours is not None else h
        colour = colours[model] if colours is not None else generic[hues.index(h) % len(generic)]
        seen.setdefault(model, []).append((h, st))
        j = styles.index(st) if style else len(seen[model]) - 1
        part = part.assign(_pos=part[x].map(pos)).dropna(subset=["_pos"]).sort_values("_pos")
        xs = part["_pos"].to_numpy(dtype=float)
        label = " | ".join(v for v in (h if hue else "", st) if v) or None
        if dodge and len(series) > 1:
            xs = xs + dodge * (i / (len(series) - 1) - 0.5)
        ax.errorbar(xs, part[y], yerr=_err(part, y), marker=MARKERS[j % len(MARKERS)],
                    linestyle=LINESTYLES[j % len(LINESTYLES)], capsize=3, color=colour, label=label)
    ax.set_xticks(range(len(order)), [str(c) for c in order])
    return order


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
                       reference: float | None = 0.5, dodge: float = 0.2, palette: dict | None = None,
                       ax: Axes | None = None,
                       title: str | None = "Accuracy by rubric inferability from the profile") -> Axes:
    """Accuracy per inferability bin (:func:`prb_utils.analysis.breakdowns.by_inferability`): colour = the
    model, line style and marker = ``style`` (None for one style); points are dodged sideways by ``dodge``."""
    style = style if style in table.columns else None
    require_columns(table, [x, y, *_cols(hue)], what="plotted")
    ax = axes_or_new(ax, (7.5, 4.5))
    _series_by_category(table, x=x, y=y, hue=hue, style=style, ax=ax, dodge=dodge, palette=palette)
    _finish(ax, x=x, y=y, hue=hue, style=style, reference=reference, title=title)
    return ax


def length_bias_curve(table: pd.DataFrame, *, x: str = "length_bin", y: str = "accuracy",
                      hue: str | Sequence[str] | None = "model", style: str | None = None,
                      reference: float | None = 0.5, dodge: float = 0.2, palette: dict | None = None,
                      ax: Axes | None = None,
                      title: str | None = "Accuracy by chosen - rejected length (characters)") -> Axes:
    """Accuracy per length-difference bin (:func:`prb_utils.analysis.breakdowns.length_bias`): colour = the
    model, line style = ``style``. Left of the middle bin ("-20..20") the chosen answer is the shorter one."""
    require_columns(table, [x, y, *_cols(hue), *_cols(style)], what="plotted")
    ax = axes_or_new(ax, (8, 4.5))
    _series_by_category(table, x=x, y=y, hue=hue, style=style, ax=ax, dodge=dodge, palette=palette)
    _finish(ax, x=x, y=y, hue=hue, style=style, reference=reference, title=title)
    return ax


def _panels(n: int, *, col_wrap: int, panel: tuple[float, float], sharex: bool = True,
            sharey: bool = True) -> tuple[Figure, list[Axes]]:
    """A grid of ``n`` panels, ``col_wrap`` a row at most, no wider than :data:`PAGE_WIDTH_IN`."""
    nrows = max(1, -(-n // max(col_wrap, 1)))
    ncols = max(1, -(-n // nrows))  # balanced rows: 5 panels with col_wrap 4 are 3 + 2
    width = min(PAGE_WIDTH_IN, panel[0] * ncols + 1.0)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, panel[1] * nrows + 0.9), sharex=sharex,
                             sharey=sharey, squeeze=False, layout="constrained")
    flat = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    for ax in flat[:n]:
        ax.tick_params(labelbottom=True)  # every panel keeps its x tick labels, even above an empty slot
    return fig, flat[:n]


def _style_levels(frame: pd.DataFrame, style: str | None) -> list[str]:
    """The levels of ``style`` (``[""]`` for none); profile conditions as none, top1, top2, ..., full, others."""
    if not style:
        return [""]
    levels = [str(v) for v in _order(frame[style])]
    if style != "profile":
        return levels

    return sorted(levels, key=condition_sort_key)


def _margin_panels(margins: pd.DataFrame, *, x: str, facet: str, style: str | None, palette: dict | None,
                   col_wrap: int) -> tuple[Figure, str | None, list, list]:
    """What the margin figures share: the column checks, one panel per ``facet`` level with its colour, and
    per panel the rows of each ``style`` level. Returns (figure, style or None, style levels, panels), a panel
    being (axes, level, colour, [(index, style level, rows)])."""
    style = style if style and style in margins.columns else None
    require_columns(margins, [x, facet], what="plotted")
    facets = _order(margins[facet].astype(str))
    styles = _style_levels(margins, style)
    colours = {**model_palette(facets), **(palette or {})}
    fig, axes = _panels(len(facets), col_wrap=col_wrap, panel=(2.7, 2.2))
    panels = []
    for ax, name in zip(axes, facets, strict=True):
        part = margins[margins[facet].astype(str) == name]
        groups = [(j, st, part if not style else part[part[style].astype(str) == st]) for j, st in enumerate(styles)]
        panels.append((ax, name, colours[name], groups))
    return fig, style, styles, panels


def _label_panel(ax, name: str, *, xlabel: str, ylabel: str | None = None) -> None:
    """A facet panel's title (its model) and axis labels, in the panels' one font size."""
    ax.set_title(_wrap(name, 28), fontsize=10)
    ax.tick_params(labelsize=10)
    ax.set_xlabel(xlabel.replace("_", " "), fontsize=10)
    if ylabel is not None:
        ax.set_ylabel(ylabel, fontsize=10)


def _finish_panels(fig: Figure, styles: list, *, style: str | None, title: str | None, lines: bool) -> Figure:
    """The style legend (when a ``style`` column splits the panels) and the figure's title."""
    if style:
        _style_legend(fig, styles, title=style, lines=lines)
    if title:
        fig.suptitle(title, fontsize=12, fontweight="bold")
    return fig


def _style_legend(fig: Figure, levels: list, *, title: str, lines: bool) -> None:
    handles = [Line2D([], [], color="0.25", marker=None if lines else MARKERS[j % len(MARKERS)],
                      linestyle=LINESTYLES[j % len(LINESTYLES)] if lines else "", label=str(level))
               for j, level in enumerate(levels)]
    if handles:
        fig.legend(handles=handles, title=title, loc="outside lower center", ncol=min(len(handles), 6),
                   frameon=False, fontsize=10, title_fontsize=10)


def theme_panels(table: pd.DataFrame, *, y: str = "theme", x: str = "accuracy", facet: str = "model",
                 style: str | None = "profile", col_wrap: int = 5, palette: dict | None = None,
                 reference: float | None = 0.5, title: str | None = "Accuracy by rubric theme (95% CI)") -> Figure:
    """Small multiples of accuracy per rubric theme (:func:`prb_utils.analysis.breakdowns.by_theme`): one
    panel per ``facet`` level (a model, in its colour), the themes on a shared y axis with their pair
    count, one marker per ``style`` level (profile condition) with its CI. Returns the Figure."""
    style = style if style and style in table.columns else None
    require_columns(table, [x, y, facet], what="plotted")
    levels = _order(table[y])
    facets = _order(table[facet].astype(str))
    styles = _style_levels(table, style)
    colours = {**model_palette(facets), **(palette or {})}
    per_level = _constant_counts(table, table[y].astype(str), "n")
    fig, axes = _panels(len(facets), col_wrap=col_wrap, panel=(2.7, 0.3 * len(levels) * max(1, len(styles) / 2)
                                                                  + 0.8))
    pos = {str(level): i for i, level in enumerate(levels)}
    step = 0.6 / max(len(styles), 1)
    for ax, name in zip(axes, facets, strict=True):
        part = table[table[facet].astype(str) == name]
        for j, st in enumerate(styles):
            sub = part if not style else part[part[style].astype(str) == st]
            ys = sub[y].astype(str).map(pos).to_numpy(dtype=float) + (j - (len(styles) - 1) / 2) * step
            ax.errorbar(sub[x], ys, xerr=_err(sub, x), fmt=MARKERS[j % len(MARKERS)], color=colours[name],
                        capsize=2, markersize=5, linewidth=1)
        if reference is not None:
            ax.axvline(reference, color="grey", linestyle="--", linewidth=1)
        _label_panel(ax, name, xlabel=x)
        if x == "accuracy":
            ax.set_xlim(-0.02, 1.02)
    names = [f"{level} (n={int(per_level[str(level)])})" if per_level else str(level) for level in levels]
    for ax in axes:
        ax.set_yticks(range(len(levels)), names)
        ax.set_ylim(len(levels) - 0.5, -0.5)
    return _finish_panels(fig, styles, style=style, title=title, lines=False)


def margin_panels(margins: pd.DataFrame, *, x: str = "margin_std", facet: str = "model",
                  style: str | None = "profile", col_wrap: int = 5, palette: dict | None = None,
                  title: str | None = "Standardized score margin (chosen - rejected)") -> Figure:
    """Small multiples of the per-item margin density (:func:`prb_utils.analysis.breakdowns.score_margins`):
    one panel per ``facet`` level (a model, in its colour), the same x and y axes in every panel, one line
    style per ``style`` level (profile condition). A level whose margins do not vary (or has under two
    values) is drawn as a vertical line at its value. The dashed line at 0 is the decision boundary (right
    of it = correct). Returns the Figure."""
    fig, style, styles, panels = _margin_panels(margins, x=x, facet=facet, style=style, palette=palette,
                                                col_wrap=col_wrap)
    for ax, name, colour, groups in panels:
        for j, st, sub in groups:
            values = sub[x].dropna().to_numpy(dtype=float)
            line = LINESTYLES[j % len(LINESTYLES)]
            if len(values) >= 2 and np.ptp(values) > 0:
                sns.kdeplot(x=values, ax=ax, color=colour, linestyle=line, linewidth=1.8,
                            warn_singular=False, label=st or None)
                if j == 0:
                    sns.kdeplot(x=values, ax=ax, color=colour, fill=True, alpha=0.15, linewidth=0,
                                warn_singular=False)
            elif len(values):
                ax.axvline(values[0], color=colour, linestyle=line, linewidth=2, label=st or None)
        ax.axvline(0, color="grey", linestyle="--", linewidth=1)
        _label_panel(ax, name, xlabel=x, ylabel="density")
    return _finish_panels(fig, styles, style=style, title=title, lines=True)


def reliability_diagram(bins: pd.DataFrame, *, hue: str = "model", style: str | None = "profile",
                        palette: dict | None = None,
                        title: str | None = "Reliability: predicted P(first answer preferred) vs observed"
                        ) -> Figure:
    """The reliability diagram of :func:`prb_utils.analysis.calibration.reliability_table`: mean prediction
    against observed frequency per bin (colour = the model, line style and marker = ``style``), the dashed
    diagonal is perfect calibration; below it, the number of predictions per bin (the bin counts). Returns the
    Figure."""
    style = style if style and style in bins.columns else None
    require_columns(bins, ["bin_low", "bin_high", "n", "mean_predicted", "observed", hue], what="plotted")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 6.5), sharex=True, height_ratios=(3, 1),
                                      layout="constrained")
    names = _order(bins[hue].astype(str))
    styles = _style_levels(bins, style)
    colours = {**model_palette(names), **(palette or {})}
    top.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1)
    for name in names:
        for j, st in enumerate(styles):
            part = bins[(bins[hue].astype(str) == name) & ((bins[style].astype(str) == st) if style else True)]
            if part.empty:
                continue
            part = part.sort_values("bin_low")
            label = " | ".join(v for v in (name, st) if v)
            kwargs = {"color": colours[name], "linestyle": LINESTYLES[j % len(LINESTYLES)]}
            top.plot(part["mean_predicted"], part["observed"], marker=MARKERS[j % len(MARKERS)], label=label,
                     **kwargs)
            bottom.step(part["bin_low"].tolist() + [part["bin_high"].iloc[-1]],
                        part["n"].tolist() + [part["n"].iloc[-1]], where="post", **kwargs)
    top.set_xlim(0, 1)
    top.set_ylim(-0.02, 1.02)
    top.set_ylabel("observed frequency")
    bottom.set_xlabel("predicted probability (bin mean)")
    bottom.set_ylabel("predictions")
    _legend(top, title=" | ".join([hue, *([style] if style else [])]))
    if title:
        top.set_title(title)
    return fig


def margin_histograms(margins: pd.DataFrame, *, x: str = "margin_std", facet: str = "model",
                      style: str | None = "profile", bins: int = 20, col_wrap: int = 5,
                      palette: dict | None = None,
                      title: str | None = "Histogram of the standardized margin (chosen - rejected)") -> Figure:
    """Small multiples of per-pair margin counts (:func:`prb_utils.analysis.breakdowns.score_margins`): one
    panel per ``facet`` level (a model, in its colour), the same ``bins`` equal-width bins in every panel, one
    line style per ``style`` level; the dashed line at 0 is the decision boundary. Returns the Figure."""
    fig, style, styles, panels = _margin_panels(margins, x=x, facet=facet, style=style, palette=palette,
                                                col_wrap=col_wrap)
    values = margins[x].to_numpy(dtype=float)
    finite = values[np.isfinite(values)]
    edges = np.histogram_bin_edges(finite if len(finite) else [0.0], bins=bins)
    for ax, name, colour, groups in panels:
        for j, _, sub in groups:
            ax.hist(sub[x].dropna().to_numpy(dtype=float), bins=edges, histtype="step", color=colour,
                    linestyle=LINESTYLES[j % len(LINESTYLES)], linewidth=1.8)
        ax.axvline(0, color="grey", linestyle="--", linewidth=1)
        _label_panel(ax, name, xlabel=x, ylabel="pairs")
    return _finish_panels(fig, styles, style=style, title=title, lines=True)
