"""The leaderboard: ranks, the group tied with the leader (checked against statsmodels' McNemar and Holm on a
planted store), lift verdicts, and position-locked judges never ranked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from prb_utils.analysis.leaderboard import leaderboard, leaderboard_notes
from prb_utils.analysis.uncertainty import ResamplingPlan

N = 40


def _rows(model: str, kind: str, profile: str, correct: np.ndarray, **extra) -> list[dict]:
    return [{"model": model, "kind": kind, "profile": profile, "subset": "s", "id": f"q{i}",
             "outcome": "correct" if c else "wrong", **extra} for i, c in enumerate(correct)]


def planted() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    a = rng.random(N) < 0.8
    b = a.copy()
    b[:4] = ~b[:4]                      # B differs from A on 4 pairs: tied
    c = rng.random(N) < 0.3             # C far below: not tied
    rows = (_rows("A", "classifier", "top3", a) + _rows("B", "embedding", "top3", b) + _rows("C", "length", "top3", c)
            + _rows("A", "classifier", "none", np.arange(N) < 5) + _rows("B", "embedding", "none", b)
            + _rows("C", "length", "none", c)
            + _rows("J", "judge", "top3", np.ones(N, bool), verdict_ab="chosen", verdict_ba="rejected"))
    return pd.DataFrame(rows)


def test_shared_ranks_follow_mcnemar_over_every_pair_with_holm():
    """Without units every pair is its own cluster: the clustered test is the exact McNemar test, Holm-adjusted
    over the condition's three pairs of models; rank = 1 + the models clearly better."""
    rows = planted()
    board = leaderboard(rows, n_boot=200).set_index(["profile", "model"])
    top3 = rows[rows["profile"] == "top3"].pivot(index="id", columns="model", values="outcome").eq("correct")
    raw = {}
    for first, other in (("A", "B"), ("A", "C"), ("B", "C")):
        table = pd.crosstab(top3[first], top3[other]).reindex(index=[False, True], columns=[False, True], fill_value=0)
        raw[first, other] = mcnemar(table.to_numpy(), exact=True).pvalue
    holm = dict(zip(raw, multipletests(list(raw.values()), method="holm")[1], strict=True))
    assert board.loc[("top3", "A"), "rank"] == 1 and board.loc[("top3", "A"), "tied_with_leader"]
    assert board.loc[("top3", "B"), "p_vs_leader"] == pytest.approx(holm["A", "B"], rel=1e-9)
    assert board.loc[("top3", "C"), "p_vs_leader"] == pytest.approx(holm["A", "C"], rel=1e-9)
    assert holm["A", "B"] >= 0.05 and board.loc[("top3", "B"), "rank"] == 1
    assert holm["A", "C"] < 0.05 and holm["B", "C"] < 0.05 and board.loc[("top3", "C"), "rank"] == 3
    assert not bool(board.loc[("top3", "C"), "tied_with_leader"])
    assert board.loc[("top3", "C"), "kind"] == "baseline"


def test_a_shared_rank_is_one_plus_the_models_clearly_better():
    """A > B > C, A and C clearly apart (12 pairs one way), B apart from neither (6 pairs one way each, Holm over
    three comparisons): A and B share rank 1 and C is rank 2, not 3 ("tied with the leader" is not transitive)."""
    n = 60
    a, b, c = (np.arange(n) < 48), (np.arange(n) < 42), (np.arange(n) < 36)
    rows = pd.DataFrame(_rows("A", "classifier", "none", a) + _rows("B", "classifier", "none", b)
                        + _rows("C", "classifier", "none", c))
    board = leaderboard(rows, n_boot=50).set_index("model")
    assert board["rank"].to_dict() == {"A": 1, "B": 1, "C": 2}
    assert board["tied_with_leader"].to_dict() == {"A": True, "B": True, "C": False}


def test_no_model_outranks_a_more_accurate_one():
    n = 60
    a = np.arange(n) < 48
    c = np.arange(n) < 24
    rows = pd.DataFrame(_rows("A", "classifier", "none", a) + _rows("C", "classifier", "none", c)
                        + _rows("D", "classifier", "none", c[::-1]) + _rows("E", "classifier", "none", np.arange(n) < 23))
    board = leaderboard(rows, n_boot=50).set_index("model")
    ordered = board.sort_values("accuracy", ascending=False)["rank"].tolist()
    assert ordered == sorted(ordered)


