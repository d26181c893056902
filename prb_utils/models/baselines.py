"""``length`` and ``lexical``: baselines without a model.

``length``: the score is the response's length in characters (the longer response wins).
``lexical``: the share of the RM input's distinct content words (lower-cased, stop words removed, the
same tokenizer as profile retrieval) that the response uses; with a profile block, words of the user's
earlier posts count too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prb_utils.models.base import PairInput, PairScore


class LengthBaseline:
    spec = "length"
    kind = "length"

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

    def score_pairs(self, pairs: Sequence[PairInput]) -> list[PairScore]:
        from prb_utils.profile import tokenize

        scores = []
        for p in pairs:
            words = set(tokenize(p.prompt))
            values = [len(words & set(tokenize(r))) / len(words) if words else 0.0 for r in (p.chosen, p.rejected)]
            scores.append(PairScore(values[0], values[1], None, {"n_prompt_words": len(words), "truncated": False}))
        return scores

    def run_metadata(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind, "measure": "share of RM-input content words in the response",
                "device": "none", "dtype": "none"}
