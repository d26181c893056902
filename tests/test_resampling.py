"""Two-way clustering (question x user): the pigeonhole interval, the two-way paired test, and sign_flip_p on
non-integer cluster differences."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from prb_utils.analysis.resampling import (
    bootstrap_ci,
    percentile_interval,
    pigeonhole_weights,
    sign_flip_grid,
    sign_flip_p,
    two_way_bootstrap_ci,
    two_way_paired_test,
)
from prb_utils.errors import PRBError


def crossed(seed: int = 0, questions: int = 6, users: int = 5, pairs: int = 30):
    """A small crossed design: sorted labels (so their codes are their positions), uneven cells, 0/1 values."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, questions, pairs)
    u = rng.integers(0, users, pairs)
    values = (rng.random(pairs) < 0.6).astype(float)
    return values, np.array([f"q{i}" for i in q]), np.array([f"u{i}" for i in u])


def slow_pigeonhole(values, questions, users, n_boot, seed):
    """The pigeonhole bootstrap by its definition: draw questions, then users, with the same rng calls, and pool
    the rows of every (drawn question, drawn user) cell, once per pairing of draws."""
    q_levels, u_levels = sorted(set(questions)), sorted(set(users))
    rng = np.random.default_rng(seed)
    q_draws = rng.integers(0, len(q_levels), size=(n_boot, len(q_levels)))
    u_draws = rng.integers(0, len(u_levels), size=(n_boot, len(u_levels)))
    stats = []
    for r in range(n_boot):
        pooled = [values[i] for qd in q_draws[r] for ud in u_draws[r] for i in range(len(values))
                  if questions[i] == q_levels[qd] and users[i] == u_levels[ud]]
        stats.append(np.mean(pooled) if pooled else np.nan)
    return np.array(stats)


def test_pigeonhole_interval_equals_the_slow_reference_with_the_same_draws():
    values, questions, users = crossed()
    slow = slow_pigeonhole(values, questions, users, n_boot=150, seed=4)
    assert np.isfinite(slow).sum() > 100 and np.nanstd(slow) > 0   # a real spread, not a constant
    expected = percentile_interval(slow, 0.9)
    assert two_way_bootstrap_ci(values, questions, users, n_boot=150, seed=4, level=0.9) == pytest.approx(expected,
                                                                                                           rel=1e-12)


def test_pigeonhole_weights_do_not_depend_on_the_chunk_size():
    _, questions, users = crossed(1)
    whole = np.vstack(list(pigeonhole_weights(questions, users, 40, np.random.default_rng(2))))
    chunks = list(pigeonhole_weights(questions, users, 40, np.random.default_rng(2), max_cells=len(questions) * 3))
    assert len(chunks) > 1 and np.array_equal(np.vstack(chunks), whole)


def test_one_user_gives_exactly_the_question_clustered_bootstrap():
    """Proof of the special case: with a single user, every resample draws that user once, so a row's weight is
    its question's count, and the question draws come first from the same rng, as bootstrap_ci's units= draws."""
    values, questions, _ = crossed(2, pairs=60)
    for seed in (0, 7):
        assert two_way_bootstrap_ci(values, questions, ["u"] * 60, n_boot=500, seed=seed) == pytest.approx(
            bootstrap_ci(values, units=questions, n_boot=500, seed=seed), rel=1e-12)


def test_users_nested_in_questions_widen_the_interval_as_the_pigeonhole_counts_them_twice():
    """One user per question (the same clusters twice): each question's weight is a product of two independent
    counts (variance about 3 instead of 1), so the interval is wider than the question-clustered one, by about
    sqrt(3) (a loose band: sampling noise of 2,000 resamples)."""
    rng = np.random.default_rng(3)
    questions = np.repeat(np.arange(60), 5)
    values = (rng.random(300) < np.repeat(rng.beta(2, 1, 60), 5)).astype(float)
    one_way = np.diff(bootstrap_ci(values, units=questions, n_boot=2000, seed=1))[0]
    two_way = np.diff(two_way_bootstrap_ci(values, questions, questions + 1000, n_boot=2000, seed=1))[0]
    assert 1.4 < two_way / one_way < 2.1


