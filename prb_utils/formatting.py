"""One formatting layer for every number a page shows, chosen by the *kind* its statistic declares.

Every column that prb's tables produce is declared once, by its exact name, in :data:`COLUMN_KINDS`: a
proportion (accuracies, their bounds, lifts, rates, calibration errors, BoN qualities), a coefficient
(regression and correlation coefficients: style control's ``length_coef``, Spearman, NDCG), a score (a model's
score or margin, a Best-of-N or downstream quality), a count, a rank, a length, a p-value, a temperature, seconds,
a label (an id) or another number. :func:`kind_of` reads a header
as the pages write it: a two-row header by its first declared row (a pivot's ``("p_perm", "kendall")`` is a
p-value, ``("none", "accuracy")`` an accuracy), a wide leaderboard's ``"top3: rank"`` by the part after the
condition, and ``"accuracy in Society"``, ``"bon@8"`` or ``"oracle (rubric)"`` by the statistic before the
qualifier. Only a column declared nowhere falls back on its name (:func:`guess_kind`, a few documented
patterns), and :func:`undeclared` lists such columns, so a test finds them.

Each kind has one rule (:func:`format_value`), and the interactive tables render the same rule in the browser
(:func:`render_js`), so a number reads the same in the index, a static table and a sortable one. A non-zero
number never reads as zero:

- proportions, coefficients and scores: 3 decimals ("0.366", "-0.085"), so one quantity has one precision
  (margins 0.493, -0.009 and 0.001 in one column, never 0.4927, -0.008928 and 7.325e-4); below that
  resolution "< 0.001" (or "> -0.001"); float noise (|x| < 1e-9) is 0, never "-1.85e-17"; a coefficient or
  score of 10 or more: 4 significant digits (a length baseline's score "465");
- counts and ranks: whole numbers with thousands separators ("9,124", never "9124.000"); a non-integer (a
  half-credit count, a mean) at most 4 significant digits;
- lengths and seconds: whole numbers from 10 up ("448"), 2 significant digits below ("0.31");
- p-values: 3 decimals, "< 0.001" below that floor;
- temperatures: 3 significant digits, infinity in words ("infinite");
- labels: the integer as it is ("1234", no separator);
- other numbers: at most 4 significant digits, no e-notation inside [1e-3, 1e3];
- a missing value (NaN, None): "—"; a boolean: "yes" / "no".

>>> format_value(0.366, "length_coef"), format_value(9124.0, "diff_n_boot_valid"), format_value(448.0, "length_chosen")
('0.366', '9,124', '448')
>>> format_value(0.0004, "p_holm"), format_value(float("inf"), "temperature"), format_value(0.0002, "ece")
('< 0.001', 'infinite', '< 0.001')
>>> format_interval(0.5714, 0.3259, 0.786)
'0.571 [0.326, 0.786]'
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pandas as pd

MISSING = "—"
NOISE = 1e-9  # a float closer to 0 than this is rounding noise, shown as 0
P_FLOOR = 1e-3  # p-values below it are shown as "< 0.001"
KINDS = ("proportion", "coefficient", "score", "count", "rank", "length", "p_value", "temperature", "seconds",
         "label", "number")
PROPORTION, COEFFICIENT, SCORE, COUNT, RANK, LENGTH, P_VALUE, TEMPERATURE, SECONDS, LABEL, NUMBER = KINDS


def _declare(kind: str, names: str) -> dict[str, str]:
    return {name.strip(): kind for name in names.split(",") if name.strip()}


#: The kind of every column prb's tables show, by its exact name (a wide header by its statistic: see
#: :func:`kind_of`). A new column is one entry here; tests/test_formatting.py fails for a shown column missing.
COLUMN_KINDS: dict[str, str] = {
    **_declare(PROPORTION, """
        accuracy, accuracy_a, accuracy_b, accuracy_ab, accuracy_ba, accuracy_base, accuracy_baseline,
        accuracy_condition, accuracy_oracle, accuracy_probe, accuracy_reference, best_accuracy, oracle_accuracy,
        mean_accuracy, worst_subset, category_q25, credit,
        ci_low, ci_high, lift, lift_low, lift_high, diff, gap, tie_rate, share, rate, chosen_longer_rate,
        letter_share, order_consistency, positive, value, chance,
        controlled, controlled_low, controlled_high, sensitivity, sensitivity_low, sensitivity_high,
        verdicts_kept, expected, observed, predicted, bin_mean, p_chosen,
        ece, ece_low, ece_high, brier, brier_low, brier_high,
        quality, oracle, random, headroom"""),
    **_declare(COEFFICIENT, """
        length_coef, length_low, length_high, overlap_coef, overlap_low, overlap_high,
        estimate, estimate_a, estimate_b, diff_ci_low, diff_ci_high, zou_ci_low, zou_ci_high, delta,
        spearman, kendall, pearson, ndcg, rbo, rho, rho_low, rho_high, margin_effect,
        log_loss, log_loss_low, log_loss_high, williams_t"""),
    **_declare(SCORE, """
        mean, median, q25, q75, mean_abs_margin, margin, margin_none, margin_own, margin_other, score, score_chosen,
        score_rejected, rm_score, max_score_change, bon, bon_gain, ppo, rbv2, rewardbench, rm_bench, prb"""),
    **_declare(COUNT, """
        n, n_pairs, n_questions, n_rows, n_boot, n_boot_valid, diff_n_boot_valid, n_perm, n_folds, n_levels,
        n_rms, n_truncated, n_failed, n_posts, correct, ties, near_ties, invalid, a_only, b_only, both_correct,
        neither, pairs, questions, rows, draws, folds, flips, twin_pairs, twin_flips, longer_wins, k, epochs,
        aspects, posts_shown, sharing, truncated,
        wrong → correct, correct → wrong, every RM right, every RM wrong, most RMs right, most RMs wrong"""),
    **_declare(RANK, "rank, rank_low, rank_high"),
    **_declare(LENGTH, """
        length_chosen, length_rejected, length_diff, input_size, input_tokens, tokens, longest, context"""),
    **_declare(P_VALUE, "p_value, p_holm, p_vs_leader, p_perm, p_perm_holm, diff_p, diff_p_holm, williams_p"),
    **_declare(TEMPERATURE, "temperature, temperature_min, temperature_max"),
    **_declare(SECONDS, "wall_s, device_s"),
    **_declare(LABEL, "id, index, seed, sample_idx"),
    **_declare(NUMBER, "lr"),
}

# Only for a column COLUMN_KINDS does not declare (a user's own frame): its kind guessed from its name.
_GUESSES = (
    ("temperature", re.compile(r"temperature")),
    ("p_value", re.compile(r"(^p$|^p_|_p$|p_value|p_holm|p_perm|p_vs_)")),
    ("rank", re.compile(r"(^rank$|^rank_|_rank$)")),
    ("count", re.compile(r"(^n$|^n_|_n$|^count|_count$)")),
    ("coefficient", re.compile(r"(_coef$|^coef)")),
    ("length", re.compile(r"(^length_|_length$|chars|tokens)")),
    ("seconds", re.compile(r"(^wall_s$|seconds)")),
    ("proportion", re.compile(r"(accuracy|_rate$|^ci_|share)")),
)
_QUALIFIER = re.compile(r"( in .+| \(.+\)|@\d+)$")  # "accuracy in Art", "oracle (rubric)", "bon@8"


def _name(part: Any) -> str:
    """A header part as the registry spells it: its statistic after any "condition: " prefix."""
    return str(part).split(": ")[-1].strip()


def declared_kind(column: Any) -> str | None:
    """The kind :data:`COLUMN_KINDS` declares for ``column``, read as :func:`kind_of` reads it; None when it
    declares none.

    >>> declared_kind("top3: rank"), declared_kind(("p_perm", "kendall")), declared_kind("whatever")
    ('rank', 'p_value', None)
    >>> declared_kind("top3: accuracy in Society_and_Culture"), declared_kind("bon_gain@4")
    ('proportion', 'score')
    """
    parts = [p for p in column if str(p) != ""] if isinstance(column, tuple) else [column]
    for part in parts:
        name = _name(part)
        for candidate in dict.fromkeys((name, name.replace(" ", "_"), _QUALIFIER.sub("", name))):
            if candidate in COLUMN_KINDS:
                return COLUMN_KINDS[candidate]
    return None


def guess_kind(column: Any) -> str:
    """The fallback for a column :data:`COLUMN_KINDS` does not declare: a kind guessed from its name's last part
    ("number" when nothing matches). prb's own tables never need it (a test holds them declared).

    >>> guess_kind("my_accuracy"), guess_kind("n_users"), guess_kind("size_coef"), guess_kind("whatever")
    ('proportion', 'count', 'coefficient', 'number')
    """
    name = _name(column[-1] if isinstance(column, tuple) else column).lower().replace(" ", "_")
    return next((kind for kind, pattern in _GUESSES if pattern.search(name)), NUMBER)


def kind_of(column: Any) -> str:
    """The kind of ``column``'s numbers (one of :data:`KINDS`): declared (:func:`declared_kind`), else guessed
    (:func:`guess_kind`).

    >>> [kind_of(c) for c in ("accuracy", "n_pairs", "rank", "p_holm", "length_coef", "diff_n_boot_valid")]
    ['proportion', 'count', 'rank', 'p_value', 'coefficient', 'count']
    >>> kind_of(("none", "accuracy")), kind_of("top3: rank"), kind_of("whatever")
    ('proportion', 'rank', 'number')
    """
    return declared_kind(column) or guess_kind(column)


def undeclared(frame: pd.DataFrame) -> list[Any]:
    """The numeric columns of ``frame`` (a named index counted, as the tables show it) whose kind
    :data:`COLUMN_KINDS` does not declare.

    >>> undeclared(pd.DataFrame({"accuracy": [0.5], "mystery": [1.0], "model": ["m"]}))
    ['mystery']
    """
    plain = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
    shown = frame if plain else frame.reset_index(allow_duplicates=True)
    return [c for i, c in enumerate(shown.columns) if _numeric(shown.iloc[:, i]) and declared_kind(c) is None]


def _numeric(values: Iterable[Any]) -> bool:
    """True when a column holds at least one number that is not a boolean or a gap (NaN)."""
    return any(((isinstance(v, (int, float)) and not isinstance(v, bool)) or
                (hasattr(v, "dtype") and pd.api.types.is_numeric_dtype(v.dtype)
                 and not pd.api.types.is_bool_dtype(v.dtype))) and not pd.isna(v) for v in values)


def _fixed(value: float, decimals: int, *, grouped: bool = False) -> str:
    """``value`` with ``decimals`` decimals, a half rounded away from zero as JavaScript's ``toFixed`` rounds it
    (Python's own format rounds a half to even: 0.0625 would read "0.062" here and "0.063" in the browser).

    >>> _fixed(0.0625, 3), _fixed(-998.5, 0, grouped=True), _fixed(0.0005, 3)
    ('0.063', '-999', '0.001')
    """
    exact = Decimal(value).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    return f"{exact:{',' if grouped else ''}.{decimals}f}"


def _significant(value: float, digits: int) -> str:
    """``value`` with at most ``digits`` significant digits, fixed-point inside [1e-3, 1e3), never more decimals
    than it needs (a half rounded away from zero, as JavaScript's ``toPrecision``).

    >>> _significant(-0.2081588767313895, 4), _significant(12.0, 4), _significant(123456.0, 4)
    ('-0.2082', '12', '123,456')
    >>> _significant(0.000372, 4), _significant(0.00012345, 3)
    ('3.720e-4', '1.23e-4')
    """
    size = abs(value)
    if size >= 1e3:
        return _fixed(value, 0, grouped=True)
    if size < 1e-3:  # as JavaScript's toExponential writes it: no leading zero in the exponent
        exact = Decimal(value)
        shown = exact.quantize(Decimal(1).scaleb(exact.adjusted() - digits + 1), rounding=ROUND_HALF_UP)
        return re.sub(r"e([+-])0*(\d)", r"e\1\2", f"{shown:.{digits - 1}e}")
    decimals = max(0, digits - 1 - math.floor(math.log10(size)))
    text = _fixed(value, decimals)
    return text.rstrip("0").rstrip(".") if "." in text else text


def _decimals(number: float) -> str:
    """3 decimals; a non-zero number they would round to 0 says so ("< 0.001", "> -0.001")."""
    text = _fixed(number, 3)
    if number and float(text) == 0:
        return "< 0.001" if number > 0 else "> -0.001"
    return text


def _whole(number: float, small: int) -> str:
    """A whole number with thousands separators; a non-integer below 10 in size with ``small`` significant
    digits instead (so it never reads as 0)."""
    if number.is_integer() or abs(number) >= 10:
        return _fixed(number, 0, grouped=True)
    return _significant(number, small)


def format_value(value: Any, column: Any = "", *, sense: str | None = None) -> str:
    """``value`` as the page shows it, by the kind of ``column`` (:func:`kind_of`) or ``sense`` (one of
    :data:`KINDS`).

    >>> format_value(-0.0846, "length_coef"), format_value(12.345, sense="coefficient"), format_value(0.31, "wall_s")
    ('-0.085', '12.35', '0.31')
    >>> format_value(20.5, "correct"), format_value(1234, "seed"), format_value(-0.0001, "lift")
    ('20.5', '1234', '> -0.001')
    """
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
    sense = sense or kind_of(column)
    number = float(value)
    if math.isnan(number):
        return MISSING
    if math.isinf(number):
        if sense == TEMPERATURE:
            return "infinite" if number > 0 else "minus infinity"
        return "∞" if number > 0 else "-∞"
    if abs(number) < NOISE:
        number = 0.0
    if sense == PROPORTION or (sense in (COEFFICIENT, SCORE) and abs(number) < 10):
        return _decimals(number)
    if sense in (COUNT, RANK):
        return _fixed(number, 0, grouped=True) if number.is_integer() else _significant(number, 4)
    if sense in (LENGTH, SECONDS):
        return _whole(number, 2)
    if sense == P_VALUE:
        return f"< {P_FLOOR:g}" if number < P_FLOOR else _fixed(number, 3)
    if sense == TEMPERATURE:
        return _significant(number, 3) if number else "0"
    if sense == LABEL and number.is_integer():
        return f"{number:.0f}"
    if number.is_integer() and abs(number) < 1e15:
        return _fixed(number, 0, grouped=True)
    return _significant(number, 4)


def format_interval(estimate: float, low: float, high: float, *, sense: str = PROPORTION) -> str:
    """An estimate and its interval in one cell, all three in one format.

    >>> format_interval(0.2, float("nan"), float("nan")), format_interval(0.366, 0.288, 0.444, sense="coefficient")
    ('0.200', '0.366 [0.288, 0.444]')
    """
    shown = format_value(estimate, sense=sense)
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (low, high)):
        return shown
    return f"{shown} [{format_value(low, sense=sense)}, {format_value(high, sense=sense)}]"


def format_signed(value: float, *, sense: str = PROPORTION) -> str:
    """A difference with its sign ("+0.240", "-0.050"; 0 unsigned).

    >>> format_signed(0.24), format_signed(-0.05), format_signed(1e-18), format_signed(0.0002)
    ('+0.240', '-0.050', '0.000', '< 0.001')
    """
    text = format_value(value, sense=sense)
    if text in (MISSING, format_value(0.0, sense=sense)) or text.startswith(("-", "<", ">")):
        return text
    return f"+{text}"


def format_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every cell as the page shows it (:func:`format_value` by its column's kind), text left as
    it is.

    >>> format_frame(pd.DataFrame({"rank": [1.0], "length_coef": [0.366], "locked": [False]})).values.tolist()
    [['1', '0.366', 'no']]
    """
    cells = {}
    for i, column in enumerate(frame.columns):
        sense = kind_of(column)
        cells[i] = [format_value(v, sense=sense) if not isinstance(v, str) else v for v in frame.iloc[:, i]]
    return pd.DataFrame(cells, index=frame.index).set_axis(frame.columns, axis=1)


# The browser's version of each rule of format_value: the same text for the same number.
_JS_DECIMALS = ("const t = v.toFixed(3); if (v !== 0 && Number(t) === 0) return v > 0 ? '< 0.001' : '> -0.001'; "
                "return t;")
_JS_SIGNIFICANT = ("const a = Math.abs(v); if (a >= 1000) return Number(v.toFixed(0)).toLocaleString('en-US'); "
                   "if (a < 0.001) return v.toExponential({last}); return String(Number(v.toPrecision({digits})));")
_JS_WHOLE = "if (Number.isInteger(v) || Math.abs(v) >= 10) return Number(v.toFixed(0)).toLocaleString('en-US'); "


def _js_significant(digits: int) -> str:
    return _JS_SIGNIFICANT.format(last=digits - 1, digits=digits)


def render_js(sense: str) -> str:
    """A DataTables render function that shows a column's numbers by ``sense`` (:func:`format_value`'s rules, the
    same text) and sorts them as numbers; missing values show "—".

    >>> "toFixed(3)" in render_js("proportion"), "toFixed(3)" in render_js("coefficient")
    (True, True)
    """
    body = {
        PROPORTION: _JS_DECIMALS,
        COEFFICIENT: f"if (Math.abs(v) < 10) {{ {_JS_DECIMALS} }} {_js_significant(4)}",
        COUNT: "if (Number.isInteger(v)) return v.toLocaleString('en-US'); " + _js_significant(4),
        LENGTH: _JS_WHOLE + _js_significant(2),
        SECONDS: _JS_WHOLE + _js_significant(2),
        P_VALUE: f"return v < {P_FLOOR} ? '< {P_FLOOR:g}' : v.toFixed(3);",
        TEMPERATURE: "if (!isFinite(v)) return v > 0 ? 'infinite' : 'minus infinity'; "
                     "if (v === 0) return '0'; " + _js_significant(3),
        LABEL: "if (Number.isInteger(v)) return String(v); " + _js_significant(4),
        NUMBER: "if (Number.isInteger(v)) return v.toLocaleString('en-US'); " + _js_significant(4),
    }
    body[RANK], body[SCORE] = body[COUNT], body[COEFFICIENT]
    return ("function (data, type) { if (type !== 'display') return data; "
            f"if (data === null || data === undefined || data === 'NaN' || (typeof data === 'number' && isNaN(data))) "
            f"return '{MISSING}'; "
            "if (typeof data !== 'number') { if (data === 'Infinity' || data === '-Infinity') data = Number(data); "
            "else return data; } "
            "if (!isFinite(data)) return " + ("data > 0 ? 'infinite' : 'minus infinity'; " if sense == TEMPERATURE
                                              else "data > 0 ? '∞' : '-∞'; ") +
            f"let v = data; if (Math.abs(v) < {NOISE}) v = 0; {body[sense]} }}")
