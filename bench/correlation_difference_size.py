"""How often correlation_difference's paired bootstrap and Williams' t reject at a nominal 5% with few RMs.

Simulated tables of ``--n`` RMs: a downstream score y and two benchmark scores a and b, jointly normal. Under the
null, corr(y, a) = corr(y, b) = .5 (corr(a, b) = .3): a test of the nominal size rejects 5% of tables. Under the
alternative, .9 vs .2 (corr(a, b) = .2): the share rejected is the power. Spearman, as on page 03.

    .venv/bin/python bench/correlation_difference_size.py --n 8 --sims 600
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from prb_utils.downstream.correlation import correlation_difference


def rejections(n: int, sims: int, r_ya: float, r_yb: float, r_ab: float, rng: np.random.Generator,
               n_boot: int) -> tuple[float, float]:
    """Shares of ``sims`` tables where the bootstrap p and Williams' p are below 0.05."""
    cov = np.array([[1, r_ya, r_yb], [r_ya, 1, r_ab], [r_yb, r_ab, 1]])
    boot = williams = 0
    for _ in range(sims):
        y, a, b = rng.multivariate_normal(np.zeros(3), cov, size=n).T
        r = correlation_difference(pd.DataFrame({"y": y, "a": a, "b": b}), "y", "a", "b", n_boot=n_boot)
        boot += r["p_value"] < 0.05
        williams += r["williams_p"] < 0.05
    return boot / sims, williams / sims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8, help="RMs per simulated table")
    parser.add_argument("--sims", type=int, default=600, help="simulated tables per setting")
    parser.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples per table")
    args = parser.parse_args()
    rng = np.random.default_rng(123)
    for name, rs in (("null (.5,.5,.3)", (0.5, 0.5, 0.3)), ("alt (.9,.2,.2)", (0.9, 0.2, 0.2))):
        boot, williams = rejections(args.n, args.sims, *rs, rng, args.n_boot)
        print(f"n={args.n} sims={args.sims} {name}: bootstrap {boot:.3f}, williams {williams:.3f}")


if __name__ == "__main__":
    main()
