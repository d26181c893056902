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


def test_the_first_k_panel_draws_its_own_oracle_and_no_rm_above_it():
    # every question's first sample is its best answer: the first-k picks at k=1 sit above the exact oracle
    rng = np.random.default_rng(4)
    quality = np.hstack([np.ones((4, 1)), rng.random((4, 3)) * 0.5])
    rows = [dict(model=m, subset="s", id=f"q{q}", sample_idx=i, rm_score=rng.random(), quality=quality[q, i])
            for m in ("a", "b") for q in range(4) for i in range(4)]
    curves = bon_curves(pd.DataFrame(rows), [1, 2, 4], n_boot=50)
    ax = bon_curve_plot(curves, method="first")
    lines = {line.get_label(): np.asarray(line.get_ydata(), float) for line in ax.lines}
    assert set(lines) == {"a", "b", "oracle of the first k", "random of the first k"}
    expected = curves[(curves.model == "oracle") & (curves.method == "first")].sort_values("k")["mean"].to_numpy()
    np.testing.assert_allclose(lines["oracle of the first k"], expected)
    for model in ("a", "b"):
        assert (lines[model] <= lines["oracle of the first k"] + 1e-12).all()
    exact_oracle = curves[(curves.model == "oracle") & (curves.method == "exact")].sort_values("k")["mean"]
    assert lines["a"][0] > exact_oracle.iloc[0]   # the exact oracle would have been passed at k=1
    # curves without first-k reference rows (an older file) get no reference line at all, not another rule's
    older = curves[~(curves.model.isin(["oracle", "random"]) & (curves.method == "first"))]
    labels = [line.get_label() for line in bon_curve_plot(older, method="first").lines]
    assert labels == ["a", "b"]


def _agreement_table(p_perm, ci_low, chance=0.0):
    return pd.DataFrame({"metric": ["spearman", "kendall", "ndcg"], "estimate": [0.8, 0.6, 0.9],
                         "ci_low": ci_low, "ci_high": [1.0, 1.0, 1.0], "chance": chance, "p_perm": p_perm})


def test_a_coefficient_not_above_chance_is_drawn_hollow_and_the_legend_says_why():
    # spearman: evidence; kendall: p too large; ndcg: the interval reaches its chance value 0.85
    table = _agreement_table([0.01, 0.2, 0.01], [0.5, 0.2, 0.8], chance=[0.0, 0.0, 0.85])
    ax = coefficient_bars(table)
    filled = [p.get_height() for p in ax.patches if p.get_facecolor()[3] > 0]
    hollow = [p.get_height() for p in ax.patches if p.get_facecolor()[3] == 0]
    assert filled == [pytest.approx(0.8)] and sorted(hollow) == [pytest.approx(0.6), pytest.approx(0.9)]
    assert any(t.get_text().startswith("hollow: not above chance") for t in ax.get_legend().get_texts())
    # every coefficient with evidence: all filled, and no word about hollow bars
    ax = coefficient_bars(_agreement_table([0.01] * 3, [0.5, 0.3, 0.7]))
    assert all(p.get_facecolor()[3] > 0 for p in ax.patches) and len(ax.patches) == 3
    assert not any("hollow" in t.get_text() for t in ax.get_legend().get_texts())
    # a table without p_perm (no test of chance) is drawn as before
    ax = coefficient_bars(_agreement_table([0.5] * 3, [0.0] * 3).drop(columns="p_perm"))
    assert all(p.get_facecolor()[3] > 0 for p in ax.patches)
