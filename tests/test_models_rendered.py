"""What the RM saw (prb_utils.models.rendered): the texts shown are the texts the scorer tokenizes, on tiny models
built in code, and a cut input is marked where it was cut."""

from __future__ import annotations

import pytest

from prb_utils.models.base import PairInput
from prb_utils.models.registry import ModelOptions, load_model
from prb_utils.models.rendered import CUT_MARK, render_pair, rendered_input

SHORT = PairInput("S/a", "the camera question", "use the auto mode", "press the shutter button")
#: a user message far over the tiny models' 256 tokens: old posts first, the question at its end
LONG = PairInput("S/b", " ".join(["the kids photo settings"] * 120) + " then the camera question ?",
                 "use the auto mode", "press the shutter button")


@pytest.fixture(scope="module")
def decoders(tiny_lm_dir, tiny_classifier_dir):
    options = ModelOptions(device="cpu")
    return {spec: load_model(spec, options) for spec in
            (f"judge:{tiny_lm_dir}", f"implicit:{tiny_lm_dir}", f"classifier:{tiny_classifier_dir}")}


def test_the_rendered_texts_are_the_ids_the_scorer_computes(decoders):
    for spec, rm in decoders.items():
        continued = rm.kind != "classifier"
        for pair in (SHORT, LONG):
            shown = render_pair(rm, pair)
            scored = rm._prepare([pair]).sequences[0][0]   # the scorer's own host work: the ids it runs
            assert [rm.encode(t.text, continued=continued) for t in shown.texts] == scored, (spec, pair.key)
            assert [t.n_tokens for t in shown.texts] == [len(ids) for ids in scored]
            assert [t.label for t in shown.texts] == list(rm.input_labels)
        assert "chat template" in render_pair(rm, SHORT).note


def test_a_cut_user_message_is_marked_where_it_was_cut(decoders):
    for spec, rm in decoders.items():
        assert not render_pair(rm, SHORT).truncated
        shown = render_pair(rm, LONG)
        assert shown.truncated, spec
        for text in shown.texts:
            assert "characters of the user message were dropped to fit" in text.cut
            kept = text.text[text.cut_at:]
            assert LONG.prompt not in text.text and "camera question ?" in kept   # the question stays
            assert any(kept.startswith(LONG.prompt[i:]) for i in range(1, len(LONG.prompt)))   # the message's end
            assert text.marked().count(CUT_MARK) == 1 and text.marked().replace(CUT_MARK, "") == text.text


def test_the_judge_shows_both_orders_with_the_answers_swapped(decoders, tiny_lm_dir):
    ab, ba = render_pair(decoders[f"judge:{tiny_lm_dir}"], SHORT).texts
    assert ab.text.index(SHORT.chosen) < ab.text.index(SHORT.rejected)
    assert ba.text.index(SHORT.rejected) < ba.text.index(SHORT.chosen)


def test_embedding_shows_the_plain_texts_and_where_the_long_input_was_cut(tiny_bert_dir):
    rm = load_model(f"embedding:{tiny_bert_dir}", ModelOptions(device="cpu"))
    for pair in (SHORT, LONG):
        shown = render_pair(rm, pair)
        prepared = rm._prepare([pair]).texts   # the scorer's ids per distinct text
        assert [t.text for t in shown.texts] == [pair.prompt, pair.chosen, pair.rejected]
        assert [t.n_tokens for t in shown.texts] == [len(prepared[("prompt", pair.prompt)][0]),
                                                     len(prepared[("response", pair.chosen)][0]),
                                                     len(prepared[("response", pair.rejected)][0])]
    rm_input = render_pair(rm, LONG).texts[0]
    assert rm_input.truncated and "only the last" in rm_input.cut
    kept = rm.tokenizer(rm_input.text[rm_input.cut_at:])["input_ids"]
    assert kept == rm._prepare([LONG]).texts[("prompt", LONG.prompt)][0]   # the part after the mark is what it read


def test_weightless_rendering_equals_the_loaded_models(decoders, tiny_lm_dir):
    spec = f"judge:{tiny_lm_dir}"
    assert rendered_input(spec, LONG) == render_pair(decoders[spec], LONG)
    reference = rendered_input(spec, SHORT, ModelOptions(judge_template="reference"))
    assert "You are a fair and insightful judge" in reference.texts[0].text   # the job's template, not the default


def test_baselines_show_what_they_read():
    lexical = rendered_input("lexical", SHORT)
    assert [t.label for t in lexical.texts] == ["the user's words", "chosen", "rejected"]
    assert lexical.texts[0].text == SHORT.prompt and not lexical.truncated and lexical.texts[0].n_tokens is None
    length = rendered_input("length", SHORT)
    assert [t.text for t in length.texts] == [SHORT.chosen, SHORT.rejected] and "characters" in length.note
    assert "### chosen\nuse the auto mode" in length.as_text()
