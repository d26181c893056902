"""Where a reward model wins or fails: accuracy by rubric features, length bias, judge order, margins.

Every function takes the per-item ``results`` table and, where pair features are needed, the benchmark
``data`` frame; the two are joined on (subset, id). Pairs of ``results`` that are not in ``data`` are left
out. Accuracy follows :func:`prb_utils.analysis.metrics.accuracy_table` (ties and invalids count as not correct;
Wilson 95% intervals).

Pair features (one row per pair, :func:`pair_features`):

- ``n_aspects``: number of rubric aspects, binned as ``"0"``, ``"1"``, …, ``"5+"``.
- themes: each rubric aspect is matched against the transparent keyword lists in :data:`THEMES`
  (lower-cased text, a keyword matches at the start of a word, so ``"encourag"`` matches "encouraging").
  An aspect can hit several themes; one that hits none is ``"other"``. A pair belongs to every theme one
  of its aspects hits. Keywords rather than MiniLM clusters: the grouping is deterministic, needs no model,
  runs in milliseconds, and anyone can read (and change) why an aspect landed in a theme; clusters would
  still need hand-made names and would move when the data changes.
- ``inferability``: the share of the rubric's distinct content words (aspect texts, stop words removed,
  light suffix stemming) that also occur in the user's profile posts (all posts, any condition); binned
  into ``low``/``medium``/``high`` by quantiles over the pairs. The record's own boolean
  ``rubric_inferable`` (present in the sample) is kept beside it.
- ``length_diff``: chosen minus rejected word count (whitespace words), binned by :data:`LENGTH_EDGES`.

Example:
    >>> aspect_themes("Uses an encouraging, friendly tone")
    ['tone']
    >>> aspect_themes("Gives a short bulleted checklist of cheap options")
    ['budget', 'format']
    >>> aspect_themes("Mentions the history of the instrument")
    ['other']
    >>> inferability("Avoids technical jargon", ["Camera jargon confuses me."])  # jargon: 1 of 3 stems
    0.3333333333333333
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from prb_utils.analysis.metrics import (
    N_RESAMPLES,
    SEED,
    _as_list,
    accuracy_table,
    bootstrap_ci,
    require_columns,
    wilson_ci,
)
from prb_utils.errors import PRBError
from prb_utils.profile import STOPWORDS

# ------------------------------------------------------------------------------------------------ themes
#: Aspect themes and their keywords. A keyword matches at the start of a word of the lower-cased aspect
#: text (so it may be a stem: "encourag" matches "encourage", "encouraging"); multi-word keywords match
#: as written. Order is the display order; "other" collects aspects that hit no theme.
THEMES: dict[str, tuple[str, ...]] = {
    "tone": ("tone", "friendly", "encourag", "empath", "supportive", "reassur", "gentle", "polite", "casual",
             "humor", "humour", "respectful", "judgment", "judgement", "kind", "calm", "positive", "honest",
             "direct", "decisive", "upbeat", "enthusias", "emotion", "feeling", "normaliz", "normalis"),
    "simplicity": ("plain", "simple", "jargon", "beginner", "easy", "accessible", "layman", "non-technical",
                   "everyday language", "clear language"),
    "depth": ("depth", "in-depth", "detail", "thorough", "comprehensive", "underlying", "science",
              "scientific", "why", "background", "nuanc", "technical", "advanced", "theory", "mechanism",
              "expert", "precise", "rigor", "rigour", "trade-off", "tradeoff", "scholarly", "formal"),
    "sources": ("research", "evidence", "source", "cite", "citation", "reference", "statute", "doctrine",
                "guideline", "study", "studies", "data", "case law", "further reading"),
    "budget": ("budget", "cheap", "afford", "cost", "price", "pricing", "inexpensive", "money", "frugal",
               "low-cost", "spend", "saving", "expens", "paid", "income", "salary"),
    "safety": ("safe", "injur", "risk", "danger", "precaution", "warn", "health", "doctor", "physio",
               "medical", "vet", "allerg", "lawyer", "protect", "consent"),
    "format": ("list", "bullet", "step-by-step", "steps", "numbered", "checklist", "short", "brief",
               "concise", "summary", "table", "structure", "format", "script", "template", "outline",
               "headings", "skimmable", "scannable", "ordered"),
    "constraints": ("equipment", "minute", "quick", "time", "space", "home", "schedule", "carry-on", "diet",
                    "vegan", "vegetarian", "plant-based", "dairy", "secular", "religio", "catholic", "faith",
                    "year-old", "child", "kid", "limited", "fixed income", "retiree"),
    "specifics": ("example", "specific", "concrete", "recommend", "suggest", "sample", "exact", "analogy"),
    "practicality": ("practical", "actionable", "usable", "hands-on", "exercise", "next step", "apply"),
    "balance": ("both sides", "evenhand", "even-hand", "balanced", "partisan", "neutral", "stance",
                "perspective", "viewpoint", "opinion", "objective"),
}
OTHER = "other"
THEME_ORDER = (*THEMES, OTHER)
_THEME_RES = {
    theme: re.compile(r"(?<![a-z0-9])(?:" + "|".join(re.escape(k) for k in sorted(kws, key=len, reverse=True))
                      + ")")
    for theme, kws in THEMES.items()
}


def aspect_themes(aspect: str) -> list[str]:
    """Themes whose keywords occur in one rubric aspect text, in :data:`THEMES` order, or ``["other"]``."""
    text = str(aspect).lower()
    hits = [theme for theme, rx in _THEME_RES.items() if rx.search(text)]
    return hits or [OTHER]


# --------------------------------------------------------------------------------------- inferability
#: Words that say nothing about a rubric: the retrieval stopwords plus the words every rubric uses.
RUBRIC_STOPWORDS = STOPWORDS | frozenset("""
above after again against all am answer answers because been before being below between both did doing
don down during each either etc even ever every few further get gets getting give gives giving had
having he her here hers him his include includes including itself least less like make makes making many
may mention mentions might much must need needs no nor not now off once one only other others out over
own per provide provides providing question questions rather really response responses same she such
those through too under until up upon us use used user users uses using via want well were while whom
whose within without yours
""".split())
_WORD = re.compile(r"[a-z][a-z'-]*[a-z]|[a-z]")


def _stem(word: str) -> str:
    for suffix, repl in (("ies", "y"), ("ied", "y"), ("ingly", ""), ("edly", ""), ("ing", ""), ("ers", ""),
                         ("er", ""), ("ed", ""), ("ly", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: len(word) - len(suffix)] + repl
    return word


def content_stems(text: str) -> set[str]:
    """Stemmed content words of ``text``: lower-cased, stop words and words under 3 letters dropped.

    >>> sorted(content_stems("Uses plain language, avoiding jargon"))
    ['avoid', 'jargon', 'language', 'plain']
    """
    words = (w.replace("'", "") for part in _WORD.findall(str(text).lower()) for w in part.split("-"))
    return {_stem(w) for w in words if len(w) >= 3 and w not in RUBRIC_STOPWORDS}


def inferability(aspects: str | Iterable[str], posts: Iterable[str]) -> float:
    """Share of the aspects' distinct content stems that occur in the posts' text (NaN without aspects)."""
    if isinstance(aspects, str):
        aspects = [aspects]
    rubric = set().union(*(content_stems(a) for a in aspects)) if aspects else set()
    if not rubric:
        return float("nan")
    profile = set().union(*(content_stems(p) for p in posts)) if posts else set()
    return len(rubric & profile) / len(rubric)


def quantile_bins(values: pd.Series, *, labels: Sequence[str] = ("low", "medium", "high")) -> pd.Series:
    """Ordered categorical of ``values`` cut at quantiles into ``len(labels)`` bins.

    The interior edges are the 1/k, 2/k, … quantiles; a value goes into the first bin whose upper edge is
    at least the value. Ties therefore stay together in the lower bin and a bin can be empty (e.g. when
    most scores are 0, "low" holds exactly the zeros). NaN values stay NaN.

    >>> list(quantile_bins(pd.Series([0.1, 0.2, 0.5, 0.6, 0.9, 1.0])))
    ['low', 'low', 'medium', 'medium', 'high', 'high']
    >>> list(quantile_bins(pd.Series([0, 0, 0, 0, 0.4, 1.0])))
    ['low', 'low', 'low', 'low', 'high', 'high']
    """
    values = pd.Series(values, dtype=float)
    k = len(labels)
    clean = values.dropna()
    codes = np.full(len(values), -1)
    if not clean.empty:
        interior = np.quantile(clean, np.linspace(0, 1, k + 1)[1:-1])
        ok = values.notna().to_numpy()
        codes[ok] = np.searchsorted(interior, values.to_numpy()[ok], side="left")
    cat = pd.Categorical.from_codes(codes, categories=list(labels), ordered=True)
    return pd.Series(cat, index=values.index)


# --------------------------------------------------------------------------------------- pair features
#: Edges of the chosen − rejected word-count difference bins, right-closed: (-inf, -21], (-21, -11], …
LENGTH_EDGES: tuple[float, ...] = (-np.inf, -21, -11, -4, 3, 10, 20, np.inf)
MAX_ASPECTS = 5


def _length_labels(edges: Sequence[float]) -> list[str]:
    labels = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        if np.isinf(lo):
            labels.append(f"<={int(hi)}")
        elif np.isinf(hi):
            labels.append(f">={int(lo) + 1}")
        else:
            labels.append(f"{int(lo) + 1}..{int(hi)}")
    return labels


def _word_count(text) -> int:
    return len(str(text).split()) if isinstance(text, str) else 0


def _aspect_texts(aspects) -> list[str]:
    if aspects is None or (isinstance(aspects, float) and np.isnan(aspects)):
        return []
    return [str(a.get("aspect", "")) if isinstance(a, dict) else str(a) for a in aspects]


def _post_texts(profile) -> list[str]:
    if profile is None or (isinstance(profile, float) and np.isnan(profile)):
        return []
    return [str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in profile]


def pair_features(
    data: pd.DataFrame,
    *,
    inferability_labels: Sequence[str] = ("low", "medium", "high"),
    length_edges: Sequence[float] = LENGTH_EDGES,
    max_aspects: int = MAX_ASPECTS,
) -> pd.DataFrame:
    """One row per pair of ``data``: subset, id, n_aspects, aspects_bin, inferability, inferability_bin,
    rubric_inferable (when ``data`` has it), chosen_words, rejected_words, length_diff, length_bin."""
    require_columns(data, ["subset", "id", "chosen", "rejected"], what="benchmark")
    aspects = data["rubric_aspects"] if "rubric_aspects" in data else pd.Series([[]] * len(data), index=data.index)
    profile = data["profile"] if "profile" in data else pd.Series([[]] * len(data), index=data.index)
    texts = aspects.map(_aspect_texts)
    posts = profile.map(_post_texts)
    out = pd.DataFrame({"subset": data["subset"].astype(str).to_numpy(), "id": data["id"].astype(str).to_numpy()})
    n_aspects = texts.map(len).to_numpy()
    out["n_aspects"] = n_aspects
    aspect_labels = [str(i) for i in range(max_aspects)] + [f"{max_aspects}+"]
    aspect_codes = np.minimum(n_aspects, max_aspects)
    out["aspects_bin"] = pd.Categorical.from_codes(aspect_codes, categories=aspect_labels, ordered=True)
    out["inferability"] = [inferability(a, p) for a, p in zip(texts, posts, strict=True)]
    out["inferability_bin"] = quantile_bins(out["inferability"], labels=inferability_labels).array
    if "rubric_inferable" in data:
        out["rubric_inferable"] = data["rubric_inferable"].to_numpy()
    out["chosen_words"] = data["chosen"].map(_word_count).to_numpy()
    out["rejected_words"] = data["rejected"].map(_word_count).to_numpy()
    out["length_diff"] = out["chosen_words"] - out["rejected_words"]
    out["length_bin"] = pd.cut(out["length_diff"], list(length_edges), labels=_length_labels(length_edges),
                               ordered=True)
    return out


def aspect_table(data: pd.DataFrame) -> pd.DataFrame:
    """One row per (pair, aspect, theme): subset, id, aspect_index, aspect, theme (ordered categorical)."""
    require_columns(data, ["subset", "id", "rubric_aspects"], what="benchmark")
    rows = []
    for subset, pid, aspects in zip(data["subset"], data["id"], data["rubric_aspects"], strict=True):
        for i, text in enumerate(_aspect_texts(aspects)):
            for theme in aspect_themes(text):
                rows.append((str(subset), str(pid), i, text, theme))
    out = pd.DataFrame(rows, columns=["subset", "id", "aspect_index", "aspect", "theme"])
    out["theme"] = pd.Categorical(out["theme"], categories=list(THEME_ORDER), ordered=True)
    return out


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
    """Accuracy by chosen − rejected word-count difference bin (``length_bin``), with ``mean_diff``."""
    by = _as_list(by)
    joined = join_features(results, pair_features(data, length_edges=edges))
    table = accuracy_table(joined, [*by, "length_bin"])
    means = (joined.groupby([*by, "length_bin"], observed=True)["length_diff"].mean()
             .rename("mean_diff").reset_index())
    return table.merge(means, on=[*by, "length_bin"], how="left")


def longer_wins(results: pd.DataFrame, data: pd.DataFrame, *, by: str | Sequence[str] = ("model", "profile")
                ) -> pd.DataFrame:
    """How often the RM prefers the longer answer, on pairs whose answers differ in word count.

    Columns ``*by, n, longer_wins, rate, ci_low, ci_high, chosen_longer_rate``: ``n`` counts decided pairs
    (outcome correct or wrong; ties and invalids are left out), ``rate`` = longer_wins / n with a Wilson
    interval, and ``chosen_longer_rate`` is the share of those pairs whose chosen answer is the longer
    one (the accuracy a "longer wins" rule would get on them).
    """
    by = _as_list(by)
    joined = join_features(results, pair_features(data))
    joined = joined[(joined["length_diff"] != 0) & joined["outcome"].isin(["correct", "wrong"])]
    chosen_longer = joined["length_diff"] > 0
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
                n_resamples: int = N_RESAMPLES, seed: int = SEED) -> pd.DataFrame:
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
        low, high = bootstrap_ci(share_a, n_resamples=n_resamples, seed=seed)
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
