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

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd

from prb_utils.analysis.features import LENGTH_EDGES, MAX_ASPECTS, aspect_table, pair_features
from prb_utils.analysis.metrics import accuracy_table, as_list, require_columns, wilson_ci
from prb_utils.analysis.resampling import SEED, bootstrap_ci
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
    return accuracy_table(joined, [*as_list(by), "aspects_bin"])


def by_theme(results: pd.DataFrame, data: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile")
             ) -> pd.DataFrame:
    """Accuracy by aspect theme; a pair counts once in every theme one of its aspects hits.

    The ``n`` of the themes therefore add up to more than the number of pairs.
    """
    themes = aspect_table(data)[["subset", "id", "theme"]].drop_duplicates()
    joined = join_features(results, pair_features(data)[["subset", "id"]])
    joined = joined.merge(themes, on=["subset", "id"], how="inner")
    return accuracy_table(joined, [*as_list(by), "theme"])


def by_inferability(results: pd.DataFrame, data: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"),
                    labels: Sequence[str] = ("low", "medium", "high")) -> pd.DataFrame:
    """Accuracy by inferability bin, with ``inferability_mean`` (mean score of the bin's pairs) for plots.

    Pairs without rubric aspects have no inferability score and are left out.
    """
    by = as_list(by)
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
    return accuracy_table(joined, [*as_list(by), "rubric_inferable"])


def length_bias(results: pd.DataFrame, data: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"),
                edges: Sequence[float] = LENGTH_EDGES) -> pd.DataFrame:
    """Accuracy by chosen − rejected **character**-count difference bin (``length_bin``, edges
    :data:`~prb_utils.analysis.features.LENGTH_EDGES`), with ``mean_diff_chars``."""
    by = as_list(by)
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
    by = as_list(by)
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


def _judged_groups(results: pd.DataFrame, by: list[str]) -> Iterator[tuple[dict, pd.DataFrame, pd.Series, pd.Series]]:
    """``(group key as a dict, rows, verdicts A/B, verdicts B/A)`` per ``by`` group of the rows with a verdict."""
    judged = results[results["verdict_ab"].notna() | results["verdict_ba"].notna()]
    groups = judged.groupby(by, observed=True, sort=True) if by else [((), judged)]
    for key, g in groups:
        yield (dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)), g,
               g["verdict_ab"].astype(object), g["verdict_ba"].astype(object))


