"""Every adapter kind on tiny random models: scores as defined, batch-size invariance, NaN faithfulness."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

from prb_utils.models import ModelOptions, PairInput, PairScore, RewardModel, load_model
from prb_utils.models.lm import CostModel
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


@pytest.fixture(scope="module")
def bert_cls_dir(tmp_path_factory):
    """A BERT classifier with a trained-shape head and no chat template (the fallback format)."""
    import tiny_models

    return tiny_models.build_bert_classifier(tmp_path_factory.mktemp("bert_cls"), chat_template=False)


def _specs(tiny_lm_dir, tiny_classifier_dir, tiny_bert_dir, bert_cls_dir):
    return [f"classifier:{tiny_classifier_dir}", f"classifier:{bert_cls_dir}", f"judge:{tiny_lm_dir}",
            f"implicit:{tiny_lm_dir}", f"embedding:{tiny_bert_dir}"]


def test_every_kind_is_batch_size_invariant(pairs, tiny_lm_dir, tiny_classifier_dir, tiny_bert_dir, bert_cls_dir):
    for spec in _specs(tiny_lm_dir, tiny_classifier_dir, tiny_bert_dir, bert_cls_dir):
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
        on.runner.cost = CostModel(overhead=0)   # tiny pairs: reuse whenever it saves a token (no pass cost)
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


def _embedding_chunk(n: int = 4) -> list[PairInput]:
    """Pairs whose RM inputs are far over the tiny BERT's 128 positions (a profile-long user turn)."""
    return [PairInput(f"s/long{i}", " ".join(list(WORDS[i:]) + list(WORDS) * 40 + ["question", str(i)]),
                      _text(i, 6), _text(i + 1, 5)) for i in range(n)]


def test_embedding_cuts_long_rm_inputs_from_their_tails_with_the_ids_the_whole_text_gives(tiny_bert_dir):
    """Only a tail of each long RM input is tokenized (the first one, checked, whole too); its ids are the
    tokenizer's own left cut of the whole text, and the scores are those of whole-text cutting."""
    rm = load_model(f"embedding:{tiny_bert_dir}", device="cpu")
    chunk = _embedding_chunk()
    calls = []
    real = rm.tokenizer.__class__.__call__
    rm.tokenizer.__class__.__call__ = lambda self, text, **kw: calls.append(text) or real(self, text, **kw)
    try:
        prepared = rm.prepare(chunk)
    finally:
        rm.tokenizer.__class__.__call__ = real
    for p in chunk:
        assert prepared.texts[("prompt", p.prompt)] == (rm._cut([p.prompt], keep="left")[0], True)
    assert rm.fit_counts["tail"] == len(chunk) and rm.fit_counts["checked"] == 1 and rm._fits_tails
    texts = [t for c in calls for t in (c if isinstance(c, list) else [c])]
    assert sum(t == chunk[0].prompt for t in texts) == 1 and not any(p.prompt in texts for p in chunk[1:])
    whole = load_model(f"embedding:{tiny_bert_dir}", device="cpu")
    whole._fits_tails = False
    for tailed, cut in zip(rm.run(prepared), whole.score_pairs(chunk), strict=True):
        assert (tailed.score_chosen, tailed.score_rejected) == pytest.approx((cut.score_chosen, cut.score_rejected),
                                                                               abs=1e-6)
        assert tailed.extra == cut.extra


def test_embedding_tails_that_differ_from_the_whole_cut_are_caught_and_cut_whole(tiny_bert_dir):
    """A tokenizer whose tail ids differ from the whole text's (simulated: the whole cut gains a token) is caught
    by the check: tails are switched off and every RM input gets the whole text's cut."""
    rm = load_model(f"embedding:{tiny_bert_dir}", device="cpu")
    real = rm._cut
    rm._cut = lambda texts, *, keep: [ids[:-1] + [0] + ids[-1:] for ids in real(texts, keep=keep)]
    chunk = _embedding_chunk()
    prepared = rm.prepare(chunk)
    assert rm._fits_tails is False and rm.fit_counts["tail"] == 0
    assert all(prepared.texts[("prompt", p.prompt)] == (rm._cut([p.prompt], keep="left")[0], True) for p in chunk)


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


# ------------------------------------------------------------------ special tokens (--tokenization)


def test_encoder_classifier_with_a_chat_template_gets_cls_and_sep(pairs, tmp_path):
    import tiny_models
    from transformers import AutoModelForSequenceClassification

    folder = tiny_models.build_bert_classifier(tmp_path / "bert_cls")
    tok = AutoTokenizer.from_pretrained(str(folder))
    rm = load_model(f"classifier:{folder}", device="cpu")
    assert rm.run_metadata()["chat_template"] == "model"
    for seq in rm._sequences(pairs[0])[0]:
        assert seq[0] == tok.cls_token_id and seq[-1] == tok.sep_token_id and seq.count(tok.cls_token_id) == 1
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    text = render_chat(tok, pairs[0].prompt, pairs[0].chosen)
    with torch.no_grad():   # the reference loop: tokenizer(text) with its default special tokens
        expected = model(**tok(text, return_tensors="pt")).logits[0, 0].item()
    assert rm.score_pairs(pairs[:1])[0].score_chosen == pytest.approx(expected, abs=1e-5)


