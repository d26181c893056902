"""The board as one static page: ``index.html`` with its numbers embedded as JSON, its style and its script
inline (a page opened from disk can fetch nothing, and needs nothing from the network), and ``board.json``
beside it (the same numbers, for other tools).

Every name a submission brings (a model label, a category, a pair's text) reaches the page as JSON data and is
set as text by the script, never as markup; the JSON is embedded with ``<``, ``>`` and ``&`` escaped, so no
value can close the script element.
"""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import Any

from prb_utils import __version__
from prb_utils.errors import PRBError
from prb_utils.export import check_out

STATIC = Path(__file__).with_name("static")
TITLE = "Personalized RewardBench board"


def plain(value: Any) -> Any:
    """``value`` as JSON can hold it: a non-finite number is null (the page prints it as missing).

    >>> plain({"a": [float("nan"), 1.5]})
    {'a': [None, 1.5]}
    """
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def embed_json(numbers: Any) -> str:
    """``numbers`` as JSON that is safe inside a ``<script>`` element.

    >>> embed_json({"name": "</script><b>"})
    '{"name": "\\\\u003c/script\\\\u003e\\\\u003cb\\\\u003e"}'
    """
    text = json.dumps(plain(numbers), ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _static(name: str) -> str:
    try:
        return (STATIC / name).read_text(encoding="utf-8")
    except OSError as exc:
        raise PRBError(f"prb's board file {name} is missing from the installation ({exc.strerror or exc}); "
                       "reinstall prb.") from None


def _report_line(numbers: dict[str, Any]) -> str:
    """The line under the title that links to the report the board was built with (``prb board --report``)."""
    if "report" not in numbers:
        return ""
    linked = len(numbers["report"]["cards"])
    return (f'<p id="report-link">Built with a report: <a href="{html.escape(numbers["report"]["index"])}">its '
            f"index</a>; {linked} run(s) of this board are that report's, and their cards link to their sections of "
            "its pages.</p>\n")


def page_html(numbers: dict[str, Any]) -> str:
    """The board's page for ``numbers`` (:func:`prb_utils.board.recompute.board_numbers`)."""
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in numbers["notes"])
    rules = "".join(f"<li>{html.escape(r)}</li>" for r in numbers["rules"])
    count = len(numbers["models"])
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{TITLE}</title>
<style>{_static("board.css")}</style>
</head>
<body>
<h1>{TITLE}</h1>
<p class="muted">{count} submitted run(s). Every number is recomputed from the submissions' per-item rows by prb
{html.escape(__version__)}'s findings layer; a submitted aggregate is never shown.
<a id="view-link" href="#">Link to this view</a>.</p>
{_report_line(numbers)}<p id="headline"></p>
{f'<div class="notes" role="note"><p>Notes on the submissions:</p><ul id="notes">{notes}</ul></div>' if notes else ''}
<div class="controls">
<label>Condition <select id="condition"></select></label>
<label>Filter runs <input id="filter" type="search" placeholder="model or kind"></label>
<span id="shown" class="muted"></span>
</div>
<h2>Leaderboard</h2>
<div class="table-wrap" id="board"></div>
<h2>Compare two runs</h2>
<div class="controls">
<label>Run A <select id="run-a"></select></label>
<label>Run B <select id="run-b"></select></label>
</div>
<div id="compare-result"></div>
<h2>Item analysis</h2>
<div id="items"></div>
<h2>Model cards</h2>
<div id="cards"></div>
<h2>Rules</h2>
<ul class="rules">{rules}</ul>
<script type="application/json" id="board-data">{embed_json(numbers)}</script>
<script>{_static("board.js")}</script>
</body>
</html>
"""


def write_site(numbers: dict[str, Any], out: str | os.PathLike) -> Path:
    """Write ``out/index.html`` and ``out/board.json``; returns the page."""
    folder = check_out(out)
    page = folder / "index.html"
    try:
        (folder / "board.json").write_text(json.dumps(plain(numbers), indent=1, ensure_ascii=False, allow_nan=False) + "\n",
                                           encoding="utf-8")
        page.write_text(page_html(numbers), encoding="utf-8")
    except OSError as exc:
        raise PRBError(f"Cannot write the board into {out} ({exc.strerror or exc}).") from None
    return page
