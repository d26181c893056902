"""The board and a report linked into each other: ``prb board SUBMISSIONS --out DIR --report REPORT``.

REPORT is a folder ``prb report`` wrote. A run of the board whose job is one of the report's (a ``job`` of its
``results.csv``) links from its card to its sections of the report's pages
(:data:`prb_utils.notebook.model_sections.MODEL_PAGES`, at :func:`prb_utils.notebook.markup.model_anchor` of the
report's label for the job), where the page holds that section (its ids, read by
:func:`prb_utils.notebook.model_sections.page_anchors`); the board's header links to the report's index;
and the report's index gets one paragraph under its title that links to the board and to each of those runs'
cards (replaced, not repeated, when the board is built again). Every link is relative, so the two folders open
from disk and can move together.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd

from prb_utils.errors import PRBError
from prb_utils.notebook.markup import model_anchor
from prb_utils.notebook.model_sections import MODEL_PAGES, page_anchors
from prb_utils.notebook.report import RESULTS_CSV

#: The comments around the paragraph the board writes into a report's index.
INDEX_START, INDEX_END = "<!-- prb board link -->", "<!-- /prb board link -->"
_REGION = re.compile(re.escape(INDEX_START) + ".*?" + re.escape(INDEX_END) + "\n?", re.DOTALL)


def relative_href(target: Path, start: Path, fragment: str = "") -> str:
    """The link from a page in the folder ``start`` to the file ``target`` (``#fragment`` after it), each part of
    the path percent-encoded (no folder name can turn it into another kind of link).

    >>> relative_href(Path("/r/reports/01.html"), Path("/r/reports/board"), "model-x")
    '../01.html#model-x'
    >>> relative_href(Path("/r/javascript:x/index.html"), Path("/r/board"))
    '../javascript%3Ax/index.html'
    """
    parts = Path(os.path.relpath(target.resolve(), start.resolve())).parts
    return "/".join(quote(p, safe="") for p in parts) + (f"#{fragment}" if fragment else "")


def report_jobs(report: Path) -> dict[str, str]:
    """The jobs of the report folder ``report`` (job key -> the label its pages name the model by), from its
    ``results.csv``. PRBError when ``report`` holds no report index."""
    if not (report / "index.html").is_file():
        raise PRBError(f"--report {report}: no index.html there; name a folder that `prb report` wrote.")
    csv = report / RESULTS_CSV
    if not csv.is_file():
        return {}
    try:
        rows = pd.read_csv(csv, usecols=["job", "job_label"], dtype=str).drop_duplicates("job")
    except (ValueError, OSError) as exc:
        raise PRBError(f"--report {report}: {RESULTS_CSV} cannot be read ({exc}).") from None
    return dict(zip(rows["job"], rows["job_label"], strict=True))


def report_links(models: Mapping[str, Mapping[str, Any]], report: Path, out: Path) -> dict[str, Any]:
    """The links of a board written to ``out`` with the report ``report``: ``index`` (the board's link to the
    report's index) and ``cards`` (run id -> its links ``{what, href}`` into the report's pages; a run the report
    does not show has none). ``models``: the board's runs (id -> ``label`` and ``provenance`` with ``job_key``)."""
    jobs, anchors = report_jobs(report), page_anchors(report)
    cards = {}
    for run, model in models.items():
        label = jobs.get(str(model.get("provenance", {}).get("job_key", "")))
        if label is None:
            continue
        anchor = model_anchor(label)
        cards[run] = [{"what": p.what, "href": relative_href(report / f"{p.page}.html", out, anchor)}
                      for p in MODEL_PAGES if anchor in anchors.get(p.page, set())]
    return {"index": relative_href(report / "index.html", out), "cards": cards}


def index_paragraph(models: Mapping[str, Mapping[str, Any]], linked: Mapping[str, Any], board_page: Path,
                    report: Path) -> str:
    """The paragraph the report's index gets: a link to the board, and one to each card of a run it shows."""
    board = relative_href(board_page, report)
    cards = ", ".join(f'<a href="{html.escape(board)}#card={html.escape(run)}">{html.escape(models[run]["label"])}</a>'
                      for run in linked)
    runs = (f" {len(linked)} of its {len(models)} runs are this report's: {cards}." if linked else
            " None of its runs is one of this report's jobs.")
    return (f'{INDEX_START}<p class="board-link" id="board-link">The <a href="{html.escape(board)}">board</a> puts '
            f"this report's runs beside other submissions, every number recomputed from their per-item rows.{runs}"
            f"</p>{INDEX_END}\n")


def link_index(report: Path, paragraph: str) -> Path:
    """Write ``paragraph`` (:func:`index_paragraph`) under the title of the report's index, in place of the one an
    earlier board wrote; returns the index."""
    index = report / "index.html"
    text = _REGION.sub("", index.read_text(encoding="utf-8"))
    title = text.find("</h1>")
    if title < 0:
        raise PRBError(f"--report {report}: its index.html has no title (<h1>); name a folder that `prb report` wrote.")
    cut = title + len("</h1>")
    try:
        index.write_text(text[:cut] + "\n" + paragraph + text[cut:].lstrip("\n"), encoding="utf-8")
    except OSError as exc:
        raise PRBError(f"Cannot write the board's link into {index} ({exc.strerror or exc}).") from None
    return index
