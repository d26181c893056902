"""How hard each pair is: how many reward models in the store get it right, and the pairs every one fails.

A pair's difficulty is counted per profile condition over the jobs (one per RM) that scored it: ``n`` RMs,
``correct`` of them right, ``share`` = correct / n, and a tier. "Every RM" means every real RM: by default
the baselines (``length``, ``lexical``: :func:`prb_utils.models.kinds.baseline_names`) and position-locked judges
(:func:`prb_utils.analysis.breakdowns.position_locked`: their accuracy measures the answer order) are not
counted, nor are oracle conditions (``rubric``: diagnostics, not benchmark results); each can be asked for.
:func:`counted_rms` says which RMs count and why the others do not; :func:`tier_counts` gives ``n_rms``.

>>> import pandas as pd
>>> rows = pd.DataFrame({"model": ["a", "b", "a", "b"], "kind": "classifier", "profile": "none", "subset": "s",
...                      "id": ["1", "1", "2", "2"], "outcome": ["correct", "correct", "wrong", "tie"]})
>>> pair_difficulty(rows)[["id", "n", "correct", "tier"]].to_dict("records")
[{'id': '1', 'n': 2, 'correct': 2, 'tier': 'every RM right'}, {'id': '2', 'n': 2, 'correct': 0, 'tier': 'every RM wrong'}]
"""

from __future__ import annotations

import pandas as pd

from prb_utils.analysis.breakdowns import position_locked
from prb_utils.errors import PRBError
from prb_utils.models.kinds import baseline_names
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


def counted_rms(results: pd.DataFrame, *, include_oracle: bool = False, include_baselines: bool = False,
                include_locked: bool = False) -> pd.DataFrame:
    """Which RMs (jobs) the difficulty tiers count, per profile condition: columns ``profile``, the RM
    (``job_label`` or ``model``), ``counted`` and ``reason`` (why not: ``oracle condition``, ``baseline``,
    ``position-locked judge``; "" when counted).

    >>> rows = pd.DataFrame({"model": ["length", "classifier:x"], "kind": ["length", "classifier"],
    ...                      "profile": "none", "subset": "s", "id": "1", "outcome": "correct"})
    >>> counted_rms(rows)[["model", "counted", "reason"]].values.tolist()
    [['classifier:x', True, ''], ['length', False, 'baseline']]
    """
    missing = [c for c in [*CONDITION_PAIR, "outcome"] if c not in results.columns]
    if missing:
        raise PRBError(f"The results table lacks the column(s) {', '.join(missing)}.")
    unit = _unit(results)
    jobs = results.drop_duplicates(["profile", unit]).sort_values(["profile", unit], kind="stable")
    kind = jobs["kind"] if "kind" in jobs.columns else jobs["model"].astype(str)
    locked: set[tuple[str, str]] = set()
    if not include_locked and {"verdict_ab", "verdict_ba"} <= set(results.columns):
        locks = position_locked(results, by=[unit, "profile"])
        locked = {(str(r[unit]), str(r["profile"])) for _, r in locks[locks["locked"]].iterrows()}
    reasons = []
    for (_, job), k in zip(jobs.iterrows(), kind, strict=True):
        if not include_oracle and is_oracle(job["profile"]):
            reasons.append("oracle condition")
        elif not include_baselines and str(k) in baseline_names():
            reasons.append("baseline")
        elif (str(job[unit]), str(job["profile"])) in locked:
            reasons.append("position-locked judge")
        else:
            reasons.append("")
    out = pd.DataFrame({"profile": jobs["profile"].to_numpy(), unit: jobs[unit].to_numpy(), "reason": reasons})
    out.insert(2, "counted", out["reason"].eq(""))
    return out.reset_index(drop=True)


def pair_difficulty(results: pd.DataFrame, *, include_oracle: bool = False, include_baselines: bool = False,
                    include_locked: bool = False) -> pd.DataFrame:
    """One row per (profile, subset, id): ``n`` RMs that scored it, ``correct``, ``share`` and ``tier``, over
    the RMs :func:`counted_rms` counts (by default no baseline, position-locked judge or oracle condition).

    Ties and invalid outcomes count as not correct (the benchmark's convention).
    """
    counted = counted_rms(results, include_oracle=include_oracle, include_baselines=include_baselines,
                          include_locked=include_locked)
    unit = _unit(results)
    keep = counted.loc[counted["counted"], ["profile", unit]]
    rows = results.merge(keep, on=["profile", unit], how="inner")
    rows = rows.drop_duplicates([*CONDITION_PAIR, unit])
    grouped = rows.assign(is_correct=rows["outcome"].eq("correct")).groupby(CONDITION_PAIR, sort=False)
    table = grouped.agg(n=("is_correct", "size"), correct=("is_correct", "sum")).reset_index()
    table["correct"] = table["correct"].astype(int)
    table["share"] = table["correct"] / table["n"]
    table["tier"] = [_tier(c, n) for c, n in zip(table["correct"], table["n"], strict=True)]
    return table


def tier_counts(difficulty: pd.DataFrame) -> pd.DataFrame:
    """Pairs per tier and profile condition (every tier listed, zeros included), and ``n_rms``: the RMs the
    tiers count under that condition (the most that scored one pair)."""
    if difficulty.empty:
        return pd.DataFrame(columns=["profile", "n_rms", *TIERS])
    counts = difficulty.groupby(["profile", "tier"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=list(TIERS), fill_value=0)
    counts.insert(0, "n_rms", difficulty.groupby("profile")["n"].max())
    return counts.reset_index()


def hardest_pairs(results: pd.DataFrame, data: pd.DataFrame, *, min_rms: int = 2, include_baselines: bool = False,
                  include_locked: bool = False) -> pd.DataFrame:
    """The pairs every counted RM fails (scored by at least ``min_rms`` of them; :func:`counted_rms`), with
    the question and rubric aspects.

    The rubric aspects are what the chosen answer was written to satisfy: reading them beside the question
    says what every RM missed.
    """
    difficulty = pair_difficulty(results, include_baselines=include_baselines, include_locked=include_locked)
    failed = difficulty[(difficulty["correct"] == 0) & (difficulty["n"] >= min_rms)]
    columns = ["subset", "id", "category", "question", "rubric_aspects"]
    info = data[[c for c in columns if c in data.columns]].copy()
    if "rubric_aspects" in info.columns:
        info["rubric_aspects"] = info["rubric_aspects"].map(
            lambda aspects: "; ".join(str(a.get("aspect", "")) for a in (aspects if aspects is not None else [])))
    return failed.merge(info, on=["subset", "id"], how="left").reset_index(drop=True)
