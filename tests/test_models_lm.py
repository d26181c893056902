"""DecoderRunner: the shared-prompt cache gives the hidden states of whole runs; its cost model and threads."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from prb_utils.models import lm as lm_module
from prb_utils.models.batching import BudgetBatcher
from prb_utils.models.lm import (
    CostModel,
    DecoderRunner,
    Group,
    busy_cpus_elsewhere,
    choose_threads,
    shared_length,
)


@pytest.fixture(scope="module")
def tiny_lm(tiny_lm_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(tiny_lm_dir), attn_implementation="sdpa").eval()


def _groups(seed: int, n: int, vocab: int) -> list[Group]:
    rng = random.Random(seed)
    groups = []
    for _ in range(n):
        prefix = [rng.randrange(10, vocab) for _ in range(rng.randint(1, 40))]
        seqs = tuple(tuple(prefix + [rng.randrange(10, vocab) for _ in range(rng.randint(1, 30))]) for _ in range(2))
        need = tuple(rng.randint(max(0, len(prefix) - 3), len(s) - 1) for s in seqs)
        groups.append(Group(seqs, need))
    return groups


def _reference(model, groups: list[Group]) -> list[list[torch.Tensor]]:
    """Each sequence alone, unpadded, no cache."""
    out = []
    with torch.inference_mode():
        for g in groups:
            per = []
            for s, start in zip(g.seqs, g.need_from, strict=True):
                states = model.base_model(input_ids=torch.tensor([s])).last_hidden_state[0]
                per.append(states[start:])
            out.append(per)
    return out


@pytest.mark.parametrize("overhead", [0, 32, 100_000])
@pytest.mark.parametrize("budget", [64, 4096])
def test_cache_and_no_cache_give_the_hidden_states_of_whole_runs(tiny_lm, overhead, budget):
    groups = _groups(seed=overhead + budget, n=12, vocab=tiny_lm.config.vocab_size)
    reference = _reference(tiny_lm, groups)
    for kv_reuse in (True, False):
        runner = DecoderRunner(tiny_lm, pad_id=0, batcher=BudgetBatcher(budget), kv_reuse=kv_reuse,
                               cost=CostModel(overhead), threads=None)
        got = runner.hidden(groups)
        for per, ref in zip(got, reference, strict=True):
            for a, b in zip(per, ref, strict=True):
                assert a.shape == b.shape
                assert (a - b).abs().max().item() < 1e-4
        if kv_reuse and overhead == 0:
            assert runner.reused_groups == len(groups)
        if not kv_reuse:
            assert runner.reused_groups == 0


def test_groups_of_different_sizes_all_reuse_their_prompt_in_batches_of_one_size(tiny_lm):
    # rubric prompts: one per aspect, 2 or 3 aspects per answer; a batch mixing sizes used to run whole
    rng, vocab = random.Random(5), tiny_lm.config.vocab_size
    groups = []
    for _ in range(16):
        prefix = [rng.randrange(10, vocab) for _ in range(rng.randint(60, 70))]   # question + answer
        seqs = tuple(tuple(prefix + [rng.randrange(10, vocab) for _ in range(rng.randint(8, 12))])   # one aspect
                     for _ in range(rng.choice((2, 3))))
        groups.append(Group(seqs, tuple(len(q) - 1 for q in seqs)))
    assert {len(g.seqs) for g in groups} == {2, 3}
    cm = CostModel(256)   # the CPU overhead: groups of similar shape share a batch
    batches = cm.plan(groups, list(range(len(groups))), budget=4096)
    assert max(map(len, batches)) > 1
    for batch in batches:
        assert len({len(groups[i].seqs) for i in batch}) == 1
    runner = DecoderRunner(tiny_lm, pad_id=0, batcher=BudgetBatcher(4096), cost=cm, threads=None)
    got = runner.hidden(groups)
    assert runner.reused_groups == len(groups)
    for per, ref in zip(got, _reference(tiny_lm, groups), strict=True):
        for a, b in zip(per, ref, strict=True):
            assert (a - b).abs().max().item() < 1e-4


def _long_prefix_groups(seed: int, n: int, vocab: int, *, equal: bool = False) -> list[Group]:
    rng = random.Random(seed)
    groups = []
    for _ in range(n):
        prefix = [rng.randrange(10, vocab) for _ in range(80 if equal else rng.randint(60, 100))]
        seqs = tuple(tuple(prefix + [rng.randrange(10, vocab) for _ in range(20 if equal else rng.randint(5, 30))])
                     for _ in range(2))
        groups.append(Group(seqs, tuple(len(s) - 1 for s in seqs)))
    return groups


@pytest.mark.parametrize("equal", [False, True])
def test_batched_prompt_caches_give_the_same_states(tiny_lm, equal):
    """Several groups in one cached batch (prefixes padded and masked, or all of one length without a mask)."""
    groups = _long_prefix_groups(seed=11, n=8, vocab=tiny_lm.config.vocab_size, equal=equal)
    runner = DecoderRunner(tiny_lm, pad_id=0, batcher=BudgetBatcher(4096), cost=CostModel(200), threads=None)
    got = runner.hidden(groups)
    assert runner.reused_groups == len(groups)
    assert runner.forward_passes < len(groups)           # groups shared passes
    for per, ref in zip(got, _reference(tiny_lm, groups), strict=True):
        for a, b in zip(per, ref, strict=True):
            assert (a - b).abs().max().item() < 1e-4


def test_continuations_of_different_lengths_run_one_by_one_on_the_batch1_cache(tiny_lm):
    cm = CostModel(8)
    uneven, even = _g(50, (40, 10)), _g(50, (20, 20))
    assert cm.split_continuations(uneven) and not cm.split_continuations(even)
    assert cm.cost([uneven], reuse=True) == 50 + 50 + 3 * 8
    groups = _long_prefix_groups(seed=12, n=5, vocab=tiny_lm.config.vocab_size)
    runner = DecoderRunner(tiny_lm, pad_id=0, batcher=BudgetBatcher(4096), cost=CostModel(0), threads=None)
    got = runner.hidden(groups)
    assert runner.forward_passes == 3 * len(groups)
    for per, ref in zip(got, _reference(tiny_lm, groups), strict=True):
        for a, b in zip(per, ref, strict=True):
            assert (a - b).abs().max().item() < 1e-4


def test_reduce_runs_inside_the_batch_in_input_order(tiny_lm):
    groups = _groups(seed=3, n=7, vocab=tiny_lm.config.vocab_size)
    runner = DecoderRunner(tiny_lm, pad_id=0, batcher=BudgetBatcher(4096), cost=CostModel(0), threads=None)
    got = runner.hidden(groups, reduce=lambda g, per: (g, [p.shape[0] for p in per]))
    assert [g for g, _ in got] == groups
    assert all(n == [len(s) - f for s, f in zip(g.seqs, g.need_from, strict=True)] for g, n in got)


def test_classifier_scores_are_equal_with_and_without_the_cache(tiny_classifier_dir):
    from prb_utils.models import PairInput, load_model

    words = "the camera photo settings sharp kids indoors beginner simple steps plain language".split()
    rng = random.Random(0)
    pairs = [PairInput(str(i), " ".join(rng.choices(words, k=rng.randint(5, 60))),
                       " ".join(rng.choices(words, k=rng.randint(3, 40))),
                       " ".join(rng.choices(words, k=rng.randint(3, 40)))) for i in range(10)]
    on = load_model(f"classifier:{tiny_classifier_dir}", device="cpu", kv_reuse=True)
    on.runner.cost = CostModel(0)
    off = load_model(f"classifier:{tiny_classifier_dir}", device="cpu", kv_reuse=False)
    a, b = on.score_pairs(pairs), off.score_pairs(pairs)
    assert on.runner.reused_groups == len(pairs)
    for x, y in zip(a, b, strict=True):
        assert abs(x.score_chosen - y.score_chosen) < 1e-4 and abs(x.score_rejected - y.score_rejected) < 1e-4


# ------------------------------------------------------------------------------------------ cost model


def _g(prefix: int, conts: tuple[int, ...]) -> Group:
    seqs = tuple(tuple(range(prefix)) + tuple(100 + j * 1000 + t for t in range(c)) for j, c in enumerate(conts))
    return Group(seqs, tuple(len(s) - 1 for s in seqs))


def test_cost_counts_padded_tokens_and_passes():
    g = _g(10, (5, 3))
    assert shared_length(g) == 10
    cm = CostModel(overhead=4)
    assert cm.padded([g], reuse=False) == 2 * 15
    assert cm.padded([g], reuse=True) == 10 + 2 * 5
    assert cm.cost([g], reuse=False) == 30 + 4
    assert cm.cost([g], reuse=True) == 20 + 8
    # two groups: prefixes padded to the longest, continuations to the longest
    assert cm.padded([g, _g(6, (9, 1))], reuse=True) == 2 * 10 + 4 * 9


def test_reuse_pays_only_when_the_saved_prefix_beats_the_extra_pass():
    cm = CostModel(overhead=32)
    assert cm.reuse_pays(_g(200, (100, 100)))
    assert not cm.reuse_pays(_g(20, (100, 100)))       # saves 20 tokens, costs a pass of 32
    assert not cm.reuse_pays(_g(0, (100, 100)))        # nothing shared
    assert CostModel(overhead=0).reuse_pays(_g(1, (5, 5)))
    assert not CostModel(overhead=10**6).reuse_pays(_g(500, (5, 5)))


def test_a_large_overhead_is_shared_by_the_batch_the_budget_allows():
    gpu = CostModel(overhead=2048)
    g = _g(1000, (300, 300))
    assert not gpu.reuse_pays(g)                    # alone, the second pass costs more than the prefix saved
    assert gpu.reuse_pays(g, budget=16_384)         # six such groups share the two passes
    assert gpu.batch_reuse([g] * 6) and not gpu.batch_reuse([g])


def test_batch_reuse_refuses_batches_that_pad_more_than_they_save():
    cm = CostModel(overhead=0)
    assert cm.batch_reuse([_g(100, (10, 10))])
    assert not cm.batch_reuse([_g(100, (10, 10)), _g(10, (100, 100))])   # long prefix + long continuation
    assert not cm.batch_reuse([_g(0, (10, 10))])


def test_plan_covers_every_group_once_with_one_mode_per_batch_within_budget():
    rng = random.Random(1)
    groups = [_g(rng.randint(0, 300), (rng.randint(1, 150), rng.randint(1, 150))) for _ in range(60)]
    cm = CostModel(overhead=32)
    batches = cm.plan(groups, list(range(60)), budget=2048)
    assert sorted(i for b in batches for i in b) == list(range(60))
    for b in batches:
        modes = {cm.reuse_pays(groups[i], budget=2048) for i in b}
        assert len(modes) == 1
        assert len(b) == 1 or cm.padded([groups[i] for i in b], reuse=modes.pop()) <= 2048
    # some groups share too little to pay for a second pass, the rest reuse: both modes occur
    assert {cm.reuse_pays(groups[b[0]], budget=2048) for b in batches} == {True, False}


def test_plan_merges_equal_shapes_and_keeps_very_different_ones_apart():
    cm = CostModel(overhead=32)
    same = [_g(100, (50, 50)) for _ in range(4)]
    assert cm.plan(same, [0, 1, 2, 3], budget=10_000) == [[0, 1, 2, 3]]
    apart = [_g(400, (50, 50)), _g(100, (50, 50))]
    assert sorted(map(sorted, cm.plan(apart, [0, 1], budget=10_000))) == [[0], [1]]
    # a GPU-like overhead merges them: padding is cheaper than another pass
    assert CostModel(overhead=2048).plan(apart, [0, 1], budget=10_000) == [[0, 1]]
    # the budget splits even equal shapes
    assert len(cm.plan(same, [0, 1, 2, 3], budget=400)) == 2


def test_plan_without_reuse_packs_whole_sequences(tiny_lm):
    cm = CostModel(overhead=8)
    groups = [_g(100, (50, 50)), _g(100, (50, 44)), _g(10, (5, 5))]
    assert cm.plan(groups, [0, 1, 2], budget=10_000, kv_reuse=False) == [[0, 1], [2]]
    # the runner never reuses with kv_reuse=False, whatever the cost model says
    runner = DecoderRunner(tiny_lm, pad_id=0, batcher=BudgetBatcher(4096), kv_reuse=False, cost=CostModel(0),
                           threads=None)
    runner.hidden(_groups(seed=9, n=4, vocab=tiny_lm.config.vocab_size))
    assert runner.reused_groups == 0 and runner.forward_passes >= 1


# ------------------------------------------------------------------------------------------ threads


def test_choose_threads_uses_the_free_cores():
    assert choose_threads(2, 0.0) == 2
    assert choose_threads(2, 0.4) == 2
    assert choose_threads(2, 0.9) == 1
    assert choose_threads(2, 5.0) == 1
    assert choose_threads(16, 3.2) == 13
    assert choose_threads(4, None) == 4


def test_busy_cpus_elsewhere_is_a_plausible_count():
    busy = busy_cpus_elsewhere(0.05)
    if busy is None:
        pytest.skip("no /proc here")
    assert 0.0 <= busy <= (len(__import__("os").sched_getaffinity(0)) + 0.5)


def test_runner_sets_threads_only_during_the_call_and_restores_them(tiny_lm):
    groups = _groups(seed=5, n=3, vocab=tiny_lm.config.vocab_size)
    before = torch.get_num_threads()
    seen = []
    runner = DecoderRunner(tiny_lm, pad_id=0, batcher=BudgetBatcher(4096), threads=1)
    runner.hidden(groups, reduce=lambda g, per: seen.append(torch.get_num_threads()))
    assert seen == [1] * len(groups)
    assert torch.get_num_threads() == before


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), max_size=12), min_size=1, max_size=4))
def test_common_prefix_is_the_longest_shared_start(seqs):
    n = 0
    while all(len(s) > n for s in seqs) and len({s[n] for s in seqs}) == 1:
        n += 1
    assert lm_module.common_prefix(seqs) == n
    assert lm_module.common_prefix([tuple(s) for s in seqs]) == n


def test_planning_finds_each_groups_shared_prefix_once(monkeypatch):
    calls = []
    real = lm_module.common_prefix
    monkeypatch.setattr(lm_module, "common_prefix", lambda seqs: calls.append(1) or real(seqs))
    groups = _long_prefix_groups(seed=4, n=30, vocab=200)
    plan = CostModel(64).plan(groups, range(len(groups)), budget=512)
    assert sorted(i for b in plan for i in b) == list(range(30))
    assert len(calls) == 30


def test_calibration_measures_the_pass_overhead_and_sets_the_cost_model(tiny_lm):
    runner = DecoderRunner(tiny_lm, pad_id=0, batcher=BudgetBatcher(400), threads=None)
    assert runner.calibration is None and runner.calibration_record() is None   # on a CPU nothing is timed at start
    before = (runner.tokens_computed, runner.forward_passes)
    found = runner.calibrate(prompt=40, answer=8, small=8)
    assert found["groups"] == 400 // (2 * 48) and found["forward_overhead_tokens"] >= 0
    assert runner.cost.overhead == found["forward_overhead_tokens"]
    assert runner.cache_decisions == {lm_module.SMALLEST_BUCKET: found["prompt_cache_pays"]}   # 40 tokens: 512
    assert runner.kv_reuse is True   # the option stays; the decision is the bucket's
    assert runner.calibration_record()["buckets"][str(lm_module.SMALLEST_BUCKET)]["prompt_tokens"] == 40
    assert (runner.tokens_computed, runner.forward_passes) == before   # timing runs are not scoring


def test_a_prompt_cache_that_does_not_pay_is_switched_off_for_its_length_bucket(tiny_lm, monkeypatch):
    monkeypatch.setattr(lm_module, "calibrated", lambda **_: (1234, False))
    runner = DecoderRunner(tiny_lm, pad_id=0, batcher=BudgetBatcher(400), threads=None, calibrate=True)
    assert runner.cost.overhead == 1234 and runner.cache_decisions == {1024: False}   # the load's 1,024 tokens
    groups = _bucket_groups(seed=1, n=3, prefix=600, vocab=tiny_lm.config.vocab_size)
    assert {lm_module.length_bucket(g) for g in groups} == {1024}
    runner.hidden(groups)
    assert runner.reused_groups == 0 and runner.cache_decisions == {1024: False}


def _bucket_groups(seed: int, n: int, prefix: int, vocab: int) -> list[Group]:
    rng = random.Random(seed)
    groups = []
    for _ in range(n):
        head = [rng.randrange(10, vocab) for _ in range(prefix)]
        seqs = tuple(tuple(head + [rng.randrange(10, vocab) for _ in range(12)]) for _ in range(2))
        groups.append(Group(seqs, tuple(len(s) - 1 for s in seqs)))
    return groups


def test_each_length_bucket_is_calibrated_with_its_own_shape_before_its_first_batch(tiny_lm, monkeypatch):
    """A bucket not timed yet is timed on groups shaped like its own (median prompt and continuation) before
    its batches run; its decision then holds for it alone and is kept for the run metadata."""
    runner = DecoderRunner(tiny_lm, pad_id=0, batcher=BudgetBatcher(4096), cost=CostModel(0), threads=None)
    runner.calibrating = True
    runner.cache_decisions[lm_module.SMALLEST_BUCKET] = True
    shapes = []

    def timed(prompt, answer, k, repeat):
        shapes.append((prompt, answer, k))
        return {"whole_s": 1.0, "prompt_cache_s": 2.0, "groups": 1, "k": k, "tokens": k * (prompt + answer)}

    monkeypatch.setattr(runner, "_time_shape", timed)
    long_groups = _bucket_groups(seed=3, n=3, prefix=600, vocab=tiny_lm.config.vocab_size)   # bucket 1024
    short = _long_prefix_groups(seed=2, n=3, vocab=tiny_lm.config.vocab_size)   # bucket 512: the cache pays
    runner.hidden(runner.prepare(short + long_groups))
    assert shapes == [(600, 12, 2)]   # only the new bucket, with its groups' shape
    assert runner.cache_decisions == {512: True, 1024: False}
    assert runner.reused_groups == 3   # the short groups only
    assert runner.bucket_calibrations[1024]["prompt_cache_pays"] is False


def test_a_bucket_whose_decision_is_clear_from_the_load_calibration_is_not_timed_again(tiny_lm, monkeypatch):
    """Groups computing about half their tokens on the cache, after a load calibration where the cache took 0.56
    of the whole time at the same share, are decided without timing; a bucket near the margin is timed."""
    runner = DecoderRunner(tiny_lm, pad_id=0, batcher=BudgetBatcher(4096), cost=CostModel(0), threads=None)
    runner.calibrating = True
    runner.calibration = {"prompt_cache_pays": True, "prompt_cache_s": 0.56, "whole_s": 1.0, "prompt_tokens": 1024,
                          "answer_tokens": 128}
    timed = []
    monkeypatch.setattr(runner, "calibrate_bucket", lambda bucket, groups: timed.append(bucket) or True)
    vocab = tiny_lm.config.vocab_size
    runner._decide_buckets(_bucket_groups(seed=4, n=2, prefix=600, vocab=vocab))   # 612 + 612 vs 600 + 24: 0.51
    assert timed == [] and runner.cache_decisions == {1024: True}
    assert runner.bucket_calibrations[1024]["decided_from"] == "load calibration"
    rng = random.Random(5)
    head = [rng.randrange(10, vocab) for _ in range(1100)]
    near = [Group(tuple(tuple(head + [rng.randrange(10, vocab) for _ in range(1200)]) for _ in range(2)),
                  (2299, 2299))]
    runner._decide_buckets(near)   # 0.76 of the tokens on the cache: predicted 0.77 of the time, too close to call
    assert timed == [2048] and 2048 not in runner.bucket_calibrations   # (the stand-in timing records nothing)
