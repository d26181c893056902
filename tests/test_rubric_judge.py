"""Rubric judges: prompt, parser, bounded retries with recorded failures, and the labelled proxy."""

from __future__ import annotations

import html
import math
import os
from pathlib import Path

import pytest

from prb_utils.downstream.rubric_judge import (
    ASPECT_ANSWER_PREFIX,
    JUDGE_SYSTEM,
    PROXY_NAME,
    AspectRubricJudge,
    JudgeItem,
    LLMRubricJudge,
    build_aspect_prompt,
    build_judge_prompt,
    check_judge_spec,
    expected_verdict,
    judge_label,
    judge_protocol,
    load_judge,
    parse_judge_output,
    results_frame,
)
from prb_utils.errors import PRBError

ASPECTS = ({"aspect": "Suggests budget options", "evidence": "SECRET-EVIDENCE", "reason": "Money is tight"},
           {"aspect": "Gives step-by-step instructions", "evidence": "x", "reason": "Is a beginner"})


def test_prompt_shows_aspects_and_reasons_only():
    text = build_judge_prompt("How do I start?", "Buy a used one.", ASPECTS)
    assert "How do I start?" in text and "Buy a used one." in text
    assert "1. Suggests budget options (why it matters to this user: Money is tight)" in text
    assert "2. Gives step-by-step instructions (why it matters to this user: Is a beginner)" in text
    assert "SECRET-EVIDENCE" not in text
    assert "list of 2 integers" in text
    with pytest.raises(PRBError):
        build_judge_prompt("q", "a", [])


@pytest.mark.parametrize(
    "text, n, scores",
    [("[2, 1]", 2, [2, 1]), ("Scores: [0,2,1] done", 3, [0, 2, 1]), ("1, 2", 2, [1, 2]),
     ("<think>[9]</think> [2, 2]", 2, [2, 2]), ("[2.0, 0]", 2, [2, 0])],
)
def test_parser_accepts(text, n, scores):
    assert parse_judge_output(text, n) == (scores, None)


@pytest.mark.parametrize(
    "text, n, reason",
    [("I think it is good", 2, "no list"), ("[2, 1, 0]", 2, "3 scores for 2"), ("[3, 1]", 2, "not 0, 1 or 2"),
     ("[a, b]", 2, "not a number"), ("[]", 1, "0 scores"), ("[-1, 2]", 2, "not 0, 1 or 2")],
)
def test_parser_rejects(text, n, reason):
    scores, error = parse_judge_output(text, n)
    assert scores is None and reason in error


class Scripted:
    """A fake generate(): per attempt, a function of the prompt index -> reply."""

    def __init__(self, per_attempt):
        self.per_attempt = per_attempt
        self.calls = []

    def __call__(self, prompts, attempt):
        self.calls.append((attempt, len(prompts)))
        return [self.per_attempt[attempt](p) for p in prompts]


def items(n):
    return [JudgeItem(f"k{i}", f"Question {i}?", f"Answer {i}.", ASPECTS) for i in range(n)]


def test_retries_only_failed_items_then_records_failures():
    gen = Scripted([
        lambda p: "[2, 2]" if "Question 0?" in p else "unsure",
        lambda p: "[1, 0]" if "Question 1?" in p else "still unsure",
        lambda p: "nope",
    ])
    judge = LLMRubricJudge(gen, name="fake", max_retries=2)
    res = judge.judge(items(3))
    assert gen.calls == [(0, 3), (1, 2), (2, 1)]  # bounded, and only the failed ones are asked again
    assert [r.key for r in res] == ["k0", "k1", "k2"]
    assert res[0].quality == 1.0 and res[0].attempts == 1 and not res[0].failed
    assert res[1].quality == 0.25 and res[1].attempts == 2 and res[1].aspect_scores == [1.0, 0.0]
    assert res[2].failed and math.isnan(res[2].quality) and res[2].attempts == 3
    assert res[2].raw == "nope" and "no list" in res[2].error
    frame = results_frame(res)
    assert frame["failed"].tolist() == [False, False, True]
    assert not frame["judge_proxy"].any()


def test_no_retries():
    gen = Scripted([lambda p: "bad"])
    res = LLMRubricJudge(gen, name="fake", max_retries=0).judge(items(2))
    assert all(r.failed for r in res) and gen.calls == [(0, 2)]
    with pytest.raises(PRBError):
        LLMRubricJudge(gen, name="fake", max_retries=-1)


