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
from dataclasses import dataclass
from typing import Any

from prb_utils.models.base import ModelSpec, PairInput, PairScore
from prb_utils.models.batching import BudgetBatcher, pad_right
from prb_utils.models.hf import HFAdapter, fitted, nonfinite_reason
from prb_utils.models.lm import DecoderRunner, Group
from prb_utils.models.prompts import render_chat
from prb_utils.schema import ATTENTIONS


def head_values(logits: Any) -> Any:
    """One score per row, as a float32 tensor where the logits are: the logit when there is one, else the
    softmax probability of the last class."""
    import torch

    logits = logits.float()
    if logits.shape[-1] == 1:
        return logits[:, 0]
    return torch.softmax(logits, dim=-1)[:, -1]


def head_score(logits: Any) -> list[float]:
    """:func:`head_values` as Python floats."""
    return head_values(logits).tolist()


def float32_head(head: Any, hidden: Any) -> Any:
    """The classification head applied in float32, whatever the model's dtype: in bfloat16 two close logits
    round to one value (a false tie), so the final hidden states and the head's weights are promoted first.

    >>> import torch
    >>> head = torch.nn.Linear(2, 1, bias=False, dtype=torch.bfloat16)
    >>> _ = head.weight.data.fill_(1)
    >>> hidden = torch.tensor([[256.0, 1.0], [256.0, 0.0]], dtype=torch.bfloat16)
    >>> head(hidden)[:, 0].tolist(), float32_head(head, hidden)[:, 0].tolist()
    ([256.0, 256.0], [257.0, 256.0])
    """
    import torch

    bias = getattr(head, "bias", None)
    return torch.nn.functional.linear(hidden.float(), head.weight.float(), None if bias is None else bias.float())


@dataclass
class _Prepared:
    """A chunk's host work: token ids and truncation per pair, and the decoder's batch plan."""

    sequences: list[tuple[list[list[int]], bool]]
    plan: Any = None


