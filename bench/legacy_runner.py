"""The DecoderRunner as it was before the throughput fix (commit ec6853c), kept for before/after timings.

``bench/score_throughput.py --legacy`` swaps it into an adapter (``rm.runner``) to time the old prompt-cache
path on the same machine, in the same process, next to the new one. Not used by the library.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from prb_utils.models.batching import BudgetBatcher, pad_right
from prb_utils.models.lm import Group, shared_length


def group_cost(group: Group, *, kv_reuse: bool) -> int:
    shared = shared_length(group) if kv_reuse else 0
    if shared < 1:
        return len(group.seqs) * max(len(s) for s in group.seqs)
    return shared + len(group.seqs) * max(len(s) - shared for s in group.seqs)


class LegacyDecoderRunner:
    """Final hidden states of decoder sequences, batched by a token budget, with prompt-cache reuse."""

    def __init__(self, model: Any, *, pad_id: int, batcher: BudgetBatcher, kv_reuse: bool = True) -> None:
        self.model = model
        self.decoder = model.base_model
        self.pad_id = int(pad_id)
        self.batcher = batcher
        self.kv_reuse = kv_reuse
        self.tokens_computed = 0
        self.tokens_padded = 0
        params = inspect.signature(self.decoder.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"

    def hidden(self, groups: Sequence[Group], reduce: Callable[[Group, list[Any]], Any] | None = None) -> list[Any]:
        """For each group, a list with one tensor [len - need_from, hidden] of final hidden states per sequence,
        or ``reduce(group, that list)`` computed inside the batch (so only small results stay in memory and an
        out-of-memory error in the head is recovered like one in the body)."""
        lengths = [group_cost(g, kv_reuse=self.kv_reuse) for g in groups]

        def run(batch: list[Group]) -> list[Any]:
            import torch

            states = self._batch(batch)
            if reduce is None:
                return states
            with torch.inference_mode():
                return [reduce(g, per) for g, per in zip(batch, states, strict=True)]

        return self.batcher.map(run, list(groups), lengths)

    # ------------------------------------------------------------------ one batch

    def _batch(self, groups: list[Group]) -> list[list[Any]]:
        import torch

        with torch.inference_mode():
            if not self.kv_reuse:
                return self._full(groups)
            shared = [shared_length(g) for g in groups]
            k = {len(g.seqs) for g in groups}
            if min(shared) < 1 or len(k) != 1:
                return self._full(groups)
            return self._with_prefix(groups, shared, k.pop())

    def _full(self, groups: list[Group]) -> list[list[Any]]:

        seqs = [s for g in groups for s in g.seqs]
        ids, mask = pad_right(seqs, self.pad_id)
        device = self.model.device
        self.tokens_computed += int(mask.sum())
        self.tokens_padded += ids.numel()
        out = self.decoder(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False)
        states = out.last_hidden_state
        result, row = [], 0
        for g in groups:
            per = []
            for s, start in zip(g.seqs, g.need_from, strict=True):
                per.append(states[row, start : len(s)])
                row += 1
            result.append(per)
        return result

    def _with_prefix(self, groups: list[Group], shared: list[int], k: int) -> list[list[Any]]:
        import torch

        device = self.model.device
        width = max(shared)
        ids = torch.full((len(groups), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(groups), width), dtype=torch.long)
        for row, (g, n) in enumerate(zip(groups, shared, strict=True)):
            ids[row, width - n :] = torch.tensor(g.seqs[0][:n], dtype=torch.long)
            mask[row, width - n :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.decoder(input_ids=ids.to(device), attention_mask=mask.to(device),
                           position_ids=positions.to(device), use_cache=True)
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        last = out.last_hidden_state[:, -1]
        cache.batch_repeat_interleave(k)

        conts = [(s[n:], n) for g, n in zip(groups, shared, strict=True) for s in g.seqs]
        c_width = max(len(c) for c, _ in conts)
        c_ids = torch.full((len(conts), c_width), self.pad_id, dtype=torch.long)
        c_mask = torch.zeros((len(conts), c_width), dtype=torch.long)
        c_pos = torch.zeros((len(conts), c_width), dtype=torch.long)
        for row, (c, n) in enumerate(conts):
            c_ids[row, : len(c)] = torch.tensor(c, dtype=torch.long)
            c_mask[row, : len(c)] = 1
            c_pos[row] = torch.arange(n, n + c_width)
        full_mask = torch.cat([mask.repeat_interleave(k, dim=0), c_mask], dim=1)
        self.tokens_computed += int(mask.sum()) + int(c_mask.sum())
        self.tokens_padded += ids.numel() + c_ids.numel()
        out2 = self.decoder(input_ids=c_ids.to(device), attention_mask=full_mask.to(device),
                            position_ids=c_pos.to(device), use_cache=True, **{self._cache_arg: cache})
        states = out2.last_hidden_state
        result, row = [], 0
        for gi, (g, n) in enumerate(zip(groups, shared, strict=True)):
            per = []
            for s, start in zip(g.seqs, g.need_from, strict=True):
                # positions n-1 (the prefix's last token) .. len(s)-1
                rows = torch.cat([last[gi : gi + 1], states[row, : len(s) - n]], dim=0)
                per.append(rows[start - (n - 1) :])
                row += 1
            result.append(per)
        return result
