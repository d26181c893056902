"""Token-budget batching: sort by length, pack batches under a padded-token budget, restore the order.

A batch's cost is ``len(batch) * max(length)`` (what padding makes the model compute). With a
``max_padding`` share, a batch also closes before an item so much shorter than its longest that padding would
fill more than that share of a row (long RM inputs and short answers then go in batches of their own). Items are
sorted longest first, so the biggest batch runs first and an out-of-memory error shows up at once. On a CUDA
out-of-memory error the batch is split in two, the budget is halved for the rest of the run, and scoring
goes on; a single item that does not fit re-raises the error.

>>> token_budget_batches([5, 1, 3, 3], budget=6)
[[0], [2, 3], [1]]
>>> token_budget_batches([8, 8, 3, 3], budget=32), token_budget_batches([8, 8, 3, 3], budget=32, max_padding=0.5)
([[0, 1, 2, 3]], [[0, 1], [2, 3]])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from prb_utils.models.device import free_cuda_memory, is_oom

T = TypeVar("T")
R = TypeVar("R")
Planner = Callable[[list[int], int], Sequence[Sequence[int]]]


def token_budget_batches(lengths: Sequence[int], *, budget: int, max_items: int | None = None,
                         max_padding: float | None = None) -> list[list[int]]:
    """Indices grouped into batches whose padded cost stays within ``budget`` (an item over it runs alone) and,
    with ``max_padding``, whose items are each at least ``1 - max_padding`` of their batch's longest.

    Batches come longest first; each holds indices in descending length order (ties keep input order).
    """
    order = sorted(range(len(lengths)), key=lambda i: (-int(lengths[i]), i))
    return _pack(order, lengths, budget=budget, max_items=max_items, max_padding=max_padding)


def _pack(order: Sequence[int], lengths: Sequence[int], *, budget: int, max_items: int | None,
          max_padding: float | None = None) -> list[list[int]]:
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        size = max(1, int(lengths[i]))
        new_longest = max(longest, size)
        full = max_items is not None and len(current) >= max_items
        padded = max_padding is not None and size < (1 - max_padding) * longest
        if current and (full or padded or (len(current) + 1) * new_longest > budget):
            batches.append(current)
            current, new_longest = [], size
        current.append(i)
        longest = new_longest
    if current:
        batches.append(current)
    return batches


def pad_right(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[Any, Any]:
    """Token id sequences (lists, tuples or arrays) as a right-padded ``(ids, attention_mask)`` pair of long
    tensors, filled through numpy (one copy per row, no Python loop over tokens).

    >>> ids, mask = pad_right([[5, 6, 7], [8]], pad_id=0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6, 7], [8, 0, 0]], [[1, 1, 1], [1, 0, 0]])
    """
    import torch

    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    width = int(lengths.max()) if len(seqs) else 0
    ids = np.full((len(seqs), width), int(pad_id), dtype=np.int64)
    for row, s in enumerate(seqs):
        ids[row, : len(s)] = s
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    return torch.from_numpy(ids), torch.from_numpy(mask)


class BudgetBatcher:
    """Runs a batch function over items in token-budget batches and returns results in input order.

    ``oom_halvings`` counts how often an out-of-memory error halved the budget. ``max_padding``: see
    :func:`token_budget_batches` (the default packing only).
    """

    def __init__(self, budget: int, *, max_items: int | None = None, max_padding: float | None = None) -> None:
        if budget < 1:
            raise ValueError("the token budget must be a positive number of tokens")
        self.budget = int(budget)
        self.max_items = max_items
        self.max_padding = max_padding
        self.oom_halvings = 0

    def map(self, fn: Callable[[list[T]], Sequence[R]], items: Sequence[T], lengths: Sequence[int], *,
            plan: Planner | None = None, batches: Sequence[Sequence[int]] | None = None) -> list[R]:
        """``fn`` gets a list of items and returns one result per item, in the same order.

        ``plan(indices, budget)``, when given, groups item indices into batches instead of the length packing
        (a caller with its own cost model); after an out-of-memory error it re-plans the rest with the halved
        budget. ``lengths`` then only serve the default packing.
        """
        if len(items) != len(lengths):
            raise ValueError("items and lengths differ in length")
        results: list[Any] = [None] * len(items)

        def pack(indices: Sequence[int]) -> list[list[int]]:
            if plan is not None:
                return [list(b) for b in plan(list(indices), self.budget) if b]
            return _pack(sorted(indices, key=lambda i: (-int(lengths[i]), i)), lengths, budget=self.budget,
                         max_items=self.max_items, max_padding=self.max_padding)

        pending = [list(b) for b in batches if b] if batches is not None else pack(range(len(items)))
        if sorted(i for b in pending for i in b) != list(range(len(items))):
            raise RuntimeError("the batch plan must hold every item exactly once")
        while pending:
            batch = pending.pop(0)
            try:
                out = list(fn([items[i] for i in batch]))
            except Exception as exc:
                if not is_oom(exc) or len(batch) == 1:
                    raise
                free_cuda_memory()
                self.oom_halvings += 1
                self.budget = max(1, self.budget // 2)
                rest = [i for b in [batch, *pending] for i in b]
                half = max(1, len(batch) // 2)
                pending = [batch[:half], batch[half:], *pack(rest[len(batch):])]
                continue
            if len(out) != len(batch):
                raise RuntimeError(f"batch function returned {len(out)} results for {len(batch)} items")
            for i, result in zip(batch, out, strict=True):
                results[i] = result
        return results
