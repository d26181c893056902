"""Difficulty tiers and the pairs every RM fails, on a tiny store-shaped frame and the real sample."""

from __future__ import annotations

import pandas as pd
import pytest

from prb_utils.analysis.difficulty import TIERS, hardest_pairs, pair_difficulty, tier_counts
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError


def rows(outcomes: dict[str, list[str]], profile: str = "none") -> pd.DataFrame:
    return pd.DataFrame([{"model": f"m{j}", "profile": profile, "subset": "s", "id": pid, "outcome": o}
                         for pid, outs in outcomes.items() for j, o in enumerate(outs)])


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
    assert list(counts.columns) == ["profile", *TIERS]
    assert counts.iloc[0][list(TIERS)].tolist() == [1, 0, 0, 1]


def test_hardest_pairs_carry_question_and_aspects_from_the_data():
    data = load_benchmark("sample")
    first, second = data.iloc[0], data.iloc[1]
    frame = pd.DataFrame([
        {"model": m, "profile": "none", "subset": r["subset"], "id": r["id"], "outcome": o}
        for r, outs in ((first, ["wrong", "tie"]), (second, ["wrong", "correct"])) for m, o in zip("ab", outs, strict=True)])
    hard = hardest_pairs(frame, data)
    assert hard["id"].tolist() == [first["id"]]
    assert hard.loc[0, "question"] == first["question"]
    assert first["rubric_aspects"][0]["aspect"] in hard.loc[0, "rubric_aspects"]
    assert hardest_pairs(frame, data, min_rms=3).empty


def test_missing_columns_are_one_sentence():
    with pytest.raises(PRBError, match="outcome"):
        pair_difficulty(pd.DataFrame({"profile": [], "subset": [], "id": []}))
