"""Calibration and confidence (:mod:`prb_utils.analysis.calibration`), each statistic checked against a hand
computation, sklearn or scipy on frames built in code."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.optimize import minimize_scalar

from prb_utils.analysis import calibration as cal
from prb_utils.analysis import plots
from prb_utils.analysis.breakdowns import score_margins
from prb_utils.analysis.resampling import bootstrap_ci
from prb_utils.errors import PRBError
from prb_utils.models import ModelOptions
from prb_utils.profile import PROFILE_HEADER, QUESTION_PREFIX

N_BOOT = 200


# ------------------------------------------------------------------------------------------ statistics
def test_ece_matches_a_hand_computation_on_six_predictions():
    p = [0.05, 0.15, 0.42, 0.48, 0.81, 0.97]
    y = [0, 0, 1, 0, 1, 1]
    # ten bins: 0.05 -> bin 0 (gap 0.05), 0.15 -> bin 1 (0.15), 0.42 and 0.48 -> bin 4 (observed 0.5, mean
    # 0.45: gap 0.05, two predictions), 0.81 -> bin 8 (0.19), 0.97 -> bin 9 (0.03)
    assert cal.expected_calibration_error(p, y) == pytest.approx((0.05 + 0.15 + 2 * 0.05 + 0.19 + 0.03) / 6)
    # two bins: [0, 0.5) holds four (observed 0.25, mean 0.275), [0.5, 1] two (observed 1, mean 0.89)
    assert cal.expected_calibration_error(p, y, n_bins=2) == pytest.approx((4 * 0.025 + 2 * 0.11) / 6)
    assert np.isnan(cal.expected_calibration_error([], []))


def test_bins_are_equal_width_and_closed_at_one():
    assert cal.bin_index([0.0, 0.0999, 0.1, 0.5, 0.9999, 1.0]).tolist() == [0, 0, 1, 5, 9, 9]
    bins = cal.reliability_bins([0.05, 0.15, 0.42, 0.48, 0.81, 0.97], [0, 0, 1, 0, 1, 1])
    assert bins["bin"].tolist() == [0, 1, 4, 8, 9] and bins["n"].tolist() == [1, 1, 2, 1, 1]
    row = bins.set_index("bin").loc[4]
    assert (row["bin_low"], row["bin_high"]) == pytest.approx((0.4, 0.5))
    assert (row["mean_predicted"], row["observed"]) == pytest.approx((0.45, 0.5))


def test_brier_and_log_loss_match_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    p = rng.uniform(0.01, 0.99, 50)
    y = rng.integers(0, 2, 50)
    assert cal.brier_score(p, y) == pytest.approx(metrics.brier_score_loss(y, p))
    assert cal.log_loss(p, y) == pytest.approx(metrics.log_loss(y, p))


def test_brier_and_log_loss_by_hand():
    assert cal.brier_score([0.9, 0.3], [1, 0]) == pytest.approx((0.01 + 0.09) / 2)
    assert cal.log_loss([0.9, 0.3], [1, 0]) == pytest.approx(-(np.log(0.9) + np.log(0.7)) / 2)
    with pytest.raises(PRBError, match="3 predictions for 2 outcomes"):
        cal.brier_score([0.1, 0.2, 0.3], [1, 0])


def test_both_orders_turn_pair_scores_into_the_symmetric_form():
    p = np.array([0.9, 0.8, 0.3, 0.6])
    q, y = cal.both_orders(p)
    assert q.tolist() == pytest.approx([0.9, 0.8, 0.3, 0.6, 0.1, 0.2, 0.7, 0.4]) and y.tolist() == [1] * 4 + [0] * 4
    assert cal.brier_score(q, y) == pytest.approx(np.mean((1 - p) ** 2))
    assert cal.log_loss(q, y) == pytest.approx(-np.mean(np.log(p)))


def test_spearman_matches_scipy_and_is_nan_for_a_constant_side():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=30), rng.integers(0, 5, 30)  # ties on y
    assert cal.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic)
    assert np.isnan(cal.spearman([1, 2, 3], [4, 4, 4])) and np.isnan(cal.spearman([1, 2], [2, 1]))


def test_the_spearman_interval_is_the_clustered_bootstrap_of_spearman_written_out():
    """Computed at once as row weights, it has the intervals of resampling whole units and ranking each resample
    (ties in both columns, units of one and of several rows, resamples where a side is constant)."""
    rng = np.random.default_rng(1)
    for n, n_units in [(12, 4), (40, 40), (60, 9)]:
        values = np.column_stack([rng.integers(0, 6, n), np.round(rng.normal(size=n), 1)]).astype(float)
        units = rng.integers(0, n_units, n).astype(str)
        for seed in (0, 3):
            fast = cal.spearman_interval(values, units, n_boot=300, seed=seed)
            slow = bootstrap_ci(values, lambda v: cal.spearman(v[:, 0], v[:, 1]), units=units, n_boot=300, seed=seed)
            assert fast == pytest.approx(slow, abs=1e-12)
    constant = np.column_stack([np.ones(6), np.arange(6.0)])
    assert all(np.isnan(cal.spearman_interval(constant, list("aabbcc"), n_boot=50)))


# ------------------------------------------------------------------------------------------ temperature
def test_temperature_matches_scipy_optimize():
    margins = np.array([2.0, 0.5, -1.0, 3.0, -0.2, 1.5, 0.7, -2.5])

    def nll(t: float) -> float:
        return float(np.sum(np.logaddexp(0, -margins / t)))

    best = minimize_scalar(nll, bounds=(1e-3, 1e3), method="bounded", options={"xatol": 1e-10})
    assert cal.fit_temperature(margins) == pytest.approx(best.x, rel=1e-6)
    # the scale of the scores does not matter: margins x 100 give T x 100
    assert cal.fit_temperature(margins * 100) == pytest.approx(100 * best.x, rel=1e-6)


def test_temperature_degenerate_inputs():
    assert cal.fit_temperature([-3.0, -1.0, 1.0]) == np.inf  # the margins favour the rejected answer
    with pytest.raises(PRBError, match="every decided pair favours the chosen answer"):
        cal.fit_temperature([1.0, 2.0, 0.0])
    with pytest.raises(PRBError, match="every margin is zero"):
        cal.fit_temperature([0.0, 0.0])


def test_folds_hold_whole_questions_and_ignore_the_scores():
    units = ["a", "b", "a", "c", "d", "b", "e", "f"]
    folds = cal.question_folds(units, n_folds=3)
    by_unit = pd.DataFrame({"u": units, "f": folds}).groupby("u")["f"].nunique()
    assert (by_unit == 1).all() and set(folds) == {0, 1, 2}
    assert cal.question_folds(units, n_folds=10).max() == 5  # at most one fold per question


def test_cross_fitting_never_uses_a_questions_own_pairs():
    rng = np.random.default_rng(1)
    units = np.repeat([f"q{i}" for i in range(10)], 3)
    margins = rng.normal(0.5, 1.0, len(units))
    p, t, folds = cal.cross_fit_temperature(margins, units, n_folds=5)
    target = units == "q4"
    changed = margins.copy()
    changed[target] = -5 * np.abs(changed[target])  # q4's pairs now all go the other way
    p2, t2, folds2 = cal.cross_fit_temperature(changed, units, n_folds=5)
    assert (folds == folds2).all()
    own = folds == folds[target][0]
    assert t2[own] == pytest.approx(t[own])  # q4's fold: fitted on the other folds only
    assert not np.allclose(t2[~own], t[~own])  # the others' fits saw q4's pairs
    for fold in np.unique(folds):  # each fold's T is the fit on the other folds' margins
        assert t[folds == fold][0] == pytest.approx(cal.fit_temperature(margins[folds != fold]))
    assert p == pytest.approx(1 / (1 + np.exp(-margins / t)))
    with pytest.raises(PRBError, match="one question only"):
        cal.cross_fit_temperature([1.0, -1.0], ["q", "q"])


# -------------------------------------------------------------------------------------------- per pair
def _rows(margins, *, model="m", kind="classifier", profile="none", outcome=None) -> pd.DataFrame:
    margins = np.asarray(margins, dtype=float)
    if outcome is None:
        outcome = np.where(margins > 0, "correct", np.where(margins < 0, "wrong", "tie"))
    return pd.DataFrame({"model": model, "kind": kind, "profile": profile, "subset": "s",
                         "id": [f"{model}{profile}{i}" for i in range(len(margins))], "score_chosen": margins,
                         "score_rejected": 0.0, "outcome": outcome})


def test_judges_use_their_own_probability_and_others_the_temperature():
    rng = np.random.default_rng(2)
    p_ab, p_ba = rng.uniform(0.05, 0.95, 24), rng.uniform(0.05, 0.95, 24)
    judge = _rows(p_ab + p_ba - 1, model="j", kind="judge").assign(
        score_chosen=(p_ab + p_ba) / 2, score_rejected=1 - (p_ab + p_ba) / 2, p_chosen_ab=p_ab, p_chosen_ba=p_ba)
    rm = _rows(rng.normal(0.3, 1, 24), model="c")
    probs = cal.pair_probabilities(pd.concat([judge, rm], ignore_index=True))
    j = probs[probs["model"] == "j"]
    assert (j["source"] == "judge").all() and j["p_chosen"].to_numpy() == pytest.approx((p_ab + p_ba) / 2)
    assert j["temperature"].isna().all()
    c = probs[probs["model"] == "c"]
    assert (c["source"] == "temperature").all() and c["note"].isna().all()
    t = c["temperature"].to_numpy()
    expect = np.where(np.isinf(t), 0.5, 1 / (1 + np.exp(-c["margin"].to_numpy() / t)))
    assert c["p_chosen"].to_numpy() == pytest.approx(expect) and (t > 0).all()


def test_degenerate_groups_say_why_instead_of_giving_numbers():
    frames = [
        _rows(np.linspace(-1, 1, 10), model="few"),
        _rows(np.zeros(30), model="constant", outcome=["correct", "wrong"] * 15),
        _rows(np.linspace(0.1, 3, 30), model="all_right"),
    ]
    probs = cal.pair_probabilities(pd.concat(frames, ignore_index=True))
    notes = probs.groupby("model")["note"].first()
    assert notes["few"] == "n/a: too few pairs (10 < 20)"
    assert notes["constant"].startswith("n/a: constant score")
    assert notes["all_right"] == "n/a: one outcome only (every decided pair is correct)"
    assert probs["p_chosen"].isna().all()
    table = cal.calibration_table(probs, n_boot=N_BOOT)
    assert table["value"].isna().all() and table["ci_low"].isna().all()
    assert table.groupby("model")["note"].first().to_dict() == notes.to_dict()
    assert cal.reliability_table(probs).empty


def test_calibration_table_matches_hand_formulas_and_holds_its_value():
    rng = np.random.default_rng(4)
    margins = rng.normal(0.4, 1.0, 40)
    rows = _rows(margins)
    questions = pd.DataFrame({"subset": "s", "id": rows["id"], "question": [f"q{i // 2}" for i in range(40)]})
    probs = cal.pair_probabilities(rows, questions)
    assert probs["fold"].nunique() == 5 and probs.groupby("question")["fold"].nunique().max() == 1
    p = probs["p_chosen"].to_numpy()
    table = cal.calibration_table(probs, n_boot=N_BOOT).set_index("statistic")
    q, y = np.concatenate([p, 1 - p]), np.r_[np.ones(40), np.zeros(40)]
    gaps = pd.DataFrame({"bin": np.minimum((q * 10).astype(int), 9), "q": q, "y": y}).groupby("bin").agg(
        n=("q", "size"), q=("q", "mean"), y=("y", "mean"))
    assert table.loc["ece", "value"] == pytest.approx(float((gaps["n"] * (gaps["y"] - gaps["q"]).abs()).sum() / 80))
    assert table.loc["brier", "value"] == pytest.approx(np.mean((1 - p) ** 2))
    assert table.loc["log_loss", "value"] == pytest.approx(-np.mean(np.log(p)))
    assert (table["n"] == 40).all() and (table["n_questions"] == 20).all()
    assert (table["ci_low"] <= table["value"]).all() and (table["value"] <= table["ci_high"]).all()
    assert (table["ci_low"] < table["ci_high"]).all()
    wide = cal.calibration_wide(table.reset_index())
    assert len(wide) == 1 and wide.loc[0, "brier"] == table.loc["brier", "value"]
    bins = cal.reliability_table(probs)
    assert bins["n"].sum() == 80 and (bins["bin_high"] - bins["bin_low"]).round(9).eq(0.1).all()


def test_calibration_intervals_refit_the_temperature_on_every_resample():
    """The interval of a fitted temperature's statistics fits every fold's temperature again on each resample of
    whole questions; checked against a slow reference that redraws the same questions and calls fit_temperature."""
    rng = np.random.default_rng(7)
    margins = rng.normal(0.5, 1.0, 40)
    rows = _rows(margins)
    questions = pd.DataFrame({"subset": "s", "id": rows["id"], "question": [f"q{i // 2}" for i in range(40)]})
    probs = cal.pair_probabilities(rows, questions)
    table = cal.calibration_table(probs, n_boot=200, seed=3).set_index("statistic")
    m, folds = probs["margin"].to_numpy(), probs["fold"].to_numpy(dtype=int)
    codes = pd.factorize(probs["question"], sort=True)[0]
    draws = np.random.default_rng(3).integers(0, 20, size=(200, 20))   # 20 questions drawn per resample
    values = {"ece": [], "brier": [], "log_loss": []}
    for counts in (np.bincount(drawn, minlength=20) for drawn in draws):
        rows_drawn = np.repeat(np.arange(40), counts[codes])
        p = np.empty(len(rows_drawn))
        for f in np.unique(folds):
            temperature = cal.fit_temperature(m[rows_drawn][folds[rows_drawn] != f])
            inside = folds[rows_drawn] == f
            p[inside] = 0.5 if np.isinf(temperature) else 1 / (1 + np.exp(-m[rows_drawn][inside] / temperature))
        values["ece"].append(cal.expected_calibration_error(*cal.both_orders(p)))
        values["brier"].append(np.mean((1 - p) ** 2))
        values["log_loss"].append(-np.mean(np.log(p)))
    for name, drawn in values.items():
        low, high = np.quantile(drawn, [0.025, 0.975])
        assert table.loc[name, "ci_low"] == pytest.approx(low, abs=1e-6), name
        assert table.loc[name, "ci_high"] == pytest.approx(high, abs=1e-6), name
    fixed = bootstrap_ci(-np.log(probs["p_chosen"]), units=probs["question"], n_boot=200, seed=3)
    assert table.loc["log_loss", "ci_high"] - table.loc["log_loss", "ci_low"] > fixed[1] - fixed[0]


def test_each_statistic_record_is_its_function_on_both_orders_weighted_or_not():
    """A calibration statistic is defined once (a record's ``rows``): on integer weights it equals the public
    function on the pairs repeated that many times, read in both orders."""
    rng = np.random.default_rng(11)
    p = rng.uniform(0.02, 0.98, 30)
    weights = rng.integers(0, 4, size=(5, 30)).astype(float)
    reference = {"ece": cal.expected_calibration_error, "brier": cal.brier_score, "log_loss": cal.log_loss}
    for name, statistic in cal.CALIBRATION_STATISTICS.items():
        assert statistic.one(p) == pytest.approx(reference[name](*cal.both_orders(p)), abs=1e-12), name
        rows = statistic.rows(np.broadcast_to(p, weights.shape), weights, cal.N_BINS)
        for row, w in zip(rows, weights, strict=True):
            repeated = np.repeat(p, w.astype(int))
            assert row == pytest.approx(reference[name](*cal.both_orders(repeated)), abs=1e-12), name


def test_accuracy_by_margin_bins_by_quantile():
    margins = [-0.1, 0.2, -0.3, 0.4, 1.0, -2.0, 3.0, 4.0]
    table = cal.accuracy_by_margin(_rows(margins), n_quantiles=4)
    # |margin| sorted: 0.1 0.2 | 0.3 0.4 | 1 2 | 3 4 -> right (margin > 0): 1/2, 1/2, 1/2, 2/2
    assert table["margin_bin"].astype(str).tolist() == ["Q1", "Q2", "Q3", "Q4"]
    assert table["n"].tolist() == [2, 2, 2, 2] and table["accuracy"].tolist() == [0.5, 0.5, 0.5, 1.0]
    assert table["mean_abs_margin"].tolist() == pytest.approx([0.15, 0.35, 1.5, 3.5])
    assert cal.accuracy_by_margin(_rows([1.0, -1.0, 1.0])).empty  # |margin| constant: nothing to bin


# ------------------------------------------------------------------------------------------- lengths
def _data() -> pd.DataFrame:
    records = []
    for i in range(8):
        posts = [{"category": "c", "text": "x" * (5 + 7 * j + i)} for j in range(1 + i % 3)]
        records.append({"subset": "s", "id": f"p{i}", "question": f"Question {i // 2}?", "category": "c",
                        "profile": posts, "chosen": "a" * (10 + 3 * i), "rejected": "b" * (30 - 2 * i)})
    return pd.DataFrame(records)


def test_length_correlations_match_scipy_and_name_what_is_undefined():
    data = _data()
    rng = np.random.default_rng(5)
    sc, sr = rng.normal(size=8), rng.normal(size=8)
    rows = pd.concat([pd.DataFrame({"model": "m", "profile": profile, "subset": "s", "id": data["id"],
                                    "score_chosen": sc, "score_rejected": sr,
                                    "outcome": np.where(sc > sr, "correct", "wrong")})
                      for profile in ("none", "full")], ignore_index=True)
    table = cal.length_correlations(rows, data, n_boot=N_BOOT).set_index(["profile", "statistic"])
    chosen, rejected = data["chosen"].str.len(), data["rejected"].str.len()
    expect = stats.spearmanr(np.r_[sc, sr], np.r_[chosen, rejected]).statistic
    assert table.loc[("full", "score ~ answer length"), "rho"] == pytest.approx(expect)
    expect = stats.spearmanr(sc - sr, chosen - rejected).statistic
    assert table.loc[("none", "margin ~ length difference"), "rho"] == pytest.approx(expect)
    added = [len("\n".join([PROFILE_HEADER, *[f"- [c] {p['text']}" for p in r["profile"]], "",
                            f"{QUESTION_PREFIX}{r['question']}"])) - len(r["question"]) for _, r in data.iterrows()]
    expect = stats.spearmanr(sc - sr, added).statistic
    full = table.loc[("full", "margin ~ profile length")]
    assert full["rho"] == pytest.approx(expect) and full["ci_low"] <= full["rho"] <= full["ci_high"]
    none = table.loc[("none", "margin ~ profile length")]
    assert np.isnan(none["rho"]) and none["note"] == "n/a: the profile length does not vary"
    assert (table["n"] == 8).all()


# --------------------------------------------------------------------------------------------- figures
def test_figures_draw_every_series():
    rng = np.random.default_rng(6)
    rows = pd.concat([_rows(rng.normal(0.2, 1, 30), model=m, profile=c) for m in ("a", "b") for c in ("none", "top3")],
                     ignore_index=True)
    bins = cal.reliability_table(cal.pair_probabilities(rows))
    fig = plots.reliability_diagram(bins)
    top, bottom = fig.axes[:2]
    assert len(top.get_lines()) == 1 + 4 and len(bottom.get_lines()) == 4  # diagonal + one line per job
    fig = plots.margin_histograms(score_margins(rows))
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 2
    plt.close("all")


# ------------------------------------------------------------------------------------- scored by real models
def test_real_judge_and_classifier_scores_take_their_paths(tmp_path, tiny_lm_dir, tiny_classifier_dir):
    """A tiny judge and a tiny classifier scored through the real store: the judge's probability is the mean of
    its two orders, the classifier's goes through the cross-fitted temperature, and every statistic is either
    defined (ECE in [0, 1], interval around it) or n/a with its reason."""
    from prb_utils.data import load_benchmark
    from prb_utils.scoring import score_benchmark
    from prb_utils.store import load_results

    data = load_benchmark("sample", limit=8)
    specs = [f"judge:{tiny_lm_dir}", f"classifier:{tiny_classifier_dir}"]
    score_benchmark(data, specs, ["none"], out=tmp_path, options=ModelOptions(device="cpu"), progress=False)
    rows = load_results(tmp_path)
    probs = cal.pair_probabilities(rows, data)
    judge = probs[probs["kind"] == "judge"]
    scored = rows[rows["kind"] == "judge"].set_index(["subset", "id"])
    assert len(judge) == len(data) and (judge["source"] == "judge").all()
    mean = ((scored["p_chosen_ab"] + scored["p_chosen_ba"]) / 2).loc[list(zip(judge["subset"], judge["id"], strict=True))]
    assert judge["p_chosen"].to_numpy() == pytest.approx(mean.to_numpy())
    classifier = probs[probs["kind"] == "classifier"]
    assert (classifier["source"] == "temperature").all() and classifier["fold"].nunique() == cal.N_FOLDS
    assert classifier.groupby("question")["fold"].nunique().max() == 1  # a question's two users share a fold
    table = cal.calibration_table(probs, n_boot=N_BOOT)
    ece = table[table["statistic"] == "ece"]
    assert len(ece) == 2 and ece["note"].isna().all()
    assert ((ece["value"] >= 0) & (ece["value"] <= 1) & (ece["ci_low"] <= ece["value"])
            & (ece["value"] <= ece["ci_high"])).all()


def test_a_judges_intervals_resample_the_questions_bootstrap_ci_resamples():
    """One resampler: a judge's own P(chosen) (held fixed) gets the intervals bootstrap_ci gives over the same
    whole questions with the same seed."""
    rng = np.random.default_rng(1)
    p, units = rng.uniform(0.1, 0.9, 60), [f"q{i // 2}" for i in range(60)]
    found = cal.resampled_statistics(p, units, seed=5)
    assert found["brier"] == pytest.approx(bootstrap_ci((1 - p) ** 2, units=units, seed=5))
    assert found["ece"] == pytest.approx(bootstrap_ci(
        p, lambda v: cal.expected_calibration_error(*cal.both_orders(v)), units=units, seed=5))


# ------------------------------------------------------------------------- why a group has no calibration
def test_margins_that_favour_the_rejected_answer_are_not_called_a_constant_score():
    """Varying margins that favour the rejected answer fit T = inf in every fold (every probability 1/2): the
    note says so; "constant score" is kept for margins that are really all equal."""
    favour_rejected = _rows(np.tile([-2.0, 1.0], 15), model="reversed")   # varying, mean margin negative
    equal = _rows(np.full(30, 0.7), model="equal", outcome=["correct", "wrong"] * 15)
    probs = cal.pair_probabilities(pd.concat([favour_rejected, equal], ignore_index=True))
    reversed_rows = probs[probs["model"] == "reversed"]
    assert np.isinf(reversed_rows["temperature"]).all() and reversed_rows["margin"].nunique() == 2
    notes = probs.groupby("model")["note"].first()
    assert notes["reversed"] == cal.INFINITE_TEMPERATURE_REASON
    assert cal.INFINITE_TEMPERATURE_REASON == ("n/a: the scores favour the rejected answer: the best temperature is "
                                               "infinite, every probability 1/2")
    assert notes["equal"] == "n/a: constant score (every pair gets 0.7)"
    table = cal.calibration_table(probs, n_boot=N_BOOT)
    assert table.groupby("model")["note"].first().to_dict() == notes.to_dict() and table["value"].isna().all()


def test_a_subset_whose_pairs_all_got_an_infinite_temperature_says_so_and_a_flat_judge_is_constant():
    """calibration_table's own check (a subset of a model's pairs): probabilities all 1/2 from infinite
    temperatures are the reversed-margin reason; a judge's own constant probability is a constant score."""
    n = 30
    base = pd.DataFrame({"model": "m", "profile": "none", "question": [f"q{i}" for i in range(n)],
                         "outcome": ["correct", "wrong"] * (n // 2), "p_chosen": 0.5, "note": None})
    flat_fit = base.assign(source="temperature", temperature=np.inf, margin=np.tile([-2.0, 1.0], n // 2), fold=0)
    flat_judge = base.assign(source="judge", temperature=np.nan)
    assert cal.calibration_table(flat_fit, n_boot=N_BOOT)["note"].eq(cal.INFINITE_TEMPERATURE_REASON).all()
    assert cal.calibration_table(flat_judge, n_boot=N_BOOT)["note"].eq(
        "n/a: constant score (every pair gets 0.5)").all()


def _judge_rows(model: str, n: int = 24, **extra) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    p_ab, p_ba = rng.uniform(0.05, 0.95, n).round(2), rng.uniform(0.05, 0.95, n).round(2)
    return _rows(p_ab + p_ba - 1, model=model, kind="judge").assign(
        score_chosen=(p_ab + p_ba) / 2, score_rejected=1 - (p_ab + p_ba) / 2, p_chosen_ab=p_ab, p_chosen_ba=p_ba,
        **extra)


def test_a_vote_mode_judge_is_known_by_its_recorded_mode_and_guessed_only_without_one():
    """The job's recorded judge_mode decides: a logprob job that kept raw answers is read by its probabilities, a
    generate job without raw answers is votes; only a job with no recorded mode is guessed from its answers."""
    frame = pd.concat([
        _judge_rows("logprob_with_answers", judge_mode="logprob", answer_ab="**Result:** A"),
        _judge_rows("generate_without_answers", judge_mode="generate", answer_ab=None),
        _judge_rows("unrecorded_with_answers", judge_mode=None, answer_ab="**Result:** A"),
        _judge_rows("unrecorded_without_answers", judge_mode=None, answer_ab=None),
    ], ignore_index=True)
    source = cal.pair_probabilities(frame).groupby("model")["source"].agg(set)
    assert source.to_dict() == {"logprob_with_answers": {"judge"}, "generate_without_answers": {"votes"},
                                "unrecorded_with_answers": {"votes"}, "unrecorded_without_answers": {"judge"}}
    notes = cal.pair_probabilities(frame).groupby("model")["note"].first()
    assert notes["generate_without_answers"] == cal.VOTES_REASON and pd.isna(notes["logprob_with_answers"])


def test_the_store_gives_each_row_its_jobs_recorded_judge_mode(tmp_path):
    from prb_utils.store import JobStore, load_results

    for mode in ("generate", "logprob"):
        store = JobStore(tmp_path, {"model": "judge:x", "kind": "judge", "profile": "none",
                                    "options": {"judge_mode": mode}})
        with store.writing():
            store.write_part(_judge_rows("judge:x").assign(job=store.key, pair_hash="h"))
            store.write_metadata({"key": store.key, **store.description})   # job.json: its options, its mode
    old = JobStore(tmp_path, {"model": "length", "kind": "length", "profile": "none", "options": {}})
    with old.writing():
        old.write_part(_rows([1.0, -1.0], model="length", kind="length").assign(job=old.key, pair_hash="h"))
    rows = load_results(tmp_path)
    assert sorted(rows.groupby("job")["judge_mode"].first().fillna("none")) == ["generate", "logprob", "none"]
    probs = cal.pair_probabilities(rows, by=["job_label", "profile"])
    assert set(probs.groupby("job_label")["source"].first()) == {"votes", "judge", "temperature"}
