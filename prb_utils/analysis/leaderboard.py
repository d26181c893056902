"""A leaderboard per profile condition: a shared rank, model, kind, accuracy [95% CI] with its verdict against
chance, and the lift over ``none`` with one verdict, each under one stated rule (:data:`RULES`).

Readers of reward-model results expect the RewardBench leaderboard's shape (rank, type, score), not a "best
model": on a small sample several RMs are indistinguishable, and a judge that answers by position has an
accuracy that measures the order of the answers. Pairs are grouped (a question is asked for several users, and
twin pairs share the question and both answers), so every interval and test here resamples or permutes whole
``units`` (a column such as ``question``) when one is given; without one, every pair is its own unit.

- a shared rank (the Arena's rule): 1 + the number of models of the condition that are *clearly* more accurate
  (a higher accuracy and a clustered paired test, Holm-adjusted over the condition's pairs of models, with
  p < 0.05); equal accuracies always share a rank; the models of rank 1 are *tied with the leader*;
- each accuracy is *above chance*, *below chance* or *not distinguishable from chance* by its interval against
  0.5;
- the profile *helps* when the lift over ``none`` has its 95% interval above 0 and its Holm-adjusted clustered
  paired test p < 0.05, *hurts* when both say so the other way, and is *inconclusive* otherwise;
- a position-locked judge (:func:`prb_utils.analysis.breakdowns.position_locked`) gets no rank and no verdict;
  the oracle condition ``rubric`` is never ranked: it is shown beside the benchmark conditions, marked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prb_utils.analysis.breakdowns import position_locked
from prb_utils.analysis.metrics import accuracy_table, compare, profile_lift, require_columns
from prb_utils.analysis.resampling import LEVEL, SEED, default_n_boot
from prb_utils.models.kinds import MODEL_KINDS
from prb_utils.profile import condition_sort_key
from prb_utils.schema import is_oracle

ALPHA = 0.05
CHANCE = 0.5  # the accuracy of a coin: each pair has two answers


@dataclass(frozen=True)
class Rule:
    """One verdict's rule as data: its name, the words it can say, and the sentence that states it (``{unit}``
    is the resampling unit's name, e.g. ``question``).

    >>> RULES["chance"].say("question").startswith("above chance")
    True
    """

    name: str
    verdicts: tuple[str, ...]
    text: str

    def say(self, unit: str) -> str:
        """The rule's sentence for ``unit`` (``pair`` when pairs are their own units)."""
        return self.text.format(unit=unit, alpha=ALPHA, chance=CHANCE)


#: Every verdict of the findings, one rule each: the only place these rules are worded.
RULES: dict[str, Rule] = {rule.name: rule for rule in (
    Rule("accuracy", (), "accuracy: correct / pairs; a tie (the chosen and the rejected answer scored equal: its "
                         "share is the tie rate) and an invalid score count as not correct, as in the reference "
                         "scripts (half credit only on request, and then said); a near tie (two scores within the "
                         "resolution of the dtype they were computed in) keeps its outcome and is counted beside "
                         "the ties; its 95% interval is a percentile bootstrap over whole {unit}s (seed 0)"),
    Rule("chance", ("above chance", "not distinguishable from chance", "below chance"),
         "above chance: the accuracy's 95% interval lies above {chance}; below chance: below it; otherwise not "
         "distinguishable from chance"),
    Rule("rank", ("tied with the leader",),
         "shared rank: 1 + the number of models clearly more accurate under the same condition; clearly: a paired "
         "sign-flip test over whole {unit}s (the clustered McNemar test), Holm-adjusted over the condition's pairs "
         "of models, gives p < {alpha}; equal accuracies share the best rank among them, no model ranks above a more "
         "accurate one, and the models of rank 1 are tied with the leader"),
    Rule("rank_interval", (),
         "rank interval: the 2.5th and 97.5th percentiles of the model's rank (1 + the models strictly more "
         "accurate) over bootstrap resamples of whole {unit}s"),
    Rule("lift", ("helps", "hurts", "inconclusive"),
         "helps: the lift over none has its 95% paired interval (over whole {unit}s) above 0 and its clustered "
         "paired test, Holm-adjusted over every lift, gives p < {alpha}; hurts: both the other way; otherwise "
         "inconclusive"),
    Rule("lock", ("position-locked",),
         "position-locked: a judge whose verdicts keep their letter when the answers swap places; its accuracy "
         "measures the answer order, so it gets no rank and no verdict"),
    Rule("oracle", ("upper bound", "not an upper bound", "profile-blind"),
         "oracle: the condition rubric shows the RM the answer key; it is an upper bound for a model only where "
         "its accuracy is at least that of every benchmark condition of the model; a model that never reads the "
         "profile (profile-blind) has no oracle gap"),
)}
LEADERBOARD_COLUMNS = ["profile", "oracle", "rank", "rank_low", "rank_high", "model", "kind", "accuracy", "ci_low",
                       "ci_high", "n", "ties", "tie_rate", "near_ties", "invalid", "chance", "tied_with_leader", "p_vs_leader",
                       "lift", "lift_low", "lift_high", "lift_verdict", "locked", "locked_reason"]


