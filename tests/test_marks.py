"""The marks of a position-locked judge and the oracle condition (``prb_utils.analysis.marks``): which names carry
which mark, and every figure a page draws where the locked judge appears names it as locked, in every legend
entry, tick label and title that names it, after the figure is drawn (tick labels are made anew on each draw)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from prb_utils.analysis import breakdowns, plots  # noqa: E402
from prb_utils.analysis import profile_curves as pc  # noqa: E402
from prb_utils.analysis.findings import compute_findings  # noqa: E402
from prb_utils.analysis.marks import (  # noqa: E402
    LOCKED_MARK,
    ORACLE_MARK,
    current_marks,
    label_marks,
    mark_frame,
    mark_label,
    marks_for,
    set_marks,
)
from prb_utils.analysis.uncertainty import ResamplingPlan  # noqa: E402
from prb_utils.downstream import plots as downstream_plots  # noqa: E402
from prb_utils.notebook import pair_view, widgets  # noqa: E402

JUDGE = "judge:x"


@pytest.fixture(autouse=True)
def _clean():
    yield
    plt.close("all")
    set_marks(None)


def store_rows() -> pd.DataFrame:
    """Per-item rows as the store holds them: a judge that always answers "A" (locked) and two RMs that read the
    profile, under none and top3 on 12 pairs of two subsets and two categories, and lexical under the oracle."""
    rng = np.random.default_rng(0)
    ids = [f"q{i}" for i in range(12)]
    frames = []
    for profile in ("none", "top3"):
        verdict_ab, verdict_ba = ["chosen"] * 12, ["rejected"] * 12   # "A" whatever the order
        frames.append(pd.DataFrame({"model": JUDGE, "kind": "judge", "profile": profile, "id": ids,
                                    "score_chosen": 0.5, "score_rejected": 0.5, "outcome": "correct",
                                    "verdict_ab": verdict_ab, "verdict_ba": verdict_ba}))
        for model, kind in (("lexical", "lexical"), ("embedding:e", "embedding")):
            chosen = rng.normal(size=12) + (0.8 if profile == "top3" else 0.0)
            frames.append(pd.DataFrame({"model": model, "kind": kind, "profile": profile, "id": ids,
                                        "score_chosen": chosen, "score_rejected": 0.0,
                                        "outcome": np.where(chosen > 0, "correct", "wrong")}))
    frames.append(pd.DataFrame({"model": "lexical", "kind": "lexical", "profile": "rubric", "id": ids,
                                "score_chosen": 1.0, "score_rejected": 0.0, "outcome": "correct"}))
    rows = pd.concat(frames, ignore_index=True)
    number = rows["id"].str[1:].astype(int)
    return rows.assign(subset=np.where(number < 6, "Art_and_Entertainment", "Society_and_Culture"),
                       category=np.where(number % 2 == 0, "cooking", "travel"))


def naming(fig, name: str) -> list[str]:
    """Every visible text of ``fig``, once drawn, that names ``name``."""
    fig.canvas.draw()
    texts = [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return [t for t in texts if mark_label(t, {name: "!"}) != t]


# ------------------------------------------------------------------------------------------ the rule
def test_the_marks_of_a_store_name_its_locked_judge_and_its_oracle():
    rows = store_rows()
    assert label_marks(rows) == {JUDGE: LOCKED_MARK, "rubric": ORACLE_MARK}
    assert label_marks(rows[rows["model"] != JUDGE]) == {"rubric": ORACLE_MARK}
    half = marks_for({(JUDGE, "none")}, [(JUDGE, "none"), (JUDGE, "top3")])  # locked under one condition only
    assert half == {JUDGE: f"{LOCKED_MARK} under none"}
    found = compute_findings(rows, calibrate=False)
    assert found.marks() == label_marks(rows)  # the findings and the rows mark alike
    set_marks(found.marks())
    assert current_marks() == found.marks() and set_marks(None) == {} and current_marks() == {}


def test_a_mark_goes_beside_a_whole_name_once_also_when_a_figure_wrapped_it():
    marks = {JUDGE: LOCKED_MARK, "judge:org/a_b": LOCKED_MARK}
    assert mark_label("judge:x | none", marks) == f"judge:x | none {LOCKED_MARK}"
    assert mark_label(f"judge:x {LOCKED_MARK}", marks) == f"judge:x {LOCKED_MARK}"   # once
    assert mark_label("judge:x2 | none", marks) == "judge:x2 | none"   # another name that starts alike
    assert mark_label("judge:x: rubric (oracle)", marks) == f"judge:x: rubric (oracle) {LOCKED_MARK}"  # 04's legend
    assert mark_label("judge:org/a b\n| top3", marks).endswith(LOCKED_MARK)   # wrapped, underscore as a space
    table = mark_frame(pd.DataFrame({"model": [JUDGE, "length"], "profile": ["none", "rubric"], "n": [1, 2]}),
                       {**marks, "rubric": ORACLE_MARK})
    assert table.values.tolist() == [[f"{JUDGE} {LOCKED_MARK}", "none", 1], ["length", f"rubric {ORACLE_MARK}", 2]]


def test_tick_labels_keep_their_mark_through_every_redraw():
    """Setting a tick label's text is lost at the next draw (matplotlib makes it anew from its formatter): the
    mark goes into the formatter."""
    fig, ax = plt.subplots()
    ax.barh([0, 1], [0.5, 0.6])
    ax.set_yticks([0, 1], [f"{JUDGE} | none", "length | none"])
    plots.mark_figure(fig, {JUDGE: LOCKED_MARK})
    for _ in range(2):
        fig.canvas.draw()
        assert [t.get_text() for t in ax.get_yticklabels()] == [f"{JUDGE} | none {LOCKED_MARK}", "length | none"]
    assert ax.get_xticklabels()[1].get_text() != ""   # the numeric axis is left as it was


# ------------------------------------------------------------------------------------------ every page's figures
def _accuracy(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    plan = ResamplingPlan(n_boot=200)
    return plan.accuracy(plan.attach(rows, None), by)


def figure_02_forest(rows):
    return plots.forest(_accuracy(rows, ["model", "profile"])).figure


def figure_02_subsets(rows):
    return plots.heatmap(_accuracy(rows, ["model", "profile", "subset"]), rows=["model", "profile"], cols="subset",
                         title="Accuracy by subset").figure


def figure_02_categories(rows):
    per = breakdowns.by_category(rows)
    return plots.heatmap(per[per["shown"]], rows="category", cols=["model", "profile"],
                         title="Accuracy by category").figure


def figure_02_lift_dumbbell(rows):
    """The lifts leave a locked judge out; its mark then goes on the oracle's row."""
    return plots.lift_dumbbell(compute_findings(rows, calibrate=False).lifts).figure


