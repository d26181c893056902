"""How hard each pair is: how many reward models in the store get it right, and the pairs every one fails.

A pair's difficulty is counted per profile condition over the jobs (one per RM) that scored it: ``n`` RMs,
``correct`` of them right, ``share`` = correct / n, and a tier. Oracle conditions (``rubric``) are left out
unless asked for: they are diagnostics, not benchmark results.

>>> import pandas as pd
>>> rows = pd.DataFrame({"model": ["a", "b", "a", "b"], "profile": "none", "subset": "s", "id": ["1", "1", "2", "2"],
...                      "outcome": ["correct", "correct", "wrong", "tie"]})
>>> pair_difficulty(rows)[["id", "n", "correct", "tier"]].to_dict("records")
[{'id': '1', 'n': 2, 'correct': 2, 'tier': 'every RM right'}, {'id': '2', 'n': 2, 'correct': 0, 'tier': 'every RM wrong'}]
"""

from __future__ import annotations

import pandas as pd

from prb_utils.errors import PRBError
from prb_utils.schema import is_oracle

TIERS = ("every RM right", "most RMs right", "most RMs wrong", "every RM wrong")
CONDITION_PAIR = ["profile", "subset", "id"]


def _unit(results: pd.DataFrame) -> str:
    return "job_label" if "job_label" in results.columns else "model"


def _tier(correct: int, n: int) -> str:
    if correct == n:
        return TIERS[0]
    if correct == 0:
        return TIERS[3]
    return TIERS[1] if correct / n >= 0.5 else TIERS[2]


def pair_difficulty(results: pd.DataFrame, *, include_oracle: bool = False) -> pd.DataFrame:
    """One row per (profile, subset, id): ``n`` RMs that scored it, ``correct``, ``share`` and ``tier``.

    Ties and invalid outcomes count as not correct (the benchmark's convention).
    """
    missing = [c for c in [*CONDITION_PAIR, "outcome"] if c not in results.columns]
    if missing:
        raise PRBError(f"The results table lacks the column(s) {', '.join(missing)}.")
    rows = results if include_oracle else results[~results["profile"].map(is_oracle)]
    rows = rows.drop_duplicates([*CONDITION_PAIR, _unit(rows)])
    grouped = rows.assign(is_correct=rows["outcome"].eq("correct")).groupby(CONDITION_PAIR, sort=False)
    table = grouped.agg(n=("is_correct", "size"), correct=("is_correct", "sum")).reset_index()
    table["correct"] = table["correct"].astype(int)
    table["share"] = table["correct"] / table["n"]
    table["tier"] = [_tier(c, n) for c, n in zip(table["correct"], table["n"], strict=True)]
    return table


def tier_counts(difficulty: pd.DataFrame) -> pd.DataFrame:
    """Pairs per tier and profile condition (every tier listed, zeros included)."""
    counts = difficulty.groupby(["profile", "tier"]).size().unstack(fill_value=0)
    return counts.reindex(columns=list(TIERS), fill_value=0).reset_index()


def hardest_pairs(results: pd.DataFrame, data: pd.DataFrame, *, min_rms: int = 2) -> pd.DataFrame:
    """The pairs every RM fails (scored by at least ``min_rms`` RMs), with the question and rubric aspects.

    The rubric aspects are what the chosen answer was written to satisfy: reading them beside the question
    says what every RM missed.
    """
    difficulty = pair_difficulty(results)
    failed = difficulty[(difficulty["correct"] == 0) & (difficulty["n"] >= min_rms)]
    columns = ["subset", "id", "category", "question", "rubric_aspects"]
    info = data[[c for c in columns if c in data.columns]].copy()
    if "rubric_aspects" in info.columns:
        info["rubric_aspects"] = info["rubric_aspects"].map(
            lambda aspects: "; ".join(str(a.get("aspect", "")) for a in (aspects if aspects is not None else [])))
    return failed.merge(info, on=["subset", "id"], how="left").reset_index(drop=True)