def test_two_way_interval_refuses_mismatched_labels_and_is_nan_without_rows():
    with pytest.raises(PRBError, match="one of each per pair"):
        two_way_bootstrap_ci([1, 0], ["q1", "q2"], ["u1"])
    assert np.isnan(two_way_bootstrap_ci([], [], [])).all()


def test_two_way_test_matches_a_hand_computation():
    # d = b - a = [1, 1, 1, 0, 0]; S = 3
    # per question: q1 = 2, q2 = 1, q3 = 0 -> 4 + 1 + 0 = 5
    # per user:     u1 = 2, u2 = 1, u3 = 0 -> 5
    # per cell:     (q1,u1) 1, (q1,u2) 1, (q2,u1) 1, (q2,u2) 0, (q3,u3) 0 -> 3
    # V = 5 + 5 - 3 = 7, z = 3 / sqrt(7), p = 2 (1 - Phi(z))
    p = two_way_paired_test([0, 0, 0, 0, 0], [1, 1, 1, 0, 0], ["q1", "q1", "q2", "q2", "q3"],
                            ["u1", "u2", "u1", "u2", "u3"])
    assert p == pytest.approx(2 * norm.sf(3 / math.sqrt(7)), rel=1e-12)
    assert p == pytest.approx(0.25684, abs=1e-5)


def test_two_way_test_with_one_user_per_pair_is_durkalskis_statistic_by_question():
    values, questions, _ = crossed(5, pairs=40)
    a, b = values, np.roll(values, 3)
    d = b - a
    by_question = pd.Series(d).groupby(questions).sum()
    expected = 2 * norm.sf(abs(d.sum()) / math.sqrt((by_question ** 2).sum()))
    assert two_way_paired_test(a, b, questions, [f"u{i}" for i in range(40)]) == pytest.approx(expected, rel=1e-12)


def test_two_way_test_edge_cases():
    assert two_way_paired_test([1, 0], [1, 0], ["q1", "q2"], ["u1", "u2"]) == 1.0          # no pair differs
    assert two_way_paired_test([0, 0], [1, 1], ["q1", "q1"], ["u1", "u2"]) == 1.0          # one question
    # every question's and every user's differences cancel (the two-way sum is -4): p = 1, not a division by 0
    assert two_way_paired_test([0, 1, 1, 0], [1, 0, 0, 1], ["q1", "q1", "q2", "q2"], ["u1", "u2", "u1", "u2"]) == 1.0
    with pytest.raises(PRBError, match="3 labels for 2 pairs"):
        two_way_paired_test([0, 1], [1, 0], ["q1", "q2", "q3"], ["u1", "u2", "u3"])


def test_sign_flip_p_is_exact_on_half_credit_and_other_fractions():
    d = np.array([0.5, 1.5, -0.5, 1.0, 2.0 / 3])
    flips = [abs(sum(s * x for s, x in zip(signs, d, strict=True)))
             for signs in itertools.product((1, -1), repeat=len(d))]
    brute = np.mean(np.array(flips) >= abs(d.sum()) - 1e-12)
    assert sign_flip_p(d) == pytest.approx(brute, rel=1e-12)
    # half credit is the integer test on doubled differences; rounding would have made [0.5] * 3 a p of 1.0
    assert sign_flip_p([0.5, 0.5, 0.5]) == pytest.approx(0.25) == sign_flip_p([1, 1, 1])
    assert sign_flip_grid([0.5, -1.5, 2]).tolist() == [1, -3, 4]


def test_sign_flip_p_refuses_differences_on_no_grid_rather_than_rounding():
    with pytest.raises(PRBError, match="common fractional grid") as raised:
        sign_flip_p([math.pi, 1.0])
    assert "\n" not in str(raised.value)
    with pytest.raises(PRBError, match="missing or infinite"):
        sign_flip_p([1.0, np.nan])
