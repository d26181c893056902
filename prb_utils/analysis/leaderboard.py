"""A leaderboard per profile condition: rank, model, kind, accuracy [95% CI], the group statistically tied with
the leader, and the lift over ``none`` with one verdict, each under one stated rule.

Readers of reward-model results expect the RewardBench leaderboard's shape (rank, type, score), not a "best
model": on a small sample several RMs are indistinguishable, and a judge that answers by position has an
accuracy that measures the order of the answers. So:

- :data:`TIE_RULE`: a job is *tied with the leader* when the exact McNemar test against the leader on the
  pairs both scored (:func:`prb_utils.analysis.metrics.compare`), Holm-adjusted over the condition's other
  jobs, gives p >= 0.05;
- :data:`LIFT_RULE`: the profile *helps* when the lift over ``none`` has its 95% paired interval above 0 and
  its Holm-adjusted exact McNemar p < 0.05, *hurts* when both say so the other way, and is *inconclusive*
  otherwise (:func:`prb_utils.analysis.metrics.profile_lift`, whose Holm adjustment runs over every lift);
- a position-locked judge (:func:`prb_utils.analysis.breakdowns.position_locked`) is listed last with its
  reason, is never the leader and gets no rank.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from prb_utils.analysis.breakdowns import position_locked
from prb_utils.analysis.metrics import (
    LEVEL,
    N_BOOT,
    SEED,
    accuracy_table,
    compare,
    profile_lift,
    require_columns,
)
from prb_utils.models.kinds import MODEL_KINDS
from prb_utils.profile import condition_sort_key

ALPHA = 0.05
TIE_RULE = ("tied with the leader: an exact McNemar test against the leader on the pairs both scored, "
            "Holm-adjusted over the condition's other models, gives p >= 0.05")
LIFT_RULE = ("helps: the lift over none has its 95% paired bootstrap interval above 0 and a Holm-adjusted exact "
             "McNemar p < 0.05; hurts: both the other way; otherwise inconclusive")
LEADERBOARD_COLUMNS = ["profile", "rank", "model", "kind", "accuracy", "ci_low", "ci_high", "n", "tied_with_leader",
           "p_vs_leader", "lift", "lift_low", "lift_high", "lift_verdict", "locked", "locked_reason"]


def lift_verdict(low: float, high: float, p_holm: float, *, alpha: float = ALPHA) -> str:
    """One word for a lift under :data:`LIFT_RULE`.

    >>> lift_verdict(0.02, 0.2, 0.01), lift_verdict(-0.3, -0.1, 0.001), lift_verdict(0.01, 0.2, 0.2)
    ('helps', 'hurts', 'inconclusive')
    """
    if not np.isfinite(p_holm) or p_holm >= alpha:
        return "inconclusive"
    if low > 0:
        return "helps"
    if high < 0:
        return "hurts"
    return "inconclusive"


def leaderboard(results: pd.DataFrame, *, model: str = "model", baseline: str = "none", n_boot: int = N_BOOT,
                seed: int = SEED, level: float = LEVEL) -> pd.DataFrame:
    """One row per job (``model``: a column naming one job per condition, e.g. ``job_label``) and profile
    condition, in condition order, ranked by accuracy (Wilson 95% CI): columns :data:`LEADERBOARD_COLUMNS`. ``kind`` is
    ``baseline`` for the model-free baselines. Rules: :data:`TIE_RULE`, :data:`LIFT_RULE`; ``lift`` is empty
    for ``baseline`` itself and for the oracle ``rubric``.
    """
    require_columns(results, [model, "kind", "profile", "subset", "id", "outcome"])
    rows = results.assign(model=results[model]) if model != "model" else results
    table = accuracy_table(rows, by=["model", "profile"])
    kinds = rows.groupby("model")["kind"].first().map(lambda k: MODEL_KINDS[k].label if k in MODEL_KINDS else k)
    table["kind"] = table["model"].map(kinds)
    locks = position_locked(rows) if {"verdict_ab", "verdict_ba"} <= set(rows.columns) else pd.DataFrame()
    locked = {} if locks.empty else {(r.model, r.profile): r.warning for r in locks.itertuples() if r.locked}
    table["locked"] = [(m, p) in locked for m, p in zip(table["model"], table["profile"], strict=True)]
    table["locked_reason"] = [locked.get((m, p), "") for m, p in zip(table["model"], table["profile"], strict=True)]
    lifts = pd.DataFrame()
    if baseline in set(rows["profile"]) and rows["profile"].nunique() > 1:
        lifts = profile_lift(rows, baseline=baseline, n_boot=n_boot, seed=seed, level=level)
    parts = []
    for condition in sorted(table["profile"].unique(), key=condition_sort_key):
        part = table[table["profile"] == condition].copy()
        part = part.sort_values(["locked", "accuracy", "model"], ascending=[True, False, True])
        part["rank"] = np.where(part["locked"], np.nan, np.arange(1, len(part) + 1, dtype=float))
        part["tied_with_leader"], part["p_vs_leader"] = False, np.nan
        ranked = part[~part["locked"]]
        if not ranked.empty:
            leader = ranked["model"].iloc[0]
            part.loc[part["model"] == leader, "tied_with_leader"] = True
            others = rows[(rows["profile"] == condition) & rows["model"].isin(ranked["model"])]
            if ranked["model"].nunique() > 1:
                tests = compare(others, "model", baseline=leader, by=[], n_boot=10, seed=seed, level=level)
                p = dict(zip(tests["level_b"], tests["p_holm"], strict=True))
                part["p_vs_leader"] = part["model"].map(p)
                part.loc[part["model"].isin([m for m, v in p.items() if v >= ALPHA]), "tied_with_leader"] = True
        part["tied_with_leader"] &= ~part["locked"]
        if not lifts.empty:
            mine = lifts[lifts["profile"] == condition].set_index("model")
            part["lift"] = part["model"].map(mine["lift"])
            part["lift_low"] = part["model"].map(mine["ci_low"])
            part["lift_high"] = part["model"].map(mine["ci_high"])
            part["lift_verdict"] = [lift_verdict(lo, hi, p) if np.isfinite(lift) else ""
                                    for lift, lo, hi, p in zip(part["lift"], part["lift_low"], part["lift_high"],
                                                               part["model"].map(mine["p_holm"]), strict=True)]
        parts.append(part)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=LEADERBOARD_COLUMNS)
    for column in ("lift", "lift_low", "lift_high"):
        if column not in out.columns:
            out[column] = np.nan
    if "lift_verdict" not in out.columns:
        out["lift_verdict"] = ""
    out["lift_verdict"] = out["lift_verdict"].fillna("")
    return out[LEADERBOARD_COLUMNS]


def leaderboard_notes(board: pd.DataFrame) -> list[str]:
    """The sentences that go with a :func:`leaderboard`: its two rules, why a lift whose interval excludes 0
    can still be inconclusive (where that happens), and each locked judge's reason once.

    >>> board = pd.DataFrame({"lift": [0.2], "lift_low": [0.05], "lift_high": [0.4], "lift_verdict": ["inconclusive"],
    ...                       "locked_reason": [""]})
    >>> len(leaderboard_notes(board))
    3
    """
    notes = [f"Tied group: {TIE_RULE}.", f"Lift verdict: {LIFT_RULE}."]
    disagree = board[(board["lift_verdict"] == "inconclusive") & ((board["lift_low"] > 0) | (board["lift_high"] < 0))]
    if not disagree.empty:
        notes.append("Where a lift's interval excludes 0 and the verdict is still inconclusive, the interval is one "
                     "pair-bootstrap interval and the test is adjusted (Holm) for every lift on the page: with "
                     "this many comparisons the evidence is not enough.")
    notes += list(dict.fromkeys(r for r in board["locked_reason"] if r))
    return notes
