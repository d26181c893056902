"""``implicit:`` a causal LM's mean token log-probability of the response given the chat prompt."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from prb_utils.models.base import ModelSpec, PairInput, PairScore
from prb_utils.models.batching import BudgetBatcher
from prb_utils.models.hf import HFAdapter, fit_user_message, nonfinite_reason
from prb_utils.models.lm import DecoderRunner, Group, token_logprobs
from prb_utils.models.prompts import render_chat


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
                 tokenization: str = "auto", allow_untrained_head: bool = False) -> None:
        from transformers import AutoModelForCausalLM

        super().__init__(spec, device=device, dtype=dtype, batch_tokens=batch_tokens, seed=seed,
                         tokenization=tokenization, allow_untrained_head=allow_untrained_head)
        self._load(AutoModelForCausalLM.from_pretrained)
        self.kv_reuse = kv_reuse
        self.batcher = BudgetBatcher(self.batch_tokens)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.runner = DecoderRunner(self.model, pad_id=pad, batcher=self.batcher, kv_reuse=kv_reuse)

    # ------------------------------------------------------------------ tokens

    def _response_ids(self, user: str, prompt_text: str, response: str) -> tuple[list[int], int]:
        """Tokens after the prompt up to the response's end, and the index of the first response token."""
        full = render_chat(self.tokenizer, user, response)
        suffix = full[len(prompt_text):] if full.startswith(prompt_text) else response
        body = response.strip() or response
        start = suffix.find(body)
        if start < 0:
            start, end = 0, len(suffix)
        else:
            end = start + len(body)
        enc = self.tokenizer(suffix[:end], add_special_tokens=False, return_offsets_mapping=True)
        ids = list(enc["input_ids"])
        first = next((i for i, (_, e) in enumerate(enc["offset_mapping"]) if e > start), len(ids))
        return ids, first

    def _sequences(self, pair: PairInput) -> tuple[list[list[int]], list[int], bool]:
        def build(user: str) -> tuple[list[list[int]], list[int]]:
            prompt_text = render_chat(self.tokenizer, user)
            prompt_ids = self.encode(prompt_text, continued=True)
            seqs, firsts = [], []
            for response in (pair.chosen, pair.rejected):
                ids, first = self._response_ids(user, prompt_text, response)
                seqs.append(prompt_ids + ids)
                firsts.append(len(prompt_ids) + first)
            return seqs, firsts

        user, truncated = fit_user_message(self.tokenizer, pair.prompt, lambda u: max(map(len, build(u)[0])),
                                           self.max_length)
        seqs, firsts = build(user)
        if any(len(s) > self.max_length for s in seqs):  # the responses alone are too long: cut their ends
            seqs = [s[: self.max_length] for s in seqs]
            truncated = True
        return seqs, firsts, truncated

    # ------------------------------------------------------------------ scoring

    def _mean_logprobs(self, group: Group, hidden: list[Any]) -> list[tuple[float, int]]:
        out = []
        for seq, need_from, states in zip(group.seqs, group.need_from, hidden, strict=True):
            targets = seq[need_from + 1:]
            if not targets:
                out.append((float("nan"), 0))
                continue
            logp = token_logprobs(self.model, states[: len(targets)], targets)
            out.append((float(logp.mean()), len(targets)))
        return out

    def score_pairs(self, pairs: Sequence[PairInput]) -> list[PairScore]:
        prepared = [self._sequences(p) for p in pairs]
        groups = [Group(tuple(map(tuple, seqs)), tuple(max(0, f - 1) for f in firsts))
                  for seqs, firsts, _ in prepared]
        results = self.runner.hidden(groups, reduce=self._mean_logprobs)
        scores = []
        for (seqs, _, truncated), per in zip(prepared, results, strict=True):
            (chosen, n_chosen), (rejected, n_rejected) = per
            reason = nonfinite_reason(chosen, rejected) if n_chosen and n_rejected else "empty response"
            self.n_truncated += int(truncated)
            scores.append(PairScore(chosen, rejected, reason, {
                "truncated": truncated, "n_tokens": sum(len(s) for s in seqs),
                "n_response_tokens_chosen": n_chosen, "n_response_tokens_rejected": n_rejected,
                "sum_logprob_chosen": chosen * n_chosen if n_chosen else math.nan,
                "sum_logprob_rejected": rejected * n_rejected if n_rejected else math.nan,
            }))
        self.n_pairs += len(pairs)
        return scores

    def run_metadata(self) -> dict[str, Any]:
        return {**super().run_metadata(), "kv_reuse": self.kv_reuse, "oom_halvings": self.batcher.oom_halvings,
                "tokens_computed": self.runner.tokens_computed}
