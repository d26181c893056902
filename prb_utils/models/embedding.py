"""``embedding:`` cosine similarity between the RM input (question, with the profile block when the condition
has one) and the response, each embedded by mean pooling of the encoder's last hidden states.

Texts are plain (no chat template) with the tokenizer's special tokens, whatever ``tokenization`` says.
A missing pooler is fine (it is not used); any other newly initialised weight is refused unless
``allow_untrained_head``. Over-long texts are cut to the model's maximum as the tokenizer cuts them: the RM input
from the left (old profile posts go first, the question stays), the response from the right. An RM input far over
the maximum by its characters (a full profile: thousands of tokens for MiniLM's 256) has only its tail tokenized,
with the same ids (checked against the whole text's cut). Every distinct text is embedded once (prompts repeat
across a pair and across pairs), in length-sorted batches that keep short answers apart from long RM inputs
(:data:`MAX_PADDING`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from prb_utils.models.base import ModelSpec, PairInput, PairScore, spec_of
from prb_utils.models.batching import BudgetBatcher, pad_right
from prb_utils.models.hf import (
    FIT_CHECK_EVERY,
    FIT_CHECKS,
    TAIL_CHARS_PER_TOKEN,
    TAIL_MARGIN,
    TAIL_START,
    HFAdapter,
    nonfinite_reason,
    special_token_ids,
)
from prb_utils.models.kinds import ENCODER
from prb_utils.schema import ATTENTIONS

#: The role of each of :meth:`EmbeddingRM.input_texts`, and the side of a role's text kept when it is too long
#: (the RM input loses its start: old posts go first, the question stays; a response loses its end).
ROLES = ("prompt", "response", "response")
KEEP = {"prompt": "left", "response": "right"}
#: The most of a batch row that padding may fill: texts much shorter than a batch's longest (answers beside
#: profile-long RM inputs cut to the model's maximum) go in a batch of their own instead of being padded to it.
MAX_PADDING = 0.2


@dataclass
class _Prepared:
    """A chunk's host work: its pairs and the token ids of each distinct text, with whether it was cut."""

    pairs: list[PairInput]
    texts: dict[tuple[str, str], tuple[list[int], bool]]

    def __len__(self) -> int:
        return len(self.pairs)


