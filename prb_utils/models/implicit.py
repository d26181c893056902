"""``implicit:`` a causal LM's mean token log-probability of the response given the chat prompt."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prb_utils.models.base import ModelSpec, PairInput, PairScore
from prb_utils.models.batching import BudgetBatcher
from prb_utils.models.hf import HFAdapter, fitted, nonfinite_reason
from prb_utils.models.lm import DecoderRunner, Group, token_logprobs
from prb_utils.models.prompts import render_chat
from prb_utils.schema import ATTENTIONS


@dataclass
class _Prepared:
    """A chunk's host work: per pair the token ids, first response tokens and truncation; the batch plan."""

    sequences: list[tuple[list[list[int]], list[int], bool]]
    plan: Any = None


class ImplicitRM(HFAdapter):
    """Score = mean log p(response token | chat prompt, earlier response tokens).

    The prompt is the chat rendered up to the assistant's turn; the response tokens are those of the
    assistant message (template tokens after it, such as an end-of-turn marker, are not scored). Chosen and
    rejected share the prompt's KV cache (``kv_reuse``). The prompt gets the tokenizer's leading special
    tokens per ``tokenization`` (never its trailing ones: the response follows).
    """

    kind = "implicit"

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto",
                 batch_tokens: int | None = None, seed: int = 0, kv_reuse: bool = True,
                 tokenization: str = "auto", allow_untrained_head: bool = False,
                 attention: str = ATTENTIONS[0]) -> None:
        from transformers import AutoModelForCausalLM

        super().__init__(spec, device=device, dtype=dtype, batch_tokens=batch_tokens, seed=seed,
                         tokenization=tokenization, allow_untrained_head=allow_untrained_head, attention=attention)
        self._load(AutoModelForCausalLM.from_pretrained)
        self.kv_reuse = kv_reuse
        self.batcher = BudgetBatcher(self.batch_tokens)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.runner = DecoderRunner(self.model, pad_id=pad, batcher=self.batcher, kv_reuse=kv_reuse)

    # ------------------------------------------------------------------ tokens

    def _response_span(self, user: str, prompt_text: str, response: str) -> tuple[str, int]:
        """The text after the prompt up to the response's end, and where the response starts in it."""
        full = render_chat(self.tokenizer, user, response)
        suffix = full[len(prompt_text):] if full.startswith(prompt_text) else response
        body = response.strip() or response
        start = suffix.find(body)
        if start < 0:
            return suffix, 0
        return suffix[: start + len(body)], start

    def _response_ids_many(self, spans: Sequence[tuple[str, int]]) -> list[tuple[list[int], int]]:
        """Per span (:meth:`_response_span`), its token ids and the index of the first response token, in one
        batch call of the tokenizer."""
        if not spans:
            return []
        enc = self.tokenizer([text for text, _ in spans], add_special_tokens=False, return_offsets_mapping=True)
        out = []
        for (_, start), ids, offsets in zip(spans, enc["input_ids"], enc["offset_mapping"], strict=True):
            first = next((i for i, (_, e) in enumerate(offsets) if e > start), len(ids))
            out.append((list(ids), first))
        return out

    def _response_ids(self, user: str, prompt_text: str, response: str) -> tuple[list[int], int]:
        """Tokens after the prompt up to the response's end, and the index of the first response token."""
        return self._response_ids_many([self._response_span(user, prompt_text, response)])[0]

    #: What each of :meth:`input_texts` is (:mod:`prb_utils.models.rendered` shows them under these names).
    input_labels = ("chosen", "rejected")

    def _parts(self, user: str, pair: PairInput) -> tuple[str, list[tuple[str, int]]]:
        """The chat prompt for ``user`` and, per response (chosen, rejected), its span after the prompt
        (:meth:`_response_span`): the one place this RM's inputs are built."""
        prompt = render_chat(self.tokenizer, user)
        return prompt, [self._response_span(user, prompt, r) for r in (pair.chosen, pair.rejected)]

    def input_texts(self, user: str, pair: PairInput) -> list[str]:
        """The texts this RM reads for ``pair`` with the user message ``user``: the chat prompt followed by each
        response up to its end (the prompt and the span are tokenized apart, as :meth:`_build_many` does)."""
        prompt, spans = self._parts(user, pair)
        return [prompt + text for text, _ in spans]

    def _build_many(self, users: Sequence[str], pairs: Sequence[PairInput]) -> list[tuple[list[list[int]], list[int]]]:
        """Token ids of chosen and rejected after each user message, and the first response token of each."""
        parts = [self._parts(user, p) for user, p in zip(users, pairs, strict=True)]
        prompts = [prompt for prompt, _ in parts]
        prompt_ids = self.encode_many(prompts, continued=True)
        spans = [span for _, two in parts for span in two]
        responses = self._response_ids_many(spans)
        out = []
        for i, ids in enumerate(prompt_ids):
            (a, first_a), (b, first_b) = responses[2 * i], responses[2 * i + 1]
            out.append(([ids + a, ids + b], [len(ids) + first_a, len(ids) + first_b]))
        return out

    def _sequences(self, pair: PairInput) -> tuple[list[list[int]], list[int], bool]:
        """One pair's token ids and first response tokens, fitted to the model's length: the reference that
        :meth:`_sequences_many` gives the same ids as."""
        _, (seqs, firsts), truncated = self._fitted(pair)
        return self._cut(seqs, firsts, truncated)

    def _fitted(self, pair: PairInput) -> tuple[str, tuple[list[list[int]], list[int]], bool]:
        """``(user message kept, (token ids, first response tokens), truncated)`` of one pair, the user message
        cut from the left to fit."""
        return fitted(self.tokenizer, pair.prompt, lambda u: self._build_many([u], [pair])[0],
                      lambda built: max(map(len, built[0])), self.max_length)

    def _cut(self, seqs: list[list[int]], firsts: list[int], truncated: bool) -> tuple[list[list[int]], list[int], bool]:
        if any(len(s) > self.max_length for s in seqs):  # the responses alone are too long: cut their ends
            return [s[: self.max_length] for s in seqs], firsts, True
        return seqs, firsts, truncated

    def _sequences_many(self, pairs: Sequence[PairInput]) -> list[tuple[list[list[int]], list[int], bool]]:
        """:meth:`_sequences` of every pair, tokenized in batch calls; the long pairs fitted from their own
        tokens (:meth:`~prb_utils.models.hf.HFAdapter._fit_many`)."""
        found = self._fit_many(pairs, self.max_length, self._build_many, lambda built: max(map(len, built[0])))
        return [self._cut(seqs, firsts, truncated) for (seqs, firsts), truncated in found]

    # ------------------------------------------------------------------ scoring

    def _mean_logprobs(self, group: Group, hidden: list[Any]) -> Any:
        """Each sequence's mean log-probability of its response tokens (NaN for none), as a tensor left on the
        device (the runner gathers them once per call)."""
        import torch

        out = []
        for seq, need_from, states in zip(group.seqs, group.need_from, hidden, strict=True):
            targets = seq[need_from + 1:]
            if not len(targets):
                out.append(torch.full((), float("nan"), device=states.device))
                continue
            out.append(token_logprobs(self.model, states[: len(targets)], targets).mean())
        return torch.stack(out)

    def _prepare(self, pairs: Sequence[PairInput]) -> _Prepared:
        """Host work of a chunk: token ids and response spans of every pair, and the batch plan."""
        sequences = self._sequences_many(pairs)
        groups = [Group(tuple(seqs), tuple(max(0, f - 1) for f in firsts)) for seqs, firsts, _ in sequences]
        return _Prepared(sequences, self._plan(groups))

    def _plan(self, groups: list[Group]) -> Any:
        return self.runner.prepare(groups)

    def run(self, prepared: _Prepared) -> list[PairScore]:
        results = self.runner.hidden(prepared.plan, reduce=self._mean_logprobs, gather=True)
        scores = []
        for (seqs, firsts, truncated), (chosen, rejected) in zip(prepared.sequences, results, strict=True):
            n_chosen, n_rejected = (max(0, len(s) - max(0, f - 1) - 1) for s, f in zip(seqs, firsts, strict=True))
            scores.append(self._pair_score(seqs, truncated, chosen, n_chosen, rejected, n_rejected))
        self.n_pairs += len(prepared.sequences)
        return scores

    def _pair_score(self, seqs: list[list[int]], truncated: bool, chosen: float, n_chosen: int, rejected: float,
                    n_rejected: int) -> PairScore:
        """One pair's score from the mean log-probs and response token counts of its two answers."""
        reason = nonfinite_reason(chosen, rejected) if n_chosen and n_rejected else "empty response"
        self.n_truncated += int(truncated)
        return PairScore(chosen, rejected, reason, {
            "truncated": truncated, "n_tokens": sum(len(s) for s in seqs),
            "n_response_tokens_chosen": n_chosen, "n_response_tokens_rejected": n_rejected,
            "sum_logprob_chosen": chosen * n_chosen if n_chosen else math.nan,
            "sum_logprob_rejected": rejected * n_rejected if n_rejected else math.nan,
        })

    def run_metadata(self) -> dict[str, Any]:
        return {**super().run_metadata(), "kv_reuse": self.runner.kv_reuse,
                "calibration": self.runner.calibration_record(),
                "oom_halvings": self.batcher.oom_halvings,
                "tokens_computed": self.runner.tokens_computed}
