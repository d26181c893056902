"""Every number of a board, recomputed from the submissions' per-item rows through the findings layer.

:func:`board_numbers` joins the rows of the checked submissions (:class:`prb_utils.submission.Submission`), one
job per board label, attaches the resampling units each pair's submission recorded, and computes the findings
(:func:`prb_utils.analysis.findings.compute_findings`: accuracy [CI], shared ranks and rank ranges, chance and
lift verdicts, per-subset accuracy), accuracy per category under the same plan, each model's hardest and most
profile-sensitive pairs, each model's probe readings as page 05 reads them (:mod:`prb_utils.board.readings`:
``cards[id]["probes"]``), and every two-run comparison per condition through the function ``prb summarize
--compare`` uses (:func:`prb_utils.analysis.metrics.summarize`). A submitted aggregate is never used: where it
disagrees with the rows, a note says so and the recomputed number is shown.

The result is plain data (JSON-ready) with each number both raw (for sorting) and as the pages print it
(:mod:`prb_utils.formatting`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import pandas as pd

from prb_utils.analysis.findings import Findings, compute_findings, rank_span
from prb_utils.analysis.metrics import summarize
from prb_utils.analysis.uncertainty import ResamplingPlan
from prb_utils.board.items import ITEM_RULES, item_analysis
from prb_utils.board.readings import probe_readings
from prb_utils.formatting import COEFFICIENT, PROPORTION, format_interval, format_signed, format_value
from prb_utils.schema import NO_PROFILE, pair_key, stable_hash
from prb_utils.submission import Submission

#: How many pairs a model card lists per condition (hardest, most profile-sensitive).
CARD_PAIRS = 5
HARDEST_RULE = ("hardest: the pairs this RM does not get right, those that the most other RMs on the board get right "
                "first")
SENSITIVE_RULE = f"profile-sensitive: the pairs whose outcome for this RM changes between {NO_PROFILE} and a condition"
FLIP_RULE = "flipped: the pairs one run gets right and the other does not, under the same condition"
#: Agreement within this is equality (a submitted accuracy printed with fewer digits still agrees).
TOLERANCE = 5e-4


def model_id(label: str) -> str:
    """A board label's stable id (in links and anchors: the same label gets the same id on every build).

    >>> model_id("length") == model_id("length"), len(model_id("length"))
    (True, 8)
    """
    return "m" + stable_hash(label, length=7)


def signed_interval(value: float, low: float, high: float) -> str:
    """A difference with its sign and its interval.

    >>> signed_interval(0.25, -0.05, 0.5)
    '+0.250 [-0.050, 0.500]'
    """
    return f"{format_signed(value)} [{format_value(low, sense=PROPORTION)}, {format_value(high, sense=PROPORTION)}]"


def board_labels(submissions: Sequence[Submission]) -> list[str]:
    """One label per submission: its job label, with its source (the export folder or file it came from) where
    another source holds the same job label; a job keeps one label over its conditions.

    >>> class S:  # a stand-in with the two fields used
    ...     def __init__(self, label, source): self.label, self.source = label, source
    >>> board_labels([S("length", "a"), S("length", "a"), S("length", "b"), S("lexical", "b")])
    ['length (a)', 'length (a)', 'length (b)', 'lexical']
    """
    sources: dict[str, set[str]] = {}
    for s in submissions:
        sources.setdefault(s.label, set()).add(s.source)
    return [f"{s.label} ({s.source})" if len(sources[s.label]) > 1 else s.label for s in submissions]


def board_rows(submissions: Sequence[Submission], labels: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-item rows of every submission (``model`` and ``job_label``: the board label) and the unit keys
    (``subset, id, question, user``) their submissions recorded."""
    rows = pd.concat([s.rows.assign(job_label=label) for s, label in zip(submissions, labels, strict=True)],
                     ignore_index=True)
    rows["model"] = rows["job_label"]
    units = (rows.rename(columns={"unit_question": "question", "unit_user": "user"})
             [["subset", "id", "question", "user"]].drop_duplicates(["subset", "id"]).reset_index(drop=True))
    return rows, units


