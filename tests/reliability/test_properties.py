"""Property-based tests (hypothesis) of the loaders and the metrics.

Loaders: any mix of good and broken records gives exactly the good rows and one problem line per broken
record; arbitrary bytes never raise anything but a user error. Metrics: confidence intervals stay inside
[0, 1] (differences inside [-1, 1]) and contain the point estimate; ``expected_best_of_k`` is monotone in k
when the RM orders the samples as the quality does (and never beats the oracle); ``rank_agreement`` is
symmetric in its two arguments for every symmetric coefficient.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from rel_helpers import record

from prb_utils.analysis.metrics import accuracy_table, compare, wilson_ci
from prb_utils.data import load_benchmark, read_benchmark
from prb_utils.downstream.bon import expected_best_of_k, oracle_best_of_k
from prb_utils.downstream.correlation import rank_agreement
from prb_utils.errors import DataError, PRBError

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------------------------------ loaders

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30).filter(
    lambda s: s.strip())

BREAKERS = {
    "truncated": lambda rec: json.dumps(rec)[: len(json.dumps(rec)) // 2],
    "not json": lambda rec: "nonsense {",
    "bad utf-8": lambda rec: b'{"id": "\xc3\x28"}',
    "profile str": lambda rec: {**rec, "profile": "a string"},
    "aspects dict": lambda rec: {**rec, "rubric_aspects": {"aspect": "x"}},
    "empty chosen": lambda rec: {**rec, "chosen": " "},
    "int question": lambda rec: {**rec, "question": 7},
    "no rejected": lambda rec: {k: v for k, v in rec.items() if k != "rejected"},
    "identical": lambda rec: {**rec, "rejected": rec["chosen"]},
    "list record": lambda rec: [rec],
    "null record": lambda rec: None,
}


@st.composite
def jsonl_with_faults(draw):
    """(lines, indexes of broken lines, ids of good records) for one .jsonl file."""
    n = draw(st.integers(1, 12))
    kinds = draw(st.lists(st.sampled_from([None, *BREAKERS]), min_size=n, max_size=n))
    texts = draw(st.lists(st.tuples(TEXT, TEXT, TEXT), min_size=n, max_size=n))
    lines, broken, good = [], [], []
    for i, (kind, (question, chosen, rejected)) in enumerate(zip(kinds, texts, strict=True)):
        rec = record(i, question=question, chosen=f"A: {chosen}", rejected=f"B: {rejected}")
        if kind is None:
            lines.append(rec)
            good.append(rec["id"])
        else:
            lines.append(BREAKERS[kind](rec))
            broken.append(i)
    return lines, broken, good


def _write(path: Path, lines: list, crlf: bool) -> None:
    end = b"\r\n" if crlf else b"\n"
    chunks = [json.dumps(x).encode() if not isinstance(x, (str, bytes)) else
              (x.encode() if isinstance(x, str) else x) for x in lines]
    path.write_bytes(end.join(chunks) + end)


@FAST
@given(case=jsonl_with_faults(), crlf=st.booleans())
def test_loader_keeps_exactly_the_good_records_and_names_each_broken_line(case, crlf):
    lines, broken, good = case
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "S.jsonl"
        _write(path, lines, crlf)
        result = read_benchmark(str(path))
        assert result.frame["id"].tolist() == good
        named = sorted({int(str(p).split(":", 1)[1].split(" ")[0].split(":")[0]) - 1 for p in result.problems})
        assert named == broken
        assert all("\n" not in str(p) for p in result.problems)
        if broken:
            try:
                load_benchmark(str(path))
            except DataError as exc:
                assert exc.problems == [str(p) for p in result.problems]
            else:
                raise AssertionError("broken records were accepted")
        if good:
            kept = load_benchmark(str(path), drop_invalid=True)
            assert kept["id"].tolist() == good
            assert kept[["question", "chosen", "rejected"]].map(lambda s: isinstance(s, str) and s.strip() != "").all().all()


@FAST
@given(content=st.binary(max_size=300), suffix=st.sampled_from([".jsonl", ".json", ".parquet"]))
def test_loader_on_arbitrary_bytes_raises_only_user_errors(content, suffix):
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / f"S{suffix}"
        path.write_bytes(content)
        try:
            frame = load_benchmark(str(path), drop_invalid=True)
        except PRBError as exc:
            assert str(exc).strip() and "\n" not in str(exc)
        else:
            assert frame[["id", "question", "chosen", "rejected"]].map(lambda s: isinstance(s, str)).all().all()


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                    max_leaves=8)


@FAST
@given(fields=st.dictionaries(st.sampled_from(["id", "question", "chosen", "rejected", "profile",
                                               "rubric_aspects", "narrative", "category"]), JSON))
def test_arbitrary_json_records_are_rows_or_problems_never_crashes(fields):
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "S.jsonl"
        path.write_text(json.dumps({**record(0), **fields}) + "\n" + json.dumps(record(1)) + "\n")
        result = read_benchmark(str(path))
        assert len(result.frame) + (1 if result.problems else 0) == 2
        assert "r1" in set(result.frame["id"])


# ------------------------------------------------------------------------------------------ metrics

OUTCOME = st.sampled_from(["correct", "wrong", "tie", "invalid"])


@st.composite
def results_frames(draw):
    n = draw(st.integers(1, 40))
    outcomes = draw(st.lists(OUTCOME, min_size=n, max_size=n))
    models = draw(st.lists(st.sampled_from(["a", "b"]), min_size=n, max_size=n))
    return pd.DataFrame({"model": models, "profile": "none", "subset": "s", "id": [str(i) for i in range(n)],
                         "outcome": outcomes})


@settings(max_examples=200, deadline=None)
@given(nobs=st.integers(1, 10_000), frac=st.floats(0, 1))
def test_wilson_interval_is_inside_0_1_and_contains_the_proportion(nobs, frac):
    """Exactly, without tolerance: a table that says accuracy 1.0 with ci_high 0.9999999999999999 is wrong."""
    count = round(frac * nobs)
    low, high = wilson_ci(count, nobs)
    assert 0.0 <= low <= count / nobs <= high <= 1.0


@FAST
@given(frame=results_frames(), half=st.booleans(), ci=st.sampled_from(["wilson", "bootstrap"]))
def test_accuracy_table_counts_add_up_and_ci_brackets_accuracy(frame, half, ci):
    table = accuracy_table(frame, by=["model"], half_credit=half, ci=ci, n_boot=300)
    for _, row in table.iterrows():
        group = frame[frame["model"] == row["model"]]
        assert row["n"] == len(group)
        assert row["correct"] == (group["outcome"] == "correct").sum()
        assert row["ties"] == (group["outcome"] == "tie").sum()
        assert row["invalid"] == (group["outcome"] == "invalid").sum()
        expected = (row["correct"] + (row["ties"] / 2 if half else 0)) / row["n"]
        assert math.isclose(row["accuracy"], expected)
        # 1e-12: the float artifact of the Wilson bounds at 0% and 100% is its own test (above)
        assert 0.0 <= row["ci_low"] <= row["accuracy"] + 1e-12
        assert row["accuracy"] - 1e-12 <= row["ci_high"] <= 1.0


@settings(max_examples=10, deadline=None)
@given(a=st.lists(st.booleans(), min_size=1, max_size=40), flips=st.lists(st.booleans(), min_size=40, max_size=40))
def test_paired_difference_ci_is_inside_minus1_1_and_brackets_the_difference(a, flips):
    b = [x != f for x, f in zip(a, flips, strict=False)]
    rows = [{"model": m, "profile": "none", "subset": "s", "id": str(i), "outcome": "correct" if ok else "wrong"}
            for m, values in (("a", a), ("b", b)) for i, ok in enumerate(values)]
    row = compare(pd.DataFrame(rows), "model", n_boot=200).iloc[0]
    assert -1.0 <= row["ci_low"] <= row["diff"] + 1e-12
    assert row["diff"] - 1e-12 <= row["ci_high"] <= 1.0
    assert 0.0 <= row["p_value"] <= 1.0 and row["p_value"] <= row["p_holm"] + 1e-12 <= 1.0 + 1e-12


# ------------------------------------------------------------------------------------------ best-of-k

SCORES = st.lists(st.integers(0, 6).map(float), min_size=1, max_size=9)


@settings(max_examples=60, deadline=None)
@given(quality=SCORES, data=st.data())
def test_expected_best_of_k_is_monotone_in_k_when_the_rm_orders_as_the_quality(quality, data):
    noise = data.draw(st.lists(st.floats(0, 0.4), min_size=len(quality), max_size=len(quality)))
    aligned = [q * 10 + e for q, e in zip(quality, noise, strict=True)]  # same order as quality (ties broken)
    ks = range(1, len(quality) + 1)
    up = [expected_best_of_k(aligned, quality, k) for k in ks]
    down = [expected_best_of_k([-s for s in aligned], quality, k) for k in ks]
    assert all(x <= y + 1e-12 for x, y in zip(up, up[1:], strict=False))
    assert all(x >= y - 1e-12 for x, y in zip(down, down[1:], strict=False))
    assert math.isclose(up[0], float(np.mean(quality)))
    assert math.isclose(up[-1], max(quality))


@settings(max_examples=60, deadline=None)
@given(quality=SCORES, data=st.data())
def test_expected_best_of_k_is_bounded_and_never_beats_the_oracle(quality, data):
    scores = data.draw(st.lists(st.integers(0, 3).map(float), min_size=len(quality), max_size=len(quality)))
    k = data.draw(st.integers(1, len(quality)))
    value = expected_best_of_k(scores, quality, k)
    assert min(quality) - 1e-12 <= value <= max(quality) + 1e-12
    assert value <= oracle_best_of_k(quality, k) + 1e-12
    assert math.isclose(expected_best_of_k(scores, quality, 1), float(np.mean(quality)))


# ------------------------------------------------------------------------------------------ rank agreement

RM_SCORES = st.lists(st.floats(0, 1, allow_subnormal=False), min_size=2, max_size=8)
SYMMETRIC = ("spearman", "kendall", "weighted_tau", "pearson", "rbo")


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=50, deadline=None)
@given(x=RM_SCORES, data=st.data())
def test_rank_agreement_is_symmetric_and_bounded(x, data):
    y = data.draw(st.lists(st.floats(0, 1, allow_subnormal=False), min_size=len(x), max_size=len(x)))
    xy, yx = rank_agreement(x, y), rank_agreement(y, x)
    for name in SYMMETRIC:
        assert _same(xy[name], yx[name]), (name, xy[name], yx[name])
    for name in ("spearman", "kendall", "weighted_tau", "pearson"):
        assert math.isnan(xy[name]) or -1 - 1e-9 <= xy[name] <= 1 + 1e-9
    for name in ("ndcg", "rbo"):
        assert math.isnan(xy[name]) or 0 <= xy[name] <= 1 + 1e-9


@settings(max_examples=30, deadline=None)
@given(x=st.lists(st.integers(0, 100), min_size=2, max_size=8, unique=True))
def test_rank_agreement_of_a_ranking_with_itself_and_its_reverse(x):
    assume(len(set(x)) == len(x))
    same = rank_agreement(x, [v * 3 + 1 for v in x])
    assert all(math.isclose(same[m], 1.0) for m in ("spearman", "kendall", "weighted_tau", "ndcg", "rbo"))
    reverse = rank_agreement(x, [-v for v in x])
    assert all(math.isclose(reverse[m], -1.0) for m in ("spearman", "kendall", "weighted_tau"))
