"""Rubric judges: how well an answer covers one user's rubric aspects, as a quality in [0, 1].

- :class:`AspectRubricJudge` (``llm:NAME``, the default LLM judge): prb's per-aspect protocol, after the design
  of LaMP-QA (Salemi & Zamani, 2025, arXiv:2506.00137) but with prb's own prompt (:data:`ASPECT_PROMPT`), not
  LaMP-QA's evaluator (that is ``llm-lampqa:``): one prompt per rubric aspect, one verdict 0/1/2 per aspect
  (0 = not covered, 1 = partly, 2 = fully); quality = sum / (2 x #aspects). The verdict is the most probable of the tokens
  ``0``, ``1``, ``2`` after the answer prefix ``"Score: "`` (greedy decoding restricted to a valid verdict, so
  it never fails to parse); ``extra["mass"]`` records P(0) + P(1) + P(2), how much the model follows the
  format. The three probabilities of every aspect are kept (``p_verdicts``, in the caches too), and with them
  ``quality_expected``, the G-Eval reading (expected verdict, :func:`expected_verdict`): where the most
  probable verdicts rate every answer alike (a weak judge), pages use it and say so (:func:`choose_quality_rule`). The prompts of one answer differ only after the answer, so its shared prefix runs once
  (:class:`~prb_utils.models.lm.DecoderRunner`).
- :class:`LLMRubricJudge` (``llm-all:NAME``): prb's all-aspects prompt (:data:`PROMPT`), not the reference
  scripts' (that is ``llm-ref:``): all aspects in one prompt, the model answers a list of 0/1/2 scores.
  Quality = mean score / 2. An answer that does not parse is asked again (sampled, seeded) up to
  ``max_retries`` times, then recorded as a failure (``failed=True``, quality NaN), never silently as 0.
- :class:`ReferenceRubricJudge` (``llm-ref:NAME``): the benchmark's own Best-of-N judge, verbatim (its prompt,
  system message and reading of the reply; an unreadable reply counts 0, as there).
- :class:`LampQARubricJudge` (``llm-lampqa:NAME``): LaMP-QA's evaluator, verbatim (one JSON ``match_score`` per
  aspect, with the user's narrative and the aspect's reason and evidence).
- :class:`ProxyRubricJudge` (``proxy``): for machines without a real judge. The MiniLM cosine similarity
  between the answer and each aspect, clipped to [0, 1], averaged over aspects. It is a *proxy* (topical
  similarity, not coverage); every result carries ``proxy=True`` and its judge name ``proxy:minilm``, and
  tables and plots label it so. It shares its encoder with the ``embedding:minilm`` RM: BoN agreement of
  that RM with it is circular.

The offline LLM is SmolLM2-135M (``llm:smollm2``): a *weak* judge (:func:`judge_label` says so); real numbers
need a real judge on a GPU, e.g. ``llm:Qwen/Qwen2.5-32B-Instruct``.

>>> text = build_judge_prompt("Q?", "A.", [{"aspect": "Cheap", "reason": "Tight budget"}])
>>> "1. Cheap (why it matters to this user: Tight budget)" in text
True
>>> parse_judge_output("[2, 0]", 2)
([2, 0], None)
>>> print(build_aspect_prompt("Q?", "A.", {"aspect": "Cheap", "reason": "Tight budget"}).split("Answer to grade:")[1])
<BLANKLINE>
A.
<BLANKLINE>
The aspect: Cheap
Why it matters to this user: Tight budget
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import json5
import numpy as np
import pandas as pd

from prb_utils.errors import PRBError
from prb_utils.models.base import spec_of
from prb_utils.models.engines import IN_PROCESS, EngineConfig
from prb_utils.models.fingerprint import model_fingerprint
from prb_utils.models.generation import check_causal_lm
from prb_utils.models.hf import load_pretrained, load_tokenizer, resolve_source
from prb_utils.models.judge import letter_ids
from prb_utils.models.kinds import CAUSAL_LM, ENCODER, loader_kind
from prb_utils.models.registry import ModelOptions
from prb_utils.models.serve.dialect import UnusableResponse
from prb_utils.schema import stable_hash
from prb_utils.store import rows_problem

JUDGE_SYSTEM = "You are a fair and careful judge of answers."
PROXY_NAME = "proxy:minilm"
PROXY_LABEL = "proxy judge (MiniLM similarity, not a rubric judgement; circular with embedding:minilm)"
WEAK_LABEL = "weak judge (a 135M model)"
#: LLM judges that are weak (tables and figures say so): the offline SmolLM2.
WEAK_JUDGES = ("llm:smollm2", "llm-all:smollm2", "llm-ref:smollm2", "llm-lampqa:smollm2")

#: The benchmark's own BoN judge, verbatim: ``prompts/evaluation.txt`` (read with ``.strip()``) and the system
#: message of ``BoN/evaluate.py`` in github.com/Martin-qyma/Personalized-RewardBench at commit d8a0cdaa. The
#: aspects are filled in as their titles joined by ", " (``BoN/sample.py``'s ``format_plan``); the reply is read
#: as that script reads it (the first ``[...]`` list, else any numbers; none: a single 0).
REFERENCE_JUDGE_SYSTEM = "You are a fair and insightful judge."
REFERENCE_JUDGE_PROMPT = (
    "Your task is to assess the answer to the user's current question based on a list of aspects.\n\n"
    "# Input:\n- The user's current question.\n- The answer to be evaluated.\n- A list of aspects to assess.\n\n"
    "# Requirements:\n- For each aspect, assess how well the answer addresses that aspect with respect to the "
    "user\u2019s question.\n- For each aspect, assign a match_score as follows:\n"
    "    0 = The answer does not cover this aspect.\n    1 = The answer somewhat covers this aspect.\n"
    "    2 = The answer covers this aspect very well.\n- Generate a list of scores for each aspect.\n"
    "- Do NOT generate anything else beside the list.\n\n"
    "# Output:\n- Return a list of match_score values, in the same order as the aspects.\n"
    "- Do NOT include anything else, only the list of integers.\n\n"
    "# Data provided:\n- User's current question:\n{question}\n- The answer to be evaluated:\n{answer}\n"
    "- Aspects to refer:\n{aspects}\n\nGenerate the score list following above instructions."
)

#: LaMP-QA's evaluator, verbatim: ``_EVAL_PROMPT_SYSTEM`` and ``_EVAL_PROMPT_USER`` of ``evaluation/evaluator.py``
#: in github.com/LaMP-Benchmark/LaMP-QA at commit 504410d0. One prompt per aspect shows the user's narrative
#: (``details``) and the aspect with its reason and evidence; the reply is a JSON ``match_score`` (0-2).
LAMPQA_JUDGE_SYSTEM = "You are a fair and insightful judge with exceptional reasoning and analytical abilities. Your task is to evaluate a user's question, a generated response to that question, and an aspect that is important to the user. Based on this information, identify if the aspect is addressed in the generated response. Provide a clear and accurate assessment.\n\n# your input:\n    - question: the question asked by the user.\n    - details: the detailed explanation of the question from the user.\n    - response: a generated response to the user's question\n    - aspect: the aspect that is important to the user, consisting of the following fields:\n        - aspect: the title for the aspect.\n        - reason: the reason that this aspect is important for the user.\n        - evidence: the evidence from the user detailed explanation that the aspect extracted from.\n\n# your output: Your output should be only a valid json object in ```json ``` block without any explanations that contains the following fields:\n    - match_score: A score between 0 to 2 that indicates how well the generated response addresses this aspect, where: 0 means the response does not cover this aspect, 1 means the response somewhat covers this aspect, and 2 means the response covers this aspect very well.\n"
LAMPQA_JUDGE_PROMPT = '\nquestion: {question}\ndetails: {details}\nresponse: {response}\naspect: {aspects}\n\nYour output should be only a valid json object in ```json ``` block without any explanations.\n'
LAMPQA_MAX_NEW_TOKENS = 4096  # the evaluator's SamplingParams(max_tokens=4096, top_p=0.95)
LAMPQA_TOP_P = 0.95
LAMPQA_MAX_RETRIES = 100  # unreadable replies are asked again, 0.1 hotter each time up to 1.0; then scored 0

DEFAULT_JUDGE = "llm:smollm2"

PROMPT = """Grade how well an answer serves one particular user. This user expects the answer to cover \
the aspects listed below; each comes with the reason it matters to them.

