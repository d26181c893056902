"""Downstream plots draw what the frames hold (seeded fixtures; figures closed)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from prb_utils.downstream.bon import bon_curves  # noqa: E402
from prb_utils.downstream.correlation import compare_benchmarks, rank_agreement_ci  # noqa: E402
from prb_utils.downstream.plots import bon_curve_plot, coefficient_bars, rank_rank, scatter_fit  # noqa: E402
from prb_utils.errors import PRBError  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_bon_curve_plot():
    rng = np.random.default_rng(0)
    quality = rng.random((4, 4))  # one rubric quality per sample, shared by the RMs
    rows = [dict(model=m, subset="s", id=f"q{q}", sample_idx=i, rm_score=rng.random(), quality=quality[q, i])
            for m in ("a", "b") for q in range(4) for i in range(4)]
    ax = bon_curve_plot(bon_curves(pd.DataFrame(rows), [1, 2, 4]), judge_label="proxy:minilm - proxy judge")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["a", "b", "oracle", "random"]
    assert "proxy" in ax.get_ylabel()


def test_scatter_rank_and_bars():
    bench = pd.Series([0.6, 0.7, 0.8, 0.75], index=list("abcd"))
    down = pd.Series([0.3, 0.5, 0.6, 0.4], index=list("abcd"))
    ax = scatter_fit(bench, down)
    assert {t.get_text() for t in ax.texts} == set("abcd")
    assert "OLS" in ax.get_legend().get_texts()[0].get_text()
    ax = rank_rank(bench, down)
    assert len(ax.texts) == 4
    ax = coefficient_bars(rank_agreement_ci(bench, down, n_boot=50))
    assert len(ax.patches) == 6
    table = compare_benchmarks(pd.DataFrame({"prb": bench, "rb": bench[::-1].to_numpy()}),
                               pd.DataFrame({"bon@4": down}), n_boot=50)
    ax = coefficient_bars(table, hue="benchmark")
    assert len(ax.patches) == 12
    with pytest.raises(PRBError):
        scatter_fit(bench.iloc[:1], down.iloc[:1])


def test_chance_ticks_on_coefficient_bars():
    bench = pd.Series([0.6, 0.7, 0.8, 0.75], index=list("abcd"))
    ax = coefficient_bars(rank_agreement_ci(bench, bench[::-1].to_numpy(), n_boot=20))
    assert "chance (random ranking)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_one_copy_of_the_plot_helpers():
    import ast
    import inspect

    from prb_utils.analysis import metrics
    from prb_utils.analysis import plots as analysis_plots
    from prb_utils.downstream import plots as downstream_plots

    assert downstream_plots.axes_or_new is analysis_plots.axes_or_new
    assert downstream_plots.require_columns is analysis_plots.require_columns is metrics.require_columns
    assert downstream_plots.PALETTE == analysis_plots.PALETTE
    defined = {n.name for n in ast.parse(inspect.getsource(downstream_plots)).body if isinstance(n, ast.FunctionDef)}
    assert not defined & {n.name for n in ast.parse(inspect.getsource(analysis_plots)).body
                          if isinstance(n, ast.FunctionDef)}
    assert "downstream" not in "".join(line for line in inspect.getsource(analysis_plots).splitlines()
                                       if line.startswith(("import", "from")))


def test_rms_keep_their_colour_from_the_shared_palette():
    import matplotlib.colors as mcolors

    from prb_utils.analysis.plots import REFERENCE_COLOUR, model_palette

    rng = np.random.default_rng(1)
    quality = rng.random((3, 4))  # one judgement per sample, shared by the RMs
    rows = [dict(model=m, subset="s", id=f"q{q}", sample_idx=i, rm_score=rng.random(), quality=quality[q, i])
            for m in ("lexical", "length") for q in range(3) for i in range(4)]
    ax = bon_curve_plot(bon_curves(pd.DataFrame(rows), [1, 2, 4]))
    drawn = {line.get_label(): mcolors.to_hex(line.get_color()) for line in ax.lines}
    palette = model_palette(["length", "lexical"])
    assert drawn["length"] == mcolors.to_hex(palette["length"]) != drawn["lexical"]
    assert drawn["lexical"] == mcolors.to_hex(palette["lexical"])
    assert drawn["oracle"] == drawn["random"] == mcolors.to_hex(REFERENCE_COLOUR)
    bench = pd.Series([0.6, 0.7, 0.8], index=["length", "lexical", "classifier:x"])
    for ax in (scatter_fit(bench, bench[::-1]), rank_rank(bench, bench[::-1])):
        points = ax.collections[0]
        assert [mcolors.to_hex(c) for c in points.get_facecolors()] == [
            mcolors.to_hex(c) for c in model_palette(bench.index).values()]


def test_group_markers_on_scatter_and_rank_rank():
    bench = pd.Series([0.6, 0.7, 0.8, 0.75, 0.2], index=list("abcde"))
    down = pd.Series([0.3, 0.5, 0.6, 0.4, 0.1], index=list("abcde"))
    groups = pd.Series(["on-policy", "on-policy", "off-policy", "off-policy", "poor"], index=list("abcde"))
    ax = scatter_fit(bench, down, groups=groups)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:3] == ["on-policy", "off-policy", "poor"] and "OLS" in labels[3]
    assert [len(c.get_offsets()) for c in ax.collections[:3]] == [2, 2, 1]
    ax = rank_rank(bench, down, groups=groups)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["on-policy", "off-policy", "poor"]
    assert {t.get_text() for t in ax.texts} == set("abcde")
