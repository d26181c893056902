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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from prb_utils.analysis.probe_effects import (
    VERDICT_TABLE_COLUMNS,
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


def probe_command(submission: Submission, conditions: list[str]) -> str:
    """The ``prb probe`` command that adds the probes of the run ``submission`` (of the board's ``conditions`` for
    its label): its spec on its data, subsets and limit, over its first benchmark condition that shows a profile
    (``top3`` when it has none).

    >>> class S:  # a stand-in with the fields used
    ...     spec, provenance = "lexical", {"data_source": "sample", "data_limit": "4", "data_subsets": ""}
    >>> probe_command(S(), ["none", "top2"])
    'prb probe --data sample --model lexical --profile top2 --limit 4 --out results'
    """
    bases = [c for c in conditions if split_probe(c)[1] is None and not is_oracle(c) and c != NO_PROFILE]
    details = submission.provenance
    limit, subsets = details.get("data_limit", ""), details.get("data_subsets", "")
    return prb_command("probe", data=details.get("data_source") or "sample", models=[submission.spec],
                       profile=bases[0] if bases else DEFAULT_CONDITION, subsets=subsets.split(",") if subsets else (),
                       limit=int(limit) if limit.isdigit() else None, store=PROBE_STORE)


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


def _reading(effects: pd.DataFrame, label: str, *, with_data: bool) -> dict[str, Any]:
    """One base condition's probes of one run (``effects``): the verdict, the sensitivity and the checks; with the
    benchmark (``with_data``), the pairs whose input the swap changed and the twin split as page 05 prints them
    (:func:`~prb_utils.analysis.probe_effects.verdict_table`), else :data:`NO_DATA`."""
    verdicts = reading_verdicts(effects, models=[label])
    verdict, shown = verdicts.iloc[0], verdict_table(verdicts).iloc[0]
    checks = probe_table(effects[~is_reading(effects)])
    return {"base": str(effects["base"].iloc[0]), "verdict": str(verdict["verdict"]),
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
    """Per run id of ``ids`` (board label -> id): its ``readings`` (one per base condition it probed) or, with no
    probe rows, ``missing`` (a sentence with the ``prb probe`` command of its submission in ``submissions``, by
    label); and the rule sentences of the probes found (:func:`prb_utils.analysis.probe_effects.probe_notes`:
    the reading rule, the checks, every family). ``rows``: the board's per-item rows (``model`` the label);
    ``units``: the unit keys the submissions recorded; ``data``: the benchmark's records, when given (then the
    effects are page 05's: :func:`~prb_utils.analysis.probe_effects.probe_effects` of the rows and the records)."""
    effects = (probe_effects(rows, units, keys=True, **plan.options()) if data is None
               else probe_effects(rows, data, **plan.options()))
    out: dict[str, dict[str, Any]] = {}
    for label, run in ids.items():
        mine = effects[effects["model"] == label]
        if mine.empty:
            command = probe_command(submissions[label], list(dict.fromkeys(rows.loc[rows["model"] == label, "profile"])))
            out[run] = {"readings": [], "missing": f"{NO_PROBES}; `{command}` adds them (then export the store "
                                                   "again)."}
            continue
        out[run] = {"readings": [_reading(part, label, with_data=data is not None)
                                 for _, part in mine.groupby("base", sort=True)], "missing": ""}
    return out, probe_notes(effects) if len(effects) else []