def unit_name(units: str | None) -> str:
    """How the rules name the resampling unit.

    >>> unit_name("question"), unit_name(None)
    ('question', 'pair')
    """
    return units or "pair"


def chance_verdict(low: float, high: float) -> str:
    """One phrase for an accuracy's interval against chance (:data:`RULES` ``chance``); "" when undefined.

    >>> chance_verdict(0.55, 0.7), chance_verdict(0.3, 0.6), chance_verdict(0.1, 0.4)
    ('above chance', 'not distinguishable from chance', 'below chance')
    """
    if not (np.isfinite(low) and np.isfinite(high)):
        return ""
    above, neither, below = RULES["chance"].verdicts
    return above if low > CHANCE else below if high < CHANCE else neither


def lift_verdict(low: float, high: float, p_holm: float, *, alpha: float = ALPHA) -> str:
    """One word for a lift under :data:`RULES` ``lift``.

    >>> lift_verdict(0.02, 0.2, 0.01), lift_verdict(-0.3, -0.1, 0.001), lift_verdict(0.01, 0.2, 0.2)
    ('helps', 'hurts', 'inconclusive')
    """
    helps, hurts, inconclusive = RULES["lift"].verdicts
    if not np.isfinite(p_holm) or p_holm >= alpha:
        return inconclusive
    if low > 0:
        return helps
    if high < 0:
        return hurts
    return inconclusive


def shared_ranks(accuracy: pd.Series, clearly_better: set[tuple[str, str]]) -> pd.Series:
    """Each model's shared rank (:data:`RULES` ``rank``): 1 + the number of models clearly better than it
    (``clearly_better`` holds ``(better, worse)`` pairs of index labels, the better one more accurate); equal
    accuracies share the best rank among them, and a model never ranks above a more accurate one.

    >>> shared_ranks(pd.Series({"a": 0.8, "b": 0.7, "c": 0.2}), {("a", "c"), ("b", "c")}).tolist()
    [1, 1, 3]
    >>> shared_ranks(pd.Series({"a": 0.8, "b": 0.5, "c": 0.5}), {("a", "b")}).tolist()
    [1, 1, 1]
    """
    raw = {m: 1 + sum((o, m) in clearly_better and accuracy[o] > accuracy[m] for o in accuracy.index)
           for m in accuracy.index}
    ranks: dict[str, int] = {}
    floor = 1
    for value in sorted(set(accuracy.round(12)), reverse=True):
        group = [m for m in accuracy.index if round(accuracy[m], 12) == value]
        floor = max(floor, min(raw[m] for m in group))
        ranks.update(dict.fromkeys(group, floor))
    return pd.Series(ranks, dtype=int)[accuracy.index]


def rank_intervals(rows: pd.DataFrame, *, units: str | None = None, n_boot: int | None = None, seed: int = SEED,
                   level: float = LEVEL) -> pd.DataFrame:
    """Each model's ``level`` rank interval (:data:`RULES` ``rank_interval``): its rank (1 + the models strictly
    more accurate) in every bootstrap resample of whole ``units`` (pairs when None), and the percentiles of those
    ranks. ``rows``: one condition's per-pair rows of the ranked models. Columns ``model, rank_low, rank_high``.

    >>> rows = pd.DataFrame({"model": ["a"] * 20 + ["b"] * 20, "subset": "s", "id": list(range(20)) * 2,
    ...                      "outcome": ["correct"] * 20 + ["wrong"] * 20})
    >>> rank_intervals(rows, n_boot=200).values.tolist()
    [['a', 1, 1], ['b', 2, 2]]
    """
    models = sorted(rows["model"].astype(str).unique())
    if not models:
        return pd.DataFrame(columns=["model", "rank_low", "rank_high"])
    cluster = rows[units].astype(str) if units else rows["subset"].astype(str) + "/" + rows["id"].astype(str)
    codes, uniques = pd.factorize(cluster, sort=True)
    correct = (rows["outcome"] == "correct").to_numpy(float)
    column = pd.Categorical(rows["model"].astype(str), categories=models).codes
    sums = np.zeros((len(uniques), len(models)))
    sizes = np.zeros((len(uniques), len(models)))
    np.add.at(sums, (codes, column), correct)
    np.add.at(sizes, (codes, column), 1.0)
    draws = default_n_boot(len(uniques), n_boot)
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(uniques), np.full(len(uniques), 1 / len(uniques)), size=draws)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = (weights @ sums) / (weights @ sizes)
    accuracy = np.nan_to_num(accuracy, nan=-1.0)
    ranks = 1 + (accuracy[:, None, :] > accuracy[:, :, None] + 1e-12).sum(axis=2)
    low, high = np.quantile(ranks, [0.5 - level / 2, 0.5 + level / 2], axis=0, method="inverted_cdf")
    return pd.DataFrame({"model": models, "rank_low": low.astype(int), "rank_high": high.astype(int)})