def test_load_judge_rejects_unknown():
    with pytest.raises(PRBError, match="Unknown rubric judge"):
        load_judge("oracle")


def test_proxy_judge_is_labelled_and_prefers_on_topic_answers():
    judge = load_judge("proxy")
    assert judge.proxy and judge.name == PROXY_NAME
    aspects = ({"aspect": "Recommends cheap second-hand equipment", "reason": "small budget"},)
    on_topic = "Buy cheap used equipment second-hand; it costs much less than new gear."
    off_topic = "The history of the Roman empire spans many centuries of politics."
    res = judge.judge([JudgeItem("a", "q", on_topic, aspects), JudgeItem("b", "q", off_topic, aspects)])
    assert all(r.proxy and r.judge == PROXY_NAME for r in res)
    assert 0.0 <= res[1].quality < res[0].quality <= 1.0
    assert "proxy" in judge_label(res[0].judge, res[0].proxy)
    assert results_frame(res)["judge_proxy"].all()


def test_aspect_prompt_shows_one_aspect_and_its_reason_last():
    text = build_aspect_prompt("Which camera?", "Try the X100.", ASPECTS[0])
    assert "SECRET-EVIDENCE" not in text and "Gives step-by-step" not in text
    assert text.index("Try the X100.") < text.index("Suggests budget options") < text.index("Money is tight")
    other = build_aspect_prompt("Which camera?", "Try the X100.", ASPECTS[1])
    shared = len(os.path.commonprefix([text, other]))
    assert text[:shared].endswith("The aspect: ")   # the prompts of one answer differ only from the aspect on
    with pytest.raises(PRBError, match="empty"):
        build_aspect_prompt("Q?", "A.", {"aspect": " "})


def test_aspect_judge_verdicts_are_the_models_next_token_probabilities(tiny_lm_dir):
    """The shared-prefix runner gives the probabilities a plain forward pass of each whole prompt gives."""
    import torch

    from prb_utils.models.generation import ChatGenerator
    from prb_utils.models.judge import letter_ids

    judge = AspectRubricJudge.from_pretrained(str(tiny_lm_dir), device="cpu")
    items = [JudgeItem("k1", "which camera for kids indoors ?", "use auto mode and a fast shutter speed", ASPECTS),
             JudgeItem("k2", "cheap pan for eggs ?", "a nonstick pan", ASPECTS[:1])]
    results = judge.judge(items)
    gen = ChatGenerator(str(tiny_lm_dir), device="cpu")
    digits = [letter_ids(gen.tokenizer, d) for d in "012"]
    for item, result in zip(items, results, strict=True):
        assert result.key == item.key and not result.failed and len(result.aspect_scores) == len(item.aspects)
        assert result.quality_expected == pytest.approx(
            sum(expected_verdict(p) for p in result.p_verdicts) / (2 * len(item.aspects)))
        for aspect, probs, score in zip(item.aspects, result.p_verdicts, result.aspect_scores, strict=True):
            text = gen.render(build_aspect_prompt(item.question, item.answer, aspect), JUDGE_SYSTEM)
            ids = gen.tokenizer(text + ASPECT_ANSWER_PREFIX, return_tensors="pt", add_special_tokens=False)
            with torch.no_grad():
                p = torch.softmax(gen.model(**ids).logits[0, -1].float(), -1)
            expected = [float(p[i].sum()) for i in digits]
            assert probs == pytest.approx(expected, abs=1e-5)
            assert score == max(range(3), key=lambda d: expected[d])
        assert result.quality == sum(result.aspect_scores) / (2 * len(item.aspects))


def test_judge_specs_and_their_cache_protocols():
    assert check_judge_spec("llm-all:smollm2") == ("llm-all", "smollm2")
    with pytest.raises(PRBError, match="llm:NAME"):
        check_judge_spec("llm:")
    assert judge_protocol("llm:x") != judge_protocol("llm-all:x") != judge_protocol("proxy")
    assert judge_label("llm:smollm2", False).endswith("weak judge (a 135M model)")
    assert judge_label("llm:Qwen/Qwen2.5-32B-Instruct", False) == "llm:Qwen/Qwen2.5-32B-Instruct"


