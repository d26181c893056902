"""What the personalization probes found (:mod:`prb_utils.probes`): is the reward model reading *this* user?

Each probe job (condition ``<base>+<probe>``, e.g. ``top3+swap``) is compared with its base job (``top3``) on the
pairs both scored, by model, under the clustered paired test of every verdict (:func:`prb_utils.analysis.metrics.
compare` with ``units``). :func:`probe_effects` gives one row per model and probe; :func:`reading_verdicts` says,
per model, one verdict under :data:`READING_RULE`:

- *reads the user*: with another user's profile (``swap``) its accuracy drops, clearly (the clustered test,
  Holm-adjusted over the models, p < 0.05, and the drop's interval above 0);
- *reacts to any profile*: its verdicts move when the profile changes, but not toward the user's: no clear drop;
- *ignores the profile*: no verdict moves with another user's profile.

The invariances (``shuffle``, ``retest``) report the share of verdicts that stay and the largest score change;
``distract`` the accuracy drop [CI]; ``label-swap`` checks the harness (accuracy with the answers exchanged must
be 1 - accuracy - tie rate - invalid rate).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from prb_utils.analysis.leaderboard import ALPHA
from prb_utils.analysis.metrics import compare, holm, require_columns, unit_labels
from prb_utils.analysis.resampling import LEVEL, SEED
from prb_utils.probes import PROBES, twin_pairs

READING_VERDICTS = ("reads the user", "reacts to any profile", "ignores the profile")
READING_RULE = ("reads the user: with another user's profile (swap) the accuracy drops, its 95% interval over whole "
                "questions above 0 and the clustered paired test, Holm-adjusted over the models, p < 0.05; reacts to "
                "any profile: some verdicts move with the other profile but the accuracy does not clearly drop; "
                "ignores the profile: no verdict moves")
EFFECT_COLUMNS = ["model", "probe", "base", "n_pairs", "accuracy_base", "accuracy_probe", "diff", "ci_low", "ci_high",
                  "p_value", "p_holm", "verdicts_kept", "max_score_change", "twin_pairs", "twin_flips", "expected",
                  "check"]


def split_probe(condition: str) -> tuple[str, str | None]:
    """``(base, probe)`` of a condition label: ``top3+swap`` -> ``("top3", "swap")``; no probe -> None.

    >>> split_probe("top3+label-swap"), split_probe("full")
    (('top3', 'label-swap'), ('full', None))
    """
    base, _, name = str(condition).partition("+")
    return base, (name or None)


def _margins(rows: pd.DataFrame) -> pd.Series:
    return (pd.to_numeric(rows["score_chosen"], errors="coerce")
            - pd.to_numeric(rows["score_rejected"], errors="coerce"))


def probe_effects(results: pd.DataFrame, data: pd.DataFrame | None = None, *, units: str | None = "question",
                  n_boot: int | None = None, seed: int = SEED, level: float = LEVEL) -> pd.DataFrame:
    """One row per model and probe job found in ``results`` (columns :data:`EFFECT_COLUMNS`): the probe's accuracy
    against its base condition's on the same pairs (``diff`` = probe - base, clustered by ``units`` taken from
    ``data``), the share of pairs whose verdict (outcome) is kept, the largest |margin change| (not for
    ``label-swap``, whose margins are negated by construction), the twin pairs and how many of them flip (``swap``
    only; 0 for the other probes), and for ``label-swap`` the ``expected`` accuracy (1 - accuracy - tie rate -
    invalid rate of the base) and whether the probe matches it (``check``). ``p_holm`` runs over the rows of one
    probe."""
    require_columns(results, ["model", "profile", "subset", "id", "outcome"])
    labels = results["profile"].astype(str).map(split_probe)
    probes = sorted({p for _, p in labels if p})
    twins = twin_pairs(data) if data is not None and {"question", "chosen", "rejected"} <= set(data.columns) else {}
    rows = []
    for name in probes:
        for (model, base), _ in results[labels.map(lambda bp, n=name: bp[1] == n)].groupby(
                ["model", labels.map(lambda bp: bp[0])], sort=True):
            pair = results[(results["model"] == model) & results["profile"].astype(str).isin([base, f"{base}+{name}"])]
            if base not in set(pair["profile"].astype(str)):
                continue
            pair = pair.assign(_unit=unit_labels(pair, data, units or "pair").to_numpy())
            test = compare(pair.assign(profile=pair["profile"].astype(str)), "profile", baseline=base, by=["model"],
                           units="_unit", n_boot=n_boot, seed=seed, level=level).iloc[0]
            wide = pair.pivot_table(index=["subset", "id"], columns="profile", values="outcome", aggfunc="first")
            both = wide.dropna()
            kept = float((both[base] == both[f"{base}+{name}"]).mean()) if len(both) else np.nan
            margins = pair.assign(_m=_margins(pair)).pivot_table(index=["subset", "id"], columns="profile",
                                                                 values="_m", aggfunc="first").dropna()
            # the margins of label-swap are the base's negated: no change to measure there
            change = (float((margins[f"{base}+{name}"] - margins[base]).abs().max())
                      if len(margins) and name != "label-swap" else np.nan)
            on_twins = [k for k in both.index if (str(k[0]), str(k[1])) in twins] if name == "swap" else []
            flips = int(sum(both.loc[k, base] != both.loc[k, f"{base}+{name}"] for k in on_twins))
            expected, check = np.nan, ""
            if name == "label-swap":
                base_rows = pair[pair["profile"].astype(str) == base]
                expected = float((base_rows["outcome"] == "wrong").mean())
                check = "holds" if abs(test["accuracy_b"] - expected) < 1e-12 else (
                    f"differs: {test['accuracy_b']:.3f} against {expected:.3f}")
            rows.append({"model": model, "probe": name, "base": base, "n_pairs": int(test["n_pairs"]),
                         "accuracy_base": test["accuracy_a"], "accuracy_probe": test["accuracy_b"],
                         "diff": test["diff"], "ci_low": test["ci_low"], "ci_high": test["ci_high"],
                         "p_value": test["p_value"], "verdicts_kept": kept, "max_score_change": change,
                         "twin_pairs": len(on_twins), "twin_flips": flips, "expected": expected, "check": check})
    out = pd.DataFrame(rows, columns=[c for c in EFFECT_COLUMNS if c != "p_holm"])
    out["p_holm"] = np.nan
    for name in probes:
        mine = out["probe"] == name
        out.loc[mine, "p_holm"] = holm(out.loc[mine, "p_value"].to_numpy(dtype=float))
    return out[EFFECT_COLUMNS]


def reading_verdict(row: pd.Series | dict, *, alpha: float = ALPHA) -> str:
    """The verdict of one ``swap`` row of :func:`probe_effects` under :data:`READING_RULE`.

    >>> reading_verdict({"diff": -0.3, "ci_high": -0.1, "p_holm": 0.01, "verdicts_kept": 0.6})
    'reads the user'
    >>> reading_verdict({"diff": 0.0, "ci_high": 0.1, "p_holm": 1.0, "verdicts_kept": 0.9})
    'reacts to any profile'
    >>> reading_verdict({"diff": 0.0, "ci_high": 0.0, "p_holm": 1.0, "verdicts_kept": 1.0})
    'ignores the profile'
    """
    reads, reacts, ignores = READING_VERDICTS
    if row["diff"] < 0 and row["ci_high"] < 0 and row["p_holm"] < alpha:
        return reads
    return reacts if row["verdicts_kept"] < 1 else ignores


def reading_verdicts(effects: pd.DataFrame, *, models: Sequence[str] | None = None) -> pd.DataFrame:
    """Per model with a ``swap`` job: ``model, base, sensitivity`` (base accuracy minus swapped, with its interval),
    the twin flips and the verdict (:func:`reading_verdict`); "n/a" with the reason for a model without one."""
    swap = effects[effects["probe"] == "swap"]
    rows = []
    for r in swap.to_dict("records"):
        rows.append({"model": r["model"], "base": r["base"], "sensitivity": 0.0 - r["diff"],
                     "sensitivity_low": 0.0 - r["ci_high"], "sensitivity_high": 0.0 - r["ci_low"], "p_holm": r["p_holm"], "verdicts_kept": r["verdicts_kept"],
                     "twin_pairs": r["twin_pairs"], "twin_flips": r["twin_flips"], "verdict": reading_verdict(r)})
    for model in models or ():
        if model not in set(swap["model"]):
            rows.append({"model": model, "verdict": "n/a: no swap probe scored (prb probe --probe swap)"})
    columns = ["model", "base", "sensitivity", "sensitivity_low", "sensitivity_high", "p_holm", "verdicts_kept",
               "twin_pairs", "twin_flips", "verdict"]
    return pd.DataFrame(rows, columns=columns)


def probe_expectations() -> pd.DataFrame:
    """Each probe's change and expected behaviour (:data:`prb_utils.probes.PROBES`), for a page's table."""
    return pd.DataFrame([{"probe": p.name, "changes": p.changes, "expected": p.expected} for p in PROBES.values()])