def _bos_counts(rm, pair, bos):
    seqs = rm._sequences(pair)[0]
    return [len(s) - len([t for t in s if t != bos]) for s in seqs], [s[0] == bos for s in seqs]


@pytest.fixture(scope="module")
def bos_dirs(tmp_path_factory):
    """Tokenizers that add <s>: with a template that writes <s> itself (Llama-3 style) and without."""
    import tiny_models

    root = tmp_path_factory.mktemp("bos_models")
    return {"cls": tiny_models.build_sequence_classifier(root / "cls", add_bos=True, template_bos=True),
            "lm": tiny_models.build_causal_lm(root / "lm", add_bos=True, template_bos=True),
            "lm_plain_template": tiny_models.build_causal_lm(root / "lm2", add_bos=True)}


def test_template_writing_bos_gets_one_bos_in_auto_and_two_in_reference(pairs, bos_dirs):
    tok = AutoTokenizer.from_pretrained(str(bos_dirs["cls"]))
    bos = tok.bos_token_id
    for spec in (f"classifier:{bos_dirs['cls']}", f"implicit:{bos_dirs['lm']}", f"judge:{bos_dirs['lm']}"):
        auto = load_model(spec, device="cpu")
        counts, first = _bos_counts(auto, pairs[0], bos)
        assert counts == [1, 1] and all(first), spec
        assert auto.run_metadata()["tokenization"] == "auto"
    ref = load_model(f"classifier:{bos_dirs['cls']}", device="cpu", tokenization="reference")
    assert _bos_counts(ref, pairs[0], bos)[0] == [2, 2]
    assert ref.run_metadata()["tokenization"] == "reference"
    text = render_chat(tok, pairs[0].prompt, pairs[0].chosen)
    assert ref._sequences(pairs[0])[0][0] == tok(text)["input_ids"]     # exactly the reference tokenization
    assert _bos_counts(load_model(f"implicit:{bos_dirs['lm']}", device="cpu", tokenization="reference"),
                       pairs[0], bos)[0] == [2, 2]
    # the reference judge (vLLM's LLM.chat) adds no special tokens: the template's own BOS only
    assert _bos_counts(load_model(f"judge:{bos_dirs['lm']}", device="cpu", tokenization="reference"),
                       pairs[0], bos)[0] == [1, 1]
    scores = [load_model(f"classifier:{bos_dirs['cls']}", device="cpu", tokenization=t).score_pairs(pairs[:1])[0]
              for t in ("auto", "reference")]
    assert scores[0].score_chosen != scores[1].score_chosen


def test_auto_adds_the_bos_a_template_leaves_out(pairs, bos_dirs):
    tok = AutoTokenizer.from_pretrained(str(bos_dirs["lm_plain_template"]))
    for kind in ("implicit", "judge"):
        rm = load_model(f"{kind}:{bos_dirs['lm_plain_template']}", device="cpu")
        assert _bos_counts(rm, pairs[0], tok.bos_token_id) == ([1, 1], [True, True]), kind


def test_tokenization_is_in_the_job_key_and_checked(tiny_lm_dir):
    from prb_utils.errors import PRBError
    from prb_utils.scoring import job_options

    for kind in ("classifier", "judge", "implicit"):
        assert job_options(kind, "none")["tokenization"] == "auto"
        assert job_options(kind, "none", ModelOptions(tokenization="reference")) != job_options(kind, "none")
    assert "tokenization" not in job_options("embedding", "none")
    with pytest.raises(PRBError, match="tokenization"):
        load_model(f"implicit:{tiny_lm_dir}", device="cpu", tokenization="bos")


# ------------------------------------------------------------------ the judge's reference prompt


def test_reference_judge_template_sends_the_reference_system_message(pairs, tiny_lm_dir):
    from prb_utils.models.prompts import REFERENCE_SYSTEM

    rm = load_model(f"judge:{tiny_lm_dir}", device="cpu", judge_template="reference")
    text = rm.prompt_text("the camera", "x", "y")
    assert text.startswith(f"<|system|> {REFERENCE_SYSTEM} <|end|>\n<|user|> User's current question:")
    assert "Response A:\n```\nx\n```" in text and text.rstrip().endswith("**Result:**")
    meta = rm.run_metadata()
    assert meta["judge_template"] == "reference"
    assert meta["judge_template_hash"] != load_model(f"judge:{tiny_lm_dir}", device="cpu").run_metadata()[
        "judge_template_hash"]
    assert math.isfinite(rm.score_pairs(pairs[:1])[0].score_chosen)


