"""What the personalization probes found (:mod:`prb_utils.probes`): is the reward model reading *this* user?

Each probe job (condition ``<base>+<probe>``, e.g. ``top3+swap``) is compared with its base job (``top3``) on the
pairs both scored, by model, under the clustered paired test of every verdict (:func:`prb_utils.analysis.metrics.
compare`, clustered by question: :func:`prb_utils.analysis.metrics.unit_labels`). :func:`probe_effects` gives one
row per model and probe; :func:`reading_verdicts` says, per model, one verdict under :data:`READING_RULE`:

- *reads the user*: with another user's profile (``swap``) the accuracy drops as a lift is judged to hurt
  (:func:`prb_utils.analysis.leaderboard.lift_verdict`: the 95% interval over whole questions below 0 and the
  clustered test, Holm-adjusted within the swap :class:`Family`, p < 0.05);
- *reacts to any profile*: a claim about mechanism, so it needs a test of its own: the swap moves the accuracy
  clearly the wrong way (up), or, against the invariance probe (``shuffle`` or
  ``retest``, whichever did more: the probes marked :attr:`prb_utils.probes.Probe.null`) on the same pairs it turns
  clearly more wrong verdicts right (the same
  interval and Holm rule): another user's profile making it right is what reading this user cannot explain;
- *ignores the profile*: the swap changed the RM's input and moved no verdict and no score beyond the dtype's
  resolution;
- *inconclusive* otherwise; *n/a* with the reason for a model that can get no verdict: a profile-blind kind
  (``length``), a position-locked judge, or a swap that changed no RM input (base ``none``, or one user per subset).

A family's members are the models that can get a verdict; the tables name the family of each adjusted p. On a
twin pair the swapped job sees the twin's question, answers and profile with the roles exchanged, so for any RM
that scores answers given a profile its outcome is the twin's base outcome negated: a twin "flip" only restates
the base outcomes (a perfect reader and a perfect anti-reader both flip every twin). The page splits twin sets
into both right, both wrong and one right instead (on twins the swap's accuracy change is (both wrong - both
right) / twin sets, the test above).

A probe with a control (:attr:`prb_utils.probes.Probe.control`: the same amount of change from another user) is
tested against it: its flips (pairs right under the base and wrong under the probe) beyond the control's on the
pairs all three scored, with the interval over whole questions and the clustered paired test, Holm-adjusted within
its own family; its verdict (:func:`control_verdict`) is the probe's first word where the whole interval is above 0
and p < 0.05, its second where its check passes, else *inconclusive*.

Every other probe carries its own check (:class:`prb_utils.probes.Check`): the statistic it reads of what this
module measured (:class:`prb_utils.probes.Measurement`), the bound a pass allows and its rule. This module reads
each probe's traits (:class:`prb_utils.probes.Probe`: ``changes_profile``, ``tested``, ``negates_margins``,
``uses_twins``, ``reading``, ``null``, ``check``, ``control``) and never its name, so a new probe with its own check
is one record in :data:`prb_utils.probes.PROBES`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from prb_utils.analysis.breakdowns import position_locked
from prb_utils.analysis.leaderboard import ALPHA, RULES, Family, lift_verdict
from prb_utils.analysis.metrics import (
    DTYPE_EPS,
    compare,
    interval_over_units,
    require_columns,
    two_way_labels,
    unit_columns,
    unit_labels,
    wilson_ci,
)
from prb_utils.analysis.resampling import (
    LEVEL,
    SEED,
    TWO_WAY_UNIT,
    clustered_paired_test,
    two_way_paired_test,
)
from prb_utils.formatting import MISSING, SCORE, format_interval, format_value
from prb_utils.models.kinds import MODEL_KINDS
from prb_utils.probes import (
    ATTRIBUTION,
    PROBES,
    Measurement,
    Probe,
    changed_records,
    find_probe,
    in_registry_order,
    probe,
    twin_pairs,
)
from prb_utils.schema import NO_PROFILE, is_oracle

READS, REACTS, IGNORES, INCONCLUSIVE = READING_VERDICTS = (
    "reads the user", "reacts to any profile", "ignores the profile", "inconclusive")
PASS, FAIL = "pass", "fail"
NO_CHANGE = "n/a: the probe changed no RM input"
#: The most of an invariance statistic a pass allows, for the whole 95% interval over the plan's units (a rule as
#: data: the checks of ``shuffle`` and ``distract`` read it as their bound).
INVARIANCE_TOLERANCE = 0.10
READING_RULE = (
    f"reads the user: with another user's profile (swap) the accuracy drops, its 95% interval over whole questions "
    f"below 0 and the clustered paired test, Holm-adjusted within the swap family, p < {ALPHA}; reacts to any "
    f"profile: the swap moves the accuracy clearly up (the same rule), or turns clearly more wrong verdicts right "
    f"than the invariance probe (shuffle or retest) does on the same pairs (the same rule, its own family: another "
    f"user's profile making it right is what reading this user cannot explain); ignores the profile: "
    f"the swap changed the RM's input and moved no verdict and no score beyond the dtype's resolution; otherwise "
    f"inconclusive; n/a with the reason for a profile-blind kind, a position-locked judge, or a swap that changed "
    f"no RM input")
TWIN_RULE = ("twin sets (one question, its two answers, two users who want opposite ones): under swap each pair's "
             "outcome is its twin's base outcome negated, so a twin flips exactly when both twins were right or both "
             "wrong: a reader gets both right, an anti-reader both wrong, an RM that ignores the profile one right, "
             "and a coin 1/4, 1/4 and 1/2; the swap's accuracy change on twins is (both wrong - both right) / sets")
CHECKS_FAIL = ("a check fails where its statistic's interval reaches past its bound (keeping the verdicts is not "
               "shown), and it is n/a where the probe changed no RM input or its statistic is undefined")
#: The columns of a probe tested against its control (:attr:`prb_utils.probes.Probe.control`), "" or NaN elsewhere.
CONTROL_COLUMNS = ["control_probe", "flip_rate", "flip_low", "flip_high", "control_flip_rate", "control_flip_low",
                   "control_flip_high", "beyond_control", "beyond_control_low", "beyond_control_high",
                   "beyond_control_p", "beyond_control_p_holm", "control_family", "control_verdict"]
EFFECT_COLUMNS = ["model", "probe", "base", "n_pairs", "n_units", "inputs_changed", "accuracy_base",
                  "accuracy_probe", "diff", "ci_low", "ci_high", "p_value", "p_holm", "family", "no_verdict",
                  "verdicts_kept", "max_score_change", "threshold", "bound", "tolerance", "check_value",
                  "check_low", "check_high", "check", "change_rate", "null_probe", "gain_rate", "null_gain_rate",
                  "reaction", "reaction_low", "reaction_high", "reaction_p", "reaction_p_holm", "reaction_family",
                  "twin_sets", "both_right", "both_wrong", "one_right", *CONTROL_COLUMNS]
VERDICT_COLUMNS = ["model", "base", "sensitivity", "sensitivity_low", "sensitivity_high", "p_holm", "family",
                   "change_rate", "null_probe", "gain_rate", "null_gain_rate", "reaction_p_holm", "reaction_family",
                   "twin_sets", "both_right", "both_wrong", "one_right", "verdict"]


def check_rule(names: Sequence[str] | None = None, *, tolerance: float = INVARIANCE_TOLERANCE) -> str:
    """The rule of the checks of the probes ``names`` (every probe with a check when None, in the registry's
    order), each in its own words (:attr:`prb_utils.probes.Check.rule`), then when a check fails or is n/a.

    >>> check_rule(["label-swap"]).startswith("label-swap is a harness check")
    True
    >>> check_rule(["retest-bfloat16", "retest-eager"]).split(" passes")[0]
    'a backend retest (retest-VALUE)'
    """
    shown = [p for p in (PROBES.values() if names is None else in_registry_order(names)) if p.check is not None]
    rules = dict.fromkeys(p.check.rule.format(tolerance=tolerance) for p in shown)   # backend retests share one
    return "; ".join([*rules, CHECKS_FAIL])


def reading_probes() -> tuple[str, ...]:
    """The probes of the reading verdict (:attr:`prb_utils.probes.Probe.reading`: ``swap``)."""
    return tuple(name for name, p in PROBES.items() if p.reading)


def is_reading(effects: pd.DataFrame) -> pd.Series:
    """Per row of :func:`probe_effects`: True for a probe of the reading verdict (the others carry checks)."""
    return effects["probe"].isin(reading_probes())


def split_probe(condition: str) -> tuple[str, str | None]:
    """``(base, probe)`` of a condition label: ``top3+swap`` -> ``("top3", "swap")``; no probe -> None.

    >>> split_probe("top3+label-swap"), split_probe("full")
    (('top3', 'label-swap'), ('full', None))
    """
    base, _, name = str(condition).partition("+")
    return base, (name or None)


def probed_models(results: pd.DataFrame, base: str) -> list[str]:
    """The models of ``results`` (per-item rows) that :func:`probe_effects` measures against ``base``: those with
    rows under ``base`` and under at least one probe of it (``base+NAME``), sorted.

    >>> rows = pd.DataFrame({"model": ["a", "a", "b", "c"], "profile": ["top3", "top3+swap", "top3", "none+swap"]})
    >>> probed_models(rows, "top3")
    ['a']
    """
    if results.empty:
        return []
    bases = results["profile"].astype(str).map(lambda c: split_probe(c)[0])
    mine = results[bases == base]
    probes = mine["profile"].astype(str) != base
    return sorted({str(m) for m in mine.loc[probes, "model"]} & {str(m) for m in mine.loc[~probes, "model"]})


def no_verdict_reason(rows: pd.DataFrame, base: str, name: str, changed: float) -> str:
    """Why ``model`` can get no verdict from the profile probe ``name`` of ``base`` ("" when it can): the probe
    changed no RM input (``changed`` = 0 pairs), its kind never reads the profile, or it is position-locked under
    the base or the probe (``rows``: that model's rows, with the judges' ``verdict_ab``/``verdict_ba``).

    >>> rows = pd.DataFrame({"model": "length", "kind": "length", "profile": ["top3"]})
    >>> no_verdict_reason(rows, "top3", "swap", 10)
    'n/a: profile-blind (length never reads the profile)'
    """
    if changed == 0:
        why = "the base condition none shows no profile" if base == NO_PROFILE else probe(name).unchanged
        return f"{NO_CHANGE} ({why})"
    kind = str(rows["kind"].iloc[0]) if "kind" in rows.columns and len(rows) else ""
    if kind in MODEL_KINDS and not MODEL_KINDS[kind].reads_profile:
        return f"n/a: profile-blind ({kind} never reads the profile)"
    return _lock_reason(rows, base, name)


def _lock_reason(rows: pd.DataFrame, base: str, name: str) -> str:
    """"n/a: position-locked ..." where the judge of ``rows`` is locked under ``base`` or its probe ``name``; else
    ""."""
    if {"verdict_ab", "verdict_ba"} <= set(rows.columns) and rows["verdict_ab"].notna().any():
        locks = position_locked(rows[rows["profile"].astype(str).isin([base, f"{base}+{name}"])])
        if not locks.empty and locks["locked"].any():
            return f"n/a: {RULES['lock'].verdicts[0]} (its verdicts follow the answer order)"
    return ""


def control_no_verdict(rows: pd.DataFrame, base: str, name: str, changed: float, control_scored: bool) -> str:
    """Why a model gets no verdict from the probe ``name`` tested against its control ("" when it can): the base
    shows no profile (no user to tell from another), the probe changed no RM input (``changed`` = 0), its control
    was not scored, or the judge of ``rows`` is position-locked. A profile-blind kind does get one: the probe
    changes what every kind reads.

    >>> rows = pd.DataFrame({"model": "length", "kind": "length", "profile": ["top3"]})
    >>> control_no_verdict(rows, "top3", "parrot", 10, True), control_no_verdict(rows, "top3", "parrot", 10, False)
    ('', 'n/a: parrot-control not scored (prb probe --probe parrot-control)')
    """
    spec = probe(name)
    if base == NO_PROFILE:
        return f"n/a: the base condition {NO_PROFILE} shows no profile, so no user to tell from another"
    if changed == 0:
        return f"{NO_CHANGE} ({spec.unchanged})"
    if not control_scored:
        return f"n/a: {spec.control} not scored (prb probe --probe {spec.control})"
    return _lock_reason(rows, base, name)


def _scores(pair: pd.DataFrame) -> pd.DataFrame:
    return pair.assign(**{c: pd.to_numeric(pair[c], errors="coerce") if c in pair.columns else np.nan
                          for c in ("score_chosen", "score_rejected")})


def _resolution(pair: pd.DataFrame) -> float:
    """The dtype's resolution at the largest |score| of ``pair`` (:data:`DTYPE_EPS` of its ``score_dtype``;
    float64 when none is recorded, as :func:`prb_utils.analysis.metrics.near_tie_mask` reads it)."""
    dtypes = pair["score_dtype"].dropna().astype(str) if "score_dtype" in pair.columns else pd.Series(dtype=str)
    eps = max((DTYPE_EPS.get(d, DTYPE_EPS["float64"]) for d in dtypes.unique()), default=DTYPE_EPS["float64"])
    scores = pair[["score_chosen", "score_rejected"]].to_numpy(dtype=float)
    finite = np.abs(scores[np.isfinite(scores)])
    return float(eps * finite.max()) if finite.size else np.nan


def _twin_split(outcomes: pd.Series, twins: dict) -> dict[str, int]:
    """Twin sets among the pairs of ``outcomes`` (indexed by (subset, id)), split by how many twins are right."""
    right = {(str(s), str(i)): v == "correct" for (s, i), v in outcomes.items()}
    split = {"twin_sets": 0, "both_right": 0, "both_wrong": 0, "one_right": 0}
    for key, other in twins.items():
        if key < other and key in right and other in right:
            n = int(right[key]) + int(right[other])
            split["twin_sets"] += 1
            split[("both_wrong", "one_right", "both_right")[n]] += 1
    return split


def probe_effects(results: pd.DataFrame, data: pd.DataFrame | None = None, *, units: str | None = "question",
                  n_boot: int | None = None, seed: int = SEED, level: float = LEVEL,
                  tolerance: float = INVARIANCE_TOLERANCE, keys: bool = False) -> pd.DataFrame:
    """One row per model and probe job in ``results`` (columns :data:`EFFECT_COLUMNS`), against its base condition
    on the pairs both scored, clustered by ``units`` (from ``data``, the benchmark records; with ``keys=True``,
    the unit keys the store recorded, ``subset, id, question, user``, taken as they are, as
    :func:`prb_utils.analysis.metrics.unit_labels` takes them: the same clusters; None: pairs):

    - ``diff`` = probe - base accuracy with its interval, ``p_value`` and ``p_holm`` within the probe's
      :class:`Family` (named in ``family``) for a tested probe (:attr:`prb_utils.probes.Probe.tested`: ``swap``,
      ``shuffle``, ``distract``); a model that can get no verdict has ``no_verdict`` (the reason), no ``p_holm``
      and no family; ``inputs_changed`` counts the pairs whose RM input a probe that changes the profile changed
      (NaN where it cannot be known or does not apply);
    - ``verdicts_kept`` (share of outcomes unchanged), ``max_score_change`` (the largest |change| of a score) and
      ``threshold`` (the dtype's resolution at the largest |score|), both NaN for a probe that negates margins;
    - ``n_units``: the resampled units (questions by default) of the pairs both scored;
    - the probe's own check (:attr:`prb_utils.probes.Probe.check`, on :class:`prb_utils.probes.Measurement`):
      ``check_value`` with its interval where it has one (``check_low``, ``check_high``; over ``units``), the
      ``bound`` a pass allows, the run's ``tolerance``, and ``check`` ``pass``/``fail`` (n/a with the reason where
      no RM input changed or the statistic is undefined); a harness check (not tested) has no ``diff`` nor p;
    - the reading probe only (``swap``): ``change_rate`` (share of verdicts changed), the reaction test
      (``gain_rate``, the share of pairs wrong under the base and right under swap, against the null probe's
      ``null_gain_rate`` on the same pairs: ``reaction`` = their difference with its interval and
      ``reaction_p_holm`` within ``reaction_family``) and, as it uses twins, the twin split (``twin_sets``,
      ``both_right``, ``both_wrong``, ``one_right`` of the base outcomes).
    """
    require_columns(results, ["model", "profile", "subset", "id", "outcome"])
    frame = _scores(results.assign(profile=results["profile"].astype(str)))
    labels = frame["profile"].map(split_probe)
    frame = frame.assign(_base=labels.map(lambda bp: bp[0]), _probe=labels.map(lambda bp: bp[1]))
    has_records = data is not None and {"subset", "id"} <= set(data.columns)
    twins = twin_pairs(data) if has_records and {"question", "chosen", "rejected"} <= set(data.columns) else {}
    has_profiles = has_records and "profile" in data.columns
    changed_sets: dict[str, set[tuple[str, str]]] = {}
    rows = []
    for (model, base), group in frame.groupby(["model", "_base"], sort=True):
        if base not in set(group["profile"]):
            continue
        if units == TWO_WAY_UNIT:   # the question and the user, crossed
            question, user = two_way_labels(group, data, keys=keys)
            group = group.assign(question=question.to_numpy(), user=user.to_numpy(),
                                 **{TWO_WAY_UNIT: (question + "+" + user).to_numpy()})
            tested = TWO_WAY_UNIT
        else:
            group = group.assign(_unit=unit_labels(group, data, units or "pair", keys=keys).to_numpy())
            tested = "_unit"
        wide = group.pivot_table(index=["subset", "id"], columns="profile", values="outcome", aggfunc="first")
        unit_of = group.drop_duplicates(["subset", "id"]).set_index(["subset", "id"])[unit_columns(tested)]
        for name in sorted(n for n in group["_probe"].dropna().unique()):
            spec = probe(name)
            cond = f"{base}+{name}"
            pair = group[group["profile"].isin([base, cond])]
            test = compare(pair, "profile", baseline=base, by=["model"], units=tested, n_boot=n_boot, seed=seed,
                           level=level).iloc[0]
            both = wide[[base, cond]].dropna()
            kept = float((both[base] == both[cond]).mean()) if len(both) else np.nan
            changed = np.nan
            if spec.changes_profile or spec.control:
                if base == NO_PROFILE and spec.changes_profile:
                    changed = 0.0
                elif has_profiles:
                    if name not in changed_sets:
                        changed_sets[name] = changed_records(data, name)
                    changed = float(sum((str(s), str(i)) in changed_sets[name] for s, i in both.index))
            cells = unit_of.reindex(both.index).reset_index(drop=True)
            row = {"model": model, "probe": name, "base": base, "n_pairs": int(test["n_pairs"]),
                   "n_units": int(cells[unit_columns(tested)[0]].nunique()) if len(cells) else 0,
                   "inputs_changed": changed, "accuracy_base": test["accuracy_a"],
                   "accuracy_probe": test["accuracy_b"], "diff": test["diff"], "ci_low": test["ci_low"],
                   "ci_high": test["ci_high"], "p_value": test["p_value"], "p_holm": np.nan, "family": "",
                   "no_verdict": "", "verdicts_kept": kept,
                   # a probe that negates margins has the base's scores exchanged by construction: nothing to measure
                   "max_score_change": np.nan if spec.negates_margins else _max_change(pair, base, cond),
                   "threshold": np.nan if spec.negates_margins else _resolution(pair), "bound": np.nan,
                   "tolerance": np.nan, "check_value": np.nan, "check_low": np.nan, "check_high": np.nan,
                   "check": ""}
            if spec.changes_profile:
                row["no_verdict"] = no_verdict_reason(group, base, name, changed)
            if spec.control:
                controlled = f"{base}+{spec.control}"
                row["no_verdict"] = control_no_verdict(group, base, name, changed, controlled in wide.columns)
                row.update(_against_control(wide, base, cond, controlled, both.index, unit_of, tested,
                                            n_boot=n_boot, seed=seed, level=level))
            if spec.check is not None:
                measured = _measurement(row, both, base, cond, cells, None if units is None else tested,
                                        tolerance=tolerance, n_boot=n_boot, seed=seed, level=level)
                if spec.control:
                    measured = replace(measured, beyond_control=(row["beyond_control"], row["beyond_control_low"],
                                                                 row["beyond_control_high"]))
                row.update(_check(spec, measured, changed, row["no_verdict"]))
            if not spec.tested:   # a harness check: no test
                row.update(diff=np.nan, ci_low=np.nan, ci_high=np.nan, p_value=np.nan)
            if spec.uses_twins:
                row.update(_twin_split(both[base], twins))
            if spec.reading:
                row.update(_reaction(wide, base, cond, both.index, unit_of, tested, n_boot=n_boot, seed=seed,
                                     level=level))
            rows.append(row)
    return _in_families(pd.DataFrame(rows, columns=EFFECT_COLUMNS))


def _in_families(out: pd.DataFrame) -> pd.DataFrame:
    """The effects ``out`` with ``p_holm`` and ``reaction_p_holm`` filled: each p-value adjusted within its
    :class:`Family` (:func:`_families`), whose label goes to ``family`` or ``reaction_family``; text columns hold
    "" where empty, counts are integers."""
    for column in ("family", "reaction_family", "null_probe", "no_verdict", "check", "control_probe",
                   "control_family", "control_verdict"):
        out[column] = out[column].fillna("").astype(object)
    for fam, (base, name), column, p_column, label in _families(out):
        mine = (out["probe"] == name) & (out["base"] == base)
        adjusted = fam.adjust(dict(zip(out.loc[mine, "model"], out.loc[mine, p_column], strict=True)))
        for model, p in adjusted.items():
            hit = mine & (out["model"] == model)
            out.loc[hit, column] = p
            out.loc[hit, label] = fam.label()
    controlled = out["control_probe"] != ""
    out.loc[controlled, "control_verdict"] = [control_verdict(r) for r in out[controlled].to_dict("records")]
    for column in ("twin_sets", "both_right", "both_wrong", "one_right"):
        out[column] = out[column].astype("Int64")
    return out[EFFECT_COLUMNS].reset_index(drop=True)


def _max_change(pair: pd.DataFrame, base: str, cond: str) -> float:
    """The largest |change| of a score between the ``base`` and ``cond`` rows of ``pair`` (NaN without scores)."""
    diffs = [(pair[pair["profile"] == cond].set_index(["subset", "id"])[c]
              - pair[pair["profile"] == base].set_index(["subset", "id"])[c]).abs()
             for c in ("score_chosen", "score_rejected")]
    finite = pd.concat(diffs).dropna()
    return float(finite.max()) if len(finite) else np.nan


def _measurement(row: dict, both: pd.DataFrame, base: str, cond: str, cells: pd.DataFrame, units: str | None, *,
                 tolerance: float, n_boot: int | None, seed: int, level: float) -> Measurement:
    """What a probe's check reads (:class:`prb_utils.probes.Measurement`) of one row of :func:`probe_effects` and
    the outcomes ``both`` of its pairs: the share of verdicts changed with its interval over ``units`` (Wilson
    over pairs when None), the accuracy drop with the interval of the paired comparison, the base's wrong share."""
    changes = (both[base] != both[cond]).to_numpy(dtype=float)
    low = high = np.nan
    if len(changes) and units is None:
        low, high = wilson_ci(int(changes.sum()), len(changes), level=level)
    elif len(changes):
        low, high = interval_over_units(changes, cells, units, n_boot=n_boot, seed=seed, level=level)
    return Measurement(
        accuracy_base=float(row["accuracy_base"]), accuracy_probe=float(row["accuracy_probe"]),
        drop=(-row["diff"], -row["ci_high"], -row["ci_low"]),
        verdicts_changed=(float(changes.mean()) if len(changes) else np.nan, float(low), float(high)),
        wrong_share=float((both[base] == "wrong").mean()) if len(both) else np.nan,
        max_score_change=float(row["max_score_change"]), resolution=float(row["threshold"]), tolerance=tolerance)


