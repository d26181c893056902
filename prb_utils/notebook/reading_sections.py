"""Page 05's sections on which part of the user an RM reads: the parrot against its control (does it reward the
user's words?) and leave-one-post-out attribution (which shown post does a verdict rest on?). Each shows its
figure, table, sentences and rule, records its key numbers, and names the command that fills it when the store
has no such jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from prb_utils.analysis import plots
from prb_utils.analysis.attribution import (
    ATTRIBUTION_RULE,
    attribution_jobs,
    attribution_summary,
    attribution_table,
    decisive_positions,
    decisive_posts,
)
from prb_utils.analysis.findings import Findings, control_sentences
from prb_utils.analysis.probe_effects import control_probes, control_table, controlled, probe_notes
from prb_utils.analysis.uncertainty import ResamplingPlan
from prb_utils.notebook.markup import md_code, md_sentences, md_text, prb_command
from prb_utils.notebook.params import ReadingParams
from prb_utils.notebook.report import record_numbers
from prb_utils.notebook.sections import missing_section, say
from prb_utils.notebook.widgets import show_table
from prb_utils.probes import ATTRIBUTION
from prb_utils.profile import parse_condition


def show_mimicry(params: ReadingParams, effects: pd.DataFrame, found: Findings | None, probed: Sequence[str],
                 plan: ResamplingPlan) -> list[dict[str, Any]]:
    """The parrot against its control (rows of ``effects`` with a control: :func:`~prb_utils.analysis.
    probe_effects.controlled`): the flips figure, one sentence per model, the table and the rule, recorded as
    ``mimicry``; without such rows the ``prb probe`` command that scores them. The sentences ([] without rows)."""
    import matplotlib.pyplot as plt

    parroted = controlled(effects)
    if parroted.empty:
        how = prb_command("probe", data=params.data, models=list(probed) or ["lexical"], profile=params.base_profile,
                          probes=control_probes(), store=params.results)
        say(missing_section(f"No {md_code(control_probes()[0])} probe of {md_code(params.base_profile)} here", how,
                            fill="Score it", cost="seconds for the baselines"))
        return []
    plots.control_flips(parroted)
    plt.show()
    mimicry = control_sentences(found, parroted)  # one sentence per model
    say(md_sentences(mimicry))
    show_table(control_table(parroted), caption=f"Flips beyond the control per model (base {params.base_profile})")
    say("\n\n".join(f"*{md_text(note)}*" for note in [*probe_notes(parroted), f"{plan.rule()}."]))
    record_numbers(params, mimicry=mimicry)
    return mimicry


def show_attribution(params: ReadingParams, scores: pd.DataFrame, bench: pd.DataFrame,
                     plan: ResamplingPlan) -> pd.DataFrame:
    """Leave-one-post-out attribution of the base condition's verdicts (:mod:`prb_utils.analysis.attribution`):
    the table, one figure per model of where its decisive posts stand, the rule, and the ``prb probe --probe
    attribution`` command for the models of the base with no drop jobs; records ``attribution``,
    ``decisive_positions`` and ``unattributed``. The summary of the base's models (empty without drop jobs)."""
    import matplotlib.pyplot as plt

    base = params.base_profile
    attribution = attribution_summary(scores, bench, **plan.options())
    attribution = attribution[attribution["base"] == base]
    decided = decisive_posts(scores, bench)
    positions = decisive_positions(decided[decided["base"] == base])
    jobs = attribution_jobs(base, bench)  # the base and one drop job per post it shows
    unattributed = sorted(set(scores.loc[scores["profile"] == base, "model"]) - set(attribution["model"]))
    how = prb_command("probe", data=params.data, models=unattributed or ["lexical"], profile=base, probes=[ATTRIBUTION],
                      store=params.results)
    cost = f"{len(jobs) - 1} extra jobs per model, seconds for the baselines"
    if parse_condition(base).k == 0:
        say(f"*The base condition {md_code(base)} shows no post: nothing to leave out.*")
    elif attribution.empty:
        say(missing_section(f"No post of {md_code(base)} left out in {md_text(params.results_dir.name)}", how,
                            fill="Score the leavings-out", cost=cost))
    else:
        show_table(attribution_table(attribution, decided[decided["base"] == base]),
                   caption=f"Which post each verdict hinges on (base {base})")
        for model in attribution.loc[attribution["no_verdict"] == "", "model"]:  # one figure per model
            plots.decisive_position_bars(positions[positions["model"] == model])
            plt.show()
        if unattributed:
            say(missing_section(f"No post left out for: {md_text(', '.join(unattributed))}", how,
                                fill="Score the leavings-out", cost=cost))
    say(f"*{md_text(f'Rule: {ATTRIBUTION_RULE}.')}*")
    record_numbers(params, attribution=attribution, decisive_positions=positions, unattributed=unattributed)
    return attribution
