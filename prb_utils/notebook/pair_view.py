"""One benchmark pair as HTML, and which pairs are worth a look.

:func:`pair_html` shows the question, the profile posts (those the chosen profile condition feeds the RM
highlighted), the rubric aspects and the narrative (the answer key the RM never sees), chosen and rejected
side by side with a word-level diff, and every model's scores for the pair. :func:`pair_summary` gives one
row per pair with what the models did on it, and :func:`filter_pairs` picks the pairs a question is about
(model disagreement, a profile that flips the verdict, wrong verdicts). :func:`pair_list_html` is that list
as a searchable, sortable table (itables, its JavaScript embedded: it works offline) whose rows link to the
pairs' cards, each carrying the stable anchor of :func:`pair_anchor`.

>>> a, b = word_diff("use a cheap pan", "use a cast-iron pan")
>>> "cheap" in a and "cast-iron" in b and "prb-only" in a
True
"""

from __future__ import annotations

import difflib
import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from prb_utils.analysis.breakdowns import position_locked
from prb_utils.analysis.marks import LOCKED_MARK, mark_frame
from prb_utils.errors import PRBError
from prb_utils.formatting import format_value, kind_of, render_js
from prb_utils.models.rendered import CUT_MARK, RenderedInput
from prb_utils.notebook.markup import md_code
from prb_utils.notebook.rm_seen import seen_inputs
from prb_utils.notebook.sections import missing_section
from prb_utils.notebook.tables import table_options
from prb_utils.probes import twin_pairs
from prb_utils.profile import rm_user_message, selected_posts
from prb_utils.schema import FILTERS, NO_PROFILE

_TOKEN = re.compile(r"\S+")
_OUTCOME_COLOURS = {"correct": "#d7f2d7", "wrong": "#f8d4d4", "tie": "#fbeec2", "invalid": "#e3e3e3"}
_CHOSEN_MARK = "background:#b6e8b6;border-radius:2px"
_REJECTED_MARK = "background:#f6c1c1;border-radius:2px"
_BOX = "border:1px solid #ccc;border-radius:6px;padding:8px 10px;margin:6px 0"


#: Notebook frontends right-align table cells; these views read as text, so left-align them. Widget HTML
#: inherits the widgets' 28 px line height (text reads double-spaced) and none of the notebook's table padding
#: (headers touch each other): reset the one, pad the cells. The lab CSS breaks ``pre`` text anywhere
#: (``word-break: break-all``): break words only where a long token must be broken.
VIEW_STYLE = ("<style>.prb-view td, .prb-view th { text-align: left !important; vertical-align: top;"
              " padding: 3px 8px; }"
              " .prb-view table { margin: 0; } .prb-view { line-height: 1.45; }"
              " .prb-view pre { word-break: normal !important; overflow-wrap: anywhere; }</style>")
#: Inline style of a box that shows an RM input (pre-formatted text that wraps between words).
PRE_WRAP = "white-space:pre-wrap;word-break:normal;overflow-wrap:anywhere"
_ANCHOR_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]+")
PAIR_LIST_ID = "prb-pair-list"  # the HTML id of a page's list of pairs, which the cards link back to
#: DataTables render function of the pair list's ``correct`` column: shown as ``k/n``, sorted (and typed) as
#: the number k/n (as text "10/10" came before "2/10"); a pair no model scored (``0/0``) sorts first.
SORT_AS_SHARE = ("function (data, type) { if (type !== 'sort' && type !== 'type') { return data; }"
                 " const [k, n] = String(data).split('/').map(Number); return n > 0 ? k / n : -1; }")


def view(body: str) -> str:
    """Wrap HTML of this module in the ``prb-view`` block (left-aligned table cells)."""
    return f'{VIEW_STYLE}<div class="prb-view">{body}</div>'


def esc(text: Any) -> str:
    """``text`` escaped for HTML text and attribute values."""
    return html.escape(str(text), quote=True)


def pair_anchor(subset: Any, pair_id: Any) -> str:
    """The stable HTML id of a pair's card, ``pair-<subset>-<id>`` (characters not allowed in an id
    become ``_``).

    >>> pair_anchor("Art_and_Entertainment", "art-001")
    'pair-Art_and_Entertainment-art-001'
    >>> pair_anchor("my subset", "a/b")
    'pair-my_subset-a_b'
    """
    return f"pair-{_ANCHOR_UNSAFE.sub('_', str(subset))}-{_ANCHOR_UNSAFE.sub('_', str(pair_id))}"


def pair_links_html(frame: pd.DataFrame, *, page: str = "01_pair_inspection.html", float_format: str = "{:.3f}") -> str:
    """``frame`` (columns ``subset`` and ``id`` among others) as an HTML table whose ids link to the pairs'
    cards on ``page`` (anchors of :func:`pair_anchor`); every cell is escaped.

    >>> html_table = pair_links_html(pd.DataFrame({"subset": ["Art"], "id": ["a<1>"], "n": [2]}))
    >>> '<a href="01_pair_inspection.html#pair-Art-a_1_">a&lt;1&gt;</a>' in html_table
    True
    """
    def cell(value: Any) -> str:
        return float_format.format(value) if isinstance(value, float) else esc(value)

    shown = frame.astype(object).map(cell)
    shown["id"] = [f'<a href="{esc(page)}#{pair_anchor(s, i)}">{esc(i)}</a>'
                   for s, i in zip(frame["subset"], frame["id"], strict=True)]
    return shown.to_html(index=False, border=0, escape=False, classes="prb-table")