def figure_01_forest(rows):
    return plots.forest(_accuracy(rows, ["model", "profile"]), title="Accuracy with 95% CI").figure


def figure_04_curve(rows):
    acc = _accuracy(rows, ["model", "profile"])
    curve = acc.assign(retriever=None, k=acc["profile"].map({"none": 0.0, "top3": 3.0}),
                       oracle=acc["profile"] == "rubric", input_size=100.0, input_unit="characters")
    return pc.profile_size_plot(curve).figure


def figure_00_two_users(rows):
    twins = rows[rows["id"].isin(["q0", "q1"])].assign(user=lambda f: f["id"].map({"q0": "user 1", "q1": "user 2"}))
    return pair_view.two_users_plot(twins.assign(margin=twins["score_chosen"] - twins["score_rejected"]))


def figure_00_you_and_the_models(rows):
    acc = _accuracy(rows, ["model", "profile"]).rename(columns={"model": "who"})
    return plots.forest(acc, label=["who", "profile"], title="Accuracy on every quiz pair (95% CI)").figure


def figure_03_best_of_n(rows):
    curves = pd.DataFrame([{"model": m, "method": "exact", "k": k, "mean": 0.5 + 0.01 * k, "ci_low": 0.4,
                            "ci_high": 0.6} for m in (JUDGE, "lexical", "oracle", "random") for k in (1, 2, 4)])
    return downstream_plots.bon_curve_plot(curves).figure


FIGURES = [figure_02_forest, figure_02_subsets, figure_02_categories, figure_01_forest, figure_04_curve,
           figure_00_two_users, figure_00_you_and_the_models, figure_03_best_of_n]


