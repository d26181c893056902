"""``length`` and ``lexical``: baselines without a model.

``length``: the score is the response's length in characters (Python string length; the longer response
wins). :func:`prb_utils.analysis.breakdowns.longer_wins` and the length features count the same unit.
``lexical``: the share of the user's distinct content words (lower-cased, stop words removed, the same
tokenizer as profile retrieval) that the response uses. The user's words are the question and, with a
profile block, the selected posts' texts (:func:`prb_utils.profile.user_text`); prb's own wrapper (the
profile header, the ``Question:`` prefix) and the posts' StackExchange community tags are not the user's
words and earn nothing.

>>> from prb_utils.models.base import PairInput
>>> pair = PairInput("k", "Cheap tent for rain?", chosen="A cheap tent", rejected="A tent")
>>> [round(s, 2) for s in (LexicalBaseline().score_pairs([pair])[0].score_chosen,
...                        LengthBaseline().score_pairs([pair])[0].score_rejected)]
[0.67, 6.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prb_utils.bm25 import tokenize
from prb_utils.models.base import PairInput, PairScore
from prb_utils.profile import user_text


class LengthBaseline:
    spec = "length"
    kind = "length"
    #: What the score measures, versioned: it is the model fingerprint, so a new method rescores old stores.
    method = "length:characters.v1"
    #: What it reads (:mod:`prb_utils.models.rendered` shows :meth:`input_texts` under these names, with this note).
    input_labels = ("chosen", "rejected")
    reads = "no model: each response's length in characters"

    def input_texts(self, user: str, pair: PairInput) -> list[str]:
        """The texts it measures: the two responses (the user message plays no part)."""
        return [pair.chosen, pair.rejected]

    def score_pairs(self, pairs: Sequence[PairInput]) -> list[PairScore]:
        scores = []
        for p in pairs:
            chosen, rejected = self.input_texts(p.prompt, p)
            scores.append(PairScore(float(len(chosen)), float(len(rejected)), None,
                                    {"n_words_chosen": len(chosen.split()), "n_words_rejected": len(rejected.split()),
                                     "truncated": False}))
        return scores

    def run_metadata(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind, "unit": "characters", "device": "none", "dtype": "none"}


class LexicalBaseline:
    spec = "lexical"
    kind = "lexical"
    #: v2: prb's wrapper words and community tags are no longer counted as the user's words.
    method = "lexical:user-words.v2"
    #: What it reads (:mod:`prb_utils.models.rendered` shows :meth:`input_texts` under these names, with this note).
    input_labels = ("the user's words", "chosen", "rejected")
    reads = "no model: the share of the user's content words each response uses"

    def input_texts(self, user: str, pair: PairInput) -> list[str]:
        """The texts it compares: the user's words in the RM input (:func:`prb_utils.profile.user_text`) and the
        two responses."""
        return [user_text(user), pair.chosen, pair.rejected]

    def score_pairs(self, pairs: Sequence[PairInput]) -> list[PairScore]:
        scores = []
        for p in pairs:
            users, *responses = self.input_texts(p.prompt, p)
            words = set(tokenize(users))
            values = [len(words & set(tokenize(r))) / len(words) if words else 0.0 for r in responses]
            scores.append(PairScore(values[0], values[1], None, {"n_prompt_words": len(words), "truncated": False}))
        return scores

    def run_metadata(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind,
                "measure": "share of the user's content words (question, shown posts) in the response",
                "device": "none", "dtype": "none"}