Question:
{question}

Answer to grade:
{answer}

Aspects:
{aspects}

For each aspect give one score: 0 = the answer does not cover it, 1 = it partly covers it, \
2 = it covers it well.
Reply with only a list of {n} integers in the order of the aspects, in square brackets, and nothing else."""


ASPECT_PROMPT = """Grade how well an answer serves one particular user on one aspect they expect it to cover \
(named after the answer). Score the answer on that aspect only: 0 = the answer does not cover it, \
1 = it partly covers it, 2 = it covers it well. Reply with one digit.

Question:
{question}

Answer to grade:
{answer}

The aspect: {aspect}{reason}"""
ASPECT_ANSWER_PREFIX = "Score: "  # SmolLM2 spells " 2" as a space and a digit
#: The ``error`` of a verdict that failed because the server's response was unusable (no logprobs, no
#: choices): not the answer's fault, so a later run judges it again (as the scorer does with such a pair).
UNUSABLE_VERDICT = "unusable server response"


@dataclass(frozen=True)
class JudgeItem:
    """One answer to grade; ``aspects`` are the record's rubric aspects ({aspect, reason, ...})."""

    key: str
    question: str
    answer: str
    aspects: tuple[Mapping[str, Any], ...]
    details: str = ""  # the user's narrative (LaMP-QA's ``details``); only ``llm-lampqa`` shows it


def judge_item(record: Mapping[str, Any], answer: str) -> JudgeItem:
    """The item a judge grades for one answer to a benchmark record, keyed by everything a judge may read:
    the question, the answer, the rubric aspects (title, reason, evidence) and the user's narrative.

    >>> item = judge_item({"question": "Q?", "narrative": "N", "rubric_aspects": [{"aspect": "x", "reason": "r"}]}, "A.")
    >>> item.aspects, item.details, len(item.key)
    (({'aspect': 'x', 'reason': 'r', 'evidence': ''},), 'N', 16)
    """
    aspects = tuple({"aspect": str(a.get("aspect", "") or ""), "reason": str(a.get("reason", "") or ""),
                     "evidence": str(a.get("evidence", "") or "")}
                    for a in (dict(a) for a in (record.get("rubric_aspects") or [])))
    question, details = str(record["question"]), str(record.get("narrative") or "")
    return JudgeItem(stable_hash([question, answer, list(aspects), details]), question, answer, aspects,
                     details=details)


@dataclass
class JudgeResult:
    key: str
    quality: float                      # [0, 1]; NaN when failed
    aspect_scores: list[float] | None   # 0/1/2 per aspect (LLM) or similarity per aspect (proxy)
    failed: bool
    attempts: int
    judge: str
    proxy: bool
    raw: str = ""
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    quality_expected: float = math.nan  # the per-aspect judge: mean expected verdict / 2 (see expected_verdict)
    p_verdicts: list[list[float]] | None = None   # the per-aspect judge: P(0), P(1), P(2) per aspect


#: How prb's per-aspect judge (``llm:``, the one protocol that keeps each aspect's verdict probabilities) makes a
#: quality in [0, 1] of its verdicts, as pages state it (``--quality-rule``). Each reads one answer; neither is a
#: Best-of-N protocol (:mod:`prb_utils.downstream.bon`: the exact expected best-of-k over all k-subsets, and the
#: reference scripts' best of the first k). Another protocol's quality is its own reading (:func:`quality_reading`).
QUALITY_RULES = {
    "argmax": "each aspect's most probable verdict 0/1/2, summed and divided by 2 x the aspects",
    "expected": "each aspect's expected verdict (P(1) + 2 P(2)) / (P(0) + P(1) + P(2)) (G-Eval's probability-"
                "weighted score), averaged and divided by 2 (the auto rule's choice where the most probable "
                "verdicts rate every answer alike, or asked for)",
}


