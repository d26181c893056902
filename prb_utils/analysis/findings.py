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
from prb_utils.analysis.leaderboard import (
    RULES,
    Family,
    leaderboard_notes,
    locked_jobs,
    profile_lifts,
    rank_board,
    unit_name,
)
from prb_utils.analysis.metrics import TIE_RULES, accuracy_table
from prb_utils.analysis.probe_effects import CHECK_RULE, READING_RULE, TWIN_RULE
from prb_utils.analysis.style import style_controlled_accuracy
from prb_utils.analysis.uncertainty import PLAN_UNITS, ResamplingPlan
from prb_utils.models.kinds import MODEL_KINDS
from prb_utils.profile import condition_sort_key
from prb_utils.schema import is_oracle

UNIT = ResamplingPlan().unit  # the unit of the default plan (a store's plan may name another)
LOCKED_REASON = "n/a: position-locked (its probabilities measure the answer order)"
BLIND_NOTE = "never reads the profile"


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
        """What every figure says beside a name (:func:`prb_utils.analysis.plots.set_marks`): each
        position-locked job and each oracle condition of the board."""
        locked = {str(m): "⚠ position-locked" for m in self.board.loc[self.board["locked"], "model"]}
        return {**locked, **{str(c): "(oracle)" for c in self.board.loc[self.board["oracle"], "profile"]}}

    def numbers(self) -> dict[str, Any]:
        """The findings as plain data, for ``record_numbers`` and the index."""
        return {"unit": self.unit, "rules": self.rules, "leaderboard": self.board, "lifts": self.lifts,
                "comparisons": self.comparisons, "families": [f.say() for f in self.families.values()],
                "style": self.style,
                "headline": self.headline(),
                "calibration": self.calibration, "oracle": self.oracle, "profile_blind": list(self.profile_blind)}


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
                    rules={name: rule.say(unit) for name, rule in RULES.items()})


RULES_START, RULES_END = "<!-- rules: generated by prb_utils.analysis.findings.rules_markdown -->", "<!-- rules: end -->"


def rules_markdown() -> str:
    """Every rule prb words, as the code words it (the resampling plans, :data:`RULES`, the tie rules, the probes'
    rules), as the Markdown list that ``docs/reference/statistics.md`` holds between :data:`RULES_START` and
    :data:`RULES_END` (a test keeps them equal, so the page cannot state a rule the code does not keep).

    >>> rules_markdown().splitlines()[0].startswith("- **plan, question**: Intervals (95%)")
    True
    """
    plans = [(f"plan, {unit}", ResamplingPlan(unit=unit).rule()) for unit in PLAN_UNITS]
    verdicts = [(name, rule.say("question")) for name, rule in RULES.items()]
    ties = [(f"ties{', half credit' if half else ''}", text) for half, text in TIE_RULES.items()]
    probes = [("reading the user", READING_RULE), ("twins", TWIN_RULE), ("checks", CHECK_RULE)]
    return "\n".join(f"- **{name}**: {text}." for name, text in [*plans, *verdicts, *ties, *probes])