def _check(spec: Probe, measured: Measurement, changed: float, no_verdict: str) -> dict:
    """The columns of the check of ``spec`` (:attr:`prb_utils.probes.Probe.check`) on ``measured``: ``pass`` or
    ``fail``, n/a with the reason where the probe changed no RM input (``changed`` = 0) or the statistic is
    undefined."""
    value, low, high, bound, passed = spec.check.judge(measured)
    if changed == 0 or (spec.control and no_verdict):
        check = no_verdict or NO_CHANGE
    elif passed is None:
        check = ("n/a: no pair scored under both" if not np.isfinite(measured.accuracy_probe)
                 else f"n/a: no {spec.check.measures} to compare")
    else:
        check = PASS if passed else FAIL
    return {"bound": bound, "tolerance": measured.tolerance, "check_value": value, "check_low": low,
            "check_high": high, "check": check}


def _reaction(wide: pd.DataFrame, base: str, swap: str, keys: pd.Index, unit_of: pd.DataFrame, units: str, *,
              n_boot: int | None, seed: int, level: float) -> dict:
    """The reading probe's gains (a pair wrong under the base, right under ``swap``, its condition) against the
    invariance probe's (the :attr:`prb_utils.probes.Probe.null` probe with more gains) on the pairs all three
    scored: the difference of the gain rates, its interval over whole units and the clustered paired test."""
    rates = {}
    for name in (n for n, p in PROBES.items() if p.null):
        cond = f"{base}+{name}"
        if cond in wide.columns:
            common = wide.loc[keys, [base, swap, cond]].dropna()
            if len(common):
                rates[name] = (float(((common[base] != "correct") & (common[cond] == "correct")).mean()), common)
    out = {"change_rate": float((wide.loc[keys, swap] != wide.loc[keys, base]).mean()) if len(keys) else np.nan,
           "null_probe": "", "gain_rate": np.nan, "null_gain_rate": np.nan, "reaction": np.nan, "reaction_low": np.nan,
           "reaction_high": np.nan, "reaction_p": np.nan}
    if not rates:
        return out
    name = max(rates, key=lambda n: (rates[n][0], n))
    common = rates[name][1]
    wrong = common[base] != "correct"
    moved = (wrong & (common[swap] == "correct")).to_numpy(dtype=float)
    still = (wrong & (common[f"{base}+{name}"] == "correct")).to_numpy(dtype=float)
    cells = unit_of.reindex(common.index).reset_index(drop=True)
    low, high, p = _excess(moved, still, cells, units, n_boot=n_boot, seed=seed, level=level)
    out.update(null_probe=name, gain_rate=float(moved.mean()), null_gain_rate=float(still.mean()),
               reaction=float(moved.mean() - still.mean()), reaction_low=low, reaction_high=high, reaction_p=p)
    return out


