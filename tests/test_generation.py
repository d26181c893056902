"""Chat generation: seeded, and the shared-prefix sampler gives what plain generate() gives."""

from __future__ import annotations

import pytest

from prb_utils.errors import PRBError
from prb_utils.models.generation import ChatGenerator


@pytest.fixture(scope="module")
def gen(tiny_lm_dir):
    return ChatGenerator(str(tiny_lm_dir), device="cpu")


def test_sample_n_matches_plain_generate_and_is_seeded(gen):
    user = "the user asked a question about cheap travel"
    shared = gen.sample_n(user, 3, max_new_tokens=8, temperature=1.0, top_p=0.9, seed=5)
    plain = gen.generate([user], max_new_tokens=8, temperature=1.0, top_p=0.9, seed=5, num_return_sequences=3)[0]
    assert shared == plain
    assert gen.sample_n(user, 3, max_new_tokens=8, seed=5) == shared
    assert gen.sample_n(user, 3, max_new_tokens=8, seed=6) != shared
    assert len(set(shared)) > 1  # the three samples differ


def test_greedy_generate_and_errors(gen):
    a = gen.generate(["one", "two words"], max_new_tokens=5)
    assert len(a) == 2 and all(len(x) == 1 for x in a)
    assert gen.generate(["one"], max_new_tokens=5) == a[:1]
    with pytest.raises(PRBError):
        gen.sample_n("x", 2, temperature=0.0)


def test_sample_batch_matches_plain_generate_on_a_padded_batch(gen):
    users = ["a short question", "a much longer question about cheap travel in the mountains with children"]
    batched = gen.sample_batch(users, 3, max_new_tokens=8, temperature=1.0, top_p=0.9, seed=7)
    plain = gen.generate(users, max_new_tokens=8, temperature=1.0, top_p=0.9, seed=7, num_return_sequences=3)
    assert batched == plain
    assert [len(replies) for replies in batched] == [3, 3]
    assert gen.sample_batch(users, 3, max_new_tokens=8, seed=7) == batched
    assert gen.sample_batch([], 3) == []


def test_sample_each_seeds_each_message_on_its_own(gen):
    """Each message's replies are its own sample_batch call with its seed: the same whatever stands beside it."""
    users = ["Which camera for kids?", "A cheap lens?"]
    both = gen.sample_each(users, 2, seeds=[11, 22], max_new_tokens=6)
    assert both[1] == gen.sample_each(users[1:], 2, seeds=[22], max_new_tokens=6)[0]
    assert both[0] == gen.sample_batch(users[:1], 2, seed=11, max_new_tokens=6)[0]
    with pytest.raises(PRBError, match="one seed per message"):
        gen.sample_each(users, 2, seeds=[1])


def test_sample_together_is_one_seeded_call_and_its_ticks_change_nothing(gen):
    """The batched mode: the messages in one sample_batch call seeded by their seeds together; the per-step hook
    (a progress bar's tick) is called once per decoding step and leaves the replies as they were."""
    from prb_utils.models.generation import together_seed

    users = ["Which camera for kids?", "A cheap lens for portraits in the evening?"]
    ticks: list[int] = []
    got = gen.sample_together(users, 2, seeds=[11, 22], max_new_tokens=6, on_step=lambda: ticks.append(1))
    assert got == gen.sample_batch(users, 2, seed=together_seed([11, 22]), max_new_tokens=6)
    assert 1 <= len(ticks) <= 6
    with pytest.raises(PRBError, match="one seed per message"):
        gen.sample_together(users, 2, seeds=[1])


def test_sampling_groups_pack_questions_under_the_token_budget(gen):
    users = ["short", "a somewhat longer message about lenses", "mid length message"]
    lengths = [len(gen.tokenizer(gen.render(u, None), add_special_tokens=False)["input_ids"]) + 4 for u in users]
    groups = gen.sampling_groups(users, max_new_tokens=4, batch_tokens=2 * max(lengths))
    assert sorted(i for g in groups for i in g) == [0, 1, 2]
    assert all(len(g) * max(lengths[i] for i in g) <= 2 * max(lengths) for g in groups)
    assert len(groups) == 2   # two fit a call, the third goes alone
    assert gen.sampling_groups(users, max_new_tokens=4, batch_tokens=10**6) == [[1, 2, 0]]
