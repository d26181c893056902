"""Page 03's sections on the store's RMs: each shows its tables, figures and words (or what is missing and the
command that fills it) and returns what the page records."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from prb_utils.analysis import breakdowns
from prb_utils.downstream import bon, correlation, predictors
from prb_utils.downstream import plots as downstream_plots
from prb_utils.downstream.report_bon import made_on_other_data, too_few_to_rank, unchecked
from prb_utils.downstream.results import BonResults, RLResults
from prb_utils.notebook.downstream_page import (
    bon_how_judged,
    bon_how_made,
    rl_how_made,
    unranked_rms,
)
from prb_utils.notebook.markup import chain, display_path, md_code, md_text, prb_command
from prb_utils.notebook.params import DownstreamParams
from prb_utils.notebook.sections import missing_section, say
from prb_utils.schema import DEFAULT_ZOO, canonical_spec


@dataclass(frozen=True)
class BenchmarkSide:
    """The benchmark side of page 03: the rows under ``benchmark_profile`` (``ranked``), the RMs' accuracy (None
    without rows), job label -> model spec (``specs``: downstream tables match on the spec), the RMs that get no
    rank, and the commands that score the RMs and run Best-of-N on them."""

    ranked: pd.DataFrame
    accuracy: pd.DataFrame | None
    specs: pd.Series
    unranked: dict[str, str]
    score_how: str
    bon_how: str

    @property
    def prb(self) -> pd.Series:
        """Accuracy per RM (job label), named ``prb``; empty without rows."""
        if self.accuracy is None:
            return pd.Series(dtype=float, name="prb")
        return self.accuracy.set_index("model")["accuracy"].rename("prb")


def benchmark_side(params: DownstreamParams, scores: pd.DataFrame, bench: pd.DataFrame) -> BenchmarkSide:
    """The :class:`BenchmarkSide` of the store's rows ``scores`` on the pairs ``bench`` (the commands name the models
    asked for, else those in the store, else the default zoo)."""
    rms = list(params.models) or sorted(scores["model_spec"].unique()) or list(DEFAULT_ZOO)
    ranked = scores[scores["profile"] == params.benchmark_profile]
    plan = params.plan()
    return BenchmarkSide(
        ranked, plan.accuracy(plan.attach(ranked, bench), ["model"]) if not ranked.empty else None,
        ranked.groupby("model")["model_spec"].first(), unranked_rms(ranked),
        prb_command("score", data=params.data, models=rms, profile=params.benchmark_profile, store=params.results),
        prb_command("bon", data=params.data, models=rms, store=params.results))


def show_benchmark(side: BenchmarkSide, scores: pd.DataFrame, profile: str) -> None:
    """The RMs' accuracy under ``profile`` and the warning of a position-locked judge, or the missing section."""
    from IPython.display import display

    if side.accuracy is None:
        say(missing_section(f"No scores under {md_code(profile)} in the store", side.score_how,
                            fill="Score the RMs under it", cost="with 2 CPU cores: seconds for `length` and `lexical`, "
                            "about 2 minutes per 42 pairs for the default zoo"))
        return
    display(side.accuracy)
    locks = breakdowns.position_locked(scores, quote=md_code)
    say(breakdowns.locked_warnings(locks[locks["profile"] == profile]))


@dataclass(frozen=True)
class BonShown:
    """What the Best-of-N section showed: the run, its curves at ``ks``, ``metrics`` (one row per RM) and ``pool``
    (the pool's headroom)."""

    run: BonResults
    ks: list[int]
    curves: pd.DataFrame
    metrics: pd.DataFrame
    pool: pd.DataFrame