def _excess(moved: np.ndarray, still: np.ndarray, cells: pd.DataFrame, units: str, *, n_boot: int | None,
            seed: int, level: float) -> tuple[float, float, float]:
    """``(low, high, p)`` of ``moved - still`` (two 0/1 indicators on the same pairs, ``cells`` their units): the
    interval of its mean over whole ``units`` and the clustered paired test (two-way where the units cross)."""
    low, high = interval_over_units(moved - still, cells, units, n_boot=n_boot, seed=seed, level=level)
    p = (two_way_paired_test(still, moved, cells["question"].to_numpy(), cells["user"].to_numpy())
         if units == TWO_WAY_UNIT else clustered_paired_test(still, moved, cells[units].to_numpy()))
    return low, high, p


def _against_control(wide: pd.DataFrame, base: str, cond: str, control: str, keys: pd.Index,
                     unit_of: pd.DataFrame, units: str, *, n_boot: int | None, seed: int, level: float) -> dict:
    """A probe's flips (a pair right under the base, wrong under ``cond``) against its control's (``control``, a
    condition) on the pairs all three scored: each flip rate with its interval over whole units, their difference
    (``beyond_control``) with its interval and the clustered paired test."""
    out: dict = {c: np.nan for c in CONTROL_COLUMNS}
    out.update(control_probe=split_probe(control)[1], control_family="", control_verdict="")
    if control not in wide.columns:
        return out
    common = wide.loc[keys, [base, cond, control]].dropna()
    if not len(common):
        return out
    right = common[base] == "correct"
    flips = (right & (common[cond] == "wrong")).to_numpy(dtype=float)
    still = (right & (common[control] == "wrong")).to_numpy(dtype=float)
    cells = unit_of.reindex(common.index).reset_index(drop=True)
    low, high, p = _excess(flips, still, cells, units, n_boot=n_boot, seed=seed, level=level)
    for prefix, values in (("flip", flips), ("control_flip", still)):
        out[f"{prefix}_rate"] = float(values.mean())
        out[f"{prefix}_low"], out[f"{prefix}_high"] = interval_over_units(values, cells, units, n_boot=n_boot,
                                                                          seed=seed, level=level)
    out.update(beyond_control=float(flips.mean() - still.mean()), beyond_control_low=low, beyond_control_high=high,
               beyond_control_p=p)
    return out


