"""The pair views of notebook 01 and 00: anchors, the linked pair list (itables), short cards, the filters
with a model, the categories of a subset, the shared-question groups and the two-users figure."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from prb_utils.errors import PRBError
from prb_utils.notebook.pair_view import (
    NO_TWINS,
    VIEW_STYLE,
    categories,
    disagreeing_twins,
    filter_pairs,
    margins_missing,
    pair_anchor,
    pair_brief_html,
    pair_html,
    pair_keys,
    pair_list_frame,
    pair_list_html,
    pair_summary,
    rm_inputs_html,
    two_users_html,
    two_users_margins,
    two_users_plot,
)


def _data() -> pd.DataFrame:
    """Two subsets; a and b share their question (chosen and rejected swapped), c is alone."""
    post = [{"id": "p", "category": "x", "text": "cheap pans please"}]
    return pd.DataFrame({
        "subset": ["S", "S", "S", "T"], "id": ["a", "b", "c", "d"], "category": ["x", "x", "y", "z"],
        "question": ["Q1", "Q1", "Q2 <b>bold</b>", "Q3 " + "word " * 40],
        "profile": [post] * 4, "rubric_aspects": [[{"aspect": "Cheap", "evidence": "e", "reason": "r"}]] * 4,
        "narrative": "N", "chosen": ["use a cheap pan", "use a cast-iron pan", "yes", "one"],
        "rejected": ["use a cast-iron pan", "use a cheap pan", "no", "two"],
    })


def _results() -> pd.DataFrame:
    outcomes = {("m1", "none"): ["correct", "wrong", "correct", "correct"],
                ("m1", "top3"): ["correct", "correct", "correct", "correct"],
                ("m2", "none"): ["correct", "wrong", "wrong", "correct"],
                ("m2", "top3"): ["correct", "wrong", "wrong", "wrong"]}
    rows = []
    for (model, profile), outs in outcomes.items():
        for (subset, pid), outcome in zip([("S", "a"), ("S", "b"), ("S", "c"), ("T", "d")], outs, strict=True):
            rows.append({"model": model, "profile": profile, "subset": subset, "id": pid, "outcome": outcome,
                         "score_chosen": 1.0 if outcome == "correct" else 0.0, "score_rejected": 0.5})
    return pd.DataFrame(rows)


def test_pair_anchor_is_stable_and_a_valid_id():
    assert pair_anchor("Art_and_Entertainment", "art-001") == "pair-Art_and_Entertainment-art-001"
    assert pair_anchor("my subset", "a/b?") == "pair-my_subset-a_b_"
    assert re.fullmatch(r"[A-Za-z][-A-Za-z0-9_.:]*", pair_anchor("x y", "<z>"))
    assert pair_anchor("S", "a") != pair_anchor("S", "b")


def test_pair_cards_carry_their_anchor():
    data = _data()
    full = pair_html(data.iloc[0].to_dict(), _results())
    assert 'id="pair-S-a"' in full and 'class="prb-pair"' in full
    brief = pair_brief_html(data.iloc[2].to_dict(), _results())
    assert 'id="pair-S-c"' in brief and "<details" in brief and 'class="prb-pair"' not in brief
    assert "<b>bold</b>" not in brief and "&lt;b&gt;bold&lt;/b&gt;" in brief  # the question is escaped
    assert "m2" in brief and "prb-only" in brief  # scores and the word diff


def test_a_model_narrows_every_filter_not_only_wrong():
    summary = pair_summary(_data(), _results())
    assert list(filter_pairs(summary, mode="all", model="m1")["id"]) == ["b"]
    assert list(filter_pairs(summary, mode="all", model="m2")["id"]) == ["b", "c", "d"]
    assert list(filter_pairs(summary, mode="profile_flips", model="m2")["id"]) == ["b", "d"]
    assert list(filter_pairs(summary, mode="disagreement", model="m1")["id"]) == ["b"]
    assert list(filter_pairs(summary, mode="all")["id"]) == ["a", "b", "c", "d"]  # no model: no narrowing


def test_categories_follow_the_subset():
    summary = pair_summary(_data(), _results())
    assert categories(summary) == ["x", "y", "z"]
    assert categories(summary, "S") == ["x", "y"]
    assert categories(summary, "T") == ["z"]
    assert categories(summary, "nope") == []


def test_pair_list_frame_links_every_pair_and_escapes():
    summary = pair_summary(_data(), _results())
    frame = pair_list_frame(summary)
    assert len(frame) == 4
    hrefs = [re.search(r'href="#([^"]+)"', cell).group(1) for cell in frame["pair"]]
    assert hrefs == [pair_anchor(s, i) for s, i in zip(summary["subset"], summary["id"], strict=True)]
    assert frame.loc[2, "question"] == "Q2 &lt;b&gt;bold&lt;/b&gt;"
    assert frame.loc[3, "question"].endswith("…") and len(frame.loc[3, "question"]) <= 110
    assert frame["correct"].tolist() == ["4/4", "1/4", "2/4", "3/4"]
    assert frame["profile flips"].tolist() == ["", "yes", "", "yes"]
    plain = pair_list_frame(summary, links=False)
    assert not plain["pair"].str.contains("href").any() and plain["pair"].tolist() == ["a", "b", "c", "d"]


def test_pair_list_html_is_an_offline_itable_with_the_links():
    summary = pair_summary(_data(), _results())
    page = pair_list_html(summary, table_id="my-list")
    assert '<table id="my-list"' in page and "new ITable" in page
    assert "unpkg" not in page and "https://www.unpkg" not in page  # connected=False: no CDN import
    for subset, pid in zip(summary["subset"], summary["id"], strict=True):
        assert f"#{pair_anchor(subset, pid)}" in page
    assert "<b>bold</b>" not in page  # escaped before itables sees it (allow_html)


def test_disagreeing_twins_are_read_from_the_data_and_the_avoided_come_last():
    data = pd.concat([_data(), pd.DataFrame({"subset": ["T", "T", "T"], "id": ["e", "f", "g"], "category": "z",
                                             "question": ["Q9", "Q9", "Q8"], "chosen": ["p", "q", "p"],
                                             "rejected": ["q", "p", "q"]})], ignore_index=True)
    twins = disagreeing_twins(data)
    assert [[r["id"] for r in g] for g in twins] == [["a", "b"], ["e", "f"]]
    assert all(g[0]["question"] == g[1]["question"] and g[0]["chosen"] == g[1]["rejected"] for g in twins)
    avoided = disagreeing_twins(data, avoid=[("S", "a")])
    assert [[r["id"] for r in g] for g in avoided] == [["e", "f"], ["a", "b"]]
    assert pair_keys([("S", "a"), {"subset": "T", "id": "e"}]) == {("S", "a"), ("T", "e")}
    # two users who asked the same question and want the same answer are no twins
    agree = data.assign(chosen="p", rejected="q")
    assert disagreeing_twins(agree) == [] and NO_TWINS in two_users_html([])


def test_empty_margins_say_what_the_store_holds_and_what_is_missing():
    """Before: "No model scores in the store yet" whenever the figure was empty, over a store of thousands of rows."""
    twins = _data().iloc[:2].to_dict("records")
    rows = pd.DataFrame({"model": "length", "profile": "none", "subset": "S", "id": ["c"]})
    how = "prb score --data mine.jsonl --model length --out results"
    assert "No twin pair in this data" in margins_missing(rows, [], stored=rows, how=how)
    assert "No model scores in the store for this data yet" in margins_missing(rows[:0], twins, stored=rows[:0], how=how)
    other = margins_missing(rows[:0], twins, stored=rows, how=how)
    assert "holds 1 scored row(s) on this data, from 1 model(s) (`length`)" in other and other.endswith(f"`{how}`")
    mine = margins_missing(rows, twins, stored=rows, how=how)
    assert "none of them for the two users' pairs `a` and `b`" in mine and "yet" not in mine


def test_two_users_margins_mirror_under_none_and_the_figure_has_a_panel_per_model():
    data = _data()
    records = data.iloc[:2].to_dict("records")
    rows = [{"model": "length", "profile": p, "subset": "S", "id": pid, "score_chosen": c, "score_rejected": r,
             "outcome": "correct" if c > r else "wrong"}
            for p in ("none", "top3") for pid, c, r in (("a", 10.0, 14.0), ("b", 14.0, 10.0))]
    rows += [{"model": "lexical", "profile": "none", "subset": "S", "id": "a", "score_chosen": 0.2,
              "score_rejected": 0.1, "outcome": "correct"}]
    margins = two_users_margins(pd.DataFrame(rows), records)
    none = margins[(margins["model"] == "length") & (margins["profile"] == "none")]
    assert none["user"].tolist() == ["User 1", "User 2"] and none["margin"].tolist() == [-4.0, 4.0]
    assert none["outcome"].tolist() == ["wrong", "correct"]
    fig = two_users_plot(margins, conditions=["none", "top3"])
    try:
        visible = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_title() for ax in visible] == ["length", "lexical"]
        assert [t.get_text() for t in visible[0].get_xticklabels()] == ["none", "top3"]
        assert len(visible[0].collections) == 2  # one scatter per user
    finally:
        plt.close(fig)
    assert two_users_margins(pd.DataFrame(rows), []).empty
    with pytest.raises(PRBError, match="nothing to plot"):
        two_users_plot(two_users_margins(pd.DataFrame(rows), []))


def test_rm_input_boxes_wrap_between_words_and_views_reset_line_height():
    html = rm_inputs_html(_data().iloc[0].to_dict(), ["none", "top3"])
    boxes = re.findall(r'<pre style="([^"]+)"', html)
    assert len(boxes) == 2
    for style in boxes:
        assert "word-break:normal" in style and "overflow-wrap:anywhere" in style and "break-all" not in style
    assert "line-height: 1.45" in VIEW_STYLE and "word-break: normal" in VIEW_STYLE


def test_a_position_locked_judge_is_marked_in_every_pair_table():
    from prb_utils.notebook.pair_view import LOCKED_MARK, scores_for, scores_table

    locked = pd.DataFrame({"model": "judge:x", "profile": "none", "subset": "s", "id": ["1", "2", "3", "4"],
                           "score_chosen": 0.6, "score_rejected": 0.4, "outcome": "correct",
                           "verdict_ab": "chosen", "verdict_ba": "rejected"})  # always "A": locked
    fair = locked.assign(model="judge:y", verdict_ba="chosen")
    length = locked.drop(columns=["verdict_ab", "verdict_ba"]).assign(model="length")
    rows = pd.concat([locked, fair, length], ignore_index=True)
    table = scores_table(rows, "s", "1")
    assert list(table["model"]) == [f"judge:x {LOCKED_MARK}", "judge:y", "length"]
    many = scores_for(rows, [{"subset": "s", "id": "1"}, {"subset": "s", "id": "2"}])
    assert (many["model"] == f"judge:x {LOCKED_MARK}").sum() == 2
    assert LOCKED_MARK not in " ".join(scores_table(pd.concat([fair, length]), "s", "1")["model"])