def disagreements(submission: Submission, label: str, found: Findings) -> list[str]:
    """One sentence per submitted accuracy that its rows do not give (the board shows the rows' number)."""
    board = found.board[(found.board["model"] == label) & (found.board["profile"] == submission.condition)]
    subsets = found.subsets[(found.subsets["model"] == label) & (found.subsets["profile"] == submission.condition)]
    recomputed = {"overall": float(board["accuracy"].iloc[0]) if len(board) else math.nan,
                  **{str(r.subset): float(r.accuracy) for r in subsets.itertuples()}}
    notes = []
    for name, claimed in submission.submitted.items():
        actual = recomputed.get(name)
        if actual is None or not math.isfinite(actual) or abs(actual - claimed) > TOLERANCE:
            where = "its overall accuracy" if name == "overall" else f"its accuracy in {name}"
            notes.append(f"{submission.path.name}: {where} as submitted ({format_value(claimed, 'accuracy')}) "
                         f"disagrees with its per-item rows ({format_value(actual, 'accuracy')}); the board shows "
                         "the number recomputed from the rows.")
    return notes


def _board_table(found: Findings, ids: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for r in found.board.itertuples():
        out.append({
            "id": ids[r.model], "condition": r.profile, "oracle": bool(r.oracle), "locked": bool(r.locked),
            "rank": None if r.locked or not math.isfinite(r.rank) else float(r.rank),
            "rank_text": "locked" if r.locked else format_value(r.rank, "rank"),
            "rank_interval": "" if r.locked else rank_span(r.rank_low, r.rank_high),
            "accuracy": float(r.accuracy), "ci_low": float(r.ci_low), "ci_high": float(r.ci_high),
            "accuracy_text": format_interval(r.accuracy, r.ci_low, r.ci_high),
            "n": int(r.n), "chance": r.chance or "", "tie_rate_text": format_value(r.tie_rate, "tie_rate"),
            "lift": None if not isinstance(r.lift, float) or math.isnan(r.lift) else float(r.lift),
            "lift_text": signed_interval(r.lift, r.lift_low, r.lift_high) if r.lift_verdict else "",
            "lift_verdict": r.lift_verdict or "", "locked_reason": r.locked_reason or "",
        })
    return out


def _outcomes(rows: pd.DataFrame) -> pd.DataFrame:
    """Correctness wide: one row per (condition, pair), one column per label."""
    keyed = rows.assign(pair=[pair_key(str(s), str(i)) for s, i in zip(rows["subset"], rows["id"], strict=True)],
                        right=(rows["outcome"] == "correct").astype(int))
    return keyed.pivot_table(index=["profile", "pair"], columns="model", values="right", aggfunc="first")


def _cards(rows: pd.DataFrame, found: Findings, plan: ResamplingPlan, ids: dict[str, str]) -> dict[str, Any]:
    wide = _outcomes(rows)
    outcome = rows.assign(pair=[pair_key(str(s), str(i)) for s, i in zip(rows["subset"], rows["id"], strict=True)]) \
        .set_index(["model", "profile", "pair"])["outcome"]
    categories = plan.accuracy(rows, ["model", "profile", "category"]) if rows["category"].notna().any() else None
    cards = {}
    for label in ids:
        conditions: dict[str, Any] = {}
        for condition in dict.fromkeys(rows.loc[rows["model"] == label, "profile"]):
            part = wide.loc[condition]
            mine = part[label].dropna()
            others = part.drop(columns=[label]).reindex(mine.index)
            share = others.mean(axis=1).fillna(0.0)
            failed = mine[mine < 1].index
            hardest = sorted(failed, key=lambda p: (-share[p], p))[:CARD_PAIRS]
            subsets = found.subsets[(found.subsets["model"] == label) & (found.subsets["profile"] == condition)]
            entry: dict[str, Any] = {
                "subsets": [{"subset": r.subset, "n": int(r.n), "accuracy": float(r.accuracy),
                             "accuracy_text": format_value(r.accuracy, "accuracy")} for r in subsets.itertuples()],
                "hardest": [{"pair": p, "outcome": str(outcome[(label, condition, p)]),
                             "others_right": format_value(float(share[p]), "accuracy") if others.shape[1] else
                             "n/a (no other RM scored this condition)"} for p in hardest],
                "categories": [],
                "sensitive": [],
            }
            if categories is not None:
                cats = categories[(categories["model"] == label) & (categories["profile"] == condition)]
                entry["categories"] = [{"category": str(r.category), "n": int(r.n),
                                        "accuracy_text": format_interval(r.accuracy, r.ci_low, r.ci_high)}
                                       for r in cats.itertuples()]
            if condition != NO_PROFILE and NO_PROFILE in wide.index.get_level_values(0) and \
                    label in wide.loc[NO_PROFILE].columns:
                base = wide.loc[NO_PROFILE][label].reindex(mine.index)
                changed = [p for p in mine.index if math.isfinite(base[p]) and base[p] != mine[p]]
                entry["sensitive"] = [{"pair": p, "without": str(outcome[(label, NO_PROFILE, p)]),
                                       "with": str(outcome[(label, condition, p)])} for p in sorted(changed)[:CARD_PAIRS]]
                entry["sensitive_total"] = len(changed)
            conditions[condition] = entry
        cards[ids[label]] = {"conditions": conditions}
    return cards


def _items(rows: pd.DataFrame, found: Findings) -> dict[str, Any]:
    """:func:`prb_utils.board.items.item_analysis` with each correlation as the pages print it."""
    items = item_analysis(rows, found.board)
    for entry in items.values():
        for flagged in entry["tracking"] if isinstance(entry["tracking"], list) else []:
            flagged["correlation_text"] = format_value(flagged["correlation"], sense=COEFFICIENT)
    return items


def compare_runs(rows: pd.DataFrame, a: str, b: str, condition: str, plan: ResamplingPlan) -> dict[str, Any]:
    """Run ``b`` against run ``a`` (board labels) under ``condition`` (``*_swapped``: ``a`` against ``b``): the
    paired verdict change through
    :func:`prb_utils.analysis.metrics.summarize` (``prb summarize --compare``'s function: the same clustered test,
    the same p-value), the flipped pairs, and the per-subset differences."""
    two = rows[rows["model"].isin([a, b]) & (rows["profile"] == condition)]
    table = summarize(two, ["job_label", "profile"], compare="job_label", baseline=a, **plan.options())
    row = table[table["job_label"] == b].iloc[0]
    wide = _outcomes(two).loc[condition].dropna()
    flips = [{"pair": p, "a": int(wide.loc[p, a]), "b": int(wide.loc[p, b])}
             for p in wide.index if wide.loc[p, a] != wide.loc[p, b]]
    per = two.assign(right=(two["outcome"] == "correct").astype(float)).pivot_table(
        index="subset", columns="model", values="right", aggfunc="mean")
    subsets = [{"subset": str(s), "a_text": format_value(per.loc[s, a], "accuracy"),
                "b_text": format_value(per.loc[s, b], "accuracy"),
                "diff_text": format_signed(per.loc[s, b] - per.loc[s, a]),
                "diff_text_swapped": format_signed(per.loc[s, a] - per.loc[s, b])} for s in per.index]
    return {"condition": condition, "n_pairs": int(row["n_pairs"]), "diff": float(row["diff"]),
            "diff_text": signed_interval(row["diff"], row["diff_ci_low"], row["diff_ci_high"]),
            "diff_text_swapped": signed_interval(-row["diff"], -row["diff_ci_high"], -row["diff_ci_low"]),
            "p_value": float(row["p_value"]), "p_text": format_value(row["p_value"], "p_value"),
            "a_only": sum(f["a"] for f in flips), "b_only": sum(f["b"] for f in flips), "flips": flips,
            "subsets": subsets}


def board_numbers(submissions: Sequence[Submission], *, plan: ResamplingPlan | None = None,
                  data: pd.DataFrame | None = None) -> dict[str, Any]:
    """Every number of the board of ``submissions`` (checked, of one data set), recomputed from their rows;
    ``data``: the benchmark's records they scored, when given (the probe readings then read profiles and twins)."""
    plan = plan or ResamplingPlan()
    labels = board_labels(submissions)
    ids = {label: model_id(label) for label in labels}
    rows, units = board_rows(submissions, labels)
    found = compute_findings(rows, units, plan=plan, calibrate=False, keys=True)
    notes = [n for s, label in zip(submissions, labels, strict=True) for n in disagreements(s, label, found)]
    by_label = dict(zip(labels, submissions, strict=True))
    readings, probe_rules = probe_readings(rows, units, plan, ids, by_label, data=data)
    rows = plan.attach(rows, units, keys=True)
    comparisons = {}
    for condition in found.conditions():
        present = [label for label in dict.fromkeys(labels) if ((rows["model"] == label) & (rows["profile"] == condition)).any()]
        for a, b in combinations(present, 2):
            comparisons[f"{condition}|{ids[a]}|{ids[b]}"] = compare_runs(rows, a, b, condition, plan)
    models = {ids[label]: {"label": label, "kind": s.kind, "spec": s.spec, "file": s.path.name,
                           "provenance": s.provenance} for label, s in by_label.items()}
    conditions = list(dict.fromkeys([*found.conditions(), *found.board["profile"]]))   # the oracle last
    numbers = {
        "models": models, "conditions": conditions, "board": _board_table(found, ids),
        "headline": {h["profile"]: h["sentence"] for h in found.headline()},
        "rules": [*found.notes(), *[f"{r[0].upper()}{r[1:]}." for r in (HARDEST_RULE, SENSITIVE_RULE, FLIP_RULE,
                                                                          *ITEM_RULES.values())], *probe_rules],
        "items": _items(rows, found), "notes": notes, "cards": _cards(rows, found, plan, ids),
        "compare": comparisons, "plan": plan.to_dict(),
    }
    for run, probed in readings.items():
        numbers["cards"][run]["probes"] = probed
    numbers["pairs"] = pair_texts(rows, submissions, referenced(numbers))
    return numbers


def referenced(numbers: dict[str, Any]) -> set[str]:
    """The pairs the board's lists name (flips, hardest, profile-sensitive, item analysis): the pairs whose text
    it carries."""
    found: set[str] = set()
    for value in (numbers["compare"], numbers["cards"], numbers["items"]):
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                if isinstance(item.get("pair"), str):
                    found.add(item["pair"])
                stack += list(item.values())
            elif isinstance(item, list):
                stack += item
    return found


def pair_texts(rows: pd.DataFrame, submissions: Sequence[Submission], keys: set[str]) -> dict[str, dict[str, str]]:
    """``subset/id`` -> subset, category and (where a submission carries them) question, chosen and rejected, for
    the pairs ``keys``."""
    texts: dict[str, dict[str, str]] = {}
    for s in submissions:
        for key, text in s.texts.items():
            texts.setdefault(key, text)
    first = rows.drop_duplicates(["subset", "id"])
    out = {}
    for subset, item, category in zip(first["subset"].astype(str), first["id"].astype(str), first["category"],
                                      strict=True):
        if (key := pair_key(subset, item)) in keys:
            out[key] = {"subset": subset, "category": category if isinstance(category, str) else "", **texts.get(key, {})}
    return out