def _ranked(part: pd.DataFrame, rows: pd.DataFrame, *, units: str | None, seed: int, level: float,
            n_boot: int | None = None) -> pd.DataFrame:
    """``part`` (one benchmark condition) with ``rank``, ``tied_with_leader`` and ``p_vs_leader``."""
    part = part.sort_values(["locked", "accuracy", "model"], ascending=[True, False, True]).copy()
    part["rank"], part["tied_with_leader"], part["p_vs_leader"] = np.nan, False, np.nan
    part["rank_low"], part["rank_high"] = np.nan, np.nan
    ranked = part[~part["locked"]]
    if ranked.empty:
        return part
    better: set[tuple[str, str]] = set()
    leader = ranked["model"].iloc[0]
    if len(ranked) > 1:
        tests = compare(rows[rows["model"].isin(ranked["model"])], "model", by=[], units=units, n_boot=10,
                        seed=seed, level=level)
        for t in tests.itertuples():
            if t.p_holm < ALPHA:
                better.add((t.level_b, t.level_a) if t.diff > 0 else (t.level_a, t.level_b))
            if leader in (t.level_a, t.level_b):
                other = t.level_b if t.level_a == leader else t.level_a
                part.loc[part["model"] == other, "p_vs_leader"] = t.p_holm
    accuracy = ranked.set_index("model")["accuracy"]
    ranks = shared_ranks(accuracy, better)
    part.loc[~part["locked"], "rank"] = part.loc[~part["locked"], "model"].map(ranks).astype(float)
    part["tied_with_leader"] = part["rank"] == 1
    spans = rank_intervals(rows[rows["model"].isin(ranked["model"])], units=units, n_boot=n_boot, seed=seed,
                           level=level).set_index("model")
    part["rank_low"] = part["model"].astype(str).map(spans["rank_low"]).where(~part["locked"])
    part["rank_high"] = part["model"].astype(str).map(spans["rank_high"]).where(~part["locked"])
    return part.sort_values(["locked", "rank", "accuracy", "model"], ascending=[True, True, False, True])


def profile_lifts(results: pd.DataFrame, *, baseline: str = "none", units: str | None = None,
                  n_boot: int | None = None, seed: int = SEED, level: float = LEVEL) -> pd.DataFrame:
    """:func:`prb_utils.analysis.metrics.profile_lift` per model (clustered by ``units``) of the models that read
    the profile, Holm-adjusted over every lift, with its ``verdict`` (:data:`RULES` ``lift``); empty when there
    is no second condition or no ``baseline`` rows."""
    kinds = results.groupby("model")["kind"].first()
    blind = {m for m, k in kinds.items() if k in MODEL_KINDS and not MODEL_KINDS[k].reads_profile}
    rows = results[~results["model"].isin(blind)]
    if rows.empty or baseline not in set(rows["profile"]) or rows["profile"].nunique() < 2:
        return pd.DataFrame()
    lifts = profile_lift(rows, baseline=baseline, units=units, n_boot=n_boot, seed=seed, level=level)
    lifts["verdict"] = [lift_verdict(lo, hi, p) for lo, hi, p in zip(lifts["ci_low"], lifts["ci_high"],
                                                                      lifts["p_holm"], strict=True)]
    return lifts


