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
from typing import Any

import numpy as np

from prb_utils.models.base import ModelSpec, PairInput, PairScore, parse_spec
from prb_utils.models.batching import BudgetBatcher, pad_right
from prb_utils.models.hf import HFAdapter, nonfinite_reason


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
        ids = list(self.tokenizer(text, add_special_tokens=True)["input_ids"])
        if len(ids) <= self.max_length:
            return ids, False
        self.tokenizer.truncation_side = keep
        cut = list(self.tokenizer(text, add_special_tokens=True, truncation=True,
                                  max_length=self.max_length)["input_ids"])
        self.tokenizer.truncation_side = "right"
        return cut, True

    def _prepare(self, pairs: Sequence[PairInput]) -> list[PairInput]:
        return list(pairs)   # an encoder's inputs are cheap: they are tokenized and embedded in run

    def run(self, pairs: Sequence[PairInput]) -> list[PairScore]:
        import torch

        texts: dict[tuple[str, str], tuple[list[int], bool]] = {}
        for p in pairs:
            key = ("prompt", p.prompt)
            if key not in texts:
                texts[key] = self._encode(p.prompt, keep="left")
            for r in (p.chosen, p.rejected):
                if ("response", r) not in texts:
                    texts[("response", r)] = self._encode(r, keep="right")
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


    rm = EmbeddingRM(parse_spec(f"embedding:{name}"), device=device, dtype=dtype, batch_tokens=batch_tokens)

    def embed(texts: Sequence[str]) -> Any:
        import torch

        ids = [rm._encode(t, keep="right")[0] for t in texts]
        if not ids:
            return np.zeros((0, 0), dtype=np.float32)
        vectors = rm.batcher.map(rm._embed_batch, ids, [len(i) for i in ids])
        stacked = torch.nn.functional.normalize(torch.stack(vectors), dim=-1)
        return stacked.numpy().astype(np.float32)

    return embed