def test_the_reference_judge_is_the_benchmarks_own_prompt_byte_for_byte():
    """prompts/evaluation.txt of github.com/Martin-qyma/Personalized-RewardBench at d8a0cdaa (929 characters,
    read with .strip() as BoN/evaluate.py reads it) has this SHA-256; the system message is the script's."""
    import hashlib

    from prb_utils.downstream.rubric_judge import REFERENCE_JUDGE_PROMPT, REFERENCE_JUDGE_SYSTEM

    assert len(REFERENCE_JUDGE_PROMPT) == 929
    assert hashlib.sha256(REFERENCE_JUDGE_PROMPT.encode()).hexdigest() == \
        "8dc668fadab47db98e48267081852894d654064f5c6c6b9d2ee101af794b0230"
    assert REFERENCE_JUDGE_SYSTEM == "You are a fair and insightful judge."


def test_the_reference_judge_reads_replies_as_the_script_does(tiny_lm_dir):
    from prb_utils.downstream.rubric_judge import JUDGE_PROTOCOLS, load_judge, reference_scores

    assert reference_scores("[2, 0, 1.5]") == ([2.0, 0.0, 1.5], True)
    assert reference_scores("I give 2 and 1") == ([2.0, 1.0], True)   # no list: any numbers, as the script
    judge = load_judge(f"llm-ref:{tiny_lm_dir}", device="cpu")
    result = judge.judge([JudgeItem("k", "which camera for kids ?", "use auto mode", ASPECTS)])[0]
    assert result.judge == f"llm-ref:{tiny_lm_dir}" and not result.failed
    assert result.quality == pytest.approx(sum(result.aspect_scores) / len(result.aspect_scores) / 2)
    assert "verbatim" in JUDGE_PROTOCOLS["llm-ref"] and "not LaMP-QA's evaluator" in JUDGE_PROTOCOLS["llm"]


def test_the_lampqa_judge_is_lampqas_evaluator_byte_for_byte():
    """_EVAL_PROMPT_SYSTEM and _EVAL_PROMPT_USER of evaluation/evaluator.py in github.com/LaMP-Benchmark/LaMP-QA
    at 504410d0 have these SHA-256s; the aspect is formatted as its create_eval_prompt does."""
    import hashlib

    from prb_utils.downstream.rubric_judge import LAMPQA_JUDGE_PROMPT, LAMPQA_JUDGE_SYSTEM, lampqa_prompt

    assert hashlib.sha256(LAMPQA_JUDGE_SYSTEM.encode()).hexdigest() == \
        "92d6eadb76cb860a2990892b983e9a556c38673ce03969d6b57edc19cd03a27d"
    assert hashlib.sha256(LAMPQA_JUDGE_PROMPT.encode()).hexdigest() == \
        "024342ac9b81b68c936e47b0fa880f2d0a05737c7eab4d3a26d6e51bde3ee594"
    prompt = lampqa_prompt("Q?", "I teach kids.", "Use auto mode.",
                           {"aspect": "Simple", "reason": "for kids", "evidence": "I teach kids."})
    assert "details: I teach kids.\n" in prompt
    assert "aspect: -aspect: Simple\n    -reason: for kids\n    -evidence: I teach kids.\n" in prompt


def test_the_lampqa_judge_asks_unreadable_replies_again_hotter_then_scores_them_zero():
    from prb_utils.downstream.rubric_judge import LampQARubricJudge, lampqa_score

    assert lampqa_score('```json\n{"match_score": 1}\n```') == 1.0
    assert lampqa_score('{"match_score": "2"}') == 2.0 and lampqa_score('{"score": 2}') is None
    calls = []

    def generate(prompts, temperature, seed):
        calls.append((len(prompts), round(temperature, 10), seed))
        # the first aspect is readable at once; the second never is
        return ['{"match_score": 2}' if "-aspect: camera" in p else "I think it is fine." for p in prompts]

    judge = LampQARubricJudge(generate, name="llm-lampqa:scripted", max_retries=3)
    aspects = ({"aspect": "camera", "reason": "r", "evidence": "e"}, {"aspect": "budget", "reason": "r"})
    result = judge.judge([JudgeItem("k", "Q?", "A.", aspects, details="story")])[0]
    assert calls == [(2, 0.0, 1), (1, 0.1, 2), (1, 0.2, 3), (1, 0.3, 4)]  # only the unread aspect is asked again
    assert result.aspect_scores == [2.0, 0.0] and result.quality == pytest.approx(0.5)
    assert "unreadable after 3 retries" in result.error and not result.failed