def _mark(words: Sequence[str], style: str) -> str:
    return f'<span class="prb-only" style="{style}">{esc(" ".join(words))}</span>'


def word_diff(a: str, b: str) -> tuple[str, str]:
    """HTML of ``a`` and ``b`` with the words that only one of them has highlighted (difflib on words)."""
    wa, wb = _TOKEN.findall(a), _TOKEN.findall(b)
    matcher = difflib.SequenceMatcher(None, [w.lower() for w in wa], [w.lower() for w in wb], autojunk=False)
    out_a: list[str] = []
    out_b: list[str] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out_a.append(esc(" ".join(wa[i1:i2])))
            out_b.append(esc(" ".join(wb[j1:j2])))
            continue
        if i2 > i1:
            out_a.append(_mark(wa[i1:i2], _CHOSEN_MARK))
        if j2 > j1:
            out_b.append(_mark(wb[j1:j2], _REJECTED_MARK))
    return " ".join(out_a), " ".join(out_b)


def _posts_html(record: Mapping[str, Any], condition: str, retriever: Any) -> str:
    posts = list(record.get("profile") or [])
    if not posts:
        return "<p><i>No profile posts.</i></p>"
    shown = set(selected_posts(record, condition, retriever=retriever))
    items = []
    for i, post in enumerate(posts):
        category = f"<b>[{esc(post.get('category') or '')}]</b> " if post.get("category") else ""
        if i in shown:
            items.append(f'<li style="background:#fff3b0;padding:2px 4px" class="prb-retrieved">{category}'
                         f'{esc(post["text"])} <small><i>(fed to the RM under {esc(condition)})</i></small></li>')
        else:
            items.append(f'<li style="color:#555">{category}{esc(post["text"])}</li>')
    note = (f"{len(shown)} of {len(posts)} posts reach the RM under <code>{esc(condition)}</code> "
            "(highlighted).")
    return f"<p><small>{note}</small></p><ol>{''.join(items)}</ol>"


def aspects_html(aspects: Sequence[Mapping[str, Any]] | None) -> str:
    aspects = list(aspects or [])
    if not aspects:
        return "<p><i>No rubric aspects in the data.</i></p>"
    rows = "".join(
        f"<tr><td>{esc(a.get('aspect', ''))}</td><td><i>{esc(a.get('evidence', ''))}</i></td>"
        f"<td>{esc(a.get('reason', ''))}</td></tr>"
        for a in aspects
    )
    return ('<table class="prb-aspects"><thead><tr><th>aspect</th><th>evidence (from the narrative)</th>'
            f"<th>reason</th></tr></thead><tbody>{rows}</tbody></table>")




def locked_jobs(results: pd.DataFrame | None) -> set[tuple[str, str]]:
    """The (model, profile) jobs of ``results`` whose judge is position-locked
    (:func:`prb_utils.analysis.breakdowns.position_locked`)."""
    if results is None or results.empty or not {"verdict_ab", "verdict_ba"} <= set(results.columns):
        return set()
    locks = position_locked(results)
    return {(str(m), str(p)) for m, p in locks.loc[locks["locked"].astype(bool), ["model", "profile"]].to_numpy()}


def scores_table(results: pd.DataFrame, subset: str, pair_id: str, *,
                 locked: set[tuple[str, str]] | None = None) -> pd.DataFrame:
    """Every model's row for one pair: model, profile, score_chosen, score_rejected, margin, outcome (and
    the judge's per-order probabilities when a judge scored it). A position-locked judge's model carries
    :data:`LOCKED_MARK` (``locked``: the jobs of :func:`locked_jobs`, computed from ``results`` when None)."""
    if results is None or results.empty:
        return pd.DataFrame(columns=["model", "profile", "score_chosen", "score_rejected", "margin", "outcome"])
    rows = results[(results["subset"].astype(str) == str(subset)) & (results["id"].astype(str) == str(pair_id))]
    columns = ["model", "profile", "score_chosen", "score_rejected", "outcome"]
    if "p_chosen_ab" in rows and rows["p_chosen_ab"].notna().any():
        columns += ["p_chosen_ab", "p_chosen_ba"]
    table = rows[columns].copy()
    table.insert(4, "margin", table["score_chosen"] - table["score_rejected"])
    table = table.sort_values(["model", "profile"]).reset_index(drop=True)
    locked = locked_jobs(results) if locked is None else locked
    if locked:
        marked = [(str(m), str(p)) in locked for m, p in zip(table["model"], table["profile"], strict=True)]
        table["model"] = [f"{m} {LOCKED_MARK}" if flag else m for m, flag in zip(table["model"], marked, strict=True)]
    return table


#: What a judge's per-order columns mean, said under every table that shows them.
P_CHOSEN_NOTE = ("<code>p_chosen_ab</code>: the judge's probability that the chosen answer is the better one when "
                 "it is shown first (as A); <code>p_chosen_ba</code>: the same when it is shown second (as B). "
                 "Above 0.5 the judge picks the chosen answer in that order; a judge that answers by position "
                 "gives one near 1 and the other near 0. Its <code>score_chosen</code> is their mean.")