def _families(effects: pd.DataFrame) -> list[tuple[Family, tuple[str, str], str, str, str]]:
    """Every family of ``effects`` (with the columns of its adjusted p, its p and its label): per base and
    test-bearing probe one over the accuracy change, for swap one over the reaction test, and for a probe with a
    control one over its flips beyond the control's; members are the models with no ``no_verdict`` reason."""
    out = []
    for (base, name), part in effects.groupby(["base", "probe"], sort=True):
        spec = probe(name)
        members = tuple(part.loc[part["no_verdict"] == "", "model"].astype(str))
        excluded = tuple((str(m), str(r)) for m, r in zip(part["model"], part["no_verdict"], strict=True) if r)
        if spec.control:
            tested = tuple(m for m in members if np.isfinite(part.loc[part["model"] == m, "beyond_control_p"]
                                                             .astype(float).iloc[0]))
            if tested:
                out.append((Family(f"{base}+{name} against {spec.control}", tested, left_out=excluded),
                            (base, name), "beyond_control_p_holm", "beyond_control_p", "control_family"))
        if not spec.tested:
            continue
        if members:
            out.append((Family(f"{base}+{name}", members, left_out=excluded), (base, name), "p_holm", "p_value",
                        "family"))
        if spec.reading:
            react = tuple(m for m in members if part.loc[part["model"] == m, "null_probe"].fillna("").iloc[0])
            if react:
                out.append((Family(f"{base}+{name} reaction", react, left_out=excluded), (base, name),
                            "reaction_p_holm", "reaction_p", "reaction_family"))
    return out


