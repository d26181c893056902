"""``classifier:`` sequence-classification reward models, pointwise.

Input: the chat ``[user: prompt, assistant: response]`` (see :mod:`prb_utils.models.prompts`). Score: the single
logit, or the softmax probability of the last class when the head has several (the benchmark's reference
scoring). Decoder classifiers (a ``score`` head on the last token, e.g. Skywork-Reward, Llama/Qwen
``ForSequenceClassification``) run chosen and rejected on a shared prompt cache; encoders run plainly.
Special tokens follow ``tokenization`` (:mod:`prb_utils.models.prompts`): ``auto`` gives an encoder with a chat
template its ``[CLS] ... [SEP]`` and a Llama-3 template one BOS; ``reference`` always adds the tokenizer's
tokens, as the reference pointwise script does. A checkpoint without a trained classification head (a causal
LM, a bare encoder) is refused unless ``allow_untrained_head`` (the ``minilm`` alias allows it: speed only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prb_utils.models.base import ModelSpec, PairInput, PairScore
from prb_utils.models.batching import BudgetBatcher, pad_right
from prb_utils.models.hf import HFAdapter, fit_user_message, nonfinite_reason
from prb_utils.models.lm import DecoderRunner, Group
from prb_utils.models.prompts import render_chat


def head_score(logits: Any) -> list[float]:
    """One score per row: the logit when there is one, else the softmax probability of the last class."""
    import torch

    logits = logits.float()
    if logits.shape[-1] == 1:
        return logits[:, 0].tolist()
    return torch.softmax(logits, dim=-1)[:, -1].tolist()


class ClassifierRM(HFAdapter):
    kind = "classifier"

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto",
                 batch_tokens: int | None = None, seed: int = 0, kv_reuse: bool = True,
                 tokenization: str = "auto", allow_untrained_head: bool = False) -> None:
        from transformers import AutoModelForSequenceClassification

        minilm = spec.name == "minilm"  # an encoder without a head: a seeded, untrained one-logit head
        super().__init__(spec, device=device, dtype=dtype, batch_tokens=batch_tokens, seed=seed,
                         tokenization=tokenization, allow_untrained_head=allow_untrained_head or minilm)
        extra: dict[str, Any] = {"num_labels": 1} if minilm else {}
        self._load(AutoModelForSequenceClassification.from_pretrained, **extra)
        if self.model.config.pad_token_id is None and self.tokenizer.pad_token_id is not None:
            self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.batcher = BudgetBatcher(self.batch_tokens)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        head = getattr(self.model, "score", None)
        self.decoder_head = head is not None and not getattr(self.model.config, "is_encoder_decoder", False)
        self.kv_reuse = kv_reuse and self.decoder_head
        self.runner = DecoderRunner(self.model, pad_id=self.pad_id, batcher=self.batcher, kv_reuse=self.kv_reuse)
        self.tokens_computed = 0

    def _sequences(self, pair: PairInput) -> tuple[list[list[int]], bool]:
        def build(user: str) -> list[list[int]]:
            return [self.encode(render_chat(self.tokenizer, user, r)) for r in (pair.chosen, pair.rejected)]

        user, truncated = fit_user_message(self.tokenizer, pair.prompt, lambda u: max(map(len, build(u))),
                                           self.max_length)
        seqs = build(user)
        if any(len(s) > self.max_length for s in seqs):
            seqs = [s[: self.max_length] for s in seqs]
            truncated = True
        return seqs, truncated

    def score_pairs(self, pairs: Sequence[PairInput]) -> list[PairScore]:
        prepared = [self._sequences(p) for p in pairs]
        if self.decoder_head:
            values = self._decoder_scores([s for s, _ in prepared])
        else:
            flat = [s for seqs, _ in prepared for s in seqs]
            out = self.batcher.map(self._encoder_batch, flat, [len(s) for s in flat])
            values = [(out[2 * i], out[2 * i + 1]) for i in range(len(prepared))]
        scores = []
        for (seqs, truncated), (chosen, rejected) in zip(prepared, values, strict=True):
            self.n_truncated += int(truncated)
            scores.append(PairScore(chosen, rejected, nonfinite_reason(chosen, rejected),
                                    {"truncated": truncated, "n_tokens": sum(len(s) for s in seqs)}))
        self.n_pairs += len(pairs)
        return scores

    def _decoder_scores(self, seqs: list[list[list[int]]]) -> list[tuple[float, float]]:
        groups = [Group(tuple(map(tuple, s)), tuple(len(x) - 1 for x in s)) for s in seqs]
        return self.runner.hidden(groups, reduce=self._head)

    def _head(self, group: Group, hidden: list[Any]) -> tuple[float, float]:
        import torch

        last = torch.stack([h[-1] for h in hidden])
        values = head_score(self.model.score(last.to(self.model.score.weight.dtype)))
        return values[0], values[1]

    def _encoder_batch(self, seqs: list[list[int]]) -> list[float]:
        import torch

        ids, mask = pad_right(seqs, self.pad_id)
        self.tokens_computed += int(mask.sum())
        device = self.model.device
        with torch.inference_mode():
            logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
        return head_score(logits)

    def run_metadata(self) -> dict[str, Any]:
        return {**super().run_metadata(), "kv_reuse": self.kv_reuse, "num_labels": self.model.config.num_labels,
                "oom_halvings": self.batcher.oom_halvings,
                "tokens_computed": self.tokens_computed + self.runner.tokens_computed}
