"""The pieces every page repeats, in one shape: a section whose input is missing (what is missing, how to fill it,
and the exact ``prb`` command), the groups a statistic leaves undefined, and the line that says what a page loaded.

>>> print(missing_section("No judge among these results", "prb score --data sample --model judge:smollm2",
...                       fill="Score one", cost="about a minute on 2 CPU cores"))
*No judge among these results. Score one (about a minute on 2 CPU cores), then run this notebook again:* `prb score --data sample --model judge:smollm2`
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from prb_utils.analysis.calibration import undefined_groups
from prb_utils.notebook.markup import md_code


def missing_section(missing: str, command: str = "", *, fill: str = "Produce it", cost: str = "",
                    after: str = "") -> str:
    """A section whose input is missing, as Markdown: ``missing`` (what is not there), ``fill`` (how to produce it)
    with its ``cost`` in brackets, "then run this notebook again", the exact ``command`` as a code span (none when
    empty) and an optional remark ``after``. The words are the page's Markdown (names in them already quoted with
    :func:`~prb_utils.notebook.markup.md_code` or :func:`~prb_utils.notebook.markup.md_text`); ``command`` is
    quoted here.

    >>> missing_section("No PPO rows", fill="Add rows to the CSV", after="The example below needs none.")
    '*No PPO rows. Add rows to the CSV, then run this notebook again.* *The example below needs none.*'
    """
    how = f"{fill} ({cost})" if cost else fill
    text = f"*{missing}. {how}, then run this notebook again" + (f":* {md_code(command)}" if command else ".*")
    return text + (f" *{after}*" if after else "")


def undefined_notes(table: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile")) -> str:
    """The groups of ``table`` whose statistics are n/a (:func:`~prb_utils.analysis.calibration.undefined_groups`),
    one Markdown paragraph per reason: the reason, then each group as a code span ("" when every group is defined).

    >>> undefined_notes(pd.DataFrame({"model": ["a", "b"], "profile": "none", "note": ["n/a: few pairs", None]}))
    '*n/a: few pairs:* `a | none`'
    """
    return "\n\n".join(f"*{row['note']}:* " + ", ".join(md_code(g) for g in row["groups"])
                       for _, row in undefined_groups(table, by=by).iterrows())


def say(markdown: str) -> None:
    """Show ``markdown`` in the notebook, unless it is empty (a note with nothing to say adds no output)."""
    from IPython.display import Markdown, display

    if markdown:
        display(Markdown(markdown))


def show_defined(table: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"), none: str = "") -> None:
    """The rows of ``table`` whose statistics are defined (its ``note`` column dropped), or the Markdown ``none``
    when no row is; then the groups left n/a, with their reasons (:func:`undefined_notes`)."""
    from IPython.display import display

    if table["note"].isna().any():
        display(table[table["note"].isna()].drop(columns="note"))
    else:
        say(none)
    say(undefined_notes(table, by=by))


def loaded_line(bench: pd.DataFrame, scores: pd.DataFrame, store: str) -> str:
    """What a page loaded, in one line: its pairs and subsets, and the scored rows, models and conditions of the
    store ``store`` (the folder's name).

    >>> rows = pd.DataFrame({"model": ["a", "b"], "profile": "none"})
    >>> loaded_line(pd.DataFrame({"subset": ["s", "s", "t"]}), rows, "results")
    '3 pairs in 2 subset(s); 2 scored rows from 2 model(s) x 1 profile condition(s) in results'
    """
    return (f"{len(bench)} pairs in {bench['subset'].nunique()} subset(s); {len(scores)} scored rows from "
            f"{scores['model'].nunique()} model(s) x {scores['profile'].nunique()} profile condition(s) in {store}")