def expected_verdict(p: Sequence[float]) -> float:
    """The expected 0/1/2 verdict of one aspect from the probabilities of the three tokens, renormalised
    over them (G-Eval's probability-weighted score; NaN when they carry no mass).

    >>> expected_verdict([0.2, 0.3, 0.1]), expected_verdict([0.0, 0.0, 0.0])
    (0.8333333333333334, nan)
    """
    total = float(sum(p))
    return (float(p[1]) + 2 * float(p[2])) / total if total > 0 else math.nan


def choose_quality_rule(frame: pd.DataFrame, rule: str = "auto") -> str:
    """``argmax`` or ``expected`` (:data:`QUALITY_RULES`): ``auto`` takes ``argmax`` (the verdict the judge gives,
    as every reference judge reads it) unless it gives every answer of ``frame`` the same quality while the expected
    verdicts differ, where a page would be flat. Only prb's per-aspect judge (``llm:``) has expected verdicts.

    >>> flat = pd.DataFrame({"quality": [0.5, 0.5], "quality_expected": [0.41, 0.55]})
    >>> choose_quality_rule(flat), choose_quality_rule(flat.assign(quality=[0.5, 1.0]))
    ('expected', 'argmax')
    """
    if rule not in ("auto", *QUALITY_RULES):
        raise PRBError(f"Unknown quality rule '{rule}'; use auto, {' or '.join(QUALITY_RULES)}.")
    if rule != "auto":
        return rule
    argmax = frame["quality"].dropna()
    expected = frame["quality_expected"].dropna() if "quality_expected" in frame.columns else pd.Series(dtype=float)
    flat = argmax.empty or argmax.nunique() == 1
    return "expected" if flat and expected.nunique() > 1 else "argmax"


class RubricJudge(Protocol):
    name: str
    proxy: bool

    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]: ...


def _aspect_parts(aspect: Mapping[str, Any] | str) -> tuple[str, str]:
    if isinstance(aspect, str):
        return aspect.strip(), ""
    return str(aspect.get("aspect", "")).strip(), str(aspect.get("reason", "") or "").strip()


def build_judge_prompt(question: str, answer: str, aspects: Sequence[Mapping[str, Any] | str]) -> str:
    """The judge's user message: question, answer, numbered aspects with their reasons.

    Only the aspect and its reason are shown (not the evidence quote nor the narrative).
    """
    if not aspects:
        raise PRBError("A rubric judgement needs at least one aspect.")
    lines = []
    for i, aspect in enumerate(aspects, 1):
        text, reason = _aspect_parts(aspect)
        lines.append(f"{i}. {text}" + (f" (why it matters to this user: {reason})" if reason else ""))
    return PROMPT.format(question=question.strip(), answer=answer.strip(), aspects="\n".join(lines),
                         n=len(aspects))


def build_aspect_prompt(question: str, answer: str, aspect: Mapping[str, Any] | str) -> str:
    """The per-aspect judge's user message (prb's own, after LaMP-QA's per-aspect design; LaMP-QA's evaluator
    text is :func:`lampqa_prompt`): question, answer, then the one aspect and why it
    matters to this user. The instructions come first and the aspect last, so the prompts of one answer share
    everything but the aspect (its prefix runs once)."""
    text, reason = _aspect_parts(aspect)
    if not text:
        raise PRBError("A rubric aspect is empty.")
    return ASPECT_PROMPT.format(question=question.strip(), answer=answer.strip(), aspect=text,
                                reason=f"\nWhy it matters to this user: {reason}" if reason else "")


_LIST = re.compile(r"\[([^\[\]]*)\]")
_BARE = re.compile(r"^\s*\d+(?:\s*[,;\s]\s*\d+)*\s*\.?\s*$")


def parse_judge_output(text: str, n_aspects: int) -> tuple[list[int] | None, str | None]:
    """(scores, None) when ``text`` holds exactly ``n_aspects`` scores in {0, 1, 2}, else (None, reason).

    Accepts the first bracketed list, or a bare list of numbers as the whole answer.

    >>> parse_judge_output("Scores: [1, 2, 0]", 3)
    ([1, 2, 0], None)
    >>> parse_judge_output("[1, 3]", 2)
    (None, 'score 3 is not 0, 1 or 2')
    >>> parse_judge_output("2 1", 2)
    ([2, 1], None)
    """
    body = text.split("</think>")[-1]
    match = _LIST.search(body)
    if match:
        content = match.group(1)
    elif _BARE.match(body):
        content = body
    else:
        return None, "no list of scores found"
    tokens = [t for t in re.split(r"[,;\s]+", content.strip().rstrip(".")) if t]
    scores: list[int] = []
    for tok in tokens:
        try:
            value = float(tok.strip("'\""))
        except ValueError:
            return None, f"{tok!r} is not a number"
        if value not in (0, 1, 2):
            return None, f"score {tok} is not 0, 1 or 2"
        scores.append(int(value))
    if len(scores) != n_aspects:
        return None, f"{len(scores)} scores for {n_aspects} aspects"
    return scores, None


GenerateFn = Callable[[Sequence[str], int], Sequence[str]]


