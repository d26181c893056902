"""Breakdowns of prb_utils.analysis.breakdowns on a synthetic benchmark whose answers are known by construction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from prb_utils.analysis.breakdowns import (
    by_aspect_count,
    by_category,
    by_inferability,
    by_rubric_inferable,
    by_theme,
    judge_order,
    left_out_categories,
    length_bias,
    locked_warnings,
    longer_wins,
    margin_summary,
    position_locked,
    score_margins,
)
from prb_utils.analysis.features import aspect_table, pair_features
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.scoring import score_benchmark

# pair: (aspects, profile post, chosen characters, rejected characters, rubric_inferable)
# inferability by construction: p1, p2 = 0; p3, p4 = 1/2; p5, p6 = 1
PAIRS = {
    "p1": (["Uses an encouraging tone"], "Gardening help", 40, 10, False),
    "p2": (["Gives a short bulleted checklist"], "Fishing trip", 10, 40, False),
    "p3": (["Cheap travel"], "cheap flights", 8, 8, True),
    "p4": (["Mentions safety risks", "Cheap travel"], "safety cheap", 150, 10, True),
    "p5": (["Explains the underlying science"], "Explains the underlying science please", 10, 150, True),
    "p6": (["History of jazz", "Jazz records", "Jazz clubs", "Jazz tone", "Jazz sources"],
           "history of jazz records clubs tone sources", 7, 7, True),
}


@pytest.fixture
def data() -> pd.DataFrame:
    records = []
    for pid, (aspects, post, n_chosen, n_rejected, inferable) in PAIRS.items():
        records.append({
            "subset": "s", "id": pid, "question": "q?", "category": "c", "narrative": "n",
            "profile": [{"id": f"{pid}-1", "category": "c", "text": post}],
            "rubric_aspects": [{"aspect": a, "evidence": "e", "reason": "r"} for a in aspects],
            "chosen": "c" * n_chosen, "rejected": "r" * n_rejected,
            "rubric_inferable": inferable,
        })
    return pd.DataFrame(records)


def results_for(model: str, outcomes: list[str], *, profile: str = "none") -> pd.DataFrame:
    return pd.DataFrame({"model": model, "kind": "k", "profile": profile, "subset": "s", "category": "c",
                         "id": list(PAIRS), "outcome": outcomes, "score_chosen": np.nan,
                         "score_rejected": np.nan, "verdict_ab": None, "verdict_ba": None})


@pytest.fixture
def results() -> pd.DataFrame:
    return pd.concat([
        results_for("m", ["wrong", "wrong", "correct", "tie", "correct", "correct"]),
        results_for("length", ["correct", "wrong", "tie", "correct", "wrong", "tie"]),  # longer wins
    ], ignore_index=True)


def acc(table: pd.DataFrame, model: str, column: str) -> dict:
    part = table[table["model"] == model]
    return {str(k): (int(c), int(n)) for k, c, n in zip(part[column], part["correct"], part["n"], strict=True)}


def test_pair_features(data):
    feats = pair_features(data).set_index("id")
    assert feats["inferability"].tolist() == [0, 0, 0.5, 0.5, 1, 1]
    assert feats["inferability_bin"].astype(str).tolist() == ["low", "low", "medium", "medium", "high", "high"]
    assert feats["n_aspects"].tolist() == [1, 1, 1, 2, 1, 5]
    assert feats["aspects_bin"].astype(str).tolist() == ["1", "1", "1", "2", "1", "5+"]
    assert feats["length_diff_chars"].tolist() == [30, -30, 0, 140, -140, 0]
    assert feats["length_bin"].astype(str).tolist() == ["21..60", "-60..-21", "-20..20", ">=121", "<=-121",
                                                        "-20..20"]
    assert feats["rubric_inferable"].tolist() == [False, False, True, True, True, True]
    assert "rubric_inferable" not in pair_features(data.drop(columns="rubric_inferable"))
    bare = pair_features(data.drop(columns=["rubric_aspects", "profile"]))
    assert bare["aspects_bin"].astype(str).tolist() == ["0"] * 6 and bare["inferability"].isna().all()


def test_by_aspect_count(results, data):
    table = by_aspect_count(results, data)
    assert acc(table, "m", "aspects_bin") == {"1": (2, 4), "2": (0, 1), "5+": (1, 1)}
    assert table["aspects_bin"].cat.ordered


def test_by_theme_counts_a_pair_in_each_of_its_themes(results, data):
    themes = aspect_table(data)
    assert themes[themes["id"] == "p6"]["theme"].astype(str).tolist() == ["other"] * 3 + ["tone", "sources"]
    table = by_theme(results, data)
    assert acc(table, "m", "theme") == {
        "tone": (1, 2), "depth": (1, 1), "sources": (1, 1), "budget": (1, 2), "safety": (0, 1),
        "format": (0, 1), "other": (1, 1)}
    assert table[table.model == "m"]["theme"].astype(str).tolist() == [
        "tone", "depth", "sources", "budget", "safety", "format", "other"]


def test_by_inferability_and_rubric_inferable(results, data):
    table = by_inferability(results, data)
    assert acc(table, "m", "inferability_bin") == {"low": (0, 2), "medium": (1, 2), "high": (2, 2)}
    assert table[table.model == "m"]["inferability_mean"].tolist() == [0.0, 0.5, 1.0]
    no_rubric = data.assign(rubric_aspects=[[]] + data["rubric_aspects"].tolist()[1:])  # p1 loses its rubric
    assert by_inferability(results, no_rubric)["n"].sum() == 10  # p1 left out for both models
    flag = by_rubric_inferable(results, data)
    assert acc(flag, "m", "rubric_inferable") == {"False": (0, 2), "True": (3, 4)}
    with pytest.raises(PRBError, match="rubric_inferable"):
        by_rubric_inferable(results, data.drop(columns="rubric_inferable"))


def test_length_bias_and_longer_wins(results, data):
    table = length_bias(results, data, by="model")
    got = table[table.model == "length"].set_index("length_bin")
    assert got.loc["<=-121", "accuracy"] == 0 and got.loc[">=121", "accuracy"] == 1
    assert got.loc["-20..20", ["n", "ties"]].tolist() == [2, 2]
    assert got["mean_diff_chars"].tolist() == [-140, -30, 0, 30, 140]
    wins = longer_wins(results, data).set_index("model")
    assert wins.loc["length", ["n", "longer_wins", "rate"]].tolist() == [4, 4, 1.0]
    # m: p1 picks the shorter, p2 the longer, p5 the shorter; p4 (tie) and p3/p6 (equal length) left out
    assert wins.loc["m", ["n", "longer_wins"]].tolist() == [3, 1]
    assert wins.loc["m", "chosen_longer_rate"] == pytest.approx(1 / 3)
    assert wins.loc["length", "chosen_longer_rate"] == pytest.approx(0.5)
    assert wins.loc["m", "ci_low"] < 1 / 3 < wins.loc["m", "ci_high"]


def test_the_length_baseline_always_prefers_the_longer_answer(tmp_path):
    """longer_wins counts what the length baseline scores (characters): on the sample (many pairs whose
    word and character counts disagree) the pure length RM prefers the longer answer in every pair."""
    data = load_benchmark("sample")
    results = score_benchmark(data, ["length"], ["none"], out=tmp_path, progress=False)
    feats = pair_features(data).set_index(["subset", "id"])
    scored = results.set_index(["subset", "id"])
    margin = scored["score_chosen"] - scored["score_rejected"]
    assert (np.sign(margin) == np.sign(feats.loc[margin.index, "length_diff_chars"])).all()
    wins = longer_wins(results, data)
    assert wins["n"].item() == int((feats["length_diff_chars"] != 0).sum()) > 30
    assert wins["rate"].item() == 1.0


def test_join_without_matches_is_a_user_error(results, data):
    with pytest.raises(PRBError, match="No result row"):
        by_aspect_count(results.assign(subset="other"), data)


def test_judge_order_statistics():
    res = results_for("judge:x", ["correct", "wrong", "wrong", "invalid", "tie", "tie"])
    res["verdict_ab"] = ["chosen", "chosen", "rejected", "invalid", None, None]
    res["verdict_ba"] = ["chosen", "rejected", "rejected", "chosen", None, None]
    other = results_for("length", ["correct"] * 6)  # no verdicts: not a judge, left out
    table = judge_order(pd.concat([res, other], ignore_index=True)).set_index("statistic")
    assert set(table["model"]) == {"judge:x"}
    assert table.loc["accuracy_ab", ["n", "value"]].tolist() == [4, 0.5]
    assert table.loc["accuracy_ba", ["n", "value"]].tolist() == [4, 0.5]
    assert table.loc["order_consistency", "n"] == 3
    assert table.loc["order_consistency", "value"] == pytest.approx(2 / 3)
    assert table.loc["position_a", "value"] == pytest.approx((0.5 + 1 + 0.5) / 3)
    assert (table["ci_low"] <= table["value"]).all() and (table["value"] <= table["ci_high"]).all()


def test_score_margins_standardized_per_model():
    a = results_for("a", ["correct", "wrong", "correct", "invalid", "correct", "correct"])
    a["score_chosen"] = [2.0, 0.0, 3.0, np.nan, 1.5, 1.0]
    a["score_rejected"] = [1.0, 1.0, 1.0, np.nan, 1.0, 1.0]
    b = a.assign(model="b", score_chosen=a["score_chosen"] * 100, score_rejected=a["score_rejected"] * 100)
    m = score_margins(pd.concat([a, b], ignore_index=True))
    assert len(m) == 10  # the invalid row of each model is left out
    assert m.groupby("model")["margin_std"].std().tolist() == pytest.approx([1.0, 1.0])
    assert m[m.model == "a"]["margin_std"].to_numpy() == pytest.approx(m[m.model == "b"]["margin_std"])
    assert (np.sign(m["margin"]) == np.sign(m["margin_std"])).all()
    summary = margin_summary(pd.concat([a, b], ignore_index=True)).set_index("model")
    assert summary.loc["a", "n"] == 5 and summary.loc["a", "positive"] == pytest.approx(3 / 5)



def judge_rows(model: str, ab: list, ba: list, *, profile: str = "none") -> pd.DataFrame:
    """Judge rows as the store holds them: both orders' verdicts and probabilities of the chosen answer."""
    p_ab = [{"chosen": 0.9, "rejected": 0.1}.get(v, np.nan) for v in ab]
    p_ba = [{"chosen": 0.9, "rejected": 0.1}.get(v, np.nan) for v in ba]
    mean = np.nanmean([p_ab, p_ba], axis=0)
    outcome = np.where(mean > 0.5, "correct", np.where(mean < 0.5, "wrong", "tie"))
    return pd.DataFrame({"model": model, "kind": "judge", "profile": profile, "subset": "s", "category": "c",
                         "id": [f"p{i}" for i in range(len(ab))], "score_chosen": mean, "score_rejected": 1 - mean,
                         "outcome": outcome, "invalid_reason": None, "verdict_ab": ab, "verdict_ba": ba,
                         "p_chosen_ab": p_ab, "p_chosen_ba": p_ba})


