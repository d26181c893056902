"""The leaderboard as a page shows it: one block per profile condition (small multiples), one compact row per
model, each number with its verdict in words beside it, the secondary columns behind a toggle.

:func:`board_html` renders :class:`prb_utils.analysis.findings.Findings` for page 02 and the index alike (the same
HTML, the same words): per benchmark condition a table of rank, model, accuracy [95% CI], its verdict against
chance and (for a condition with a lift) the lift over the baseline [95% CI] with its verdict; kind, pairs, ties
and the rank range are secondary, shown when "more columns" is ticked (a checkbox and CSS: no script). The oracle
is a block of its own, never ranked. Each model's name links to its section on page 01 (its pairs) and page 05
(its probes), at :func:`prb_utils.notebook.markup.model_anchor`, where the page holds one
(:func:`prb_utils.notebook.model_sections.page_sections`); elsewhere the word is plain text whose title says why. The stylesheet (:data:`BOARD_CSS`)
travels with the table: on a phone (390 px) each row stacks its cells under their labels, in print every
condition's block and every verdict is printed and a block is not split across pages.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from prb_utils.analysis.findings import BLIND_NOTE, Findings, rank_span
from prb_utils.analysis.leaderboard import RULES
from prb_utils.formatting import COUNT, MISSING, PROPORTION, format_interval, format_signed, format_value
from prb_utils.notebook.markup import model_anchor
from prb_utils.notebook.model_sections import PAIRS_PAGE, linked_pages, section_models
from prb_utils.notebook.pair_view import pair_anchor
from prb_utils.profile import condition_sort_key

LOCKED_TEXT = "position-locked: not ranked"
LOCKED_ROW = ' class="locked"'  # a locked judge's row: greyed
MORE_LABEL = "more columns: kind, pairs, ties"
BOARD_CSS = """
.prb-board { font-size: 0.95em; }
.prb-board table.prb-board-table { border-collapse: collapse; margin: 0.2em 0 1em; width: auto; max-width: 100%;
  table-layout: auto; }
.prb-board th, .prb-board td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left !important;
  vertical-align: top; word-break: normal; overflow-wrap: normal; hyphens: none; }
