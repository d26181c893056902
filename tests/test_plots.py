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
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    long = acc_frame({"model": ["a"], "subset": ["Lifestyle_and_Personal_Development"]})
    ax = plots.heatmap(long)
    assert ax.get_xticklabels()[0].get_text() == "Lifestyle and\nPersonal\nDevelopment"


def test_lift_dumbbell_points_and_lift_labels():
    lift = pd.DataFrame({"model": ["a", "b"], "profile": ["top3", "top3"], "accuracy_baseline": [0.5, 0.6],
                         "accuracy_condition": [0.7, 0.55], "lift": [0.2, -0.05], "ci_low": [0.1, -0.15],
                         "ci_high": [0.3, 0.05]})
    ax = plots.lift_dumbbell(lift)
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(scatters) == 2 and all(len(c.get_offsets()) == 2 for c in scatters)
    assert sorted(t.get_text() for t in ax.texts) == ["+0.20 [+0.10, +0.30]", "-0.05 [-0.15, +0.05]",
                                                      "lift [95% CI]"]


def test_theme_bars_one_bar_per_theme_and_model():
    themes = ["tone", "depth", "budget", "other"]
    table = acc_frame({"model": ["a"] * 4 + ["b"] * 3, "theme": themes + themes[:3]})
    table["theme"] = pd.Categorical(table["theme"], categories=["tone", "depth", "budget", "safety", "other"],
                                    ordered=True)
    ax = plots.theme_bars(table)
    assert len(ax.patches) == 7
    assert [t.get_text() for t in ax.get_xticklabels()] == themes  # empty "safety" is not drawn


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


def test_margin_densities_one_curve_per_model_constant_as_line():
    rng = np.random.default_rng(0)
    margins = pd.DataFrame({"model": ["a"] * 50 + ["b"] * 50 + ["c"] * 3,
                            "margin_std": np.r_[rng.normal(1, 1, 50), rng.normal(-1, 1, 50), [0.5] * 3]})
    ax = plots.margin_densities(margins)
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["a", "b", "c"]
    assert len([c for c in ax.collections if c.get_label() in ("a", "b")]) == 2
    assert any(line.get_xdata()[0] == 0.5 for line in ax.lines)


def test_plots_draw_on_a_given_axes():
    fig, axes = plt.subplots(1, 2)
    table = acc_frame({"model": ["a", "b"], "subset": ["x", "x"]})
    assert plots.forest(table, label="model", ax=axes[0]) is axes[0]
    assert plots.heatmap(table, ax=axes[1]).figure is fig