def probe_families(effects: pd.DataFrame) -> list[Family]:
    """The families behind the adjusted p-values of :func:`probe_effects` (for the sentence under a table).

    >>> eff = pd.DataFrame({"model": ["a", "length"], "probe": "distract", "base": "top3",
    ...                     "no_verdict": ["", "n/a: profile-blind"]})
    >>> probe_families(eff)[0].say()
    'top3+distract: Holm over 1 test of a; not members: length (n/a: profile-blind)'
    """
    return [fam for fam, *_ in _families(effects)]


def control_verdict(row: pd.Series | dict, *, alpha: float = ALPHA) -> str:
    """The verdict of one row of :func:`probe_effects` of a probe with a control (its rule is its check's: for
    ``parrot`` :data:`prb_utils.probes.MIMICRY_RULE`): the probe's first verdict word where its flips beyond the
    control's have the whole interval above 0 and Holm p < ``alpha``, its second where its check passes, else
    inconclusive; the ``no_verdict`` reason where there is one.

    >>> row = {"probe": "parrot", "no_verdict": "", "beyond_control_low": 0.1, "beyond_control_high": 0.4,
    ...        "beyond_control_p_holm": 0.01, "check": "fail"}
    >>> control_verdict(row), control_verdict({**row, "beyond_control_p_holm": 0.2})
    ('rewards mimicry', 'inconclusive')
    >>> control_verdict({**row, "beyond_control_low": 0.0, "beyond_control_high": 0.0, "check": "pass"})
    'no mimicry found'
    """
    if row.get("no_verdict"):
        return str(row["no_verdict"])
    caught, cleared = probe(str(row["probe"])).control_verdicts
    helps = RULES["lift"].verdicts[0]
    if lift_verdict(row["beyond_control_low"], row["beyond_control_high"], row["beyond_control_p_holm"],
                    alpha=alpha) == helps:
        return caught
    return cleared if row.get("check") == PASS else INCONCLUSIVE