.prb-board td.num { white-space: nowrap; }
.prb-board .verdict { font-weight: bold; }
.prb-board .why { color: #555; font-size: 0.85em; }
.prb-board .links { font-size: 0.8em; white-space: nowrap; }
.prb-board .links a, .prb-board .links .none { margin-right: 0.5em; }
.prb-board .links .none { color: #777; cursor: help; }
.prb-board h4 { margin: 0.8em 0 0.2em; }
.prb-board input.prb-board-more:not(:checked) ~ section .secondary { display: none; }
.prb-board label { font-size: 0.85em; color: #555; cursor: pointer; }
.prb-board > input.prb-board-more, .prb-board > label { float: right; margin-top: 0.9em; }
.prb-board tr.locked td { color: #666; }
@media screen and (max-width: 600px) {
  .prb-board table.prb-board-table, .prb-board tbody, .prb-board tr, .prb-board td { display: block; width: auto; }
  .prb-board thead { display: none; }
  .prb-board tr { border-bottom: 2px solid #bbb; padding: 4px 0; }
  .prb-board td { border: none; padding: 1px 4px; white-space: normal; }
  .prb-board td::before { content: attr(data-label) ": "; color: #555; font-size: 0.85em; }
}
@media print {
  .prb-board section { break-inside: avoid; page-break-inside: avoid; }
  .prb-board label, .prb-board input { display: none !important; }
  .prb-board th, .prb-board td { padding: 2px 5px; }
}
@media screen and (prefers-color-scheme: dark) {
  .prb-board th, .prb-board td { border-bottom-color: #444; }
  .prb-board .why, .prb-board label, .prb-board tr.locked td { color: #b0b0b0; }
}
"""


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def rank_words(rank: float, low: float, high: float, shared: int) -> str:
    """The words beside a shared rank: who shares it and which ranks the tests leave open (:data:`RULES`
    ``rank`` and ``rank_interval``), so "1" beside "1–3" never stands without a word; "" for a clear rank.

    >>> rank_words(1, 1, 3, 2)
    'tied with the leader (2 share rank 1); possible ranks 1–3'
    >>> rank_words(2, 2, 2, 1), rank_words(3, 3, 4, 2)
    ('', 'shared by 2; possible ranks 3–4')
    """
    words = []
    if rank == 1 and shared > 1:
        words.append(f"{RULES['rank'].verdicts[0]} ({shared} share rank 1)")
    elif shared > 1:
        words.append(f"shared by {shared}")
    span = rank_span(low, high)
    if "–" in span:
        words.append(f"possible ranks {span}")
    return "; ".join(words)


def model_links(model: str, sections: Mapping[str, set[str]], *, suffix: str = ".html") -> str:
    """Links from a leaderboard row to the model's sections (:data:`~prb_utils.notebook.model_sections.MODEL_PAGES`,
    at :func:`~prb_utils.notebook.markup.model_anchor`) on the pages ``sections`` (page -> the models with a
    section there: :func:`~prb_utils.notebook.model_sections.page_sections`) says hold one; for another page the
    word is plain text whose title says why there is no section.

    >>> model_links("lexical", {"01_pair_inspection": {"lexical"}})
    '<span class="links"><a href="01_pair_inspection.html#model-lexical">pairs</a><span class="none" title="not probed on top3: `prb probe --model SPEC` adds its probes to page 05">probes</span></span>'
    """
    links = "".join(f'<a href="{_esc(target.page)}{_esc(suffix)}#{model_anchor(model)}">{_esc(target.what)}</a>'
                    if has else f'<span class="none" title="{_esc(target.missing)}">{_esc(target.what)}</span>'
                    for target, has in linked_pages(model, sections))
    return f'<span class="links">{links}</span>'


def _td(label: str, body: str, css: str = "") -> str:
    classes = f' class="{css}"' if css else ""
    return f'<td data-label="{_esc(label)}"{classes}>{body}</td>'


def _condition_block(part: pd.DataFrame, condition: str, baseline: str, *, links: str,
                     sections: Mapping[str, set[str]] | None, blind: Sequence[str] = ()) -> str:
    """One condition's table: a row per model, its rank with words, accuracy and chance, lift and verdict (a
    model with no lift says why: ``blind``, the models that never read the profile, or its lock)."""
    with_lift = bool((part["lift_verdict"] != "").any())
    lift_head = f"lift over {baseline} [95% CI]"
    heads = ["rank", "model", "accuracy [95% CI]", "against chance"]
    heads += [lift_head, "lift verdict"] if with_lift else []
    secondary = ["kind", "pairs", "ties (rate)"]
    shared = part.loc[part["rank"].notna(), "rank"].value_counts()
    rows = []
    for r in part.itertuples():
        rank = ("—" if r.locked else format_value(r.rank, "rank"))
        words = "" if r.locked else rank_words(r.rank, r.rank_low, r.rank_high, int(shared.get(r.rank, 0)))
        rank_cell = f"<b>{_esc(rank)}</b>" + (f' <span class="why">({_esc(words)})</span>' if words else "")
        name = f"{_esc(r.model)}" + (f" {model_links(str(r.model), sections, suffix=links)}"
                                     if links and sections is not None else "")
        chance = LOCKED_TEXT if r.locked else r.chance
        ties = f"{format_value(r.ties, sense=COUNT)} ({format_value(r.tie_rate, sense=PROPORTION)})"
        ties += f"; {format_value(r.near_ties, sense=COUNT)} near" if r.near_ties else ""
        cells = [_td("rank", rank_cell), _td("model", name),
                 _td("accuracy", _esc(format_interval(r.accuracy, r.ci_low, r.ci_high)), "num"),
                 _td("against chance", f'<span class="verdict">{_esc(chance)}</span>')]
        if with_lift:
            lift = (f"{format_signed(r.lift)} [{format_signed(r.lift_low)}, {format_signed(r.lift_high)}]"
                    if r.lift_verdict else MISSING)
            verdict = r.lift_verdict or ("n/a: position-locked" if r.locked else f"n/a: {BLIND_NOTE}"
                                         if r.model in blind else MISSING)
            cells += [_td(lift_head, _esc(lift), "num"),
                      _td("lift verdict", f'<span class="verdict">{_esc(verdict)}</span>')]
        cells += [_td("kind", _esc(r.kind), "secondary"), _td("pairs", _esc(format_value(r.n, "n")), "secondary num"),
                  _td("ties (rate)", _esc(ties), "secondary num")]
        rows.append(f"<tr{LOCKED_ROW if r.locked else ''}>{''.join(cells)}</tr>")
    head = "".join(f"<th>{_esc(h)}</th>" for h in heads) + "".join(
        f'<th class="secondary">{_esc(h)}</th>' for h in secondary)
    title = f"Under {condition}" + (" (the baseline: no lift)" if condition == baseline else "")
    return (f'<section class="prb-board-condition" data-condition="{_esc(condition)}"><h4>{_esc(title)}</h4>'
            f'<table class="prb-board-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            "</table></section>")


def _oracle_block(oracle: pd.DataFrame) -> str:
    rows = "".join(
        f'<tr>{_td("model", _esc(r.model))}{_td("oracle accuracy", _esc(format_value(r.oracle_accuracy, "accuracy")), "num")}'
        f'{_td("best benchmark condition", _esc(r.best_condition))}'
        f'{_td("its accuracy", _esc(format_value(r.best_accuracy, "accuracy")), "num")}'
        f'{_td("gap", _esc(format_signed(r.gap)), "num")}'
        f'{_td("verdict", f"<span class=verdict>{_esc(r.verdict)}</span>")}</tr>'
        for r in oracle.itertuples())
    heads = "".join(f"<th>{h}</th>" for h in ("model", "oracle accuracy", "best benchmark condition",
                                              "its accuracy", "gap", "verdict"))
    return ('<section class="prb-board-condition prb-board-oracle"><h4>Oracle: the RM saw the answer key '
            "(a diagnostic, never a benchmark result, never ranked)</h4>"
            f'<table class="prb-board-table"><thead><tr>{heads}</tr></thead><tbody>{rows}</tbody></table></section>')


def board_html(found: Findings, *, baseline: str = "none", links: str = ".html", key: str = "board",
               sections: Mapping[str, set[str]] | None = None) -> str:
    """The leaderboard of ``found``: one block per benchmark condition (in order), the oracle's block last, the
    secondary columns behind the "more columns" toggle (its id ``prb-<key>-more``: give each board of one page
    its own ``key``), every name escaped. ``links``: the suffix of the pages each model links to (``".html"``
    in a report, ``".ipynb"`` live; "" for no links); ``sections``: the models with a section on each page
    (:func:`prb_utils.notebook.model_sections.page_sections`; :func:`model_links`), None for no links."""
    board = found.board
    toggle = f"prb-{_esc(key)}-more"
    blocks = [_condition_block(board[board["profile"] == c], c, baseline, links=links, sections=sections,
                               blind=found.profile_blind)
              for c in found.conditions()]
    if not found.oracle.empty:
        blocks.append(_oracle_block(found.oracle))
    return (f'<div class="prb-board"><style>{BOARD_CSS}</style>'
            f'<input type="checkbox" class="prb-board-more" id="{toggle}">'
            f'<label for="{toggle}"> {_esc(MORE_LABEL)}</label>{"".join(blocks)}</div>')


def model_section_html(model: str, body: str, *, title: str = "") -> str:
    """``body`` (HTML) as the section of ``model`` on a page, at :func:`~prb_utils.notebook.markup.model_anchor`
    (the target of the leaderboard's links), under a heading naming the model.

    >>> model_section_html("lexical", "<p>x</p>")
    '<section class="prb-model" id="model-lexical"><h4>lexical</h4><p>x</p></section>'
    """
    heading = _esc(model) + (f": {_esc(title)}" if title else "")
    return f'<section class="prb-model" id="{model_anchor(model)}"><h4>{heading}</h4>{body}</section>'


def model_pairs_html(results: pd.DataFrame, *, cards: Any = None) -> str:
    """Per model of ``results`` (per-item rows; :func:`prb_utils.notebook.model_sections.section_models` of page
    01), its section (:func:`model_section_html`): per condition, how many
    pairs it gets right and the ids of those it does not, each linked to its card on the page
    (:func:`prb_utils.notebook.pair_view.pair_anchor`) when ``cards`` (frame with ``subset``, ``id``: the pairs
    whose cards the page shows; anything else, e.g. a live browser's widget, links none) holds it."""
    shown = set() if not isinstance(cards, pd.DataFrame) else {(str(s), str(i)) for s, i in zip(cards["subset"], cards["id"], strict=True)}
    parts = []
    for model in section_models(PAIRS_PAGE, results):   # the rule the leaderboard links by
        mine, lines = results[results["model"].astype(str) == model], []
        for condition, rows in sorted(mine.groupby("profile"), key=lambda kv: condition_sort_key(kv[0])):
            wrong = rows[rows["outcome"] != "correct"].sort_values(["subset", "id"])
            ids = ", ".join(
                f'<a href="#{pair_anchor(s, i)}">{_esc(i)}</a>' if (str(s), str(i)) in shown else _esc(i)
                for s, i in zip(wrong["subset"], wrong["id"], strict=True))
            lines.append(f"<li>under <code>{_esc(condition)}</code>: right on "
                         f"{int((rows['outcome'] == 'correct').sum())} of {len(rows)} pairs"
                         + (f"; not right on: {ids}" if ids else "") + "</li>")
        parts.append(model_section_html(str(model), f"<ul>{''.join(lines)}</ul>"))
    return "".join(parts)
