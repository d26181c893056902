"""Every adapter kind on tiny random models: scores as defined, batch-size invariance, NaN faithfulness."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

from prb_utils.models import PairInput, PairScore, RewardModel, load_model
from prb_utils.models.prompts import render_chat

WORDS = ("the camera photo settings sharp kids indoors beginner simple steps plain language cook pan eggs "
         "travel budget train guitar song practice daily").split()


def _text(seed: int, n: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 3) % len(WORDS)] for i in range(n))


@pytest.fixture(scope="module")
def pairs():
    """Pairs of varied lengths (different padding in every batch); chosen and rejected share first words."""
    out = []
    for i in range(9):
        prompt = _text(i, 4 + (i * 5) % 23)
        out.append(PairInput(f"s/{i}", prompt, "the " + _text(i + 1, 2 + i % 7), "the " + _text(i + 2, 1 + (i * 3) % 9)))
    return out


def _close(a: list[PairScore], b: list[PairScore], tol: float = 1e-5) -> None:
    for x, y in zip(a, b, strict=True):
        assert x.score_chosen == pytest.approx(y.score_chosen, abs=tol)
        assert x.score_rejected == pytest.approx(y.score_rejected, abs=tol)


def _specs(tiny_lm_dir, tiny_classifier_dir, tiny_bert_dir):
    return [f"classifier:{tiny_classifier_dir}", f"classifier:{tiny_bert_dir}", f"judge:{tiny_lm_dir}",
            f"implicit:{tiny_lm_dir}", f"embedding:{tiny_bert_dir}"]


def test_every_kind_is_batch_size_invariant(pairs, tiny_lm_dir, tiny_classifier_dir, tiny_bert_dir):
    for spec in _specs(tiny_lm_dir, tiny_classifier_dir, tiny_bert_dir):
        small = load_model(spec, device="cpu", dtype="float32", batch_tokens=1)   # one item per batch
        big = load_model(spec, device="cpu", dtype="float32", batch_tokens=100_000)
        assert isinstance(small, RewardModel)
        a, b = small.score_pairs(pairs), big.score_pairs(pairs)
        assert len(a) == len(pairs)
        assert all(math.isfinite(s.score_chosen) and math.isfinite(s.score_rejected) for s in a), spec
        assert len({round(s.score_chosen, 6) for s in a}) > 1, spec  # scores depend on the inputs
        _close(a, b)
        meta = big.run_metadata()
        assert meta["kind"] == spec.split(":")[0] and meta["dtype"] == "float32" and meta["device"] == "cpu"


def test_kv_reuse_gives_the_same_scores_with_fewer_tokens(pairs, tiny_lm_dir, tiny_classifier_dir):
    for spec in (f"implicit:{tiny_lm_dir}", f"judge:{tiny_lm_dir}", f"classifier:{tiny_classifier_dir}"):
        on = load_model(spec, device="cpu", kv_reuse=True)
        off = load_model(spec, device="cpu", kv_reuse=False)
        _close(on.score_pairs(pairs), off.score_pairs(pairs))
        assert on.run_metadata()["tokens_computed"] < off.run_metadata()["tokens_computed"], spec


def test_implicit_is_the_mean_response_logprob(pairs, tiny_lm_dir):
    rm = load_model(f"implicit:{tiny_lm_dir}", device="cpu")
    score = rm.score_pairs(pairs[:1])[0]
    tok = AutoTokenizer.from_pretrained(str(tiny_lm_dir))
    lm = AutoModelForCausalLM.from_pretrained(str(tiny_lm_dir)).eval()
    pair = pairs[0]
    prompt_ids = tok(render_chat(tok, pair.prompt), add_special_tokens=False)["input_ids"]
    response_ids = tok(pair.chosen, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt_ids + response_ids])
    with torch.no_grad():
        logp = lm(ids).logits[0].log_softmax(-1)
    n = len(prompt_ids)
    expected = logp[n - 1 : -1].gather(-1, ids[0, n:, None]).mean().item()
    assert score.score_chosen == pytest.approx(expected, abs=1e-5)
    assert score.extra["n_response_tokens_chosen"] == len(response_ids)


def _letter_prob(lm, tok, text: str) -> float:
    ids = tok(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        p = lm(torch.tensor([ids])).logits[0, -1].softmax(-1)
    a, b = tok.convert_tokens_to_ids("A"), tok.convert_tokens_to_ids("B")
    return (p[a] / (p[a] + p[b])).item()


def test_judge_runs_both_orders(pairs, tiny_lm_dir):
    rm = load_model(f"judge:{tiny_lm_dir}", device="cpu")
    pair = pairs[2]
    score = rm.score_pairs([pair])[0]
    tok = AutoTokenizer.from_pretrained(str(tiny_lm_dir))
    lm = AutoModelForCausalLM.from_pretrained(str(tiny_lm_dir)).eval()
    p_a_ab = _letter_prob(lm, tok, rm.prompt_text(pair.prompt, pair.chosen, pair.rejected))
    p_a_ba = _letter_prob(lm, tok, rm.prompt_text(pair.prompt, pair.rejected, pair.chosen))
    assert score.extra["p_chosen_ab"] == pytest.approx(p_a_ab, abs=1e-5)        # chosen shown as A
    assert score.extra["p_chosen_ba"] == pytest.approx(1 - p_a_ba, abs=1e-5)    # chosen shown as B
    assert score.score_chosen == pytest.approx((p_a_ab + 1 - p_a_ba) / 2, abs=1e-5)
    assert score.score_chosen + score.score_rejected == pytest.approx(1.0)
    for order, p in (("ab", score.extra["p_chosen_ab"]), ("ba", score.extra["p_chosen_ba"])):
        assert score.extra[f"verdict_{order}"] == ("chosen" if p > 0.5 else "rejected")
    assert rm.prompt_text(pair.prompt, pair.chosen, pair.rejected).rstrip().endswith("**Result:**")


def test_judge_template_file_changes_the_prompt(pairs, tiny_lm_dir, tmp_path):
    path = tmp_path / "judge.txt"
    path.write_text("the user {question} A {response_a} B {response_b} the answer", encoding="utf-8")
    rm = load_model(f"judge:{tiny_lm_dir}", device="cpu", judge_template=str(path))
    text = rm.prompt_text("q", "x", "y")
    assert "the user q A x B y the answer" in text
    default = load_model(f"judge:{tiny_lm_dir}", device="cpu")
    assert rm.score_pairs(pairs[:1])[0].score_chosen != default.score_pairs(pairs[:1])[0].score_chosen
    assert rm.run_metadata()["judge_template_hash"] != default.run_metadata()["judge_template_hash"]


def test_judge_generate_mode_parses_and_never_guesses(pairs, tiny_lm_dir, monkeypatch):
    rm = load_model(f"judge:{tiny_lm_dir}", device="cpu", judge_mode="generate")
    answers = {}
    for pair, (ab, ba) in zip(pairs[:2], [("**Result:** A", "**Result:** B"),   # chosen wins in both orders
                                          ("**Result:** B", "no idea")], strict=True):  # rejected; unparseable
        seqs, _ = rm._sequences(pair)
        answers[tuple(seqs[0])], answers[tuple(seqs[1])] = ab, ba
    monkeypatch.setattr(rm, "_generate_batch", lambda seqs: [answers[tuple(s)] for s in seqs])
    first, second = rm.score_pairs(pairs[:2])
    assert (first.extra["verdict_ab"], first.extra["verdict_ba"]) == ("chosen", "chosen")
    assert first.score_chosen == 1.0 and first.invalid_reason is None
    assert (second.extra["verdict_ab"], second.extra["verdict_ba"]) == ("rejected", "invalid")
    assert second.invalid_reason and "BA" in second.invalid_reason
    assert math.isnan(second.score_chosen)


def test_judge_generate_mode_runs_the_model(pairs, tiny_lm_dir):
    rm = load_model(f"judge:{tiny_lm_dir}", device="cpu", judge_mode="generate")
    score = rm.score_pairs(pairs[:1])[0]
    assert isinstance(score.extra["answer_ab"], str) and isinstance(score.extra["answer_ba"], str)
    assert score.extra["verdict_ab"] in ("chosen", "rejected", "invalid")


def test_classifier_is_the_single_logit(pairs, tiny_classifier_dir):
    from transformers import AutoModelForSequenceClassification

    rm = load_model(f"classifier:{tiny_classifier_dir}", device="cpu")
    score = rm.score_pairs(pairs[:1])[0]
    tok = AutoTokenizer.from_pretrained(str(tiny_classifier_dir))
    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_classifier_dir)).eval()
    ids = tok(render_chat(tok, pairs[0].prompt, pairs[0].rejected), add_special_tokens=False, return_tensors="pt")
    with torch.no_grad():
        expected = model(**ids).logits[0, 0].item()
    assert score.score_rejected == pytest.approx(expected, abs=1e-5)


def test_embedding_is_the_cosine_of_mean_pooled_vectors(pairs, tiny_bert_dir):
    rm = load_model(f"embedding:{tiny_bert_dir}", device="cpu")
    score = rm.score_pairs(pairs[:1])[0]
    tok = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    model = AutoModel.from_pretrained(str(tiny_bert_dir)).eval()

    def embed(text):
        with torch.no_grad():
            return model(**tok(text, return_tensors="pt")).last_hidden_state[0].mean(0)

    expected = torch.nn.functional.cosine_similarity(embed(pairs[0].prompt), embed(pairs[0].chosen), dim=0)
    assert score.score_chosen == pytest.approx(expected.item(), abs=1e-5)


def test_fallback_without_chat_template_scores(pairs, tiny_lm_no_template_dir):
    rm = load_model(f"implicit:{tiny_lm_no_template_dir}", device="cpu")
    assert rm.run_metadata()["chat_template"] == "fallback"
    scores = rm.score_pairs(pairs[:3])
    assert all(math.isfinite(s.score_chosen) for s in scores)
    assert all(s.extra["n_response_tokens_chosen"] > 0 for s in scores)


def test_long_prompts_are_cut_from_the_left_and_counted(tiny_lm_dir, tiny_bert_dir):
    long_prompt = "the camera " * 400 + "the kids"      # far over the tiny models' 256 / 128 positions
    pair = PairInput("long", long_prompt, "simple steps", "plain language")
    for spec in (f"implicit:{tiny_lm_dir}", f"judge:{tiny_lm_dir}", f"embedding:{tiny_bert_dir}"):
        rm = load_model(spec, device="cpu")
        score = rm.score_pairs([pair])[0]
        assert score.extra["truncated"] is True, spec
        assert math.isfinite(score.score_chosen), spec
        assert rm.run_metadata()["n_truncated"] == 1
    rm = load_model(f"implicit:{tiny_lm_dir}", device="cpu")
    score = rm.score_pairs([pair])[0]
    assert score.extra["n_response_tokens_chosen"] == 2                      # the response is kept whole
    assert score.extra["n_tokens"] <= 2 * rm.run_metadata()["max_length"]
    short = rm.score_pairs([PairInput("short", "the kids", "simple steps", "plain language")])[0]
    assert short.extra["truncated"] is False


@pytest.fixture(scope="module")
def nan_dirs(tmp_path_factory):
    import tiny_models

    root = tmp_path_factory.mktemp("nan_models")
    return {"lm": tiny_models.build_causal_lm(root / "lm", nan=True),
            "cls": tiny_models.build_sequence_classifier(root / "cls", nan=True),
            "bert": tiny_models.build_bert(root / "bert", nan=True)}


def test_nan_weights_give_nan_scores_marked_invalid(pairs, nan_dirs):
    specs = [f"implicit:{nan_dirs['lm']}", f"judge:{nan_dirs['lm']}", f"classifier:{nan_dirs['cls']}",
             f"embedding:{nan_dirs['bert']}"]
    for spec in specs:
        scores = load_model(spec, device="cpu").score_pairs(pairs[:2])
        for s in scores:
            assert math.isnan(s.score_chosen) and math.isnan(s.score_rejected), spec
            assert s.invalid_reason and "non-finite" in s.invalid_reason, spec
    judge = load_model(f"judge:{nan_dirs['lm']}", device="cpu").score_pairs(pairs[:1])[0]
    assert judge.extra["verdict_ab"] == judge.extra["verdict_ba"] == "invalid"


def test_baselines():
    pair = PairInput("k", "Cheap nonstick pans for eggs?", "A cheap nonstick pan works.", "Buy a good wok, it is long.")
    length = load_model("length").score_pairs([pair])[0]
    assert (length.score_chosen, length.score_rejected) == (len(pair.chosen), len(pair.rejected))
    lexical = load_model("lexical").score_pairs([pair])[0]
    assert lexical.score_chosen > lexical.score_rejected
    assert load_model("lexical").score_pairs([PairInput("k", "the", "a", "b")])[0].score_chosen == 0.0


def test_load_encoder_gives_unit_vectors_for_retrieval(tiny_bert_dir):
    import numpy as np

    from prb_utils.models.embedding import load_encoder

    embed = load_encoder(str(tiny_bert_dir), device="cpu")
    vectors = embed(["the camera", "the camera settings", "cook eggs"])
    assert vectors.shape == (3, 32)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    rm = load_model(f"embedding:{tiny_bert_dir}", device="cpu")
    score = rm.score_pairs([PairInput("k", "the camera", "the camera settings", "cook eggs")])[0]
    assert float(vectors[1] @ vectors[0]) == pytest.approx(score.score_chosen, abs=1e-5)
