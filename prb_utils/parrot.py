"""The ``parrot`` probe's transform: the rejected answer made to sound like the user, without meeting the rubric.

On the benchmark the chosen answer is often also the one worded more like the user's posts, so an RM that rewards
the user's words looks personalized. The parrot asks it causally: :data:`PARROT_PHRASES` phrases of
:data:`PARROT_WORDS` consecutive words of the user's own post are inserted into the rejected answer at seeded
sentence starts (the chosen answer is untouched); its control inserts, at the same places, the same number of
words from another user's post of the same subset (a seeded other record with another profile; any subset where
its own has none), each phrase the span of that post closest in characters to the parrot's (so a length-only RM
sees nearly the same change). An RM that then prefers the parroted rejected answer more often than the control
one rewards mimicry, not personalization.

The user's words come from the post the RM sees first: the one BM25 (the default retriever) ranks first for the
question, shown under ``full`` and every ``topK`` of that retriever. The donor's post is chosen the same way for
this record's question, so both insertions are on the question's topic. Never the rubric or the narrative.

>>> data = pd.DataFrame({"subset": "S", "id": ["a", "b"], "question": ["Cheap tents?", "Warm socks?"],
...                      "chosen": ["Pick A. It is dry."] * 2, "rejected": ["Pick B. It is light."] * 2,
...                      "profile": [[{"text": "cheap tents for rainy weekends"}],
...                                  [{"text": "wool socks keep toes warm"}]]})
>>> parrot_answers(data)["rejected"].tolist()[0]
'for rainy weekends cheap tents. Pick B. cheap tents for rainy weekends. cheap tents for rainy weekends. It is light.'
>>> parrot_answers(data, control=True)["rejected"].tolist()[0]
'warm wool socks keep toes. Pick B. wool socks keep toes warm. keep toes warm wool socks. It is light.'
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import pandas as pd

from prb_utils.bm25 import bm25_retrieve

PARROT_PHRASES = 3   # phrases inserted into each rejected answer
PARROT_WORDS = 5     # consecutive words of a post in each phrase

_WORD = re.compile(r"\w+(?:['’-]\w+)*")
_SENTENCE_START = re.compile(r"(?<=[.!?])\s+")


def answer_words(text: str) -> list[str]:
    """The words of ``text`` as the parrot counts them (letters and digits, inner apostrophes and hyphens kept).

    >>> answer_words("Don't panic: a low-key 50mm lens!")
    ["Don't", 'panic', 'a', 'low-key', '50mm', 'lens']
    """
    return _WORD.findall(str(text))


def voice_post(question: str, posts: list[str]) -> str:
    """The post of ``posts`` the RM sees first for ``question``: BM25's first ("" without posts).

    >>> voice_post("cheap pans", ["hiking boots", "cheap cast iron pans"])
    'cheap cast iron pans'
    """
    return posts[bm25_retrieve(question, posts, 1)[0]] if posts else ""


@dataclass(frozen=True)
class ParrotPlan:
    """One record's insertions: the places (character offsets of the rejected answer, ascending), the user's
    phrases and the control's (the same number of words each, at the same places)."""

    places: tuple[int, ...]
    own: tuple[str, ...]
    other: tuple[str, ...]


def _texts(posts) -> list[str]:
    return [str(p.get("text") or "") for p in posts] if isinstance(posts, (list, tuple)) else []


def _span(words: list[str], start: int, n: int) -> str:
    return " ".join(words[(start + k) % len(words)] for k in range(n))


def _donors(keys: list[str], subsets: list[str], usable: list[bool]) -> list[list[int]]:
    """Per subset, its usable records ordered by profile, so that another profile's records are one slice away."""
    groups: dict[str, list[int]] = {}
    for i, (subset, ok) in enumerate(zip(subsets, usable, strict=True)):
        if ok:
            groups.setdefault(subset, []).append(i)
    ordered = {s: sorted(members, key=lambda j: (keys[j], j)) for s, members in groups.items()}
    return [ordered.get(s, []) for s in subsets]


