"""The options every interactive table of a page shares: a CSV download button, and a layout that keeps it
beside the page-length menu, the search box, the row count and the pages (itables alone puts the button in the
menu's place).

>>> options = table_options(42, caption="Pairs")
>>> options["layout"]["topStart"], options["layout"]["top2Start"], options["buttons"][0]["filename"]
('pageLength', 'buttons', 'Pairs')
>>> table_options(3)["layout"]["topStart"] is None   # a table on one page needs no paging controls
True
"""

from __future__ import annotations

import re
from typing import Any

#: The download button: the table's rows as CSV, built in the browser (DataTables Buttons, bundled with itables:
#: nothing fetched), the numbers as stored (``orthogonal: "export"``: not as rounded for display).
CSV_BUTTON: dict[str, Any] = {"extend": "csvHtml5", "text": "CSV", "titleAttr": "Download this table as CSV",
                              "filename": "table", "exportOptions": {"orthogonal": "export"}}
ONE_PAGE = 10  # itables' smallest page length: a table with no more rows shows no paging controls


def csv_button(caption: str = "") -> dict[str, Any]:
    """:data:`CSV_BUTTON` with a file name from ``caption`` (its words joined by ``_``, at most 60 characters).

    >>> csv_button("Accuracy per model and condition")["filename"]
    'Accuracy_per_model_and_condition'
    """
    name = "_".join(re.findall(r"[A-Za-z0-9]+", caption))[:60].strip("_")
    return {**CSV_BUTTON, "filename": name or CSV_BUTTON["filename"]}


def table_options(rows: int, *, caption: str = "", one_page: int = ONE_PAGE) -> dict[str, Any]:
    """itables options of a table of ``rows`` rows: its CSV button (:func:`csv_button`) on a row of its own above
    the table, and the paging controls (page length, search, row count, pages) only where the rows fill more than
    one page of ``one_page`` rows."""
    paged = rows > one_page
    layout = {"topStart": "pageLength", "topEnd": "search", "bottomStart": "info", "bottomEnd": "paging"}
    return {"buttons": [csv_button(caption)],
            "layout": {**{k: (v if paged else None) for k, v in layout.items()}, "top2Start": "buttons"}}