def scores_html(table: pd.DataFrame) -> str:
    """:func:`scores_table` as HTML, outcomes coloured, floats in one format; a judge's ``p_chosen_ab`` and
    ``p_chosen_ba`` explained under it (:data:`P_CHOSEN_NOTE`) when they are shown.

    >>> "p_chosen_ab</code>: the judge" in scores_html(pd.DataFrame({"p_chosen_ab": [0.9], "p_chosen_ba": [0.2]}))
    True
    """
    if table.empty:
        return "<p><i>No model has scored this pair yet (run <code>prb score</code>).</i></p>"
    head = "".join(f"<th>{esc(c)}</th>" for c in table.columns)
    body = []
    for _, row in table.iterrows():
        cells = []
        for column in table.columns:
            value = row[column]
            if isinstance(value, (float, np.floating)):
                text = "" if np.isnan(value) else format_value(value, column)
            else:
                text = "" if value is None else str(value)
            style = f' style="background:{_OUTCOME_COLOURS[value]}"' if column == "outcome" and value in \
                _OUTCOME_COLOURS else ""
            cells.append(f"<td{style}>{esc(text)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    note = f'<p class="prb-note"><small>{P_CHOSEN_NOTE}</small></p>' if "p_chosen_ab" in table.columns else ""
    return f'<table class="prb-scores"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{note}'


def seen_html(items: Sequence[tuple[str, RenderedInput | str]], *, condition: str) -> str:
    """What each RM saw (:func:`prb_utils.notebook.rm_seen.seen_inputs`) as a folded section of a pair card: per
    model its note and every text it read, a cut marked in red where it falls; "" when there is none.

    >>> from prb_utils.models.rendered import RenderedText
    >>> seen = RenderedInput("m", "judge", (RenderedText("order AB", "posts Q?", 9, 6, "the start"),), "n")
    >>> "posts <b style" in seen_html([("m", seen), ("x", "no reason")], condition="top3")
    True
    """
    if not items:
        return ""
    mark = f'<b style="color:#b22">{esc(CUT_MARK)}</b>'
    blocks = []
    for model, seen in items:
        if isinstance(seen, str):
            blocks.append(f"<p><code>{esc(model)}</code>: <i>n/a: {esc(seen)}</i></p>")
            continue
        texts = "".join(
            f"<p><b>{esc(t.label)}</b>" + (f" ({t.n_tokens:,} tokens)" if t.n_tokens is not None else "")
            + (f' <span style="color:#b22">cut: {esc(t.cut)}</span>' if t.cut else "") + "</p>"
            f'<pre style="{PRE_WRAP};font-size:0.8em;background:#f7f7f7;padding:6px">'
            + (esc(t.text[: t.cut_at]) + mark + esc(t.text[t.cut_at:]) if t.cut_at is not None else esc(t.text))
            + "</pre>" for t in seen.texts)
        flag = ' <span class="prb-cut" style="color:#b22">(truncated)</span>' if seen.truncated else ""
        blocks.append(f'<details class="prb-seen-model"><summary><code>{esc(model)}</code>{flag}</summary>'
                      f"<p><small>{esc(seen.note)}</small></p>{texts}</details>")
    return (f'<details class="prb-seen"><summary><b>What each RM saw</b> under <code>{esc(condition)}</code> '
            "(the exact input its scorer tokenized; open a model)</summary>" + "".join(blocks) + "</details>")


def pair_html(
    record: Mapping[str, Any],
    results: pd.DataFrame | None = None,
    *,
    condition: str = "top3",
    retriever: Any = None,
    show_key: bool = True,
    back_to: str | None = None,
    jobs: pd.DataFrame | None = None,
) -> str:
    """HTML of one pair: question, profile posts (those ``condition`` selects highlighted), rubric aspects
    and narrative (when ``show_key``), chosen vs rejected with a word diff, every model's scores and, with
    ``jobs`` (the store's, :func:`prb_utils.notebook.rm_seen.store_jobs`), what each model saw under
    ``condition`` (:func:`seen_html`); ``back_to``: the id of the list to link back to (:func:`back_link`)."""
    chosen_html, rejected_html = word_diff(str(record["chosen"]), str(record["rejected"]))
    anchor = pair_anchor(record.get("subset", ""), record["id"])
    parts = [
        f'<div class="prb-pair" id="{anchor}" style="font-family:sans-serif;max-width:1100px">',
        f"<h3>{esc(record.get('subset', ''))} / {esc(record['id'])}"
        f" <small>({esc(record.get('category') or 'no category')})</small>{back_link(back_to)}</h3>",
        f'<div style="{_BOX};background:#f4f8ff"><b>Question.</b> {esc(record["question"])}</div>',
        "<details open><summary><b>Profile posts</b> (what the user asked before)</summary>",
        _posts_html(record, condition, retriever),
        "</details>",
    ]
    if show_key:
        parts += [
            "<details open><summary><b>Rubric aspects</b> (the answer key: never shown to an RM)</summary>",
            aspects_html(record.get("rubric_aspects")),
            f'<div style="{_BOX};background:#fafafa"><b>Narrative.</b> <i>{esc(record.get("narrative") or "")}</i>'
            "</div></details>",
        ]
    parts += [
        '<table class="prb-sides" style="width:100%;table-layout:fixed;border-collapse:separate;'
        'border-spacing:8px 0"><tr>'
        '<th style="background:#d7f2d7;text-align:left;padding:4px">chosen (follows the rubric)</th>'
        '<th style="background:#f8d4d4;text-align:left;padding:4px">rejected</th></tr>'
        f'<tr><td style="vertical-align:top;{_BOX}">{chosen_html}</td>'
        f'<td style="vertical-align:top;{_BOX}">{rejected_html}</td></tr></table>',
        "<p><small>Highlighted: the words a word-level diff (difflib) cannot align with the other answer.</small></p>",
        "<b>Scores</b>",
        scores_html(scores_table(results, record.get("subset", ""), record["id"]) if results is not None
                     else pd.DataFrame()),
        seen_html(seen_inputs(record, results, jobs, condition=condition), condition=condition)
        if jobs is not None and results is not None else "",
        "</div>",
    ]
    return view("\n".join(parts))


def pair_summary(data: pd.DataFrame, results: pd.DataFrame) -> pd.DataFrame:
    """One row per pair of ``data``: subset, id, category, question, n_scores, n_correct, disagreement
    (models under one condition differ on correct/not), profile_flips (one model's verdict differs between
    ``none`` and another condition), wrong_models (models with a not-correct row, sorted, ``;``-joined)."""
    base = data[["subset", "id", "category", "question"]].astype({"subset": str, "id": str}).reset_index(drop=True)
    empty = base.assign(n_scores=0, n_correct=0, disagreement=False, profile_flips=False, wrong_models="")
    if results is None or results.empty:
        return empty
    res = results.assign(subset=results["subset"].astype(str), id=results["id"].astype(str),
                         _ok=(results["outcome"] == "correct"))
    key = ["subset", "id"]
    counts = res.groupby(key).agg(n_scores=("_ok", "size"), n_correct=("_ok", "sum")).reset_index()
    per_condition = res.groupby([*key, "profile"])["_ok"].nunique().gt(1).groupby(level=key).any()
    flips = pd.Series(False, index=per_condition.index)
    baseline = res[res["profile"] == NO_PROFILE][[*key, "model", "_ok"]]
    others = res[res["profile"] != NO_PROFILE][[*key, "model", "_ok"]]
    if not baseline.empty and not others.empty:
        both = others.merge(baseline, on=[*key, "model"], suffixes=("", "_none"))
        flipped = both.assign(_flip=both["_ok"] != both["_ok_none"]).groupby(key)["_flip"].any()
        flips = flipped.reindex(per_condition.index, fill_value=False)
    wrong = (res[~res["_ok"]].groupby(key)["model"].agg(lambda m: ";".join(sorted(set(m)))))
    out = base.merge(counts, on=key, how="left")
    out = out.merge(per_condition.rename("disagreement").reset_index(), on=key, how="left")
    out = out.merge(flips.rename("profile_flips").reset_index(), on=key, how="left")
    out = out.merge(wrong.rename("wrong_models").reset_index(), on=key, how="left")
    out["n_scores"] = out["n_scores"].fillna(0).astype(int)
    out["n_correct"] = out["n_correct"].fillna(0).astype(int)
    out["disagreement"] = out["disagreement"].astype("boolean").fillna(False).astype(bool)
    out["profile_flips"] = out["profile_flips"].astype("boolean").fillna(False).astype(bool)
    out["wrong_models"] = out["wrong_models"].fillna("")
    return out


def filter_pairs(
    summary: pd.DataFrame,
    *,
    subset: str | None = None,
    category: str | None = None,
    mode: str = "all",
    model: str | None = None,
) -> pd.DataFrame:
    """Rows of :func:`pair_summary` that match: ``mode`` is ``all``, ``disagreement``, ``profile_flips``
    or ``wrong`` (some model is not correct under some condition); ``model``, when given, keeps only the
    pairs that model is not correct on (under some condition), whatever the mode."""
    if mode not in FILTERS:
        raise PRBError(f"Unknown pair filter '{mode}'; use one of {', '.join(FILTERS)}.")
    keep = pd.Series(True, index=summary.index)
    if subset:
        keep &= summary["subset"] == subset
    if category:
        keep &= summary["category"] == category
    if mode == "disagreement":
        keep &= summary["disagreement"]
    elif mode == "profile_flips":
        keep &= summary["profile_flips"]
    elif mode == "wrong":
        keep &= summary["wrong_models"] != ""
    if model:
        keep &= summary["wrong_models"].map(lambda text: model in text.split(";"))
    return summary[keep].reset_index(drop=True)


def categories(summary: pd.DataFrame, subset: str | None = None) -> list[str]:
    """The categories of :func:`pair_summary`'s pairs, sorted; only those of ``subset`` when given."""
    rows = summary if not subset else summary[summary["subset"] == subset]
    return sorted(str(c) for c in rows["category"].dropna().unique())


def pair_list_frame(summary: pd.DataFrame, *, links: bool = True, question_chars: int = 110) -> pd.DataFrame:
    """:func:`pair_summary` rows as a list to read, every cell HTML-escaped: subset, ``pair`` (the id, a link
    to the pair's card :func:`pair_anchor` when ``links``), category, question (shortened to
    ``question_chars``), correct (``n_correct/n_scores``), models disagree and profile flips (``yes`` or
    empty) and wrong models."""
    def short(text: str) -> str:
        text = " ".join(str(text).split())
        return text if len(text) <= question_chars else text[: question_chars - 1].rstrip() + "…"

    if links:
        names = [f'<a href="#{pair_anchor(s, i)}">{esc(i)}</a>' for s, i in zip(summary["subset"], summary["id"],
                                                                                 strict=True)]
    else:
        names = [esc(i) for i in summary["id"]]
    return pd.DataFrame({
        "subset": [esc(s).replace("_", "_<wbr>") for s in summary["subset"]],  # may wrap after a "_"
        "pair": names,
        "category": [esc(c) for c in summary["category"].fillna("")],
        "question": [esc(short(q)) for q in summary["question"]],
        "correct": [f"{c}/{n}" for c, n in zip(summary["n_correct"], summary["n_scores"], strict=True)],
        "models disagree": ["yes" if v else "" for v in summary["disagreement"]],
        "profile flips": ["yes" if v else "" for v in summary["profile_flips"]],
        "wrong models": [esc(m.replace(";", "; ")) for m in summary["wrong_models"]],
    })


def pair_list_html(summary: pd.DataFrame, *, links: bool = True, table_id: str = PAIR_LIST_ID,
                   page_length: int = 25) -> str:
    """The pairs of ``summary`` as an interactive table (search box, sortable columns, pages of
    ``page_length`` rows) from itables with ``connected=False``: it needs the DataTables bundle that
    ``itables.init_notebook_mode(connected=False)`` embeds in the page (no network). Rows link to the
    pairs' cards when ``links`` (see :func:`pair_list_frame`, which escapes the cells). A click anywhere on
    a header sorts; ``correct`` (``k/n``) sorts by the share k/n (:data:`SORT_AS_SHARE`), not as text."""
    import itables

    frame = pair_list_frame(summary, links=links)
    table = itables.to_html_datatable(
        frame, connected=False, allow_html=True, table_id=table_id, showIndex=False, maxBytes=0,
        classes="display compact", style="width:100%", pageLength=page_length,
        lengthMenu=[10, 25, 50, 100, -1], order=[], autoWidth=False, text_in_header_can_be_selected=False,
        **table_options(len(frame), caption="pairs"),
        columnDefs=[{"className": "dt-left", "targets": "_all"},
                    {"width": "40%", "targets": [frame.columns.get_loc("question")]},
                    {"render": itables.JavascriptFunction(SORT_AS_SHARE), "targets": [frame.columns.get_loc("correct")]}],
    )
    style = f"<style>#{table_id} td {{ overflow-wrap: break-word; word-break: normal; }}</style>"
    return view(style + table)


def back_link(target: str | None) -> str:
    """A small link up to the element ``target`` (the list a card was reached from); "" without one.

    >>> back_link("prb-pair-list")
    ' <a class="prb-back" href="#prb-pair-list" style="font-size:0.7em;font-weight:normal">&uarr; back to the list</a>'
    """
    if not target:
        return ""
    return (f' <a class="prb-back" href="#{esc(target)}" style="font-size:0.7em;font-weight:normal">'
            "&uarr; back to the list</a>")


def pair_brief_html(record: Mapping[str, Any], results: pd.DataFrame | None = None, *,
                    back_to: str | None = None) -> str:
    """A short card of one pair, collapsed (question, then on opening the word diff and the scores), with
    the pair's anchor: the pairs a page does not show in full stay reachable from the pair list; ``back_to``
    as in :func:`pair_html`."""
    chosen_html, rejected_html = word_diff(str(record["chosen"]), str(record["rejected"]))
    anchor = pair_anchor(record.get("subset", ""), record["id"])
    scores = (scores_table(results, record.get("subset", ""), record["id"]) if results is not None
              else pd.DataFrame())
    return view(
        f'<details class="prb-pair-brief" id="{anchor}" style="margin:4px 0">'
        f"<summary><b>{esc(record.get('subset', ''))} / {esc(record['id'])}</b>"
        f" <small>({esc(record.get('category') or 'no category')})</small>: {esc(record['question'])}"
        f"{back_link(back_to)}</summary>"
        '<table style="width:100%;table-layout:fixed"><tr>'
        '<th style="background:#d7f2d7;padding:4px">chosen</th><th style="background:#f8d4d4;padding:4px">'
        f'rejected</th></tr><tr><td style="{_BOX}">{chosen_html}</td><td style="{_BOX}">{rejected_html}</td>'
        f"</tr></table>{scores_html(scores)}</details>"
    )


def filter_counts(summary: pd.DataFrame) -> pd.DataFrame:
    """How many pairs each filter of :func:`filter_pairs` keeps: columns filter, pairs, share."""
    counts = [(mode, len(filter_pairs(summary, mode=mode))) for mode in FILTERS]
    table = pd.DataFrame(counts, columns=["filter", "pairs"])
    table["share"] = table["pairs"] / max(len(summary), 1)
    return table


def flip_table(results: pd.DataFrame, *, baseline: str = "none") -> pd.DataFrame:
    """Per model, the pairs whose verdict changes between ``baseline`` and another profile condition:
    columns model, profile, subset, id, outcome_<baseline>, outcome, margin_<baseline>, margin."""
    columns = ["model", "profile", "subset", "id", f"outcome_{baseline}", "outcome", f"margin_{baseline}", "margin"]
    if results is None or results.empty:
        return pd.DataFrame(columns=columns)
    res = results.assign(margin=results["score_chosen"] - results["score_rejected"],
                         _ok=results["outcome"] == "correct")
    base = res[res["profile"] == baseline][["model", "subset", "id", "outcome", "margin", "_ok"]]
    other = res[res["profile"] != baseline][["model", "profile", "subset", "id", "outcome", "margin", "_ok"]]
    both = other.merge(base, on=["model", "subset", "id"], suffixes=("", f"_{baseline}"))
    flipped = both[both["_ok"] != both[f"_ok_{baseline}"]]
    return flipped[columns].sort_values(["model", "profile", "subset", "id"]).reset_index(drop=True)


FLIP_COLUMNS = ("wrong → correct", "correct → wrong")


def flip_counts(flips: pd.DataFrame, *, baseline: str = "none") -> pd.DataFrame:
    """Per model and profile condition of :func:`flip_table`'s rows: how many verdicts the profile turns from
    wrong to correct (what it is for) and from correct to wrong (the profile distracting the model), against
    ``baseline`` (a tie or invalid verdict counts as wrong). Columns model, profile, and :data:`FLIP_COLUMNS`.

    >>> flips = pd.DataFrame({"model": ["m", "m", "m"], "profile": "top3", "outcome_none": ["wrong", "tie", "correct"],
    ...                       "outcome": ["correct", "correct", "wrong"]})
    >>> flip_counts(flips).values.tolist()
    [['m', 'top3', 2, 1]]
    """
    columns = ["model", "profile", *FLIP_COLUMNS]
    if flips.empty:
        return pd.DataFrame(columns=columns)
    up = flips["outcome"] == "correct"
    counted = flips.assign(**{FLIP_COLUMNS[0]: up.astype(int), FLIP_COLUMNS[1]: (~up).astype(int)})
    return counted.groupby(["model", "profile"], sort=True)[list(FLIP_COLUMNS)].sum().reset_index()[columns]


def flip_list_html(flips: pd.DataFrame, *, cards: Sequence[Any] = (), table_id: str = "prb-flip-list",
                   baseline: str = "none") -> str:
    """:func:`flip_table`'s rows as an interactive table (search, sort on a header click, every row in the
    page) whose ids link to the pairs' cards when the page shows them (``cards``: see :func:`pair_keys`);
    margins stay numbers (they sort as numbers), each shown by its column's kind; a subset name may wrap at its
    underscores, so it never runs over the id beside it; a locked judge and the oracle are marked."""
    import itables

    shown = set(pair_keys(cards))
    frame = mark_frame(flips.astype({"subset": str, "id": str}))
    frame["id"] = [f'<a href="#{pair_anchor(s, i)}">{esc(i)}</a>' if (s, i) in shown else esc(i)
                   for s, i in zip(frame["subset"], frame["id"], strict=True)]
    for column in ("model", "profile", f"outcome_{baseline}", "outcome"):
        frame[column] = frame[column].map(esc)
    frame["subset"] = [esc(s).replace("_", "_<wbr>") for s in frame["subset"]]
    renders = [{"targets": i, "render": itables.JavascriptFunction(render_js(kind_of(c)))}
               for i, c in enumerate(frame.columns) if pd.api.types.is_numeric_dtype(frame[c])]
    table = itables.to_html_datatable(
        frame, connected=False, allow_html=True, table_id=table_id, showIndex=False, maxBytes=0,
        classes="display compact", style="width:100%", pageLength=25, lengthMenu=[10, 25, 50, 100, -1],
        order=[], autoWidth=False, text_in_header_can_be_selected=False, columnDefs=renders,
        **table_options(len(frame), caption="flips"))
    return view(table)


def pair_keys(pairs: Sequence[Any]) -> set[tuple[str, str]]:
    """``(subset, id)`` of each of ``pairs``: records (mappings), ``(subset, id)`` tuples or objects with
    ``subset`` and ``id`` attributes (quiz items: their ``twin`` too).

    >>> sorted(pair_keys([("S", 1), {"subset": "S", "id": "b"}]))
    [('S', '1'), ('S', 'b')]
    """
    keys = set()
    for pair in pairs:
        if isinstance(pair, Mapping):
            keys.add((str(pair.get("subset", "")), str(pair["id"])))
        elif isinstance(pair, tuple):
            keys.add((str(pair[0]), str(pair[1])))
        else:
            keys.add((str(pair.subset), str(pair.id)))
            if getattr(pair, "twin", None) is not None:  # a quiz item shows its twin too
                keys.add((str(pair.twin.subset), str(pair.twin.id)))
    return keys


def disagreeing_twins(data: pd.DataFrame, *, avoid: Sequence[Any] = ()) -> list[list[dict]]:
    """Two users who want opposite answers to the same question, read from the data: each pair with its twin
    (:func:`prb_utils.probes.twin_pairs`: the same question and the same two answers, chosen and rejected swapped),
    each twin pair once, in data order. Twin pairs that hold a pair of ``avoid`` (see :func:`pair_keys`; e.g. the
    quiz's items) come last, so the first gives none of those pairs away. Empty when the data holds no twins.

    >>> frame = pd.DataFrame({"subset": "S", "id": ["a", "b", "c"], "question": "Q", "chosen": ["x", "y", "x"],
    ...                       "rejected": ["y", "x", "y"]})
    >>> disagreeing_twins(frame), disagreeing_twins(frame.iloc[[0, 2]])
    ([], [])
    >>> [[r["id"] for r in twins] for twins in disagreeing_twins(frame.iloc[:2])]
    [['a', 'b']]
    """
    records = {(str(r["subset"]), str(r["id"])): r for r in data.to_dict("records")}
    groups: list[list[dict]] = []
    shown: set[tuple[str, str]] = set()
    for key, twin in twin_pairs(data).items():   # data order: the first of each twin pair leads
        if key not in shown:
            shown |= {key, twin}
            groups.append([records[key], records[twin]])
    avoided = pair_keys(avoid)
    return sorted(groups, key=lambda g: any((str(r["subset"]), str(r["id"])) in avoided for r in g))


#: Section 1 of page 00 on data that holds no twin pair (:func:`disagreeing_twins`).
NO_TWINS = ("No two users in this data want opposite answers to the same question (a twin pair: the same question "
            "and the same two answers, chosen and rejected swapped), so there is no such pair to show.")


def two_users_html(records: Sequence[Mapping[str, Any]]) -> str:
    """One question asked by several users: each user's posts, narrative and the answer they want (:data:`NO_TWINS`
    without records)."""
    if not records:
        return view(f"<p><i>{esc(NO_TWINS)}</i></p>")
    cells = []
    for number, record in enumerate(records, start=1):
        posts = "".join(f"<li>{esc(p.get('text', ''))}</li>" for p in list(record.get("profile") or [])[:3])
        cells.append(
            f'<td style="vertical-align:top;{_BOX}"><h4>User {number} <small>({esc(record["id"])})</small></h4>'
            f"<p><b>Some of their past posts:</b></p><ul>{posts}</ul>"
            f"<p><b>What they want</b> (their narrative, never shown to an RM): <i>{esc(record.get('narrative') or '')}"
            f'</i></p><p><b>The answer they prefer:</b></p><div style="background:#d7f2d7;padding:6px">'
            f"{esc(record['chosen'])}</div></td>"
        )
    return view(f'<div style="{_BOX};background:#f4f8ff"><b>Question (the same for every user).</b> '
                f"{esc(records[0]['question'])}</div>"
                f'<table style="width:100%;table-layout:fixed"><tr>{"".join(cells)}</tr></table>')


def rm_inputs_html(record: Mapping[str, Any], conditions: Sequence[str] = ("none", "top3", "full"),
                   *, retriever: Any = None) -> str:
    """The user turn a reward model sees under each profile condition, side by side."""

    cells = "".join(
        f'<td style="vertical-align:top;{_BOX}"><b><code>{esc(c)}</code></b>'
        f'<pre style="{PRE_WRAP};font-size:0.85em">{esc(rm_user_message(record, c, retriever=retriever))}'
        "</pre></td>"
        for c in conditions
    )
    return view(f'<table style="width:100%;table-layout:fixed"><tr>{cells}</tr></table>')


def scores_for(results: pd.DataFrame, records: Sequence[Mapping[str, Any]], *, profile: str | None = None) -> pd.DataFrame:
    """:func:`scores_table` rows of several pairs (an ``id`` column first), optionally one profile condition."""
    locked = locked_jobs(results)
    parts = [scores_table(results, r.get("subset", ""), r["id"], locked=locked).assign(id=str(r["id"]))
             for r in records]
    table = pd.concat(parts, ignore_index=True) if parts else scores_table(results, "", "")
    if profile is not None:
        table = table[table["profile"] == profile]
    return table[["id", *[c for c in table.columns if c != "id"]]].reset_index(drop=True)


def two_users_margins(results: pd.DataFrame, records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Per model, profile condition and user of ``records`` (the pairs of one shared question): the score
    margin chosen minus rejected and the outcome. Columns model, profile, user (``User 1``, ...), id,
    margin, outcome; empty when no model scored the pairs."""
    columns = ["model", "profile", "user", "id", "margin", "outcome"]
    locked = locked_jobs(results)
    parts = [scores_table(results, r.get("subset", ""), r["id"], locked=locked).assign(user=f"User {n}",
                                                                                     id=str(r["id"]))
             for n, r in enumerate(records, start=1)]
    if not parts:
        return pd.DataFrame(columns=columns)
    table = pd.concat(parts, ignore_index=True)
    return table[columns].sort_values(["model", "profile", "user"]).reset_index(drop=True)


def _jobs_in(rows: pd.DataFrame, most: int = 6) -> str:
    """The models and conditions of ``rows`` in a few words (at most ``most`` names of each, then a count).

    >>> _jobs_in(pd.DataFrame({"model": ["b", "a", "a"], "profile": "none"}))
    '2 model(s) (`a`, `b`) under 1 condition(s) (`none`)'
    """
    def names(column: str) -> str:
        values = sorted(rows[column].astype(str).unique())
        more = f", {len(values) - most} more" if len(values) > most else ""
        return f"{len(values)} {column.replace('profile', 'condition')}(s) (" + \
            ", ".join(md_code(v) for v in values[:most]) + more + ")"
    return f"{names('model')} under {names('profile')}"


def margins_missing(scores: pd.DataFrame, records: Sequence[Mapping[str, Any]], *, stored: pd.DataFrame,
                    how: str) -> str:
    """Page 00's words where :func:`two_users_margins` is empty, as Markdown: no twin pair to show; or what the store
    holds on this data (``stored``: every row of the store on the page's pairs) against what the page looked for
    (``scores``: the rows of its models and conditions), and the command ``how`` that fills the gap.

    >>> rows = pd.DataFrame({"model": "length", "profile": "none", "id": ["x"]})
    >>> margins_missing(rows.iloc[:0], [{"id": "a"}], stored=rows, how="prb score")
    '*The store holds 1 scored row(s) on this data, from 1 model(s) (`length`) under 1 condition(s) (`none`), none of them for the models and conditions this page shows. Score them (seconds for the baselines), then run this notebook again:* `prb score`'
    """
    if not records:
        return "*No twin pair in this data (section 1): no margins to compare.*"
    if stored.empty:
        missing = "No model scores in the store for this data yet"
    elif scores.empty:
        missing = (f"The store holds {len(stored)} scored row(s) on this data, from {_jobs_in(stored)}, none of them "
                   "for the models and conditions this page shows")
    else:
        missing = (f"The store holds {len(scores)} scored row(s) for this page's models and conditions, from "
                   f"{_jobs_in(scores)}, none of them for the two users' pairs "
                   + " and ".join(md_code(r["id"]) for r in records))
    return missing_section(missing, how, fill="Score them", cost="seconds for the baselines")


def own_and_other_profile(margins: pd.DataFrame, *, base: str = "top3") -> pd.DataFrame:
    """Per model and user of :func:`two_users_margins`: the margin and outcome with the user's own profile (the
    ``base`` condition) and with the other user's (the ``swap`` probe, ``base+swap``: for a twin pair, its twin
    user's profile), and whether the verdict flips. An RM that reads the user flips; one that ignores the
    profile does not. Empty when the store holds no ``base+swap`` rows for these pairs.

    >>> m = pd.DataFrame({"model": "m", "profile": ["top3", "top3+swap"], "user": "User 1", "id": "a",
    ...                   "margin": [0.4, -0.2], "outcome": ["correct", "wrong"]})
    >>> own_and_other_profile(m)[["model", "user", "margin_own", "margin_other", "flips"]].values.tolist()
    [['m', 'User 1', 0.4, -0.2, True]]
    """
    columns = ["model", "user", "id", "margin_own", "outcome_own", "margin_other", "outcome_other", "flips"]
    own = margins[margins["profile"] == base]
    other = margins[margins["profile"] == f"{base}+swap"]
    if own.empty or other.empty:
        return pd.DataFrame(columns=columns)
    both = own.merge(other, on=["model", "user", "id"], suffixes=("_own", "_other"))
    both["flips"] = both["outcome_own"] != both["outcome_other"]
    return both[columns].reset_index(drop=True)


def two_users_plot(margins: pd.DataFrame, *, conditions: Sequence[str] | None = None) -> Any:
    """One panel per model: each user's margin (chosen minus rejected) under each profile condition, a dot
    coloured by whether the model is right for that user, and the zero line (above it: right). Under
    ``none`` the users' pairs are the same two answers swapped, so a pointwise RM's two margins mirror each
    other across zero: it is right for exactly one user. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(margins["model"]))
    if not models:
        raise PRBError("No model scored the two users' pairs: there is nothing to plot.")
    order = list(conditions) if conditions else list(dict.fromkeys(margins["profile"]))
    users = sorted(margins["user"].unique())
    columns = min(len(models), 5)
    rows = -(-len(models) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.0 * columns + 0.6, 3.0 * rows), squeeze=False)
    colours = {True: "#1a9641", False: "#d7191c"}
    markers = ["o", "s", "^", "D"]
    width = 0.35
    for ax, model in zip(axes.flat, models, strict=False):
        group = margins[margins["model"] == model]
        for u, user in enumerate(users):
            rows_u = group[group["user"] == user].set_index("profile").reindex(order)
            x = [i + (u - (len(users) - 1) / 2) * width for i in range(len(order))]
            ok = (rows_u["outcome"] == "correct").tolist()
            ax.scatter(x, rows_u["margin"], c=[colours[v] for v in ok], marker=markers[u % len(markers)],
                       s=70, edgecolors="black", linewidths=0.6, zorder=3)
            for xi, yi in zip(x, rows_u["margin"], strict=True):
                if pd.notna(yi):
                    ax.plot([xi, xi], [0, yi], color="#777", linewidth=1, zorder=2)
        ax.axhline(0, color="black", linewidth=1)
        ax.set_xticks(range(len(order)), order)
        ax.set_xlim(-0.6, len(order) - 0.4)
        ax.set_title(model, fontsize=10)
    for ax in list(axes.flat)[len(models):]:
        ax.set_visible(False)
    axes[0, 0].set_ylabel("margin: chosen − rejected")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], linestyle="", marker=markers[u % len(markers)], color="#999", markeredgecolor="black",
                      label=user) for u, user in enumerate(users)]
    handles += [Line2D([], [], linestyle="", marker="o", color=colours[v], label=text)
                for v, text in ((True, "right for this user"), (False, "wrong for this user"))]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4), frameon=False, fontsize=9,
               bbox_to_anchor=(0.5, -0.02))
    fig.suptitle("One question, two users: each model's margin per user and profile condition", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig
