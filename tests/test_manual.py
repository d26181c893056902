"""The report's line on the manual (:mod:`prb_utils.notebook.manual`): each statistic linked to its rule where
the link can work (the report inside prb's source folder, the manual built there), named in words elsewhere,
and never a folder of this machine. That the links land on the built manual's rules, clicked in Chromium, is
in ``test_docs.py``."""

from __future__ import annotations

import html
import re
from pathlib import Path

from prb_utils.notebook.manual import INDEX_STATISTICS, MANUAL_DIR, STATISTICS_PAGE, manual_href, manual_html
from prb_utils.notebook.report import write_index


def _built(root: Path) -> Path:
    page = root / MANUAL_DIR / STATISTICS_PAGE
    page.parent.mkdir(parents=True)
    page.write_text("<html></html>", encoding="utf-8")
    return root


def _links(text: str) -> dict[str, str]:
    return {html.unescape(label): html.unescape(href) for href, label in re.findall(r'<a href="([^"]+)">([^<]+)</a>', text)}


def test_a_report_in_the_source_folder_links_each_statistic_to_its_rule(tmp_path):
    root = _built(tmp_path)
    links = _links(manual_html(root / "reports", root=root, unit="user"))
    assert set(links) == {label for label, _ in INDEX_STATISTICS}
    assert links["shared rank"] == f"../{MANUAL_DIR}/{STATISTICS_PAGE}#rule-rank"
    assert links["rank interval"].endswith("#rule-rank-interval")
    assert links["intervals and tests"].endswith("#rule-plan-user")   # the store's unit picks the plan's rule
    assert all((root / "reports" / href.split("#")[0]).resolve().is_file() for href in links.values())
    deeper = _links(manual_html(root / "out" / "week1", root=root))
    assert deeper["shared rank"] == f"../../{MANUAL_DIR}/{STATISTICS_PAGE}#rule-rank"


def test_elsewhere_or_unbuilt_the_line_names_the_page_and_shows_no_folder_of_this_machine(tmp_path):
    root = _built(tmp_path / "prb")
    outside = manual_html(tmp_path / "elsewhere", root=root)
    unbuilt = manual_html(tmp_path / "bare" / "reports", root=tmp_path / "bare")
    for text in (outside, unbuilt):
        assert _links(text) == {}
        assert f"{MANUAL_DIR}/{STATISTICS_PAGE}" in text and "#rule-rank</code>" in text
        assert "make docs" in text and f"{MANUAL_DIR}/index.html" in text
        assert str(tmp_path) not in text
    assert manual_href(tmp_path / "elsewhere", root=root) is None
    assert manual_href(root / "reports", root=root) == f"../{MANUAL_DIR}"
    assert manual_href(root, root=root) == MANUAL_DIR


def test_the_index_says_where_the_manual_is(tmp_path):
    index = write_index(tmp_path, [], data="sample", results=str(tmp_path / "results"), models=[], profiles=[])
    text = index.read_text(encoding="utf-8")
    headline = text[text.index('id="headline"'):text.index("<h2>Notebooks</h2>")]
    assert "make docs" in headline and f"{MANUAL_DIR}/index.html" in headline and "rule-rank" in headline
