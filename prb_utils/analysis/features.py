"""Per-pair and per-aspect features of the benchmark: rubric themes, aspect counts, inferability, lengths.

These are properties of the data alone (no results); :mod:`prb_utils.analysis.breakdowns` joins them with
the per-item results and computes accuracy per feature level.

Pair features (one row per pair, :func:`pair_features`):

- ``n_aspects``: number of rubric aspects, binned as ``"0"``, ``"1"``, …, ``"5+"``.
- themes: each rubric aspect is matched against the transparent keyword lists in :data:`THEMES`, whole
  words only, compared by their Snowball stem (so "encouraging" matches "encourage", but "costume" does
  not match "cost"). An aspect can hit several themes; one that hits none is ``"other"``. A pair belongs
  to every theme one of its aspects hits. Keywords rather than MiniLM clusters: the grouping is
  deterministic, needs no model, runs in milliseconds, and anyone can read (and change) why an aspect
  landed in a theme; clusters would still need hand-made names and would move when the data changes.
- ``inferability``: the share of the rubric's distinct content stems (aspect texts, stop words removed,
  Snowball-stemmed) that also occur in the user's profile posts (all posts, any condition); binned into
  ``low``/``medium``/``high`` by quantiles over the pairs. The record's own boolean ``rubric_inferable``
  (present in the sample) is kept beside it.
- lengths, in **characters** (Python string length, exactly what the ``length`` baseline scores):
  ``chosen_chars``, ``rejected_chars``, ``length_diff_chars`` (chosen minus rejected), binned by
  :data:`LENGTH_EDGES` into ``length_bin``.

Example:
    >>> aspect_themes("Uses an encouraging, friendly tone")
    ['tone']
    >>> aspect_themes("Gives a short bulleted checklist of cheap options")
    ['budget', 'format']
    >>> aspect_themes("Mentions the history of the costume")
    ['other']
    >>> inferability("Avoids technical jargon", ["Camera jargon confuses me."])  # jargon: 1 of 3 stems
    0.3333333333333333
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
import pandas as pd

from prb_utils.analysis.metrics import require_columns
from prb_utils.bm25 import STOPWORDS

# ------------------------------------------------------------------------------------------------ words
_LETTERS = re.compile(r"[a-z]+")


def words(text: str) -> list[str]:
    """Lower-cased runs of letters; hyphens, apostrophes, digits and punctuation separate words.

    >>> words("A 7-year-old's non-technical plan")
    ['a', 'year', 'old', 's', 'non', 'technical', 'plan']
    """
    return _LETTERS.findall(str(text).lower())


@lru_cache(maxsize=1)
def _snowball():
    from nltk.stem.snowball import SnowballStemmer  # imported on first use: nltk's import takes a second

    return SnowballStemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The English Snowball (Porter2) stem of one lower-case word (nltk; no corpus download needed).

    >>> [stem(w) for w in ("recipe", "recipes", "notes", "not", "walking", "walked")]
    ['recip', 'recip', 'note', 'not', 'walk', 'walk']
    """
    return _snowball().stem(word)


# ------------------------------------------------------------------------------------------------ themes
#: Aspect themes and their keywords. Matching is by whole words: a keyword matches a word of the aspect
#: text when both have the same Snowball stem ("encourage" matches "encouraging", "steps" matches "step";
#: "cost" does not match "costume", nor "vet" "veteran", "time" "timeline", "script" "scripture"). A
#: keyword of several words (hyphens count as spaces) matches those words in a row, and the words it
#: matched are not matched again by shorter keywords ("non-technical" is simplicity, not also depth). A
#: keyword written ``=word`` matches that exact word only, because its stem is too broad ("underlying"
#: stems to "under", "accessible" to "access", "ordered" to "order", "practical" to "practic" like
#: "practice", "saving" to "save" as in "save time", and "directions" stems to "direct").
#:
#: "specifics" rule: "recommend" and "suggest" (and "recommendation", "suggestion") are the verbs rubrics
#: phrase almost any aspect with ("Suggests practice methods that need no extra equipment"), so on their
#: own they say nothing about specificity and are not keywords; an aspect is "specifics" when it asks for
#: specificity itself (specific, concrete, example, exact, …): "Recommends specific brands" still is.
#:
#: Order is the display order; "other" collects aspects that hit no theme.
THEMES: dict[str, tuple[str, ...]] = {
    "tone": ("tone", "friendly", "encourage", "empathy", "empathetic", "empathic", "=supportive", "reassure",
             "gentle", "polite", "casual", "humor", "humour", "=respectful", "judgment", "judgement", "kind",
             "calm", "=positive", "honest", "honesty", "=direct", "=directly", "decisive", "upbeat",
             "enthusiasm", "enthusiastic", "emotion", "=feeling", "=feelings", "=normalize", "=normalizes", "=normalizing",
             "=normalise", "=normalises", "=normalising"),
    "simplicity": ("plain", "simple", "jargon", "beginner", "easy", "=accessible", "layman", "non-technical",
                   "everyday language", "clear language"),
    "depth": ("depth", "in-depth", "detail", "thorough", "comprehensive", "=underlying", "science",
              "scientific", "why", "background", "nuance", "=technical", "advanced", "theory", "theoretical",
              "mechanism", "expert", "precise", "rigor", "rigour", "rigorous", "trade-off", "tradeoff",
              "scholarly", "formal"),
    "sources": ("research", "evidence", "source", "cite", "citation", "=reference", "=references", "statute",
                "doctrine", "guideline", "study", "data", "case law", "further reading"),
    "budget": ("budget", "cheap", "cheaper", "cheapest", "afford", "affordable", "cost", "price", "pricing",
               "inexpensive", "money", "frugal", "low-cost", "spend", "=saving", "=savings", "expense",
               "expensive", "paid", "income", "salary"),
    "safety": ("safe", "safety", "injury", "injure", "risk", "risky", "danger", "precaution", "warn",
               "health", "doctor", "physio", "physiotherapist", "medical", "vet", "allergy", "allergic",
               "lawyer", "protect", "protection", "consent"),
    "format": ("list", "bullet", "step-by-step", "steps", "numbered", "checklist", "short", "brief",
               "briefly", "concise", "summary", "table", "structure", "format", "script", "template",
               "outline", "=heading", "=headings", "skimmable", "scannable", "=ordered"),
    "constraints": ("equipment", "minute", "quick", "time", "space", "home", "schedule", "carry-on", "diet",
                    "vegan", "vegetarian", "plant-based", "dairy", "secular", "religion", "religious",
                    "catholic", "faith", "year-old", "child", "children", "kid", "limited", "fixed income",
                    "retiree", "retirees"),
    "specifics": ("example", "specific", "specifics", "concrete", "sample", "exact", "analogy"),
    "practicality": ("=practical", "=practically", "=actionable", "usable", "hands-on", "exercise", "next step",
                     "apply"),
    "balance": ("both sides", "evenhanded", "even-handed", "balanced", "partisan", "neutral", "stance",
                "perspective", "viewpoint", "opinion", "=objective"),
}
OTHER = "other"
THEME_ORDER = (*THEMES, OTHER)

