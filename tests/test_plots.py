"""Each plot of prb_utils.analysis.plots renders on synthetic tidy frames (Agg backend) with the expected content."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402

from prb_utils.analysis import plots  # noqa: E402
from prb_utils.errors import PRBError  # noqa: E402
from prb_utils.schema import DEFAULT_ZOO  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def acc_frame(extra: dict) -> pd.DataFrame:
    frame = pd.DataFrame(extra)
    frame["accuracy"] = np.linspace(0.3, 0.8, len(frame))
    frame["ci_low"] = frame["accuracy"] - 0.1
    frame["ci_high"] = frame["accuracy"] + 0.1
    frame["n"] = 20
    return frame


def errorbar_points(ax) -> int:
    return sum(len(line.get_xdata()) for line in ax.lines if line.get_marker() in plots.MARKERS)


def test_set_theme_uses_the_colorblind_palette():
    colours = plots.set_theme()
    assert colours == sns.color_palette("colorblind")
    first = plt.rcParams["axes.prop_cycle"].by_key()["color"][0]
    assert matplotlib.colors.to_hex(first) == matplotlib.colors.to_hex(colours[0])
    matplotlib.rcdefaults()


def test_forest_one_point_per_row_with_labels():
    table = acc_frame({"model": ["a", "a", "b"], "profile": ["none", "full", "none"]})
    ax = plots.forest(table, hue="model")
    assert errorbar_points(ax) == 3
    assert sorted(t.get_text() for t in ax.get_yticklabels()) == ["a | full", "a | none", "b | none"]
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["a", "b"]
    with pytest.raises(PRBError, match="lacks the column"):
        plots.forest(table.drop(columns="accuracy"))


def test_forest_label_order_is_top_to_bottom():
    table = acc_frame({"model": ["first", "second"], "profile": ["none", "none"]})
    ax = plots.forest(table, label="model", reference=None)
    ticks = dict(zip([t.get_text() for t in ax.get_yticklabels()], ax.get_yticks(), strict=True))
    assert ticks["first"] > ticks["second"]  # the first row is drawn on top
    assert not [line for line in ax.lines if line.get_linestyle() == "--"]


def test_heatmap_cells_and_annotations():
    table = acc_frame({"model": ["a", "a", "a", "b", "b", "b"], "subset": ["x", "y", "z"] * 2})
    ax = plots.heatmap(table)
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 6 and texts[0] == f"{table.accuracy.iloc[0]:.2f}"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a (n=20)", "b (n=20)"]  # the same n along a row
    ax = plots.heatmap(table, counts=None)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    long = acc_frame({"model": ["a"], "subset": ["Lifestyle_and_Personal_Development"]})
    ax = plots.heatmap(long)
    assert ax.get_xticklabels()[0].get_text() == "Lifestyle and\nPersonal\nDevelopment"


def test_heatmap_counts_in_cells_when_they_differ_along_a_row():
    table = acc_frame({"model": ["a", "a"], "subset": ["x", "y"]}).assign(n=[3, 7])
    ax = plots.heatmap(table)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a"]
    assert [t.get_text() for t in ax.texts] == [f"{table.accuracy.iloc[0]:.2f}\n(n=3)",
                                                f"{table.accuracy.iloc[1]:.2f}\n(n=7)"]


def test_category_heatmap_is_readable_at_page_width():
    # 23 categories x 10 jobs (the default zoo under two conditions), as on the sample: the old layout
    # made a figure about 40 inches wide, shown at 1234 px with labels about 5 px high
    jobs = [(m, p) for m in DEFAULT_ZOO for p in ("none", "top3")]
    table = acc_frame({"category": [f"category{i}" for i in range(23) for _ in jobs],
                       "model": [m for _ in range(23) for m, _ in jobs],
                       "profile": [p for _ in range(23) for _, p in jobs]})
    ax = plots.heatmap(table, rows="category", cols=["model", "profile"])
    fig = ax.figure
    assert fig.get_size_inches()[0] <= plots.PAGE_WIDTH_IN
    assert plots.smallest_text_px(fig) >= plots.MIN_TEXT_PX
    assert ax.get_yticklabels()[0].get_text() == "category0 (n=20)"
    assert ax.get_xticklabels()[0].get_text() == "embedding:minilm\nnone"
    assert len(ax.texts) == 230


def test_smallest_text_px_scales_a_wide_figure_down_to_the_page():
    fig, ax = plt.subplots(figsize=(24.68, 2))
    ax.set_axis_off()
    ax.text(0, 0, "tiny", fontsize=10)
    fig.text(0, 0, "left")
    fig.text(1, 1, "right", fontsize=10)
    width_px = fig.get_tightbbox(fig.canvas.get_renderer()).width * fig.dpi
    expected = 10 * fig.dpi / 72 * plots.DISPLAY_WIDTH_PX / width_px
    assert plots.smallest_text_px(fig) == pytest.approx(expected, rel=1e-6)
    assert plots.smallest_text_px(fig) < plots.MIN_TEXT_PX  # a 2468 px wide figure is shown at half size
    small, ax = plt.subplots(figsize=(4, 2))
    ax.set_title("t", fontsize=10)
    assert plots.smallest_text_px(small) == pytest.approx(10 * small.dpi / 72)  # narrow: never enlarged


def test_lift_dumbbell_points_and_lift_labels():
    lift = pd.DataFrame({"model": ["a", "b"], "profile": ["top3", "top3"], "accuracy_baseline": [0.5, 0.6],
                         "accuracy_condition": [0.7, 0.55], "lift": [0.2, -0.05], "ci_low": [0.1, -0.15],
                         "ci_high": [0.3, 0.05]})
    ax = plots.lift_dumbbell(lift)
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(scatters) == 2 and all(len(c.get_offsets()) == 2 for c in scatters)
    assert sorted(t.get_text() for t in ax.texts) == ["+0.20 [+0.10, +0.30]", "-0.05 [-0.15, +0.05]",
                                                      "lift [95% CI]"]


def test_theme_panels_one_panel_per_model_themes_with_n():
    themes = ["tone", "depth", "budget", "other"]
    table = acc_frame({"model": ["a"] * 8 + ["b"] * 6, "profile": ["none", "top3"] * 7,
                       "theme": [t for t in themes for _ in range(2)] + [t for t in themes[:3] for _ in range(2)]})
    table["theme"] = pd.Categorical(table["theme"], categories=["tone", "depth", "budget", "safety", "other"],
                                    ordered=True)
    fig = plots.theme_panels(table)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["a", "b"]
    labels = [t.get_text() for t in axes[0].get_yticklabels()]
    assert labels == ["tone (n=20)", "depth (n=20)", "budget (n=20)", "other (n=20)"]  # empty "safety" left out
    assert [errorbar_points(ax) for ax in axes] == [8, 6]
    assert sorted(t.get_text() for t in fig.legends[0].get_texts()) == ["none", "top3"]
    assert plots.smallest_text_px(fig) >= plots.MIN_TEXT_PX


def test_inferability_and_length_curves_follow_category_order():
    bins = pd.Categorical(["low", "medium", "high"] * 2, categories=["low", "medium", "high"], ordered=True)
    table = acc_frame({"model": ["a"] * 3 + ["b"] * 3, "profile": "none", "inferability_bin": bins})
    ax = plots.inferability_curve(table)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["low", "medium", "high"]
    assert errorbar_points(ax) == 6
    assert len(ax.get_legend().get_texts()) == 2
    lengths = pd.Categorical([">=21", "<=-21", "-3..3"], categories=["<=-21", "-3..3", ">=21"], ordered=True)
    ax = plots.length_bias_curve(acc_frame({"model": "a", "length_bin": lengths}))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["<=-21", "-3..3", ">=21"]
    line = next(line for line in ax.lines if line.get_marker() == "o")
    assert line.get_xdata().tolist() == [0, 1, 2]
    assert line.get_ydata().tolist() == pytest.approx([0.55, 0.8, 0.3])  # y follows the x order


def test_margin_panels_one_panel_per_model_on_shared_axes():
    rng = np.random.default_rng(0)
    margins = pd.DataFrame({"model": ["a"] * 100 + ["b"] * 50 + ["c"] * 3,
                            "profile": ["top3", "none"] * 50 + ["none"] * 50 + ["none"] * 3,
                            "margin_std": np.r_[rng.normal(1, 1, 100), rng.normal(-3, 1, 50), [0.5] * 3]})
    fig = plots.margin_panels(margins)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["a", "b", "c"]
    assert len({ax.get_xlim() for ax in axes}) == 1 and len({ax.get_ylim() for ax in axes}) == 1
    colour = plots.model_palette(["a"])["a"]
    curves = [line for line in axes[0].lines if len(line.get_xdata()) > 2]
    assert len(curves) == 2
    assert {line.get_linestyle() for line in curves} == {"-", "--"}  # none solid, top3 dashed
    assert all(matplotlib.colors.to_hex(line.get_color()) == matplotlib.colors.to_hex(colour) for line in curves)
    assert any(line.get_xdata()[0] == 0.5 for line in axes[2].lines)  # constant margins: a vertical line
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["none", "top3"]


def _hex(colour) -> str:
    return matplotlib.colors.to_hex(colour)


def test_model_palette_is_stable_whatever_else_is_shown():
    alone = plots.model_palette(["length"])["length"]
    assert plots.model_palette(["classifier:z", "length", "judge:smollm2"])["length"] == alone
    assert _hex(alone) == _hex(sns.color_palette("colorblind")[3])  # the default zoo keeps fixed slots
    many = plots.model_palette([f"classifier:m{i}" for i in range(12)])
    assert len({_hex(c) for c in many.values()}) == 12  # beyond the 9 safe colours: still distinct
    grey = _hex(sns.color_palette("colorblind")[7])  # grey is kept for references (chance, oracle, random)
    assert grey not in {_hex(c) for c in plots.model_palette([*DEFAULT_ZOO, "a", "b", "c", "d"]).values()}
    # other models: sorted order of all the registered ones, so a figure showing fewer keeps their colours
    plots.set_theme(models=["classifier:b", "classifier:a", "length"])
    try:
        b_alone = plots.model_palette(["classifier:b"])["classifier:b"]
        both = plots.model_palette(["classifier:a", "classifier:b"])
        assert b_alone == both["classifier:b"] == plots.MODEL_COLOURS[6]
        assert both["classifier:a"] == plots.MODEL_COLOURS[5]
    finally:
        plots.set_theme()
        matplotlib.rcdefaults()
    assert plots.model_palette(["classifier:b"])["classifier:b"] == plots.MODEL_COLOURS[5]  # nothing registered


def test_every_figure_draws_a_model_in_its_colour():
    colour = _hex(plots.model_palette(["length"])["length"])
    acc = acc_frame({"model": ["lexical", "length"], "profile": ["none", "none"]})
    ax = plots.forest(acc)
    assert colour in {_hex(line.get_color()) for line in ax.lines if line.get_marker() == "o"}
    lift = pd.DataFrame({"model": ["length"], "profile": ["top3"], "accuracy_baseline": [0.5],
                         "accuracy_condition": [0.7], "lift": [0.2], "ci_low": [0.1], "ci_high": [0.3]})
    ax = plots.lift_dumbbell(lift)
    filled = [c for c in ax.collections if isinstance(c, PathCollection)][-1]
    assert _hex(filled.get_facecolors()[0]) == colour
    bins = pd.Categorical(["low", "high"], categories=["low", "high"], ordered=True)
    curve = acc_frame({"model": ["length", "length"], "profile": "none", "inferability_bin": bins})
    for ax in (plots.inferability_curve(curve),
               plots.length_bias_curve(curve.rename(columns={"inferability_bin": "length_bin"}), style="profile")):
        assert {_hex(line.get_color()) for line in ax.lines if line.get_marker() in plots.MARKERS} == {colour}
    theme = acc_frame({"model": ["length"], "profile": ["none"], "theme": ["tone"]})
    fig = plots.theme_panels(theme)
    assert {_hex(line.get_color()) for line in fig.axes[0].lines if line.get_marker() in plots.MARKERS} == {colour}


def test_plots_draw_on_a_given_axes():
    fig, axes = plt.subplots(1, 2)
    table = acc_frame({"model": ["a", "b"], "subset": ["x", "x"]})
    assert plots.forest(table, label="model", ax=axes[0]) is axes[0]
    assert plots.heatmap(table, ax=axes[1]).figure is fig


def test_the_sensitivity_figure_draws_the_difference_its_title_names():
    """Page 05's figure: one bar per model, its length the sensitivity (own minus swapped accuracy), its interval a
    line; the title and axis name that difference, not the two accuracies."""
    verdicts = pd.DataFrame({"model": ["lexical", "embedding:minilm"], "sensitivity": [0.238, -0.05],
                             "sensitivity_low": [0.05, -0.2], "sensitivity_high": [0.42, 0.1],
                             "verdict": ["reads the user", "inconclusive"]})
    ax = plots.sensitivity_dumbbell(verdicts)
    widths = sorted(round(p.get_width(), 3) for p in ax.patches)
    assert widths == sorted(verdicts["sensitivity"])
    assert "minus" in ax.get_title() and "minus" in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["lexical", "embedding:minilm"]   # the first on top
