"""Notebook widgets: a pair browser and a "you are the reward model" quiz.

Each widget takes ``interactive``. When it is False, or when no frontend can show widgets (papermill keeps
no widget state; see :func:`prb_utils.notebook.params.headless`), the same content is displayed as static
HTML tables instead, so the HTML reports are complete.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from prb_utils.analysis import plots
from prb_utils.analysis.breakdowns import locked_warnings, position_locked
from prb_utils.analysis.marks import mark_frame
from prb_utils.analysis.metrics import wilson_ci
from prb_utils.errors import PRBError
from prb_utils.formatting import MISSING, format_frame, format_value, kind_of, render_js
from prb_utils.notebook.markup import md_text
from prb_utils.notebook.pair_view import (
    FLIP_COLUMNS,
    PAIR_LIST_ID,
    PRE_WRAP,
    aspects_html,
    categories,
    esc,
    filter_pairs,
    flip_counts,
    flip_list_html,
    pair_brief_html,
    pair_html,
    pair_keys,
    pair_list_html,
    pair_summary,
    scores_html,
    scores_table,
    view,
)
from prb_utils.notebook.params import headless
from prb_utils.notebook.tables import table_options
from prb_utils.probes import twin_pairs
from prb_utils.profile import rm_user_message
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


def frame_html(frame: pd.DataFrame, *, max_rows: int | None = 60) -> str:
    """A frame as a compact HTML table, every cell by its column's declared kind
    (:func:`prb_utils.formatting.format_frame`), names marked (:func:`prb_utils.analysis.marks.mark_frame`);
    index dropped; the first ``max_rows`` rows (all when None), and a line saying how many more."""
    shown = mark_frame(frame if max_rows is None else frame.head(max_rows))  # the locked judges, the oracle
    table = format_frame(shown).to_html(index=False, border=0, classes="prb-table", na_rep=MISSING)
    more = len(frame) - len(shown)
    return table + (f"<p><i>… and {more} more rows.</i></p>" if more > 0 else "")


_EMBEDDED: dict[str, bool] = {"bundle": False}  # whether this kernel's page holds the DataTables bundle yet


def init_tables(*, all_interactive: bool = True, embed: bool = True) -> None:
    """Embed the DataTables bundle in the cell's output (``itables.init_notebook_mode(connected=False)``)
    and, with ``all_interactive``, show every DataFrame displayed afterwards as a sortable, searchable
    table (a click anywhere on a header sorts) with a CSV download button
    (:func:`prb_utils.notebook.tables.table_options`): the pages then work offline, in a saved page or a report,
    with no kernel. A page calls it once, in its setup cell; ``embed=False`` (the library's own tables) embeds the
    bundle only when this kernel has not yet, so a page holds one copy of it however many tables it shows. Figures
    shown afterwards carry their titles as alt text (:func:`figures_with_alt_text`).

    itables displays a script that awaits the bundle (its ``set_or_remove_dark_class``) before the bundle
    itself; JupyterLab runs each output's script as it arrives, so that script found no bundle and logged a
    TypeError on every open. The bundle goes first here (:func:`bundle_first`)."""
    import itables

    itables.options.maxBytes = 0  # never downsample a table: every row stays in the page
    itables.options.text_in_header_can_be_selected = False  # a click anywhere on a header sorts, not only its icon
    if embed or not _EMBEDDED["bundle"]:
        for output in bundle_first(lambda: itables.init_notebook_mode(all_interactive=all_interactive,
                                                                      connected=False)):
            _display(output)
        _EMBEDDED["bundle"] = True
    shell = _shell()
    if shell is not None and all_interactive:  # one number format per float column (itables alone: 3 decimals)
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, table_html)
    figures_with_alt_text()


#: What marks itables' script that awaits its bundle (the bundle itself holds the name only base64-encoded).
AWAITS_BUNDLE = "set_or_remove_dark_class"


def bundle_first(init: Any) -> list[Any]:
    """The outputs ``init()`` displays (itables' ``init_notebook_mode``), caught and ordered so that the one that
    awaits the bundle (:data:`AWAITS_BUNDLE`) comes after the bundle; the caller displays them."""
    import IPython.display

    caught: list[Any] = []
    shown = IPython.display.display
    IPython.display.display = lambda *objs, **_: caught.extend(objs)
    try:
        init()
    finally:
        IPython.display.display = shown
    return sorted(caught, key=lambda o: AWAITS_BUNDLE in str(getattr(o, "data", "")))


def _shell() -> Any:
    """The running IPython shell, or None."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the notebook extras
        return None
    return get_ipython()


def table_html(frame: pd.DataFrame, *, caption: str = "") -> str:
    """``frame`` as an interactive table (itables, offline) whose numeric and boolean columns each show one
    format by the column's declared kind (:func:`prb_utils.formatting.render_js`, the same text as the static
    tables) and sort as numbers; a named index becomes columns, an unnamed one (a filtered frame's row numbers) is
    left out; names are marked (:func:`prb_utils.analysis.marks.mark_frame`); missing values show "—"; a CSV
    button downloads its rows (:func:`prb_utils.notebook.tables.table_options`). A frame with two header rows
    (MultiIndex columns, shown beside their index) or repeated column names is formatted cell by cell
    (:func:`prb_utils.formatting.format_frame`). The caption is plain text (:func:`~prb_utils.notebook.markup.md_text`):
    a name in it is shown, never read as markup."""
    import itables

    unnamed = all(name is None for name in frame.index.names)  # a filtered frame's row numbers: no column
    shown = mark_frame(frame.reset_index(drop=unnamed, allow_duplicates=not unnamed))  # the locked judges, the oracle
    options: dict[str, Any] = {"caption": md_text(caption)} if caption else {}  # names in it: plain text
    options.update(table_options(len(shown), caption=caption))
    if isinstance(frame.columns, pd.MultiIndex):  # itables lays out two header rows only beside an index
        return itables.to_html_datatable(format_frame(frame), connected=False, maxBytes=0, **options)
    if not shown.columns.is_unique:
        return itables.to_html_datatable(format_frame(shown), connected=False, maxBytes=0, showIndex=False,
                                         **options)
    shown = shown.rename_axis(columns=None)  # a named column axis (a pivot's) would become a column of its own
    for column in shown.columns:
        if pd.api.types.is_bool_dtype(shown[column]):
            shown[column] = shown[column].map({True: "yes", False: "no"})
        elif not pd.api.types.is_numeric_dtype(shown[column]):  # text, or numbers mixed with text or gaps
            shown[column] = [v if isinstance(v, str) else format_value(v, column) for v in shown[column]]
    defs = [{"targets": i, "render": itables.JavascriptFunction(render_js(kind_of(shown.columns[i])))}
            for i in range(shown.shape[1]) if pd.api.types.is_numeric_dtype(shown.iloc[:, i])
            and not pd.api.types.is_bool_dtype(shown.iloc[:, i])]
    return itables.to_html_datatable(shown, connected=False, showIndex=False, maxBytes=0,
                                     text_in_header_can_be_selected=False, **options,
                                     **({"columnDefs": defs} if defs else {}))


def show_table(frame: pd.DataFrame, *, caption: str = "") -> None:
    """Display ``frame`` as :func:`table_html` (with a caption): the one way a page shows a table."""
    from IPython.display import HTML

    _display(HTML(table_html(frame, caption=caption)))


def figure_title(fig: Any) -> str:
    """A figure's text for a reader who cannot see it: its suptitle and its axes' titles (``; ``-joined), else
    its axes' labels; "" when it has none.

    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots(); _ = ax.set_title("Accuracy"); _ = fig.suptitle("Per model")
    >>> figure_title(fig)
    'Per model; Accuracy'
    >>> plt.close(fig)
    """
    parts = [fig._suptitle.get_text()] if getattr(fig, "_suptitle", None) is not None else []
    parts += [ax.get_title() for ax in fig.axes if ax.get_title()]
    if not parts:
        parts = [f"{ax.get_ylabel()} by {ax.get_xlabel()}" for ax in fig.axes if ax.get_xlabel() and ax.get_ylabel()]
    return "; ".join(dict.fromkeys(p.strip() for p in parts if p.strip()))


def figures_with_alt_text() -> None:
    """In an IPython kernel with the inline backend: every figure shown afterwards names the marked models and
    conditions as such (:func:`prb_utils.analysis.plots.mark_figure`) and carries :func:`figure_title` as the
    ``alt`` of its PNG (output metadata, which the report pages write on the image). Elsewhere nothing
    changes."""
    shell = _shell()
    if shell is None:
        return
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    plt.close(plt.figure())  # the inline backend registers its PNG printer on first use
    formatter = shell.display_formatter.formatters["image/png"]
    try:
        printer = formatter.lookup_by_type(Figure)
    except KeyError:  # not the inline backend: no PNG output to describe
        return
    if getattr(printer, "prb_alt_text", False):
        return

    def with_alt(fig: Any) -> Any:
        plots.mark_figure(fig)  # the locked judges and the oracle, named as such in every figure
        data = printer(fig)
        title = figure_title(fig)
        return (data, {"alt": title}) if title and data is not None else data

    with_alt.prb_alt_text = True  # type: ignore[attr-defined]
    formatter.for_type(Figure, with_alt)


def pair_list(summary: pd.DataFrame, *, links: bool = True, title: str = "") -> None:
    """Display the pairs of ``summary`` as a searchable, sortable table (see
    :func:`prb_utils.notebook.pair_view.pair_list_html`), rows linked to the cards when ``links``."""
    init_tables(embed=False)
    _display(_html(view(title) + pair_list_html(summary, links=links)))


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
    max_pairs: int = 50,
    jobs: pd.DataFrame | None = None,
) -> Any:
    """Browse pairs by subset, category and filter (see :func:`prb_utils.notebook.pair_view.filter_pairs`;
    ``model`` narrows every filter to the pairs that model gets wrong).

    With widgets: the list of every pair (search, sort), dropdowns for the filters and the pair (the
    category list narrows to the chosen subset), a search box over the ids, categories and questions, previous
    and next buttons, the pair shown below. Static: the list of the matching
    pairs, each row linked to its card; the first ``max_pairs`` cards (``pair_id`` first; 0 for all) in
    full, the others as short collapsed cards, so every listed pair is reachable. With ``jobs`` (the store's,
    :func:`prb_utils.notebook.rm_seen.store_jobs`) each full card shows what every model saw under ``condition``.
    Returns the widget box, or the frame of matching pairs when static.
    """
    summary = pair_summary(data, results)
    records = {(str(r["subset"]), str(r["id"])): r for r in data.to_dict("records")}
    if not use_widgets(interactive):
        return _static_browser(summary, records, results, condition=condition, subset=subset, category=category,
                               mode=mode, model=model, pair_id=pair_id, max_pairs=max_pairs, jobs=jobs)
    import ipywidgets as w

    subset_w, category_w, mode_w, model_w, pair_w, search_w, previous_w, next_w = _browser_controls(
        summary, results, subset=subset, category=category, mode=mode, model=model)
    count_w = w.HTML()
    out = w.Output()
    narrowing = [False]  # True while the category list is being replaced

    def refresh(*_: Any) -> None:
        if narrowing[0]:
            return
        found = filter_pairs(summary, subset=subset_w.value or None, category=category_w.value or None,
                             mode=mode_w.value, model=model_w.value or None)
        words = search_w.value.strip().lower()
        if words:
            text = (found["subset"].astype(str) + "/" + found["id"].astype(str) + " " + found["category"].astype(str)
                    + " " + found["question"].astype(str)).str.lower()
            found = found[text.str.contains(words, regex=False)]
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
                _display(_html(pair_html(records[key], results, condition=condition, jobs=jobs)))
            else:
                _display(_html("<i>No pair matches these filters.</i>"))

    def narrow_categories(*_: Any) -> None:
        wanted = category_w.value
        allowed = categories(summary, subset_w.value or None)
        narrowing[0] = True  # new options reset the value: refresh once, at the end
        try:
            category_w.options = _any_of(allowed)
            category_w.value = wanted if wanted in allowed else ""
        finally:
            narrowing[0] = False
        refresh()

    def step(delta: int) -> None:
        values = [v for _, v in pair_w.options]
        if values:
            here = values.index(pair_w.value) if pair_w.value in values else 0
            pair_w.value = values[(here + delta) % len(values)]

    subset_w.observe(narrow_categories, names="value")
    for widget in (category_w, mode_w, model_w, search_w):
        widget.observe(refresh, names="value")
    pair_w.observe(show, names="value")
    previous_w.on_click(lambda _: step(-1))
    next_w.on_click(lambda _: step(1))
    box = w.VBox([w.HBox([subset_w, category_w]), w.HBox([mode_w, model_w]), count_w, pair_w,
                  w.HBox([search_w, previous_w, next_w]), out])
    refresh()
    pair_list(summary, links=False, title=f"<h4>Every pair ({len(summary)}): search or sort, then pick one "
                                          "below</h4>")
    _display(box)
    return box


def _any_of(values: Sequence[str]) -> list[tuple[str, str]]:
    """A dropdown's choices: "(any)" (the empty value), then each value."""
    return [("(any)", "")] + [(v, v) for v in values]


def _browser_controls(summary: pd.DataFrame, results: pd.DataFrame, *, subset: str | None, category: str | None,
                      mode: str, model: str | None) -> tuple[Any, ...]:
    """The pair browser's controls, set to the given filters: the subset, category, filter, wrong-model and pair
    dropdowns, the search box, and the previous and next buttons."""
    import ipywidgets as w

    models = sorted(results["model"].unique()) if not results.empty else []
    style = {"description_width": "initial"}  # a label is never cut ("wrong mo...")
    return (
        w.Dropdown(options=_any_of(sorted(summary["subset"].dropna().unique())), value=subset or "",
                   description="subset", style=style),
        w.Dropdown(options=_any_of(categories(summary, subset)), value=category or "", description="category",
                   style=style),
        w.Dropdown(options=list(FILTERS), value=mode, description="filter", style=style),
        w.Dropdown(options=_any_of(models), value=model or "", description="wrong model", style=style),
        w.Dropdown(options=[], description="pair", layout=w.Layout(width="60%"), style=style),
        w.Text(value="", placeholder="id, category or words of the question", description="search", style=style,
               continuous_update=False),
        w.Button(description="◀ previous", tooltip="the previous matching pair"),
        w.Button(description="next ▶", tooltip="the next matching pair"),
    )


def _static_browser(summary: pd.DataFrame, records: dict, results: pd.DataFrame, *, condition: str,
                    subset: str | None, category: str | None, mode: str, model: str | None,
                    pair_id: str | None, max_pairs: int, jobs: pd.DataFrame | None = None) -> pd.DataFrame:
    found = filter_pairs(summary, subset=subset, category=category, mode=mode, model=model)
    title = f"Pairs matching filter <code>{esc(mode)}</code>" + \
        (f", wrong model <code>{esc(model)}</code>" if model else "") + \
        (f", subset <code>{esc(subset)}</code>" if subset else "") + \
        (f", category <code>{esc(category)}</code>" if category else "")
    if pair_id and not (found["id"] == pair_id).any():
        raise PRBError(f"The pair '{pair_id}' is not among the {len(found)} pairs matching the filters.")
    ordered = pd.concat([found[found["id"] == pair_id], found[found["id"] != pair_id]]) if pair_id else found
    full = len(ordered) if max_pairs <= 0 else max_pairs
    note = ("every card in full" if full >= len(ordered) else
            f"the first {full} cards in full, the other {len(ordered) - full} collapsed (click to open)")
    pair_list(found, links=True, title=f"<h4>{title}: {len(found)} of {len(summary)}</h4><p>Search or sort the "
                                       f"list; a pair's name jumps to its card below ({note}).</p>")
    for number, row in enumerate(ordered.itertuples()):
        record = records[(row.subset, row.id)]
        _display(_html(pair_html(record, results, condition=condition, back_to=PAIR_LIST_ID, jobs=jobs) if number < full
                       else pair_brief_html(record, results, back_to=PAIR_LIST_ID)))
    return found


def flip_view(flips: pd.DataFrame, *, cards: Any = None, baseline: str = "none") -> pd.DataFrame:
    """Display the verdicts the profile flips (:func:`prb_utils.notebook.pair_view.flip_table`'s rows): per
    model and condition, how many go wrong → correct and correct → wrong, then every flip in an interactive
    table whose ids link to the pairs' cards when ``cards`` (the static browser's frame of shown pairs) is
    given; one sentence when there is no flip. Returns the counts."""

    counts = flip_counts(flips, baseline=baseline)
    if flips.empty:
        _display(_html(view(f"<p><i>No verdict flips: score a model under <code>{esc(baseline)}</code> and a "
                            "profile condition to see them.</i></p>")))
        return counts
    up, down = (int(counts[c].sum()) for c in FLIP_COLUMNS)
    shown = cards if isinstance(cards, pd.DataFrame) else pd.DataFrame(columns=["subset", "id"])
    init_tables(embed=False)
    _display(_html(view(f"<p><b>{up + down} verdicts flip</b> between <code>{esc(baseline)}</code> and a profile "
                        f"condition: {up} from wrong to correct, {down} from correct to wrong (a tie counts as "
                        "wrong).</p>")))
    _display(counts)
    _display(_html(flip_list_html(flips, cards=list(zip(shown["subset"], shown["id"], strict=True)),
                                  baseline=baseline)))
    return counts


# --------------------------------------------------------------------------------------------- the quiz


@dataclass(frozen=True)
class QuizItem:
    """One quiz pair: which record, which side (A or B) holds the chosen answer, and its ``twin`` (the other
    user's pair of the same question and answers, shown as an unscored second step; None when it has none).
    """

    subset: str
    id: str
    chosen_side: str  # "A" or "B"
    twin: QuizItem | None = None

    @property
    def key(self) -> tuple[str, str]:
        """``(subset, id)``."""
        return self.subset, self.id


def quiz_items(data: pd.DataFrame, n: int, *, seed: int = 0, avoid: Sequence[Any] = ()) -> list[QuizItem]:
    """``n`` pairs for the quiz (seeded), each with a random side for the chosen answer. A pair that shares
    its question with another user's pair comes first, so the quiz starts with the idea of the workshop.
    A pair whose twin is in the data (:func:`prb_utils.probes.twin_pairs`: the same question and
    answers, the other user) carries it as ``twin``, the same two answers on the same sides (so its chosen
    side is the other one); a twin is never also asked as a pair of its own, so no pair is scored twice.
    The pairs of ``avoid`` (records or ``(subset, id)``, see :func:`prb_utils.notebook.pair_view.pair_keys`:
    the pairs a page already explained) are never asked, nor shown as a twin."""
    rng = np.random.default_rng(seed)
    if avoid:
        avoided = pair_keys(avoid)
        data = data[[(str(s), str(i)) not in avoided for s, i in zip(data["subset"], data["id"], strict=True)]]
    shared = data.groupby("question")["id"].transform("size") > 1
    first = data[shared].sort_values(["subset", "id"])
    rest = data[~shared].iloc[rng.permutation(int((~shared).sum()))]
    twins = twin_pairs(data)
    picked: list[tuple[tuple[str, str], tuple[str, str] | None]] = []
    taken: set[tuple[str, str]] = set()
    for row in pd.concat([first.head(1), rest, first.iloc[1:]]).itertuples():
        key = (str(row.subset), str(row.id))
        if len(picked) == n or key in taken:
            continue
        picked.append((key, twins.get(key)))
        taken.update(k for k in (key, twins.get(key)) if k is not None)
    sides = ["A" if s == 0 else "B" for s in rng.integers(0, 2, size=len(picked))]
    other = {"A": "B", "B": "A"}
    return [QuizItem(*key, side, None if twin is None else QuizItem(*twin, other[side]))
            for (key, twin), side in zip(picked, sides, strict=True)]


def answered_items(items: Sequence[QuizItem], answers: Sequence[str | None]) -> list[QuizItem]:
    """The quiz items that have an answer ("A" or "B"), in quiz order."""
    return [item for item, a in zip(items, answers, strict=False) if a in ("A", "B")]


def quiz_comparison(items: Sequence[QuizItem], answers: Sequence[str | None], results: pd.DataFrame, *,
                    pairs: str = "answered") -> pd.DataFrame:
    """Accuracy on the quiz pairs: one row for you (the answered items) and one per model and profile
    condition in ``results``, on the pairs you answered (``pairs="answered"``: the same pairs as yours) or
    on every quiz pair (``pairs="all"``). Columns who, profile, n, correct, accuracy, ci_low, ci_high
    (Wilson 95%)."""

    if pairs not in ("answered", "all"):
        raise PRBError(f"Unknown quiz pairs '{pairs}'; use 'answered' or 'all'.")
    rows = []
    answered = [(item, a) for item, a in zip(items, answers, strict=False) if a in ("A", "B")]
    rows.append({"who": "you", "profile": "what the RM sees", "n": len(answered),
                 "correct": sum(a == item.chosen_side for item, a in answered)})
    scored = items if pairs == "all" else [item for item, _ in answered]
    if results is not None and not results.empty and scored:
        keys = {(i.subset, i.id) for i in scored}
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
    twin_answers: list[str | None] = field(default_factory=list)  # the unscored second steps, by item
    progress: Any = None  # with widgets: the running-score widget, whose value changes with every scored answer
    follower: Any = field(default=None, repr=False)  # the comparison view following ``progress`` (one at a time)

    def comparison(self, pairs: str = "answered") -> pd.DataFrame:
        """Your accuracy beside the models' on the pairs you answered (``pairs="all"``: the models on every
        quiz pair; see :func:`quiz_comparison`)."""
        return quiz_comparison(self.items, self.answers, self.results, pairs=pairs)

    @property
    def answered(self) -> int:
        """How many quiz pairs have an answer."""
        return len(answered_items(self.items, self.answers))


TWIN_QUESTION = "Same question, other user: does your answer change?"


def _quiz_question_html(record: dict, item: QuizItem, number: int, condition: str, *, twin: bool = False) -> str:
    """The RM's input for one quiz pair and the two responses; ``twin``: the unscored second step, the other
    user's input beside the same two responses."""

    a, b = (record["chosen"], record["rejected"]) if item.chosen_side == "A" else (record["rejected"], record["chosen"])
    box = "border:1px solid #ccc;border-radius:6px;padding:8px;vertical-align:top"
    head = (f'<h4 class="prb-twin-step">{TWIN_QUESTION} <small>({esc(record["subset"])}/{esc(record["id"])}, '
            f"pair {number} again: not scored)</small></h4><p>Another user asked the very same question and got "
            f"the very same two responses. <b>Their input to the RM</b> (profile condition <code>{esc(condition)}"
            "</code>):</p>" if twin else
            f"<h4>Pair {number}: {esc(record['subset'])}/{esc(record['id'])}</h4>"
            f"<p><b>What the RM sees</b> (profile condition <code>{esc(condition)}</code>):</p>")
    return view(
        head +
        f'<pre style="{PRE_WRAP};background:#f4f8ff;padding:8px">{esc(rm_user_message(record, condition))}</pre>'
        '<table style="width:100%;table-layout:fixed"><tr><th>Response A</th><th>Response B</th></tr>'
        f'<tr><td style="{box}">{esc(a)}</td><td style="{box}">{esc(b)}</td></tr></table>'
    )


def _quiz_reveal_html(record: dict, item: QuizItem, answer: str | None, results: pd.DataFrame, *,
                      any_answers: bool = True, first: str | None = None) -> str:
    if answer in ("A", "B"):
        verdict = ("<b style='color:#1a7f1a'>Right!</b>" if answer == item.chosen_side
                   else "<b style='color:#b22'>Not this user's choice.</b>")
        verdict = f"You picked {answer}. {verdict} "
    elif any_answers:
        verdict = "No guess recorded. "
    else:  # a run without any answer (a report): the key, with no verdict on every pair
        verdict = "<b>Answer key.</b> "
    if first in ("A", "B") and answer in ("A", "B"):  # the twin step: compare with the guess on the first user
        verdict += ("Your answer changed with the user. " if answer != first else
                    "Your answer stayed the same for both users: it can be right for one of them only. ")
    return view(
        f'<div class="prb-reveal" style="border-left:4px solid #888;padding-left:8px">'
        f"<p>{verdict}The user wanted <b>Response {item.chosen_side}</b>. Their rubric:</p>"
        f"{aspects_html(record.get('rubric_aspects'))}"
        f"<p><i>In their words:</i> {esc(record.get('narrative') or '')}</p>"
        f"<p>What the models said on this pair:</p>{scores_html(scores_table(results, item.subset, item.id))}</div>"
    )


def answer_details(body: str) -> str:
    """``body`` (an answer key, the models' verdicts) folded behind "Show the answer": a page projected to a
    room keeps each answer hidden until someone opens it.

    >>> answer_details("<p>B</p>").startswith('<details class="prb-answer"><summary')
    True
    """
    return (f'<details class="prb-answer"><summary style="cursor:pointer;color:#1565c0"><b>Show the answer</b>'
            f"</summary>{body}</details>")


def no_scores_note(how: str = "") -> str:
    """The line under the quiz comparison when the store holds no model scores for the quiz pairs: the command
    ``how`` that scores them (on the page's own data), or ``prb score`` in general.

    >>> no_scores_note("prb score --data d.jsonl --model length --out results")
    '<p><i>No model scores for the quiz pairs in the store: run <code>prb score --data d.jsonl --model length --out results</code> to compare.</i></p>'
    """
    return (f"<p><i>No model scores for the quiz pairs in the store: run <code>{html.escape(how or 'prb score')}</code> "
            "to compare.</i></p>")


def _progress_html(items: Sequence[QuizItem], answers: Sequence[str | None]) -> str:
    done = answered_items(items, answers)
    right = sum(a == item.chosen_side for item, a in zip(items, answers, strict=False) if a in ("A", "B"))
    if not done:
        return view("<p><i>No guesses yet: pick A or B above.</i></p>")
    return view(f"<p><b>You so far: {right} of {len(done)} right</b> (of {len(items)} pairs). Section 5 "
                "sets this beside the models on the same pairs, and follows each answer.</p>")


def locked_judges_html(results: pd.DataFrame | None) -> str:
    """A warning paragraph per position-locked judge job among ``results``
    (:func:`prb_utils.analysis.breakdowns.position_locked`); "" when there is none."""

    if results is None or results.empty or not {"verdict_ab", "verdict_ba"} <= set(results.columns):
        return ""
    text = locked_warnings(position_locked(results))
    return "".join(f'<p style="color:#a04000">{html.escape(line)}</p>' for line in text.split("\n\n") if line)


def comparison_view(session: QuizSession, *, how: str = "") -> pd.DataFrame:
    """Display your accuracy beside the models' and return that table (:func:`quiz_comparison`).

    With answers: you and every model and condition on exactly the pairs you answered, table and figure.
    Without any answer (a report run with no ``quiz_answers``): one sentence saying so, and the models on
    every quiz pair (no "you" row). A quiz shown with widgets (its ``progress`` widget set) is followed live:
    the view sits in an output widget drawn again whenever the running score changes (each scored answer,
    "Try again"), so no cell has to be run again; the table returned is the one drawn first. ``how``: the command
    that scores the quiz pairs, said when the store holds no scores for them (:func:`no_scores_note`)."""

    if session.progress is None:
        return _comparison(session, how)
    import ipywidgets as w

    out = w.Output()
    first: list[pd.DataFrame] = []

    def redraw(*_: Any) -> None:
        out.clear_output(wait=True)
        with out:
            first.append(_comparison(session, how))

    if session.follower is not None:  # the cell run again: only the newest view follows the quiz
        session.progress.unobserve(session.follower, names="value")
    session.follower = redraw
    session.progress.observe(redraw, names="value")
    redraw()
    _display(out)
    return first[0]


def _comparison(session: QuizSession, how: str = "") -> pd.DataFrame:
    """:func:`comparison_view`'s table and figure, displayed once."""
    has_scores = session.results is not None and not session.results.empty
    if session.answered:
        table = session.comparison("answered")
        head = (f"<h4>You and the reward models on the {session.answered} quiz pairs you answered</h4>"
                f"<p>Every row counts exactly those {session.answered} pairs (the models' rows too).</p>")
    else:
        table = session.comparison("all").iloc[1:].reset_index(drop=True)
        head = (f"<p><b>No quiz answers were recorded in this run</b>, so there is no score of yours to compare: "
                "answer the quiz with the widgets in JupyterLab (this section follows each answer), or pass "
                f"<code>quiz_answers</code> to a headless run. Below: the models on all {len(session.items)} quiz "
                "pairs.</p>")
    shown = table.drop(columns=["ci_low", "ci_high"])
    _display(_html(view(head + (frame_html(shown) if len(shown) else "")
                        + locked_judges_html(session.results) + ("" if has_scores else no_scores_note(how)))))
    drawn = table.dropna(subset=["accuracy"])
    if len(drawn):
        import matplotlib.pyplot as plt

        title = "the quiz pairs you answered" if session.answered else "every quiz pair"
        plots.forest(drawn, label=["who", "profile"], title=f"Accuracy on {title} (95% CI)")
        plt.show()
    return table


def quiz(
    data: pd.DataFrame,
    results: pd.DataFrame,
    *,
    n: int = 6,
    condition: str = "top3",
    answers: Sequence[str] = (),
    seed: int = 0,
    interactive: bool = True,
    avoid: Sequence[Any] = (),
) -> QuizSession:
    """"You are the reward model": guess which response this user wants, then see their rubric.

    With widgets: one pair at a time with buttons A and B; a guess marks the picked button right (green) or
    wrong (red) and reveals the rubric and the models' verdicts; only then does the next step appear. A pair
    with a twin (:func:`quiz_items`) is followed by :data:`TWIN_QUESTION`: the other user's input beside the
    same two responses, answered and revealed the same way but not scored. A line under the quiz keeps your
    score as you go; "Try again" clears the guesses and starts again from the first pair. Static: every pair
    (and twin) with its answer key and the models' verdicts folded behind "Show the answer"
    (:func:`answer_details`), ``answers`` (given in order, "A"/"B", for the scored pairs) marked there. The
    comparison with the models is :func:`comparison_view`'s, shown once in its own cell. ``avoid``: pairs
    never asked (those the page showed with their answers, see :func:`quiz_items`). Returns the
    :class:`QuizSession`, whose ``answers`` fill in as you click.
    """
    items = quiz_items(data, n, seed=seed, avoid=avoid)
    records = {(str(r["subset"]), str(r["id"])): r for r in data.to_dict("records")}
    given: list[str | None] = list(answers) + [None] * (len(items) - len(answers))
    twin_given: list[str | None] = [None] * len(items)
    if not use_widgets(interactive):
        any_answers = bool(answered_items(items, given))
        for number, item in enumerate(items, start=1):
            record = records[item.key]
            shown = _quiz_question_html(record, item, number, condition) + answer_details(
                _quiz_reveal_html(record, item, given[number - 1], results, any_answers=any_answers))
            if item.twin is not None:
                twin = records[item.twin.key]
                shown += _quiz_question_html(twin, item.twin, number, condition, twin=True) + answer_details(
                    _quiz_reveal_html(twin, item.twin, None, results, any_answers=False))
            _display(_html(shown))
        return QuizSession(items, given, results, twin_given)
    import ipywidgets as w

    final = w.HTML(_progress_html(items, given))
    stage = w.VBox([])
    again = w.Button(description="Try again", icon="refresh",
                     tooltip="Clear your guesses and start again from the first pair")

    def step(number: int, item: QuizItem, *, twin: bool = False) -> Any:
        """The box of one step: the RM's input and the responses, buttons A and B, the reveal after a guess."""
        record = records[item.key]
        reveal = w.HTML()
        buttons = [w.Button(description=f"Response {side}", button_style="info",
                            layout=w.Layout(width="auto", min_width="148px"))  # "Response A: wrong" stays whole
                   for side in ("A", "B")]

        def guess(side: str) -> None:
            (twin_given if twin else given)[number - 1] = side
            mark_guess(buttons, side, item.chosen_side)
            reveal.value = _quiz_reveal_html(record, item, side, results, first=given[number - 1] if twin else None)
            final.value = _progress_html(items, given)
            stage.children = (*stage.children, following(number, twin))

        for button, side in zip(buttons, ("A", "B"), strict=True):
            button.on_click(lambda _button, side=side: guess(side))
        return w.VBox([w.HTML(_quiz_question_html(record, item, number, condition, twin=twin)), w.HBox(buttons),
                       reveal])

    def following(number: int, twin: bool) -> Any:
        item = items[number - 1]
        if not twin and item.twin is not None:
            return step(number, item.twin, twin=True)
        if number < len(items):
            return step(number + 1, items[number])
        return w.HTML(view("<p><b>That was the last pair.</b> Section 5 sets your guesses beside the models, "
                           "or press <i>Try again</i>.</p>"))

    def restart(*_: Any) -> None:
        given[:] = [None] * len(items)
        twin_given[:] = [None] * len(items)
        final.value = _progress_html(items, given)
        stage.children = (step(1, items[0]),) if items else ()

    again.on_click(restart)
    stage.children = (step(1, items[0]),) if items else ()
    _display(w.VBox([stage, w.HBox([final, again])]))
    return QuizSession(items, given, results, twin_given, progress=final)


def mark_guess(buttons: Sequence[Any], side: str, chosen_side: str) -> None:
    """After a guess: the picked one of ``buttons`` (A, B) green with a tick when ``side`` is
    ``chosen_side``, red with a cross otherwise; the other one plain; both disabled."""
    for button, label in zip(buttons, ("A", "B"), strict=True):
        button.disabled = True
        if label != side:
            button.button_style = ""
            continue
        right = side == chosen_side
        button.button_style = "success" if right else "danger"
        button.icon = "check" if right else "times"
        button.description = f"Response {side}: {'right' if right else 'wrong'}"