def show_bon(params: DownstreamParams, run: BonResults | None, side: BenchmarkSide | None = None,
             data: pd.DataFrame | None = None) -> BonShown | None:
    """The Best-of-N curves (exact and first-k), the run's record, its metrics and the pool's headroom; the missing
    section (and None) without a run, saying first when the RMs (``params.models``, else those of ``side``) are too
    few to rank, which is why ``prb report`` runs no Best-of-N of its own for them
    (:func:`~prb_utils.downstream.report_bon.too_few_to_rank`). A run made on other data than the page's ``data``
    is named and left out (:func:`~prb_utils.downstream.report_bon.made_on_other_data`)."""
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    shown = (f"{display_path(params.results)}/bon" if params.bon_path == params.results_dir / "bon"
             else display_path(params.bon_path))
    if run is not None and data is not None:
        other = made_on_other_data(run.run, data)
        say(f"*The Best-of-N run in {md_code(shown)} was {md_text(other)}: not shown, its curves are not this "
            "page's questions.*" if other else "")
        say(f"*The Best-of-N run in {md_code(shown)} was {md_text(unchecked(run.run))}.*" if unchecked(run.run) else "")
        run = None if other else run
    if run is None:
        rms = list(params.models) or (sorted(set(side.specs)) if side is not None else [])
        why = too_few_to_rank(rms) if rms else ""
        say(f"*{md_text(why)}: `prb report` runs no Best-of-N of its own for them.*" if why else "")
        say(missing_section(f"No BoN pipeline results in {md_code(shown)}",
                            prb_command("bon", data=params.data, models=rms, store=params.results), fill="Produce them",
                            cost="offline: the small policy samples answers, every RM scores them, a rubric judge "
                            "rates them; minutes on 2 CPU cores, see the README's Best-of-N section"))
        return None
    ks = run.ks(params.ks)
    display(Markdown(bon_how_judged(run)))
    curves = bon.bon_curves(run.frame, ks)
    _, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    downstream_plots.bon_curve_plot(curves, judge_label=run.label, ax=left, title="Exact best-of-k (all k-subsets)")
    downstream_plots.bon_curve_plot(curves, method="first", judge_label=run.label, ax=right,
                                    title="Best of the first k (reference rule)")
    plt.show()
    say(bon_how_made(run))
    shown = BonShown(run, ks, curves, bon.bon_metrics(curves), bon.headroom(curves))
    display(shown.metrics)
    display(Markdown(f"**The pool's headroom at k = {int(shown.pool['k'].iloc[0])}**: the oracle's pick minus a random "
                     "pick, and the share of it each RM realises (1 = the oracle, 0 = chance, below 0 = worse than "
                     "chance). A pool whose answers the judge rates alike leaves nothing to choose."))
    display(shown.pool)
    return shown


def _say_unmatched(found: correlation.Agreement) -> None:
    if found.dropped:
        say(f"*Matched by model spec. {md_text(found.dropped)}*")


def show_bon_agreement(params: DownstreamParams, side: BenchmarkSide, shown: BonShown | None,
                       ) -> tuple[dict | None, pd.DataFrame | None]:
    """Benchmark accuracy against Best-of-N quality for the RMs of both: the coefficients, whether the run can rank
    these RMs (``correlation.ranking_sufficiency``, returned first), their bars when it can, and which benchmark
    statistic agrees best (returned second); or what is missing and the command that fills it."""
    if shown is None or side.accuracy is None:
        missing = [what for what, absent in (("BoN results", shown is None),
                                              ("benchmark accuracies", side.accuracy is None)) if absent]
        how = chain(side.score_how if side.accuracy is None else "", side.bon_how if shown is None else "")
        say(missing_section(f"Needs both BoN results and benchmark accuracies; missing: {' and '.join(missing)}", how,
                            fill="Produce them", cost="minutes on 2 CPU cores: the README's Best-of-N section gives "
                            "the measured times"))
        return None, None
    column = f"bon@{max(shown.ks)}"
    found = correlation.agreement_of(
        side.prb, shown.metrics[column], specs=side.specs, downstream_name="BoN results",
        benchmark_name=f"accuracy under {params.benchmark_profile}", downstream_label=f"{column} ({shown.run.label})",
        n_boot=params.n_boot or None, excluded=side.unranked)
    _say_unmatched(found)
    if found.too_few:
        scored = sorted({canonical_spec(str(s)) for s in side.specs} - set(found.rms))  # the BoN run is missing
        more = [*found.rms, *[m for m in dict.fromkeys([*scored, *DEFAULT_ZOO]) if m not in found.rms]][:3]
        fill = chain(prb_command("score", data=params.data, models=more, profile=params.benchmark_profile,
                                 store=params.results), prb_command("bon", data=params.data, models=more,
                                                                    store=params.results))
        say(missing_section(f"Only {len(found.rms)} RM(s) have both a benchmark accuracy and BoN results; rank "
                            "agreement needs at least 3", fill, fill="Add RMs to both", cost="minutes on 2 CPU cores, "
                            "most of it the BoN run; the README's Best-of-N section gives the measured times"))
        return None, None
    if found.flat:
        say(f"*{md_text(found.flat)}*")
        return None, None
    return _bon_ranking(found, shown, column), _predictors(params, side, found, column)