_Key = tuple[tuple[str, bool], ...]  # (stem or exact word, exact?) per word of a keyword


def _keyword(keyword: str) -> _Key:
    exact = keyword.startswith("=")
    return tuple((w, True) if exact else (stem(w), False) for w in words(keyword.lstrip("=")))


@lru_cache(maxsize=1)
def _theme_keys() -> list[tuple[_Key, str]]:
    """Every (keyword, theme), longest keyword first (so multi-word keywords claim their words first)."""
    keys = [(_keyword(k), theme) for theme, kws in THEMES.items() for k in kws]
    return sorted(keys, key=lambda item: -len(item[0]))


def aspect_themes(aspect: str) -> list[str]:
    """Themes whose keywords occur in one rubric aspect text, in :data:`THEMES` order, or ``["other"]``.

    >>> aspect_themes("Avoids non-technical costume timeline scripture for a veteran")
    ['simplicity']
    """
    tokens = words(aspect)
    stems = [stem(w) for w in tokens]
    used = [False] * len(tokens)
    hits = set()
    for key, theme in _theme_keys():
        n = len(key)
        for i in range(len(tokens) - n + 1):
            if any(used[i:i + n]):
                continue
            if all((tokens[i + j] if exact else stems[i + j]) == part for j, (part, exact) in enumerate(key)):
                used[i:i + n] = [True] * n
                hits.add(theme)
    return [theme for theme in THEMES if theme in hits] or [OTHER]


# --------------------------------------------------------------------------------------- inferability
#: Words that say nothing about a rubric: the retrieval stopwords plus the words every rubric uses
#: (including the verbs "recommend" and "suggest" that phrase almost any aspect).
RUBRIC_STOPWORDS = STOPWORDS | frozenset("""
above after again against all am answer answers because been before being below between both did doing
don down during each either etc even ever every few further get gets getting give gives giving had
having he her here hers him his include includes including itself least less like make makes making many
may mention mentions might much must need needs no nor not now off once one only other others out over
own per provide provides providing question questions rather really recommend recommends recommending
response responses same she such suggest suggests suggesting those through too under until up upon us
use used user users uses using via want well were while whom whose within without yours
""".split())


def content_stems(text: str) -> set[str]:
    """Snowball stems of the content words of ``text``: stop words and words under 3 letters dropped.

    >>> sorted(content_stems("Uses plain language, avoiding jargon"))
    ['avoid', 'jargon', 'languag', 'plain']
    """
    return {stem(w) for w in words(text) if len(w) >= 3 and w not in RUBRIC_STOPWORDS}


def inferability(aspects: str | Iterable[str], posts: Iterable[str]) -> float:
    """Share of the aspects' distinct content stems that occur in the posts' text (NaN without aspects).

    >>> inferability(["Shares simple recipes"], ["Any recipe for bread?"])  # recip: 1 of 3 stems
    0.3333333333333333
    """
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
#: Edges of the chosen − rejected **character**-count difference bins, right-closed: (-inf, -121],
#: (-121, -61], … (about 6 characters per English word: ±20 characters is about ±3 words).
LENGTH_EDGES: tuple[float, ...] = (-np.inf, -121, -61, -21, 20, 60, 120, np.inf)
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


def char_count(text) -> int:
    """Length in characters, the unit of the ``length`` baseline (0 for a missing text).

    >>> char_count("a b c d"), char_count(None)
    (7, 0)
    """
    return len(text) if isinstance(text, str) else 0


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
    rubric_inferable (when ``data`` has it), chosen_chars, rejected_chars, length_diff_chars, length_bin."""
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
    out["chosen_chars"] = data["chosen"].map(char_count).to_numpy()
    out["rejected_chars"] = data["rejected"].map(char_count).to_numpy()
    out["length_diff_chars"] = out["chosen_chars"] - out["rejected_chars"]
    out["length_bin"] = pd.cut(out["length_diff_chars"], list(length_edges), labels=_length_labels(length_edges),
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