@pytest.mark.parametrize("draw", FIGURES, ids=[f.__name__.removeprefix("figure_") for f in FIGURES])
def test_every_figure_marks_the_locked_judge_and_the_oracle_wherever_it_names_them(draw):
    rows = store_rows()
    set_marks(label_marks(rows))
    fig = plots.mark_figure(draw(rows))   # as the pages' display hook does with the page's marks
    judge = naming(fig, JUDGE)
    assert judge and all(LOCKED_MARK in text for text in judge), judge   # shown, so the check could fail
    oracle = [t for t in naming(fig, "rubric") if "rubric quality" not in t]   # the condition, not the word
    assert all(ORACLE_MARK in text for text in oracle), oracle
    assert not any(ORACLE_MARK in t for t in naming(fig, "rubric") if t not in oracle)   # never on the word


def test_the_lifts_figure_shows_no_locked_judge_and_no_oracle_to_mark():
    """A locked judge gets no lift (its accuracy measures the answer order) and the oracle is no benchmark
    condition: the lift figure names neither, and names the models that have a lift."""
    rows = store_rows()
    set_marks(label_marks(rows))
    fig = plots.mark_figure(plots.lift_dumbbell(compute_findings(rows, calibrate=False).lifts).figure)
    assert not naming(fig, JUDGE) and not naming(fig, "rubric") and naming(fig, "lexical")


def test_without_marks_a_figure_names_the_judge_plainly():
    """The check above is not vacuous: the same figure without the page's marks shows the judge unmarked."""
    fig = plots.mark_figure(figure_02_forest(store_rows()), {})
    assert naming(fig, JUDGE) and not any(LOCKED_MARK in t for t in naming(fig, JUDGE))


def test_the_flip_tables_mark_the_judge_and_wrap_subsets_and_read_margins_by_their_kind():
    rows = store_rows()
    rows.loc[(rows["model"] == JUDGE) & (rows["profile"] == "top3") & (rows["id"] == "q3"), "outcome"] = "wrong"
    set_marks(label_marks(rows))
    flips = pair_view.flip_table(rows)
    counts = widgets.table_html(pair_view.flip_counts(flips))
    listed = pair_view.flip_list_html(flips)
    assert f"{JUDGE} {LOCKED_MARK}" in counts and f"{JUDGE} {LOCKED_MARK}" in listed
    assert "Society_<wbr>and_<wbr>Culture" in listed   # a subset name can wrap, never runs over the id
    assert listed.count("toFixed(3)") >= 2   # margin_none and margin: one rule, 3 decimals (kind score)


# ------------------------------------------------------------------------------------------ the pages, executed
@pytest.mark.slow
@pytest.mark.notebooks
def test_pages_01_and_02_mark_a_locked_judge_in_their_tables_and_02_warns_once(tmp_path, tiny_lm_dir):
    """A store with a real locked judge (the tiny random one answers by position), pages 01 and 02 executed as a
    report runs them: each table names the judge with its mark, and page 02 says each lock paragraph once."""
    import nbformat
    import papermill

    from prb_utils.analysis.breakdowns import position_locked
    from prb_utils.cli import main
    from prb_utils.notebook.report import NOTEBOOK_DIR
    from prb_utils.store import load_results

    store, judge = tmp_path / "results", f"judge:{tiny_lm_dir}"
    assert main(["score", "--data", "sample", "--limit", "2", "--model", "length", "--model", judge, "--device", "cpu",
                 "--profile", "none", "--profile", "top3", "--out", str(store), "--no-progress"]) == 0
    locks = position_locked(load_results(store))
    assert locks["locked"].all() and len(locks) == 2   # locked under both conditions: marked by its name alone
    for name in ("01_pair_inspection", "02_accuracy_breakdown"):
        target = tmp_path / f"{name}.ipynb"
        papermill.execute_notebook(str(NOTEBOOK_DIR / f"{name}.ipynb"), str(target), kernel_name="python3",
                                   parameters={"results": str(store), "interactive": False, "limit": 2},
                                   progress_bar=False, cwd=str(tmp_path))
        outputs = [o for c in nbformat.read(str(target), as_version=4).cells if c.cell_type == "code"
                   for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"]
        tables = "".join(o.get("data", {}).get("text/html", "") for o in outputs).replace("\\\\/", "/")
        assert tables.count(f"{judge} {LOCKED_MARK}") >= 2, name   # its rows under none and top3
        if name == "02_accuracy_breakdown":
            said = "".join(o.get("data", {}).get("text/markdown", "") for o in outputs)
            assert said.count("Position-locked judge") == len(locks)   # once per locked job, not twice
