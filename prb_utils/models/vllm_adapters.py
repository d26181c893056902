"""``judge:`` and ``implicit:`` over the ``vllm`` engine, with the HF adapters' prompts, tokens and rows.

The prompts and token ids are built by the HF adapters' own code (:class:`~prb_utils.models.judge.JudgeRM`
and :class:`~prb_utils.models.implicit.ImplicitRM`, whose prompt methods these classes inherit without
loading the model): same chat template, same special tokens (``tokenization``), same truncation to the
model's context. The server receives token ids, so both engines see the same tokens.

- judge, ``logprob`` mode: per A/B order one request for the next-token log-probs after prompt + answer
  prefix of exactly the letter variants the HF judge sums (:func:`~prb_utils.models.judge.letter_ids`),
  asked by id (vLLM's ``logprob_token_ids``; a server that refuses it is asked for its top-k,
  ``return_tokens_as_token_ids``). A variant the server did not return (outside its top-k) gets its exact
  log-prob from a second request: the prompt logprobs of the prompt followed by that token (the forced
  continuation), never a default. P(A) and P(B) are renormalised; ``p_letters_*`` is the covered mass.
- judge, ``generate`` mode: greedy completion of ``max_new_tokens`` tokens, parsed as the HF judge parses.
- implicit: the prompt logprobs of prompt + response; the score is the mean over the response's tokens (the
  same span as the HF adapter).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

from prb_utils.models.base import ModelSpec, PairInput, PairScore
from prb_utils.models.classifier import ClassifierRM
from prb_utils.models.hf import load_tokenizer, model_max_length, nonfinite_reason, resolve_source
from prb_utils.models.implicit import ImplicitRM
from prb_utils.models.judge import MAX_NEW_TOKENS, MODES, JudgeRM, letter_ids
from prb_utils.models.prompts import chat_template_hash, has_chat_template, load_judge_template
from prb_utils.models.vllm_client import RequestCache, RequestError
from prb_utils.models.vllm_engine import EngineOptions, completion_text, connect
from prb_utils.schema import stable_hash

TOP_LOGPROBS = 20


def logsumexp(values: Sequence[float]) -> float:
    """log(sum(exp(v))) without overflow; -inf for no values.

    >>> round(logsumexp([math.log(0.25), math.log(0.5)]), 12) == round(math.log(0.75), 12)
    True
    """
    finite = [v for v in values if v != -math.inf]
    if not finite:
        return -math.inf
    top = max(finite)
    return top + math.log(sum(math.exp(v - top) for v in finite))


def top_logprobs(response: dict[str, Any]) -> dict[int, float]:
    """``{token id: log-prob}`` of the first generated position of a completions response asked with
    ``return_tokens_as_token_ids`` (keys ``"token_id:N"``)."""
    choice = (response.get("choices") or [{}])[0]
    tops = ((choice.get("logprobs") or {}).get("top_logprobs") or [None])[0] or {}
    out: dict[int, float] = {}
    for key, value in tops.items():
        token = str(key).removeprefix("token_id:")
        if token.lstrip("-").isdigit() and value is not None:
            out[int(token)] = float(value)
    return out


def prompt_token_logprobs(choice: dict[str, Any], ids: Sequence[int]) -> list[float | None]:
    """Per prompt position, the log-prob of the prompt's own token there (None for the first position)."""
    entries = choice.get("prompt_logprobs") or []
    out: list[float | None] = []
    for position, token in enumerate(ids):
        entry = entries[position] if position < len(entries) else None
        found = (entry or {}).get(str(token))
        if isinstance(found, dict):
            found = found.get("logprob")
        out.append(None if found is None else float(found))
    return out


