"""Accuracy, intervals and paired tests of prb_utils.analysis.metrics on small tables whose answers are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from prb_utils.analysis.metrics import (
    accuracy_table,
    compare,
    holm,
    macro_accuracy,
    mcnemar_exact,
    profile_lift,
    summarize,
    wilson_ci,
)
from prb_utils.analysis.resampling import bootstrap_ci, clustered_paired_test
from prb_utils.errors import PRBError


def rows(model: str, profile: str, subset: str, outcomes: list[str], *, start: int = 0) -> pd.DataFrame:
    return pd.DataFrame({
        "model": model, "kind": "length", "profile": profile, "subset": subset, "category": "c",
        "id": [f"{subset}-{i}" for i in range(start, start + len(outcomes))], "outcome": outcomes,
    })


def paired(model: str, a: str, b: str, *, both: int, a_only: int, b_only: int, neither: int,
           column: str = "profile", other: str = "m") -> pd.DataFrame:
    """Two levels of ``column`` scored on the same pairs with a known 2x2 table."""
    pattern = [("correct", "correct")] * both + [("correct", "wrong")] * a_only
    pattern += [("wrong", "correct")] * b_only + [("wrong", "wrong")] * neither
    out_a = [p[0] for p in pattern]
    out_b = [p[1] for p in pattern]
    if column == "profile":
        return pd.concat([rows(model, a, "s", out_a), rows(model, b, "s", out_b)], ignore_index=True)
    return pd.concat([rows(a, other, "s", out_a), rows(b, other, "s", out_b)], ignore_index=True)


def test_accuracy_table_counts_and_wilson_match_statsmodels():
    res = pd.concat([
        rows("m1", "none", "s", ["correct"] * 7 + ["wrong"] * 2 + ["tie"] + ["invalid"] * 2),
        rows("m2", "none", "s", ["correct"] * 3 + ["wrong"] * 9),
    ], ignore_index=True)
    table = accuracy_table(res)
    assert list(table.columns) == ["model", "profile", "n", "correct", "ties", "invalid", "accuracy",
                                   "ci_low", "ci_high"]
    m1 = table.set_index("model").loc["m1"]
    assert (m1.n, m1.correct, m1.ties, m1.invalid) == (12, 7, 1, 2)
    assert m1.accuracy == pytest.approx(7 / 12)
    low, high = proportion_confint(7, 12, alpha=0.05, method="wilson")
    assert (m1.ci_low, m1.ci_high) == (pytest.approx(low), pytest.approx(high))
    m2 = table.set_index("model").loc["m2"]
    low, high = proportion_confint(3, 12, method="wilson")
    assert (m2.accuracy, m2.ci_low, m2.ci_high) == (0.25, pytest.approx(low), pytest.approx(high))


def test_accuracy_table_half_credit_is_explicit():
    res = rows("m", "none", "s", ["correct", "tie", "tie", "wrong"])
    plain = accuracy_table(res)
    half = accuracy_table(res, half_credit=True)
    assert plain["accuracy"].iloc[0] == 0.25 and "credit" not in plain.columns
    assert half["accuracy"].iloc[0] == 0.5 and half["credit"].iloc[0] == 2.0
    low, high = proportion_confint(2, 4, method="wilson")
    assert half["ci_low"].iloc[0] == pytest.approx(low) and half["ci_high"].iloc[0] == pytest.approx(high)


def test_accuracy_table_by_string_and_bootstrap_ci_is_seeded():
    res = pd.concat([rows("m", "none", "a", ["correct"] * 30 + ["wrong"] * 10),
                     rows("m", "none", "b", ["correct"] * 10 + ["wrong"] * 30)], ignore_index=True)
    by_subset = accuracy_table(res, "model,subset")
    assert by_subset["accuracy"].tolist() == [0.75, 0.25]
    boot1 = accuracy_table(res, "subset", ci="bootstrap", seed=3)
    boot2 = accuracy_table(res, "subset", ci="bootstrap", seed=3)
    pd.testing.assert_frame_equal(boot1, boot2)
    assert ((boot1.ci_low < boot1.accuracy) & (boot1.accuracy < boot1.ci_high)).all()
    no_ci = accuracy_table(res, "subset", ci=None)
    assert no_ci[["ci_low", "ci_high"]].isna().all().all()


def test_accuracy_table_rejects_bad_input():
    with pytest.raises(PRBError, match="outcome"):
        accuracy_table(rows("m", "none", "s", ["correct", "maybe"]))
    with pytest.raises(PRBError, match="lacks the column"):
        accuracy_table(rows("m", "none", "s", ["correct"]), by=["nope"])
    with pytest.raises(PRBError, match="confidence interval"):
        accuracy_table(rows("m", "none", "s", ["correct"]), ci="exact")


def test_wilson_ci_scalar_array_and_empty():
    low, high = wilson_ci(8, 10)
    ref = proportion_confint(8, 10, method="wilson")
    assert (low, high) == (pytest.approx(ref[0]), pytest.approx(ref[1]))
    lows, highs = wilson_ci(np.array([0, 5]), np.array([0, 5]))
    assert np.isnan(lows[0]) and np.isnan(highs[0]) and highs[1] == pytest.approx(1.0)


def test_bootstrap_ci_close_to_normal_approximation_and_stratified():
    values = np.array([0.0, 1.0] * 200)
    low, high = bootstrap_ci(values, seed=0)
    assert low == pytest.approx(0.5 - 1.96 * 0.025, abs=0.01)
    assert high == pytest.approx(0.5 + 1.96 * 0.025, abs=0.01)
    smooth = np.random.default_rng(5).normal(size=50)
    assert bootstrap_ci(smooth, seed=1) == bootstrap_ci(smooth, seed=1)
    assert bootstrap_ci(smooth, seed=1) != bootstrap_ci(smooth, seed=2)
    # resampling within strata keeps each stratum's size, so a stratum-constant column has a fixed mean
    strata = np.array(["a"] * 30 + ["b"] * 10)
    constant = np.where(strata == "a", 1.0, 0.0)
    assert bootstrap_ci(constant, strata=strata) == (pytest.approx(0.75), pytest.approx(0.75))
    assert np.isnan(bootstrap_ci([])[0])


def test_bootstrap_fast_mean_agrees_with_index_resampling():
    values = np.r_[np.ones(130), np.zeros(60), np.full(10, 0.5)]  # correct / wrong / half-credit ties
    fast = bootstrap_ci(values, n_boot=4000, seed=0)
    slow = bootstrap_ci(values, lambda v: float(v.mean()), n_boot=4000, seed=0)
    assert fast == pytest.approx(slow, abs=0.012)
    strata = np.array(["a"] * 100 + ["b"] * 100)
    fast = bootstrap_ci(values, strata=strata, n_boot=4000, seed=0)
    slow = bootstrap_ci(values, lambda v: float(v.mean()), strata=strata, n_boot=4000, seed=0)
    assert fast == pytest.approx(slow, abs=0.012)


def test_holm_known_example():
    # sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> monotone 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    out = holm([0.2, np.nan])
    assert out[0] == pytest.approx(0.2) and np.isnan(out[1])


def test_holm_equals_statsmodels_multipletests_on_random_families(monkeypatch):
    """prb's step-down is statsmodels' Holm (ties, p-values that adjust past 1, families of one), without its
    ``gc.collect()`` (switched off here too: 250 full collections of the test process's heap take minutes)."""
    import gc

    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    rng = np.random.default_rng(0)
    for size in [1, 2, 3, 7, 40]:
        for _ in range(50):
            p = np.round(rng.uniform(0, 1, size) ** rng.uniform(1, 6), 2)   # rounding makes ties
            assert holm(p) == pytest.approx(multipletests(p, method="holm")[1], abs=1e-15)


def test_compare_matches_hand_built_mcnemar_table():
    res = paired("m", "none", "full", both=5, a_only=2, b_only=9, neither=4)
    cmp = compare(res, "profile", baseline="none")
    assert len(cmp) == 1
    row = cmp.iloc[0]
    assert (row.model, row.level_a, row.level_b) == ("m", "none", "full")
    assert (row.n_pairs, row.both_correct, row.a_only, row.b_only, row.neither) == (20, 5, 2, 9, 4)
    expected = mcnemar(np.array([[5, 2], [9, 4]]), exact=True).pvalue
    assert row.p_value == pytest.approx(expected)
    assert row.p_value == pytest.approx(binomtest(2, 11, 0.5).pvalue)
    assert row["diff"] == pytest.approx((14 - 7) / 20)
    assert row.accuracy_a == pytest.approx(7 / 20) and row.accuracy_b == pytest.approx(14 / 20)
    assert row.ci_low < row["diff"] < row.ci_high
    assert row.p_holm == pytest.approx(row.p_value)


def test_compare_all_pairs_holm_over_family_and_unmatched_pairs_dropped():
    base = paired("m", "none", "full", both=3, a_only=0, b_only=8, neither=1)
    top = rows("m", "top3", "s", ["correct"] * 6 + ["wrong"] * 4)
    top = top[top["id"] != "s-0"]  # one pair never scored under top3
    res = pd.concat([base, top], ignore_index=True)
    cmp = compare(res, "profile")
    assert list(zip(cmp.level_a, cmp.level_b, strict=True)) == [("none", "full"), ("none", "top3"),
                                                               ("full", "top3")]
    assert cmp.set_index("level_b").loc["top3", "n_pairs"].tolist() == [9, 9]  # s-1..s-9
    assert cmp.iloc[0].n_pairs == 12
    assert cmp.iloc[0]["diff"] == pytest.approx((11 - 3) / 12)  # full - none
    assert cmp["p_holm"].to_numpy() == pytest.approx(holm(cmp["p_value"]))
    assert (cmp["p_holm"] >= cmp["p_value"]).all()


def test_compare_models_within_profiles_and_bad_options():
    res = pd.concat([paired("", "m1", "m2", both=2, a_only=4, b_only=0, neither=2, column="model", other="none"),
                     paired("", "m1", "m2", both=2, a_only=0, b_only=1, neither=5, column="model", other="full")],
                    ignore_index=True)
    cmp = compare(res, "model")
    assert cmp.set_index("profile")[["a_only", "b_only"]].to_dict("index") == {
        "full": {"a_only": 0, "b_only": 1}, "none": {"a_only": 4, "b_only": 0}}
    pooled = compare(res, "model", by=[])
    assert pooled[["n_pairs", "a_only", "b_only"]].iloc[0].tolist() == [16, 4, 1]
    with pytest.raises(PRBError, match="baseline"):
        compare(res, "model", baseline="m9")
    with pytest.raises(PRBError, match="duplicate"):
        compare(pd.concat([res, res.iloc[:1]]), "model")


def test_profile_lift_per_model():
    res = pd.concat([paired("m1", "none", "top3", both=1, a_only=0, b_only=3, neither=0),
                     paired("m2", "none", "top3", both=0, a_only=2, b_only=0, neither=2)], ignore_index=True)
    lift = profile_lift(res)
    assert list(lift.columns) == ["model", "profile", "baseline", "n_pairs", "accuracy_baseline",
                                  "accuracy_condition", "lift", "ci_low", "ci_high", "p_value", "p_holm"]
    got = lift.set_index("model")
    assert got.loc["m1", "lift"] == pytest.approx(0.75) and got.loc["m2", "lift"] == pytest.approx(-0.5)
    assert got.loc["m1", "accuracy_baseline"] == pytest.approx(0.25)
    assert got.loc["m1", "ci_low"] <= 0.75 <= got.loc["m1", "ci_high"]
    with pytest.raises(PRBError, match="baseline"):
        profile_lift(res[res.profile == "top3"])


def test_macro_accuracy_weights_subsets_equally():
    res = pd.concat([rows("m", "none", "a", ["correct"] * 9 + ["wrong"]),
                     rows("m", "none", "b", ["correct"] + ["wrong"] * 29)], ignore_index=True)
    macro = macro_accuracy(res).iloc[0]
    assert macro.accuracy == pytest.approx((0.9 + 1 / 30) / 2)
    assert macro.n == 40 and macro.n_levels == 2
    assert macro.ci_low < macro.accuracy < macro.ci_high
    assert accuracy_table(res)["accuracy"].iloc[0] == pytest.approx(10 / 40)


def test_summarize_adds_paired_columns_against_baseline():
    res = pd.concat([paired("m1", "none", "full", both=2, a_only=0, b_only=6, neither=2),
                     paired("m2", "none", "full", both=2, a_only=1, b_only=1, neither=6)], ignore_index=True)
    plain = summarize(res, "model,profile")
    pd.testing.assert_frame_equal(plain.drop(columns="tie_rate"), accuracy_table(res, ["model", "profile"]))
    assert (plain["tie_rate"] == plain["ties"] / plain["n"]).all()
    out = summarize(res, ["model"], compare="profile")
    assert list(out.columns[:10]) == ["model", "profile", "n", "correct", "ties", "tie_rate", "invalid", "accuracy",
                                      "ci_low", "ci_high"]
    full = out.set_index(["model", "profile"])
    assert full.loc[("m1", "full"), "vs"] == "none"
    assert full.loc[("m1", "full"), "diff"] == pytest.approx(0.6)
    assert full.loc[("m2", "full"), "diff"] == pytest.approx(0.0)
    assert full.loc[("m2", "full"), "p_value"] == pytest.approx(1.0)
    assert pd.isna(full.loc[("m1", "none"), "p_value"])
    tested = out["p_value"].notna()
    assert out.loc[tested, "p_holm"].to_numpy() == pytest.approx(holm(out.loc[tested, "p_value"]))



def test_profile_lift_names_a_baseline_that_is_not_none():
    res = paired("m1", "top3", "full", both=1, a_only=0, b_only=3, neither=0)
    row = profile_lift(res, baseline="top3").iloc[0]
    assert (row["profile"], row["baseline"]) == ("full", "top3")
    assert row["accuracy_baseline"] == pytest.approx(0.25) and row["accuracy_condition"] == pytest.approx(1.0)


def test_every_analysis_function_takes_level_n_boot_and_seed():
    res = pd.concat([paired("m1", "none", "top3", both=5, a_only=3, b_only=9, neither=3),
                     paired("m2", "none", "top3", both=4, a_only=4, b_only=4, neither=8)], ignore_index=True)
    wide = accuracy_table(res, ci="bootstrap", level=0.99, n_boot=300, seed=1)
    narrow = accuracy_table(res, ci="bootstrap", level=0.5, n_boot=300, seed=1)
    assert (wide["ci_high"] - wide["ci_low"] > narrow["ci_high"] - narrow["ci_low"]).all()
    for call in (lambda lv: compare(res, "profile", level=lv, n_boot=300, seed=1),
                 lambda lv: profile_lift(res, level=lv, n_boot=300, seed=1),
                 lambda lv: macro_accuracy(res, level=lv, n_boot=300, seed=1)):
        a, b = call(0.99), call(0.5)
        assert (a["ci_high"] - a["ci_low"] >= b["ci_high"] - b["ci_low"]).all()
        assert ((a["ci_high"] - a["ci_low"]) > (b["ci_high"] - b["ci_low"])).any()
    wilson_wide, wilson_narrow = wilson_ci(7, 12, level=0.99), wilson_ci(7, 12, level=0.5)
    assert wilson_wide[1] - wilson_wide[0] > wilson_narrow[1] - wilson_narrow[0]


def test_clustered_bootstrap_by_units_is_wider_when_units_repeat():
    rng = np.random.default_rng(0)
    per_question = rng.integers(0, 2, size=60).astype(float)
    values = np.repeat(per_question, 2)  # the same question for two users, the same outcome twice
    units = np.repeat(np.arange(60), 2)
    rows_low, rows_high = bootstrap_ci(values, n_boot=2000, seed=0)
    low, high = bootstrap_ci(values, units=units, n_boot=2000, seed=0)
    assert high - low > 1.3 * (rows_high - rows_low)  # about sqrt(2) wider: 60 units, not 120 rows
    q_low, q_high = bootstrap_ci(per_question, n_boot=2000, seed=0)
    assert high - low == pytest.approx(q_high - q_low, abs=0.03)
    slow = bootstrap_ci(values, lambda v: float(v.mean()), units=units, n_boot=2000, seed=0)
    assert slow == pytest.approx((low, high), abs=0.03)
    with pytest.raises(PRBError, match="strata or units"):
        bootstrap_ci(values, units=units, strata=units)


def test_summarize_refuses_half_credit_beside_strict_paired_tests():
    res = paired("m1", "none", "top3", both=1, a_only=0, b_only=3, neither=0)
    res.loc[0, "outcome"] = "tie"
    assert "credit" in summarize(res, half_credit=True).columns
    with pytest.raises(PRBError, match="Half credit"):
        summarize(res, half_credit=True, compare="profile")


def test_the_rubric_oracle_is_marked_and_is_no_lift_unless_asked():
    from prb_utils.analysis.metrics import accuracy_table, profile_lift

    rows = []
    for profile, outcomes in (("none", ["wrong"] * 4), ("top3", ["correct", "wrong", "wrong", "wrong"]),
                              ("rubric", ["correct"] * 4)):
        rows += [{"model": "m", "profile": profile, "subset": "s", "id": i, "outcome": o}
                 for i, o in enumerate(outcomes)]
    res = pd.DataFrame(rows)
    table = accuracy_table(res)
    assert dict(zip(table["profile"], table["oracle"], strict=True)) == {"none": False, "rubric": True, "top3": False}
    assert "oracle" not in accuracy_table(res[res["profile"] != "rubric"]).columns
    assert profile_lift(res)["profile"].tolist() == ["top3"]
    assert sorted(profile_lift(res, include_oracle=True)["profile"]) == ["rubric", "top3"]


# ------------------------------------------------------------------ one resampler, its defaults, small inputs
def test_small_inputs_get_ten_thousand_resamples_by_default():
    from prb_utils.analysis.resampling import N_BOOT, N_BOOT_SMALL, SMALL_SAMPLE, default_n_boot

    assert (N_BOOT_SMALL, SMALL_SAMPLE) == (10_000, 50)
    assert default_n_boot(SMALL_SAMPLE - 1) == N_BOOT_SMALL and default_n_boot(SMALL_SAMPLE) == N_BOOT
    assert default_n_boot(3, 250) == 250  # an explicit n_boot is kept
    values = np.random.default_rng(1).normal(size=30)  # continuous: the index resampler
    assert bootstrap_ci(values) == bootstrap_ci(values, n_boot=N_BOOT_SMALL)
    assert bootstrap_ci(values) != bootstrap_ci(values, n_boot=N_BOOT)
    big = np.random.default_rng(1).normal(size=80)
    assert bootstrap_ci(big) == bootstrap_ci(big, n_boot=N_BOOT)
    # clustered: the number of units decides (40 questions of 2 pairs = 80 rows, still small)
    units = np.repeat(np.arange(40), 2)
    assert bootstrap_ci(big, units=units) == bootstrap_ci(big, units=units, n_boot=N_BOOT_SMALL)


def test_the_downstream_bootstraps_use_the_one_resampler():
    from prb_utils.analysis.resampling import N_BOOT_SMALL
    from prb_utils.downstream.bon import bootstrap_mean_ci
    from prb_utils.downstream.correlation import rank_agreement_ci

    values = np.random.default_rng(2).random(25)
    assert bootstrap_mean_ci(values, n_boot=700, seed=4) == bootstrap_ci(values, n_boot=700, seed=4)
    assert bootstrap_mean_ci(values, seed=4) == bootstrap_ci(values, n_boot=N_BOOT_SMALL, seed=4)
    # 6 RMs: the default resamples rise to 10,000 (less the few that repeat one RM)
    ci = rank_agreement_ci([1, 2, 3, 4, 5, 6], [2, 1, 3, 5, 4, 6])
    assert (ci["n_boot_valid"] > 9_900).all()


def test_uncertainty_defaults_are_typed_once():
    """No signature in the package retypes the level or the number of resamples: they come from metrics."""
    import re
    from pathlib import Path

    import prb_utils

    retyped = [f"{path.name}: {m.group(0)}" for path in Path(prb_utils.__file__).parent.rglob("*.py")
               for m in re.finditer(r"\b(level: float = 0\.95|n_boot: int = [1-9]\d*|\"confidence_level\": 0\.95)",
                                    path.read_text(encoding="utf-8"))]
    assert retyped == []


# ----------------------------------------------------------------------- clustered intervals (units=)
def question_rows(outcomes_per_question: list[str], users: int = 2) -> pd.DataFrame:
    """One pair per (question, user): the same outcome for every user of a question (they move together)."""
    n = len(outcomes_per_question)
    return pd.DataFrame({
        "model": "m", "profile": "none", "subset": "s", "id": [f"q{q}-u{u}" for q in range(n) for u in range(users)],
        "question": [f"q{q}" for q in range(n) for _ in range(users)],
        "outcome": [o for o in outcomes_per_question for _ in range(users)]})


def test_accuracy_table_units_resamples_whole_questions():
    res = question_rows(["correct", "wrong", "correct", "correct", "wrong"] * 12)  # 60 questions, 120 pairs
    plain = accuracy_table(res, by=["model"], ci="bootstrap", n_boot=2000).iloc[0]
    wilson = accuracy_table(res, by=["model"]).iloc[0]
    clustered = accuracy_table(res, by=["model"], units="question", n_boot=2000).iloc[0]
    expected = bootstrap_ci((res["outcome"] == "correct").to_numpy(float), units=res["question"].to_numpy(),
                            n_boot=2000)
    assert (clustered["ci_low"], clustered["ci_high"]) == expected
    width = clustered["ci_high"] - clustered["ci_low"]
    assert width > 1.25 * (plain["ci_high"] - plain["ci_low"])  # about sqrt(2): 60 questions, not 120 pairs
    assert width > 1.25 * (wilson["ci_high"] - wilson["ci_low"])
    with pytest.raises(PRBError, match="question"):
        accuracy_table(res.drop(columns="question"), units="question")


def test_macro_accuracy_units_resamples_questions_within_subsets():
    res = question_rows(["correct", "wrong", "correct"] * 20)
    one = macro_accuracy(res, by=["model"], units="question", n_boot=3000).iloc[0]
    # one subset: the macro mean is the mean, and the clustered interval is bootstrap_ci's
    assert (one["ci_low"], one["ci_high"]) == bootstrap_ci(
        (res["outcome"] == "correct").to_numpy(float), units=res["question"].to_numpy(), n_boot=3000)
    plain = macro_accuracy(res, by=["model"], n_boot=3000).iloc[0]
    assert one["accuracy"] == plain["accuracy"]
    assert one["ci_high"] - one["ci_low"] > 1.25 * (plain["ci_high"] - plain["ci_low"])


def test_compare_units_moves_a_questions_pairs_together():
    a = question_rows(["wrong", "wrong", "correct", "wrong"] * 15)
    b = question_rows(["correct", "wrong", "correct", "correct"] * 15).assign(profile="top3")
    res = pd.concat([a, b], ignore_index=True)
    clustered = compare(res, "profile", baseline="none", units="question", n_boot=2000).iloc[0]
    plain = compare(res, "profile", baseline="none", n_boot=2000).iloc[0]
    assert clustered["diff"] == plain["diff"] == 0.5
    # the p-value is clustered too: sign flips over whole questions, far fewer units than pairs
    assert plain["p_value"] == mcnemar_exact(int(plain["a_only"]), int(plain["b_only"]))
    assert clustered["p_value"] == clustered_paired_test((a["outcome"] == "correct").to_numpy(int),
                                                         (b["outcome"] == "correct").to_numpy(int),
                                                         a["question"].to_numpy())
    assert clustered["p_value"] > plain["p_value"]
    diff = (b["outcome"] == "correct").to_numpy(float) - (a["outcome"] == "correct").to_numpy(float)
    assert (clustered["ci_low"], clustered["ci_high"]) == bootstrap_ci(diff, units=a["question"].to_numpy(),
                                                                       n_boot=2000)
    assert clustered["ci_high"] - clustered["ci_low"] > 1.25 * (plain["ci_high"] - plain["ci_low"])
    with pytest.raises(PRBError, match="units"):
        compare(res, "profile", units="model")


def test_summarize_with_units_rejects_no_difference_that_only_repeated_questions_make():
    """Eight questions, each asked for six users with the same outcomes: over pairs the difference looks clear
    (exact McNemar over 48 pairs), over questions it is 8 units and not (the sign-flip test over questions)."""
    outcomes_none = ["wrong"] * 5 + ["correct"] * 3
    outcomes_top3 = ["correct"] * 8
    rows = pd.DataFrame([{"model": "m", "profile": profile, "subset": "s", "id": f"q{q}-u{u}", "question": f"q{q}",
                          "outcome": outcomes[q]}
                         for profile, outcomes in (("none", outcomes_none), ("top3", outcomes_top3))
                         for q in range(8) for u in range(6)])
    pairs = summarize(rows, "profile", compare="profile", n_boot=500).set_index("profile")
    questions = summarize(rows, "profile", compare="profile", units="question", n_boot=500).set_index("profile")
    assert pairs.loc["top3", "p_value"] < 0.05 <= questions.loc["top3", "p_value"]
    assert questions.loc["top3", "p_value"] == pytest.approx(2 * 0.5**5)
    assert pairs.loc["top3", "diff"] == questions.loc["top3", "diff"]


def test_near_ties_are_decided_pairs_within_the_dtypes_resolution():
    """A bfloat16 job's 1.0 against 1.0039 is one step of its 8-bit significand apart: a near tie; the same pair
    from a float32 job is decided by the model. Near ties keep their outcome and are counted beside the ties."""
    res = pd.DataFrame({"model": ["bf"] * 4 + ["fp"] * 4, "profile": "none",
                        "score_chosen": [1.0, 1.0, 3.0, 2.0] * 2, "score_rejected": [1.0039, 1.0, 1.0, 2.0] * 2,
                        "outcome": ["wrong", "tie", "correct", "tie"] * 2,
                        "score_dtype": ["bfloat16"] * 4 + ["float32"] * 4})
    table = accuracy_table(res, "model").set_index("model")
    assert table.loc["bf", "near_ties"] == 1 and table.loc["fp", "near_ties"] == 0
    assert (table["ties"] == 2).all() and (table["accuracy"] == 0.25).all()
    assert list(table.columns[:4]) == ["n", "correct", "ties", "near_ties"]
    assert "near_ties" not in accuracy_table(res.drop(columns=["score_chosen", "score_rejected"]), "model")
