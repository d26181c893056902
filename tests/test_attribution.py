"""Leave-one-post-out attribution: the drop probes (prb_utils.probes, the selection of prb_utils.profile) and what
prb_utils.analysis.attribution finds, on planted records whose decisive post is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from prb_utils.analysis.attribution import (
    NO_EVIDENCE,
    attribution_summary,
    attribution_table,
    decisive_positions,
    decisive_posts,
    post_effects,
)
from prb_utils.analysis.probe_effects import probe_effects
from prb_utils.cli import main
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.plan import plan_frame
from prb_utils.probes import changed_records
from prb_utils.profile import (
    PROFILE_HEADER,
    parse_condition,
    probe_conditions,
    rm_user_message,
    selected_posts,
)
from prb_utils.scoring import score_benchmark
from prb_utils.store import load_results

N_QUESTIONS = 16
ANSWER_WORDS = ["kayak", "violin", "sourdough", "orchid", "chess", "lantern", "glacier", "falcon", "mosaic",
                "pottery", "saffron", "compass", "harbor", "meadow", "quartz", "tundra"]
DROPS = ["top3", "top3+drop1", "top3+drop2", "top3+drop3"]


def second_post_data(*, evidence_in_post: bool = False) -> pd.DataFrame:
    """Per question one user whose 2nd post alone names the chosen answer's topic; the 1st and 3rd posts are
    filler, and the rejected answer is longer (so a profile-blind length scorer prefers it). Each question has a
    second user with a 4th post, which top3 does not show. ``evidence_in_post``: the rubric evidence quotes the
    2nd post (else the narrative, as the benchmark's does)."""
    rows = []
    for q, word in enumerate(ANSWER_WORDS):
        other = ANSWER_WORDS[(q + 1) % len(ANSWER_WORDS)]
        posts = [{"id": f"{q}-p1", "category": "c", "text": "Where should question number wait"},
                 {"id": f"{q}-p2", "category": "c", "text": f"I really love {word}, question"},
                 {"id": f"{q}-p3", "category": "c", "text": "Anything about question number thanks"}]
        evidence = f"love {word}" if evidence_in_post else "my own story"
        for user, profile in enumerate((posts, [*posts, {"id": f"{q}-p4", "category": "c", "text": "Nothing else today"}])):
            rows.append({"subset": "S", "id": f"q{q}-u{user}", "question": f"question number {q}?",
                         "chosen": f"Try {word}.", "rejected": f"Try {other} or maybe something else entirely.",
                         "category": "c", "narrative": "my own story", "profile": profile,
                         "rubric_aspects": [{"aspect": "likes it", "evidence": evidence, "reason": "r"}]})
    return pd.DataFrame(rows)


def test_a_drop_leaves_out_one_shown_post_and_retrieves_none_in_its_place():
    data = second_post_data()
    long_one = data.iloc[1].to_dict()   # four posts: top3 shows three of them
    assert len(selected_posts(long_one, "top3")) == 3
    for i in (1, 2, 3):
        shown = selected_posts(long_one, f"top3+drop{i}")
        assert shown == [j for n, j in enumerate(selected_posts(long_one, "top3"), 1) if n != i]   # no replacement
        message = rm_user_message(long_one, f"top3+drop{i}")
        assert message.startswith(PROFILE_HEADER) and message.count("\n- ") == 2
    assert selected_posts(long_one, "full+drop4") == [0, 1, 2]
    short = {"question": "q", "profile": [{"text": "only"}]}
    assert selected_posts(short, "top3+drop2") == selected_posts(short, "top3") == [0]   # unchanged
    assert changed_records(data.assign(profile=[p[:1] if i % 2 else p for i, p in enumerate(data["profile"])]),
                           "drop2") == {("S", f"q{q}-u0") for q in range(N_QUESTIONS)}
    with pytest.raises(PRBError, match="top3 shows at most 3"):
        parse_condition("top3+drop4")
    with pytest.raises(PRBError, match="none shows no post"):
        parse_condition("none+drop1")
    assert parse_condition("full+drop7").probe == "drop7"
    assert probe_conditions("top3", ["attribution", "swap"]) == [*DROPS, "top3+swap"]
    assert probe_conditions("full", ["attribution"], most_posts=40)[-1] == "full+drop10"   # at most DROP_MAX
    with pytest.raises(PRBError, match="none shows no post"):
        probe_conditions("none", ["attribution"])


def test_a_scorer_reading_only_the_second_post_is_found_reading_it_and_a_length_scorer_reads_none(tmp_path):
    """The lexical baseline on records whose 2nd post alone carries the chosen answer's word: dropping post 2 turns
    every verdict (the longer rejected answer then wins no word, a tie or worse), dropping 1 or 3 turns none. The
    length baseline never moves: no decisive post, and n/a as profile-blind."""
    data = second_post_data()
    rows = score_benchmark(data, ["lexical", "length"], DROPS, out=tmp_path / "store", progress=False)
    effects = post_effects(rows)
    lexical = effects[effects["model"] == "lexical"]
    assert lexical.loc[lexical["position"] == 2, "flipped"].all()
    assert not lexical.loc[lexical["position"] != 2, "flipped"].any()
    assert (lexical.loc[lexical["position"] == 2, "margin_change"] < 0).all()
    decided = decisive_posts(rows, data).set_index("model")
    assert (decided.loc["lexical", "decisive"] == 2).all() and len(decided.loc["lexical"]) == len(data)
    assert (decided.loc["lexical", "decisive_rank"] == 3).all()   # post 2 holds one of the question's words, 1 and 3 two
    assert (decided.loc["length", "flips"] == 0).all() and (decided.loc["length", "decisive"] == 0).all()
    summary = attribution_summary(rows, data).set_index("model")
    assert summary.loc["lexical", "hinges"] == 1.0 and summary.loc["lexical", "no_verdict"] == ""
    assert summary.loc["lexical", "hinges_low"] <= 1.0 and summary.loc["lexical", "n_units"] == N_QUESTIONS
    assert summary.loc["lexical", "evidence_note"] == NO_EVIDENCE   # the evidence quotes the narrative, no post
    assert summary.loc["length", "no_verdict"].startswith("n/a: profile-blind")
    assert np.isnan(summary.loc["length", "hinges"])
    positions = decisive_positions(decided.reset_index()).set_index(["model", "position"])
    assert positions.loc[("lexical", 2), "pairs"] == len(data) and positions.loc[("lexical", 1), "pairs"] == 0
    shown = attribution_table(summary.reset_index(), decided.reset_index()).set_index("model")
    assert shown.loc["lexical", "decisive post by position"] == f"1: 0 / 2: {len(data)} / 3: 0"
    assert shown.loc["lexical", "decisive post by relevance rank"] == f"1: 0 / 2: 0 / 3: {len(data)}"
    assert shown.loc["length", "verdicts hinging on one post [95% CI]"].startswith("n/a: profile-blind")
    changed = probe_effects(rows, data).set_index(["model", "probe"])
    assert changed.loc[("lexical", "drop2"), "inputs_changed"] == len(data)   # every record shows two posts


def test_the_decisive_post_is_compared_with_the_evidence_post_where_the_evidence_quotes_one(tmp_path):
    data = second_post_data(evidence_in_post=True)
    rows = score_benchmark(data, ["lexical"], DROPS, out=tmp_path / "store", progress=False)
    summary = attribution_summary(rows, data, units=None).iloc[0]
    assert summary["evidence_pairs"] == len(data) and summary["on_evidence"] == 1.0
    assert summary["on_evidence_low"] < 1.0 <= summary["on_evidence_high"]   # Wilson where pairs are the units
    moved = rows.assign(outcome=np.where(rows["profile"] == "top3+drop1", "wrong", rows["outcome"]))
    again = attribution_summary(moved, data).iloc[0]   # post 1 flips them too: several posts, none decisive
    assert again["several_flip"] == 1.0 and again["hinges"] == 0.0 and np.isnan(again["on_evidence"])


def test_plan_counts_the_tokens_of_each_drop_job(tiny_classifier_dir):
    data = load_benchmark("sample", limit=4)
    plan = plan_frame(data, [f"classifier:{tiny_classifier_dir}"], DROPS).set_index("profile")
    for condition in DROPS[1:]:
        assert 0 < plan.loc[condition, "input_tokens"] < plan.loc["top3", "input_tokens"]
        assert plan.loc[condition, "pairs"] == plan.loc["top3", "pairs"]


def test_prb_probe_attribution_runs_the_drops_of_the_base_and_prints_the_attribution(tmp_path, capsys):
    out = tmp_path / "results"
    assert main(["probe", "--data", "sample", "--limit", "4", "--model", "length", "--model", "lexical", "--probe",
                 "attribution", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "verdicts hinging on one post" in printed and "Attribution: a verdict hinges on one post" in printed
    assert set(load_results(out)["profile"]) == set(DROPS)
    # the drop jobs are read by the attribution table alone, not listed as probes with a check of their own
    assert not any(line.split()[:2] in (["length", "drop1"], ["lexical", "drop2"]) for line in printed.splitlines())
    assert "check" not in printed.split("verdicts hinging on one post")[0]