class NextTokenLogprobs:
    """Next-token log-probs of given token ids after each prompt, from a vLLM server (the judge's letters,
    the rubric judge's digits): asked by id (vLLM's ``logprob_token_ids``; a server that refuses it is asked
    for its top-k), and a token the server did not return gets its exact log-prob from the prompt logprobs of
    the prompt followed by that token (the forced continuation), never a default.

    ``cache(purpose)`` gives the request cache of ``<purpose>-letters`` and ``<purpose>-forced`` (or None).
    """

    def __init__(self, engine: Any, *, purpose: str = "judge",
                 cache: Any = lambda purpose: None) -> None:
        self.engine = engine
        self.purpose = purpose
        self._cache = cache
        self.request = "ids"   # or "top-k" on a server without logprob_token_ids
        self.top_k = TOP_LOGPROBS
        self.n_fallback = 0

    def __call__(self, prompts: Sequence[Sequence[int]], tokens: Sequence[int]) -> list[dict[int, float]]:
        """Per prompt (token ids), ``{token: log-prob}`` for every one of ``tokens`` (NaN if the server gave
        no value even for the forced continuation)."""
        tokens = list(tokens)
        found = self._asked([list(p) for p in prompts], tokens)
        missing = [(i, tok) for i, t in enumerate(found) for tok in tokens if tok not in t]
        if missing:
            self.n_fallback += len(missing)
            forced = [{"model": self.engine.model, "prompt": [*prompts[i], tok], "max_tokens": 1, "temperature": 0.0,
                       "prompt_logprobs": 0} for i, tok in missing]

            def last(response: dict[str, Any], body: dict[str, Any]) -> float | None:
                values = prompt_token_logprobs((response.get("choices") or [{}])[0], body["prompt"])
                return values[-1] if values else None

            values = self.engine.client.map(forced, last, cache=self._cache(f"{self.purpose}-forced"))
            for (i, tok), value in zip(missing, values, strict=True):
                found[i][tok] = math.nan if value is None else float(value)
        return found

    def _asked(self, prompts: list[list[int]], tokens: list[int]) -> list[dict[int, float]]:
        def body(ids: list[int]) -> dict[str, Any]:
            base = {"model": self.engine.model, "prompt": ids, "max_tokens": 1, "temperature": 0.0,
                    "return_tokens_as_token_ids": True}
            if self.request == "ids":
                return {**base, "logprobs": len(tokens), "logprob_token_ids": tokens}
            return {**base, "logprobs": self.top_k}

        def reduce(response: dict[str, Any], _: dict[str, Any]) -> dict[str, float]:
            tops = top_logprobs(response)
            return {str(t): tops[t] for t in tokens if t in tops}

        while True:
            try:
                values = self.engine.client.map([body(p) for p in prompts], reduce,
                                                cache=self._cache(f"{self.purpose}-letters"))
                return [{int(k): float(v) for k, v in t.items()} for t in values]
            except RequestError as exc:
                text = str(exc)
                if self.request == "ids" and "logprob_token_ids" in text:
                    self.request = "top-k"
                elif self.request == "top-k" and "max allowed" in text and self.top_k != TOP_LOGPROBS:
                    self.top_k = TOP_LOGPROBS
                else:
                    raise

    def metadata(self) -> dict[str, Any]:
        return {"letter_request": self.request, "top_logprobs": self.top_k if self.request == "top-k" else None,
                "n_letter_fallbacks": self.n_fallback}


class _VLLMMixin:
    """State shared by the vLLM adapters: what HFAdapter sets up, minus the model, plus the engine.

    :meth:`prepare` sends the chunk's requests (the scorer runs it ahead, in its own thread, for
    :attr:`prefetch` chunks at once), so the next chunk's requests are in flight while this chunk's last ones
    finish and its rows are written: the server never idles between chunks. :meth:`run` only hands the
    scores on.
    """

    kind = ""
    prefetch = 2

    def prepare(self, pairs: Sequence[PairInput]) -> list[PairScore]:
        with self.tokenizer_lock:
            tokens = self._prepare(pairs)
        return self.run_remote(tokens)

    def run(self, prepared: list[PairScore]) -> list[PairScore]:
        return prepared

    def cancel(self) -> None:
        """The scorer stopped (Ctrl-C, an error): the chunks prepared ahead send no more requests."""
        self.engine.client.cancel()

    def resume(self) -> None:
        self.engine.client.resume()

    def score_pairs(self, pairs: Sequence[PairInput]) -> list[PairScore]:
        return self.prepare(pairs)

    def _plan(self, groups: Any) -> None:
        return None   # the server plans its own batches

    def run_remote(self, prepared: Any) -> list[PairScore]:   # pragma: no cover - every adapter defines it
        raise NotImplementedError

    def _setup(self, spec: ModelSpec, *, device: str, dtype: str, seed: int, tokenization: str,
               engine_options: Any, runner: str | None = None) -> None:
        from transformers import AutoConfig

        from prb_utils.errors import PRBError
        from prb_utils.models.hf import load_pretrained
        from prb_utils.models.prompts import TOKENIZATIONS

        if tokenization not in TOKENIZATIONS:
            raise PRBError(f"Unknown tokenization '{tokenization}'; use {' or '.join(TOKENIZATIONS)}.")
        self.spec = spec.canonical
        self._spec = spec
        self.seed = seed
        self.tokenization = tokenization
        self.allow_untrained_head = False
        self.untrained: list[str] = []
        self.model = None
        self._specials = None
        self.tokenizer_lock = threading.RLock()
        self._shares_prompt = True
        self.n_truncated = 0
        self.n_pairs = 0
        self.source = resolve_source(spec)
        self.tokenizer = load_tokenizer(spec, self.source)
        config = load_pretrained(spec, self.source, AutoConfig.from_pretrained)
        self.max_length = model_max_length(self.tokenizer, config, self.source)
        self.engine_options = EngineOptions.from_mapping(engine_options)
        self.engine = connect(spec.name, self.source, device=device, dtype=dtype, options=self.engine_options,
                              runner=runner)
        self.config = config
        self.requested_dtype = dtype

    def _cache(self, purpose: str) -> RequestCache | None:
        from prb_utils.models.fingerprint import model_fingerprint

        if not hasattr(self, "_caches"):
            self._caches: dict[str, RequestCache | None] = {}
        if purpose not in self._caches:
            self._caches[purpose] = self.engine.cache(purpose, model_fingerprint(self.spec)) \
                if self.engine.options.cache_dir else None
        return self._caches[purpose]

    def _engine_metadata(self) -> dict[str, Any]:
        return {
            "spec": self.spec, "kind": self.kind, "model_source": self.source, "model_type": None,
            "model_class": None, "n_parameters": None, "device": "vllm-server",
            "dtype": self.engine.dtype or self.requested_dtype, "chat_template_hash": chat_template_hash(self.tokenizer),
            "chat_template": "model" if has_chat_template(self.tokenizer) else "fallback",
            "max_length": self.max_length, "seed": self.seed, "n_pairs_scored": self.n_pairs,
            "n_truncated": self.n_truncated, "tokenization": self.tokenization,
            "special_tokens": self.special_mode(), "untrained_head": False, "newly_initialized": [],
            **self.engine.metadata(),
        }