def test_clustering_by_question_widens_what_counts_as_clearly_better():
    """The same outcomes, each question asked for four users with the same result: clustered by question the
    evidence is ten questions, not forty pairs, and the two models can no longer be told apart."""
    a = np.repeat(np.arange(10) < 9, 4)
    b = np.repeat(np.arange(10) < 5, 4)
    rows = pd.DataFrame(_rows("A", "classifier", "none", a) + _rows("B", "classifier", "none", b))
    rows["question"] = [f"question {int(i[1:]) // 4}" for i in rows["id"]]
    pairs = leaderboard(rows, n_boot=50).set_index("model")
    questions = leaderboard(rows, units="question", n_boot=200).set_index("model")
    assert pairs.loc["B", "rank"] == 2 and questions.loc["B", "rank"] == 1
    assert questions.loc["B", "p_vs_leader"] > pairs.loc["B", "p_vs_leader"]
    assert questions.loc["B", "ci_high"] - questions.loc["B", "ci_low"] > pairs.loc["B", "ci_high"] - pairs.loc["B", "ci_low"]


def test_a_position_locked_judge_is_never_ranked_first_and_says_why():
    board = leaderboard(planted(), n_boot=200)
    judge = board[board["model"] == "J"].iloc[0]
    assert judge["accuracy"] == 1.0 and judge["locked"] and np.isnan(judge["rank"]) and not judge["tied_with_leader"]
    assert board[board["profile"] == "top3"]["model"].tolist()[-1] == "J"   # listed last
    assert any("Position-locked" in note for note in leaderboard_notes(board))


def test_the_lift_verdict_follows_its_stated_rule():
    board = leaderboard(planted(), n_boot=500).set_index(["profile", "model"])
    a = board.loc[("top3", "A")]
    assert a["lift"] > 0.5 and a["lift_low"] > 0 and a["lift_verdict"] == "helps"
    assert board.loc[("top3", "B"), "lift"] == 0 and board.loc[("top3", "B"), "lift_verdict"] == "inconclusive"
    assert board.loc[("none", "A"), "lift_verdict"] == ""   # the baseline condition has no lift


def test_the_index_shows_the_findings_with_their_rules_and_greys_a_locked_judge():
    from prb_utils.analysis.findings import compute_findings
    from prb_utils.notebook.report import _findings_html

    found = compute_findings(planted(), calibrate=False, plan=ResamplingPlan(n_boot=200))
    page = _findings_html(found, {"01_pair_inspection": set(found.board["model"])})
    assert 'class="prb-board"' in page and page.count('<tr class="locked">') == 1
    locked_row = page[page.index('<tr class="locked">'):].split("</tr>")[0]
    assert '<td data-label="rank"><b>—</b></td><td data-label="model">J ' in locked_row
    assert "position-locked: not ranked" in locked_row
    assert "Shared rank: 1 + the number of models clearly more accurate" in page
    assert "Helps: the lift over none" in page and "<span class=\"verdict\">helps</span>" in page
    for sentence in found.headline():
        assert sentence["sentence"] in page


def _discordant_store(questions: int = 30) -> pd.DataFrame:
    """The tester's planted store: A right on 45 of 60 pairs, B on 37, every discordant pair favouring A, and C
    exactly as accurate as B but on other pairs (C does not separate from A); two pairs per question."""
    n = 2 * questions
    a = np.arange(n) < 45
    b = a & ~((np.arange(n) % 2 == 0) & (np.arange(n) < 16))   # wrong where A is right on 8 pairs, 8 questions
    c = np.zeros(n, bool)
    c[:30] = True
    c[45:52] = True        # 37 right: 30 shared with A, 7 where A is wrong; A alone right on 15
    rows = pd.DataFrame(_rows("A", "classifier", "none", a) + _rows("B", "classifier", "none", b)
                        + _rows("C", "classifier", "none", c))
    rows["question"] = [f"q{int(i[1:]) // 2}" for i in rows["id"]]
    return rows


def _check_ranks_say_one_thing(board: pd.DataFrame) -> None:
    ranked = board[board["rank"].notna()]
    for r in ranked.itertuples():
        assert r.rank_low <= r.rank <= r.rank_high, (r.model, r.rank, r.rank_low, r.rank_high)
        if np.isfinite(r.p_vs_leader) and r.p_vs_leader < 0.05:
            assert not r.tied_with_leader and r.rank > 1, (r.model, r.p_vs_leader)
        if r.tied_with_leader:
            assert r.rank == 1


