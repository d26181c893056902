"""One formatting layer for every number a page shows, chosen by what the column means.

A column's *meaning* comes from its name (:func:`meaning`): a proportion (accuracies, their bounds, lifts,
differences, rates, calibration errors, rank coefficients), a count, a rank, a length, a p-value, a temperature,
seconds, or any other number. Each meaning has one rule (:func:`format_value`), and the interactive tables
render the same rule in the browser (:func:`render_js`), so a number reads the same in the index, a static
table and a sortable one:

- proportions: 3 decimals; float noise (|x| < 1e-9) is 0, never "-1.85e-17";
- counts, ranks, lengths and seconds: whole numbers with thousands separators ("448", never "448.0000");
- p-values: 3 decimals, "< 0.001" below that floor;
- temperatures: 3 significant digits, infinity in words ("infinite");
- other numbers: at most 4 significant digits, no e-notation inside [1e-3, 1e3];
- a missing value (NaN, None): "—"; a boolean: "yes" / "no".

>>> format_value(0.5714285, "accuracy"), format_value(-1.85e-17, "lift"), format_value(448.0, "length_chosen")
('0.571', '0.000', '448')
>>> format_value(0.0004, "p_holm"), format_value(float("inf"), "temperature"), format_value(float("nan"), "ece")
('< 0.001', 'infinite', '—')
>>> format_interval(0.5714, 0.3259, 0.786)
'0.571 [0.326, 0.786]'
"""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

MISSING = "—"
NOISE = 1e-9  # a float closer to 0 than this is rounding noise, shown as 0
P_FLOOR = 1e-3  # p-values below it are shown as "< 0.001"
MEANINGS = ("proportion", "count", "rank", "length", "p_value", "temperature", "seconds", "number")
PROPORTION, COUNT = MEANINGS[0], MEANINGS[1]

_P_VALUE = re.compile(r"(^p$|^p_|_p$|p_value|p_holm|p_perm|p_vs_)")
_RANK = re.compile(r"(^rank$|rank$|^rank_|_rank$)")
_COUNT = re.compile(r"(^n$|^n_|_n$|^count|_count$|^correct$|^ties$|^near_ties$|^invalid$|^both_correct$|^a_only$|^b_only$|"
                    r"^neither$|^pairs$|^flips|^rows$|^questions$|^draws$|^folds$|^k$|^seed$)")
_LENGTH = re.compile(r"(length|chars|_len$|^len_|tokens|words)")
_SECONDS = re.compile(r"(^wall_s$|seconds|_s$)")
_PROPORTION = re.compile(r"(accuracy|^ci_|_low$|_high$|lift|diff|rate|share|^ece|brier|log_loss|consistency|"
                         r"position|gap|estimate|chance|spearman|kendall|tau|pearson|ndcg|rbo|rho|observed|predicted|"
                         r"quality|value|bin_)")


def meaning(column: Any) -> str:
    """What the numbers of ``column`` mean (one of :data:`MEANINGS`), from its name; a two-row header is read by
    its last part.

    >>> [meaning(c) for c in ("accuracy", "n_pairs", "rank", "p_holm", "length_chosen", "temperature_max", "wall_s")]
    ['proportion', 'count', 'rank', 'p_value', 'length', 'temperature', 'seconds']
    >>> meaning(("none", "accuracy")), meaning("top3: rank"), meaning("whatever")
    ('proportion', 'rank', 'number')
    """
    name = str(column[-1] if isinstance(column, tuple) else column).strip().lower()
    name = name.split(": ")[-1].replace(" ", "_")
    if "temperature" in name:
        return "temperature"
    for pattern, sense in ((_P_VALUE, "p_value"), (_RANK, "rank"), (_COUNT, "count"), (_LENGTH, "length"),
                          (_SECONDS, "seconds"), (_PROPORTION, "proportion")):
        if pattern.search(name):
            return sense
    return "number"