class LLMRubricJudge:
    """An LLM rubric judge around ``generate(prompts, attempt) -> replies``.

    Attempt 0 should be greedy; later attempts (only for unparsed answers) should sample, so a retry can
    differ. :meth:`from_pretrained` builds ``generate`` from a transformers causal LM.

    >>> replies = iter([["no idea"], ["[2, 1]"]])
    >>> judge = LLMRubricJudge(lambda prompts, attempt: next(replies), name="scripted")
    >>> r = judge.judge([JudgeItem("k", "Q?", "A.", ({"aspect": "x"}, {"aspect": "y"}))])[0]
    >>> r.quality, r.attempts, r.failed
    (0.75, 2, False)
    """

    proxy = False

    def __init__(self, generate: GenerateFn, *, name: str, max_retries: int = 2) -> None:
        if max_retries < 0:
            raise PRBError(f"max_retries must be >= 0, got {max_retries}.")
        self._generate = generate
        self.name = name
        self.max_retries = int(max_retries)

    @classmethod
    def from_pretrained(cls, model: str, *, device: str = "auto", dtype: str = "auto", seed: int = 0,
                        max_new_tokens: int = 32, max_retries: int = 2, temperature: float = 0.7,
                        batch_size: int = 8, engine: EngineConfig = IN_PROCESS) -> LLMRubricJudge:
        """The judge on ``engine``'s chat generator (:meth:`~prb_utils.models.engines.EngineConfig.chat_generator`)."""
        gen = engine.chat_generator(model, device=device, dtype=dtype, batch_size=batch_size)

        def generate(prompts: Sequence[str], attempt: int) -> list[str]:
            replies = gen.generate(prompts, system=JUDGE_SYSTEM, max_new_tokens=max_new_tokens,
                                   temperature=0.0 if attempt == 0 else temperature, seed=seed + 1000 * attempt)
            return [r[0] for r in replies]

        judge = cls(generate, name=f"llm:{model}", max_retries=max_retries)
        judge.metadata = gen.metadata()  # type: ignore[attr-defined]
        return judge

    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        prompts = [build_judge_prompt(it.question, it.answer, it.aspects) for it in items]
        results: list[JudgeResult | None] = [None] * len(items)
        raws = [""] * len(items)
        errors: list[str | None] = [None] * len(items)
        pending = list(range(len(items)))
        for attempt in range(self.max_retries + 1):
            if not pending:
                break
            replies = list(self._generate([prompts[i] for i in pending], attempt))
            if len(replies) != len(pending):
                raise RuntimeError(f"judge generate returned {len(replies)} replies for {len(pending)} prompts")
            still = []
            for i, reply in zip(pending, replies, strict=True):
                scores, error = parse_judge_output(str(reply), len(items[i].aspects))
                raws[i] = str(reply)
                if scores is None:
                    errors[i] = error
                    still.append(i)
                    continue
                results[i] = JudgeResult(items[i].key, float(np.mean(scores)) / 2.0, [float(s) for s in scores],
                                         False, attempt + 1, self.name, False, raws[i])
            pending = still
        for i in pending:
            results[i] = JudgeResult(items[i].key, math.nan, None, True, self.max_retries + 1, self.name, False,
                                     raws[i], errors[i])
        return [r for r in results if r is not None]


class AspectRubricJudge:
    """``llm:NAME``: prb's per-aspect rubric judge on a causal LM, after LaMP-QA's design with prb's own prompt
    (see the module docstring; LaMP-QA's evaluator verbatim is :class:`LampQARubricJudge`).

    ``verdicts(prompts_per_answer)`` maps each answer's aspect prompts (already rendered as token ids) to the
    probabilities of the verdicts 0/1/2; :meth:`from_pretrained` builds it from a transformers causal LM.

    >>> judge = AspectRubricJudge(lambda groups: [[(0.1, 0.2, 0.7), (0.6, 0.3, 0.1)] for _ in groups], name="scripted")
    >>> r = judge.judge([JudgeItem("k", "Q?", "A.", ({"aspect": "x"}, {"aspect": "y"}))])[0]
    >>> r.quality, r.aspect_scores, r.failed
    (0.5, [2.0, 0.0], False)
    """

    proxy = False

    def __init__(self, verdicts: Callable[[Sequence[Sequence[str]]], Sequence[Sequence[Sequence[float]]]], *,
                 name: str) -> None:
        self._verdicts = verdicts
        self.name = name

    @classmethod
    def from_pretrained(cls, model: str, *, device: str = "auto", dtype: str = "auto",
                        batch_tokens: int | None = None, engine: EngineConfig = IN_PROCESS) -> AspectRubricJudge:
        """The judge on ``engine``'s chat generator: the same prompts and token ids on every engine, the
        digits' next-token probabilities from its ``next_token_probabilities`` (in process: the prompt cache,
        ``batch_tokens`` a batch; on a vLLM server: its logprobs)."""
        gen = engine.chat_generator(model, device=device, dtype=dtype)
        digits = [letter_ids(gen.tokenizer, d) for d in "012"]

        def verdicts(prompts: Sequence[Sequence[str]]) -> list[list[tuple[float, ...]]]:
            groups = [[gen.tokenizer(gen.render(p, JUDGE_SYSTEM) + ASPECT_ANSWER_PREFIX,
                                     add_special_tokens=False)["input_ids"] for p in per_answer]
                      for per_answer in prompts]
            return gen.next_token_probabilities(groups, digits, batch_tokens=batch_tokens)

        judge = cls(verdicts, name=f"llm:{model}")
        judge.metadata = {**gen.metadata(), "digit_token_ids": digits}  # type: ignore[attr-defined]
        return judge

    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        """One result per item; an item whose server response is unusable (vLLM: no logprobs) is a failed
        verdict (``error`` starts with :data:`UNUSABLE_VERDICT`), the others are judged (one at a time once a
        batch met an unusable response); too many unusable responses in a row end the run (EngineError)."""
        if any(not it.aspects for it in items):
            raise PRBError("A rubric judgement needs at least one aspect.")
        prompts = [[build_aspect_prompt(it.question, it.answer, a) for a in it.aspects] for it in items]
        try:
            probs: list[Any] = list(self._verdicts(prompts)) if items else []
        except UnusableResponse:
            probs = []
            for per_item in prompts:   # which answer's response was unusable: each on its own
                try:
                    probs.append(self._verdicts([per_item])[0])
                except UnusableResponse as exc:
                    probs.append(exc)
        results = []
        for it, per in zip(items, probs, strict=True):
            if isinstance(per, UnusableResponse):
                results.append(JudgeResult(it.key, math.nan, None, True, 1, self.name, False,
                                           error=f"{UNUSABLE_VERDICT}: {per}"))
                continue
            scores = [float(np.argmax(p)) for p in per]
            mass = [float(sum(p)) for p in per]
            expected = [expected_verdict(p) for p in per]
            results.append(JudgeResult(it.key, sum(scores) / (2 * len(scores)), scores, False, 1, self.name, False,
                                       raw=" ".join(f"{int(s)}" for s in scores), extra={"mass": mass},
                                       quality_expected=float(np.mean(expected)) / 2,
                                       p_verdicts=[list(map(float, p)) for p in per]))
        return results