class VLLMJudgeRM(_VLLMMixin, JudgeRM):
    """``judge:`` through a vLLM server (see the module docstring); rows as :class:`JudgeRM` gives them."""

    kind = "judge"

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto", seed: int = 0,
                 judge_mode: str = "logprob", judge_template: str | None = None,
                 max_new_tokens: int = MAX_NEW_TOKENS, tokenization: str = "auto",
                 engine_options: Any = None, **_: Any) -> None:
        from prb_utils.errors import PRBError

        if judge_mode not in MODES:
            raise PRBError(f"Unknown judge mode '{judge_mode}'; use logprob or generate.")
        self.template = load_judge_template(judge_template)
        self.mode = judge_mode
        self.kv_reuse = False
        self.max_new_tokens = max_new_tokens
        self._setup(spec, device=device, dtype=dtype, seed=seed, tokenization=tokenization,
                    engine_options=engine_options)
        self.a_ids = letter_ids(self.tokenizer, "A")
        self.b_ids = letter_ids(self.tokenizer, "B")
        self.letters = NextTokenLogprobs(self.engine, purpose="judge", cache=self._cache)

    def run_remote(self, prepared: Any) -> list[PairScore]:
        return JudgeRM.run(self, prepared)

    def _plan(self, seqs: list[list[list[int]]]) -> list[list[list[int]]]:
        return seqs   # the "plan" the server needs is the token ids themselves

    def _logprob(self, seqs: list[list[list[int]]]) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        found = self.letters([s for pair in seqs for s in pair], [*self.a_ids, *self.b_ids])
        p_orders, masses = [], []
        for k in range(len(seqs)):
            (p_ab, m_ab), (p_ba, m_ba) = (self._letters(found[2 * k + j]) for j in (0, 1))
            p_orders.append((p_ab, 1 - p_ba))   # AB: chosen is A; BA: chosen is B
            masses.append((m_ab, m_ba))
        return p_orders, masses

    def _letters(self, logprobs: dict[int, float]) -> tuple[float, float]:
        """(P(A) / (P(A) + P(B)), P(A) + P(B)) from the letter variants' log-probs."""
        la = logsumexp([logprobs[t] for t in self.a_ids])
        lb = logsumexp([logprobs[t] for t in self.b_ids])
        if math.isnan(la) or math.isnan(lb) or (la == -math.inf and lb == -math.inf):
            return math.nan, 0.0
        p_a = 1.0 / (1.0 + math.exp(lb - la)) if lb - la < 700 else 0.0
        return p_a, math.exp(logsumexp([la, lb]))

    def _generate(self, seqs: list[list[list[int]]]) -> list[tuple[str, str]]:
        flat = [s for pair in seqs for s in pair]
        bodies = [{"model": self.engine.model, "prompt": list(s), "max_tokens": self.max_new_tokens,
                   "temperature": 0.0, "skip_special_tokens": True} for s in flat]
        texts = self.engine.client.map(bodies, lambda r, _: completion_text(r)[0], cache=self._cache("judge-generate"))
        return [(texts[2 * i], texts[2 * i + 1]) for i in range(len(seqs))]

    def run_metadata(self) -> dict[str, Any]:
        return {**self._engine_metadata(), "judge_mode": self.mode, "kv_reuse": False,
                "judge_template": self.template.name,
                "judge_template_hash": stable_hash([self.template.system, self.template.user]),
                "answer_prefix": "**Result:**" if self.mode == "logprob" else None,
                "max_new_tokens": self.max_new_tokens if self.mode == "generate" else None,
                "a_token_ids": self.a_ids, "b_token_ids": self.b_ids, **self.letters.metadata()}