def reading_verdict(row: pd.Series | dict, *, alpha: float = ALPHA) -> str:
    """The verdict of one ``swap`` row of :func:`probe_effects` under :data:`READING_RULE`.

    >>> base = {"no_verdict": "", "verdicts_kept": 0.6, "max_score_change": 1.0, "threshold": 1e-15,
    ...         "reaction_low": float("nan"), "reaction_high": float("nan"), "reaction_p_holm": float("nan")}
    >>> reading_verdict({**base, "ci_low": -0.5, "ci_high": -0.1, "p_holm": 0.01})
    'reads the user'
    >>> reading_verdict({**base, "ci_low": -0.4, "ci_high": -0.05, "p_holm": 0.09})
    'inconclusive'
    >>> reading_verdict({**base, "ci_low": 0.1, "ci_high": 0.5, "p_holm": 0.01})
    'reacts to any profile'
    >>> reading_verdict({**base, "ci_low": 0.0, "ci_high": 0.0, "p_holm": 1.0, "verdicts_kept": 1.0,
    ...                  "max_score_change": 0.0})
    'ignores the profile'
    """
    if row.get("no_verdict"):
        return str(row["no_verdict"])
    helps, hurts, _ = RULES["lift"].verdicts
    drop = lift_verdict(row["ci_low"], row["ci_high"], row["p_holm"], alpha=alpha)
    if drop == hurts:
        return READS
    if drop == helps:   # the other user's profile makes it *more* accurate
        return REACTS
    if lift_verdict(row["reaction_low"], row["reaction_high"], row["reaction_p_holm"], alpha=alpha) == helps:
        return REACTS
    still = not (row["max_score_change"] > row["threshold"])   # NaN (no scores): the verdicts alone
    return IGNORES if row["verdicts_kept"] == 1 and still else INCONCLUSIVE