def reference_prompt(question: str, answer: str, aspects: Sequence[Mapping[str, Any] | str]) -> str:
    """The reference judge's user message: :data:`REFERENCE_JUDGE_PROMPT` with the aspects' titles joined by ", ".

    >>> reference_prompt("Q?", "A.", [{"aspect": "Cheap"}, {"aspect": "Quick"}]).split("refer:")[1].split()[:2]
    ['Cheap,', 'Quick']
    """
    titles = ", ".join(str(a.get("aspect", "")) if isinstance(a, Mapping) else str(a) for a in aspects)
    return (REFERENCE_JUDGE_PROMPT.replace("{question}", question).replace("{answer}", answer)
            .replace("{aspects}", titles))


def reference_scores(text: str) -> tuple[list[float], bool]:
    """The reference script's reading of a reply: the numbers of its first ``[...]`` list (else of the whole
    reply) and whether any was found (none: ``[0.0]``, as the script counts it).

    >>> reference_scores("Scores: [2, 1]"), reference_scores("no idea")
    (([2.0, 1.0], True), ([0.0], False))
    """
    found = re.search(r"\[([^\]]+)\]", text)
    numbers = [float(n) for n in re.findall(r"-?\d+\.?\d*", found.group(1) if found else text)]
    return (numbers, True) if numbers else ([0.0], False)


class ReferenceRubricJudge:
    """``llm-ref:NAME``: the benchmark's BoN judge as its scripts run it (:data:`REFERENCE_JUDGE_PROMPT`,
    :data:`REFERENCE_JUDGE_SYSTEM`, greedy, 32 new tokens, no retry). The script's score is the mean of the
    numbers read (0-2; an unreadable reply counts 0, as there); prb's quality is that mean / 2, and an
    unreadable reply is kept as 0 with its ``error`` saying so.

    >>> judge = ReferenceRubricJudge(lambda prompts: ["[2, 1]" for _ in prompts], name="llm-ref:scripted")
    >>> r = judge.judge([JudgeItem("k", "Q?", "A.", ({"aspect": "x"}, {"aspect": "y"}))])[0]
    >>> r.quality, r.aspect_scores, r.error
    (0.75, [2.0, 1.0], None)
    """

    proxy = False

    def __init__(self, generate: Callable[[Sequence[str]], Sequence[str]], *, name: str) -> None:
        self._generate = generate
        self.name = name

    @classmethod
    def from_pretrained(cls, model: str, *, device: str = "auto", dtype: str = "auto", batch_size: int = 8,
                        engine: EngineConfig = IN_PROCESS) -> ReferenceRubricJudge:
        gen = engine.chat_generator(model, device=device, dtype=dtype, batch_size=batch_size)

        def generate(prompts: Sequence[str]) -> list[str]:
            replies = gen.generate(prompts, system=REFERENCE_JUDGE_SYSTEM, max_new_tokens=32, temperature=0.0)
            return [r[0] for r in replies]

        judge = cls(generate, name=f"llm-ref:{model}")
        judge.metadata = gen.metadata()  # type: ignore[attr-defined]
        return judge

    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        replies = list(self._generate([reference_prompt(it.question, it.answer, it.aspects) for it in items]))
        results = []
        for it, reply in zip(items, replies, strict=True):
            scores, read = reference_scores(str(reply))
            results.append(JudgeResult(it.key, float(np.mean(scores)) / 2, scores, False, 1, self.name, False,
                                       raw=str(reply), error=None if read else
                                       "no number in the reply: counted 0, as the reference script counts it"))
        return results


def lampqa_prompt(question: str, details: str, answer: str, aspect: Mapping[str, Any]) -> str:
    """LaMP-QA's user message for one aspect (:data:`LAMPQA_JUDGE_PROMPT`, the aspect formatted as the
    evaluator's ``create_eval_prompt`` does).

    >>> print(lampqa_prompt("Q?", "My story.", "A.", {"aspect": "Cheap", "reason": "R", "evidence": "E"}).strip())
    question: Q?
    details: My story.
    response: A.
    aspect: -aspect: Cheap
        -reason: R
        -evidence: E
    <BLANKLINE>
    Your output should be only a valid json object in ```json ``` block without any explanations.
    """
    formatted = (f'-aspect: {aspect.get("aspect", "")}\n    -reason: {aspect.get("reason", "")}\n'
                 f'    -evidence: {aspect.get("evidence", "")}')
    return LAMPQA_JUDGE_PROMPT.format(question=question, details=details, response=answer, aspects=formatted)


def lampqa_score(text: str) -> float | None:
    """The evaluator's reading of a reply: the code fences removed, ``json.loads`` (``strict=False``), else
    ``json5``; its ``match_score`` as a number. None when the reply is unreadable (the evaluator asks again).

    >>> lampqa_score('```json {"match_score": 2} ```'), lampqa_score("{match_score: 1,}"), lampqa_score("2")
    (2.0, 1.0, None)
    """
    cleaned = text.replace("```json", "").replace("```", "").strip()
    try:
        obj = json.loads(cleaned, strict=False)
    except ValueError:
        try:
            obj = json5.loads(cleaned)
        except ValueError:
            return None
    try:
        score = float(obj["match_score"])
    except (TypeError, KeyError, ValueError):
        return None
    return score if math.isfinite(score) else None


