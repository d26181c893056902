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

from prb_utils.models.base import PairInput, PairScore
from prb_utils.profile import tokenize, user_text


class LengthBaseline:
    spec = "length"
    kind = "length"
    #: What the score measures, versioned: it is the model fingerprint, so a new method rescores old stores.
    method = "length:characters.v1"

    def score_pairs(self, pairs: Sequence[PairInput]) -> list[PairScore]:
        return [PairScore(float(len(p.chosen)), float(len(p.rejected)), None,
                          {"n_words_chosen": len(p.chosen.split()), "n_words_rejected": len(p.rejected.split()),
                           "truncated": False})
                for p in pairs]

    def run_metadata(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind, "unit": "characters", "device": "none", "dtype": "none"}


class LexicalBaseline:
    spec = "lexical"
    kind = "lexical"
    #: v2: prb's wrapper words and community tags are no longer counted as the user's words.
    method = "lexical:user-words.v2"

    def score_pairs(self, pairs: Sequence[PairInput]) -> list[PairScore]:
        scores = []
        for p in pairs:
            words = set(tokenize(user_text(p.prompt)))
            values = [len(words & set(tokenize(r))) / len(words) if words else 0.0 for r in (p.chosen, p.rejected)]
            scores.append(PairScore(values[0], values[1], None, {"n_prompt_words": len(words), "truncated": False}))
        return scores

    def run_metadata(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind,
                "measure": "share of the user's content words (question, shown posts) in the response",
                "device": "none", "dtype": "none"}
