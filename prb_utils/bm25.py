"""BM25+ over one user's posts and the light tokenizer it shares with the lexical baseline: the text ranking that
``topK`` retrieval, the parrot probe and the word-overlap features read. Pure text, no prb import, so every layer
may use it.

>>> tokenize("The cheap pans, and THE boots")
['cheap', 'pans', 'boots']
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "a an and are as at be but by can do does for from has have how i if in is it its my of on or so that "
    "the their them there these they this to was what when where which who why will with would you your "
    "me we our any some should could about into than then also just more most very".split()
)


def tokenize(text: str) -> list[str]:
    """Lower-cased content words (a light tokenizer shared by retrieval and the lexical baseline)."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


BM25_K1, BM25_B, BM25_DELTA = 1.5, 0.75, 1.0  # rank_bm25's BM25Plus defaults


_WORD_BYTES = bytes(c if (48 <= c <= 57 or 97 <= c <= 122) else 32 for c in range(256))  # [a-z0-9] kept
_STOP_BYTES = frozenset(w.encode() for w in STOPWORDS)


def _word_counts(text: str) -> tuple[Counter[bytes], int]:
    """Counts of the content words of ``text`` (the words of :func:`tokenize`, as ASCII bytes) and their
    number. Twice as fast as the regular expression: the bytes of every character outside ``[a-z0-9]``
    (multi-byte UTF-8 included) become spaces, then one split.

    >>> _word_counts("The pan, the PAN and a lid")
    (Counter({b'pan': 2, b'lid': 1}), 3)
    """
    counts = Counter(text.lower().encode("utf-8", "surrogatepass").translate(_WORD_BYTES).split())
    for word in _STOP_BYTES.intersection(counts):
        del counts[word]
    return counts, sum(counts.values())


@lru_cache(maxsize=8192)
def _bm25_cached(question: str, posts: tuple[str, ...]) -> tuple[float, ...]:
    counts, lengths = [], []
    for post in posts:
        found, n = _word_counts(post)
        counts.append(found)
        lengths.append(n or 1)   # rank_bm25 sees an empty post as the one-word document "_"
    doc_len = np.array(lengths)
    avgdl = sum(lengths) / len(posts)
    score = np.zeros(len(posts))
    for q in (w.encode() for w in tokenize(question)):
        q_freq = np.array([c.get(q, 0) for c in counts])
        holding = int((q_freq > 0).sum())
        idf = math.log((len(posts) + 1) / holding) if holding else 0
        score += idf * (BM25_DELTA + (q_freq * (BM25_K1 + 1)) /
                        (BM25_K1 * (1 - BM25_B + BM25_B * doc_len / avgdl) + q_freq))
    return tuple(score.tolist())


def bm25_scores(question: str, posts: Sequence[str]) -> list[float]:
    """BM25+ relevance of each post to ``question``: exactly rank_bm25's ``BM25Plus(corpus).get_scores``
    on :func:`tokenize`'d texts (a test checks it), computed from word counts over the query's words only
    and kept for the last few thousand (question, posts), so ``top1``/``top2``/``top3`` retrieve once.

    BM25+ keeps every IDF positive, which matters for the small corpora of one user's posts (with Okapi
    BM25 a word in half the posts scores zero).

    >>> [round(s, 3) for s in bm25_scores("cheap pans", ["hiking boots", "cheap cast iron pans"])]
    [2.197, 4.108]
    """
    if not posts:
        return []
    return list(_bm25_cached(str(question), tuple(str(p) for p in posts)))


def top_indices(scores: Sequence[float], k: int) -> list[int]:
    """Indices of the ``k`` highest scores (ties keep the original order), in post order."""
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return sorted(ranked[:k])


def bm25_retrieve(question: str, posts: Sequence[str], k: int) -> list[int]:
    """Indices of the ``k`` posts most relevant to ``question`` by BM25+ (ties keep the original order).

    >>> bm25_retrieve("cheap pans", ["hiking boots", "cheap cast iron pans", "pans"], 1)
    [1]
    """
    if k >= len(posts):
        return list(range(len(posts)))
    return top_indices(bm25_scores(question, posts), k)


def least_retrieve(question: str, posts: Sequence[str], k: int) -> list[int]:
    """Indices of the ``k`` posts LEAST relevant to ``question`` by BM25+ (an ablation of retrieval).

    >>> least_retrieve("cheap pans", ["hiking boots", "cheap cast iron pans", "pans"], 1)
    [0]
    """
    if k >= len(posts):
        return list(range(len(posts)))
    return top_indices([-s for s in bm25_scores(question, posts)], k)
