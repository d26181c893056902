"""Which model has a section on which page: the one home of the rule behind every link to a model's section.

Page 01 shows a section per job label of its rows (its pairs: :func:`prb_utils.notebook.board_view.model_pairs_html`)
and page 05 one per model probed against its base condition (:func:`prb_utils.analysis.probe_effects.probed_models`),
each at :func:`prb_utils.notebook.markup.model_anchor`. :func:`section_models` is that rule on a page's rows (the
pages call it to draw their sections); :func:`page_sections` applies it to the rows each page reads from a store,
so a leaderboard links a model only to the sections that exist and names, in a title, why another is missing
(:data:`MODEL_PAGES`). :func:`page_anchors` reads the sections a written report holds (what the board's links to a
report check).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from prb_utils.analysis.probe_effects import probed_models
from prb_utils.notebook.params import PARAMS_BY_NOTEBOOK, ReadingParams

PAIRS_PAGE, PROBES_PAGE = "01_pair_inspection", "05_reading_the_user"


@dataclass(frozen=True)
class ModelPage:
    """A page with a section per model: its notebook name, what the section holds (the link's text) and why a model
    has none there (the title of the link's text when it is not a link)."""

    page: str
    what: str
    missing: str


#: The pages a leaderboard row links to, in order.
MODEL_PAGES = (
    ModelPage(PAIRS_PAGE, "pairs", "no section on page 01: not among the jobs it shows"),
    ModelPage(PROBES_PAGE, "probes", f"not probed on {ReadingParams.base_profile}: `prb probe --model SPEC` adds "
                                     "its probes to page 05"),
)
_ANCHOR = re.compile(r'\bid="(model-[A-Za-z0-9_-]+)"')


def section_models(page: str, rows: pd.DataFrame, *, base: str = ReadingParams.base_profile) -> list[str]:
    """The models (``model`` of the page's per-item ``rows``: job labels) that get a section on ``page``: every one
    on page 01, those probed against ``base`` on page 05, none on any other page.

    >>> rows = pd.DataFrame({"model": ["a", "a", "b"], "profile": ["top3", "top3+swap", "top3"]})
    >>> section_models(PAIRS_PAGE, rows), section_models(PROBES_PAGE, rows), section_models("02_x", rows)
    (['a', 'b'], ['a'], [])
    """
    if rows.empty:
        return []
    if page == PAIRS_PAGE:
        return sorted({str(m) for m in rows["model"]})
    if page == PROBES_PAGE:
        return probed_models(rows, base)
    return []


def page_sections(results: str | os.PathLike, data: pd.DataFrame | None = None) -> dict[str, set[str]]:
    """Per page of :data:`MODEL_PAGES`: the models with a section there, from the rows that page reads from the
    store ``results`` (its jobs as the last report on the store showed them, else every job: the page's own
    :meth:`~prb_utils.notebook.params.NotebookParams.load_results`) on the pairs of ``data``.

    >>> page_sections("no-such-store")
    {'01_pair_inspection': set(), '05_reading_the_user': set()}
    """
    found = {}
    for target in MODEL_PAGES:
        params = PARAMS_BY_NOTEBOOK[target.page](results=str(results))
        rows = params.load_results(data) if Path(results).is_dir() else pd.DataFrame()
        found[target.page] = set(section_models(target.page, rows))
    return found


def page_anchors(report: Path) -> dict[str, set[str]]:
    """Per page of :data:`MODEL_PAGES` that the report folder ``report`` holds: the ids of the model sections on it."""
    found = {}
    for target in MODEL_PAGES:
        path = report / f"{target.page}.html"
        if path.is_file():
            found[target.page] = set(_ANCHOR.findall(path.read_text(encoding="utf-8", errors="replace")))
    return found


def linked_pages(model: str, sections: Mapping[str, set[str]]) -> list[tuple[ModelPage, bool]]:
    """Each page of :data:`MODEL_PAGES` with whether ``model`` has a section there (``sections``: from
    :func:`page_sections`; a page it does not name holds none).

    >>> [(p.what, has) for p, has in linked_pages("a", {PAIRS_PAGE: {"a"}, PROBES_PAGE: set()})]
    [('pairs', True), ('probes', False)]
    """
    return [(target, model in sections.get(target.page, set())) for target in MODEL_PAGES]