def reading_verdicts(effects: pd.DataFrame, *, models: Sequence[str] | None = None) -> pd.DataFrame:
    """Per model with a ``swap`` job (the probe of the reading verdict: :func:`reading_probes`; columns
    :data:`VERDICT_COLUMNS`): the sensitivity (base accuracy minus swapped, with its interval), its Holm p within
    the named family, the reaction test, the twin split and the verdict (:func:`reading_verdict`); "n/a" with the
    reason for a model of ``models`` without a swap job."""
    swap = effects[is_reading(effects)]
    rows = []
    for r in swap.to_dict("records"):
        rows.append({**{c: r[c] for c in VERDICT_COLUMNS if c in r},
                     "sensitivity": 0.0 - r["diff"], "sensitivity_low": 0.0 - r["ci_high"],
                     "sensitivity_high": 0.0 - r["ci_low"], "verdict": reading_verdict(r)})
    for model in models or ():
        if model not in set(swap["model"]):
            names = reading_probes()
            rows.append({"model": model, "verdict": f"n/a: no {' or '.join(names)} probe scored "
                                                    f"({' '.join(f'prb probe --probe {n}' for n in names)})"})
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def probe_expectations() -> pd.DataFrame:
    """Each probe's change and expected behaviour (:data:`prb_utils.probes.PROBES`), for a page's table; the probes
    that leave out one shown post (:attr:`prb_utils.probes.Probe.leaves_out`) in one row.

    >>> probe_expectations()["probe"].iloc[-1]
    'drop1 .. drop10'
    """
    shown = [{"probe": p.name, "changes": p.changes, "expected": p.expected} for p in PROBES.values()
             if not p.leaves_out]
    drops = [p for p in PROBES.values() if p.leaves_out]
    if drops:
        shown.append({"probe": f"{drops[0].name} .. {drops[-1].name}",
                      "changes": "the post shown at that position left out (no other post in its place)",
                      "expected": f"{drops[0].expected} (run with prb probe --probe {ATTRIBUTION})"})
    return pd.DataFrame(shown)


# ------------------------------------------------------------------------------------------------ views
def _cell(value, sense: str) -> str:
    return format_value(value, sense=sense)


def _score_cell(value: float) -> str:
    """A score change or a resolution: 3 significant digits, never rounded to 0 (float64's is about 1e-16).

    >>> _score_cell(2.2e-16), _score_cell(0.0), _score_cell(0.23456)
    ('2.2e-16', '0', '0.235')
    """
    return MISSING if pd.isna(value) else "0" if value == 0 else f"{value:.3g}"


def _number(value: float, sense: str) -> str:
    """A check's number by the formatter's ``sense``; a score change at 3 significant digits (:func:`_score_cell`)."""
    return _score_cell(value) if sense == SCORE else _cell(value, sense)


def _measured(r: dict) -> tuple[str, str]:
    """The ``measured [95% CI]`` and ``allowed`` cells of one row of :func:`probe_effects`, in the words of its
    probe's check (:attr:`prb_utils.probes.Probe.check`; a dash where the probe has no check or its value is
    undefined)."""
    spec = find_probe(str(r["probe"]))
    check = spec.check if spec is not None else None
    if check is None or pd.isna(r.get("check_value")):
        return MISSING, (MISSING if check is None or pd.isna(r.get("bound")) else
                         f"{check.relation} {_number(r['bound'], check.sense)}")
    shown = _number(r["check_value"], check.sense)
    if pd.notna(r.get("check_low")) and pd.notna(r.get("check_high")):
        shown += f" [{_number(r['check_low'], check.sense)}, {_number(r['check_high'], check.sense)}]"
    if check.sense == SCORE and pd.notna(r.get("verdicts_kept")) and r.get("n_pairs"):   # a retest: its flips too
        shown += f"; {round((1 - r['verdicts_kept']) * r['n_pairs'])} of {r['n_pairs']} verdicts flipped"
    allowed = f"{check.relation} {_number(r['bound'], check.sense)}" if pd.notna(r.get("bound")) else MISSING
    return f"{check.measures} {shown}", allowed


def probe_table(effects: pd.DataFrame) -> pd.DataFrame:
    """:func:`probe_effects` as ``prb probe`` and page 05 show it, its check first (so that it prints on a narrow
    page): per model and probe the check (pass, fail, or n/a with the reason), what it measured against what it
    allows (a score-change check, a retest's, also counts the verdicts that flipped), the accuracies, the change with its interval and its Holm p (the families are named in
    :func:`probe_notes`) and the pairs.

    >>> eff = pd.DataFrame([{"model": "m", "probe": "label-swap", "base": "top3", "n_pairs": 4,
    ...     "inputs_changed": float("nan"), "accuracy_base": 0.75, "accuracy_probe": 0.25, "diff": float("nan"),
    ...     "ci_low": float("nan"), "ci_high": float("nan"), "p_holm": float("nan"), "family": "",
    ...     "no_verdict": "", "verdicts_kept": 0.0, "max_score_change": float("nan"), "threshold": float("nan"),
    ...     "bound": 0.25, "check_value": 0.25, "check_low": float("nan"), "check_high": float("nan"),
    ...     "check": "pass"}])
    >>> probe_table(eff).iloc[0][["measured [95% CI]", "allowed", "check", "p (Holm)"]].tolist()
    ['accuracy 0.250', '= 0.250', 'pass', '—']
    """
    rows = []
    for r in effects.to_dict("records"):
        measured, allowed = _measured(r)
        rows.append({
            "model": r["model"], "probe": r["probe"], "pairs": _cell(r["n_pairs"], "count"),
            "accuracy: base → probe": (f"{_cell(r['accuracy_base'], 'proportion')} → "
                                       f"{_cell(r['accuracy_probe'], 'proportion')}"),
            "change [95% CI]": (format_interval(r["diff"], r["ci_low"], r["ci_high"])
                                if np.isfinite(r["diff"]) else MISSING),
            "p (Holm)": _cell(r["p_holm"], "p_value"), "measured [95% CI]": measured, "allowed": allowed,
            "check": r["check"] or MISSING})
    return pd.DataFrame(rows, columns=PROBE_TABLE_COLUMNS)


PROBE_TABLE_COLUMNS = ["model", "probe", "check", "measured [95% CI]", "allowed", "accuracy: base → probe",
                       "change [95% CI]", "p (Holm)", "pairs"]   # the check first: it prints on a narrow page
