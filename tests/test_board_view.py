"""The leaderboard as pages show it (prb_utils.notebook.board_view): a block per condition, a row per model with
its verdicts in words, rank words, links to each model's sections, and those sections."""

from __future__ import annotations

import html
import re

import pandas as pd
import pytest
from test_leaderboard import planted

from prb_utils.analysis.findings import compute_findings
from prb_utils.analysis.uncertainty import ResamplingPlan
from prb_utils.notebook.board_view import board_html, model_pairs_html, rank_words
from prb_utils.notebook.markup import model_anchor
from prb_utils.notebook.model_sections import MODEL_PAGES, PAIRS_PAGE, PROBES_PAGE


@pytest.fixture(scope="module")
def found():
    return compute_findings(planted(), calibrate=False, plan=ResamplingPlan(n_boot=200))


def _rows(page: str, condition: str) -> list[str]:
    block = page.split(f'data-condition="{condition}"')[1].split("</section>")[0]
    return re.findall(r"<tr(?: class=\"locked\")?><td.*?</tr>", block)


def test_one_block_per_condition_one_row_per_model_with_its_verdicts_in_words(found):
    page = board_html(found, sections={PAIRS_PAGE: set(found.board["model"])})
    assert re.findall(r'data-condition="([^"]+)"', page) == found.conditions()
    board = found.board[~found.board["oracle"]]
    for condition in found.conditions():
        mine = board[board["profile"] == condition]
        rows = _rows(page, condition)
        assert len(rows) == len(mine)
        for row, r in zip(rows, mine.itertuples(), strict=True):
            assert f'data-label="model">{r.model} ' in row
            if r.locked:
                assert "<b>—</b>" in row and "position-locked: not ranked" in row
            else:
                assert f"<b>{int(r.rank)}</b>" in row and f'<span class="verdict">{r.chance}</span>' in row
            if r.lift_verdict:
                assert f'<span class="verdict">{r.lift_verdict}</span>' in row
    top3 = board[board["profile"] == "top3"].set_index("model")
    assert top3.loc["A", "lift_verdict"] == "helps"
    blind = _rows(page, "top3")[list(top3.index).index("C")]
    assert "n/a: never reads the profile" in blind       # a missing lift says why, never a bare gap
    none_heads = page.split('data-condition="none"')[1].split("</thead>")[0]
    assert "lift verdict" not in none_heads                # the baseline has no lift column


def test_the_secondary_columns_sit_behind_one_toggle_per_board(found):
    page = board_html(found, key="main")
    assert page.count('id="prb-main-more"') == 1 and 'for="prb-main-more"' in page
    assert "input.prb-board-more:not(:checked) ~ section .secondary { display: none; }" in page
    heads = re.findall(r'<th class="secondary">([^<]+)</th>', page)
    assert set(heads) == {"kind", "pairs", "ties (rate)"}


def test_rank_words_say_who_shares_a_rank_and_which_ranks_stay_open():
    assert rank_words(1, 1, 3, 2) == "tied with the leader (2 share rank 1); possible ranks 1–3"
    assert rank_words(1, 1, 2, 1) == "possible ranks 1–2"    # alone at 1, yet 2 is open: said
    assert rank_words(2, 2, 2, 1) == ""


def test_each_row_links_to_the_models_sections_and_names_are_escaped():
    rows = planted().replace({"model": {"B": "embedding:<b>x</b>"}})
    found = compute_findings(rows, calibrate=False, plan=ResamplingPlan(n_boot=100))
    everywhere = {PAIRS_PAGE: set(rows["model"]), PROBES_PAGE: set(rows["model"])}
    page = board_html(found, links=".ipynb", sections=everywhere)
    assert "<b>x</b>" not in page and "embedding:&lt;b&gt;x&lt;/b&gt;" in page
    anchor = model_anchor("embedding:<b>x</b>")
    assert re.fullmatch(r"model-[A-Za-z0-9_-]+", anchor)
    assert f'href="01_pair_inspection.ipynb#{anchor}"' in page and f'href="05_reading_the_user.ipynb#{anchor}"' in page
    assert "href=" not in board_html(found, links="", sections=everywhere)
    assert "href=" not in board_html(found, links=".html")   # no sections known: no link at all


def test_a_model_without_a_section_on_a_page_gets_plain_text_with_the_reason():
    rows = planted()
    found = compute_findings(rows, calibrate=False, plan=ResamplingPlan(n_boot=100))
    page = board_html(found, sections={PAIRS_PAGE: {"A", "B", "C", "J"}, PROBES_PAGE: {"A"}})
    hrefs = re.findall(r'href="([^"]+)"', page)
    assert sorted(set(hrefs)) == sorted({f"01_pair_inspection.html#{model_anchor(m)}" for m in "ABCJ"}
                                        | {f"05_reading_the_user.html#{model_anchor('A')}"})
    row_b = next(r for r in _rows(page, "top3") if 'data-label="model">B ' in r)
    assert f'<span class="none" title="{html.escape(MODEL_PAGES[1].missing)}">probes</span>' in row_b


def test_a_models_section_counts_its_pairs_and_links_those_with_a_card():
    rows = pd.DataFrame({"model": "m", "profile": ["none"] * 3 + ["top3"] * 3, "subset": "s",
                         "id": ["1", "2", "3"] * 2, "outcome": ["correct", "wrong", "tie", "correct", "correct", "wrong"]})
    page = model_pairs_html(rows, cards=pd.DataFrame({"subset": ["s"], "id": ["2"]}))
    assert page.startswith(f'<section class="prb-model" id="{model_anchor("m")}"><h4>m</h4>')
    assert "under <code>none</code>: right on 1 of 3 pairs; not right on: " in page
    assert '<a href="#pair-s-2">2</a>, 3' in page                # 2 has a card, 3 does not
    assert "under <code>top3</code>: right on 2 of 3 pairs; not right on: 3" in page
    assert page.index("none") < page.index("top3")
    assert 'href' not in model_pairs_html(rows, cards=object())  # a live widget: no card to link