def test_position_locked_flags_judges_that_answer_by_position():
    always_a = judge_rows("judge:a", ["chosen"] * 10, ["rejected"] * 10)  # says "A" whatever the order
    fair = judge_rows("judge:fair", ["chosen"] * 6 + ["rejected"] * 4, ["chosen"] * 6 + ["rejected"] * 4)
    # picks by position per pair, "A" for half the pairs and "B" for the rest: balanced letters, consistency 0.2
    flippy = judge_rows("judge:flip", ["chosen"] * 4 + ["rejected"] * 4 + ["chosen", "rejected"],
                        ["rejected"] * 4 + ["chosen"] * 4 + ["chosen", "rejected"])
    # "B" in 18 of 20 verdicts but consistent on 2 of 10 pairs: flagged by the letter share (and consistency)
    mostly_b = judge_rows("judge:b", ["rejected"] * 9 + ["chosen"], ["chosen"] * 8 + ["rejected", "chosen"])
    baseline = results_for("length", ["correct"] * 6)  # no verdicts: not a judge, no row
    rows = pd.concat([always_a, fair, flippy, mostly_b, baseline], ignore_index=True)
    table = position_locked(rows, quote=lambda s: f"`{s}`").set_index("model")
    assert sorted(table.index) == ["judge:a", "judge:b", "judge:fair", "judge:flip"]
    assert table.loc["judge:a", ["order_consistency", "letter", "letter_share", "accuracy_ab", "accuracy_ba"]
                     ].tolist() == [0.0, "A", 1.0, 1.0, 0.0]
    assert table.loc["judge:fair", "order_consistency"] == 1.0 and table.loc["judge:fair", "letter_share"] == 0.5
    assert table.loc["judge:flip", ["order_consistency", "letter_share"]].tolist() == [pytest.approx(0.2), 0.5]
    assert table.loc["judge:b", "letter"] == "B" and table.loc["judge:b", "letter_share"] == pytest.approx(0.9)
    assert table["locked"].to_dict() == {"judge:a": True, "judge:b": True, "judge:fair": False, "judge:flip": True}
    warning = table.loc["judge:a", "warning"]
    assert "\n" not in warning and "`judge:a none`" in warning and '"A" in 100%' in warning
    assert "1.00 with the chosen answer as A, 0.00 as B" in warning
    assert table.loc["judge:fair", "warning"] == ""
    assert locked_warnings(table.reset_index(), ["judge:fair", "judge:a"]) == warning
    assert locked_warnings(table.reset_index()).count("Position-locked") == 3
    loose = position_locked(rows, min_consistency=0.1, max_letter_share=0.95).set_index("model")["locked"]
    assert loose.to_dict() == {"judge:a": True, "judge:b": False, "judge:fair": False, "judge:flip": False}
    assert position_locked(baseline).empty


