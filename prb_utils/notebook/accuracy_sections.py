"""Page 02's sections beyond the leaderboard: each shows its tables, figures and words (or what is missing and the
command that fills it) and returns what the page records."""

from __future__ import annotations

import pandas as pd

from prb_utils.analysis import breakdowns, calibration, plots
from prb_utils.analysis.findings import Findings
from prb_utils.analysis.uncertainty import ResamplingPlan
from prb_utils.notebook import widgets
from prb_utils.notebook.markup import md_code
from prb_utils.notebook.params import NotebookParams
from prb_utils.notebook.sections import missing_section, say, show_defined

#: What page 02 says when ``half_credit`` is on.
HALF_CREDIT_NOTE = ("**Half credit is on**: a tie counts 0.5 in the accuracy tables (overall, per subset, the macro "
                    "average and per category; their `credit` column). The profile lifts, the model comparisons and "
                    "the rubric breakdowns count strict correctness (a tie is not correct): an exact McNemar test needs "
                    "a yes/no outcome per pair.")


def _show_figure() -> None:
    import matplotlib.pyplot as plt

    plt.show()


def show_categories(scores: pd.DataFrame, *, half_credit: bool = False) -> pd.DataFrame:
    """Accuracy per category: the heatmap of the categories drawn, the others named, and every category's table."""
    per_category = breakdowns.by_category(scores, half_credit=half_credit)
    if per_category["shown"].any():
        plots.heatmap(per_category[per_category["shown"]], rows="category", cols=["model", "profile"],
                      title="Accuracy by category")
        _show_figure()
    rest = breakdowns.left_out_categories(per_category)
    say(f"*Not drawn (pairs in brackets):* {md_code(rest)}" if rest else "")
    widgets.show_table(per_category, caption="Accuracy by category, every category")
    return per_category


def show_lifts(found: Findings, baseline: str, params: NotebookParams) -> None:
    """The profile lifts over ``baseline`` with their verdicts and family (table and dumbbell), or the missing
    section (its command on the page's data)."""
    if found.lifts.empty:
        say(missing_section(f"Only one profile condition, no {md_code(baseline)} rows, or no model that reads the "
                            "profile: no lift to show", params.command("score", models=["lexical"], profile=[baseline, "top3"]), fill="Score a second condition", cost="seconds for the baselines"))
        return
    families = "; ".join(found.families[name].say() for name in dict.fromkeys(found.lifts["family"]))
    widgets.show_table(found.lifts, caption=f"Profile lift over the baseline condition, with its verdict; p_holm within its "
               f"family: {families}")
    plots.lift_dumbbell(found.lifts)
    _show_figure()


def show_comparisons(found: Findings, params: NotebookParams) -> None:
    """The paired comparisons behind the ranks (each condition's family, as on the leaderboard), or the missing
    section (its command on the page's data)."""
    if found.comparisons.empty:
        say(missing_section("One model only: nothing to compare",
                            params.command("score", models=["length", "lexical"], profile="none"), fill="Score a second one", cost="seconds"))
        return
    widgets.show_table(found.comparisons, caption="Models compared, pair by pair; p_holm: "
               + "; ".join(f.say() for name, f in found.families.items() if name.startswith("ranks")))


def show_judge_order(scores: pd.DataFrame, locks: pd.DataFrame, plan: ResamplingPlan, params: NotebookParams,
                     ) -> None:
    """Judge accuracy per A/B order and the position lock of each judge job, or the missing section (its command on
    the page's data)."""
    judged = scores[scores["verdict_ab"].notna() | scores["verdict_ba"].notna()]
    if judged.empty:
        say(missing_section("No judge (`judge:` model) among these results",
                            params.command("score", models=["judge:smollm2"], profile="none"), fill="Score one", cost="about a minute on 2 CPU cores"))
        return
    widgets.show_table(breakdowns.judge_order(judged, n_boot=plan.n_boot, seed=plan.seed), caption="Judge accuracy per order")
    widgets.show_table(locks.drop(columns="warning"), caption="Position lock per judge job")


def show_calibration(scores: pd.DataFrame, bench: pd.DataFrame, found: Findings,
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Where each probability comes from, the calibration per model and condition (n/a with its reason) and the
    reliability diagram; returns the pair probabilities and the diagram's bins."""
    from IPython.display import display

    probs = calibration.pair_probabilities(scores, bench)
    display(calibration.probability_sources(probs))
    show_defined(found.calibration)
    bins = calibration.reliability_table(probs)
    if not bins.empty:
        plots.reliability_diagram(bins)
        _show_figure()
    return probs, bins


def show_confidence(scores: pd.DataFrame, margins: pd.DataFrame) -> pd.DataFrame:
    """Accuracy by |margin| quantile (table and curve) and each model's margin histogram; returns the table."""
    from IPython.display import display

    by_margin = calibration.accuracy_by_margin(scores)
    display(by_margin)
    if by_margin.empty:
        say("*No model's |margin| varies: there is nothing to bin.*")
    else:
        plots.inferability_curve(by_margin, x="margin_bin", title="Accuracy by |margin| quantile (Q1 = least confident)")
        _show_figure()
    plots.margin_histograms(margins)
    _show_figure()
    return by_margin