def test_the_lampqa_judge_runs_a_real_model_and_is_a_protocol_of_its_own(tiny_lm_dir):
    from prb_utils.downstream.rubric_judge import (
        JUDGE_PROTOCOLS,
        check_judge_spec,
        judge_protocol,
        load_judge,
    )

    assert check_judge_spec("llm-lampqa:smollm2") == ("llm-lampqa", "smollm2")
    assert judge_protocol("llm-lampqa:x") not in {judge_protocol("llm:x"), judge_protocol("llm-ref:x")}
    assert "LaMP-QA's evaluator, verbatim" in JUDGE_PROTOCOLS["llm-lampqa"]
    judge = load_judge(f"llm-lampqa:{tiny_lm_dir}", device="cpu")
    judge.max_retries = 0  # one greedy round: a random tiny model writes no JSON, so every aspect scores 0
    result = judge.judge([JudgeItem("k", "which camera for kids ?", "use auto mode", ASPECTS, details="I teach")])[0]
    assert result.judge == f"llm-lampqa:{tiny_lm_dir}" and len(result.aspect_scores) == len(ASPECTS)
    assert result.quality == pytest.approx(sum(result.aspect_scores) / (2 * len(ASPECTS)))


def test_a_judge_item_is_keyed_by_everything_a_judge_reads():
    from prb_utils.downstream.rubric_judge import judge_item

    record = {"question": "Q?", "narrative": "N", "rubric_aspects": [{"aspect": "x", "reason": "r", "evidence": "e"}]}
    base = judge_item(record, "A.")
    assert base.aspects[0]["evidence"] == "e" and base.details == "N"
    changed = [judge_item({**record, "narrative": "M"}, "A.").key, judge_item(record, "B.").key,
               judge_item({**record, "rubric_aspects": [{"aspect": "x", "reason": "r", "evidence": "f"}]}, "A.").key]
    assert base.key not in changed and len(set(changed)) == 3


def test_each_protocol_is_named_for_what_it_is_and_its_quality_read_as_it_reads_it():
    """``llm:`` and ``llm-all:`` are prb's own prompts (LaMP-QA's evaluator is ``llm-lampqa:``, the reference
    scripts' judge ``llm-ref:``), and the page states each protocol's own reading of an answer's quality: the
    rules of QUALITY_RULES only for the per-aspect judge that keeps verdict probabilities."""
    import pandas as pd

    from prb_utils.downstream import rubric_judge
    from prb_utils.downstream.results import BonResults
    from prb_utils.notebook.downstream_page import bon_how_judged

    module = rubric_judge.__doc__
    for kind in rubric_judge.RUBRIC_JUDGES.values():
        assert f"``{kind.form}``" in module or kind.name == "proxy"   # every protocol is listed
    assert "LaMP-QA's protocol" not in module and "reference scripts' variant" not in module
    assert not AspectRubricJudge.__doc__.startswith("LaMP-QA's")
    assert "prb's own prompt" in AspectRubricJudge.__doc__
    assert "because" not in rubric_judge.QUALITY_RULES["expected"]   # a rule asked for needs no flat judge

    def run(judge: str, rule: str) -> str:
        frame = pd.DataFrame({"model": "rm", "subset": "s", "id": "1", "judge": judge, "judge_proxy": False,
                              "quality_rule": rule}, index=[0])
        return html.unescape(bon_how_judged(BonResults(Path("bon"), frame)))   # as a reader sees the escaped text

    assert "most probable verdict" in run("llm:x", "argmax") and "expected verdict" in run("llm:x", "expected")
    reference = run("llm-ref:x", "argmax")
    assert "most probable" not in reference and "as the reference script reads it" in reference
    assert "benchmark's reference judge" in reference
    assert "match_score" in run("llm-lampqa:x", "argmax") and "LaMP-QA's evaluator" in run("llm-lampqa:x", "argmax")
    assert "unparsed reply is a failure" in run("llm-all:x", "argmax")
