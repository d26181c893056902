"""Item analysis across the RMs of a board: pairs that may be mislabelled or ambiguous.

Per condition, over the RMs on the board that scored it (baselines and position-locked judges included only as
the findings layer ranks them: every non-locked run), two lists, each under a stated rule (:data:`ITEM_RULES`):

- *suspected mislabel*: a pair that every strong RM gets wrong, a strong RM being one whose accuracy is above
  chance (its 95% interval above 0.5, the findings layer's verdict), with at least :data:`MIN_STRONG` of them;
- *does not track accuracy*: a pair whose outcome across RMs correlates negatively with the RMs' accuracy on the
  other pairs (the corrected item-total correlation of classical test theory, at most :data:`MAX_CORRELATION`),
  with at least :data:`ITEM_MIN_RMS` RMs: better RMs get it wrong more often, as an ambiguous or mislabelled pair makes
  them.

Below those counts the analysis is "n/a" with the reason, never an empty list that reads as "no suspect".

>>> rows = pd.DataFrame({"model": ["a", "b"], "profile": "none", "subset": "s", "id": "1", "outcome": "wrong"})
>>> board = pd.DataFrame({"model": ["a", "b"], "profile": "none", "chance": "above chance", "locked": False})
>>> item_analysis(rows, board)["none"]["tracking"]
'n/a: 2 RMs scored this condition; the correlation needs at least 5'
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from prb_utils.analysis.leaderboard import RULES
from prb_utils.schema import pair_key

ITEM_MIN_RMS = 5  #: RMs a correlation across RMs needs
MIN_STRONG = 2  #: strong RMs "every strong RM" needs
MAX_CORRELATION = -0.5  #: a corrected item-total correlation at most this: the pair does not track accuracy
ITEM_RULES = {
    "mislabel": f"suspected mislabel: every strong RM (accuracy {RULES['chance'].verdicts[0]}: its 95% interval above "
                f"0.5) gets the pair wrong, with at least {MIN_STRONG} strong RMs under the condition",
    "tracking": f"does not track accuracy: across the RMs of the condition (at least {ITEM_MIN_RMS}), the pair's outcome "
                f"(1 right, 0 not) has a correlation of at most {MAX_CORRELATION} with the RMs' accuracy on the other "
                "pairs (the corrected item-total correlation)",
}


def corrected_item_total(wide: pd.DataFrame) -> pd.Series:
    """Per pair (row of ``wide``: 0/1 outcomes, one column per RM), the Pearson correlation across RMs between
    the pair's outcome and each RM's accuracy on the other pairs; NaN where either is constant.

    >>> wide = pd.DataFrame({"a": [1, 1, 0], "b": [1, 0, 1], "c": [0, 0, 1]}, index=["p", "q", "r"])
    >>> corrected_item_total(wide).round(2).tolist()   # p: the others' accuracy is 0.5 for every RM
    [nan, -0.5, -0.87]
    """
    values = wide.to_numpy(dtype=float)
    n = values.shape[0]
    totals = values.sum(axis=0)
    out = []
    for row in values:
        rest = (totals - row) / max(n - 1, 1)
        if np.std(row) == 0 or np.std(rest) == 0:
            out.append(np.nan)
        else:
            out.append(float(np.corrcoef(row, rest)[0, 1]))
    return pd.Series(out, index=wide.index)


def item_analysis(rows: pd.DataFrame, board: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per benchmark condition of ``board`` (the findings' leaderboard frame): ``mislabel`` and ``tracking``,
    each a list of ``{"pair", ...}`` or an "n/a: reason" string (:data:`ITEM_RULES`)."""
    out: dict[str, dict[str, Any]] = {}
    for condition, part in board[~board["locked"].astype(bool)].groupby("profile", sort=False):
        if "oracle" in part.columns and part["oracle"].any():
            continue
        models = list(part["model"])
        mine = rows[(rows["profile"] == condition) & rows["model"].isin(models)]
        wide = mine.assign(pair=[pair_key(str(s), str(i)) for s, i in zip(mine["subset"], mine["id"], strict=True)],
                           right=(mine["outcome"] == "correct").astype(int)) \
            .pivot_table(index="pair", columns="model", values="right", aggfunc="first").dropna()
        strong = [m for m, c in zip(part["model"], part["chance"], strict=True) if c == RULES["chance"].verdicts[0]]
        entry: dict[str, Any] = {}
        if len(strong) < MIN_STRONG:
            entry["mislabel"] = (f"n/a: {len(strong)} RM(s) above chance under this condition; the rule needs at least "
                                 f"{MIN_STRONG}")
        else:
            wrong = wide.index[(wide[strong] == 0).all(axis=1)]
            entry["mislabel"] = [{"pair": p, "strong": len(strong)} for p in sorted(wrong)]
        if len(models) < ITEM_MIN_RMS:
            entry["tracking"] = (f"n/a: {len(models)} RMs scored this condition; the correlation needs at least "
                                 f"{ITEM_MIN_RMS}")
        else:
            correlation = corrected_item_total(wide)
            flagged = correlation[correlation <= MAX_CORRELATION].sort_values()
            entry["tracking"] = [{"pair": p, "correlation": float(r)} for p, r in flagged.items()]
        out[str(condition)] = entry
    return out