def _other_user(i: int, ordered: list[int], keys: list[str], rng: random.Random) -> int | None:
    """A seeded record of ``ordered`` whose profile differs from record ``i``'s (None where none does)."""
    same = [j for j in ordered if keys[j] == keys[i]]
    if not same:
        others = ordered
    else:
        first = ordered.index(same[0])
        others = ordered[:first] + ordered[first + len(same):]
    return rng.choice(others) if others else None


def parrot_plans(data: pd.DataFrame, seed: int = 0) -> list[ParrotPlan | None]:
    """Per record of ``data``, its :class:`ParrotPlan` (seeded per record by ``seed``, subset and id); None where
    its own first post has no word or no other user has one (the record is then left as it is by both probes)."""
    questions = data["question"].astype(str).tolist()
    rejected = data["rejected"].astype(str).tolist()
    subsets, ids = data["subset"].astype(str).tolist(), data["id"].astype(str).tolist()
    posts = [_texts(p) for p in (data["profile"] if "profile" in data.columns else [[]] * len(data))]
    keys = [repr(p) for p in posts]
    usable = [any(answer_words(t) for t in p) for p in posts]
    by_subset, everyone = _donors(keys, subsets, usable), _donors(keys, [""] * len(data), usable)
    plans: list[ParrotPlan | None] = []
    for i, question in enumerate(questions):
        rng = random.Random(f"{seed}/{subsets[i]}/{ids[i]}")
        own = answer_words(voice_post(question, posts[i]))
        donor = _other_user(i, by_subset[i], keys, rng) if own else None
        if own and donor is None:
            donor = _other_user(i, everyone[i], keys, rng)
        if donor is None:
            plans.append(None)
            continue
        other = answer_words(voice_post(question, [t for t in posts[donor] if answer_words(t)]))
        starts = [0, *(m.end() for m in _SENTENCE_START.finditer(rejected[i])), len(rejected[i])]
        places = tuple(sorted(rng.choice(starts) for _ in range(PARROT_PHRASES)))
        mine = tuple(_span(own, rng.randrange(len(own)), PARROT_WORDS) for _ in range(PARROT_PHRASES))
        order = list(range(len(other)))
        theirs = []
        for phrase in mine:   # the donor's span closest in characters, ties in a seeded order
            rng.shuffle(order)
            theirs.append(min((_span(other, s, PARROT_WORDS) for s in order), key=lambda t: abs(len(t) - len(phrase))))
        plans.append(ParrotPlan(places, mine, tuple(theirs)))
    return plans


def insert_phrases(answer: str, places: tuple[int, ...], phrases: tuple[str, ...]) -> str:
    """``answer`` with each phrase inserted as a sentence of its own at its place (a sentence start or the end).

    >>> insert_phrases("One. Two.", (0, 5, 9), ("a b", "c d", "e f"))
    'a b. One. c d. Two. e f.'
    """
    out = str(answer)
    for place, phrase in sorted(zip(places, phrases, strict=True), key=lambda pp: pp[0], reverse=True):
        if place >= len(out.rstrip()):
            out = f"{out.rstrip()} {phrase}." if out.strip() else f"{phrase}."
        else:
            out = f"{out[:place]}{phrase}. {out[place:]}"
    return out


def parrot_answers(data: pd.DataFrame, seed: int = 0, *, control: bool = False) -> pd.DataFrame:
    """``data`` with each rejected answer parroting its user (:func:`parrot_plans`), or with ``control`` the same
    number of another user's words at the same places; the chosen answers, questions and profiles untouched."""
    out = data.copy()
    out["rejected"] = [answer if plan is None else insert_phrases(answer, plan.places,
                                                                  plan.other if control else plan.own)
                       for answer, plan in zip(data["rejected"].astype(str), parrot_plans(data, seed), strict=True)]
    return out
