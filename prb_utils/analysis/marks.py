"""The marks a name carries wherever a page shows it: a position-locked judge (its accuracy measures the answer
order) and the oracle condition (the RM saw the answer key).

One helper decides the marks (:func:`label_marks`, from the per-item rows; :meth:`prb_utils.analysis.findings.
Findings.marks` from the board), one registry holds those of the page being drawn (:func:`set_marks`), and one
rule appends them (:func:`mark_label`): to a figure's legend entries, tick labels and titles
(:func:`prb_utils.analysis.plots.mark_figure`) and to a table's name columns (:func:`mark_frame`).

>>> marks = {"judge:x": LOCKED_MARK, "rubric": ORACLE_MARK}
>>> mark_label("judge:x | none", marks), mark_label("lexical: rubric", marks), mark_label("judge:x2", marks)
('judge:x | none ⚠ position-locked', 'lexical: rubric (oracle)', 'judge:x2')
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import pandas as pd

from prb_utils.analysis.leaderboard import locked_jobs
from prb_utils.schema import is_oracle

LOCKED_MARK = "⚠ position-locked"  #: beside a judge job that answers by position
ORACLE_MARK = "(oracle)"  #: beside the oracle condition (``rubric``): a diagnostic, never a benchmark result
NAME_COLUMNS = ("model", "job_label", "who", "profile", "condition", "left_out")  #: the table columns that hold names
_MARKS: dict[str, str] = {}  # name -> its mark, for the figures and tables shown next (set_marks)
_WRAP = r"\s*"  # where a figure may have wrapped a name
_NAME_CHAR = r"\w./+\-"  # characters that continue a name ("judge:x" is not in "judge:x2"), and ":" before one


def marks_for(locked: Iterable[tuple[str, str]], jobs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``{name: mark}`` from the ``locked`` ``(model, condition)`` jobs and every ``(model, condition)`` job shown:
    a model locked under each of its conditions carries :data:`LOCKED_MARK`, one locked under some of them says
    under which; each oracle condition among ``jobs`` carries :data:`ORACLE_MARK`.

    >>> marks_for({("j", "none")}, [("j", "none"), ("j", "top3"), ("m", "rubric")])
    {'j': '⚠ position-locked under none', 'rubric': '(oracle)'}
    """
    jobs = [(str(m), str(c)) for m, c in jobs]
    locked = {(str(m), str(c)) for m, c in locked}
    marks: dict[str, str] = {}
    for model in dict.fromkeys(m for m, _ in sorted(locked)):
        under = [c for m, c in dict.fromkeys([*jobs, *sorted(locked)]) if m == model]
        hit = [c for c in under if (model, c) in locked]
        marks[model] = LOCKED_MARK if len(hit) == len(under) else f"{LOCKED_MARK} under {', '.join(hit)}"
    marks.update({c: ORACLE_MARK for _, c in jobs if is_oracle(c)})
    return marks


def label_marks(results: pd.DataFrame | None, *, model: str = "model") -> dict[str, str]:
    """The marks of the names in ``results`` (per-item rows; ``model`` names the job label column): each
    position-locked judge (:func:`prb_utils.analysis.breakdowns.position_locked`) and the oracle condition.

    >>> rows = pd.DataFrame({"model": "judge:x", "profile": ["none", "rubric"], "verdict_ab": "chosen",
    ...                      "verdict_ba": "rejected"})
    >>> label_marks(rows)
    {'judge:x': '⚠ position-locked', 'rubric': '(oracle)'}
    """
    if results is None or results.empty or model not in results.columns or "profile" not in results.columns:
        return {}
    rows = results.assign(model=results[model]) if model != "model" else results
    jobs = rows[["model", "profile"]].astype(str).drop_duplicates().itertuples(index=False, name=None)
    return marks_for(locked_jobs(rows), jobs)


def set_marks(marks: Mapping[str, str] | None = None) -> dict[str, str]:
    """Register the marks (:func:`label_marks`) of the figures and tables shown afterwards; ``None`` clears.
    Returns them."""
    _MARKS.clear()
    _MARKS.update({str(k): str(v) for k, v in (marks or {}).items() if v})
    return dict(_MARKS)


def current_marks() -> dict[str, str]:
    """The registered marks (:func:`set_marks`)."""
    return dict(_MARKS)


def _named(content: str, name: str) -> bool:
    """True when ``content`` names ``name`` as a whole name, also where a figure wrapped it over lines or shows
    its underscores as spaces."""
    chars = [r"[_\s]" if c == "_" else re.escape(c) for c in name.strip()]
    body = _WRAP.join(chars)
    pattern = rf"(?<![{_NAME_CHAR}:]){body}(?![{_NAME_CHAR}]|:[{_NAME_CHAR}:])"  # "length: rubric" names length
    return bool(chars) and re.search(pattern, content) is not None


def mark_label(content: str, marks: Mapping[str, str] | None = None) -> str:
    """``content`` with the mark of each name it holds appended once (``marks``, default the registered ones)."""
    marks = _MARKS if marks is None else marks
    extra = [mark for name, mark in marks.items() if mark not in content and _named(content, name)]
    return f"{content} {' '.join(dict.fromkeys(extra))}" if extra else content


def mark_frame(frame: pd.DataFrame, marks: Mapping[str, str] | None = None) -> pd.DataFrame:
    """``frame`` with its name columns (:data:`NAME_COLUMNS`, text only) marked (:func:`mark_label`); the same
    frame when nothing is marked.

    >>> mark_frame(pd.DataFrame({"model": ["judge:x", "length"], "n": [2, 2]}), {"judge:x": LOCKED_MARK})["model"].tolist()
    ['judge:x ⚠ position-locked', 'length']
    """
    marks = _MARKS if marks is None else marks
    columns = [c for c in NAME_COLUMNS if c in frame.columns] if marks else []
    if not columns or isinstance(frame.columns, pd.MultiIndex) or not frame.columns.is_unique:
        return frame
    out = frame.copy()
    for column in columns:
        out[column] = [mark_label(v, marks) if isinstance(v, str) else v for v in out[column]]
    return out
