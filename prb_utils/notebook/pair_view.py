"""One benchmark pair as HTML, and which pairs are worth a look.

:func:`pair_html` shows the question, the profile posts (those the chosen profile condition feeds the RM
highlighted), the rubric aspects and the narrative (the answer key the RM never sees), chosen and rejected
side by side with a word-level diff, and every model's scores for the pair. :func:`pair_summary` gives one
row per pair with what the models did on it, and :func:`filter_pairs` picks the pairs a question is about
(model disagreement, a profile that flips the verdict, wrong verdicts).

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

from prb_utils.errors import PRBError
from prb_utils.schema import FILTERS

_TOKEN = re.compile(r"\S+")
_OUTCOME_COLOURS = {"correct": "#d7f2d7", "wrong": "#f8d4d4", "tie": "#fbeec2", "invalid": "#e3e3e3"}
_CHOSEN_MARK = "background:#b6e8b6;border-radius:2px"
_REJECTED_MARK = "background:#f6c1c1;border-radius:2px"
_BOX = "border:1px solid #ccc;border-radius:6px;padding:8px 10px;margin:6px 0"


#: Notebook frontends right-align table cells; these views read as text, so left-align them.
VIEW_STYLE = ("<style>.prb-view td, .prb-view th { text-align: left !important; vertical-align: top; }"
              " .prb-view table { margin: 0; }</style>")


def view(body: str) -> str:
    """Wrap HTML of this module in the ``prb-view`` block (left-aligned table cells)."""
    return f'{VIEW_STYLE}<div class="prb-view">{body}</div>'


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


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
    from prb_utils.profile import selected_posts

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


def scores_table(results: pd.DataFrame, subset: str, pair_id: str) -> pd.DataFrame:
    """Every model's row for one pair: model, profile, score_chosen, score_rejected, margin, outcome (and
    the judge's per-order probabilities when a judge scored it)."""
    if results is None or results.empty:
        return pd.DataFrame(columns=["model", "profile", "score_chosen", "score_rejected", "margin", "outcome"])
    rows = results[(results["subset"].astype(str) == str(subset)) & (results["id"].astype(str) == str(pair_id))]
    columns = ["model", "profile", "score_chosen", "score_rejected", "outcome"]
    if "p_chosen_ab" in rows and rows["p_chosen_ab"].notna().any():
        columns += ["p_chosen_ab", "p_chosen_ba"]
    table = rows[columns].copy()
    table.insert(4, "margin", table["score_chosen"] - table["score_rejected"])
    return table.sort_values(["model", "profile"]).reset_index(drop=True)


def scores_html(table: pd.DataFrame) -> str:
    if table.empty:
        return "<p><i>No model has scored this pair yet (run <code>prb score</code>).</i></p>"
    head = "".join(f"<th>{esc(c)}</th>" for c in table.columns)
    body = []
    for _, row in table.iterrows():
        cells = []
        for column in table.columns:
            value = row[column]
            if isinstance(value, (float, np.floating)):
                text = "" if np.isnan(value) else f"{value:.4g}"
            else:
                text = "" if value is None else str(value)
            style = f' style="background:{_OUTCOME_COLOURS[value]}"' if column == "outcome" and value in \
                _OUTCOME_COLOURS else ""
            cells.append(f"<td{style}>{esc(text)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f'<table class="prb-scores"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def pair_html(
    record: Mapping[str, Any],
    results: pd.DataFrame | None = None,
    *,
    condition: str = "top3",
    retriever: Any = None,
    show_key: bool = True,
) -> str:
    """HTML of one pair: question, profile posts (those ``condition`` selects highlighted), rubric aspects
    and narrative (when ``show_key``), chosen vs rejected with a word diff, and every model's scores."""
    chosen_html, rejected_html = word_diff(str(record["chosen"]), str(record["rejected"]))
    parts = [
        '<div class="prb-pair" style="font-family:sans-serif;max-width:1100px">',
        f"<h3>{esc(record.get('subset', ''))} / {esc(record['id'])}"
        f" <small>({esc(record.get('category') or 'no category')})</small></h3>",
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
    baseline = res[res["profile"] == "none"][[*key, "model", "_ok"]]
    others = res[res["profile"] != "none"][[*key, "model", "_ok"]]
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
    or ``wrong`` (some model, or ``model`` when given, is not correct under some condition)."""
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
        if model:
            keep &= summary["wrong_models"].map(lambda text: model in text.split(";"))
        else:
            keep &= summary["wrong_models"] != ""
    return summary[keep].reset_index(drop=True)


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


def same_question_groups(data: pd.DataFrame) -> list[list[dict]]:
    """Records that share their question with another user's record, grouped by question (data order)."""
    records = data.to_dict("records")
    groups: dict[str, list[dict]] = {}
    for record in records:
        groups.setdefault(str(record["question"]), []).append(record)
    return [group for group in groups.values() if len(group) > 1]


def two_users_html(records: Sequence[Mapping[str, Any]]) -> str:
    """One question asked by several users: each user's posts, narrative and the answer they want."""
    if not records:
        return view("<p><i>No question is shared by two users in this data.</i></p>")
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
    from prb_utils.profile import rm_user_message

    cells = "".join(
        f'<td style="vertical-align:top;{_BOX}"><b><code>{esc(c)}</code></b>'
        f'<pre style="white-space:pre-wrap;font-size:0.85em">{esc(rm_user_message(record, c, retriever=retriever))}'
        "</pre></td>"
        for c in conditions
    )
    return view(f'<table style="width:100%;table-layout:fixed"><tr>{cells}</tr></table>')


def scores_for(results: pd.DataFrame, records: Sequence[Mapping[str, Any]], *, profile: str | None = None) -> pd.DataFrame:
    """:func:`scores_table` rows of several pairs (an ``id`` column first), optionally one profile condition."""
    parts = [scores_table(results, r.get("subset", ""), r["id"]).assign(id=str(r["id"])) for r in records]
    table = pd.concat(parts, ignore_index=True) if parts else scores_table(results, "", "")
    if profile is not None:
        table = table[table["profile"] == profile]
    return table[["id", *[c for c in table.columns if c != "id"]]].reset_index(drop=True)
