"""Rubric judges: how well an answer covers one user's rubric aspects, as a quality in [0, 1].

- :class:`LLMRubricJudge`: an LLM sees the question, the answer and each aspect with its reason, and
  answers a list of 0/1/2 scores (0 = not covered, 1 = partly, 2 = fully). Quality = mean score / 2.
  An answer that does not parse is asked again (sampled, seeded) up to ``max_retries`` times, then
  recorded as a failure (``failed=True``, quality NaN), never silently as 0.
- :class:`ProxyRubricJudge`: for machines without a real judge. The MiniLM cosine similarity between
  the answer and each aspect, clipped to [0, 1], averaged over aspects. It is a *proxy* (topical
  similarity, not coverage); every result carries ``proxy=True`` and its judge name ``proxy:minilm``,
  and tables and plots label it so. Note that it shares its encoder with the ``embedding:minilm`` RM.

``load_judge("proxy")``, ``load_judge("llm:smollm2")`` or ``load_judge("llm:Qwen/Qwen2.5-7B-Instruct")``.

>>> text = build_judge_prompt("Q?", "A.", [{"aspect": "Cheap", "reason": "Tight budget"}])
>>> "1. Cheap (why it matters to this user: Tight budget)" in text
True
>>> parse_judge_output("[2, 0]", 2)
([2, 0], None)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from prb_utils.errors import PRBError

JUDGE_SYSTEM = "You are a fair and careful judge of answers."
PROXY_NAME = "proxy:minilm"
PROXY_LABEL = "proxy judge (MiniLM similarity, not a rubric judgement)"

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


@dataclass(frozen=True)
class JudgeItem:
    """One answer to grade; ``aspects`` are the record's rubric aspects ({aspect, reason, ...})."""

    key: str
    question: str
    answer: str
    aspects: tuple[Mapping[str, Any], ...]


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
                        batch_size: int = 8) -> LLMRubricJudge:
        from prb_utils.downstream.generation import ChatGenerator

        gen = ChatGenerator(model, device=device, dtype=dtype, batch_size=batch_size)

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

        from prb_utils.models.base import ModelSpec
        from prb_utils.models.hf import load_pretrained, load_tokenizer, resolve_source

        spec = ModelSpec("embedding", self.model_name)
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


def load_judge(spec: str, **options: Any) -> RubricJudge:
    """``proxy`` / ``proxy:minilm`` -> :class:`ProxyRubricJudge`; ``llm:NAME`` -> :class:`LLMRubricJudge`.

    >>> load_judge("proxy").name
    'proxy:minilm'
    """
    kind, _, name = str(spec).strip().partition(":")
    if kind == "proxy":
        return ProxyRubricJudge(model=name or "minilm", **options)
    if kind == "llm" and name:
        return LLMRubricJudge.from_pretrained(name, **options)
    raise PRBError(f"Unknown rubric judge {spec!r}; use 'proxy' (MiniLM similarity) or 'llm:NAME' (an LLM).")


def judge_label(judge_name: str, proxy: bool) -> str:
    """How a judge is named in tables and figures (proxies say so)."""
    return f"{judge_name} - {PROXY_LABEL}" if proxy else judge_name


def results_frame(results: Sequence[JudgeResult]) -> pd.DataFrame:
    """Judge results as a tidy frame: key, quality, aspect_scores, failed, attempts, judge, judge_proxy,
    raw, error."""
    return pd.DataFrame(
        [{"key": r.key, "quality": r.quality, "aspect_scores": r.aspect_scores, "failed": r.failed,
          "attempts": r.attempts, "judge": r.judge, "judge_proxy": r.proxy, "raw": r.raw, "error": r.error}
         for r in results],
        columns=["key", "quality", "aspect_scores", "failed", "attempts", "judge", "judge_proxy", "raw", "error"],
    )
