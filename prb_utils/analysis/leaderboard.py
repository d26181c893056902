"""A leaderboard per profile condition: a shared rank, model, kind, accuracy [95% CI] with its verdict against
chance, and the lift over ``none`` with one verdict, each under one stated rule (:data:`RULES`).

Readers of reward-model results expect the RewardBench leaderboard's shape (rank, type, score), not a "best
model": on a small sample several RMs are indistinguishable, and a judge that answers by position has an
accuracy that measures the order of the answers. Pairs are grouped (a question is asked for several users, and
twin pairs share the question and both answers), so every interval and test here resamples or permutes whole
``units`` (a column such as ``question``) when one is given; without one, every pair is its own unit.

- a shared rank (the Arena's rule): 1 + the number of models of the condition that are *clearly* more accurate
  (a higher accuracy and a clustered paired test, Holm-adjusted over the condition's pairs of models, with
  p < 0.05), never better than a more accurate model's rank; the models of rank 1 are *tied with the leader*, so
  no model is tied with a leader whose test against it clears; its rank range runs from that rank to the number of
  models not clearly less accurate (the same tests), so a rank always lies in its own range;
- each accuracy is *above chance*, *below chance* or *not distinguishable from chance* by its interval against
  0.5;
- the profile *helps* when the lift over ``none`` has its 95% interval above 0 and its clustered paired test,
  Holm-adjusted over the family of lifts (:class:`Family`: the lifts that can get a verdict), p < 0.05, *hurts*
  when both say so the other way, and is *inconclusive* otherwise;
- a position-locked judge (:func:`prb_utils.analysis.breakdowns.position_locked`) gets no rank and no verdict, and
  is a member of no family (its tests would only dilute the others');
  the oracle condition ``rubric`` is never ranked: it is shown beside the benchmark conditions, marked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prb_utils.analysis.breakdowns import position_locked
from prb_utils.analysis.metrics import (
    accuracy_table,
    compare,
    family_holm,
    holm,
    profile_lift,
    require_columns,
)
from prb_utils.analysis.resampling import LEVEL, SEED
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
                         "the ties; its interval follows the store's resampling plan (the Intervals line)"),
    Rule("chance", ("above chance", "not distinguishable from chance", "below chance"),
         "above chance: the accuracy's 95% interval lies above {chance}; below chance: below it; otherwise not "
         "distinguishable from chance"),
    Rule("rank", ("tied with the leader",),
         "shared rank: 1 + the number of models clearly more accurate under the same condition; clearly: a paired "
         "sign-flip test over whole {unit}s (the clustered McNemar test), Holm-adjusted over the condition's pairs "
         "of models, gives p < {alpha}; no model ranks above a more accurate one; the models of rank 1 are tied with "
         "the leader"),
    Rule("rank_interval", (),
         "rank range: from the shared rank to the number of models of the condition that are not clearly less "
         "accurate (the same Holm-adjusted tests): the ranks the tests leave open"),
    Rule("lift", ("helps", "hurts", "inconclusive"),
         "helps: the lift over none has its 95% paired interval (over whole {unit}s) above 0 and its clustered "
         "paired test, Holm-adjusted within the family of lifts under the same condition (every lift that can get "
         "a verdict: not a position-locked judge's, not a profile-blind model's), gives p < {alpha}; hurts: both "
         "the other way; otherwise inconclusive"),
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


@dataclass(frozen=True)
class Family:
    """One family of verdicts, named once: the ``tests`` adjusted together by ``correction`` (Holm), the models
    whose tests they are (``members``), and the models left out with the reason (``left_out``: a model that can get
    no verdict is no member, so it cannot dilute the others'). ``tests`` defaults to one per member.

    >>> family = Family("lifts", ("a", "b"), 3, left_out=(("j", "position-locked"),))
    >>> family.say(), family.label()
    ('lifts: Holm over 3 tests of a, b; not members: j (position-locked)', 'lifts: Holm over 3 tests')
    >>> [round(p, 2) for p in Family("swap", ("a", "b")).adjust({"a": 0.02, "b": 0.04, "j": 1.0}).values()]
    [0.04, 0.04]
    """

    name: str
    members: tuple[str, ...]
    tests: int | None = None
    correction: str = "Holm"
    left_out: tuple[tuple[str, str], ...] = ()

    @property
    def size(self) -> int:
        """The number of tests adjusted together."""
        return len(self.members) if self.tests is None else self.tests

    def label(self) -> str:
        """How a table cell names the family beside an adjusted p."""
        return f"{self.name}: {self.correction} over {self.size} test{'s' if self.size != 1 else ''}"

    def say(self) -> str:
        """The family in one clause, for the caption or note of every table that shows its adjusted p."""
        text = f"{self.label()} of " + (", ".join(self.members) or "no model")
        if self.left_out:
            text += "; not members: " + "; ".join(f"{m} ({why})" for m, why in self.left_out)
        return text

    def adjust(self, p_values: dict[str, float]) -> dict[str, float]:
        """Holm-adjusted p of each member with a p in ``p_values`` (a non-member's p is no part of the family)."""
        mine = [m for m in self.members if m in p_values]
        return {m: float(p) for m, p in zip(mine, holm([p_values[m] for m in mine]), strict=True)}


LOCK_REASON = "position-locked"
BLIND_REASON = "never reads the profile"


def shared_ranks(accuracy: pd.Series, clearly_better: set[tuple[str, str]]) -> pd.Series:
    """Each model's shared rank (:data:`RULES` ``rank``): 1 + the number of models clearly better than it
    (``clearly_better`` holds ``(better, worse)`` pairs of index labels, the better one more accurate), raised where
    needed so that no model ranks above a strictly more accurate one. Equal accuracies do not lend each other a
    rank: a model that a test separates from the leader is never tied with it.

    >>> shared_ranks(pd.Series({"a": 0.8, "b": 0.7, "c": 0.2}), {("a", "c"), ("b", "c")}).tolist()
    [1, 1, 3]
    >>> shared_ranks(pd.Series({"a": 0.8, "b": 0.5, "c": 0.5}), {("a", "b")}).tolist()
    [1, 2, 1]
    >>> shared_ranks(pd.Series({"a": 0.8, "b": 0.6, "c": 0.5}), {("a", "b")}).tolist()
    [1, 2, 2]
    """
    raw = {m: 1 + sum((o, m) in clearly_better and accuracy[o] > accuracy[m] for o in accuracy.index)
           for m in accuracy.index}
    ranks: dict[str, int] = {}
    floor = 1
    for value in sorted(set(accuracy.round(12)), reverse=True):
        group = [m for m in accuracy.index if round(accuracy[m], 12) == value]
        ranks.update({m: max(raw[m], floor) for m in group})
        floor = max(floor, *(ranks[m] for m in group))
    return pd.Series(ranks, dtype=int)[accuracy.index]


def rank_ranges(ranks: pd.Series, clearly_better: set[tuple[str, str]]) -> pd.DataFrame:
    """Each model's rank range (:data:`RULES` ``rank_interval``): from its shared rank (``ranks``) to the number
    of models not clearly worse than it (the same ``(better, worse)`` tests): the ranks the tests leave open, so
    the shared rank always lies in its own range. Columns ``model, rank_low, rank_high``.

    >>> ranks = shared_ranks(pd.Series({"a": 0.8, "b": 0.7, "c": 0.2}), {("a", "c"), ("b", "c")})
    >>> rank_ranges(ranks, {("a", "c"), ("b", "c")}).values.tolist()
    [['a', 1, 2], ['b', 1, 2], ['c', 3, 3]]
    """
    n = len(ranks)
    worse = {m: sum((m, o) in clearly_better for o in ranks.index) for m in ranks.index}
    return pd.DataFrame({"model": list(ranks.index), "rank_low": [int(ranks[m]) for m in ranks.index],
                         "rank_high": [max(int(ranks[m]), n - worse[m]) for m in ranks.index]})


def _ranked(part: pd.DataFrame, rows: pd.DataFrame, *, units: str | None, seed: int, level: float,
            n_boot: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``part`` (one benchmark condition) with ``rank``, ``rank_low``/``rank_high``, ``tied_with_leader`` and
    ``p_vs_leader``, and the condition's model comparisons (its rank family: every pair of ranked models,
    Holm-adjusted together)."""
    part = part.sort_values(["locked", "accuracy", "model"], ascending=[True, False, True]).copy()
    part["rank"], part["tied_with_leader"], part["p_vs_leader"] = np.nan, False, np.nan
    part["rank_low"], part["rank_high"] = np.nan, np.nan
    ranked = part[~part["locked"]]
    if ranked.empty:
        return part, pd.DataFrame()
    better: set[tuple[str, str]] = set()
    leader = ranked["model"].iloc[0]
    tests = pd.DataFrame()
    if len(ranked) > 1:
        tests = compare(rows[rows["model"].isin(ranked["model"])], "model", by=[], units=units, n_boot=n_boot,
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
    spans = rank_ranges(ranks, better).set_index("model")
    part["rank_low"] = part["model"].map(spans["rank_low"]).where(~part["locked"])
    part["rank_high"] = part["model"].map(spans["rank_high"]).where(~part["locked"])
    return part.sort_values(["locked", "rank", "accuracy", "model"], ascending=[True, True, False, True]), tests


def locked_jobs(results: pd.DataFrame) -> dict[tuple[str, str], str]:
    """``{(model, profile): warning}`` of every position-locked judge job in ``results``
    (:func:`prb_utils.analysis.breakdowns.position_locked`); empty without judge rows."""
    if not {"verdict_ab", "verdict_ba"} <= set(results.columns):
        return {}
    locks = position_locked(results)
    return {} if locks.empty else {(r.model, r.profile): r.warning for r in locks.itertuples() if r.locked}


def profile_lifts(results: pd.DataFrame, *, baseline: str = "none", units: str | None = None,
                  n_boot: int | None = None, seed: int = SEED, level: float = LEVEL,
                  locked: set[tuple[str, str]] | None = None) -> pd.DataFrame:
    """:func:`prb_utils.analysis.metrics.profile_lift` per model (clustered by ``units``) of the family of lifts:
    every lift that can get a verdict (not a model that never reads the profile, not a position-locked job:
    ``locked``, ``(model, profile)`` pairs, default :func:`locked_jobs` of ``results``; a model locked under
    ``baseline`` has no lift at all), Holm-adjusted within its condition (one family per condition: the models'
    lifts under it, so a lift's p does not depend on which other conditions a store holds), with its ``verdict``
    (:data:`RULES` ``lift``) and ``family`` (its name). The families are in ``attrs["families"]``
    (``{name: Family}``). Empty when there is no second condition or no
    ``baseline`` rows."""
    kinds = results.groupby("model")["kind"].first()
    blind = {m for m, k in kinds.items() if k in MODEL_KINDS and not MODEL_KINDS[k].reads_profile}
    locked = set(locked_jobs(results)) if locked is None else set(locked)
    whole = {m for m, p in locked if p == baseline}
    keep = ~results["model"].isin(blind | whole)
    keep &= ~pd.Series([(m, p) in locked for m, p in zip(results["model"], results["profile"], strict=True)],
                       index=results.index, dtype=bool)
    rows = results[keep]
    left_out = tuple(sorted({*((m, BLIND_REASON) for m in blind),
                             *((m, f"{LOCK_REASON} under {p}") for m, p in locked)}))
    if rows.empty or baseline not in set(rows["profile"]) or rows["profile"].nunique() < 2:
        return pd.DataFrame()
    lifts = profile_lift(rows, baseline=baseline, units=units, n_boot=n_boot, seed=seed, level=level)
    lifts["p_holm"] = family_holm(lifts, ["profile"])   # one family per condition: its models' lifts
    lifts["verdict"] = [lift_verdict(lo, hi, p) for lo, hi, p in zip(lifts["ci_low"], lifts["ci_high"],
                                                                      lifts["p_holm"], strict=True)]
    families = {}
    for condition, part in lifts.groupby("profile", sort=False):
        name = lift_family_name(str(condition), baseline)
        families[name] = Family(name, tuple(part["model"].astype(str)), int(part["p_value"].notna().sum()),
                                left_out=left_out)
    lifts["family"] = [lift_family_name(str(c), baseline) for c in lifts["profile"]]
    lifts.attrs["families"] = families
    return lifts


def lift_family_name(condition: str, baseline: str = "none") -> str:
    """The name of the family of lifts under ``condition``.

    >>> lift_family_name("top3")
    'lifts of top3 over none'
    """
    return f"lifts of {condition} over {baseline}"


@dataclass(frozen=True)
class Board:
    """:func:`rank_board`: the leaderboard frame, every condition's model comparisons (its rank family, with a
    ``family`` column) and the families (``{name: Family}``: one per ranked condition, and the lifts')."""

    frame: pd.DataFrame
    comparisons: pd.DataFrame
    families: dict[str, Family]


def leaderboard(results: pd.DataFrame, **options) -> pd.DataFrame:
    """The frame of :func:`rank_board` (same options).

    >>> res = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "kind": "length", "profile": "none",
    ...                     "subset": "s", "id": [1, 2, 3, 4] * 2, "outcome": ["correct"] * 4 + ["wrong"] * 4})
    >>> leaderboard(res)[["rank", "model", "accuracy", "tied_with_leader"]].values.tolist()
    [[1.0, 'a', 1.0, True], [1.0, 'b', 0.0, True]]
    """
    return rank_board(results, **options).frame


def rank_board(results: pd.DataFrame, *, model: str = "model", baseline: str = "none", units: str | None = None,
               lifts: pd.DataFrame | None = None, n_boot: int | None = None, seed: int = SEED,
               level: float = LEVEL, half_credit: bool = False) -> Board:
    """One row per job (``model``: a column naming one job per condition, e.g. ``job_label``) and profile
    condition, benchmark conditions in order and the oracle last: columns :data:`LEADERBOARD_COLUMNS`. ``kind``
    is ``baseline`` for the model-free baselines. ``units`` (e.g. ``"question"``) clusters every interval and
    test; without it, pairs are independent (Wilson intervals, exact McNemar). Rules: :data:`RULES`. ``lift`` is
    empty for ``baseline`` itself, for the oracle, and for a model that never reads the profile; ``lifts`` (from
    :func:`profile_lifts` of the same rows) is used as it is instead of being computed again. ``half_credit``
    counts a tie 0.5 in the accuracy and its interval; the ranks' and lifts' paired tests count strict correctness.

    >>> res = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "kind": "length", "profile": "none",
    ...                     "subset": "s", "id": [1, 2, 3, 4] * 2, "outcome": ["correct"] * 4 + ["wrong"] * 4})
    >>> board = rank_board(res)
    >>> board.families["ranks under none"].say()
    'ranks under none: Holm over 1 test of a, b'
    """
    require_columns(results, [model, "kind", "profile", "subset", "id", "outcome"])
    rows = results.assign(model=results[model]) if model != "model" else results
    table = accuracy_table(rows, by=["model", "profile"], ci="bootstrap" if units else "wilson", units=units,
                           n_boot=n_boot, seed=seed, level=level, half_credit=half_credit)
    kinds = rows.groupby("model")["kind"].first()
    table["kind"] = table["model"].map(kinds.map(lambda k: MODEL_KINDS[k].label if k in MODEL_KINDS else k))
    table["oracle"] = table["profile"].map(is_oracle)
    table["tie_rate"] = table["ties"] / table["n"].where(table["n"] > 0)
    if "near_ties" not in table.columns:
        table["near_ties"] = 0
    locked = locked_jobs(rows)
    pairs = list(zip(table["model"], table["profile"], strict=True))
    table["locked"] = [pair in locked for pair in pairs]
    table["locked_reason"] = [locked.get(pair, "") for pair in pairs]
    table["chance"] = [chance_verdict(lo, hi) if not lock else ""
                       for lo, hi, lock in zip(table["ci_low"], table["ci_high"], table["locked"], strict=True)]
    if lifts is None:
        lifts = profile_lifts(rows, baseline=baseline, units=units, n_boot=n_boot, seed=seed, level=level,
                              locked=set(locked))
    parts, comparisons, families = [], [], {}
    for condition in sorted(table["profile"].unique(), key=condition_sort_key):
        part = table[table["profile"] == condition].copy()
        if is_oracle(condition):
            part = part.sort_values(["accuracy", "model"], ascending=[False, True])
            part["rank"], part["tied_with_leader"], part["p_vs_leader"] = np.nan, False, np.nan
            part["rank_low"], part["rank_high"] = np.nan, np.nan
        else:
            part, tests = _ranked(part, rows[rows["profile"] == condition], units=units, seed=seed, level=level,
                                  n_boot=n_boot)
            name = f"ranks under {condition}"
            ranked = tuple(part.loc[~part["locked"], "model"].astype(str))
            families[name] = Family(name, ranked, len(tests), left_out=tuple(
                (m, LOCK_REASON) for m in part.loc[part["locked"], "model"].astype(str)))
            if not tests.empty:
                comparisons.append(tests.assign(profile=condition, family=name))
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
    out = out[LEADERBOARD_COLUMNS].reset_index(drop=True)
    if not lifts.empty:
        families.update(lifts.attrs.get("families", {}))
    tests = pd.concat(comparisons, ignore_index=True) if comparisons else pd.DataFrame()
    if not tests.empty:
        tests = tests[["family", "profile", *[c for c in tests.columns if c not in ("family", "profile")]]]
    return Board(out, tests, families)


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
                     "(Holm) within its family, the lifts under the same condition: with that many comparisons the evidence is "
                     "not enough.")
    if board["oracle"].any():
        notes.append(f"{RULES['oracle'].say(unit)[0].upper()}{RULES['oracle'].say(unit)[1:]}.")
    notes += list(dict.fromkeys(r for r in board["locked_reason"] if r))
    return notes