class EmbeddingRM(HFAdapter):
    kind = "embedding"
    unused_weights = ("pooler.",)

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto",
                 batch_tokens: int | None = None, seed: int = 0, allow_untrained_head: bool = False,
                 attention: str = ATTENTIONS[0]) -> None:
        from transformers import AutoModel

        super().__init__(spec, device=device, dtype=dtype, batch_tokens=batch_tokens, seed=seed,
                         allow_untrained_head=allow_untrained_head, attention=attention)
        self._load(AutoModel.from_pretrained)
        self.batcher = BudgetBatcher(self.batch_tokens, max_padding=MAX_PADDING)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.tokens_computed = 0

    @property
    def min_chunk(self) -> int:
        """The fewest pairs the scorer puts in a chunk: those whose RM inputs, cut to the model's maximum, fill one
        batch (a chunk of fewer runs smaller batches)."""
        return max(1, self.batch_tokens // max(1, self.max_length))

    def _encode(self, text: str, *, keep: str) -> tuple[list[int], bool]:
        return self._encode_many([text], keep=keep)[0]

    def _encode_many(self, texts: Sequence[str], *, keep: str) -> list[tuple[list[int], bool]]:
        """Token ids of each text (the tokenizer's special tokens) and whether it was cut to the model's
        maximum, keeping its ``keep`` side: a text kept from its end and far too long by its characters alone
        has only its tail tokenized (:meth:`_tails`); the others go in one batch call, and those too long in
        one more, cut."""
        found: dict[int, tuple[list[int], bool]] = {}
        if keep == "left":
            found.update((j, (ids, True)) for j, ids in self._tails(texts).items())
        rest = [j for j in range(len(texts)) if j not in found]
        whole = self.tokenizer([texts[j] for j in rest], add_special_tokens=True)["input_ids"] if rest else []
        long = [j for j, ids in zip(rest, whole, strict=True) if len(ids) > self.max_length]
        found.update((j, (list(ids), False)) for j, ids in zip(rest, whole, strict=True))
        found.update((j, (ids, True)) for j, ids in zip(long, self._cut([texts[j] for j in long], keep=keep),
                                                        strict=True))
        return [found[j] for j in range(len(texts))]

    def _cut(self, texts: Sequence[str], *, keep: str) -> list[list[int]]:
        """Token ids of each text cut by the tokenizer to the model's maximum, keeping its ``keep`` side."""
        if not texts:
            return []
        side, self.tokenizer.truncation_side = self.tokenizer.truncation_side, keep
        try:
            cut = self.tokenizer(list(texts), add_special_tokens=True, truncation=True,
                                 max_length=self.max_length)["input_ids"]
        finally:
            self.tokenizer.truncation_side = side
        return [list(ids) for ids in cut]

    def _tails(self, texts: Sequence[str]) -> dict[int, list[int]]:
        """``{index: ids}`` of the texts too long by their characters alone, cut from the left to the model's
        maximum as :meth:`_cut` cuts them, tokenizing only a tail that holds more tokens than fit, from a space
        before a word (where tokenizers start a piece, so the tail's tokens are the whole text's last ones). A
        tail with too few tokens is left out (the caller tokenizes that text whole) and the next tails are
        longer. The first tail of a call is checked against :meth:`_cut` (in the first :data:`FIT_CHECKS`
        calls, then one call in :data:`FIT_CHECK_EVERY`); on a difference the adapter stops using tails."""
        if self._specials is None:
            self._specials = special_token_ids(self.tokenizer)
        prefix, suffix = self._specials
        room = self.max_length - len(prefix) - len(suffix)
        tail_chars = int((self.max_length + TAIL_MARGIN) * self._chars_per_token)
        starts = {}
        for j, text in enumerate(texts):
            found = TAIL_START.search(text, len(text) - tail_chars) if len(text) > tail_chars else None
            if found is not None and found.start() > 0:
                starts[j] = found.start()
        if not starts or room < 1 or not self._fits_tails:
            return {}
        tails = self.tokenizer([texts[j][start:] for j, start in starts.items()], add_special_tokens=False)["input_ids"]
        kept = {j: prefix + list(ids[-room:]) + suffix for j, ids in zip(starts, tails, strict=True) if len(ids) > room}
        seen = max((len(texts[j]) - start) / max(1, len(ids)) for (j, start), ids in zip(starts.items(), tails,
                                                                                           strict=True))
        self._chars_per_token = min(4 * TAIL_CHARS_PER_TOKEN, max(1.0, 1.2 * seen) * (1.5 if len(kept) < len(starts)
                                                                                      else 1))
        self.fit_counts["calls"] += 1
        checked = next(iter(kept), None)
        if checked is not None and (self.fit_counts["checked"] < FIT_CHECKS
                                    or self.fit_counts["calls"] % FIT_CHECK_EVERY == 0):
            self.fit_counts["checked"] += 1
            if self._cut([texts[checked]], keep="left")[0] != kept[checked]:
                self._fits_tails = False   # this tokenizer's tail tokens differ from the whole text's
                return {}
        self.fit_counts["tail"] += len(kept)
        return kept

    #: What each of :meth:`input_texts` is (:mod:`prb_utils.models.rendered` shows them under these names).
    input_labels = ("RM input", "chosen", "rejected")

    def input_texts(self, user: str, pair: PairInput) -> list[str]:
        """The texts this RM embeds for ``pair`` with the user message ``user``: the RM input (plain, no chat
        template) and each response."""
        return [user, pair.chosen, pair.rejected]

    def _prepare(self, pairs: Sequence[PairInput]) -> _Prepared:
        """Host work of a chunk: each distinct text's token ids (prompts and responses repeat across a pair
        and across pairs), tokenized in the preparing thread while the device embeds the chunk before."""
        keys = list(dict.fromkeys(key for p in pairs for key in zip(ROLES, self.input_texts(p.prompt, p), strict=True)))
        found = {}
        for role, keep in KEEP.items():
            mine = [k for k in keys if k[0] == role]
            found.update(zip(mine, self._encode_many([text for _, text in mine], keep=keep), strict=True))
        return _Prepared(list(pairs), {k: found[k] for k in keys})

    def run(self, prepared: _Prepared | Sequence[PairInput]) -> list[PairScore]:
        import torch

        if not isinstance(prepared, _Prepared):
            prepared = self.prepare(prepared)
        pairs, texts = prepared.pairs, prepared.texts
        keys = list(texts)
        vectors = self.batcher.map(self._embed_batch, [texts[k][0] for k in keys], [len(texts[k][0]) for k in keys])
        found = dict(zip(keys, vectors, strict=True))
        scores = []
        with torch.inference_mode():
            for p in pairs:
                q = found[("prompt", p.prompt)]
                sims = [float(torch.nn.functional.cosine_similarity(q, found[("response", r)], dim=0))
                        for r in (p.chosen, p.rejected)]
                truncated = any(texts[k][1] for k in (("prompt", p.prompt), ("response", p.chosen),
                                                      ("response", p.rejected)))
                self.n_truncated += int(truncated)
                n_tokens = sum(len(texts[k][0]) for k in (("prompt", p.prompt), ("response", p.chosen),
                                                          ("response", p.rejected)))
                scores.append(PairScore(sims[0], sims[1], nonfinite_reason(*sims), {"truncated": truncated, "n_tokens": n_tokens}))
        self.n_pairs += len(pairs)
        return scores

    def _embed_batch(self, seqs: list[list[int]]) -> list[Any]:
        import torch

        ids, mask = pad_right(seqs, self.pad_id)
        self.tokens_computed += int(mask.sum())
        device = self.model.device
        with torch.inference_mode():
            states = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state.float()
            m = mask.to(states.device, states.dtype)[:, :, None]
            pooled = (states * m).sum(1) / m.sum(1).clamp(min=1)
        return list(pooled.cpu())

    def run_metadata(self) -> dict[str, Any]:
        return {**super().run_metadata(), "tokenization": "plain", "special_tokens": "always", "pooling": "mean", "oom_halvings": self.batcher.oom_halvings,
                "tokens_computed": self.tokens_computed}


def load_encoder(name: str, *, device: str = "auto", dtype: str = "auto",
                 batch_tokens: int | None = None) -> Callable[[Sequence[str]], Any]:
    """A function mapping texts to L2-normalized mean-pooled embeddings (numpy, one row per text), so that a
    dot product is the cosine similarity. ``name``: alias, folder or hub id, as in ``embedding:NAME``.

    Used by the dense profile retriever (``--retriever dense:minilm``).
    """


    rm = EmbeddingRM(spec_of(ENCODER, name), device=device, dtype=dtype, batch_tokens=batch_tokens)

    def embed(texts: Sequence[str]) -> Any:
        import torch

        with rm.tokenizer_lock:
            ids = [found for found, _ in rm._encode_many(list(texts), keep="right")]
        if not ids:
            return np.zeros((0, 0), dtype=np.float32)
        vectors = rm.batcher.map(rm._embed_batch, ids, [len(i) for i in ids])
        stacked = torch.nn.functional.normalize(torch.stack(vectors), dim=-1)
        return stacked.numpy().astype(np.float32)

    return embed
