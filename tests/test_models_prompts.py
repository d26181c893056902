"""Chat rendering (template and fallback), the judge template and verdict parsing."""

from __future__ import annotations

import pytest

from prb_utils.errors import PRBError
from prb_utils.models.prompts import (
    JUDGE_TEMPLATE,
    REFERENCE_SYSTEM,
    REFERENCE_USER,
    chat_template_hash,
    fill_judge_template,
    load_judge_template,
    parse_verdict,
    render_chat,
    with_answer_prefix,
)


def test_fallback_format_without_chat_template():
    assert render_chat(None, "Q?", "R.") == "User: Q?\n\nAssistant: R."
    assert render_chat(None, "Q?") == "User: Q?\n\nAssistant:"
    assert chat_template_hash(None) == "fallback"


def test_chat_template_is_used(tiny_lm_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_lm_dir))
    full = render_chat(tok, "the camera", "the photo")
    prompt = render_chat(tok, "the camera")
    assert full.startswith("<|user|> the camera")
    assert "<|assistant|> the photo" in full
    assert prompt.endswith("<|assistant|>\n")
    assert chat_template_hash(tok) not in ("fallback", "")


def test_answer_prefix_spacing():
    assert with_answer_prefix("x\n") == "x\n**Result:**"
    assert with_answer_prefix("Assistant:") == "Assistant: **Result:**"


def test_default_judge_template_has_the_placeholders():
    for p in ("{question}", "{response_a}", "{response_b}"):
        assert JUDGE_TEMPLATE.count(p) == 1


def test_template_file_overrides_the_default(tmp_path):
    path = tmp_path / "judge.txt"
    path.write_text("Q: {question}\nA: {response_a}\nB: {response_b}\n{not_a_placeholder}", encoding="utf-8")
    template = load_judge_template(str(path))
    assert template.user.startswith("Q: {question}") and template.system is None and template.name == "file"
    filled = fill_judge_template(template.user, question="q {response_a}", response_a="x", response_b="y")
    assert filled == "Q: q {response_a}\nA: x\nB: y\n{not_a_placeholder}"


def test_template_errors_are_user_errors(tmp_path):
    with pytest.raises(PRBError, match="not a file that was found|nor a file"):
        load_judge_template(str(tmp_path / "missing.txt"))
    bad = tmp_path / "bad.txt"
    bad.write_text("{question} {response_a}", encoding="utf-8")
    with pytest.raises(PRBError, match="response_b"):
        load_judge_template(str(bad))


@pytest.mark.parametrize(("text", "expected"), [
    ("**Result:** A", "A"),
    ("I compared them.\n**Result:** B", "B"),
    ("**Result:**B.", "B"),
    ("**Result:** Response A", "A"),
    ("**Result:** A\nwait, **Result:** B", "B"),
    ("**Result: A**", "A"),                  # forms the reference script reads (it strips * and ")
    ("Result: B", "B"),
    ("Result: **B**", "B"),
    ("result: a", "A"),
    ("The result: a tie.", None),            # the article, not a verdict
    ("**Final Result:** A", "A"),
    ("**Reasoning:** B is vague.\n**Result:** A", "A"),
    ("**Result:** \"B\"", "B"),
    ("**Result:** A or B", None),           # ambiguous: both letters
    ("Result: A/B", None),
    ("**Result:** Response A and Response B", None),
    ("Result: A, B", None),
    ("**Result:** Both", None),
    ("A", None),
    ("", None),
])
def test_parse_verdict(text, expected):
    assert parse_verdict(text) == expected


def test_named_templates_default_and_reference():
    assert load_judge_template(None).user == JUDGE_TEMPLATE
    assert load_judge_template("default") == load_judge_template(None)
    ref = load_judge_template("reference")
    assert (ref.name, ref.system, ref.user) == ("reference", REFERENCE_SYSTEM, REFERENCE_USER)
    for p in ("{question}", "{response_a}", "{response_b}"):
        assert ref.user.count(p) == 1
    assert ref.system.startswith("You are a fair and insightful judge.")
    assert ref.system.endswith("**Reasoning:** <feedback evaluating the responses within 100 words>\n"
                               "**Result:** <A or B>")
    filled = fill_judge_template(ref.user, question="q", response_a="x", response_b="y")
    assert filled == "User's current question:\n```\nq\n```\n\nResponse A:\n```\nx\n```\n\nResponse B:\n```\ny\n```"


def test_system_message_is_rendered(tiny_lm_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_lm_dir))
    assert render_chat(tok, "the camera", system="the judge").startswith("<|system|> the judge <|end|>\n<|user|>")
    assert render_chat(None, "q", system="s") == "System: s\n\nUser: q\n\nAssistant:"
