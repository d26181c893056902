"""Token-budget batching: packing, order restore, and halving on CUDA out-of-memory."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from prb_utils.models.batching import BudgetBatcher, token_budget_batches


@given(st.lists(st.integers(1, 50), max_size=40), st.integers(1, 200))
@settings(max_examples=60, deadline=None)
def test_batches_cover_every_item_once_and_respect_the_budget(lengths, budget):
    batches = token_budget_batches(lengths, budget=budget)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    for batch in batches:
        cost = len(batch) * max(lengths[i] for i in batch)
        assert cost <= budget or len(batch) == 1


def test_batches_are_length_sorted_longest_first():
    batches = token_budget_batches([3, 9, 1, 5], budget=10)
    assert batches[0] == [1]
    flat = [i for b in batches for i in b]
    assert flat == [1, 3, 0, 2]


@given(st.lists(st.integers(1, 50), max_size=40), st.integers(1, 200), st.sampled_from([0.0, 0.2, 0.5]))
@settings(max_examples=60, deadline=None)
def test_max_padding_keeps_every_item_near_its_batch_longest(lengths, budget, share):
    batches = token_budget_batches(lengths, budget=budget, max_padding=share)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert all(lengths[i] >= (1 - share) * longest for i in batch)
        assert len(batch) * longest <= budget or len(batch) == 1


def test_max_padding_puts_short_answers_apart_from_long_inputs():
    """RM inputs cut to the model's 256 tokens and answers of about 100: without the limit the budget mixes them
    (the answers padded to 256); with it each goes in a batch of its own."""
    lengths = [256, 100, 104, 256, 98, 256]
    assert token_budget_batches(lengths, budget=1024) == [[0, 3, 5, 2], [1, 4]]
    assert token_budget_batches(lengths, budget=1024, max_padding=0.2) == [[0, 3, 5], [2, 1, 4]]
    seen = []
    BudgetBatcher(1024, max_padding=0.2).map(lambda b: seen.append(b) or b, list(range(6)), lengths)
    assert seen == [[0, 3, 5], [2, 1, 4]]


def test_max_items_caps_a_batch():
    assert token_budget_batches([1] * 5, budget=100, max_items=2) == [[0, 1], [2, 3], [4]]


def test_map_restores_the_input_order():
    items = ["ccc", "a", "bb", "dddd"]
    seen = []

    def fn(batch):
        seen.append(list(batch))
        return [s.upper() for s in batch]

    out = BudgetBatcher(8).map(fn, items, [len(s) for s in items])
    assert out == ["CCC", "A", "BB", "DDDD"]
    assert seen[0] == ["dddd", "ccc"]  # longest first, 2 x 4 tokens fit the budget of 8


def test_out_of_memory_halves_the_batch_and_goes_on():
    calls = []

    def fn(batch):
        calls.append(len(batch))
        if len(batch) > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
        return [x * 10 for x in batch]

    batcher = BudgetBatcher(100)
    out = batcher.map(fn, list(range(8)), [1] * 8)
    assert out == [x * 10 for x in range(8)]
    assert batcher.oom_halvings >= 1
    assert batcher.budget < 100
    assert calls[0] == 8 and max(calls[1:]) <= 4


def test_out_of_memory_on_a_single_item_is_raised():
    def fn(batch):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    with pytest.raises(torch.cuda.OutOfMemoryError):
        BudgetBatcher(10).map(fn, [1], [5])


def test_other_errors_are_not_swallowed():
    def fn(batch):
        raise ValueError("bug")

    with pytest.raises(ValueError):
        BudgetBatcher(10).map(fn, [1, 2], [1, 1])


def test_a_plan_replaces_the_length_packing_and_is_replanned_after_out_of_memory():
    plans = []

    def plan(indices, budget):
        plans.append((sorted(indices), budget))
        return [indices[i : i + 4] for i in range(0, len(indices), 4)]

    calls = []

    def fn(batch):
        calls.append(list(batch))
        if len(batch) > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return [x + 1 for x in batch]

    batcher = BudgetBatcher(64)
    out = batcher.map(fn, list(range(8)), [1] * 8, plan=plan)
    assert out == [x + 1 for x in range(8)]
    assert plans[0] == (list(range(8)), 64)
    assert plans[1][1] == 32 and batcher.oom_halvings >= 1


def test_a_plan_that_loses_an_item_is_an_error():
    with pytest.raises(RuntimeError):
        BudgetBatcher(10).map(lambda b: b, [1, 2, 3], [1, 1, 1], plan=lambda idx, budget: [idx[:2]])


def test_a_plan_made_ahead_is_used_as_it_is_and_replanned_after_out_of_memory():
    """Batches planned in the scorer's preparing thread run as planned; an OOM re-plans the rest."""
    plans = []

    def plan(indices, budget):
        plans.append(budget)
        return [[i] for i in indices]

    def fn(batch):
        if len(batch) > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return [x * 10 for x in batch]

    batcher = BudgetBatcher(64)
    assert batcher.map(fn, list(range(6)), [1] * 6, plan=plan, batches=[[5, 4], [3, 2], [1, 0]]) == \
        [x * 10 for x in range(6)]
    assert plans == []   # the plan made ahead was used
    out = batcher.map(fn, list(range(6)), [1] * 6, plan=plan, batches=[[0, 1, 2, 3], [4, 5]])
    assert out == [x * 10 for x in range(6)] and plans == [32] and batcher.oom_halvings == 1