def test_the_findings_never_rank_a_position_locked_judge_and_say_why_once():
    from prb_utils.analysis.findings import compute_findings
    from prb_utils.notebook.report import _findings_html

    rows = pd.concat([judge_rows("judge:a", ["chosen"] * 4, ["rejected"] * 4),
                      judge_rows("judge:fair", ["chosen"] * 4, ["chosen"] * 4)], ignore_index=True)
    found = compute_findings(rows, calibrate=False)
    board = found.board.set_index("model")
    assert bool(board.loc["judge:a", "locked"]) and np.isnan(board.loc["judge:a", "rank"])
    assert board.loc["judge:fair", "rank"] == 1 and board.loc["judge:a", "chance"] == ""
    assert [h["leaders"] for h in found.headline()] == [["judge:fair"]]
    page = _findings_html(found, {"01_pair_inspection": {"judge:fair", "judge:a"}})
    assert page.count("Position-locked judge judge:a") == 1  # its reason, once, under the table
    assert '<td data-label="model">judge:fair <span class="links">' in page


def test_by_category_orders_by_pairs_and_marks_the_small_ones():
    res = results_for("m", ["correct", "wrong", "correct", "correct", "wrong", "correct"])
    res["category"] = ["law", "pets", "law", "cooking", "cooking", "law"]
    table = by_category(pd.concat([res, res.assign(profile="top3")], ignore_index=True), min_pairs=2)
    assert table["category"].astype(str).tolist() == ["law", "law", "cooking", "cooking", "pets", "pets"]
    assert table["pairs"].tolist() == [3, 3, 2, 2, 1, 1]
    assert table["shown"].tolist() == [True, True, True, True, False, False]
    assert table.loc[0, ["n", "correct"]].tolist() == [3, 3]
    assert left_out_categories(table) == "pets (1)"
    capped = by_category(res, min_pairs=1, max_categories=1)
    assert capped.loc[capped["shown"], "category"].astype(str).tolist() == ["law"]
    assert left_out_categories(capped) == "cooking (2), pets (1)"
