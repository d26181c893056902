"""Style-controlled accuracy, checked against statsmodels on planted stores: an RM that follows length only
and one that follows the user only."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm

from prb_utils.analysis.style import profile_overlap, style_controlled_accuracy, style_features
from prb_utils.schema import stable_hash

N = 240


def planted(rule: str, seed: int = 0) -> pd.DataFrame:
    """N pairs of N/2 questions; the RM is right when the chosen answer is longer (``length``) or on a fixed 75%
    of pairs whatever their style (``user``)."""
    rng = np.random.default_rng(seed)
    length = rng.normal(size=N)
    overlap = rng.normal(size=N)
    right = length > 0 if rule == "length" else rng.random(N) < 0.75
    return pd.DataFrame({"model": rule, "profile": "none", "subset": "s", "id": [str(i) for i in range(N)],
                         "question": np.arange(N) // 2, "outcome": np.where(right, "correct", "wrong"),
                         "length_diff": length, "overlap_diff": overlap})


@pytest.mark.parametrize("rule", ["length", "user"])
def test_controlled_accuracy_is_statsmodels_clustered_ols_at_zero_style_difference(rule):
    rows = planted(rule)
    out = style_controlled_accuracy(rows).iloc[0]
    x = sm.add_constant(rows[["length_diff", "overlap_diff"]] / rows[["length_diff", "overlap_diff"]].std(ddof=0))
    fit = sm.OLS((rows["outcome"] == "correct").astype(float), x).fit(cov_type="cluster",
                                                                       cov_kwds={"groups": rows["question"]})
    assert out["controlled"] == pytest.approx(fit.params["const"])
    assert (out["controlled_low"], out["controlled_high"]) == pytest.approx(tuple(fit.conf_int().loc["const"]))
    assert out["length_coef"] == pytest.approx(fit.params["length_diff"])
    if rule == "length":   # all of its accuracy is style: at zero length difference it is a coin
        assert abs(out["controlled"] - 0.5) < 0.1 and out["length_low"] > 0.2
    else:                  # none of it is: the controlled accuracy is its accuracy
        assert abs(out["controlled"] - out["accuracy"]) < 0.05 and out["length_low"] < 0 < out["length_high"]


def test_style_controlled_accuracy_says_n_a_with_its_reason():
    rows = planted("user")
    few = style_controlled_accuracy(rows.head(10)).iloc[0]
    assert few["note"].startswith("n/a: too few pairs") and np.isnan(few["controlled"])
    flat = style_controlled_accuracy(rows.assign(length_diff=0.0, overlap_diff=0.0)).iloc[0]
    assert flat["note"] == "n/a: no style difference varies between the pairs"
    one = style_controlled_accuracy(rows.assign(outcome="correct")).iloc[0]
    assert one["note"] == "n/a: one outcome only"


def test_style_features_come_from_the_records():
    data = pd.DataFrame({"subset": "s", "id": ["1"], "question": ["q"], "chosen": ["Bake bread slowly"],
                         "rejected": ["Go outside"], "profile": [[{"text": "I bake bread"}]]})
    features = style_features(data).iloc[0]
    assert features["length_diff"] == len("Bake bread slowly") - len("Go outside")
    assert features["overlap_diff"] == pytest.approx(profile_overlap("Bake bread slowly", ["I bake bread"]) - 0.0)
    assert features["question"] == stable_hash("q")   # the question's unit key, hashed as the store keys it
