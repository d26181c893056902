"""Style-controlled accuracy: does a reward model follow the user, or the answers' style?

A pair's chosen and rejected answers can differ in style as well as in what the user asked for: length, and how
many of the user's own profile words they repeat. A model that prefers longer or more profile-worded answers
scores above chance on pairs where the chosen answer happens to be longer or more profile-worded, without
reading the user. :func:`style_controlled_accuracy` fits, per model and condition, a linear probability model of
"correct" on the two standardized style differences (chosen minus rejected: characters, and the share of the
answer's content words found in the user's profile posts) with standard errors clustered by question
(statsmodels OLS, ``cov_type="cluster"``), and reports:

- ``controlled``: the fitted accuracy at zero style difference (the intercept) with its 95% interval: what the
  model would score if chosen and rejected were alike in style;
- ``length_coef`` / ``overlap_coef``: the change in accuracy per standard deviation of each difference;
- ``note``: "n/a: <reason>" where a model is not defined (too few pairs, no varying feature, one outcome).

A model that follows length only has ``controlled`` near 0.5 and a large ``length_coef``; one that follows the
rubric only keeps its accuracy. A linear probability model stays defined where a logistic one separates
perfectly (the ``length`` baseline is right exactly when the chosen answer is longer).

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> d = rng.normal(size=200)
    >>> rows = pd.DataFrame({"model": "length", "profile": "none", "question": np.arange(200) // 2,
    ...                      "outcome": np.where(d > 0, "correct", "wrong"), "length_diff": d,
    ...                      "overlap_diff": rng.normal(size=200)})
    >>> out = style_controlled_accuracy(rows)
    >>> bool(abs(out["controlled"].iloc[0] - 0.5) < 0.1), bool(out["length_coef"].iloc[0] > 0.3)
    (True, True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import statsmodels.api as sm

from prb_utils.analysis.features import char_count
from prb_utils.analysis.metrics import MIN_PAIRS, as_list, question_units, require_columns
from prb_utils.analysis.resampling import LEVEL
from prb_utils.bm25 import tokenize

FEATURES = ("length_diff", "overlap_diff")
STYLE_COLUMNS = ["n", "n_questions", "accuracy", "controlled", "controlled_low", "controlled_high", "length_coef",
           "length_low", "length_high", "overlap_coef", "overlap_low", "overlap_high", "note"]


def profile_overlap(answer: str, posts: Sequence[str]) -> float:
    """The share of ``answer``'s content words that occur in the user's ``posts`` (0 for an empty answer).

    >>> profile_overlap("Bake bread slowly at home", ["How do I bake sourdough bread?"])
    0.5
    """
    words = tokenize(answer)
    if not words:
        return 0.0
    seen = {w for post in posts for w in tokenize(post)}
    return sum(w in seen for w in words) / len(words)


def style_features(data: pd.DataFrame) -> pd.DataFrame:
    """Per pair of ``data``: ``subset, id, question, length_diff`` (characters, chosen minus rejected) and
    ``overlap_diff`` (:func:`profile_overlap`, chosen minus rejected, over every profile post)."""
    require_columns(data, ["subset", "id", "chosen", "rejected"], what="benchmark")
    posts = [[str(p.get("text", "")) for p in (profile or []) if isinstance(p, dict)]
             for profile in (data["profile"] if "profile" in data else [[]] * len(data))]
    return pd.DataFrame({
        "subset": data["subset"].astype(str).to_numpy(), "id": data["id"].astype(str).to_numpy(),
        "question": question_units(data, data).to_numpy(),
        "length_diff": [char_count(c) - char_count(r) for c, r in zip(data["chosen"], data["rejected"], strict=True)],
        "overlap_diff": [profile_overlap(c, p) - profile_overlap(r, p)
                         for c, r, p in zip(data["chosen"], data["rejected"], posts, strict=True)],
    })


def _fit(group: pd.DataFrame, level: float) -> dict:
    """One model and condition's linear probability model, or its n/a reason."""
    y = (group["outcome"] == "correct").to_numpy(float)
    out: dict = {"n": len(group), "n_questions": int(group["question"].nunique()),
                 "accuracy": float(y.mean()) if len(y) else np.nan}
    varying = [f for f in FEATURES if group[f].std(ddof=0) > 0]
    if len(group) < MIN_PAIRS:
        return {**out, "note": f"n/a: too few pairs ({len(group)} < {MIN_PAIRS})"}
    if not varying:
        return {**out, "note": "n/a: no style difference varies between the pairs"}
    if y.min() == y.max():
        return {**out, "note": "n/a: one outcome only"}
    if out["n_questions"] < 2:
        return {**out, "note": "n/a: one question only (no clustered error)"}
    # centred on zero *difference*, not on the mean: the intercept is the accuracy where chosen and rejected
    # are alike in style; the scale is the difference's standard deviation
    x = pd.DataFrame({f: group[f] / group[f].std(ddof=0) for f in varying})
    fit = sm.OLS(y, sm.add_constant(x, has_constant="add")).fit(
        cov_type="cluster", cov_kwds={"groups": pd.factorize(group["question"])[0]})
    bounds = fit.conf_int(alpha=1 - level)
    out.update(controlled=float(fit.params["const"]), controlled_low=float(bounds.loc["const", 0]),
               controlled_high=float(bounds.loc["const", 1]), note=None)
    for feature, name in (("length_diff", "length"), ("overlap_diff", "overlap")):
        if feature in varying:
            out.update({f"{name}_coef": float(fit.params[feature]), f"{name}_low": float(bounds.loc[feature, 0]),
                        f"{name}_high": float(bounds.loc[feature, 1])})
    return out


def style_controlled_accuracy(results: pd.DataFrame, data: pd.DataFrame | None = None, *,
                              by: str | Sequence[str] = ("model", "profile"), level: float = LEVEL) -> pd.DataFrame:
    """Per group of ``by``: columns ``*by`` then :data:`STYLE_COLUMNS` (see the module). ``results`` carries
    ``length_diff``, ``overlap_diff`` and ``question`` already, or ``data`` (the benchmark records) supplies
    them (:func:`style_features`). Invalid rows are left out; ties count as not correct, as in accuracy."""
    by = as_list(by)
    if data is not None:
        keep = [c for c in results.columns if c not in (*FEATURES, "question")]
        results = results[keep].assign(subset=results["subset"].astype(str), id=results["id"].astype(str)).merge(
            style_features(data), on=["subset", "id"], how="left")
    require_columns(results, [*by, "outcome", "question", *FEATURES])
    rows = results[(results["outcome"] != "invalid") & results[list(FEATURES)].notna().all(axis=1)]
    fitted = [{**dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)), **_fit(group, level)}
              for key, group in rows.groupby(by, sort=True, observed=True)]
    return pd.DataFrame(fitted).reindex(columns=[*by, *STYLE_COLUMNS])