def _significant(value: float, digits: int) -> str:
    """``value`` with at most ``digits`` significant digits, fixed-point inside [1e-3, 1e3), never more decimals
    than it needs.

    >>> _significant(-0.2081588767313895, 4), _significant(12.0, 4), _significant(123456.0, 4)
    ('-0.2082', '12', '123,456')
    """
    size = abs(value)
    if size >= 1e3:
        return f"{value:,.0f}"
    if size < 1e-3:  # as JavaScript's toExponential writes it: no leading zero in the exponent
        return re.sub(r"e([+-])0*(\d)", r"e\1\2", f"{value:.{digits - 1}e}")
    decimals = max(0, digits - 1 - math.floor(math.log10(size)))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_value(value: Any, column: Any = "", *, sense: str | None = None) -> str:
    """``value`` as the page shows it, by the meaning of ``column`` (or ``sense``, one of :data:`MEANINGS`)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, (int, float)):
        return str(value)
    sense = sense or meaning(column)
    number = float(value)
    if math.isnan(number):
        return MISSING
    if math.isinf(number):
        if sense == "temperature":
            return "infinite" if number > 0 else "minus infinity"
        return "∞" if number > 0 else "-∞"
    if abs(number) < NOISE:
        number = 0.0
    if sense == "proportion":
        return f"{number:.3f}"
    if sense in ("count", "rank", "length", "seconds"):
        return f"{number:,.0f}"
    if sense == "p_value":
        return f"< {P_FLOOR:g}" if number < P_FLOOR else f"{number:.3f}"
    if sense == "temperature":
        return _significant(number, 3) if number else "0"
    if float(number).is_integer() and abs(number) < 1e15:
        return f"{number:,.0f}"
    return _significant(number, 4)


def format_interval(estimate: float, low: float, high: float, *, sense: str = "proportion") -> str:
    """An estimate and its interval in one cell, all three in one format.

    >>> format_interval(0.2, float("nan"), float("nan"))
    '0.200'
    """
    shown = format_value(estimate, sense=sense)
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (low, high)):
        return shown
    return f"{shown} [{format_value(low, sense=sense)}, {format_value(high, sense=sense)}]"


def format_signed(value: float, *, sense: str = "proportion") -> str:
    """A difference with its sign ("+0.240", "-0.050"; 0 unsigned).

    >>> format_signed(0.24), format_signed(-0.05), format_signed(1e-18)
    ('+0.240', '-0.050', '0.000')
    """
    text = format_value(value, sense=sense)
    return text if text in (MISSING, format_value(0.0, sense=sense)) or text.startswith("-") else f"+{text}"


def format_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every cell as the page shows it (:func:`format_value` by column), text left as it is.

    >>> format_frame(pd.DataFrame({"rank": [1.0], "accuracy": [0.5], "locked": [False]})).values.tolist()
    [['1', '0.500', 'no']]
    """
    out = frame.copy()
    for column in out.columns:
        sense = meaning(column)
        out[column] = [format_value(v, sense=sense) if not isinstance(v, str) else v for v in frame[column]]
    return out


def render_js(sense: str) -> str:
    """A DataTables render function that shows a column's numbers by ``sense`` (:func:`format_value`'s rules, the
    same text) and sorts them as numbers; missing values show "—".

    >>> "toFixed(3)" in render_js("proportion")
    True
    """
    body = {
        "proportion": "return v.toFixed(3);",
        "count": "return Math.round(v).toLocaleString('en-US');",
        "rank": "return Math.round(v).toLocaleString('en-US');",
        "length": "return Math.round(v).toLocaleString('en-US');",
        "seconds": "return Math.round(v).toLocaleString('en-US');",
        "p_value": f"return v < {P_FLOOR} ? '< {P_FLOOR:g}' : v.toFixed(3);",
        "temperature": "if (!isFinite(v)) return v > 0 ? 'infinite' : 'minus infinity'; "
                       "return v === 0 ? '0' : String(Number(v.toPrecision(3)));",
        "number": "if (!isFinite(v)) return v > 0 ? '∞' : '-∞'; const a = Math.abs(v); "
                  "if (Number.isInteger(v)) return v.toLocaleString('en-US'); "
                  "if (a >= 1000) return Math.round(v).toLocaleString('en-US'); "
                  "if (a < 0.001) return v.toExponential(3); return String(Number(v.toPrecision(4)));",
    }[sense]
    return ("function (data, type) { if (type !== 'display') return data; "
            f"if (data === null || data === undefined || data === 'NaN' || (typeof data === 'number' && isNaN(data))) "
            f"return '{MISSING}'; "
            "if (typeof data !== 'number') { if (data === 'Infinity' || data === '-Infinity') data = Number(data); "
            "else return data; } "
            f"let v = data; if (Math.abs(v) < {NOISE}) v = 0; {body} }}")