class LampQARubricJudge:
    """``llm-lampqa:NAME``: LaMP-QA's evaluator as its script runs it: one prompt per aspect
    (:func:`lampqa_prompt`, :data:`LAMPQA_JUDGE_SYSTEM`), greedy first, top_p 0.95, up to 4,096 new tokens;
    unreadable replies are asked again 0.1 hotter each round (seeded by the round) up to
    :data:`LAMPQA_MAX_RETRIES` rounds, then scored 0. The quality is the sum of the match scores over
    2 x the number of aspects, as there. ``generate(prompts, temperature, seed)`` returns one reply per prompt.

    >>> replies = iter([['{"match_score": 2}', 'no json'], ['{"match_score": 1}']])
    >>> judge = LampQARubricJudge(lambda prompts, temperature, seed: next(replies), name="llm-lampqa:scripted")
    >>> r = judge.judge([JudgeItem("k", "Q?", "A.", ({"aspect": "x"}, {"aspect": "y"}), details="story")])[0]
    >>> r.quality, r.aspect_scores, r.attempts
    (0.75, [2.0, 1.0], 2)
    """

    proxy = False

    def __init__(self, generate: Callable[[Sequence[str], float, int], Sequence[str]], *, name: str,
                 max_retries: int = LAMPQA_MAX_RETRIES) -> None:
        self._generate = generate
        self.name = name
        self.max_retries = max_retries

    @classmethod
    def from_pretrained(cls, model: str, *, device: str = "auto", dtype: str = "auto", batch_size: int = 8,
                        engine: EngineConfig = IN_PROCESS) -> LampQARubricJudge:
        gen = engine.chat_generator(model, device=device, dtype=dtype, batch_size=batch_size)

        def generate(prompts: Sequence[str], temperature: float, seed: int) -> list[str]:
            replies = gen.generate(prompts, system=LAMPQA_JUDGE_SYSTEM, max_new_tokens=LAMPQA_MAX_NEW_TOKENS,
                                   temperature=temperature, top_p=LAMPQA_TOP_P, seed=seed)
            return [r[0] for r in replies]

        judge = cls(generate, name=f"llm-lampqa:{model}")
        judge.metadata = gen.metadata()  # type: ignore[attr-defined]
        return judge

    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        asks = [(i, j, lampqa_prompt(it.question, it.details, it.answer, aspect))
                for i, it in enumerate(items) for j, aspect in enumerate(it.aspects)]
        scores: dict[tuple[int, int], float] = {}
        replies: dict[tuple[int, int], str] = {}
        unread: set[tuple[int, int]] = set()
        temperature, rounds = 0.0, 0
        while asks:
            rounds += 1
            texts = list(self._generate([prompt for _, _, prompt in asks], temperature, rounds))
            wrong = []
            for (i, j, prompt), text in zip(asks, texts, strict=True):
                replies[(i, j)] = str(text)
                score = lampqa_score(str(text))
                if score is not None:
                    scores[(i, j)] = score
                elif rounds > self.max_retries:
                    scores[(i, j)] = 0.0
                    unread.add((i, j))
                else:
                    wrong.append((i, j, prompt))
            asks = wrong
            if temperature < 1.0:
                temperature += 0.1
        results = []
        for i, it in enumerate(items):
            per = [scores[(i, j)] for j in range(len(it.aspects))]
            failed_reads = sum((i, j) in unread for j in range(len(it.aspects)))
            results.append(JudgeResult(
                it.key, sum(per) / (2 * len(per)) if per else math.nan, per, not per, rounds, self.name, False,
                raw=" | ".join(replies.get((i, j), "") for j in range(len(it.aspects))),
                error=(f"{failed_reads} aspect(s) unreadable after {self.max_retries} retries: scored 0, as the "
                       "evaluator does") if failed_reads else (None if per else "no rubric aspects")))
        return results


class ProxyRubricJudge:
    """MiniLM similarity between the answer and each aspect (clipped at 0), averaged: a labelled proxy."""

    proxy = True

    def __init__(self, *, model: str = "minilm", device: str = "cpu", batch_size: int = 32) -> None:
        self.name = PROXY_NAME if model == "minilm" else f"proxy:{model}"
        self.model_name = model
        self.device = device
        self.batch_size = int(batch_size)
        self._model: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        if self._model is not None:
            return
        from transformers import AutoModel


        spec = spec_of(ENCODER, self.model_name)
        source = resolve_source(spec)
        self._tokenizer = load_tokenizer(spec, source)
        self._model = load_pretrained(spec, source, AutoModel.from_pretrained).to(self.device).eval()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Mean-pooled, L2-normalized embeddings (sentence-transformers' recipe for MiniLM)."""
        import torch

        self._load()
        out = []
        for start in range(0, len(texts), self.batch_size):
            chunk = list(texts[start:start + self.batch_size])
            enc = self._tokenizer(chunk, padding=True, truncation=True, max_length=256, return_tensors="pt")
            enc = {k: v.to(self.device) for k, v in enc.items()}
            with torch.no_grad():
                hidden = self._model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled, dim=-1).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, 0))

    def judge(self, items: Sequence[JudgeItem]) -> list[JudgeResult]:
        if not items:
            return []
        aspect_texts = sorted({_aspect_parts(a)[0] for it in items for a in it.aspects})
        if any(not it.aspects for it in items):
            raise PRBError("A rubric judgement needs at least one aspect.")
        vectors = dict(zip(aspect_texts, self.embed(aspect_texts), strict=True))
        answers = self.embed([it.answer for it in items])
        results = []
        for it, vec in zip(items, answers, strict=True):
            sims = [float(np.dot(vec, vectors[_aspect_parts(a)[0]])) for a in it.aspects]
            quality = float(np.mean(np.clip(sims, 0.0, 1.0)))
            results.append(JudgeResult(it.key, quality, sims, False, 1, self.name, True))
        return results


@dataclass(frozen=True)
class RubricJudgeKind:
    """One rubric judge protocol (the ``KIND`` of ``--judge KIND:NAME``) and its traits: ``load(name, **options)``
    builds it; ``prompt`` holds what its verdicts depend on besides the model (cache keys); ``llm``: it runs a
    language model (device, dtype and engine apply); ``default_model``: the model when the spec names none."""

    name: str
    short: str
    description: str
    load: Callable[..., Any]
    prompt: tuple[Any, ...] = ()
    llm: bool = True
    default_model: str | None = None
    quality: str = ""   # how its quality is read; "" for the per-aspect judge, read by a rule of QUALITY_RULES

    @property
    def form(self) -> str:
        return self.name if self.default_model else f"{self.name}:NAME"


