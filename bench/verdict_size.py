"""How often a paired verdict ("these two models differ") rejects a true null when pairs share questions.

Simulated benchmarks of ``--questions`` questions with ``--pairs`` pairs each (the published simulation behind
the issue used 50 clusters of 10). Each model's chance of being right on a question is drawn from a Beta with
mean ``--accuracy`` and intra-class correlation ICC (0: pairs independent; 0.7: a question's pairs mostly
succeed or fail together), independently for the two models; under the null both models have the same mean
accuracy, so a test of the nominal size rejects 5% of benchmarks. Two tests on the same benchmarks:

- ``unclustered``: the exact McNemar test over pairs, as if pairs were independent (what prb used before);
- ``clustered``: prb's paired sign-flip test over whole questions (:func:`prb_utils.analysis.resampling.
  clustered_paired_test`, exact; with one pair per question it is the exact McNemar test).

Under the alternative the second model's mean accuracy is ``--accuracy`` minus ``--difference``: the share of
benchmarks rejected is the power. One line per ICC, machine-readable:

    .venv/bin/python bench/verdict_size.py --sims 1000
    icc=0.7 size_unclustered=0.43 size_clustered=0.05 power_unclustered=... power_clustered=...

Recurring users (``--users U --pairs-per-user P``): U users with P pairs each, spread over ``--questions``
questions with the same number of pairs each (the pairs' questions shuffled across users, redrawn per
benchmark), so one user's pairs fall under several questions. A pair's outcome is a threshold on a latent
normal score with a question effect and a user effect, each carrying half of the ICC (``--icc`` here is the
latent correlation of two pairs with the same question and user; a shared question alone gives half of it,
as does a shared user alone), independently for the two models; the marginal accuracy is ``--accuracy``.
Two tests on the same benchmarks: ``clustered`` (by question, as above) and ``two_way`` (question x user,
:func:`prb_utils.analysis.resampling.two_way_paired_test`):

    .venv/bin/python bench/verdict_size.py --questions 40 --users 40 --pairs-per-user 8 --sims 1000
    icc=0.7 users=40 size_clustered=... size_two_way=... power_clustered=... power_two_way=...
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.stats import norm

from prb_utils.analysis.metrics import mcnemar_exact
from prb_utils.analysis.resampling import clustered_paired_test, two_way_paired_test

ALPHA = 0.05


def beta_draws(mean: float, icc: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """Per-question success probabilities with the given mean and intra-class correlation (Beta, a + b = 1/icc - 1);
    ICC 0 gives the mean itself."""
    if icc <= 0:
        return np.full(size, mean)
    total = 1 / icc - 1
    return rng.beta(mean * total, (1 - mean) * total, size=size)


def simulate(*, questions: int, pairs: int, accuracy: float, difference: float, icc: float, sims: int,
             rng: np.random.Generator) -> tuple[float, float]:
    """Shares of ``sims`` benchmarks where the unclustered and the clustered test give p < 0.05."""
    units = np.repeat(np.arange(questions), pairs)
    rejected = np.zeros(2)
    for _ in range(sims):
        a = rng.random(questions * pairs) < np.repeat(beta_draws(accuracy, icc, questions, rng), pairs)
        b = rng.random(questions * pairs) < np.repeat(beta_draws(accuracy - difference, icc, questions, rng), pairs)
        a_only, b_only = int((a & ~b).sum()), int((~a & b).sum())
        rejected += [mcnemar_exact(a_only, b_only) < ALPHA, clustered_paired_test(a, b, units) < ALPHA]
    return float(rejected[0] / sims), float(rejected[1] / sims)


def recurring_benchmark(*, questions: int, users: int, pairs_per_user: int, accuracy: float, icc: float,
                        rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One benchmark with recurring users: each pair's question and user, and its 0/1 outcome for one model
    (a latent normal score, question and user effects of variance ``icc / 2`` each, marginal mean ``accuracy``)."""
    n = users * pairs_per_user
    user = np.repeat(np.arange(users), pairs_per_user)
    question = rng.permutation(np.resize(np.arange(questions), n))
    return question, user, recurring_outcomes(question, user, accuracy=accuracy, icc=icc, rng=rng)