def leaderboard(results: pd.DataFrame, *, model: str = "model", baseline: str = "none", units: str | None = None,
                lifts: pd.DataFrame | None = None, n_boot: int | None = None, seed: int = SEED,
                level: float = LEVEL) -> pd.DataFrame:
    """One row per job (``model``: a column naming one job per condition, e.g. ``job_label``) and profile
    condition, benchmark conditions in order and the oracle last: columns :data:`LEADERBOARD_COLUMNS`. ``kind``
    is ``baseline`` for the model-free baselines. ``units`` (e.g. ``"question"``) clusters every interval and
    test; without it, pairs are independent (Wilson intervals, exact McNemar). Rules: :data:`RULES`. ``lift`` is
    empty for ``baseline`` itself, for the oracle, and for a model that never reads the profile; ``lifts`` (from
    :func:`profile_lifts` of the same rows) is used as it is instead of being computed again.

    >>> res = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "kind": "length", "profile": "none",
    ...                     "subset": "s", "id": [1, 2, 3, 4] * 2, "outcome": ["correct"] * 4 + ["wrong"] * 4})
    >>> leaderboard(res)[["rank", "model", "accuracy", "tied_with_leader"]].values.tolist()
    [[1.0, 'a', 1.0, True], [1.0, 'b', 0.0, True]]
    """
    require_columns(results, [model, "kind", "profile", "subset", "id", "outcome"])
    rows = results.assign(model=results[model]) if model != "model" else results
    table = accuracy_table(rows, by=["model", "profile"], ci="bootstrap" if units else "wilson", units=units,
                           n_boot=n_boot, seed=seed, level=level)
    kinds = rows.groupby("model")["kind"].first()
    table["kind"] = table["model"].map(kinds.map(lambda k: MODEL_KINDS[k].label if k in MODEL_KINDS else k))
    table["oracle"] = table["profile"].map(is_oracle)
    table["tie_rate"] = table["ties"] / table["n"].where(table["n"] > 0)
    if "near_ties" not in table.columns:
        table["near_ties"] = 0
    locks = position_locked(rows) if {"verdict_ab", "verdict_ba"} <= set(rows.columns) else pd.DataFrame()
    locked = {} if locks.empty else {(r.model, r.profile): r.warning for r in locks.itertuples() if r.locked}
    pairs = list(zip(table["model"], table["profile"], strict=True))
    table["locked"] = [pair in locked for pair in pairs]
    table["locked_reason"] = [locked.get(pair, "") for pair in pairs]
    table["chance"] = [chance_verdict(lo, hi) if not lock else ""
                       for lo, hi, lock in zip(table["ci_low"], table["ci_high"], table["locked"], strict=True)]
    if lifts is None:
        lifts = profile_lifts(rows, baseline=baseline, units=units, n_boot=n_boot, seed=seed, level=level)
    parts = []
    for condition in sorted(table["profile"].unique(), key=condition_sort_key):
        part = table[table["profile"] == condition].copy()
        if is_oracle(condition):
            part = part.sort_values(["accuracy", "model"], ascending=[False, True])
            part["rank"], part["tied_with_leader"], part["p_vs_leader"] = np.nan, False, np.nan
            part["rank_low"], part["rank_high"] = np.nan, np.nan
        else:
            part = _ranked(part, rows[rows["profile"] == condition], units=units, seed=seed, level=level,
                           n_boot=n_boot)
        if not lifts.empty:
            mine = lifts[lifts["profile"] == condition].set_index("model")
            part["lift"] = part["model"].map(mine["lift"])
            part["lift_low"] = part["model"].map(mine["ci_low"])
            part["lift_high"] = part["model"].map(mine["ci_high"])
            part["lift_verdict"] = [v if isinstance(v, str) and not lock else ""
                                    for v, lock in zip(part["model"].map(mine["verdict"]), part["locked"],
                                                       strict=True)]
        parts.append(part)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=LEADERBOARD_COLUMNS)
    for column in ("lift", "lift_low", "lift_high"):
        if column not in out.columns:
            out[column] = np.nan
    if "lift_verdict" not in out.columns:
        out["lift_verdict"] = ""
    out["lift_verdict"] = out["lift_verdict"].fillna("")
    out["tied_with_leader"] = out["tied_with_leader"].astype(bool)
    return out[LEADERBOARD_COLUMNS].reset_index(drop=True)


def leaderboard_notes(board: pd.DataFrame, *, units: str | None = None) -> list[str]:
    """The sentences that go with a :func:`leaderboard`: the rules it applies (:data:`RULES`, worded for
    ``units``), why a lift whose interval excludes 0 can still be inconclusive (where that happens), and each
    locked judge's reason once.

    >>> board = pd.DataFrame({"lift": [0.2], "lift_low": [0.05], "lift_high": [0.4], "lift_verdict": ["inconclusive"],
    ...                       "locked_reason": [""], "oracle": [False]})
    >>> len(leaderboard_notes(board))
    6
    """
    unit = unit_name(units)
    notes = [f"{RULES[name].say(unit)[0].upper()}{RULES[name].say(unit)[1:]}."
             for name in ("accuracy", "chance", "rank", "rank_interval", "lift")]
    disagree = board[(board["lift_verdict"] == "inconclusive") & ((board["lift_low"] > 0) | (board["lift_high"] < 0))]
    if not disagree.empty:
        notes.append("Where a lift's interval excludes 0 and the verdict is still inconclusive, the test is adjusted "
                     "(Holm) for every lift on the page: with this many comparisons the evidence is not enough.")
    if board["oracle"].any():
        notes.append(f"{RULES['oracle'].say(unit)[0].upper()}{RULES['oracle'].say(unit)[1:]}.")
    notes += list(dict.fromkeys(r for r in board["locked_reason"] if r))
    return notes