def _all_aspects_judge(name: str, **options: Any) -> LLMRubricJudge:
    judge = LLMRubricJudge.from_pretrained(name, **options)
    judge.name = f"llm-all:{name}"
    return judge


def _proxy_judge(name: str, **_: Any) -> ProxyRubricJudge:
    return ProxyRubricJudge(model=name)   # MiniLM runs in this process, on the CPU, whatever the engine


#: The rubric judges by kind (``--judge`` takes these); :data:`JUDGE_PROTOCOLS` describes each on the pages.
RUBRIC_JUDGES: dict[str, RubricJudgeKind] = {judge.name: judge for judge in (
    RubricJudgeKind("llm", "one verdict per aspect", "prb's per-aspect protocol (one 0/1/2 verdict per aspect, after "
                    "LaMP-QA's design; prb's own prompt, not LaMP-QA's evaluator)", AspectRubricJudge.from_pretrained,
                    (JUDGE_SYSTEM, ASPECT_PROMPT, ASPECT_ANSWER_PREFIX, "verdict-probabilities-kept")),
    RubricJudgeKind("llm-all", "all aspects in one prompt", "prb's all-aspects prompt (one list of 0/1/2 scores; "
                    "prb's own prompt, not the reference's)", _all_aspects_judge, (JUDGE_SYSTEM, PROMPT),
                    quality="the listed 0/1/2 scores, one per aspect, averaged and divided by 2 (an unparsed reply "
                            "is a failure, never a 0)"),
    RubricJudgeKind("llm-ref", "the benchmark's reference judge", "the benchmark's reference judge, verbatim "
                    "(prompts/evaluation.txt, BoN/evaluate.py)", ReferenceRubricJudge.from_pretrained,
                    (REFERENCE_JUDGE_SYSTEM, REFERENCE_JUDGE_PROMPT, "reference-parse"),
                    quality="the mean of the numbers read from the reply, as the reference script reads it (none "
                            "read: 0), divided by 2"),
    RubricJudgeKind("llm-lampqa", "LaMP-QA's evaluator", "LaMP-QA's evaluator, verbatim (evaluation/evaluator.py: "
                    "one JSON match_score per aspect, with the user's narrative, the aspect's reason and evidence)",
                    LampQARubricJudge.from_pretrained,
                    (LAMPQA_JUDGE_SYSTEM, LAMPQA_JUDGE_PROMPT, LAMPQA_MAX_NEW_TOKENS, LAMPQA_MAX_RETRIES),
                    quality="each aspect's JSON match_score 0-2 (unreadable after every retry: 0), summed and divided "
                            "by 2 x the aspects"),
    RubricJudgeKind("proxy", "MiniLM similarity", "a proxy: MiniLM similarity of the answer to each aspect",
                    _proxy_judge, llm=False, default_model="minilm",
                    quality="the proxy's similarity of the answer to each aspect, clipped at 0 and averaged"),
)}
#: Which protocol produced a number, as pages name it (``llm:`` and ``llm-all:`` are prb's own prompts).
JUDGE_PROTOCOLS = {name: judge.description for name, judge in RUBRIC_JUDGES.items()}


def quality_reading(judge: str, rule: str = "argmax") -> str:
    """How the quality of the rubric judge ``judge`` (a spec or judge name) is read, in the pages' words: its
    rule of :data:`QUALITY_RULES` for prb's per-aspect judge (``llm:``), the protocol's own reading otherwise.

    >>> quality_reading("llm:smollm2", "expected").startswith("each aspect's expected verdict")
    True
    >>> quality_reading("llm-ref:smollm2", "argmax")
    'the mean of the numbers read from the reply, as the reference script reads it (none read: 0), divided by 2'
    """
    kind = RUBRIC_JUDGES.get(str(judge).partition(":")[0])
    return kind.quality if kind is not None and kind.quality else QUALITY_RULES.get(rule, rule)


def check_judge_spec(spec: str) -> tuple[str, str]:
    """(kind, name) of a rubric judge spec, or a PRBError naming the valid forms.

    >>> check_judge_spec("llm:smollm2")
    ('llm', 'smollm2')
    >>> check_judge_spec("proxy")
    ('proxy', 'minilm')
    """
    kind, _, name = str(spec).strip().partition(":")
    judge = RUBRIC_JUDGES.get(kind)
    if judge is not None and (name or judge.default_model):
        return kind, name or str(judge.default_model)
    forms = [f"'{j.form}' ({j.short})" for j in RUBRIC_JUDGES.values()]
    raise PRBError(f"Unknown rubric judge {spec!r}; use {', '.join(forms[:-1])} or {forms[-1]}.")


def runs_a_model(judge: Any) -> bool:
    """Whether ``judge`` is a spec of a judge that runs a language model (device, dtype and engine apply).

    >>> runs_a_model("llm:smollm2"), runs_a_model("proxy")
    (True, False)
    """
    return isinstance(judge, str) and RUBRIC_JUDGES[check_judge_spec(judge)[0]].llm


def judge_cache_key(judge: Any, options: ModelOptions | None = None) -> list[Any]:
    """What a judge's cached verdicts depend on: its name, its prompt (:func:`judge_protocol`), its model's
    fingerprint (new weights saved into the same folder are a new judge) and, for an LLM, the device type and
    dtype it runs with and its engine (from ``options``, the run's model options). A judge object is known by its
    name alone.

    >>> judge_cache_key("proxy")[:2]
    ['proxy', 'proxy']
    """
    if not isinstance(judge, str):
        return [str(judge.name)]

    kind, name = check_judge_spec(judge)
    llm = RUBRIC_JUDGES[kind].llm
    spec = spec_of(CAUSAL_LM if llm else ENCODER, name, judge)
    try:
        fingerprint = model_fingerprint(spec)
    except PRBError as exc:   # named as the user wrote it (``proxy:foo``), never as the spec used inside
        raise PRBError(f"The rubric judge '{judge}' cannot be used: {str(exc)[:1].lower()}{str(exc)[1:]}") from None
    key: list[Any] = [judge, judge_protocol(judge), fingerprint]
    if llm:
        key += [judge_placement(judge, options), (options or ModelOptions()).engine.name]
    return key