def recurring_outcomes(question: np.ndarray, user: np.ndarray, *, accuracy: float, icc: float,
                       rng: np.random.Generator) -> np.ndarray:
    """0/1 outcomes of one model on the pairs ``(question, user)``: ``score > 0`` for a latent normal score of
    mean ``Phi^-1(accuracy)``, variance 1, with fresh question and user effects of variance ``icc / 2`` each."""
    shared = np.sqrt(icc / 2)
    latent = (norm.ppf(accuracy) + shared * rng.standard_normal(question.max() + 1)[question]
              + shared * rng.standard_normal(user.max() + 1)[user] + np.sqrt(1 - icc) * rng.standard_normal(len(user)))
    return latent > 0


def simulate_recurring(*, questions: int, users: int, pairs_per_user: int, accuracy: float, difference: float,
                       icc: float, sims: int, rng: np.random.Generator) -> tuple[float, float]:
    """Shares of ``sims`` recurring-user benchmarks where the test clustered by question and the two-way test
    (question x user) give p < 0.05."""
    rejected = np.zeros(2)
    for _ in range(sims):
        question, user, a = recurring_benchmark(questions=questions, users=users, pairs_per_user=pairs_per_user,
                                                accuracy=accuracy, icc=icc, rng=rng)
        b = recurring_outcomes(question, user, accuracy=accuracy - difference, icc=icc, rng=rng)
        rejected += [clustered_paired_test(a, b, question) < ALPHA, two_way_paired_test(a, b, question, user) < ALPHA]
    return float(rejected[0] / sims), float(rejected[1] / sims)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--pairs", type=int, default=10, help="pairs per question")
    parser.add_argument("--accuracy", type=float, default=0.7)
    parser.add_argument("--difference", type=float, default=0.1, help="planted accuracy difference for the power")
    parser.add_argument("--icc", type=float, nargs="+", default=[0.0, 0.3, 0.7])
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--users", type=int, default=None,
                        help="recurring users: this many users, their pairs spread over the questions")
    parser.add_argument("--pairs-per-user", type=int, default=8, help="pairs per user (with --users)")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.users is not None:
        recurring(args, rng)
        return
    print(f"questions={args.questions} pairs_per_question={args.pairs} accuracy={args.accuracy} "
          f"difference={args.difference} sims={args.sims} alpha={ALPHA}")
    for icc in args.icc:
        common = {"questions": args.questions, "pairs": args.pairs, "accuracy": args.accuracy, "icc": icc,
                  "sims": args.sims, "rng": rng}
        size = simulate(difference=0.0, **common)
        power = simulate(difference=args.difference, **common)
        print(f"icc={icc} size_unclustered={size[0]:.3f} size_clustered={size[1]:.3f} "
              f"power_unclustered={power[0]:.3f} power_clustered={power[1]:.3f}", flush=True)


def recurring(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """The recurring-users scenario: one line per ICC, size and power of the test by question and the two-way."""
    if not 0 <= max(args.icc) < 1:
        raise SystemExit("--icc must lie in [0, 1) for the recurring-users scenario.")
    print(f"questions={args.questions} users={args.users} pairs_per_user={args.pairs_per_user} "
          f"accuracy={args.accuracy} difference={args.difference} sims={args.sims} alpha={ALPHA}")
    for icc in args.icc:
        common = {"questions": args.questions, "users": args.users, "pairs_per_user": args.pairs_per_user,
                  "accuracy": args.accuracy, "icc": icc, "sims": args.sims, "rng": rng}
        size = simulate_recurring(difference=0.0, **common)
        power = simulate_recurring(difference=args.difference, **common)
        print(f"icc={icc} users={args.users} size_clustered={size[0]:.3f} size_two_way={size[1]:.3f} "
              f"power_clustered={power[0]:.3f} power_two_way={power[1]:.3f}", flush=True)


if __name__ == "__main__":
    main()
