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
  ``retest``, whichever did more) on the same pairs it turns clearly more wrong verdicts right (the same
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
right) / twin sets, the test above). ``label-swap`` is a harness check (expected = observed, no test; both
answer orders of a judge are the same prompts exchanged, so it cannot catch a position-locked judge:
:func:`prb_utils.analysis.breakdowns.position_locked` does); ``retest`` checks its largest score change against
the dtype's resolution.
"""

from __future__ import annotations

from collections.abc import Sequence

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
from prb_utils.formatting import MISSING, format_interval, format_value
from prb_utils.models.kinds import MODEL_KINDS
from prb_utils.probes import PROBES, changed_records, twin_pairs
from prb_utils.schema import NO_PROFILE, is_oracle

READS, REACTS, IGNORES, INCONCLUSIVE = READING_VERDICTS = (
    "reads the user", "reacts to any profile", "ignores the profile", "inconclusive")
#: The probes that change the profile an RM sees (the others change the answers or the batching).
PROFILE_PROBES = ("swap", "shuffle", "distract")
#: The invariance probes whose verdict changes are the null of "reacts to any profile".
NULL_PROBES = ("shuffle", "retest")
#: The harness checks: an expected value, a pass/fail ``check``, no test.
CHECKS = ("label-swap", "retest")
PASS, FAIL = "pass", "fail"
NO_CHANGE = "n/a: the probe changed no RM input"
#: The invariance probes' checks: the statistic each is held to (an RM should keep its verdicts under them) ...
INVARIANCES = {"shuffle": "verdicts changed", "distract": "accuracy drop"}
#: ... and the most of it a pass allows, for the whole 95% interval over the plan's units (a rule as data).
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
CHECK_RULE = (f"shuffle passes when the share of verdicts it changes has its whole 95% interval over the plan's units "
              f"(whole questions by default; Wilson over pairs) at or below {INVARIANCE_TOLERANCE:.2f}, distract when its "
              f"accuracy drop (base minus probe, the interval of its paired comparison) does; otherwise it fails "
              f"(the interval reaches past the tolerance: keeping the verdicts is not shown), and it is n/a where the "
              f"probe changed no RM input; "
              "label-swap is a harness check: with the answers exchanged the accuracy must equal the base's share "
              "of wrong pairs (1 - accuracy - tie rate - invalid rate); it holds by construction for every kind, so "
              "it does not catch a position-locked judge (the leaderboard's lock check does); retest passes when no "
              "score changed by more than the dtype's resolution (its machine epsilon times the largest |score|)")
EFFECT_COLUMNS = ["model", "probe", "base", "n_pairs", "n_units", "inputs_changed", "accuracy_base",
                  "accuracy_probe", "diff", "ci_low", "ci_high", "p_value", "p_holm", "family", "no_verdict",
                  "verdicts_kept", "max_score_change", "threshold", "expected", "tolerance", "check_value",
                  "check_low", "check_high", "check", "change_rate", "null_probe", "gain_rate", "null_gain_rate",
                  "reaction", "reaction_low", "reaction_high", "reaction_p", "reaction_p_holm", "reaction_family",
                  "twin_sets", "both_right", "both_wrong", "one_right"]
VERDICT_COLUMNS = ["model", "base", "sensitivity", "sensitivity_low", "sensitivity_high", "p_holm", "family",
                   "change_rate", "null_probe", "gain_rate", "null_gain_rate", "reaction_p_holm", "reaction_family",
                   "twin_sets", "both_right", "both_wrong", "one_right", "verdict"]


def split_probe(condition: str) -> tuple[str, str | None]:
    """``(base, probe)`` of a condition label: ``top3+swap`` -> ``("top3", "swap")``; no probe -> None.

    >>> split_probe("top3+label-swap"), split_probe("full")
    (('top3', 'label-swap'), ('full', None))
    """
    base, _, name = str(condition).partition("+")
    return base, (name or None)


def no_verdict_reason(rows: pd.DataFrame, base: str, name: str, changed: float) -> str:
    """Why ``model`` can get no verdict from the profile probe ``name`` of ``base`` ("" when it can): the probe
    changed no RM input (``changed`` = 0 pairs), its kind never reads the profile, or it is position-locked under
    the base or the probe (``rows``: that model's rows, with the judges' ``verdict_ab``/``verdict_ba``).

    >>> rows = pd.DataFrame({"model": "length", "kind": "length", "profile": ["top3"]})
    >>> no_verdict_reason(rows, "top3", "swap", 10)
    'n/a: profile-blind (length never reads the profile)'
    """
    if changed == 0:
        why = ("the base condition none shows no profile" if base == NO_PROFILE
               else "every record kept its own profile: one user per subset" if name == "swap"
               else "no record's profile changed")
        return f"{NO_CHANGE} ({why})"
    kind = str(rows["kind"].iloc[0]) if "kind" in rows.columns and len(rows) else ""
    if kind in MODEL_KINDS and not MODEL_KINDS[kind].reads_profile:
        return f"n/a: profile-blind ({kind} never reads the profile)"
    if {"verdict_ab", "verdict_ba"} <= set(rows.columns) and rows["verdict_ab"].notna().any():
        locks = position_locked(rows[rows["profile"].astype(str).isin([base, f"{base}+{name}"])])
        if not locks.empty and locks["locked"].any():
            return f"n/a: {RULES['lock'].verdicts[0]} (its verdicts follow the answer order)"
    return ""


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
                  tolerance: float = INVARIANCE_TOLERANCE) -> pd.DataFrame:
    """One row per model and probe job in ``results`` (columns :data:`EFFECT_COLUMNS`), against its base condition
    on the pairs both scored, clustered by ``units`` (from ``data``, the benchmark records; None: pairs):

    - ``diff`` = probe - base accuracy with its interval, ``p_value`` and ``p_holm`` within the probe's
      :class:`Family` (named in ``family``) for ``swap``, ``shuffle`` and ``distract``; a model that can get no
      verdict has ``no_verdict`` (the reason), no ``p_holm`` and no family; ``inputs_changed`` counts the pairs
      whose RM input the probe changed (NaN where it cannot be known or does not apply);
    - ``verdicts_kept`` (share of outcomes unchanged), ``max_score_change`` (the largest |change| of a score) and
      ``threshold`` (the dtype's resolution at the largest |score|);
    - ``n_units``: the resampled units (questions by default) of the pairs both scored;
    - the invariance checks of :data:`INVARIANCES` (``shuffle``: the share of verdicts changed; ``distract``: the
      accuracy drop), ``check_value`` with its interval over ``units`` (``check_low``, ``check_high``), ``pass``
      where the whole interval lies at or below ``tolerance``, else ``fail`` (n/a where no RM input changed);
    - the harness checks (no test): ``label-swap``'s ``expected`` accuracy (the base's share of wrong pairs) and
      ``retest``'s ``threshold``, each with ``check`` ``pass``/``fail``;
    - ``swap`` only: ``change_rate`` (share of verdicts changed), the reaction test (``gain_rate``, the share of
      pairs wrong under the base and right under swap, against the invariance probe's ``null_gain_rate`` on the same
      pairs: ``reaction`` = their difference with its interval and ``reaction_p_holm`` within ``reaction_family``) and the twin split (``twin_sets``, ``both_right``, ``both_wrong``, ``one_right``
      of the base outcomes).
    """
    require_columns(results, ["model", "profile", "subset", "id", "outcome"])
    frame = _scores(results.assign(profile=results["profile"].astype(str)))
    labels = frame["profile"].map(split_probe)
    frame = frame.assign(_base=labels.map(lambda bp: bp[0]), _probe=labels.map(lambda bp: bp[1]))
    has_records = data is not None and {"subset", "id"} <= set(data.columns)
    twins = twin_pairs(data) if has_records and {"question", "chosen", "rejected"} <= set(data.columns) else {}
    changed_sets = {name: (changed_records(data, name) if has_records and "profile" in data.columns else None)
                    for name in PROFILE_PROBES}
    rows = []
    for (model, base), group in frame.groupby(["model", "_base"], sort=True):
        if base not in set(group["profile"]):
            continue
        if units == TWO_WAY_UNIT:   # the question and the user, crossed
            question, user = two_way_labels(group, data)
            group = group.assign(question=question.to_numpy(), user=user.to_numpy(),
                                 **{TWO_WAY_UNIT: (question + "+" + user).to_numpy()})
            tested = TWO_WAY_UNIT
        else:
            group = group.assign(_unit=unit_labels(group, data, units or "pair").to_numpy())
            tested = "_unit"
        wide = group.pivot_table(index=["subset", "id"], columns="profile", values="outcome", aggfunc="first")
        unit_of = group.drop_duplicates(["subset", "id"]).set_index(["subset", "id"])[unit_columns(tested)]
        for name in sorted(n for n in group["_probe"].dropna().unique()):
            cond = f"{base}+{name}"
            pair = group[group["profile"].isin([base, cond])]
            test = compare(pair, "profile", baseline=base, by=["model"], units=tested, n_boot=n_boot, seed=seed,
                           level=level).iloc[0]
            both = wide[[base, cond]].dropna()
            kept = float((both[base] == both[cond]).mean()) if len(both) else np.nan
            change = np.nan
            if name != "label-swap":  # its scores are the base's exchanged by construction
                diffs = [(pair[pair["profile"] == cond].set_index(["subset", "id"])[c]
                          - pair[pair["profile"] == base].set_index(["subset", "id"])[c]).abs()
                         for c in ("score_chosen", "score_rejected")]
                finite = pd.concat(diffs).dropna()
                change = float(finite.max()) if len(finite) else np.nan
            changed = np.nan
            if name in PROFILE_PROBES:
                if base == NO_PROFILE:
                    changed = 0.0
                elif changed_sets[name] is not None:
                    changed = float(sum((str(s), str(i)) in changed_sets[name] for s, i in both.index))
            cells = unit_of.reindex(both.index).reset_index(drop=True)
            row = {"model": model, "probe": name, "base": base, "n_pairs": int(test["n_pairs"]),
                   "n_units": int(cells[unit_columns(tested)[0]].nunique()) if len(cells) else 0,
                   "inputs_changed": changed, "accuracy_base": test["accuracy_a"],
                   "accuracy_probe": test["accuracy_b"], "diff": test["diff"], "ci_low": test["ci_low"],
                   "ci_high": test["ci_high"], "p_value": test["p_value"], "p_holm": np.nan, "family": "",
                   "no_verdict": "", "verdicts_kept": kept, "max_score_change": change,
                   "threshold": _resolution(pair) if name != "label-swap" else np.nan, "expected": np.nan,
                   "tolerance": np.nan, "check_value": np.nan, "check_low": np.nan, "check_high": np.nan,
                   "check": ""}
            if name in CHECKS:
                row.update(diff=np.nan, ci_low=np.nan, ci_high=np.nan, p_value=np.nan)
                if name == "label-swap":
                    row["expected"] = float((both[base] == "wrong").mean()) if len(both) else np.nan
                    ok = abs(row["accuracy_probe"] - row["expected"]) < 1e-12
                else:
                    ok = bool(change <= row["threshold"]) if np.isfinite(change) else kept == 1.0
                row["check"] = PASS if ok else FAIL
            elif name in PROFILE_PROBES:
                row["no_verdict"] = no_verdict_reason(group, base, name, changed)
            if name in INVARIANCES:
                changes = (both[base] != both[cond]).to_numpy(dtype=float)
                row.update(_invariance(name, row, changes, cells, None if units is None else tested, changed,
                                       tolerance=tolerance, n_boot=n_boot, seed=seed, level=level))
            if name == "swap":
                row.update(_twin_split(both[base], twins))
                row.update(_reaction(wide, base, both.index, unit_of, tested, n_boot=n_boot, seed=seed,
                                     level=level))
            rows.append(row)
    return _in_families(pd.DataFrame(rows, columns=EFFECT_COLUMNS))


def _in_families(out: pd.DataFrame) -> pd.DataFrame:
    """The effects ``out`` with ``p_holm`` and ``reaction_p_holm`` filled: each p-value adjusted within its
    :class:`Family` (:func:`_families`), whose label goes to ``family`` or ``reaction_family``; text columns hold
    "" where empty, counts are integers."""
    for column in ("family", "reaction_family", "null_probe", "no_verdict", "check"):
        out[column] = out[column].fillna("").astype(object)
    for fam, (base, name), column, p_column in _families(out):
        mine = (out["probe"] == name) & (out["base"] == base)
        adjusted = fam.adjust(dict(zip(out.loc[mine, "model"], out.loc[mine, p_column], strict=True)))
        for model, p in adjusted.items():
            hit = mine & (out["model"] == model)
            out.loc[hit, column] = p
            out.loc[hit, "family" if column == "p_holm" else "reaction_family"] = fam.label()
    for column in ("twin_sets", "both_right", "both_wrong", "one_right"):
        out[column] = out[column].astype("Int64")
    return out[EFFECT_COLUMNS].reset_index(drop=True)


def _invariance(name: str, row: dict, changes: np.ndarray, cells: pd.DataFrame, units: str | None, changed: float,
                *, tolerance: float, n_boot: int | None, seed: int, level: float) -> dict:
    """The check of the invariance probe ``name`` (:data:`INVARIANCES`): its statistic with the interval over
    ``units`` (Wilson over pairs when None), ``pass`` where the whole interval lies at or below ``tolerance``."""
    if name == "shuffle":
        value = float(changes.mean()) if len(changes) else np.nan
        if units is None:
            low, high = wilson_ci(int(changes.sum()), len(changes), level=level)
        else:
            low, high = interval_over_units(changes, cells, units, n_boot=n_boot, seed=seed, level=level)
    else:   # distract: the accuracy drop, base minus probe, with the interval of the paired comparison
        value, low, high = -row["diff"], -row["ci_high"], -row["ci_low"]
    if changed == 0:
        check = row["no_verdict"] or NO_CHANGE
    elif not np.isfinite(high):
        check = "n/a: no pair scored under both"
    else:
        check = PASS if high <= tolerance + 1e-12 else FAIL
    return {"tolerance": tolerance, "check_value": value, "check_low": float(low), "check_high": float(high),
            "check": check}


def _reaction(wide: pd.DataFrame, base: str, keys: pd.Index, unit_of: pd.DataFrame, units: str, *,
              n_boot: int | None,
              seed: int, level: float) -> dict:
    """The swap's gains (a pair wrong under the base, right under swap) against the invariance probe's (the one of
    :data:`NULL_PROBES` with more gains) on the pairs all three scored: the difference of the gain rates, its
    interval over whole units and the clustered paired test."""
    swap = f"{base}+swap"
    rates = {}
    for name in NULL_PROBES:
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
    low, high = interval_over_units(moved - still, cells, units, n_boot=n_boot, seed=seed, level=level)
    p = (two_way_paired_test(still, moved, cells["question"].to_numpy(), cells["user"].to_numpy())
         if units == TWO_WAY_UNIT else clustered_paired_test(still, moved, cells[units].to_numpy()))
    out.update(null_probe=name, gain_rate=float(moved.mean()), null_gain_rate=float(still.mean()),
               reaction=float(moved.mean() - still.mean()), reaction_low=low, reaction_high=high, reaction_p=p)
    return out


def _families(effects: pd.DataFrame) -> list[tuple[Family, tuple[str, str], str, str]]:
    """Every family of ``effects``: per base and test-bearing probe one over the accuracy change, and for swap one
    over the reaction test; members are the models with no ``no_verdict`` reason."""
    out = []
    for (base, name), part in effects.groupby(["base", "probe"], sort=True):
        if name not in PROFILE_PROBES:
            continue
        members = tuple(part.loc[part["no_verdict"] == "", "model"].astype(str))
        excluded = tuple((str(m), str(r)) for m, r in zip(part["model"], part["no_verdict"], strict=True) if r)
        if members:
            out.append((Family(f"{base}+{name}", members, left_out=excluded), (base, name), "p_holm", "p_value"))
        if name == "swap":
            react = tuple(m for m in members if part.loc[part["model"] == m, "null_probe"].fillna("").iloc[0])
            if react:
                    out.append((Family(f"{base}+swap reaction", react, left_out=excluded), (base, name), "reaction_p_holm",
                            "reaction_p"))
    return out


def probe_families(effects: pd.DataFrame) -> list[Family]:
    """The families behind the adjusted p-values of :func:`probe_effects` (for the sentence under a table).

    >>> eff = pd.DataFrame({"model": ["a", "length"], "probe": "distract", "base": "top3",
    ...                     "no_verdict": ["", "n/a: profile-blind"]})
    >>> probe_families(eff)[0].say()
    'top3+distract: Holm over 1 test of a; not members: length (n/a: profile-blind)'
    """
    return [fam for fam, *_ in _families(effects)]


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
    """Per model with a ``swap`` job (columns :data:`VERDICT_COLUMNS`): the sensitivity (base accuracy minus
    swapped, with its interval), its Holm p within the named family, the reaction test, the twin split and the
    verdict (:func:`reading_verdict`); "n/a" with the reason for a model of ``models`` without a swap job."""
    swap = effects[effects["probe"] == "swap"]
    rows = []
    for r in swap.to_dict("records"):
        rows.append({**{c: r[c] for c in VERDICT_COLUMNS if c in r},
                     "sensitivity": 0.0 - r["diff"], "sensitivity_low": 0.0 - r["ci_high"],
                     "sensitivity_high": 0.0 - r["ci_low"], "verdict": reading_verdict(r)})
    for model in models or ():
        if model not in set(swap["model"]):
            rows.append({"model": model, "verdict": "n/a: no swap probe scored (prb probe --probe swap)"})
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def probe_expectations() -> pd.DataFrame:
    """Each probe's change and expected behaviour (:data:`prb_utils.probes.PROBES`), for a page's table."""
    return pd.DataFrame([{"probe": p.name, "changes": p.changes, "expected": p.expected} for p in PROBES.values()])


# ------------------------------------------------------------------------------------------------ views
def _cell(value, sense: str) -> str:
    return format_value(value, sense=sense)


def _score_cell(value: float) -> str:
    """A score change or a resolution: 3 significant digits, never rounded to 0 (float64's is about 1e-16).

    >>> _score_cell(2.2e-16), _score_cell(0.0), _score_cell(0.23456)
    ('2.2e-16', '0', '0.235')
    """
    return MISSING if pd.isna(value) else "0" if value == 0 else f"{value:.3g}"


#: What each check measures, in the words of the invariance table (:func:`probe_table`).
MEASURED = {**INVARIANCES, "label-swap": "accuracy", "retest": "largest score change"}


def _measured(r: dict) -> tuple[str, str]:
    """The ``measured [95% CI]`` and ``allowed`` cells of one row of :func:`probe_effects` (a dash where the probe
    has no check or its value is undefined)."""
    name = r["probe"]
    if name in INVARIANCES:
        shown = (format_interval(r["check_value"], r["check_low"], r["check_high"])
                 if pd.notna(r["check_value"]) else MISSING)
        allowed = f"≤ {_cell(r['tolerance'], 'proportion')}" if pd.notna(r["tolerance"]) else MISSING
    elif name == "label-swap":
        shown = _cell(r["accuracy_probe"], "proportion")
        allowed = f"= {_cell(r['expected'], 'proportion')}" if pd.notna(r["expected"]) else MISSING
    elif name == "retest":
        shown = _score_cell(r["max_score_change"])
        allowed = f"≤ {_score_cell(r['threshold'])}" if pd.notna(r["threshold"]) else MISSING
    else:
        return MISSING, MISSING
    return (f"{MEASURED[name]} {shown}" if shown != MISSING else MISSING), allowed


def probe_table(effects: pd.DataFrame) -> pd.DataFrame:
    """:func:`probe_effects` as ``prb probe`` and page 05 show it, its check first (so that it prints on a narrow
    page): per model and probe the check (pass, fail, or n/a with the reason), what it measured against what it
    allows, the accuracies, the change with its interval and its Holm p (the families are named in
    :func:`probe_notes`) and the pairs.

    >>> eff = pd.DataFrame([{"model": "m", "probe": "label-swap", "base": "top3", "n_pairs": 4,
    ...     "inputs_changed": float("nan"), "accuracy_base": 0.75, "accuracy_probe": 0.25, "diff": float("nan"),
    ...     "ci_low": float("nan"), "ci_high": float("nan"), "p_holm": float("nan"), "family": "",
    ...     "no_verdict": "", "verdicts_kept": 0.0, "max_score_change": float("nan"), "threshold": float("nan"),
    ...     "expected": 0.25, "check": "pass"}])
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
    """The sentences under the probe tables: the rules of the probes in ``effects`` (the reading rule and the twin
    split with ``swap``, the checks with any other probe; all three when ``effects`` is empty) and every family.

    >>> len(probe_notes(pd.DataFrame(columns=EFFECT_COLUMNS)))
    3
    >>> probe_notes(pd.DataFrame({"probe": ["label-swap"], "base": "top3", "model": "m", "no_verdict": ""}))[0][:26]
    'Checks: shuffle passes whe'
    """
    names = set(effects["probe"]) if "probe" in effects.columns and len(effects) else set(PROBES)
    notes = [f"Rule: {READING_RULE}.", f"Twins: {TWIN_RULE}."] if "swap" in names else []
    notes += [f"Checks: {CHECK_RULE}."] if names - {"swap"} else []
    return notes + [f"Family {fam.say()}." for fam in probe_families(effects)]