def test_a_model_the_test_separates_from_the_leader_is_never_tied_with_it():
    """The planted store of the issue: B and C have the same accuracy, A clearly beats B and not C; B must not be
    "tied with the leader" beside its p < 0.05 (equal accuracies no longer lend each other rank 1)."""
    rows = _discordant_store()
    board = leaderboard(rows, units="question").set_index("model")
    assert board.loc["A", "accuracy"] == 45 / 60
    assert board.loc["B", "accuracy"] == board.loc["C", "accuracy"] == 37 / 60
    assert board.loc["B", "p_vs_leader"] < 0.05 <= board.loc["C", "p_vs_leader"]
    assert board.loc["B", "rank"] == 2 and not board.loc["B", "tied_with_leader"]
    assert board.loc["C", "rank"] == 1 and board.loc["C", "tied_with_leader"]
    _check_ranks_say_one_thing(board.reset_index())


@pytest.mark.parametrize("seed", range(12))
def test_ranks_lie_in_their_ranges_and_ties_agree_with_the_tests(seed):
    """Random stores of 3-6 models under two conditions: every shared rank lies in its own range, and no row says
    tied beside a test against the leader that clears."""
    rng = np.random.default_rng(seed)
    n_models, n = int(rng.integers(3, 7)), 40
    base = rng.random(n) < 0.6
    rows = []
    for m in range(n_models):
        for profile in ("none", "top3"):
            flip = rng.random(n) < rng.uniform(0.05, 0.5)
            rows += _rows(f"m{m}", "classifier", profile, base ^ flip)
    frame = pd.DataFrame(rows)
    frame["question"] = [f"q{int(i[1:]) // 3}" for i in frame["id"]]
    _check_ranks_say_one_thing(leaderboard(frame, units="question", n_boot=100))


def test_rank_ranges_come_from_the_same_tests_as_the_ranks():
    """A model right everywhere is clearly better than two that trade places: its range is 1-1, theirs 2-3."""
    a = np.tile([1, 1, 0, 0], 10).astype(bool)
    b = np.tile([0, 0, 1, 1], 10).astype(bool)
    rows = pd.DataFrame(_rows("A", "classifier", "none", a) + _rows("B", "classifier", "none", b)
                        + _rows("T", "classifier", "none", np.ones(40, bool)))
    board = leaderboard(rows, n_boot=100).set_index("model")
    assert board.loc["T", ["rank", "rank_low", "rank_high"]].tolist() == [1, 1, 1]
    assert board.loc["A", ["rank", "rank_low", "rank_high"]].tolist() == [2, 2, 3]
    assert board.loc["B", ["rank", "rank_low", "rank_high"]].tolist() == [2, 2, 3]


def test_a_locked_judge_is_no_member_of_the_family_of_lifts():
    """The lift family holds the lifts that can get a verdict: adding a position-locked judge (and a profile-blind
    baseline) changes no other model's adjusted p, and the family names them as left out."""
    from prb_utils.analysis.leaderboard import rank_board

    rng = np.random.default_rng(3)
    none, top3 = rng.random(N) < 0.45, rng.random(N) < 0.75
    reader = pd.DataFrame(_rows("E", "embedding", "none", none) + _rows("E", "embedding", "top3", top3))
    judge = pd.DataFrame(_rows("J", "judge", "none", rng.random(N) < 0.5, verdict_ab="chosen", verdict_ba="rejected")
                         + _rows("J", "judge", "top3", rng.random(N) < 0.6, verdict_ab="chosen",
                                 verdict_ba="chosen"))
    blind = pd.DataFrame(_rows("L", "length", "none", none) + _rows("L", "length", "top3", none))
    alone = rank_board(reader, n_boot=100)
    board = rank_board(pd.concat([reader, judge, blind], ignore_index=True), n_boot=100)
    family = board.families["lifts of top3 over none"]
    assert family.members == ("E",) and alone.families["lifts of top3 over none"].tests == family.tests == 1
    left = dict(family.left_out)
    assert "position-locked" in left["J"] and left["L"] == "never reads the profile"
    both = board.frame.set_index(["model", "profile"])
    assert both.loc[("J", "top3"), "lift_verdict"] == ""
    assert both.loc[("E", "top3"), "lift_verdict"] == alone.frame.set_index(["model", "profile"]).loc[
        ("E", "top3"), "lift_verdict"]
