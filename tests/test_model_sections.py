"""Which model has a section on which page (prb_utils.notebook.model_sections), on a real store: the rule the pages
draw their sections by and the one the leaderboard links by are the same, so no link lands on a missing section."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from prb_utils.analysis.findings import compute_findings
from prb_utils.analysis.probe_effects import probe_effects
from prb_utils.analysis.uncertainty import ResamplingPlan
from prb_utils.cli import main
from prb_utils.data import load_benchmark
from prb_utils.notebook.board_view import board_html, model_pairs_html
from prb_utils.notebook.markup import model_anchor
from prb_utils.notebook.model_sections import PAIRS_PAGE, PROBES_PAGE, page_sections, section_models
from prb_utils.notebook.params import PairInspectionParams, ReadingParams
from prb_utils.notebook.report import build_report

LIMIT = ["--data", "sample", "--limit", "3", "--no-progress"]
_PAGE_LINK = re.compile(r'href="(\d\d_[A-Za-z0-9_]+\.html)#([^"]+)"')


def section_links(report: Path) -> tuple[set[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """Every ``href="NN_page.html#id"`` of every page of the report folder ``report`` as (page, target, id), and
    those whose id the target page does not hold."""
    pages = sorted(report.glob("*.html"))
    ids = {p.name: set(re.findall(r'\bid="([^"]+)"', p.read_text(encoding="utf-8"))) for p in pages}
    links = {(p.name, target, html.unescape(fragment)) for p in pages
             for target, fragment in _PAGE_LINK.findall(p.read_text(encoding="utf-8"))}
    return links, sorted(link for link in links if link[2] not in ids.get(link[1], set()))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """``length`` and ``lexical`` under none and top3, ``length`` also under top3 with random posts (a second job
    of one spec: labelled ``length [random]``), and only ``lexical`` probed."""
    out = str(tmp_path_factory.mktemp("sections") / "results")
    assert main(["score", *LIMIT, "--model", "length", "--model", "lexical", "--profile", "none", "--profile", "top3",
                 "--out", out]) == 0
    assert main(["score", *LIMIT, "--model", "length", "--profile", "top3", "--retriever", "random", "--out", out]) == 0
    assert main(["probe", *LIMIT, "--model", "lexical", "--probe", "swap", "--out", out]) == 0
    return out


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("sample", limit=3)


def test_the_sections_of_each_page_are_those_its_rows_draw(store, bench):
    sections = page_sections(store, bench)
    pairs = PairInspectionParams(results=store).load_results(bench)
    assert "length [random]" in set(pairs["model"])           # the second job has a label of its own
    drawn = set(re.findall(r'id="(model-[^"]+)"', model_pairs_html(pairs)))
    assert drawn == {model_anchor(m) for m in sections[PAIRS_PAGE]} and len(drawn) == 3
    probes = ReadingParams(results=store).load_results(bench)
    measured = probe_effects(probes, bench, n_boot=50)
    measured = set(measured.loc[measured["base"] == ReadingParams.base_profile, "model"])
    assert sections[PROBES_PAGE] == measured == {"lexical"}    # length, with and without random posts: not probed
    assert section_models(PROBES_PAGE, probes) == ["lexical"]


def test_the_leaderboard_links_only_to_sections_that_exist(store, bench):
    sections = page_sections(store, bench)
    rows = PairInspectionParams(results=store).load_results(bench)
    page = board_html(compute_findings(rows, bench, calibrate=False, plan=ResamplingPlan(n_boot=50)),
                      sections=sections)
    hrefs = set(re.findall(r'href="([^"]+)"', page))
    assert hrefs == ({f"{PAIRS_PAGE}.html#{model_anchor(m)}" for m in ("length", "length [random]", "lexical")}
                     | {f"{PROBES_PAGE}.html#{model_anchor('lexical')}"})
    assert page.count('<span class="none" title="not probed on top3') == page.count('data-label="model">length')


def test_a_report_links_no_model_to_a_section_its_pages_lack(store, tmp_path):
    """Pages 01, 02 and 05 run on the store (05 on top3 and its swap): every link of the leaderboard on 02 and the
    index lands on a section that exists; ``length`` and ``length [random]``, never probed, get none to 05."""
    build_report(data="sample", results=store, out=str(tmp_path / "reports"), models=["length", "lexical"],
                 profiles=["none", "top3"], notebooks=["01_pair_inspection", "02_accuracy_breakdown",
                                                       "05_reading_the_user"],
                 parameters={"05_reading_the_user": {"profiles": ["top3", "top3+swap"]}}, limit=3, progress=False)
    links, missing = section_links(tmp_path / "reports")
    assert not missing, missing
    for page in ("index.html", "02_accuracy_breakdown.html"):
        assert {(t, i) for p, t, i in links if p == page} == (
            {(f"{PAIRS_PAGE}.html", model_anchor(m)) for m in ("length", "length [random]", "lexical")}
            | {(f"{PROBES_PAGE}.html", model_anchor("lexical"))}), page
        text = (tmp_path / "reports" / page).read_text(encoding="utf-8")
        rows = text.count('data-label="model">length')   # length (none, top3) and length [random] (top3)
        assert rows == 3 and text.count('<span class="none" title="not probed on top3') == rows, page
