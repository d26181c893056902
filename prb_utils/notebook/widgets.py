"""Notebook widgets: a pair browser and a "you are the reward model" quiz.

Each widget takes ``interactive``. When it is False, or when no frontend can show widgets (papermill keeps
no widget state; see :func:`prb_utils.notebook.params.headless`), the same content is displayed as static
HTML tables instead, so the HTML reports are complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from prb_utils.errors import PRBError
from prb_utils.notebook.pair_view import filter_pairs, pair_html, pair_summary, view
from prb_utils.notebook.params import headless
from prb_utils.schema import FILTERS


def _display(obj: Any) -> None:
    from IPython.display import display

    display(obj)


def _html(text: str) -> Any:
    from IPython.display import HTML

    return HTML(text)


def use_widgets(interactive: bool) -> bool:
    """True when widgets should be shown: asked for, and a frontend is there to show them."""
    return bool(interactive) and not headless()


def frame_html(frame: pd.DataFrame, *, float_format: str = "{:.3f}", max_rows: int = 60) -> str:
    """A frame as a compact HTML table (floats rounded, index dropped; the first ``max_rows`` rows, and a
    line saying how many more there are)."""
    table = frame.head(max_rows).to_html(index=False, border=0, classes="prb-table",
                                         float_format=lambda x: float_format.format(x), na_rep="")
    more = len(frame) - max_rows
    return table + (f"<p><i>… and {more} more rows.</i></p>" if more > 0 else "")


# ------------------------------------------------------------------------------------------ pair browser


def pair_browser(
    data: pd.DataFrame,
    results: pd.DataFrame,
    *,
    interactive: bool = True,
    condition: str = "top3",
    subset: str | None = None,
    category: str | None = None,
    mode: str = "all",
    model: str | None = None,
    pair_id: str | None = None,
    max_pairs: int = 5,
) -> Any:
    """Browse pairs by subset, category and filter (see :func:`prb_utils.notebook.pair_view.filter_pairs`).

    With widgets: dropdowns for the filters and the pair, the pair shown below. Static: the table of
    matching pairs, then the first ``max_pairs`` of them (or ``pair_id``) in full. Returns the widget box,
    or the frame of matching pairs when static.
    """
    summary = pair_summary(data, results)
    records = {(str(r["subset"]), str(r["id"])): r for r in data.to_dict("records")}
    if not use_widgets(interactive):
        return _static_browser(summary, records, results, condition=condition, subset=subset, category=category,
                               mode=mode, model=model, pair_id=pair_id, max_pairs=max_pairs)
    import ipywidgets as w

    def options(column: str) -> list[tuple[str, str]]:
        return [("(any)", "")] + [(v, v) for v in sorted(summary[column].dropna().unique())]

    models = sorted(results["model"].unique()) if not results.empty else []
    subset_w = w.Dropdown(options=options("subset"), value=subset or "", description="subset")
    category_w = w.Dropdown(options=options("category"), value=category or "", description="category")
    mode_w = w.Dropdown(options=list(FILTERS), value=mode, description="filter")
    model_w = w.Dropdown(options=[("(any)", "")] + [(m, m) for m in models], value=model or "",
                         description="wrong model")
    pair_w = w.Dropdown(options=[], description="pair", layout=w.Layout(width="60%"))
    count_w = w.HTML()
    out = w.Output()

    def refresh(*_: Any) -> None:
        found = filter_pairs(summary, subset=subset_w.value or None, category=category_w.value or None,
                             mode=mode_w.value, model=model_w.value or None)
        count_w.value = f"<b>{len(found)}</b> of {len(summary)} pairs match"
        labels = [(f"{r.subset}/{r.id} [{r.category}] {r.question[:60]}", f"{r.subset}\t{r.id}")
                  for r in found.itertuples()]
        pair_w.options = labels
        if labels:
            wanted = next((v for _, v in labels if pair_id and v.endswith(f"\t{pair_id}")), labels[0][1])
            pair_w.value = wanted
        show()

    def show(*_: Any) -> None:
        out.clear_output()
        with out:
            if pair_w.value:
                key = tuple(pair_w.value.split("\t", 1))
                _display(_html(pair_html(records[key], results, condition=condition)))
            else:
                _display(_html("<i>No pair matches these filters.</i>"))

    for widget in (subset_w, category_w, mode_w, model_w):
        widget.observe(refresh, names="value")
    pair_w.observe(show, names="value")
    box = w.VBox([w.HBox([subset_w, category_w]), w.HBox([mode_w, model_w]), count_w, pair_w, out])
    refresh()
    _display(box)
    return box


def _static_browser(summary: pd.DataFrame, records: dict, results: pd.DataFrame, *, condition: str,
                    subset: str | None, category: str | None, mode: str, model: str | None,
                    pair_id: str | None, max_pairs: int) -> pd.DataFrame:
    found = filter_pairs(summary, subset=subset, category=category, mode=mode, model=model)
    title = f"Pairs matching filter <code>{mode}</code>" + (f", model <code>{model}</code>" if model else "") + \
        (f", subset <code>{subset}</code>" if subset else "") + (f", category <code>{category}</code>" if category else "")
    shown = found[["subset", "id", "category", "n_scores", "n_correct", "disagreement", "profile_flips",
                   "wrong_models"]]
    _display(_html(f"<h4>{title}: {len(found)} of {len(summary)}</h4>" + frame_html(shown)))
    picked = found[found["id"] == pair_id] if pair_id else found
    if pair_id and picked.empty:
        raise PRBError(f"The pair '{pair_id}' is not among the {len(found)} pairs matching the filters.")
    for row in picked.head(max_pairs).itertuples():
        _display(_html(pair_html(records[(row.subset, row.id)], results, condition=condition)))
    if len(picked) > max_pairs:
        _display(_html(f"<p><i>{len(picked) - max_pairs} more matching pairs not shown (raise max_pairs, "
                       "or open the notebook in JupyterLab to browse them).</i></p>"))
    return found


# --------------------------------------------------------------------------------------------- the quiz


@dataclass(frozen=True)
class QuizItem:
    """One quiz pair: which record, and which side (A or B) holds the chosen answer."""

    subset: str
    id: str
    chosen_side: str  # "A" or "B"


def quiz_items(data: pd.DataFrame, n: int, *, seed: int = 0) -> list[QuizItem]:
    """``n`` pairs for the quiz (seeded), each with a random side for the chosen answer. Pairs that share
    their question with another user's pair come first, so the quiz starts with the idea of the workshop."""
    rng = np.random.default_rng(seed)
    shared = data.groupby("question")["id"].transform("size") > 1
    first = data[shared].sort_values(["subset", "id"])
    rest = data[~shared].iloc[rng.permutation(int((~shared).sum()))]
    picked = pd.concat([first.head(2), rest, first.iloc[2:]]).head(n)
    sides = rng.integers(0, 2, size=len(picked))
    return [QuizItem(str(r.subset), str(r.id), "A" if s == 0 else "B")
            for r, s in zip(picked.itertuples(), sides, strict=True)]