# ------------------------------------------------------------------ kind/checkpoint mismatch


def test_causal_lm_as_classifier_is_refused_unless_allowed(pairs, tiny_lm_dir):
    from prb_utils.errors import PRBError

    with pytest.raises(PRBError, match=r"not a classifier checkpoint.*score\.weight") as caught:
        load_model(f"classifier:{tiny_lm_dir}", device="cpu")
    assert str(tiny_lm_dir) in str(caught.value) and str(caught.value).count(". ") == 0   # one sentence
    rm = load_model(f"classifier:{tiny_lm_dir}", device="cpu", allow_untrained_head=True)
    meta = rm.run_metadata()
    assert meta["untrained_head"] is True and meta["newly_initialized"] == ["score.weight"]
    assert math.isfinite(rm.score_pairs(pairs[:1])[0].score_chosen)


def test_reward_model_as_judge_is_refused_and_trained_heads_say_so(tiny_classifier_dir, tiny_lm_dir,
                                                                   tiny_bert_dir):
    from prb_utils.errors import PRBError

    for kind in ("judge", "implicit"):
        with pytest.raises(PRBError, match=r"lm_head\.weight"):
            load_model(f"{kind}:{tiny_classifier_dir}", device="cpu")
    for spec in (f"classifier:{tiny_classifier_dir}", f"judge:{tiny_lm_dir}", f"embedding:{tiny_bert_dir}"):
        meta = load_model(spec, device="cpu").run_metadata()
        assert meta["untrained_head"] is False and meta["newly_initialized"] == [], spec


