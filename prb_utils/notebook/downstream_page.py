"""Page 03's words: how a downstream run was made and which RMs get no rank, in one place (the commands that fill
an empty section: :func:`~prb_utils.notebook.markup.prb_command`).

>>> rows = pd.DataFrame({"model": "judge:x", "kind": "judge", "profile": "top3", "subset": "s", "id": ["1", "2"],
...                      "outcome": "correct", "verdict_ab": "chosen", "verdict_ba": "rejected"})
>>> unranked_rms(rows)
{'judge:x': 'position-locked judge: its accuracy measures the answer order, so it gets no rank'}
"""

from __future__ import annotations

import pandas as pd

from prb_utils.analysis.difficulty import counted_rms
from prb_utils.downstream.policy import SAMPLING_MODES
from prb_utils.downstream.results import BonResults, RLResults
from prb_utils.downstream.rubric_judge import QUALITY_RULES, RUBRIC_JUDGES, quality_reading
from prb_utils.notebook.markup import display_path, md_code, md_text

#: How an answer's quality is read from a proxy judge (MiniLM similarity), in the pages' words.
PROXY_QUALITY = RUBRIC_JUDGES["proxy"].quality
#: Why an RM the benchmark scored is no member of the rankings page 03 compares (:func:`unranked_rms`).
UNRANKED_WHY = {"position-locked judge": "position-locked judge: its accuracy measures the answer order, so it gets "
                                         "no rank"}


def bon_how_judged(run: BonResults) -> str:
    """One sentence: the judge's protocol and how an answer's quality is read (the rule of prb's per-aspect judge,
    or another protocol's own reading: :func:`~prb_utils.downstream.rubric_judge.quality_reading`)."""
    quality = PROXY_QUALITY if run.proxy else quality_reading(run.judge, run.quality_rule)
    return f"*Judged by {md_text(run.protocol)}. An answer's quality: {md_text(quality)}.*"


def bon_how_made(run: BonResults) -> str:
    """The run's record in two sentences (its questions, answers, policy, the RMs' condition and the sampling
    mode); empty for a folder without ``run.json``."""
    if not run.run:
        return ""
    record = run.run
    return (f"*The run in* {md_code(display_path(run.folder))}*: {md_text(record['n_questions'])} questions, "
            f"{md_text(record['n_samples'])} answers each from* {md_code(record['policy'])}*; the RMs saw the profile "
            f"condition* {md_code(record['rm_profile'])}*; quality from* {md_code(run.label)}*.*\n\n"
            f"*Answers sampled in the* **{run.sampling}** *mode: {SAMPLING_MODES[run.sampling]}.*")


def rl_how_made(run: RLResults) -> str:
    """The trainer and, where the run's record says it, how an answer's quality was read."""
    rule = run.quality_rule
    reading = quality_reading(str(run.run.get("judge") or "llm"), rule) if rule in QUALITY_RULES else ""
    quality = f" *An answer's quality: {md_text(reading)}.*" if reading else ""
    return f"*Policies trained with* **{md_text(run.trainer)}**.{quality}"


def unranked_rms(ranked: pd.DataFrame) -> dict[str, str]:
    """The RMs (job labels, or ``model``) of ``ranked`` (the rows of the benchmark condition) that get no rank and
    so are no member of the RM rankings whose agreement with Best-of-N or RL page 03 computes, each with the
    reason in the page's words: the rule of page 04's difficulty tiers
    (:func:`prb_utils.analysis.difficulty.counted_rms`), baselines and an oracle condition kept (they are ranked
    here), so a position-locked judge (:func:`prb_utils.analysis.breakdowns.position_locked`) is left out, as it
    is from the leaderboard's ranks and verdicts."""
    if ranked.empty:
        return {}
    counted = counted_rms(ranked, include_oracle=True, include_baselines=True)
    unit = counted.columns[1]
    return {str(r[unit]): UNRANKED_WHY.get(str(r["reason"]), str(r["reason"]))
            for _, r in counted[~counted["counted"]].iterrows()}
