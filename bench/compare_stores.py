"""Do two stores hold the same scores? Per model and profile condition: the pairs both hold, the largest
|score difference| (scores and the judges' per-order probabilities), and whether outcomes and RM inputs
(``pair_hash``) agree. For checking that a change to the scoring code left the numbers where they were:
score the same data and models into a new store with the old and the new code, then

    python bench/compare_stores.py results-before results-after
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KEY = ["model", "profile", "subset", "id"]
VALUES = ["score_chosen", "score_rejected", "p_chosen_ab", "p_chosen_ba"]


def compare_stores(before: str, after: str) -> pd.DataFrame:
    """One row per (model, profile) held by both stores: n, max_abs_diff, outcomes_equal, inputs_equal."""
    from prb_utils.store import load_results

    joined = load_results(before).merge(load_results(after), on=KEY, suffixes=("_before", "_after"))
    rows = []
    for (model, profile), group in joined.groupby(["model", "profile"], sort=True):
        diffs = [np.abs(group[f"{c}_before"].astype(float) - group[f"{c}_after"].astype(float)).max()
                 for c in VALUES if group[f"{c}_before"].notna().any()]
        rows.append({"model": model, "profile": profile, "n": len(group),
                     "max_abs_diff": float(np.nanmax(diffs)) if diffs else float("nan"),
                     "outcomes_equal": bool((group["outcome_before"] == group["outcome_after"]).all()),
                     "inputs_equal": bool((group["pair_hash_before"] == group["pair_hash_after"]).all())})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args(argv)
    table = compare_stores(args.before, args.after)
    print(table.to_string(index=False))
    same = bool(len(table)) and (table["max_abs_diff"].fillna(0) <= args.tolerance).all() and \
        table["outcomes_equal"].all() and table["inputs_equal"].all()
    print(f"{'same' if same else 'DIFFERENT'} within {args.tolerance:g}: {len(table)} jobs, {int(table['n'].sum())} rows")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