def judge_order(results: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"),
                n_boot: int | None = None, seed: int = SEED) -> pd.DataFrame:
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
    - ``tie_rate`` (when the rows have ``outcome``): the share of pairs whose two orders leave the chosen and
      the rejected answer equal, a tie, which counts as not correct; Wilson interval.
    """
    by = as_list(by)
    require_columns(results, [*by, "verdict_ab", "verdict_ba"])
    rows = []
    for key, g, ab, ba in _judged_groups(results, by):
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
        if "outcome" in g.columns:   # beside the position numbers: the pairs the two orders leave tied
            ties = int((g["outcome"] == "tie").sum())
            low, high = wilson_ci(ties, n)
            rows.append({**key, "statistic": "tie_rate", "n": n, "value": ties / n if n else np.nan,
                         "ci_low": low, "ci_high": high})
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
    by = as_list(by)
    m = score_margins(results)
    m["_pos"] = (m["margin"] > 0).astype(float)
    grouped = m.groupby(by, observed=True, sort=True)
    return grouped.agg(
        n=("margin_std", "size"), mean=("margin_std", "mean"), median=("margin_std", "median"),
        q25=("margin_std", lambda s: s.quantile(0.25)), q75=("margin_std", lambda s: s.quantile(0.75)),
        positive=("_pos", "mean"),
    ).reset_index()


# ------------------------------------------------------------------------------------------ categories
MIN_CATEGORY_PAIRS = 2  # a category with fewer pairs is listed, not drawn
MAX_CATEGORIES = 20  # at most this many categories (the largest) are drawn


def by_category(results: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"),
                min_pairs: int = MIN_CATEGORY_PAIRS, max_categories: int = MAX_CATEGORIES,
                half_credit: bool = False) -> pd.DataFrame:
    """Accuracy per category, the categories ordered by their number of pairs (most first, then by name).

    Adds ``pairs`` (distinct pairs of the category over all groups) and ``shown``: true for the
    ``max_categories`` largest categories with at least ``min_pairs`` pairs, the ones worth a heatmap
    row; the others are best listed by name.

    >>> results = pd.DataFrame({"model": "m", "profile": "none", "subset": "s", "id": ["a", "b", "c"],
    ...                         "category": ["law", "law", "pets"], "outcome": ["correct", "wrong", "correct"]})
    >>> by_category(results)[["category", "pairs", "n", "accuracy", "shown"]]
      category  pairs  n  accuracy  shown
    0      law      2  2       0.5   True
    1     pets      1  1       1.0  False
    """
    by = as_list(by)
    require_columns(results, ["category", "subset", "id"])
    rows = results.assign(category=results["category"].fillna("(none)").astype(str))
    pairs = rows.drop_duplicates(["category", "subset", "id"]).groupby("category").size()
    order = sorted(pairs.index, key=lambda c: (-int(pairs[c]), c))
    shown = [c for c in order if pairs[c] >= min_pairs][:max(max_categories, 0)]
    rows = rows.assign(category=pd.Categorical(rows["category"], categories=order, ordered=True))
    table = accuracy_table(rows, [*by, "category"], half_credit=half_credit)
    table = table.sort_values(["category", *by], kind="stable").reset_index(drop=True)
    table.insert(table.columns.get_loc("category") + 1, "pairs",
                 table["category"].astype(str).map(pairs).astype(np.int64))
    table["shown"] = table["category"].astype(str).isin(shown)
    return table


def left_out_categories(table: pd.DataFrame) -> str:
    """The categories of :func:`by_category` that are not ``shown``, as ``name (pairs)``, comma-separated.

    >>> left_out_categories(pd.DataFrame({"category": ["law", "pets", "pets"], "pairs": [2, 1, 1],
    ...                                   "shown": [True, False, False]}))
    'pets (1)'
    """
    rest = table.loc[~table["shown"].astype(bool), ["category", "pairs"]].drop_duplicates("category")
    return ", ".join(f"{c} ({int(n)})" for c, n in zip(rest["category"].astype(str), rest["pairs"], strict=True))


# ------------------------------------------------------------------------------------------ locked judges
MIN_ORDER_CONSISTENCY = 0.25  # below this a judge is flagged position-locked (a random judge gets ~0.5)
MAX_LETTER_SHARE = 0.9  # a judge giving one letter in at least this share of its verdicts is flagged


def position_locked(results: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile"),
                    min_consistency: float = MIN_ORDER_CONSISTENCY, max_letter_share: float = MAX_LETTER_SHARE,
                    quote: Callable[[str], str] = str) -> pd.DataFrame:
    """Per judge job (``by`` group of the rows with a verdict): is it position-locked, answering by the
    place of an answer (A or B) instead of its content?

    Among pairs with a valid verdict in both orders (as in :func:`judge_order`), ``order_consistency`` is
    the share where both orders pick the same response and ``letter_share`` the share of the verdicts
    that say ``letter``, the more frequent of "A" and "B". A judge is ``locked`` when its order
    consistency is below ``min_consistency`` or one letter makes at least ``max_letter_share`` of its
    verdicts: a judge that always answers "A" has consistency 0 and accuracy 1 with the chosen answer
    shown as A (``accuracy_ab``), 0 as B (``accuracy_ba``), so its accuracy measures the order, not the
    answers. ``warning`` is one line for a locked job ("" otherwise); ``quote`` formats the job's name in
    it (e.g. a Markdown code span). Columns ``*by, n, order_consistency, letter, letter_share, accuracy_ab,
    accuracy_ba, locked, warning``; no rows when no row has a verdict.

    >>> rows = pd.DataFrame({"model": "judge:x", "profile": "none", "verdict_ab": ["chosen"] * 4,
    ...                      "verdict_ba": ["rejected"] * 4})
    >>> position_locked(rows)[["letter", "letter_share", "order_consistency", "locked"]]
      letter  letter_share  order_consistency  locked
    0      A           1.0                0.0    True
    """
    by = as_list(by)
    require_columns(results, [*by, "verdict_ab", "verdict_ba"])
    columns = [*by, "n", "order_consistency", "letter", "letter_share", "accuracy_ab", "accuracy_ba", "locked",
               "warning"]
    rows = []
    for key, g, ab, ba in _judged_groups(results, by):
        valid = ab.isin(["chosen", "rejected"]) & ba.isin(["chosen", "rejected"])
        n = int(valid.sum())
        says_a = int((ab[valid] == "chosen").sum() + (ba[valid] == "rejected").sum())
        share_a = says_a / (2 * n) if n else np.nan
        letter, share = ("A", share_a) if not n or share_a >= 0.5 else ("B", 1 - share_a)
        consistency = float((ab[valid] == ba[valid]).mean()) if n else np.nan
        acc_ab = float((ab == "chosen").mean()) if len(g) else np.nan
        acc_ba = float((ba == "chosen").mean()) if len(g) else np.nan
        locked = bool(n) and (consistency < min_consistency or share >= max_letter_share)
        name = " ".join(str(v) for v in key.values()) if key else "the judge"
        warning = (f"⚠ Position-locked judge {quote(name)}: it answers \"{letter}\" in {share:.0%} of its verdicts "
                   f"and keeps its pick when the answers swap places in {consistency:.0%} of {n} pairs "
                   f"(accuracy {acc_ab:.2f} with the chosen answer as A, {acc_ba:.2f} as B): its accuracy "
                   "measures the answer order, not the answers." if locked else "")
        rows.append({**key, "n": n, "order_consistency": consistency, "letter": letter if n else None,
                     "letter_share": share, "accuracy_ab": acc_ab, "accuracy_ba": acc_ba, "locked": locked,
                     "warning": warning})
    return pd.DataFrame(rows, columns=columns)


def locked_warnings(locks: pd.DataFrame, models: Sequence[str] | None = None) -> str:
    """The warnings of the locked jobs of :func:`position_locked` (only those of ``models`` when given),
    one paragraph each (blank-line separated); "" when none is locked."""
    rows = locks[locks["locked"].astype(bool)]
    if models is not None and "model" in rows.columns:
        rows = rows[rows["model"].astype(str).isin([str(m) for m in models])]
    return "\n\n".join(rows["warning"])
