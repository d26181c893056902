"""The findings layer: every verdict computed once (ranks, chance, lifts, calibration, locks, oracle), its rules
as data, and the clustered paired test it uses, checked against the exact McNemar test and by construction."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from prb_utils.analysis.calibration import VOTES_REASON
from prb_utils.analysis.findings import LOCKED_REASON, compute_findings, oracle_gaps
from prb_utils.analysis.leaderboard import RULES, chance_verdict
from prb_utils.analysis.metrics import mcnemar_exact
from prb_utils.analysis.resampling import clustered_paired_test, sign_flip_p
from prb_utils.analysis.uncertainty import ResamplingPlan

N = 24


@pytest.mark.parametrize(("a_only", "b_only"), [(0, 0), (2, 9), (5, 5), (0, 7), (13, 4)])
def test_with_one_pair_per_cluster_the_sign_flip_test_is_the_exact_mcnemar_test(a_only, b_only):
    a = [1] * a_only + [0] * b_only + [1, 0, 1]
    b = [0] * a_only + [1] * b_only + [1, 0, 1]
    assert clustered_paired_test(a, b) == pytest.approx(mcnemar_exact(a_only, b_only), rel=1e-12)


def test_the_sign_flip_p_value_enumerates_every_flip():
    d = [3, -1, 2, 2, 0, 1]
    flips = np.array(np.meshgrid(*[[-1, 1]] * 5)).reshape(5, -1).T
    sums = np.abs(flips @ np.array([3, -1, 2, 2, 1]))
    assert sign_flip_p(d) == pytest.approx(np.mean(sums >= abs(sum(d))))


def test_clustering_makes_the_paired_test_honest_about_repeated_questions():
    """Ten questions, four users each, all four with the same outcome: the unclustered test sees 16 discordant
    pairs, the clustered one 4 discordant questions."""
    a = np.repeat([1, 1, 1, 1, 0, 0, 0, 0, 0, 0], 4)
    b = np.repeat([0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 4)
    units = np.repeat(np.arange(10), 4)
    assert clustered_paired_test(a, b) == pytest.approx(mcnemar_exact(16, 0))
    assert clustered_paired_test(a, b, units) == pytest.approx(0.125)


def _scored(model: str, kind: str, profile: str, margin: np.ndarray, **extra) -> pd.DataFrame:
    outcome = np.where(margin > 0, "correct", np.where(margin < 0, "wrong", "tie"))
    return pd.DataFrame({"model": model, "kind": kind, "profile": profile, "subset": "s",
                         "id": [f"p{i}" for i in range(len(margin))], "score_chosen": margin,
                         "score_rejected": np.zeros(len(margin)), "outcome": outcome, **extra})


def mixed_store() -> tuple[pd.DataFrame, pd.DataFrame]:
    """A classifier and an embedding (two conditions each), a position-locked judge and a generate-mode judge,
    24 pairs of 12 questions (two users each)."""
    rng = np.random.default_rng(3)
    data = pd.DataFrame({"subset": "s", "id": [f"p{i}" for i in range(N)],
                         "question": [f"question {i // 2}" for i in range(N)]})
    frames = []
    for profile in ("none", "top3"):
        frames.append(_scored("classifier:rm", "classifier", profile, rng.normal(0.8, 1.0, N)))
        frames.append(_scored("embedding:e", "embedding", profile, rng.normal(0.03, 0.1, N)))
    locked = _scored("judge:lock", "judge", "none", np.full(N, 0.0), verdict_ab="chosen", verdict_ba="rejected",
                     p_chosen_ab=0.95, p_chosen_ba=0.05)
    votes_ab = rng.random(N) < 0.7
    votes_ba = rng.random(N) < 0.7
    voted = _scored("judge:vote", "judge", "none", (votes_ab.astype(float) + votes_ba - 1.0),
                    verdict_ab=np.where(votes_ab, "chosen", "rejected"), verdict_ba=np.where(votes_ba, "chosen", "rejected"),
                    p_chosen_ab=votes_ab.astype(float), p_chosen_ba=votes_ba.astype(float),
                    answer_ab=np.where(votes_ab, "**Result:** A", "**Result:** B"),
                    answer_ba=np.where(votes_ba, "**Result:** B", "**Result:** A"))
    return pd.concat([*frames, locked, voted], ignore_index=True), data


def test_calibration_has_one_row_per_model_and_condition_with_the_reason_where_undefined():
    rows, data = mixed_store()
    table = compute_findings(rows, data, plan=ResamplingPlan(n_boot=200)).calibration
    groups = rows[["model", "profile"]].drop_duplicates()
    assert len(table) == len(groups) == 6
    assert not table.duplicated(["model", "profile"]).any()
    notes = table.set_index(["model", "profile"])["note"]
    assert notes["judge:lock", "none"] == LOCKED_REASON
    assert notes["judge:vote", "none"] == VOTES_REASON
    defined = table[table["note"].isna()]
    assert set(defined["model"]) == {"classifier:rm", "embedding:e"} and defined["ece"].notna().all()
    assert table.loc[table["note"].notna(), "ece"].isna().all()   # n/a, never a number


def test_the_findings_rank_the_benchmark_conditions_and_keep_the_oracle_apart():
    rows, data = mixed_store()
    oracle = _scored("classifier:rm", "classifier", "rubric", np.full(N, 1.0))
    found = compute_findings(pd.concat([rows, oracle], ignore_index=True), data, calibrate=False, plan=ResamplingPlan(n_boot=200))
    board = found.board
    assert board["oracle"].tolist()[-1] and board.loc[board["oracle"], "rank"].isna().all()
    assert found.conditions() == ["none", "top3"]
    assert found.oracle["verdict"].tolist() == ["upper bound"]
    for h in found.headline():
        part = board[(board["profile"] == h["profile"]) & ~board["locked"]]
        assert sorted(h["leaders"]) == sorted(part.loc[part["rank"] == 1, "model"])
    for r in board[~board["locked"] & ~board["oracle"]].itertuples():
        assert r.chance == chance_verdict(r.ci_low, r.ci_high) and r.chance in RULES["chance"].verdicts
    wide = found.wide()
    assert wide["model"].is_unique and "oracle (rubric)" in wide.columns
    assert wide.set_index("model").loc["judge:lock", "none: rank"] == "locked"


def test_the_lifts_behind_the_verdicts_are_the_ones_shown_and_a_profile_blind_model_has_none():
    rows, data = mixed_store()
    blind = pd.concat([_scored("length", "length", p, np.ones(N)) for p in ("none", "top3")], ignore_index=True)
    found = compute_findings(pd.concat([rows, blind], ignore_index=True), data, calibrate=False, plan=ResamplingPlan(n_boot=200))
    assert "length" in found.profile_blind and "length" not in set(found.lifts["model"])
    shown = found.board[found.board["lift_verdict"] != ""].set_index("model")
    for lift in found.lifts.itertuples():
        assert shown.loc[lift.model, "lift"] == lift.lift and shown.loc[lift.model, "lift_verdict"] == lift.verdict
    assert found.board.loc[found.board["model"] == "length", "lift_verdict"].eq("").all()


def test_the_oracle_is_an_upper_bound_only_where_it_is_one():
    board = pd.DataFrame({"model": ["lexical"] * 3 + ["m"] * 3 + ["length"] * 2,
                          "profile": ["none", "full", "rubric"] * 2 + ["none", "rubric"],
                          "oracle": [False, False, True] * 2 + [False, True],
                          "accuracy": [0.5, 0.667, 0.619, 0.5, 0.6, 0.9, 0.55, 0.55], "locked": False})
    gaps = oracle_gaps(board, profile_blind=["length"]).set_index("model")
    assert gaps.loc["lexical", "verdict"] == "not an upper bound" and gaps.loc["lexical", "gap"] < 0
    assert gaps.loc["m", "verdict"] == "upper bound" and gaps.loc["m", "best_condition"] == "full"
    assert gaps.loc["length", "verdict"] == "profile-blind"


def test_the_wide_leaderboard_has_a_column_per_subset_when_there_are_several():
    rows, data = mixed_store()
    rows = rows.assign(subset=np.where(rows["id"].str[1:].astype(int) < N // 2, "a", "b"))
    data = data.assign(subset=np.where(data["id"].str[1:].astype(int) < N // 2, "a", "b"))
    wide = compute_findings(rows, data, calibrate=False, plan=ResamplingPlan(n_boot=100)).wide().set_index("model")
    for subset in ("a", "b"):
        mine = rows[(rows["model"] == "classifier:rm") & (rows["profile"] == "none") & (rows["subset"] == subset)]
        assert wide.loc["classifier:rm", f"none: accuracy in {subset}"] == pytest.approx(
            (mine["outcome"] == "correct").mean())


def test_each_page_opens_with_sentences_that_state_the_findings_numbers():
    """page_sentences: the index and 02 say the tied groups, the lifts (their numbers as the board has them), the
    oracle and the locked judge; 01 the disagreements and the verdicts a condition changes, counted here by hand;
    03 only its benchmark condition; an unknown page is refused."""
    from prb_utils.analysis.findings import PAGES, page_sentences
    from prb_utils.errors import PRBError
    from prb_utils.formatting import format_signed

    rows, data = mixed_store()
    oracle = _scored("classifier:rm", "classifier", "rubric", np.full(N, 1.0))
    blind = pd.concat([_scored("length", "length", p, np.ones(N)) for p in ("none", "top3")], ignore_index=True)
    found = compute_findings(pd.concat([rows, oracle, blind], ignore_index=True), data, calibrate=False,
                             plan=ResamplingPlan(n_boot=200))
    said = {page: page_sentences(found, page, condition="top3" if page == "03" else None) for page in PAGES
            if page != "05"}
    assert said["index"] == said["02"]   # the same verdicts in the same words
    topics = [s["topic"] for s in said["index"]]
    assert topics == ["rank"] * 2 + ["lift", "oracle", "lock"]
    assert [s["sentence"] for s in said["index"][:2]] == [h["sentence"] for h in found.headline()]
    lift = said["index"][2]
    board = found.board.set_index(["model", "profile"])
    for verdict in RULES["lift"].verdicts:
        for model in lift[verdict]:
            assert board.loc[(model, "top3"), "lift_verdict"] == verdict
            assert format_signed(board.loc[(model, "top3"), "lift"]) in lift["sentence"]
    assert sorted(lift["helps"] + lift["hurts"] + lift["inconclusive"]) == ["classifier:rm", "embedding:e"]
    assert "length never reads the profile" in lift["sentence"]
    assert said["index"][3]["upper_bound"] == ["classifier:rm"]
    assert said["index"][4]["model"] == "judge:lock" and "position-locked under none" in said["index"][4]["sentence"]
    assert [s["profile"] for s in said["03"] if s["topic"] == "rank"] == ["top3"]
    assert {s["topic"] for s in said["04"]} == {"lift", "oracle", "lock"}
    outcome = rows.pivot_table(index="id", columns=["model", "profile"], values="outcome", aggfunc="first")
    change = next(s for s in said["01"] if s["topic"] == "change")
    right = outcome == "correct"
    for model in ("classifier:rm", "embedding:e"):
        assert change["changed"][model] == int((right[(model, "none")] != right[(model, "top3")]).sum())
    disagree = {s["profile"]: s for s in said["01"] if s["topic"] == "disagreement"}
    top3 = right.loc[:, [("classifier:rm", "top3"), ("embedding:e", "top3")]].assign(length=True)
    assert disagree["top3"]["disagree"] == int((top3.any(axis=1) & ~top3.all(axis=1)).sum())
    assert page_sentences(None, "03")[0]["sentence"].startswith("No scored pairs")
    with pytest.raises(PRBError, match="Unknown page"):
        page_sentences(found, "06")
