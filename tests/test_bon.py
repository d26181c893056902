"""Best-of-k: the exact expectation against brute-force enumeration, the reference rule, the curves."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from prb_utils.downstream.bon import (
    best_of_first_k,
    bon_curves,
    bon_metrics,
    expected_best_of_k,
    oracle_best_of_k,
    per_question_best_of_k,
)
from prb_utils.errors import PRBError


def brute_force(scores, quality, k):
    """Average over every k-subset of the mean quality of its tied top-scored samples."""
    values = []
    for subset in itertools.combinations(range(len(scores)), k):
        top = max(scores[i] for i in subset)
        winners = [quality[i] for i in subset if scores[i] == top]
        values.append(sum(winners) / len(winners))
    return sum(values) / len(values)


@pytest.mark.parametrize("seed", range(40))
def test_expected_best_of_k_matches_enumeration_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    # few distinct score values so that ties are frequent
    scores = rng.integers(0, 4, size=n).astype(float).tolist()
    quality = rng.random(n).round(3).tolist()
    for k in range(1, n + 1):
        assert expected_best_of_k(scores, quality, k) == pytest.approx(brute_force(scores, quality, k))


def test_expected_best_of_k_continuous_scores():
    rng = np.random.default_rng(7)
    scores, quality = rng.normal(size=7).tolist(), rng.random(7).tolist()
    for k in range(1, 8):
        assert expected_best_of_k(scores, quality, k) == pytest.approx(brute_force(scores, quality, k))


def test_expected_best_of_k_known_values():
    # k=1 is the mean quality; k=N picks the top scorer; perfect RM at k=N reaches the best quality
    q = [0.2, 0.4, 1.0, 0.0]
    assert expected_best_of_k([4, 3, 2, 1], q, 1) == pytest.approx(0.4)
    assert expected_best_of_k([4, 3, 2, 1], q, 4) == pytest.approx(0.2)
    assert expected_best_of_k(q, q, 4) == pytest.approx(1.0)
    # all scores tied: every k gives the mean
    assert expected_best_of_k([1, 1, 1, 1], q, 3) == pytest.approx(0.4)
    assert oracle_best_of_k(q, 2) == pytest.approx(brute_force(q, q, 2))


def test_expected_best_of_k_large_n_is_finite_and_bounded():
    rng = np.random.default_rng(0)
    scores, quality = rng.normal(size=400), rng.random(400)
    value = expected_best_of_k(scores, quality, 200)
    assert quality.min() <= value <= quality.max()


def test_best_of_first_k_follows_reference_rule():
    scores, quality = [0.3, 0.9, 0.9, 2.0], [0.1, 0.5, 0.7, 1.0]
    assert best_of_first_k(scores, quality, 1) == 0.1
    assert best_of_first_k(scores, quality, 3) == 0.5  # first of the tied winners, like max()
    assert best_of_first_k(scores, quality, 3, ties="split") == pytest.approx(0.6)
    assert best_of_first_k(scores, quality, 4) == 1.0


@pytest.mark.parametrize(
    "args",
    [([1.0, 2.0], [0.5], 1), ([1.0, 2.0], [0.5, 0.1], 3), ([1.0, 2.0], [0.5, 0.1], 0),
     ([float("nan"), 2.0], [0.5, 0.1], 1)],
)
def test_expected_best_of_k_rejects_bad_input(args):
    with pytest.raises(PRBError):
        expected_best_of_k(*args)


def _frame():
    rows = []
    rng = np.random.default_rng(3)
    for qi in range(6):
        quality = rng.random(4)
        for model, noise in (("good", 0.0), ("noisy", 1.0)):
            scores = quality + noise * rng.normal(size=4)
            for i in range(4):
                rows.append(dict(model=model, subset="s", id=f"q{qi}", sample_idx=i,
                                 rm_score=scores[i], quality=quality[i]))
    return pd.DataFrame(rows)


def test_per_question_and_curves():
    frame = _frame()
    per_q = per_question_best_of_k(frame, [1, 2, 4, 8])
    assert set(per_q["model"]) == {"good", "noisy", "oracle", "random"}
    assert 8 not in set(per_q["k"])  # only 4 samples per question
    curves = bon_curves(frame, [1, 2, 4])
    good = curves[(curves.model == "good") & (curves.method == "exact")].set_index("k")
    oracle = curves[(curves.model == "oracle") & (curves.method == "exact")].set_index("k")
    # an RM whose score is the quality itself is the oracle
    assert np.allclose(good["mean"], oracle["mean"])
    assert (good["n"] == 6).all()
    assert (good["ci_low"] <= good["mean"]).all() and (good["mean"] <= good["ci_high"]).all()
    # k=1 of the exact method is the mean quality, the same for every RM
    k1 = curves[(curves.k == 1) & (curves.method == "exact")]["mean"]
    assert np.allclose(k1, k1.iloc[0])
    boot = bon_curves(frame, [2], seed=1)
    again = bon_curves(frame, [2], seed=1)
    pd.testing.assert_frame_equal(boot, again)


def test_curves_drop_missing_quality_and_metrics():
    frame = _frame()
    frame.loc[(frame.id == "q0") & (frame.sample_idx == 0), "quality"] = np.nan
    per_q = per_question_best_of_k(frame, [4])
    assert "q0" not in set(per_q[per_q.k == 4]["id"])  # only 3 valid samples left
    metrics = bon_metrics(bon_curves(frame, [1, 2]))
    assert list(metrics.index) == ["good", "noisy"]
    assert metrics.loc["good", "bon@2"] >= metrics.loc["noisy", "bon@2"]
    assert metrics.loc["good", "bon_gain@1"] == pytest.approx(0.0)


def test_bon_frame_validation():
    with pytest.raises(PRBError, match="lacks"):
        bon_curves(pd.DataFrame({"model": ["a"]}), [1])
    frame = _frame()
    with pytest.raises(PRBError, match="duplicate"):
        bon_curves(pd.concat([frame, frame.head(1)]), [1])


def test_gain_curves_are_paired_differences():
    frame = _frame()
    plain = bon_curves(frame, [1, 2, 4]).set_index(["model", "method", "k"])["mean"]
    gain = bon_curves(frame, [1, 2, 4], gain=True).set_index(["model", "method", "k"])
    assert np.allclose(gain.loc[("random", "exact"), "mean"], 0.0)
    for k in (1, 2, 4):
        assert gain.loc[("good", "exact", k), "mean"] == pytest.approx(
            plain[("good", "exact", k)] - plain[("random", "exact", k)])
    # pairing removes the spread between questions: the gain interval is narrower
    g = gain.loc[("good", "exact", 4)]
    p = bon_curves(frame, [4]).set_index(["model", "method", "k"]).loc[("good", "exact", 4)]
    assert g["ci_high"] - g["ci_low"] < p["ci_high"] - p["ci_low"]


def test_baselines_use_the_whole_sample_pool_not_the_first_rms_valid_samples():
    # reproduction: the first RM ("a") has NaN scores on the two best samples; the true random baseline
    # (mean quality of the 5 samples) is 0.4 and the oracle best-of-2 is the mean of max over pairs
    quality = [0.0, 0.0, 0.0, 1.0, 1.0]
    rows = [dict(model=m, subset="s", id="q", sample_idx=i, quality=quality[i],
                 rm_score=(float("nan") if (m == "a" and i >= 3) else float(i))) for m in ("a", "b") for i in range(5)]
    per_q = per_question_best_of_k(pd.DataFrame(rows), [1, 2], methods=["exact"]).set_index(["model", "k"])
    assert per_q.loc[("random", 1), "value"] == pytest.approx(0.4)
    assert per_q.loc[("random", 1), "n"] == 5
    assert per_q.loc[("oracle", 2), "value"] == pytest.approx(brute_force(quality, quality, 2))
    metrics = bon_metrics(bon_curves(pd.DataFrame(rows), [1, 2], n_boot=50))
    assert metrics.loc["b", "bon_gain@1"] == pytest.approx(0.0)
    assert metrics.loc["b", "bon_gain@2"] == pytest.approx(expected_best_of_k(range(5), quality, 2) - 0.4)


def test_conflicting_quality_between_rms_is_an_error():
    rows = [dict(model=m, subset="s", id="q", sample_idx=0, rm_score=1.0, quality=q) for m, q in (("a", 0.1), ("b", 0.9))]
    with pytest.raises(PRBError, match="different quality"):
        per_question_best_of_k(pd.DataFrame(rows), [1])


def test_sample_idx_is_cast_to_int_so_first_k_follows_numeric_order():
    # samples "2" and "10" as strings sort "10" < "2"; as integers sample 2 comes first
    idx = ["0", "1", "2", "10"]
    rows = [dict(model="rm", subset="s", id="q", sample_idx=i, rm_score=s, quality=q)
            for i, s, q in zip(idx, [0.0, 0.1, 0.9, 0.5], [0.0, 0.1, 1.0, 0.5], strict=True)]
    per_q = per_question_best_of_k(pd.DataFrame(rows), [3], methods=["first"], oracle=False)
    assert per_q["value"].tolist() == [1.0]  # first 3 are samples 0, 1, 2; sample 2 scores highest
    for bad in (["0", "x"], [0, 1.5], [0, -1]):
        frame = pd.DataFrame([dict(model="rm", subset="s", id="q", sample_idx=i, rm_score=0.0, quality=0.0)
                              for i in bad])
        with pytest.raises(PRBError, match="sample_idx"):
            per_question_best_of_k(frame, [1])
    dup = pd.DataFrame([dict(model="rm", subset="s", id="q", sample_idx=i, rm_score=0.0, quality=0.0)
                        for i in ("1", 1)])
    with pytest.raises(PRBError, match="duplicate"):
        per_question_best_of_k(dup, [1])


def test_curve_intervals_stay_within_the_quality_range():
    # values 1, 1, 1, 1, 0.2 per question: a t interval reaches about 1.28; the bootstrap stays <= 1
    quality = [1.0, 1.0, 1.0, 1.0, 0.2]
    rows = [dict(model="rm", subset="s", id=f"q{j}", sample_idx=0, rm_score=0.0, quality=q)
            for j, q in enumerate(quality)]
    curves = bon_curves(pd.DataFrame(rows), [1], oracle=False, methods=["exact"])
    assert 0.2 <= curves["ci_low"].iloc[0] <= curves["mean"].iloc[0] <= curves["ci_high"].iloc[0] <= 1.0
    rng = np.random.default_rng(5)
    frame = _frame().assign(quality=lambda f: np.where(rng.random(len(f)) < 0.8, 1.0, f["quality"]))
    frame["quality"] = frame.groupby(["subset", "id", "sample_idx"])["quality"].transform("first")
    for gain in (False, True):
        c = bon_curves(frame, [1, 2, 4], gain=gain, n_boot=300)
        lo, hi = (-1.0, 1.0) if gain else (0.0, 1.0)
        assert (c["ci_low"] >= lo).all() and (c["ci_high"] <= hi).all()
    with pytest.raises(PRBError, match="level"):
        bon_curves(frame, [1], level=95)


def test_gain_is_taken_per_question_before_averaging():
    # RM "a" has no valid score on question q2 (the easy one: both answers rated 1); on q1 it picks the good
    # answer. Its gain is on q1 only: 1 - 0.5 = 0.5; the difference of the two means would be
    # 1.0 - mean(0.5, 1.0) = 0.25, charging it for a question it never answered.
    rows = [dict(model=m, subset="s", id=q, sample_idx=i, quality=qual[i],
                 rm_score=float("nan") if (m == "a" and q == "q2") else float(i))
            for m in ("a", "b") for q, qual in (("q1", [0.0, 1.0]), ("q2", [1.0, 1.0])) for i in range(2)]
    curves = bon_curves(pd.DataFrame(rows), [2], methods=["exact"], n_boot=50)
    metrics = bon_metrics(curves)
    assert metrics.loc["a", "bon@2"] == 1.0 and metrics.loc["a", "bon_gain@2"] == pytest.approx(0.5)
    assert metrics.loc["b", "bon_gain@2"] == pytest.approx(((1.0 - 0.5) + (1.0 - 1.0)) / 2)
    gains = bon_curves(pd.DataFrame(rows), [2], methods=["exact"], n_boot=50, gain=True).set_index("model")
    assert gains.loc["a", "mean"] == pytest.approx(metrics.loc["a", "bon_gain@2"])  # the gain curve agrees


def test_each_method_has_its_own_oracle_and_random_and_no_rm_passes_its_oracle():
    # the first sample of every question is its best answer: best-of-first-1 is then the best quality, far
    # above the exact oracle at k=1 (the mean quality), so a first-k curve needs a first-k ceiling
    rng = np.random.default_rng(11)
    rows = []
    for q in range(5):
        quality = np.concatenate([[1.0], rng.random(5) * 0.5])
        for model in ("a", "b"):
            scores = rng.normal(size=6)
            rows += [dict(model=model, subset="s", id=f"q{q}", sample_idx=i, rm_score=scores[i], quality=quality[i])
                     for i in range(6)]
    frame = pd.DataFrame(rows)
    per_q = per_question_best_of_k(frame, [1, 2, 4])
    assert set(zip(per_q["model"], per_q["method"], strict=True)) >= {("oracle", "exact"), ("oracle", "first"),
                                                         ("random", "exact"), ("random", "first")}
    for (subset, qid), grp in frame[frame.model == "a"].groupby(["subset", "id"]):
        q = grp.sort_values("sample_idx")["quality"].to_numpy()
        mine = per_q[(per_q.subset == subset) & (per_q.id == qid)].set_index(["model", "method", "k"])["value"]
        for k in (1, 2, 4):
            assert mine[("oracle", "first", k)] == pytest.approx(q[:k].max())   # brute force: the best of the first k
            assert mine[("random", "first", k)] == pytest.approx(q[:k].mean())
            assert mine[("oracle", "exact", k)] == pytest.approx(brute_force(q, q, k))
    curves = bon_curves(frame, [1, 2, 4], n_boot=50).set_index(["model", "method", "k"])["mean"]
    assert curves[("a", "first", 1)] > curves[("oracle", "exact", 1)]   # what the old panel showed
    for method in ("exact", "first"):
        for k in (1, 2, 4):
            for model in ("a", "b"):
                assert curves[(model, method, k)] <= curves[("oracle", method, k)] + 1e-12
    # the gain stays the gain over one random answer of all N, whatever the method
    gain = bon_curves(frame, [2], n_boot=50, gain=True).set_index(["model", "method", "k"])["mean"]
    assert gain[("a", "first", 2)] == pytest.approx(curves[("a", "first", 2)] - curves[("random", "exact", 2)])
    only_first = bon_curves(frame, [2], methods=["first"], n_boot=50)
    assert set(only_first["method"]) == {"first"}
    assert set(only_first["model"]) == {"a", "b", "oracle", "random"}


def test_an_rms_headroom_share_is_measured_on_its_own_questions_and_never_exceeds_one():
    """An RM that scored only the easy question (all the pool's headroom elsewhere is out of its reach) used to be
    compared with the pool's mean headroom and could realise '4.6x' of it; on its own questions it is at most 1."""
    from prb_utils.downstream.bon import bon_curves, headroom

    rows = []
    for q, qualities in (("easy", [0.0, 1.0]), ("hard", [0.0, 0.1])):
        for i, quality in enumerate(qualities):
            rows.append({"model": "rm", "subset": "s", "id": q, "sample_idx": i, "rm_score": quality,
                         "quality": quality})
            if q == "easy":
                rows.append({"model": "partial", "subset": "s", "id": q, "sample_idx": i, "rm_score": quality,
                             "quality": quality})
    curves = bon_curves(pd.DataFrame(rows), [2], oracle=True, methods=["exact"], n_boot=50)
    share = headroom(curves).set_index("model")["share"]
    assert share["rm"] == pytest.approx(1.0) and share["partial"] == pytest.approx(1.0)
