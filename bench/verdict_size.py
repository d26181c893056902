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
"""

from __future__ import annotations

import argparse

import numpy as np

from prb_utils.analysis.metrics import mcnemar_exact
from prb_utils.analysis.resampling import clustered_paired_test

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--pairs", type=int, default=10, help="pairs per question")
    parser.add_argument("--accuracy", type=float, default=0.7)
    parser.add_argument("--difference", type=float, default=0.1, help="planted accuracy difference for the power")
    parser.add_argument("--icc", type=float, nargs="+", default=[0.0, 0.3, 0.7])
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"questions={args.questions} pairs_per_question={args.pairs} accuracy={args.accuracy} "
          f"difference={args.difference} sims={args.sims} alpha={ALPHA}")
    for icc in args.icc:
        common = {"questions": args.questions, "pairs": args.pairs, "accuracy": args.accuracy, "icc": icc,
                  "sims": args.sims, "rng": rng}
        size = simulate(difference=0.0, **common)
        power = simulate(difference=args.difference, **common)
        print(f"icc={icc} size_unclustered={size[0]:.3f} size_clustered={size[1]:.3f} "
              f"power_unclustered={power[0]:.3f} power_clustered={power[1]:.3f}", flush=True)


if __name__ == "__main__":
    main()