def _bon_ranking(found: correlation.Agreement, shown: BonShown, column: str) -> dict:
    import matplotlib.pyplot as plt
    from IPython.display import display

    display(correlation.p_display(found.table))
    ranking = correlation.ranking_sufficiency(found.table, questions=shown.run.questions,
                                              headroom=float(shown.pool["headroom"].iloc[0]),
                                              k=int(shown.pool["k"].iloc[0]))
    if ranking["verdict"] == "cannot rank":  # no bar: a coefficient at chance is not a finding
        say(f"**{md_text(ranking['sentence'])}** Every coefficient is in the table above; no bar is drawn.")
    else:
        say(f"*{md_text(ranking['sentence'])}*")
        downstream_plots.coefficient_bars(found.table, title=f"PRB accuracy vs {column} ({shown.run.label})")
        plt.show()
    return ranking


def _predictors(params: DownstreamParams, side: BenchmarkSide, found: correlation.Agreement,
                column: str) -> pd.DataFrame:
    from IPython.display import display

    matched = side.ranked.assign(model=side.ranked["model_spec"].map(canonical_spec))
    statistics = predictors.benchmark_statistics(matched[matched["model"].isin(found.rms)])
    predictor = predictors.predictor_table(statistics, found.joined[column], n_boot=params.n_boot or None)
    say(f"**Which benchmark statistic agrees best with {column}?** Spearman of each statistic of the same per-item "
        "results (mean accuracy, the worst subset, the lower quartile over categories, the standardised mean margin) "
        "with its 95% interval, chance level and permutation p-value; `diff` tests it against mean accuracy on the "
        f"same RMs (paired bootstrap). {predictors.family_note(predictor)}")
    display(correlation.p_display(predictor))
    return predictor


def show_rl(params: DownstreamParams, side: BenchmarkSide, rl: RLResults | None) -> pd.DataFrame | None:
    """The RL table (per RM and subset) and its agreement with benchmark accuracy; returns the pooled table (one
    row per RM), or None, with the missing section, without RL outcomes."""
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    if rl is None:
        say(missing_section(
            "No PPO outcomes: this section reads `<results>/ppo/ppo.csv` (written by `prb ppo`, or `make ppo` on the "
            "shipped data: one policy trained per RM with TRL, then judged; minutes on 2 CPU cores, see the README's PPO "
            "section) or the `ppo` parameter: a CSV `rm,subset,score[,n]` or the reference scripts' `PPO/result` "
            "folder. `make report` does not train policies", prb_command("ppo", data=params.data, store=params.results),
            after="The worked example below shows the analysis on published figures."))
        return None
    display(Markdown(rl_how_made(rl)))
    display(rl.table.pivot_table(index="rm", columns="subset", values="score"))
    ppo_table = correlation.downstream_table(ppo=rl.table)
    found = correlation.agreement_of(
        side.prb, ppo_table["ppo"], specs=side.specs, benchmark_name=f"accuracy under {params.benchmark_profile}",
        downstream_name=f"{rl.trainer} outcome", n_boot=params.n_boot or None, excluded=side.unranked)
    _say_unmatched(found)
    if found.too_few:
        unscored = [m for m in ppo_table.index if canonical_spec(str(m)) not in found.rms]  # in the CSV, no accuracy
        missing = (f"{len(found.rms)} RM(s) have both a PPO outcome and a benchmark accuracy in the store; rank "
                   "agreement needs at least 3 (name the RMs in the CSV by their model specs)")
        say(missing_section(missing, prb_command("score", data=params.data, models=unscored,
                                                 profile=params.benchmark_profile, store=params.results),
                            fill="Score the CSV's other RMs", cost="seconds to minutes per 42 pairs") if unscored
            else missing_section(missing, fill="Add PPO rows for more RMs of the store to the CSV (from your own PPO "
                                 "runs: `make report` does not train policies)", cost="under a minute"))
    elif found.flat:
        say(f"*{md_text(found.flat)}*")
    else:
        display(correlation.p_display(found.table))
        downstream_plots.coefficient_bars(found.table, title=f"PRB accuracy vs {rl.trainer} outcome")
        plt.show()
    return ppo_table