class ClassifierRM(HFAdapter):
    kind = "classifier"

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto",
                 batch_tokens: int | None = None, seed: int = 0, kv_reuse: bool = True,
                 tokenization: str = "auto", allow_untrained_head: bool = False,
                 attention: str = ATTENTIONS[0]) -> None:
        from transformers import AutoModelForSequenceClassification

        minilm = spec.name == "minilm"  # an encoder without a head: a seeded, untrained one-logit head
        super().__init__(spec, device=device, dtype=dtype, batch_tokens=batch_tokens, seed=seed,
                         tokenization=tokenization, allow_untrained_head=allow_untrained_head or minilm,
                         attention=attention)
        extra: dict[str, Any] = {"num_labels": 1} if minilm else {}
        self._load(AutoModelForSequenceClassification.from_pretrained, **extra)
        if self.model.config.pad_token_id is None and self.tokenizer.pad_token_id is not None:
            self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.batcher = BudgetBatcher(self.batch_tokens)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        head = getattr(self.model, "score", None)
        self.decoder_head = head is not None and not getattr(self.model.config, "is_encoder_decoder", False)
        self.kv_reuse = kv_reuse and self.decoder_head
        self.runner = DecoderRunner(self.model, pad_id=self.pad_id, batcher=self.batcher, kv_reuse=self.kv_reuse,
                                    calibrate=None if self.decoder_head else False)
        self.tokens_computed = 0

    #: What each of :meth:`input_texts` is (:mod:`prb_utils.models.rendered` shows them under these names).
    input_labels = ("chosen", "rejected")

    def input_texts(self, user: str, pair: PairInput) -> list[str]:
        """The texts this RM tokenizes for ``pair`` with the user message ``user``: chosen's and rejected's
        chats (the one place they are built: scoring and :mod:`prb_utils.models.rendered` both call it)."""
        return [render_chat(self.tokenizer, user, r) for r in (pair.chosen, pair.rejected)]

    def _fitted(self, pair: PairInput) -> tuple[str, list[list[int]], bool]:
        """``(user message kept, token ids, truncated)`` of one pair, the user message cut from the left to fit."""
        return fitted(self.tokenizer, pair.prompt, lambda user: self.encode_many(self.input_texts(user, pair)),
                      lambda s: max(map(len, s)), self.max_length)

    def _sequences(self, pair: PairInput) -> tuple[list[list[int]], bool]:
        """One pair's token ids, fitted to the model's length (the user message cut from the left): the
        reference that :meth:`_sequences_many` gives the same ids as."""
        _, seqs, truncated = self._fitted(pair)
        return self._cut(seqs, truncated)

    def _cut(self, seqs: list[list[int]], truncated: bool) -> tuple[list[list[int]], bool]:
        """The answers alone too long: their ends are cut."""
        if any(len(s) > self.max_length for s in seqs):
            return [s[: self.max_length] for s in seqs], True
        return seqs, truncated

    def _build_many(self, users: Sequence[str], pairs: Sequence[PairInput]) -> list[list[list[int]]]:
        """Chosen's and rejected's token ids after each user message, in one batch call of the tokenizer (the
        prompt they share tokenized once where :meth:`encode_after` allows)."""
        texts = [self.input_texts(u, p) for u, p in zip(users, pairs, strict=True)]
        shared = self.encode_after([render_chat(self.tokenizer, u) for u in users], texts)
        ids = [s for group in shared for s in group] if shared is not None else \
            self.encode_many([text for group in texts for text in group])
        return [ids[2 * i : 2 * i + 2] for i in range(len(users))]

    def _sequences_many(self, pairs: Sequence[PairInput]) -> list[tuple[list[list[int]], bool]]:
        """:meth:`_sequences` of every pair: one batch call of the tokenizer for all, and the long pairs fitted
        from their own tokens (:meth:`~prb_utils.models.hf.HFAdapter._fit_many`)."""
        found = self._fit_many(pairs, self.max_length, self._build_many, lambda s: max(map(len, s)))
        return [self._cut(seqs, truncated) for seqs, truncated in found]

    def _prepare(self, pairs: Sequence[PairInput]) -> _Prepared:
        """Host work of a chunk: token ids of every pair and, for a decoder, the batch plan."""
        sequences = self._sequences_many(pairs)
        return _Prepared(sequences, self._plan([s for s, _ in sequences]))

    def _plan(self, seqs: list[list[list[int]]]) -> Any:
        if not self.decoder_head:
            return None
        return self.runner.prepare([Group(tuple(s), tuple(len(x) - 1 for x in s)) for s in seqs])

    def run(self, prepared: _Prepared) -> list[PairScore]:
        if self.decoder_head:
            values = self.runner.hidden(prepared.plan, reduce=self._head, gather=True)
        else:
            flat = [s for seqs, _ in prepared.sequences for s in seqs]
            out = self.batcher.map(self._encoder_batch, flat, [len(s) for s in flat])
            values = [(out[2 * i], out[2 * i + 1]) for i in range(len(prepared.sequences))]
        scores = []
        for (seqs, truncated), (chosen, rejected) in zip(prepared.sequences, values, strict=True):
            self.n_truncated += int(truncated)
            scores.append(PairScore(chosen, rejected, nonfinite_reason(chosen, rejected),
                                    {"truncated": truncated, "n_tokens": sum(len(s) for s in seqs)}))
        self.n_pairs += len(prepared.sequences)
        return scores

    def _head(self, group: Group, hidden: list[Any]) -> Any:
        """The group's two scores, as a tensor left on the device (the runner gathers them once per call)."""
        import torch

        return head_values(float32_head(self.model.score, torch.stack([h[-1] for h in hidden])))

    def _encoder_batch(self, seqs: list[list[int]]) -> list[float]:
        import torch

        ids, mask = pad_right(seqs, self.pad_id)
        self.tokens_computed += int(mask.sum())
        device = self.model.device
        with torch.inference_mode():
            logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
        return head_score(logits)

    def run_metadata(self) -> dict[str, Any]:
        return {**super().run_metadata(), "kv_reuse": self.runner.kv_reuse,
                "calibration": self.runner.calibration_record(),
                "num_labels": self.model.config.num_labels,
                "oom_halvings": self.batcher.oom_halvings,
                "tokens_computed": self.tokens_computed + self.runner.tokens_computed}
