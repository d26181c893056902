"""The probe readings of the board's model cards, from the submissions' per-item rows by page 05's code path.

:func:`probe_readings` runs :func:`prb_utils.analysis.probe_effects.probe_effects` on every run of the board at
once (so each Holm family holds the board's runs of one base, as page 05's holds the store's models), clustered by
the unit keys the submissions recorded under the board's resampling plan, then per run and base condition
:func:`~prb_utils.analysis.probe_effects.reading_verdicts` (the verdict under
:data:`~prb_utils.analysis.probe_effects.READING_RULE`, its sensitivity and interval) and each other probe's check
as :func:`~prb_utils.analysis.probe_effects.probe_table` shows it. A run with no probe rows gets one sentence with
the ``prb probe`` command that adds them.

A submission carries no profiles. Given the benchmark (``prb board --data``), the readings read it as page 05 does
(clustered by its records, which give the keys the submissions recorded): a swap that changed no RM input (one user
per subset) is n/a with :data:`~prb_utils.analysis.probe_effects.NO_CHANGE`, and the swap's twin split is shown.
Without it, each reading says in one sentence (:data:`NO_DATA`) why neither is shown.

Each reading also carries page 05's other two sections for its base: the mimicry verdict of each probe tested
against a control (``parrot`` against ``parrot-control``: :func:`~prb_utils.analysis.probe_effects.control_table`
of :func:`~prb_utils.analysis.probe_effects.controlled`, its rule :func:`~prb_utils.analysis.probe_effects.
check_rule`), and the leave-one-post-out attribution (:func:`~prb_utils.analysis.attribution.attribution_summary`
and :func:`~prb_utils.analysis.attribution.attribution_table` under
:data:`~prb_utils.analysis.attribution.ATTRIBUTION_RULE`; it reads the posts each pair shows, so it needs the
benchmark: :data:`NO_ATTRIBUTION_DATA` without it). The drop jobs are read there, never as probe checks
(:func:`~prb_utils.analysis.attribution.is_drop`, as page 05 filters them); a backend retest
(``retest-bfloat16``) is a check like any other. Where a run has no such jobs, one sentence says so with the
``prb probe`` command that adds them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from prb_utils.analysis.attribution import (
    ATTRIBUTION_RULE,
    attribution_summary,
    attribution_table,
    decisive_positions,
    decisive_posts,
    is_drop,
)
from prb_utils.analysis.probe_effects import (
    VERDICT_TABLE_COLUMNS,
    check_rule,
    control_probes,
    control_table,
    controlled,
    is_reading,
    probe_effects,
    probe_notes,
    probe_table,
    reading_verdicts,
    split_probe,
    verdict_table,
)
from prb_utils.analysis.uncertainty import ResamplingPlan
from prb_utils.formatting import MISSING
from prb_utils.notebook.markup import prb_command
from prb_utils.probes import ATTRIBUTION
from prb_utils.profile import parse_condition
from prb_utils.schema import DEFAULT_CONDITION, NO_PROFILE, is_oracle
from prb_utils.submission import Submission

#: The store a card's ``prb probe`` command writes into (``prb score``'s default: the submitter's own store).
PROBE_STORE = "results"
NO_PROBES = "No probes were submitted for this run, so it has no reading verdict and no probe check"
#: Why a card built without the benchmark shows neither a probe that changed no RM input nor the twin split.
NO_DATA = ("A submission carries no profiles, so without the benchmark (`prb board --data`) this card cannot tell a "
           "probe that changed no RM input nor split the twin sets.")
#: The twin split's column of :func:`~prb_utils.analysis.probe_effects.verdict_table` (page 05's words).
TWINS_HEAD = next(c for c in VERDICT_TABLE_COLUMNS if c.startswith("twins"))
#: Why a card built without the benchmark has no attribution reading.
NO_ATTRIBUTION_DATA = ("A submission carries no profiles, so without the benchmark (`prb board --data`) this card "
                       "cannot tell which of the posts a pair showed each verdict hinges on.")
#: The attribution's words for a base condition that shows no post (page 05's).
NO_POSTS = "The base condition {base} shows no post: nothing to leave out."


def probe_command(submission: Submission, conditions: list[str], probes: Sequence[str] = ()) -> str:
    """The ``prb probe`` command that adds the probes of the run ``submission`` (of the board's ``conditions`` for
    its label; ``probes``: those named, the default ones when empty): its spec on its data, subsets and limit, over
    its first benchmark condition that shows a profile (``top3`` when it has none).

    >>> class S:  # a stand-in with the fields used
    ...     spec, provenance = "lexical", {"data_source": "sample", "data_limit": "4", "data_subsets": ""}
    >>> probe_command(S(), ["none", "top2"])
    'prb probe --data sample --model lexical --profile top2 --limit 4 --out results'
    >>> probe_command(S(), ["top2"], ["attribution"])
    'prb probe --data sample --model lexical --profile top2 --limit 4 --probe attribution --out results'
    """
    bases = [c for c in conditions if split_probe(c)[1] is None and not is_oracle(c) and c != NO_PROFILE]
    details = submission.provenance
    limit, subsets = details.get("data_limit", ""), details.get("data_subsets", "")
    return prb_command("probe", data=details.get("data_source") or "sample", models=[submission.spec],
                       profile=bases[0] if bases else DEFAULT_CONDITION, subsets=subsets.split(",") if subsets else (),
                       limit=int(limit) if limit.isdigit() else None, probes=list(probes), store=PROBE_STORE)


def _changed_text(effects: pd.DataFrame) -> str:
    """How many pairs the reading probe of ``effects`` changed the RM input of ("" where that is not known)."""
    swap = effects[is_reading(effects)]
    if swap.empty or pd.isna(swap["inputs_changed"].iloc[0]):
        return ""
    r = swap.iloc[0]
    return f"The {r['probe']} probe changed the RM input of {int(r['inputs_changed'])} of {int(r['n_pairs'])} pairs."


def _twins_text(shown: pd.Series) -> str:
    """The twin split of one row of :func:`~prb_utils.analysis.probe_effects.verdict_table` as a sentence."""
    split = str(shown[TWINS_HEAD])
    parts = TWINS_HEAD.split(": ", 1)[1]
    return "No twin sets among these pairs." if split == MISSING else f"Twin sets ({parts}): {split}."


def _mimicry(effects: pd.DataFrame, base: str, command: str) -> dict[str, Any]:
    """The probes of one run and ``base`` (``effects``) tested against a control, as page 05 shows them
    (:func:`~prb_utils.analysis.probe_effects.control_table`): per probe the verdict, the flips under it and its
    control, their difference with its interval and Holm p (raw and as printed) and its rule; where none was
    scored, one sentence with ``command`` (the ``prb probe`` command that adds them)."""
    parroted = controlled(effects)
    if parroted.empty:
        first = control_probes()[0]
        return {"mimicry": [], "mimicry_missing": (
            f"No {first} probe of {base} was submitted for this run, so it has no mimicry "
            f"verdict; `{command}` adds it (then export the store again).")}
    shown = control_table(parroted)
    out = []
    for r, t in zip(parroted.to_dict("records"), shown.to_dict("records"), strict=True):
        out.append({"probe": str(r["probe"]), "control": str(r["control_probe"]), "verdict": str(r["control_verdict"]),
                    **{k: r[k] for k in ("flip_rate", "control_flip_rate", "beyond_control", "beyond_control_low",
                                         "beyond_control_high", "beyond_control_p_holm")},
                    "family": str(r["control_family"] or ""), "flips_text": str(t["flips: probe / control [95% CI]"]),
                    "beyond_text": str(t["beyond control [95% CI]"]), "p_text": str(t["p (Holm)"]),
                    "pairs": str(t["pairs"]), "rule": check_rule([str(r["probe"])])})
    return {"mimicry": out, "mimicry_missing": ""}


def _attribution(summary: pd.DataFrame | None, shown: pd.DataFrame | None, positions: pd.DataFrame | None,
                 label: str, base: str, dropped: bool, command: str) -> dict[str, Any]:
    """The attribution of one run (board ``label``) and base, as page 05 shows it: its row of
    :func:`~prb_utils.analysis.attribution.attribution_summary` (raw) and of
    :func:`~prb_utils.analysis.attribution.attribution_table` (as printed), the decisive posts by position
    (:func:`~prb_utils.analysis.attribution.decisive_positions`), or the n/a reason; ``missing`` (one sentence)
    where it has none: no benchmark (``summary`` None, :data:`NO_ATTRIBUTION_DATA`), a base that shows no post,
    or no drop job (``dropped`` False: ``command`` adds them)."""
    if parse_condition(base).k == 0:
        return {"missing": NO_POSTS.format(base=base)}
    if not dropped:
        return {"missing": f"No post of {base} was left out for this run, so it has no attribution; `{command}` "
                           "adds the leavings-out (then export the store again)."}
    if summary is None or shown is None or positions is None:
        return {"missing": NO_ATTRIBUTION_DATA}
    at = (summary["model"] == label) & (summary["base"] == base)
    if not at.any():
        return {"missing": f"No pair of {base} was scored under the base and the drop of every post it shows for "
                           "this run, so it has no attribution."}
    r, t = summary[at].iloc[0], shown[at.to_numpy()].iloc[0]
    mine = positions[(positions["model"] == label) & (positions["base"] == base)]
    return {"missing": "", "no_verdict": str(r["no_verdict"]),
            **{k: r[k] for k in ("hinges", "hinges_low", "hinges_high", "none_flip", "several_flip",
                                 "mean_abs_margin_change", "on_evidence", "on_evidence_low", "on_evidence_high")},
            **{k: (None if pd.isna(r[k]) else int(r[k])) for k in ("n_pairs", "n_units", "evidence_pairs")},
            "positions": [] if r["no_verdict"] else [
                {"position": int(p["position"]), "pairs": int(p["pairs"]), "share": p["share"]}
                for p in mine.to_dict("records")],
            "hinges_text": str(t["verdicts hinging on one post [95% CI]"]),
            "none_flip_text": str(t["no post flips it"]), "several_flip_text": str(t["several posts flip it"]),
            "positions_text": str(t["decisive post by position"]),
            "ranks_text": str(t["decisive post by relevance rank"]),
            "evidence_text": str(t["decided by the evidence post"]), "margin_text": str(t["mean |margin change|"]),
            "pairs_text": str(t["pairs"])}


def _reading(effects: pd.DataFrame, label: str, *, with_data: bool) -> dict[str, Any]:
    """One base condition's probes of one run (``effects``, its drop jobs left out): the verdict, the sensitivity
    and the checks; with the benchmark (``with_data``), the pairs whose input the swap changed and the twin split as
    page 05 prints them (:func:`~prb_utils.analysis.probe_effects.verdict_table`), else :data:`NO_DATA`."""
    verdicts = reading_verdicts(effects, models=[label])
    verdict, shown = verdicts.iloc[0], verdict_table(verdicts).iloc[0]
    checks = probe_table(effects[~is_reading(effects)])
    return {"verdict": str(verdict["verdict"]),
            "changed": _changed_text(effects) if with_data else "",
            "twins": _twins_text(shown) if with_data else "", "no_data": "" if with_data else NO_DATA,
            "sensitivity": verdict["sensitivity"], "sensitivity_low": verdict["sensitivity_low"],
            "sensitivity_high": verdict["sensitivity_high"], "p_holm": verdict["p_holm"],
            "sensitivity_text": str(shown["sensitivity [95% CI]"]), "p_text": str(shown["p (Holm)"]),
            "checks": [{"probe": str(r["probe"]), "check": str(r["check"]), "measured": str(r["measured [95% CI]"]),
                        "allowed": str(r["allowed"])} for r in checks.to_dict("records")]}


def probe_readings(rows: pd.DataFrame, units: pd.DataFrame, plan: ResamplingPlan, ids: Mapping[str, str],
                   submissions: Mapping[str, Submission], *,
                   data: pd.DataFrame | None = None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per run id of ``ids`` (board label -> id): its ``readings`` (one per base condition it probed: the reading
    verdict and checks, the mimicry verdict, the attribution) or, with no probe rows, ``missing`` (a sentence with
    the ``prb probe`` command of its submission in ``submissions``, by label); and the rule sentences of the probes
    found (:func:`prb_utils.analysis.probe_effects.probe_notes`: the reading rule, the checks, every family; the
    attribution rule where a post was left out). ``rows``: the board's per-item rows (``model`` the label);
    ``units``: the unit keys the submissions recorded; ``data``: the benchmark's records, when given (then the
    effects are page 05's: :func:`~prb_utils.analysis.probe_effects.probe_effects` of the rows and the records,
    and the attribution is computed)."""
    effects = (probe_effects(rows, units, keys=True, **plan.options()) if data is None
               else probe_effects(rows, data, **plan.options()))
    dropped = effects[is_drop(effects)] if len(effects) else effects
    kept = effects[~is_drop(effects)] if len(effects) else effects   # the drops are read by the attribution
    summary = shown = positions = None
    if data is not None and len(dropped):
        summary = attribution_summary(rows, data, **plan.options())
        decided = decisive_posts(rows, data)
        shown, positions = attribution_table(summary, decided), decisive_positions(decided)
    out: dict[str, dict[str, Any]] = {}
    for label, run in ids.items():
        mine = effects[effects["model"] == label]
        submission = submissions[label]
        if mine.empty:
            command = probe_command(submission, list(dict.fromkeys(rows.loc[rows["model"] == label, "profile"])))
            out[run] = {"readings": [], "missing": f"{NO_PROBES}; `{command}` adds them (then export the store "
                                                   "again)."}
            continue
        readings = []
        for base in sorted(set(mine["base"])):
            part = kept[(kept["model"] == label) & (kept["base"] == base)]   # empty where it only left posts out
            reading = _reading(part, label, with_data=data is not None and len(part) > 0)
            reading["no_data"] = reading["no_data"] if len(part) else ""
            attribution = _attribution(summary, shown, positions, label, base,
                                       bool(((dropped["model"] == label) & (dropped["base"] == base)).any()),
                                       probe_command(submission, [base], [ATTRIBUTION]))
            mimicry = _mimicry(part, base, probe_command(submission, [base], control_probes()))
            readings.append({"base": base, **reading, **mimicry, "attribution": attribution})
        out[run] = {"readings": readings, "missing": ""}
    notes = probe_notes(kept) if len(kept) else []
    return out, notes + ([f"Attribution: {ATTRIBUTION_RULE}."] if len(dropped) else [])
