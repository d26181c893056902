"""Where a reward model wins or fails: accuracy by rubric features, length bias, judge order, margins.

Every function takes the per-item ``results`` table and, where pair features are needed, the benchmark
``data`` frame; the two are joined on (subset, id). Pairs of ``results`` that are not in ``data`` are left
out. Accuracy follows :func:`prb_utils.analysis.metrics.accuracy_table` (ties and invalids count as not correct;
Wilson 95% intervals). The features themselves (themes, aspect counts, inferability, lengths in characters)
are computed in :mod:`prb_utils.analysis.features`.

Example:
    >>> import pandas as pd
    >>> data = pd.DataFrame({"subset": "s", "id": ["a", "b"], "chosen": ["a longer answer", "no"],
    ...                      "rejected": ["short", "a longer one"]})
    >>> results = pd.DataFrame({"model": "length", "profile": "none", "subset": "s", "id": ["a", "b"],
    ...                         "outcome": ["correct", "wrong"]})
    >>> longer_wins(results, data)[["model", "n", "longer_wins", "rate"]]
        model  n  longer_wins  rate
    0  length  2            2   1.0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from prb_utils.analysis.features import LENGTH_EDGES, MAX_ASPECTS, aspect_table, pair_features
from prb_utils.analysis.metrics import (
    N_BOOT,
    SEED,
    _as_list,
    accuracy_table,
    bootstrap_ci,
    require_columns,
    wilson_ci,
)
from prb_utils.errors import PRBError


def join_features(results: pd.DataFrame, features: pd.DataFrame) -> pd.DataFrame:
    """Inner join of results with per-pair features on (subset, id); PRBError when nothing matches."""
    require_columns(results, ["subset", "id"])
    left = results.assign(subset=results["subset"].astype(str), id=results["id"].astype(str))
    extra = [c for c in features.columns if c not in ("subset", "id")]
    left = left.drop(columns=[c for c in extra if c in left.columns])
    joined = left.merge(features, on=["subset", "id"], how="inner")
    if joined.empty and not results.empty:
        raise PRBError("No result row matches a pair of the benchmark data (join on subset and id).")
    return joined


# ------------------------------------------------------------------------------------------ breakdowns
def by_aspect_count(results: pd.DataFrame, data: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"),
                    max_aspects: int = MAX_ASPECTS) -> pd.DataFrame:
    """Accuracy by number of rubric aspects (``aspects_bin``: "0", "1", …, "5+"), per ``by`` group."""
    joined = join_features(results, pair_features(data, max_aspects=max_aspects))
    return accuracy_table(joined, [*_as_list(by), "aspects_bin"])


def by_theme(results: pd.DataFrame, data: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile")
             ) -> pd.DataFrame:
    """Accuracy by aspect theme; a pair counts once in every theme one of its aspects hits.

    The ``n`` of the themes therefore add up to more than the number of pairs.
    """
    themes = aspect_table(data)[["subset", "id", "theme"]].drop_duplicates()
    joined = join_features(results, pair_features(data)[["subset", "id"]])
    joined = joined.merge(themes, on=["subset", "id"], how="inner")
    return accuracy_table(joined, [*_as_list(by), "theme"])


def by_inferability(results: pd.DataFrame, data: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"),
                    labels: Sequence[str] = ("low", "medium", "high")) -> pd.DataFrame:
    """Accuracy by inferability bin, with ``inferability_mean`` (mean score of the bin's pairs) for plots.

    Pairs without rubric aspects have no inferability score and are left out.
    """
    by = _as_list(by)
    joined = join_features(results, pair_features(data, inferability_labels=labels))
    joined = joined[joined["inferability"].notna()]  # pairs without rubric aspects have no score
    table = accuracy_table(joined, [*by, "inferability_bin"])
    means = (joined.groupby([*by, "inferability_bin"], observed=True)["inferability"].mean()
             .rename("inferability_mean").reset_index())
    return table.merge(means, on=[*by, "inferability_bin"], how="left")


def by_rubric_inferable(results: pd.DataFrame, data: pd.DataFrame, *,
                        by: str | Sequence[str] = ("model", "profile")) -> pd.DataFrame:
    """Accuracy split by the records' own boolean ``rubric_inferable`` field."""
    if "rubric_inferable" not in data:
        raise PRBError("The benchmark data has no rubric_inferable field.")
    joined = join_features(results, pair_features(data))
    joined = joined[joined["rubric_inferable"].notna()].assign(
        rubric_inferable=lambda f: f["rubric_inferable"].astype(bool))
    return accuracy_table(joined, [*_as_list(by), "rubric_inferable"])


def length_bias(results: pd.DataFrame, data: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"),
                edges: Sequence[float] = LENGTH_EDGES) -> pd.DataFrame:
    """Accuracy by chosen − rejected **character**-count difference bin (``length_bin``, edges
    :data:`~prb_utils.analysis.features.LENGTH_EDGES`), with ``mean_diff_chars``."""
    by = _as_list(by)
    joined = join_features(results, pair_features(data, length_edges=edges))
    table = accuracy_table(joined, [*by, "length_bin"])
    means = (joined.groupby([*by, "length_bin"], observed=True)["length_diff_chars"].mean()
             .rename("mean_diff_chars").reset_index())
    return table.merge(means, on=[*by, "length_bin"], how="left")


def longer_wins(results: pd.DataFrame, data: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile")
                ) -> pd.DataFrame:
    """How often the RM prefers the longer answer, in characters (the ``length`` baseline's unit), on pairs
    whose answers differ in character count.

    Columns ``*by, n, longer_wins, rate, ci_low, ci_high, chosen_longer_rate``: ``n`` counts decided pairs
    (outcome correct or wrong; ties and invalids are left out), ``rate`` = longer_wins / n with a Wilson
    interval, and ``chosen_longer_rate`` is the share of those pairs whose chosen answer is the longer
    one (the accuracy a "longer wins" rule would get on them). The ``length`` baseline gets rate 1.
    """
    by = _as_list(by)
    joined = join_features(results, pair_features(data))
    joined = joined[(joined["length_diff_chars"] != 0) & joined["outcome"].isin(["correct", "wrong"])]
    chosen_longer = joined["length_diff_chars"] > 0
    picked_chosen = joined["outcome"] == "correct"
    joined = joined.assign(_longer=(chosen_longer == picked_chosen).astype(int),
                           _chosen_longer=chosen_longer.astype(float))
    groups = joined.groupby(by, observed=True, sort=True) if by else None
    if groups is None:
        table = pd.DataFrame({"n": [len(joined)], "longer_wins": [joined["_longer"].sum()],
                              "chosen_longer_rate": [joined["_chosen_longer"].mean()]})
    else:
        table = groups.agg(n=("_longer", "size"), longer_wins=("_longer", "sum"),
                           chosen_longer_rate=("_chosen_longer", "mean")).reset_index()
    table["longer_wins"] = table["longer_wins"].astype(np.int64)
    table["rate"] = table["longer_wins"] / table["n"].where(table["n"] > 0)
    table["ci_low"], table["ci_high"] = wilson_ci(table["longer_wins"], table["n"])
    return table[[*by, "n", "longer_wins", "rate", "ci_low", "ci_high", "chosen_longer_rate"]]


JUDGE_STATISTICS = ("accuracy_ab", "accuracy_ba", "order_consistency", "position_a")


def judge_order(results: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"),
                n_boot: int = N_BOOT, seed: int = SEED) -> pd.DataFrame:
    """Judge accuracy per order, order consistency and position bias, long format.

    Uses rows with a verdict (``verdict_ab``/``verdict_ba`` in chosen/rejected/invalid; other RM kinds
    have none). In order AB the chosen answer is shown as A, in BA as B. Columns
    ``*by, statistic, n, value, ci_low, ci_high`` with statistic:

    - ``accuracy_ab`` / ``accuracy_ba``: share of pairs whose verdict in that order is "chosen" (invalid
      counts as not correct); Wilson interval.
    - ``order_consistency``: among pairs with a valid verdict in both orders, the share where both orders
      pick the same response; Wilson interval.
    - ``position_a``: among the same pairs, the share of verdicts that say "A" (AB: chosen, BA: rejected);
      0.5 means no position bias. Bootstrap over pairs (both verdicts of a pair move together).
    """
    by = _as_list(by)
    require_columns(results, [*by, "verdict_ab", "verdict_ba"])
    judged = results[results["verdict_ab"].notna() | results["verdict_ba"].notna()]
    rows = []
    groups = judged.groupby(by, observed=True, sort=True) if by else [((), judged)]
    for key, g in groups:
        key = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        ab, ba = g["verdict_ab"].astype(object), g["verdict_ba"].astype(object)
        n = len(g)
        for name, verdicts in (("accuracy_ab", ab), ("accuracy_ba", ba)):
            k = int((verdicts == "chosen").sum())
            low, high = wilson_ci(k, n)
            rows.append({**key, "statistic": name, "n": n, "value": k / n if n else np.nan,
                         "ci_low": low, "ci_high": high})
        valid = ab.isin(["chosen", "rejected"]) & ba.isin(["chosen", "rejected"])
        nv = int(valid.sum())
        same = int((ab[valid] == ba[valid]).sum())
        low, high = wilson_ci(same, nv)
        rows.append({**key, "statistic": "order_consistency", "n": nv, "value": same / nv if nv else np.nan,
                     "ci_low": low, "ci_high": high})
        share_a = (((ab[valid] == "chosen").astype(float) + (ba[valid] == "rejected").astype(float)) / 2
                   ).to_numpy()
        low, high = bootstrap_ci(share_a, n_boot=n_boot, seed=seed)
        rows.append({**key, "statistic": "position_a", "n": nv,
                     "value": float(share_a.mean()) if nv else np.nan, "ci_low": low, "ci_high": high})
    return pd.DataFrame(rows, columns=[*by, "statistic", "n", "value", "ci_low", "ci_high"])


def score_margins(results: pd.DataFrame) -> pd.DataFrame:
    """Per item: ``margin`` = score_chosen − score_rejected and ``margin_std`` = margin divided by the
    standard deviation of that model's margins (all its profile conditions), so zero stays the decision
    boundary and models on different score scales are comparable. Invalid rows and non-finite scores
    are left out; a model whose margins do not vary gets NaN."""
    require_columns(results, ["model", "score_chosen", "score_rejected", "outcome"])
    sc = pd.to_numeric(results["score_chosen"], errors="coerce")
    sr = pd.to_numeric(results["score_rejected"], errors="coerce")
    keep = (results["outcome"] != "invalid") & np.isfinite(sc) & np.isfinite(sr)
    out = results.loc[keep].copy()
    out["margin"] = (sc - sr)[keep].astype(float)
    sd = out.groupby("model", observed=True)["margin"].transform(lambda m: m.std(ddof=1))
    out["margin_std"] = out["margin"] / sd.where(sd > 0)
    return out.reset_index(drop=True)


def margin_summary(results: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile")) -> pd.DataFrame:
    """Per group: n, mean / median / q25 / q75 of the standardized margin, and the share of positive margins."""
    by = _as_list(by)
    m = score_margins(results)
    m["_pos"] = (m["margin"] > 0).astype(float)
    grouped = m.groupby(by, observed=True, sort=True)
    return grouped.agg(
        n=("margin_std", "size"), mean=("margin_std", "mean"), median=("margin_std", "median"),
        q25=("margin_std", lambda s: s.quantile(0.25)), q75=("margin_std", lambda s: s.quantile(0.75)),
        positive=("_pos", "mean"),
    ).reset_index()