def test_cli_refuses_a_mismatched_kind_with_exit_2(tiny_lm_dir, tmp_path, capsys):
    from prb_utils.cli import main

    code = main(["score", "--data", "sample", "--limit", "1", "--model", f"classifier:{tiny_lm_dir}",
                 "--device", "cpu", "--out", str(tmp_path / "r"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "score.weight" in err and "Traceback" not in err
    code = main(["score", "--data", "sample", "--limit", "1", "--model", f"classifier:{tiny_lm_dir}",
                 "--device", "cpu", "--out", str(tmp_path / "r"), "--no-progress", "--allow-untrained-head",
                 "--tokenization", "reference"])
    assert code == 0


def test_the_classification_head_runs_in_float32_so_close_logits_do_not_tie(tiny_classifier_dir):
    """Two final states whose logits differ by 1 at 256: bfloat16 cannot tell 257 from 256 (a false tie)."""
    from prb_utils.models.lm import Group

    rm = load_model(f"classifier:{tiny_classifier_dir}", device="cpu", dtype="bfloat16")
    assert rm.model.score.weight.dtype == torch.bfloat16
    width = rm.model.score.weight.shape[1]
    with torch.no_grad():
        rm.model.score.weight.zero_()
        rm.model.score.weight[0, :2] = 1.0
    chosen, rejected = torch.zeros(1, width, dtype=torch.bfloat16), torch.zeros(1, width, dtype=torch.bfloat16)
    chosen[0, :2] = torch.tensor([256.0, 1.0])
    rejected[0, 0] = 256.0
    assert rm.model.score(chosen).item() == rm.model.score(rejected).item()   # the bfloat16 head ties
    group = Group(((1, 2), (1, 3)), (1, 1))
    assert rm._head(group, [chosen, rejected]).tolist() == [257.0, 256.0]


@pytest.mark.parametrize("kind", ["classifier", "judge", "implicit"])
def test_batch_tokenization_gives_each_pairs_own_tokens(pairs, tiny_lm_dir, tiny_classifier_dir, kind):
    """The chunk's one tokenizer call gives exactly the per-pair token ids, truncated pairs included."""
    folder = tiny_classifier_dir if kind == "classifier" else tiny_lm_dir
    rm = load_model(f"{kind}:{folder}", device="cpu")
    long_prompt = " ".join(WORDS * 30)   # over the tiny model's 256 tokens: cut from the left
    chunk = [*pairs, PairInput("s/long", long_prompt, "the camera", "the photo")]
    many = rm._sequences_many(chunk)
    assert many == [rm._sequences(p) for p in chunk]
    assert many[-1][-1] is True and not any(item[-1] for item in many[:-1])   # only the long pair is truncated
    assert [s.score_chosen for s in rm.run(rm.prepare(chunk))] == [s.score_chosen for s in rm.score_pairs(chunk)]


def _prompt_prefix_classifier(folder, *, metaspace_first: bool):
    """A tiny classifier whose chat template's generation prompt is a prefix of the whole chat (as SmolLM2's
    and Llama-3's are), with a Whitespace or a Metaspace(prepend_scheme="first") pre-tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForSequenceClassification, PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    raw.pre_tokenizer = (pre_tokenizers.Metaspace(prepend_scheme="first") if metaspace_first
                         else pre_tokenizers.Whitespace())
    specials = ["[PAD]", "[UNK]", "<|user|>", "<|assistant|>", "<|end|>"]
    raw.train_from_iterator([" ".join(WORDS), "x " + " ".join(WORDS)],
                            trainer=trainers.WordLevelTrainer(special_tokens=specials))
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="[PAD]", unk_token="[UNK]", model_max_length=256)
    tok.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
                         "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    tok.save_pretrained(str(folder))
    config = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                         pad_token_id=tok.pad_token_id, num_labels=1)
    torch.manual_seed(0)
    LlamaForSequenceClassification(config).save_pretrained(str(folder))
    return folder


def _sequences_recording_calls(rm, pairs) -> tuple[list, list]:
    """``rm._sequences_many(pairs)`` and every text its tokenizer was called with meanwhile."""
    calls = []
    real = rm.tokenizer.__class__.__call__
    rm.tokenizer.__class__.__call__ = lambda self, text, **kw: calls.append(text) or real(self, text, **kw)
    try:
        return rm._sequences_many(pairs), calls
    finally:
        rm.tokenizer.__class__.__call__ = real


@pytest.mark.parametrize("metaspace_first", [False, True])
def test_a_shared_prompt_is_tokenized_once_only_where_that_gives_the_same_ids(pairs, tmp_path, metaspace_first):
    """chosen and rejected share the prompt's ids up to its last special token; a tokenizer that encodes a
    text's first piece apart (Metaspace "first") is caught by the check and tokenized whole instead."""
    rm = load_model(f"classifier:{_prompt_prefix_classifier(tmp_path, metaspace_first=metaspace_first)}",
                    device="cpu")
    many, calls = _sequences_recording_calls(rm, pairs)
    assert many == [rm._sequences(p) for p in pairs]
    assert rm._shares_prompt is (not metaspace_first)
    shared = [c for c in calls if isinstance(c, list) and len(c) == 3 * len(pairs)]
    assert len(shared) == 1   # one call: each prompt once, then the two answers' pieces without it
    assert not any("<|user|>" in t for t in shared[0][len(pairs):])


@pytest.mark.parametrize("metaspace_first", [False, True])
def test_long_pairs_are_fitted_from_their_tails_with_the_ids_whole_fitting_gives(pairs, tmp_path, metaspace_first):
    """A user message far over the context: only its tail is tokenized, and the cut equals fitted()'s (cut from
    the left at a token of the message tokenized alone, rebuilt and measured), for a Whitespace and a
    Metaspace("first") pre-tokenizer alike; only the first pair, checked against fitted(), is tokenized whole."""
    rm = load_model(f"classifier:{_prompt_prefix_classifier(tmp_path, metaspace_first=metaspace_first)}",
                    device="cpu")
    words = WORDS * 40
    chunk = [PairInput(f"s/long{i}", " ".join(words[i:] + ["question", str(i)]), p.chosen, p.rejected)
             for i, p in enumerate(pairs)]
    many, calls = _sequences_recording_calls(rm, chunk)
    assert many == [rm._sequences(p) for p in chunk]
    assert all(truncated and max(map(len, seqs)) <= rm.max_length for seqs, truncated in many)
    assert rm.fit_counts["checked"] == 1 and rm.fit_counts["tail"] == len(chunk) and rm._fits_tails
    texts = [t for c in calls for t in (c if isinstance(c, list) else [c])]
    assert any(chunk[0].prompt in t for t in texts)
    assert not any(p.prompt in t for p in chunk[1:] for t in texts)


def test_tails_that_place_the_cut_elsewhere_than_whole_fitting_are_caught_and_fitted_whole(pairs, tmp_path):
    """Where the template's tokens around a short piece differ from those around the whole message (simulated:
    one more token for short messages), the tail would cut one token late; the check against fitted() finds it,
    tails are switched off, and every pair gets fitted()'s ids."""
    rm = load_model(f"classifier:{_prompt_prefix_classifier(tmp_path, metaspace_first=False)}", device="cpu")
    real = rm._build_many

    def build_many(users, chunk):
        return [[s + [0] for s in seqs] if len(u) < 200 else seqs for u, seqs in zip(users, real(users, chunk), strict=True)]

    rm._build_many = build_many
    words = WORDS * 40
    chunk = [PairInput(f"s/long{i}", " ".join(words[i:]), p.chosen, p.rejected) for i, p in enumerate(pairs)]
    many = rm._sequences_many(chunk)
    assert rm._fits_tails is False and rm.fit_counts["reference"] == len(chunk)
    assert many == [rm._sequences(p) for p in chunk]
