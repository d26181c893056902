"""``embedding:`` cosine similarity between the RM input (question, with the profile block when the condition
has one) and the response, each embedded by mean pooling of the encoder's last hidden states.

Texts are plain (no chat template) with the tokenizer's special tokens, whatever ``tokenization`` says.
A missing pooler is fine (it is not used); any other newly initialised weight is refused unless
``allow_untrained_head``. Over-long texts are cut to the
model's maximum: the RM input from the left (old profile posts go first, the question stays), the response
from the right. Every distinct text is embedded once (prompts repeat across a pair and across pairs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from prb_utils.models.base import ModelSpec, PairInput, PairScore, spec_of
from prb_utils.models.batching import BudgetBatcher, pad_right
from prb_utils.models.hf import HFAdapter, nonfinite_reason
from prb_utils.models.kinds import ENCODER

#: The role of each of :meth:`EmbeddingRM.input_texts`, and the side of a role's text kept when it is too long
#: (the RM input loses its start: old posts go first, the question stays; a response loses its end).
ROLES = ("prompt", "response", "response")
KEEP = {"prompt": "left", "response": "right"}


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
                 batch_tokens: int | None = None, seed: int = 0, allow_untrained_head: bool = False) -> None:
        from transformers import AutoModel

        super().__init__(spec, device=device, dtype=dtype, batch_tokens=batch_tokens, seed=seed,
                         allow_untrained_head=allow_untrained_head)
        self._load(AutoModel.from_pretrained)
        self.batcher = BudgetBatcher(self.batch_tokens)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.tokens_computed = 0

    def _encode(self, text: str, *, keep: str) -> tuple[list[int], bool]:
        return self._encode_many([text], keep=keep)[0]

    def _encode_many(self, texts: Sequence[str], *, keep: str) -> list[tuple[list[int], bool]]:
        """Token ids of each text (the tokenizer's special tokens) and whether it was cut to the model's
        maximum, keeping its ``keep`` side: one batch call, and one more for the texts too long."""
        if not texts:
            return []
        found = [list(ids) for ids in self.tokenizer(list(texts), add_special_tokens=True)["input_ids"]]
        long = [j for j, ids in enumerate(found) if len(ids) > self.max_length]
        if long:
            side, self.tokenizer.truncation_side = self.tokenizer.truncation_side, keep
            try:
                cut = self.tokenizer([texts[j] for j in long], add_special_tokens=True, truncation=True,
                                     max_length=self.max_length)["input_ids"]
            finally:
                self.tokenizer.truncation_side = side
            for j, ids in zip(long, cut, strict=True):
                found[j] = list(ids)
        cut_at = set(long)
        return [(ids, j in cut_at) for j, ids in enumerate(found)]

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
