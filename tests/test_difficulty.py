"""Difficulty tiers and the pairs every RM fails, on a tiny store-shaped frame and the real sample."""

from __future__ import annotations

import pandas as pd
import pytest

from prb_utils.analysis.difficulty import TIERS, hardest_pairs, pair_difficulty, tier_counts
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError


def rows(outcomes: dict[str, list[str]], profile: str = "none") -> pd.DataFrame:
    return pd.DataFrame([{"model": f"m{j}", "kind": "classifier", "profile": profile, "subset": "s", "id": pid,
                          "outcome": o} for pid, outs in outcomes.items() for j, o in enumerate(outs)])


def test_tiers_count_ties_and_invalid_as_not_correct():
    table = pair_difficulty(rows({"a": ["correct"] * 3, "b": ["correct", "correct", "tie"],
                                  "c": ["correct", "wrong", "invalid"], "d": ["wrong", "tie", "invalid"]}))
    assert table.set_index("id")["tier"].to_dict() == {
        "a": "every RM right", "b": "most RMs right", "c": "most RMs wrong", "d": "every RM wrong"}
    assert table["n"].tolist() == [3, 3, 3, 3] and table["correct"].tolist() == [3, 2, 1, 0]


def test_oracle_rows_are_left_out_unless_asked():
    frame = pd.concat([rows({"a": ["wrong", "wrong"]}), rows({"a": ["correct", "correct"]}, profile="rubric")])
    assert pair_difficulty(frame)["profile"].tolist() == ["none"]
    assert set(pair_difficulty(frame, include_oracle=True)["profile"]) == {"none", "rubric"}


def test_tier_counts_list_every_tier():
    counts = tier_counts(pair_difficulty(rows({"a": ["correct"], "b": ["wrong"]})))
    assert list(counts.columns) == ["profile", "n_rms", *TIERS]
    assert counts.iloc[0][list(TIERS)].tolist() == [1, 0, 0, 1] and counts.iloc[0]["n_rms"] == 1


def test_hardest_pairs_carry_question_and_aspects_from_the_data():
    data = load_benchmark("sample")
    first, second = data.iloc[0], data.iloc[1]
    frame = pd.DataFrame([
        {"model": m, "kind": "classifier", "profile": "none", "subset": r["subset"], "id": r["id"], "outcome": o}
        for r, outs in ((first, ["wrong", "tie"]), (second, ["wrong", "correct"])) for m, o in zip("ab", outs, strict=True)])
    hard = hardest_pairs(frame, data)
    assert hard["id"].tolist() == [first["id"]]
    assert hard.loc[0, "question"] == first["question"]
    assert first["rubric_aspects"][0]["aspect"] in hard.loc[0, "rubric_aspects"]
    assert hardest_pairs(frame, data, min_rms=3).empty


def test_missing_columns_are_one_sentence():
    with pytest.raises(PRBError, match="outcome"):
        pair_difficulty(pd.DataFrame({"profile": [], "subset": [], "id": []}))


def test_every_rm_leaves_out_baselines_and_position_locked_judges():
    from prb_utils.analysis.difficulty import counted_rms

    real = rows({"a": ["wrong", "wrong"], "b": ["correct", "correct"]})  # m0, m1: classifiers
    baseline = pd.DataFrame({"model": "length", "kind": "length", "profile": "none", "subset": "s",
                             "id": ["a", "b"], "outcome": ["correct", "wrong"]})
    # a judge that always says "A": right whenever the chosen answer is shown first, so right on both pairs
    judge = pd.DataFrame({"model": "judge:x", "kind": "judge", "profile": "none", "subset": "s", "id": ["a", "b"],
                          "outcome": "correct", "verdict_ab": "chosen", "verdict_ba": "rejected"})
    frame = pd.concat([real, baseline, judge], ignore_index=True)
    table = pair_difficulty(frame).set_index("id")
    assert table["n"].tolist() == [2, 2]  # the two classifiers only
    assert table["tier"].to_dict() == {"a": "every RM wrong", "b": "every RM right"}
    who = counted_rms(frame).set_index("model")
    assert who["reason"].to_dict() == {"judge:x": "position-locked judge", "length": "baseline", "m0": "", "m1": ""}
    assert tier_counts(pair_difficulty(frame))["n_rms"].tolist() == [2]
    every = pair_difficulty(frame, include_baselines=True, include_locked=True).set_index("id")
    assert every["n"].tolist() == [4, 4] and every.loc["a", "correct"] == 2  # the baseline and the judge
    assert hardest_pairs(frame, load_benchmark("sample").head(0), min_rms=2)["id"].tolist() == ["a"]
    assert tier_counts(pair_difficulty(baseline)).empty  # only a baseline: nothing to count
