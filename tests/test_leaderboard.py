"""The leaderboard: ranks, the group tied with the leader (checked against statsmodels' McNemar and Holm on a
planted store), lift verdicts, and position-locked judges never ranked."""

from __future__ import annotations

import numpy as np
import pandas as pd
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from prb_utils.analysis.leaderboard import leaderboard, leaderboard_notes

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


def test_the_tied_group_is_mcnemar_against_the_leader_with_holm():
    rows = planted()
    board = leaderboard(rows, n_boot=200).set_index(["profile", "model"])
    top3 = rows[rows["profile"] == "top3"].pivot(index="id", columns="model", values="outcome").eq("correct")
    raw = []
    for other in ("B", "C"):
        table = pd.crosstab(top3["A"], top3[other]).reindex(index=[False, True], columns=[False, True], fill_value=0)
        raw.append(mcnemar(table.to_numpy(), exact=True).pvalue)
    holm = multipletests(raw, method="holm")[1]
    assert board.loc[("top3", "A"), "rank"] == 1 and board.loc[("top3", "A"), "tied_with_leader"]
    assert board.loc[("top3", "B"), "p_vs_leader"] == np.float64(holm[0])
    assert board.loc[("top3", "C"), "p_vs_leader"] == np.float64(holm[1])
    assert holm[0] >= 0.05 and bool(board.loc[("top3", "B"), "tied_with_leader"])
    assert holm[1] < 0.05 and not bool(board.loc[("top3", "C"), "tied_with_leader"])
    assert board.loc[("top3", "C"), "kind"] == "baseline"


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


def test_the_index_shows_the_leaderboard_with_its_rules_and_greys_a_locked_judge():
    from prb_utils.notebook.report import _leaderboard_html

    page = _leaderboard_html(leaderboard(planted(), n_boot=200))
    assert 'class="leaderboard"' in page and page.count('<tr class="locked">') == 1
    locked_row = page[page.index('<tr class="locked">'):].split("</tr>")[0]
    assert "<td>&mdash;</td><td>J</td>" in locked_row and "locked: not ranked" in locked_row
    assert "Tied group: tied with the leader: an exact McNemar test" in page and "Lift verdict: helps" in page
    assert "<b>helps</b>" in page