def quiz_comparison(items: Sequence[QuizItem], answers: Sequence[str | None], results: pd.DataFrame) -> pd.DataFrame:
    """Accuracy on the quiz pairs: one row for you (the answered items) and one per model and profile
    condition in ``results`` (the same pairs). Columns who, profile, n, correct, accuracy, ci_low, ci_high
    (Wilson 95%)."""
    from prb_utils.analysis.metrics import wilson_ci

    rows = []
    answered = [(item, a) for item, a in zip(items, answers, strict=False) if a in ("A", "B")]
    rows.append({"who": "you", "profile": "what the RM sees", "n": len(answered),
                 "correct": sum(a == item.chosen_side for item, a in answered)})
    if results is not None and not results.empty:
        keys = {(i.subset, i.id) for i in items}
        mask = [(str(s), str(i)) in keys for s, i in zip(results["subset"], results["id"], strict=True)]
        for (model, profile), group in results[mask].groupby(["model", "profile"], sort=True):
            rows.append({"who": model, "profile": profile, "n": len(group),
                         "correct": int((group["outcome"] == "correct").sum())})
    table = pd.DataFrame(rows, columns=["who", "profile", "n", "correct"])
    table["accuracy"] = table["correct"] / table["n"].where(table["n"] > 0)
    table["ci_low"], table["ci_high"] = wilson_ci(table["correct"].to_numpy(), table["n"].to_numpy())
    return table


@dataclass
class QuizSession:
    """The quiz as it stands: its pairs, your answers so far (None = not answered) and the model scores."""

    items: list[QuizItem]
    answers: list[str | None]
    results: pd.DataFrame

    def comparison(self) -> pd.DataFrame:
        """Your accuracy beside the models' on the quiz pairs (see :func:`quiz_comparison`)."""
        return quiz_comparison(self.items, self.answers, self.results)


