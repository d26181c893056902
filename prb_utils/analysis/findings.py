"""The findings of a store: every verdict computed once, under the rules of
:data:`prb_utils.analysis.leaderboard.RULES`, for the index, every page and the live notebooks to render.

:func:`compute_findings` takes the per-item rows (one job per ``model`` label) and the benchmark records, and
returns :class:`Findings`: the leaderboard (shared ranks, accuracy against chance, lift verdicts, locks, the
oracle marked), calibration with one row per model and condition (n/a with its reason where a number would
mislead: a locked judge, a generate-mode judge's votes, a constant score), the oracle gaps, the rank families'
model comparisons and every family of verdicts (:class:`prb_utils.analysis.leaderboard.Family`). Every interval
and test follows the store's resampling plan (:class:`prb_utils.analysis.uncertainty.ResamplingPlan`: whole
questions by default), so one lift has one interval and one adjusted p wherever it appears.

Example:
    >>> rows = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "kind": "length", "profile": "none",
    ...                      "subset": "s", "id": ["1", "2", "3", "4"] * 2,
    ...                      "outcome": ["correct"] * 4 + ["wrong"] * 4})
    >>> found = compute_findings(rows, calibrate=False)
    >>> found.headline()[0]["sentence"]
    'Under none, all 2 models share rank 1 (they cannot be told apart): a, b. Against chance: 1 above chance, 1 below chance.'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from prb_utils.analysis import calibration as calib
from prb_utils.analysis.attribution import ATTRIBUTION_RULE
from prb_utils.analysis.leaderboard import (
    RULES,
    Family,
    chance_verdict,
    leaderboard_notes,
    locked_jobs,
    profile_lifts,
    rank_board,
    unit_name,
)
from prb_utils.analysis.marks import marks_for
from prb_utils.analysis.metrics import TIE_RULES, accuracy_table
from prb_utils.analysis.probe_effects import (
    READING_RULE,
    TWIN_RULE,
    check_rule,
    controlled,
    is_reading,
    reading_probes,
    reading_verdicts,
)
from prb_utils.analysis.resampling import TWO_WAY_UNIT
from prb_utils.analysis.style import style_controlled_accuracy
from prb_utils.analysis.uncertainty import PLAN_UNITS, ResamplingPlan
from prb_utils.errors import PRBError
from prb_utils.formatting import P_VALUE, PROPORTION, format_signed, format_value
from prb_utils.models.kinds import MODEL_KINDS
from prb_utils.probes import PROBES
from prb_utils.profile import condition_sort_key
from prb_utils.schema import NO_PROFILE, is_oracle

UNIT = ResamplingPlan().unit  # the unit of the default plan (a store's plan may name another)
LOCKED_REASON = "n/a: position-locked (its probabilities measure the answer order)"
BLIND_NOTE = "never reads the profile"
#: The chance verdict of a position-locked judge job (its accuracy measures the answer order).
LOCKED_CHANCE = "n/a: position-locked"


@dataclass(frozen=True)
class Findings:
    """The verdicts of one store, computed once (:func:`compute_findings`)."""

    board: pd.DataFrame  #: :func:`prb_utils.analysis.leaderboard.leaderboard`, clustered by :attr:`unit`
    lifts: pd.DataFrame  #: :func:`prb_utils.analysis.leaderboard.profile_lifts`: the lifts behind the board's verdicts
    calibration: pd.DataFrame  #: one row per model x condition: source, ECE, Brier, log loss [CI], note
    oracle: pd.DataFrame  #: per model: best benchmark condition, its accuracy, the oracle's, gap, verdict
    style: pd.DataFrame = field(default_factory=pd.DataFrame)  #: style-controlled accuracy (analysis.style)
    subsets: pd.DataFrame = field(default_factory=pd.DataFrame)  #: accuracy per model, condition and subset
    comparisons: pd.DataFrame = field(default_factory=pd.DataFrame)  #: the rank families' model comparisons
    families: dict[str, Family] = field(default_factory=dict)  #: every family of verdicts, named once
    plan: ResamplingPlan = field(default_factory=ResamplingPlan)  #: the resampling plan of every number here
    unit: str = UNIT
    profile_blind: tuple[str, ...] = ()  #: models whose kind never reads the profile
    rules: dict[str, str] = field(default_factory=dict)
    baseline: str = "none"  #: the condition every lift is measured against
    changes: pd.DataFrame = field(default_factory=pd.DataFrame)  #: per model and condition: verdicts it changed
    disagreement: pd.DataFrame = field(default_factory=pd.DataFrame)  #: per condition: pairs the models split on

    # ------------------------------------------------------------------------------------------ views
    def notes(self) -> list[str]:
        """The rule sentences (the resampling plan, the families, and each locked judge's reason once) that go
        under the leaderboard."""
        families = [f"Family of {family.say()}." for family in self.families.values()]
        return [f"{self.plan.rule()}.", *leaderboard_notes(self.board, units=self.unit), *families]

    def conditions(self) -> list[str]:
        """The benchmark conditions of the board, in order (the oracle left out)."""
        return [c for c in dict.fromkeys(self.board["profile"]) if not is_oracle(c)]

    def headline(self) -> list[dict[str, Any]]:
        """Per benchmark condition: the models sharing rank 1 (``leaders``), their count, and one sentence that
        says the tied group and how the group's accuracies stand against chance."""
        out = []
        for condition in self.conditions():
            part = self.board[(self.board["profile"] == condition) & ~self.board["locked"]]
            if part.empty:
                continue
            leaders = part[part["rank"] == 1]
            names = ", ".join(leaders["model"].astype(str))
            if len(leaders) == 1:
                sentence = f"Under {condition}, {names} is clearly the most accurate of {len(part)} models."
            elif len(leaders) == len(part):
                sentence = f"Under {condition}, all {len(part)} models share rank 1 (they cannot be told apart): {names}."
            else:
                sentence = (f"Under {condition}, {len(leaders)} of {len(part)} models share rank 1 (they cannot be "
                            f"told apart): {names}.")
            sentence += self._chance_clause(part)
            out.append({"profile": condition, "leaders": leaders["model"].astype(str).tolist(),
                        "n_models": len(part), "sentence": sentence})
        return out

    @staticmethod
    def _chance_clause(part: pd.DataFrame) -> str:
        above, neither, below = RULES["chance"].verdicts
        counts = part["chance"].value_counts()
        if counts.get(neither, 0) == len(part):
            return f" None of them is distinguishable from chance ({len(part)} of {len(part)})."
        said = [f"{counts[v]} {v}" for v in (above, neither, below) if counts.get(v, 0)]
        return f" Against chance: {', '.join(said)}." if said else ""

    def wide(self) -> pd.DataFrame:
        """One row per model: kind, then per benchmark condition its shared rank and rank interval, accuracy [CI]
        with the chance verdict and the tie rate, the lift and its verdict, and its accuracy per subset (when there
        are several), and the oracle's accuracy as a separate, marked column; a locked job says so instead of a
        rank. Sorted by the best rank the model has."""
        board = self.board
        models = list(dict.fromkeys(board["model"]))
        rows = []
        for model in models:
            mine = board[board["model"] == model]
            row: dict[str, Any] = {"model": model, "kind": mine["kind"].iloc[0]}
            for r in mine.itertuples():
                if r.oracle:
                    row[f"oracle ({r.profile})"] = r.accuracy
                    continue
                row[f"{r.profile}: rank"] = "locked" if r.locked else r.rank
                row[f"{r.profile}: rank interval"] = "" if r.locked else rank_span(r.rank_low, r.rank_high)
                row[f"{r.profile}: accuracy"] = r.accuracy
                row[f"{r.profile}: ci_low"], row[f"{r.profile}: ci_high"] = r.ci_low, r.ci_high
                row[f"{r.profile}: chance"] = r.chance
                row[f"{r.profile}: tie rate"] = r.tie_rate
                row[f"{r.profile}: near ties"] = r.near_ties
                if r.lift_verdict:
                    row[f"{r.profile}: lift"] = r.lift
                    row[f"{r.profile}: lift verdict"] = r.lift_verdict
                if not self.subsets.empty and self.subsets["subset"].nunique() > 1:
                    mine = self.subsets[(self.subsets["model"] == model) & (self.subsets["profile"] == r.profile)]
                    for sub in mine.itertuples():
                        row[f"{r.profile}: accuracy in {sub.subset}"] = sub.accuracy
            ranks = [v for k, v in row.items() if k.endswith(": rank") and not isinstance(v, str)]
            row["_best"] = min(ranks) if ranks else np.inf
            rows.append(row)
        frame = pd.DataFrame(rows)
        if frame.empty:
            return frame
        return frame.sort_values(["_best", "model"]).drop(columns="_best").reset_index(drop=True)

    def marks(self) -> dict[str, str]:
        """What every figure and table says beside a name (:func:`prb_utils.analysis.marks.marks_for`): each
        position-locked job and each oracle condition of the board."""
        locked = self.board.loc[self.board["locked"].astype(bool), ["model", "profile"]]
        return marks_for(locked.itertuples(index=False, name=None),
                         self.board[["model", "profile"]].itertuples(index=False, name=None))

    def numbers(self) -> dict[str, Any]:
        """The findings as plain data, for ``record_numbers`` and the index."""
        return {"unit": self.unit, "rules": self.rules, "leaderboard": self.board, "lifts": self.lifts,
                "comparisons": self.comparisons, "families": [f.say() for f in self.families.values()],
                "style": self.style,
                "headline": self.headline(),
                "calibration": self.calibration, "oracle": self.oracle, "profile_blind": list(self.profile_blind)}


def summary_verdicts(table: pd.DataFrame, results: pd.DataFrame, *, other: pd.DataFrame | None = None,
                     half_credit: bool = False) -> tuple[pd.DataFrame, list[str]]:
    """The command line's summary ``table`` (:func:`~prb_utils.analysis.metrics.summarize` of ``results``) with
    the verdicts the pages give the same rows: a ``chance`` column (:data:`RULES` ``chance``; :data:`LOCKED_CHANCE`
    for a position-locked judge job), and the notes to print under it: the warning of each locked job shown, and
    one line for each row whose verdict against chance depends on how ties count (``other``: the same table under
    the other tie rule, ``half_credit`` the rule of ``table``).

    >>> rows = pd.DataFrame({"model": "judge:x", "profile": "none", "subset": "s", "id": list("abcd"),
    ...                      "outcome": "correct", "verdict_ab": "chosen", "verdict_ba": "rejected"})
    >>> table = pd.DataFrame({"model": ["judge:x"], "profile": ["none"], "n": [4], "ties": [0],
    ...                       "accuracy": [1.0], "ci_low": [1.0], "ci_high": [1.0]})
    >>> shown, notes = summary_verdicts(table, rows)
    >>> shown["chance"].tolist(), notes[0][:30]
    (['n/a: position-locked'], '⚠ Position-locked judge judge:')
    """
    locks = locked_jobs(results)
    if "model" in table.columns:
        shown_models = set(table["model"].astype(str))
        locks = {job: warning for job, warning in locks.items() if job[0] in shown_models}
    by_job = {"model", "profile"} <= set(table.columns)
    chance = [LOCKED_CHANCE if by_job and (str(r["model"]), str(r["profile"])) in locks
              else chance_verdict(r["ci_low"], r["ci_high"]) for _, r in table.iterrows()]
    shown = table.copy()
    shown.insert(shown.columns.get_loc("ci_high") + 1, "chance", chance)
    notes = list(dict.fromkeys(locks.values()))
    if other is not None and len(other) == len(table):
        keys = [c for c in table.columns[: table.columns.get_loc("n")] if c in other.columns]
        theirs = {tuple(o[k] for k in keys): o for _, o in other.iterrows()}
        rule, other_rule = ("with half credit", "when a tie counts as wrong")[:: -1 if not half_credit else 1]
        for position, (_, r) in enumerate(table.iterrows()):
            mine = chance[position]
            o = theirs.get(tuple(r[k] for k in keys)) if keys else other.iloc[position]
            if o is None or mine == LOCKED_CHANCE or not r["ties"]:
                continue
            said = chance_verdict(float(o["ci_low"]), float(o["ci_high"]))
            if said and mine and said != mine:
                label = " ".join(str(r[k]) for k in keys) or "the store"
                notes.append(f"Ties decide {label}'s verdict against chance: {mine} {rule}, {said} "
                             f"{other_rule} ({int(r['ties'])} ties of {int(r['n'])} pairs).")
    return shown, notes


def rank_span(low: float, high: float) -> str:
    """A rank interval as text ("1–3", or "2" when it is one rank; "" when undefined).

    >>> rank_span(1, 3), rank_span(2.0, 2.0), rank_span(float("nan"), 1)
    ('1–3', '2', '')
    """
    if not (np.isfinite(low) and np.isfinite(high)):
        return ""
    return f"{int(low)}" if int(low) == int(high) else f"{int(low)}–{int(high)}"


def oracle_gaps(board: pd.DataFrame, *, profile_blind: Sequence[str] = ()) -> pd.DataFrame:
    """Per model with an oracle row: its best benchmark condition and accuracy, the oracle's accuracy, the gap
    (oracle minus best) and a verdict (:data:`RULES` ``oracle``): ``upper bound`` only where the oracle is at
    least every benchmark condition, ``profile-blind`` for a model that never reads the profile.

    >>> board = pd.DataFrame({"model": "m", "profile": ["none", "full", "rubric"], "oracle": [False, False, True],
    ...                       "accuracy": [0.5, 0.667, 0.619], "locked": False})
    >>> oracle_gaps(board)[["best_condition", "gap", "verdict"]].round(3).values.tolist()
    [['full', -0.048, 'not an upper bound']]
    """
    columns = ["model", "oracle_condition", "oracle_accuracy", "best_condition", "best_accuracy", "gap", "verdict"]
    bound, not_bound, blind = RULES["oracle"].verdicts
    rows = []
    for model, mine in board.groupby("model", sort=False):
        oracle = mine[mine["oracle"]]
        bench = mine[~mine["oracle"] & ~mine["locked"].astype(bool)]
        if oracle.empty or bench.empty:
            continue
        best = bench.loc[bench["accuracy"].idxmax()]
        top = float(oracle["accuracy"].iloc[0])
        verdict = blind if model in profile_blind else bound if top >= float(bench["accuracy"].max()) else not_bound
        rows.append({"model": model, "oracle_condition": oracle["profile"].iloc[0], "oracle_accuracy": top,
                     "best_condition": best["profile"], "best_accuracy": float(best["accuracy"]),
                     "gap": top - float(best["accuracy"]), "verdict": verdict})
    return pd.DataFrame(rows, columns=columns)


def calibration_findings(results: pd.DataFrame, data: pd.DataFrame | None, board: pd.DataFrame, *,
                         n_boot: int | None = None, seed: int = 0) -> pd.DataFrame:
    """:func:`prb_utils.analysis.calibration.calibration_wide` with one row per model and condition (the
    source that applies), and "n/a" with the reason for a position-locked judge (its probabilities measure the
    answer order) and a generate-mode judge (votes, not probabilities)."""
    probs = calib.pair_probabilities(results, data)
    table = calib.calibration_wide(calib.calibration_table(probs, n_boot=n_boot, seed=seed))
    locked = set(zip(board.loc[board["locked"], "model"], board.loc[board["locked"], "profile"], strict=True))
    if locked and not table.empty:
        hit = [(m, p) in locked for m, p in zip(table["model"], table["profile"], strict=True)]
        stats = [c for c in table.columns if c.startswith(tuple(calib.CALIBRATION_STATISTICS))]
        table.loc[hit, stats] = np.nan
        table.loc[hit, "note"] = LOCKED_REASON
    order = sorted(range(len(table)), key=lambda i: (condition_sort_key(table["profile"].iloc[i]),
                                                     str(table["model"].iloc[i])))
    return table.iloc[order].reset_index(drop=True)


def compute_findings(results: pd.DataFrame, data: pd.DataFrame | None = None, *, model: str = "model",
                     baseline: str = "none", plan: ResamplingPlan | None = None, half_credit: bool = False,
                     calibrate: bool = True, keys: bool = False) -> Findings:
    """The findings of ``results`` (per-item rows; ``model`` names one job per condition, e.g. ``job_label``)
    under the resampling ``plan`` (default: whole questions; the units from ``data``, the benchmark records;
    without them each pair is its own unit). ``half_credit`` counts a tie 0.5 in the accuracies (the paired
    tests stay strict). ``calibrate=False`` leaves the calibration table empty (it costs a bootstrap per model
    and condition). ``keys=True``: ``data`` holds the unit keys a store recorded (:func:`prb_utils.store.pair_units`)
    instead of benchmark records (:meth:`ResamplingPlan.attach`)."""
    plan = plan or ResamplingPlan()
    rows = results.assign(model=results[model]) if model != "model" else results
    rows = plan.attach(rows, data, keys=keys)
    options = plan.options()
    locked = set(locked_jobs(rows))
    lifts = profile_lifts(rows, baseline=baseline, locked=locked, **options)
    ranked = rank_board(rows, baseline=baseline, lifts=lifts, half_credit=half_credit, **options)
    board = ranked.frame
    kinds = rows.groupby("model")["kind"].first()
    blind = tuple(m for m, k in kinds.items() if k in MODEL_KINDS and not MODEL_KINDS[k].reads_profile)
    calibration = (calibration_findings(rows, data, board, n_boot=plan.n_boot, seed=plan.seed) if calibrate
                   else pd.DataFrame())
    unit = unit_name(plan.units)
    style = (style_controlled_accuracy(rows, data, level=plan.level)
             if data is not None and {"chosen", "rejected"} <= set(data.columns) else pd.DataFrame())
    subsets = accuracy_table(rows, by=["model", "profile", "subset"], ci=None,
                             half_credit=half_credit)[["model", "profile", "subset", "n", "accuracy"]]
    return Findings(board=board, lifts=lifts, style=style, subsets=subsets, calibration=calibration,
                    oracle=oracle_gaps(board, profile_blind=blind), comparisons=ranked.comparisons,
                    families=ranked.families, plan=plan, unit=unit, profile_blind=blind,
                    rules={name: rule.say(unit) for name, rule in RULES.items()}, baseline=baseline,
                    changes=verdict_changes(rows, baseline=baseline, locked=locked),
                    disagreement=disagreements(rows, locked=locked))


def _outcomes(rows: pd.DataFrame, locked: set[tuple[str, str]]) -> pd.DataFrame:
    """The outcomes of every job that is no position-locked judge's and no oracle's, one column per (model,
    condition), one row per pair."""
    keep = [(m, p) not in locked and not is_oracle(p) for m, p in zip(rows["model"], rows["profile"], strict=True)]
    part = rows[np.asarray(keep, dtype=bool)] if len(rows) else rows
    if part.empty:
        return pd.DataFrame()
    return part.pivot_table(index=["subset", "id"], columns=["model", "profile"], values="outcome", aggfunc="first")


def verdict_changes(rows: pd.DataFrame, *, baseline: str = "none",
                    locked: set[tuple[str, str]] | frozenset = frozenset()) -> pd.DataFrame:
    """Per model and condition other than ``baseline`` (no oracle, no ``locked`` job): the pairs scored under both,
    and how many of them the condition made right (not correct under ``baseline``, correct under it) and made
    wrong (the other way): the pairs page 01's ``profile_flips`` filter keeps.

    >>> rows = pd.DataFrame({"model": "m", "profile": ["none"] * 3 + ["top3"] * 3, "subset": "s",
    ...                      "id": ["1", "2", "3"] * 2, "outcome": ["wrong", "correct", "wrong", "correct", "wrong", "wrong"]})
    >>> verdict_changes(rows)[["model", "profile", "pairs", "made_right", "made_wrong"]].values.tolist()
    [['m', 'top3', 3, 1, 1]]
    """
    columns = ["model", "profile", "pairs", "made_right", "made_wrong"]
    wide = _outcomes(rows, set(locked))
    out = []
    for model, profile in wide.columns:
        if profile == baseline or (model, baseline) not in wide.columns:
            continue
        both = wide[[(model, baseline), (model, profile)]].dropna()
        before, after = both.iloc[:, 0] == "correct", both.iloc[:, 1] == "correct"
        out.append({"model": model, "profile": profile, "pairs": len(both), "made_right": int((~before & after).sum()),
                    "made_wrong": int((before & ~after).sum())})
    frame = pd.DataFrame(out, columns=columns)
    order = sorted(range(len(frame)), key=lambda i: (condition_sort_key(frame["profile"].iloc[i]),
                                                     str(frame["model"].iloc[i])))
    return frame.iloc[order].reset_index(drop=True)


def disagreements(rows: pd.DataFrame, *, locked: set[tuple[str, str]] | frozenset = frozenset()) -> pd.DataFrame:
    """Per condition with two or more models (no oracle, no ``locked`` job): the pairs every one of them scored
    (``pairs``) and those on which one is correct and another is not (``disagree``), with the models' count.

    >>> rows = pd.DataFrame({"model": ["a", "a", "b", "b"], "profile": "none", "subset": "s", "id": ["1", "2"] * 2,
    ...                      "outcome": ["correct", "wrong", "correct", "correct"]})
    >>> disagreements(rows).values.tolist()
    [['none', 2, 2, 1]]
    """
    columns = ["profile", "models", "pairs", "disagree"]
    wide = _outcomes(rows, set(locked))
    out = []
    for profile in dict.fromkeys(p for _, p in wide.columns):
        part = wide.loc[:, [c for c in wide.columns if c[1] == profile]].dropna()
        if part.shape[1] < 2:
            continue
        right = part == "correct"
        out.append({"profile": profile, "models": part.shape[1], "pairs": len(part),
                    "disagree": int((right.any(axis=1) & ~right.all(axis=1)).sum())})
    frame = pd.DataFrame(out, columns=columns)
    return frame.iloc[sorted(range(len(frame)), key=lambda i: condition_sort_key(frame["profile"].iloc[i]))
                      ].reset_index(drop=True)


RULES_START, RULES_END = "<!-- rules: generated by prb_utils.analysis.findings.rules_markdown -->", "<!-- rules: end -->"


def rules_markdown() -> str:
    """Every rule prb words, as the code words it (the resampling plans, :data:`RULES`, the tie rules, the probes'
    rules and the attribution rule), as the Markdown list that ``docs/reference/statistics.md`` holds between :data:`RULES_START` and
    :data:`RULES_END` (a test keeps them equal, so the page cannot state a rule the code does not keep).

    >>> rules_markdown().splitlines()[0].startswith("- **plan, question**: Intervals (95%)")
    True
    """
    plans = [(f"plan, {unit}", ResamplingPlan(unit=unit).rule()) for unit in PLAN_UNITS]
    verdicts = [(name, rule.say("question")) for name, rule in RULES.items()]
    ties = [(f"ties{', half credit' if half else ''}", text) for half, text in TIE_RULES.items()]
    probes = [("reading the user", READING_RULE), ("twins", TWIN_RULE), ("checks", check_rule()),
              ("attribution", ATTRIBUTION_RULE)]
    return "\n".join(f"- **{name}**: {text}." for name, text in [*plans, *verdicts, *ties, *probes])


# --------------------------------------------------------------------------------- the pages' conclusions
#: The pages that open with their conclusions (:func:`page_sentences`), and what each concludes.
PAGES = {
    "index": ("rank", "lift", "oracle", "lock"),
    "01": ("change", "lock"),
    "02": ("rank", "lift", "oracle", "lock"),
    "03": ("rank", "lock"),
    "04": ("lift", "oracle", "lock"),
    "05": ("probe",),
}


def _p(value: float) -> str:
    return format_value(value, sense=P_VALUE)


def _names(models: Sequence[str]) -> str:
    return ", ".join(str(m) for m in models)


def _units(n: int, unit: str) -> str:
    """``n`` resampled units in words ("21 questions"; the two-way unit counts its questions)."""
    if unit == TWO_WAY_UNIT:
        return f"{n:,} question{'s' if n != 1 else ''} (crossed with users)"
    return f"{n:,} {unit}{'s' if n != 1 else ''}"


def _lift_sentences(found: Findings) -> list[dict[str, Any]]:
    """Per condition with lift verdicts: which models the profile helps, hurts, or leaves inconclusive."""
    helps, hurts, inconclusive = RULES["lift"].verdicts
    out = []
    board = found.board
    for condition in found.conditions():
        part = board[(board["profile"] == condition) & board["lift_verdict"].astype(bool)]
        if part.empty:
            continue
        said, numbers = [], {}
        for verdict in (helps, hurts, inconclusive):
            mine = part[part["lift_verdict"] == verdict]
            numbers[verdict] = mine["model"].astype(str).tolist()
            if mine.empty:
                continue
            shown = _names(f"{r.model} ({format_signed(r.lift)} [{format_signed(r.lift_low)}, "
                           f"{format_signed(r.lift_high)}])" for r in mine.itertuples())
            said.append(f"{verdict} {shown}" if verdict != inconclusive else f"is inconclusive for {shown}")
        blind = [m for m in dict.fromkeys(board.loc[board["profile"] == condition, "model"].astype(str))
                 if m in found.profile_blind]
        tail = f"; {_names(blind)} never read{'s' if len(blind) == 1 else ''} the profile" if blind else ""
        sentence = (f"Against {found.baseline}, {condition} {'; '.join(said)} (Holm over {len(part)} "
                    f"model{'s' if len(part) != 1 else ''}){tail}.")
        out.append({"topic": "lift", "profile": condition, **numbers, "sentence": sentence})
    return out


def _oracle_sentences(found: Findings) -> list[dict[str, Any]]:
    """One sentence on the oracle: for which models it is an upper bound."""
    if found.oracle.empty:
        return []
    bound, not_bound, blind = RULES["oracle"].verdicts
    said = []
    for verdict in (bound, not_bound, blind):
        mine = found.oracle[found.oracle["verdict"] == verdict]
        if not mine.empty:
            said.append(f"{verdict} for {_names(f'{r.model} ({format_signed(r.gap)})' for r in mine.itertuples())}")
    condition = found.oracle["oracle_condition"].iloc[0]
    return [{"topic": "oracle", "profile": condition,
             "upper_bound": found.oracle.loc[found.oracle["verdict"] == bound, "model"].astype(str).tolist(),
             "sentence": f"The oracle ({condition}: the RM saw the answer key; its gap over the model's best benchmark "
                         f"condition in brackets) is {'; '.join(said)}."}]


def _lock_sentences(found: Findings, conditions: Sequence[str]) -> list[dict[str, Any]]:
    """One sentence per position-locked judge: the conditions under which it gets no rank and no verdict."""
    board = found.board[found.board["locked"] & found.board["profile"].isin(conditions)]
    return [{"topic": "lock", "model": str(model), "profiles": part["profile"].astype(str).tolist(),
             "sentence": f"{model} is {RULES['lock'].verdicts[0]} under {_names(part['profile'].astype(str))}: its "
                         "accuracy measures the answer order, so it gets no rank and no verdict."}
            for model, part in board.groupby("model", sort=True)]


def _change_sentences(found: Findings) -> list[dict[str, Any]]:
    """Per condition: the pairs the models split on, and per model the verdicts the condition changed."""
    out = []
    for r in found.disagreement.itertuples():
        out.append({"topic": "disagreement", "profile": r.profile, "pairs": r.pairs, "disagree": r.disagree,
                    "sentence": f"Under {r.profile}, the {r.models} models disagree on {r.disagree} of {r.pairs} "
                                "pairs: the pairs worth reading (the disagreement filter)."})
    changes = found.changes[~found.changes["model"].isin(found.profile_blind)] if len(found.changes) else found.changes
    for condition, part in changes.groupby("profile", sort=False):
        shown = _names(f"{r.model} {r.made_right + r.made_wrong} of {r.pairs} ({r.made_right} made right, "
                       f"{r.made_wrong} made wrong)" for r in part.itertuples())
        out.append({"topic": "change", "profile": condition,
                    "changed": {r.model: int(r.made_right + r.made_wrong) for r in part.itertuples()},
                    "sentence": f"Against {found.baseline}, {condition} changes the verdicts of {shown} (the "
                                "profile_flips filter)."})
    return out


def _probe_sentences(found: Findings | None, effects: pd.DataFrame) -> list[dict[str, Any]]:
    """One sentence per probed model: what another user's profile does to its accuracy, with its interval, the
    units and the Holm family behind the reading verdict, then the pass or fail of each of its other probes."""
    verdicts = reading_verdicts(effects).set_index("model") if not effects.empty else pd.DataFrame()
    unit = found.unit if found is not None else "unit"
    none = ({} if found is None else found.board[(found.board["profile"] == NO_PROFILE) & ~found.board["oracle"]]
            .set_index("model")["accuracy"].to_dict())
    out = []
    for model, mine in effects.groupby("model", sort=True):
        swap = mine[is_reading(mine)]
        item: dict[str, Any] = {"topic": "probe", "model": str(model)}
        if swap.empty:
            head = f"{model}: no swap probe scored, so no reading verdict"
            item["verdict"] = ""
        else:
            r = swap.iloc[0]
            verdict = str(verdicts.loc[model, "verdict"])
            item.update(verdict=verdict, diff=r["diff"], ci_low=r["ci_low"], ci_high=r["ci_high"],
                        p_holm=r["p_holm"], n_units=r["n_units"], accuracy_base=r["accuracy_base"],
                        accuracy_probe=r["accuracy_probe"])
            base, probe = format_value(r["accuracy_base"], sense=PROPORTION), format_value(r["accuracy_probe"],
                                                                                           sense=PROPORTION)
            move = (f"stays at {base}" if probe == base else
                    f"{'falls' if r['diff'] < 0 else 'rises'} from {base} to {probe}")
            level = none.get(model)
            if level is not None and np.isfinite(level) and probe != base:
                shown = format_value(level, sense=PROPORTION)
                move += ", its no-profile level" if shown == probe else f" (with no profile: {shown})"
            change = (f"{format_signed(r['diff'])} [{format_value(r['ci_low'], sense=PROPORTION)}, "
                      f"{format_value(r['ci_high'], sense=PROPORTION)}]")
            head = f"{model}: with another user's posts its accuracy {move}: {change}"
            if r["no_verdict"]:
                head += f"; no reading verdict ({r['no_verdict']})"
            else:
                members = int((effects["family"] == r["family"]).sum()) if r["family"] else 1
                head += (f"; with {_units(int(r['n_units']), unit)} and Holm over {members} "
                         f"model{'s' if members != 1 else ''} (p = {_p(r['p_holm'])}), {verdict}")
        order = {name: i for i, name in enumerate(PROBES)}
        mine = mine.sort_values("probe", key=lambda c: c.map(order).fillna(len(order)))
        checks = {str(c.probe): _check_word(c._asdict()) for c in mine.itertuples()
                  if c.probe not in reading_probes() and c.check}
        item["checks"] = checks
        tail = (". Checks: " + ", ".join(f"{name} {check}" for name, check in checks.items())) if checks else ""
        item["sentence"] = f"{head}{tail}."
        out.append(item)
    return out


def _check_word(row: dict[str, Any]) -> str:
    """A probe's word in a model's sentence: its verdict against its control where it has one (``parrot``: "rewards
    mimicry", "no mimicry found", "inconclusive"), else its check's pass or fail.

    >>> _check_word({"check": "fail", "control_verdict": "rewards mimicry"}), _check_word({"check": "pass"})
    ('rewards mimicry', 'pass')
    """
    verdict = row.get("control_verdict")
    return str(verdict) if isinstance(verdict, str) and verdict else str(row["check"])


def control_sentences(found: Findings | None, effects: pd.DataFrame) -> list[dict[str, Any]]:
    """One sentence per model and probe tested against a control in ``effects`` (rows of
    :func:`prb_utils.analysis.probe_effects.probe_effects`; ``parrot`` against ``parrot-control``), with the numbers
    it states (for ``record_numbers``): the flips (right under the base, wrong under the probe) under the probe and
    its control, their difference with its interval, the units and the Holm family, and the verdict
    (:func:`prb_utils.analysis.probe_effects.control_verdict`); the reason where it gets none."""
    unit = found.unit if found is not None else "unit"
    out = []
    for r in controlled(effects).sort_values(["model", "probe"]).to_dict("records"):
        item: dict[str, Any] = {"topic": "control", **{k: r[k] for k in (
            "model", "probe", "control_probe", "flip_rate", "control_flip_rate", "beyond_control",
            "beyond_control_low", "beyond_control_high", "beyond_control_p_holm", "n_units")},
            "family": r["control_family"], "verdict": r["control_verdict"]}
        if r["no_verdict"] or pd.isna(r["flip_rate"]):
            item["sentence"] = f"{r['model']}: {r['probe']}: {r['control_verdict']}."
        else:
            members = int((effects["control_family"] == r["control_family"]).sum())
            item["sentence"] = (
                f"{r['model']}: {r['probe']} turns {format_value(r['flip_rate'], sense=PROPORTION)} of the pairs "
                f"from right to wrong, {r['control_probe']} {format_value(r['control_flip_rate'], sense=PROPORTION)}: "
                f"{format_signed(r['beyond_control'])} [{format_value(r['beyond_control_low'], sense=PROPORTION)}, "
                f"{format_value(r['beyond_control_high'], sense=PROPORTION)}] beyond the control, with "
                f"{_units(int(r['n_units']), unit)} and Holm over {members} model{'s' if members != 1 else ''} "
                f"(p = {_p(r['beyond_control_p_holm'])}), {r['control_verdict']}.")
        out.append(item)
    return out


def page_sentences(found: Findings | None, page: str, *, effects: pd.DataFrame | None = None,
                   condition: str | None = None) -> list[dict[str, Any]]:
    """The conclusions ``page`` opens with (a key of :data:`PAGES`: ``index``, ``01`` ... ``05``), in plain
    sentences from ``found``: each a dict with its ``topic``, its ``sentence`` and the numbers the sentence states
    (for ``record_numbers``). The index and 02 say each condition's tied group against chance, what the profile
    does (the lift verdicts), the oracle and any locked judge; 01 the pairs worth reading (where the models
    disagree, the verdicts a condition changes); 03 the ranking of its benchmark ``condition``; 04 the
    lifts and the oracle; 05 one sentence per model probed in ``effects``
    (:func:`prb_utils.analysis.probe_effects.probe_effects` of one base) with a pass or fail per probe.

    >>> rows = pd.DataFrame({"model": ["a"] * 4 + ["b"] * 4, "kind": "length", "profile": "none",
    ...                      "subset": "s", "id": ["1", "2", "3", "4"] * 2,
    ...                      "outcome": ["correct"] * 4 + ["wrong"] * 4})
    >>> [s["topic"] for s in page_sentences(compute_findings(rows, calibrate=False), "01")]
    ['disagreement']
    >>> page_sentences(None, "02")[0]["sentence"]
    'No scored pairs for these models and conditions: run prb score first.'
    """
    if page not in PAGES:
        raise PRBError(f"Unknown page {page!r} for the findings' sentences; use one of {', '.join(PAGES)}.")
    if page == "05":
        if effects is None or effects.empty:
            return [{"topic": "probe", "sentence": "No model is probed here: no reading verdict and no check."}]
        return _probe_sentences(found, effects)
    if found is None:
        return [{"topic": "none", "sentence": "No scored pairs for these models and conditions: run prb score first."}]
    conditions = [condition] if condition else found.conditions()
    out: list[dict[str, Any]] = []
    for topic in PAGES[page]:
        if topic == "rank":
            out += [{"topic": "rank", **h} for h in found.headline() if h["profile"] in conditions]
        elif topic == "lift":
            out += [s for s in _lift_sentences(found) if s["profile"] in conditions]
        elif topic == "oracle":
            out += _oracle_sentences(found)
        elif topic == "lock":
            out += _lock_sentences(found, conditions)
        elif topic == "change":
            out += [s for s in _change_sentences(found) if s["profile"] in conditions]
    return out
