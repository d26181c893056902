"""Where prb's manual explains each statistic, so that the report can point to it: the manual's folder and
page, the anchor of each rule on that page (the docs build gives every rule of the generated rules list the
anchor :func:`rule_anchor` names), and the index's line that links them.

The manual is the documentation site, built by ``make docs`` into ``site/`` of prb's source folder; it opens
from disk (``site/index.html``, no server). The index links into it only where the link can work and shows
nothing of this machine: the report lies inside the source folder and the manual is built there. Elsewhere
the line names the page and each rule's section.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

from prb_utils.resources import source_root

MANUAL_DIR = "site"  #: where ``make docs`` builds the manual in prb's source folder (``site_dir`` of mkdocs.yml)
STATISTICS_PAGE = "reference/statistics.html"  #: the manual's page "Every statistic" (pages are files)
#: The statistics the index shows, each with the rule (:func:`prb_utils.analysis.findings.rules_markdown`'s
#: names) that explains it; ``plan, {unit}`` is the store's resampling plan.
INDEX_STATISTICS = (("accuracy", "accuracy"), ("against chance", "chance"), ("shared rank", "rank"),
                    ("rank interval", "rank_interval"), ("lift and its verdict", "lift"), ("ties", "ties"),
                    ("position lock", "lock"), ("oracle", "oracle"), ("intervals and tests", "plan, {unit}"))


def rule_anchor(name: str) -> str:
    """The anchor of the rule ``name`` on the manual's statistics page.

    >>> rule_anchor("plan, question+user"), rule_anchor("rank_interval")
    ('rule-plan-question-user', 'rule-rank-interval')
    """
    return "rule-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def manual_href(out: Path, root: Path | None = None) -> str | None:
    """The built manual's folder as a relative link from the report folder ``out``, or None where it cannot
    work without naming this machine's folders: ``root`` (default: the source folder the package runs from,
    :func:`prb_utils.resources.source_root`) is unknown, ``out`` is not inside it, or the manual is not built.

    >>> manual_href(Path("reports"), root=None) is None
    True
    """
    root = source_root() if root is None else root
    if root is None or not (root / MANUAL_DIR / STATISTICS_PAGE).is_file():
        return None
    out, root = Path(out).resolve(), root.resolve()
    if not out.is_relative_to(root):
        return None
    return Path(os.path.relpath(root / MANUAL_DIR, out)).as_posix()


def manual_html(out: Path, *, unit: str = "question", root: Path | None = None) -> str:
    """The index's paragraph on the manual: where it is and how it opens, and each statistic of
    :data:`INDEX_STATISTICS` linked to its rule's section (:func:`manual_href`; the section named in words
    where no link can work)."""
    base = manual_href(out, root)
    items = []
    for label, rule in INDEX_STATISTICS:
        anchor = rule_anchor(rule.format(unit=unit))
        items.append(f'<a href="{html.escape(f"{base}/{STATISTICS_PAGE}#{anchor}")}">{html.escape(label)}</a>'
                     if base else f"{html.escape(label)} (<code>#{anchor}</code>)")
    where = ("" if base else f" in <code>{MANUAL_DIR}/{STATISTICS_PAGE}</code>")
    return (f'<p class="note">What each statistic means, and the rule that words it, is in prb\'s manual, on its '
            f"page Every statistic{where}: {' · '.join(items)}. The manual opens from disk: "
            f"<code>make docs</code> in prb's source folder builds it into <code>{MANUAL_DIR}/</code>; open "
            f"<code>{MANUAL_DIR}/index.html</code> (no server needed; its search works offline).</p>")