def judge_placement(judge: Any, options: ModelOptions | None = None) -> dict[str, str] | None:
    """The device type and dtype an LLM judge runs with under ``options`` (``auto`` resolved); None for a judge
    that runs no language model (the proxy, a judge object).

    >>> judge_placement("llm:smollm2", ModelOptions(device="cpu", dtype="bfloat16")), judge_placement("proxy")
    ({'device': 'cpu', 'dtype': 'bfloat16'}, None)
    """
    if not runs_a_model(judge):
        return None
    return (options or ModelOptions()).placement(loader_kind(CAUSAL_LM))


def judge_identity(judge: Any) -> list[Any]:
    """What makes a rubric judge the same judge wherever it runs: its form and model as :func:`check_judge_spec`
    reads them (``proxy`` is ``proxy:minilm``), its prompt and its model's fingerprint (a judge object: its name).
    ``prb report`` shows a ``prb bon`` run only when it was judged by the judge the report asks for.

    >>> judge_identity("proxy") == judge_identity("proxy:minilm")
    True
    """
    if not isinstance(judge, str):
        return [str(judge.name)]
    return [":".join(check_judge_spec(judge)), *judge_cache_key(judge)[1:3]]


def check_judge(judge: Any, options: ModelOptions | None = None) -> None:
    """Fail before any work, in one sentence, for a judge spec that cannot be used: an unknown form, a model that
    cannot be found (:func:`judge_cache_key`) or, for an LLM judge, a model that is not a causal LM (a reward
    model or an encoder would judge from a random head). A judge object passes as it is.

    >>> check_judge("proxy")
    """
    if not isinstance(judge, str):
        return
    judge_cache_key(judge, options)
    if runs_a_model(judge):
        check_causal_lm(check_judge_spec(judge)[1], given=judge)


def judge_protocol(spec: str) -> str:
    """What a judge's results depend on besides its name (the prompt), for cache keys: results of an
    earlier prompt are never reused.

    >>> judge_protocol("proxy")
    'proxy'
    """
    kind = str(spec).strip().partition(":")[0]
    judge = RUBRIC_JUDGES.get(kind)
    return stable_hash(list(judge.prompt)) if judge is not None and judge.prompt else kind


def load_judge(spec: str, options: ModelOptions | None = None, **overrides: Any) -> RubricJudge:
    """The rubric judge of ``spec`` (:data:`RUBRIC_JUDGES`): ``llm:NAME`` -> :class:`AspectRubricJudge`,
    ``llm-all:NAME`` -> :class:`LLMRubricJudge`, ``llm-ref:NAME`` -> :class:`ReferenceRubricJudge`,
    ``llm-lampqa:NAME`` -> :class:`LampQARubricJudge`: on the engine, device and dtype of ``options`` (the run's
    model options, taken whole), each replaced by ``overrides`` (``device="cpu"``, ``engine=...``);
    ``proxy`` / ``proxy:minilm`` -> :class:`ProxyRubricJudge`, in this process whatever the engine.

    >>> load_judge("proxy").name
    'proxy:minilm'
    """
    kind, name = check_judge_spec(spec)
    options = options or ModelOptions()
    given = {"engine": options.engine, "device": options.device, "dtype": options.dtype, **overrides}
    return RUBRIC_JUDGES[kind].load(name, **given)


def judge_label(judge_name: str, proxy: bool) -> str:
    """How a judge is named in tables and figures (proxies and weak judges say so).

    >>> judge_label("llm:smollm2", False)
    'llm:smollm2 - weak judge (a 135M model)'
    """
    if proxy:
        return f"{judge_name} - {PROXY_LABEL}"
    return f"{judge_name} - {WEAK_LABEL}" if judge_name in WEAK_JUDGES else judge_name


def results_frame(results: Sequence[JudgeResult]) -> pd.DataFrame:
    """Judge results as a tidy frame (:data:`JUDGEMENT_COLUMNS`)."""
    return pd.DataFrame(
        [{"key": r.key, "quality": r.quality, "aspect_scores": r.aspect_scores, "failed": r.failed,
          "attempts": r.attempts, "judge": r.judge, "judge_proxy": r.proxy, "raw": r.raw, "error": r.error,
          "quality_expected": r.quality_expected, "p_verdicts": r.p_verdicts,
          "mass": (r.extra or {}).get("mass")}
         for r in results],
        columns=JUDGEMENT_COLUMNS,
    )


#: The columns of :func:`results_frame`: the per-aspect judge's probabilities and covered mass are kept, so a
#: cached judgement can be read by either rule (:data:`QUALITY_RULES`) without judging again.
JUDGEMENT_COLUMNS = ["key", "quality", "aspect_scores", "failed", "attempts", "judge", "judge_proxy", "raw", "error",
                  "quality_expected", "p_verdicts", "mass"]
#: The columns a cached judgement must have to be read (a verdict cache without one is set aside and judged anew).
NEEDED_JUDGEMENT_COLUMNS = ("key", "quality", "failed", "attempts", "judge", "judge_proxy", "error")


def judgement_problem(frame: pd.DataFrame) -> str | None:
    """Why the rows of a verdict cache (:data:`NEEDED_JUDGEMENT_COLUMNS`) cannot be used, or None: a row without its
    key or its ``failed`` flag, a key that is not text, a quality that is not a number from 0 to 1 (an empty one
    is a verdict not given). A cache so damaged is set aside and judged anew.

    >>> judgement_problem(results_frame([]).assign(key=["k"], quality=[0.5], failed=[False])) is None
    True
    >>> judgement_problem(pd.DataFrame({"key": ["k"], "quality": [7.0], "failed": [False]}))
    '1 row whose quality is not a number from 0 to 1'
    """
    found = rows_problem(frame, filled=("key", "failed"), text=("key",))
    if found:
        return found
    quality = pd.to_numeric(frame["quality"], errors="coerce")
    bad = int(((quality < 0) | (quality > 1) | (quality.isna() & frame["quality"].notna())).sum())
    return f"{bad} row{'s' if bad != 1 else ''} whose quality is not a number from 0 to 1" if bad else None