def _quiz_question_html(record: dict, item: QuizItem, number: int, condition: str) -> str:
    from prb_utils.notebook.pair_view import esc
    from prb_utils.profile import rm_user_message

    a, b = (record["chosen"], record["rejected"]) if item.chosen_side == "A" else (record["rejected"], record["chosen"])
    box = "border:1px solid #ccc;border-radius:6px;padding:8px;vertical-align:top"
    return view(
        f"<h4>Pair {number}: {esc(record['subset'])}/{esc(record['id'])}</h4>"
        f"<p><b>What the RM sees</b> (profile condition <code>{esc(condition)}</code>):</p>"
        f'<pre style="white-space:pre-wrap;background:#f4f8ff;padding:8px">{esc(rm_user_message(record, condition))}</pre>'
        '<table style="width:100%;table-layout:fixed"><tr><th>Response A</th><th>Response B</th></tr>'
        f'<tr><td style="{box}">{esc(a)}</td><td style="{box}">{esc(b)}</td></tr></table>'
    )


def _quiz_reveal_html(record: dict, item: QuizItem, answer: str | None, results: pd.DataFrame) -> str:
    from prb_utils.notebook.pair_view import aspects_html, esc, scores_html, scores_table

    if answer in ("A", "B"):
        verdict = ("<b style='color:#1a7f1a'>Right!</b>" if answer == item.chosen_side
                   else "<b style='color:#b22'>Not this user's choice.</b>")
        verdict = f"You picked {answer}. {verdict} "
    else:
        verdict = "No guess recorded. "
    return view(
        f'<div class="prb-reveal" style="border-left:4px solid #888;padding-left:8px">'
        f"<p>{verdict}The user wanted <b>Response {item.chosen_side}</b>. Their rubric:</p>"
        f"{aspects_html(record.get('rubric_aspects'))}"
        f"<p><i>In their words:</i> {esc(record.get('narrative') or '')}</p>"
        f"<p>What the models said on this pair:</p>{scores_html(scores_table(results, item.subset, item.id))}</div>"
    )


def _comparison_html(items: Sequence[QuizItem], answers: Sequence[str | None], results: pd.DataFrame) -> str:
    table = quiz_comparison(items, answers, results).drop(columns=["ci_low", "ci_high"])
    note = "" if results is not None and not results.empty else (
        "<p><i>No model scores in the store yet: run <code>prb score --data sample --model length "
        "--model lexical --profile none --profile top3</code> (or <code>make report</code>) to compare.</i></p>")
    return "<h4>You and the reward models on the quiz pairs</h4>" + frame_html(table) + note


def quiz(
    data: pd.DataFrame,
    results: pd.DataFrame,
    *,
    n: int = 6,
    condition: str = "top3",
    answers: Sequence[str] = (),
    seed: int = 0,
    interactive: bool = True,
) -> QuizSession:
    """"You are the reward model": guess which response this user wants, then see their rubric.

    With widgets: one pair at a time with buttons A and B; each guess reveals the rubric and the models'
    verdicts; the comparison table updates as you go. Static: every pair with its answer key, ``answers``
    (given in order, "A"/"B") marked, then the comparison table. Returns the :class:`QuizSession`, whose
    ``answers`` fill in as you click.
    """
    items = quiz_items(data, n, seed=seed)
    records = {(str(r["subset"]), str(r["id"])): r for r in data.to_dict("records")}
    given: list[str | None] = list(answers) + [None] * (len(items) - len(answers))
    if not use_widgets(interactive):
        for number, item in enumerate(items, start=1):
            record = records[(item.subset, item.id)]
            _display(_html(_quiz_question_html(record, item, number, condition)
                           + _quiz_reveal_html(record, item, given[number - 1], results)))
        _display(_html(_comparison_html(items, given, results)))
        return QuizSession(items, given, results)
    import ipywidgets as w

    final = w.HTML(_comparison_html(items, given, results))
    boxes = []
    for number, item in enumerate(items, start=1):
        record = records[(item.subset, item.id)]
        reveal = w.HTML()
        buttons = [w.Button(description=f"Response {side}", button_style="info") for side in ("A", "B")]

        def guess(button: Any, side: str, index: int = number - 1, item: QuizItem = item, record: dict = record,
                  reveal: Any = reveal, buttons: list = buttons) -> None:
            given[index] = side
            for b in buttons:
                b.disabled = True
            reveal.value = _quiz_reveal_html(record, item, side, results)
            final.value = _comparison_html(items, given, results)

        buttons[0].on_click(lambda b, g=guess: g(b, "A"))
        buttons[1].on_click(lambda b, g=guess: g(b, "B"))
        boxes.append(w.VBox([w.HTML(_quiz_question_html(record, item, number, condition)), w.HBox(buttons), reveal]))
    _display(w.VBox([*boxes, final]))
    return QuizSession(items, given, results)