class VLLMImplicitRM(_VLLMMixin, ImplicitRM):
    """``implicit:`` through a vLLM server: mean prompt log-prob of the response tokens."""

    kind = "implicit"

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto", seed: int = 0,
                 tokenization: str = "auto", engine_options: Any = None, **_: Any) -> None:
        self.kv_reuse = False
        self._setup(spec, device=device, dtype=dtype, seed=seed, tokenization=tokenization,
                    engine_options=engine_options)

    def run_remote(self, prepared: Any) -> list[PairScore]:
        flat = [(s, f) for seqs, firsts, _ in prepared.sequences for s, f in zip(seqs, firsts, strict=True)]
        bodies = [{"model": self.engine.model, "prompt": list(s), "max_tokens": 1, "temperature": 0.0,
                   "prompt_logprobs": 0} for s, _ in flat]
        per_token = self.engine.client.map(
            bodies, lambda r, body: prompt_token_logprobs((r.get("choices") or [{}])[0], body["prompt"]),
            cache=self._cache("implicit"))
        scores = []
        for k, (seqs, _, truncated) in enumerate(prepared.sequences):
            means = []
            for j in (0, 1):
                _, first = flat[2 * k + j]
                values = [math.nan if v is None else v for v in per_token[2 * k + j][max(1, first):]]
                means.append((sum(values) / len(values), len(values)) if values else (math.nan, 0))
            (chosen, n_chosen), (rejected, n_rejected) = means
            scores.append(self._pair_score(seqs, truncated, chosen, n_chosen, rejected, n_rejected))
        self.n_pairs += len(prepared.sequences)
        return scores

    def run_metadata(self) -> dict[str, Any]:
        return {**self._engine_metadata(), "kv_reuse": False}



class VLLMClassifierRM(_VLLMMixin, ClassifierRM):
    """``classifier:`` through vLLM's pooling runner (``/classify`` without activation: the raw logits); the
    score is the single logit, or the softmax probability of the last class, as :class:`ClassifierRM`."""

    kind = "classifier"

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto", seed: int = 0,
                 tokenization: str = "auto", engine_options: Any = None, **_: Any) -> None:
        self.kv_reuse = False
        self._setup(spec, device=device, dtype=dtype, seed=seed, tokenization=tokenization,
                    engine_options=engine_options, runner="pooling")

    def run_remote(self, prepared: Any) -> list[PairScore]:
        bodies = [{"model": self.engine.model, "input": list(s), "use_activation": False}
                  for seqs, _ in prepared.sequences for s in seqs]
        values = self.engine.client.map(bodies, lambda r, _: _class_score(r), cache=self._cache("classifier"),
                                        path="/classify")
        scores = []
        for k, (seqs, truncated) in enumerate(prepared.sequences):
            chosen, rejected = values[2 * k], values[2 * k + 1]
            chosen, rejected = (math.nan if v is None else v for v in (chosen, rejected))
            self.n_truncated += int(truncated)
            scores.append(PairScore(chosen, rejected, nonfinite_reason(chosen, rejected),
                                    {"truncated": truncated, "n_tokens": sum(len(s) for s in seqs)}))
        self.n_pairs += len(prepared.sequences)
        return scores

    def run_metadata(self) -> dict[str, Any]:
        return {**self._engine_metadata(), "kv_reuse": False, "num_labels": getattr(self.config, "num_labels", None)}


def _class_score(response: dict[str, Any]) -> float | None:
    """The single logit, or the softmax probability of the last class, from a ``/classify`` response."""
    data = response.get("data") or []
    logits = [float(x) for x in (data[0].get("probs") or [])] if data else []
    if not logits:
        return None
    if len(logits) == 1:
        return logits[0]
    top = max(logits)
    weights = [math.exp(x - top) for x in logits]
    return weights[-1] / sum(weights)