VERDICT_TABLE_COLUMNS = ["model", "verdict", "sensitivity [95% CI]", "p (Holm)", "verdicts changed",
                         "wrong made right: swap / invariance", "reaction p (Holm)",
                         "twins: both right / both wrong / one right"]


def verdict_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """:func:`reading_verdicts` as ``prb probe`` and page 05 show it: the verdict beside the model, then the
    numbers behind it (readable headers, text cells; the families are named in :func:`probe_notes`)."""
    rows = []
    for r in verdicts.to_dict("records"):
        null = r.get("null_probe") or ""
        twins = (f"{r['both_right']} / {r['both_wrong']} / {r['one_right']} of {r['twin_sets']}"
                 if pd.notna(r.get("twin_sets")) and r.get("twin_sets") else MISSING)
        gains = (f"{_cell(r.get('gain_rate'), 'proportion')} / {_cell(r['null_gain_rate'], 'proportion')} ({null})"
                 if null else MISSING)
        rows.append({
            "model": r["model"], "verdict": r["verdict"],
            "sensitivity [95% CI]": (format_interval(r["sensitivity"], r["sensitivity_low"], r["sensitivity_high"])
                                     if pd.notna(r.get("sensitivity")) else MISSING),
            "p (Holm)": _cell(r.get("p_holm"), "p_value"),
            "verdicts changed": _cell(r.get("change_rate"), "proportion"),
            "wrong made right: swap / invariance": gains,
            "reaction p (Holm)": _cell(r.get("reaction_p_holm"), "p_value"),
            "twins: both right / both wrong / one right": twins})
    return pd.DataFrame(rows, columns=VERDICT_TABLE_COLUMNS)


CONTROL_TABLE_COLUMNS = ["model", "probe", "verdict", "flips: probe / control [95% CI]", "beyond control [95% CI]",
                         "p (Holm)", "pairs"]


def control_probes() -> tuple[str, ...]:
    """Each probe tested against a control, then its control (:attr:`prb_utils.probes.Probe.control`).

    >>> control_probes()
    ('parrot', 'parrot-control')
    """
    return tuple(n for spec in PROBES.values() if spec.control for n in (spec.name, spec.control))


def controlled(effects: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`probe_effects` of probes tested against a control (``parrot`` against
    ``parrot-control``)."""
    if "control_probe" not in effects.columns:
        return effects.iloc[:0]
    return effects[effects["control_probe"].fillna("") != ""]


def control_table(effects: pd.DataFrame) -> pd.DataFrame:
    """The probes tested against a control (:func:`controlled`) as ``prb probe`` and page 05 show them: the verdict
    beside the model, each flip rate (right under the base, wrong under the probe) with its interval, their
    difference with its interval and its Holm p (the family is named in :func:`probe_notes`)."""
    rows = []
    for r in controlled(effects).to_dict("records"):
        flips = MISSING if pd.isna(r["flip_rate"]) else (
            f"{format_interval(r['flip_rate'], r['flip_low'], r['flip_high'])} / "
            f"{format_interval(r['control_flip_rate'], r['control_flip_low'], r['control_flip_high'])}"
            f" ({r['control_probe']})")
        rows.append({"model": r["model"], "probe": r["probe"], "verdict": r["control_verdict"],
                     "flips: probe / control [95% CI]": flips,
                     "beyond control [95% CI]": (MISSING if pd.isna(r["beyond_control"]) else format_interval(
                         r["beyond_control"], r["beyond_control_low"], r["beyond_control_high"])),
                     "p (Holm)": _cell(r["beyond_control_p_holm"], "p_value"), "pairs": _cell(r["n_pairs"], "count")})
    return pd.DataFrame(rows, columns=CONTROL_TABLE_COLUMNS)


def unprobed_models(jobs: pd.DataFrame, base: str) -> list[str]:
    """The model specs of the store's ``jobs`` (:func:`prb_utils.store.load_run_metadata`: ``model``, ``profile``)
    with no probe job of ``base`` (the oracle's jobs aside): those ``prb probe --profile BASE`` would add.

    >>> jobs = pd.DataFrame({"model": ["a", "a", "b", "c"], "profile": ["top3", "top3+swap", "top3", "none"]})
    >>> unprobed_models(jobs, "top3")
    ['b', 'c']
    """
    if jobs.empty or not {"model", "profile"} <= set(jobs.columns):
        return []
    profiles = jobs["profile"].astype(str)
    probed = set(jobs.loc[profiles.str.startswith(f"{base}+"), "model"].astype(str))
    plain = jobs.loc[~profiles.map(is_oracle) & ~profiles.str.contains("+", regex=False), "model"].astype(str)
    return sorted(set(plain) - probed)


def probe_notes(effects: pd.DataFrame) -> list[str]:
    """The sentences under the probe tables: the rules of the probes in ``effects`` (the reading rule with
    ``swap``, the twin split with a probe that uses twins, the checks of the probes with one: :func:`check_rule`;
    all three when ``effects`` is empty) and every family.

    >>> len(probe_notes(pd.DataFrame(columns=EFFECT_COLUMNS)))
    3
    >>> probe_notes(pd.DataFrame({"probe": ["label-swap"], "base": "top3", "model": "m", "no_verdict": ""}))[0][:29]
    'Checks: label-swap is a harne'
    """
    names = set(effects["probe"]) if "probe" in effects.columns and len(effects) else set(PROBES)
    shown = in_registry_order(names)
    notes = [f"Rule: {READING_RULE}."] if any(p.reading for p in shown) else []
    notes += [f"Twins: {TWIN_RULE}."] if any(p.uses_twins for p in shown) else []
    checked = [p.name for p in shown if p.check is not None]
    notes += [f"Checks: {check_rule(checked)}."] if checked else []
    return notes + [f"Family {fam.say()}." for fam in probe_families(effects)]
