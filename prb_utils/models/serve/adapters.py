"""``judge:``, ``implicit:`` and ``classifier:`` over a server engine, with the HF adapters' prompts, tokens and rows;
written once over the engine's dialect (:class:`~prb_utils.models.serve.dialect.Dialect`: every request is one of
its ``(path, body)`` requests, every answer is read by its parsers, given the token ids sent).

The prompts and token ids are built by the HF adapters' own code (:class:`~prb_utils.models.judge.JudgeRM`
and :class:`~prb_utils.models.implicit.ImplicitRM`, whose prompt methods these classes inherit without
loading the model): same chat template, same special tokens (``tokenization``), same truncation to the
model's context, or to the server's when that is shorter (``max_model_len`` of its ``/v1/models``, e.g. a server
started with ``--max-model-len``; the truncated pairs are flagged and counted). The server receives token ids,
so both engines see the same tokens.

- judge, ``logprob`` mode: per A/B order one request for the next-token log-probs after prompt + answer
  prefix of exactly the letter variants the HF judge sums (:func:`~prb_utils.models.judge.letter_ids`),
  asked by id (vLLM's ``logprob_token_ids``; a server that refuses it is asked for its top-k,
  ``return_tokens_as_token_ids``). A variant the server did not return (outside its top-k) gets its exact
  log-prob from a second request: the prompt logprobs of the prompt followed by that token (the forced
  continuation), never a default. P(A) and P(B) are renormalised; ``p_letters_*`` is the covered mass.
- judge, ``generate`` mode: greedy completion of ``max_new_tokens`` tokens, parsed as the HF judge parses.
- implicit: the prompt logprobs of prompt + response; the score is the mean over the response's tokens (the
  same span as the HF adapter).

- classifier: ``/classify`` with ``use_activation: false`` (a vLLM server applies a sigmoid to single-label
  heads, a softmax to others, unless asked not to; older servers ignore the field). Before its first chunk,
  the adapter checks that contract on ``CONTRACT_PAIRS`` pairs: against the HF engine's scores when the
  model's local folder is small enough to load here (``HF_CHECK_MAX_BYTES``), otherwise by asking the same
  inputs with the activation on: a server whose answers do not change and lie in [0, 1] applies the
  activation regardless. A failed check ends the run in one sentence; the check, what was asked and the
  server's logged pooler settings (for a server prb started) go into the run metadata. A model whose scores
  tie at the extremes (``SATURATION_SHARE`` of them, from ``SATURATION_MIN_SCORES`` on) gets a one-line
  warning.

A response without what was asked for (no choices, no logprobs, no prompt logprobs, no classification data)
raises :class:`~prb_utils.models.serve.dialect.UnusableResponse`: it is never cached, the pair becomes a
``failed`` row (scored again by the next run), and a server that keeps answering so stops the run.
"""

from __future__ import annotations

import gc
import math
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models.base import ModelSpec, PairInput, PairScore
from prb_utils.models.classifier import ClassifierRM
from prb_utils.models.engines import EngineConfig
from prb_utils.models.fingerprint import model_fingerprint
from prb_utils.models.hf import (
    nonfinite_reason,
)
from prb_utils.models.implicit import ImplicitRM
from prb_utils.models.judge import MAX_NEW_TOKENS, MODES, JudgeRM, letter_ids
from prb_utils.models.prompts import chat_template_hash, has_chat_template, load_judge_template
from prb_utils.models.serve.client import Cancelled, EngineError, RequestCache
from prb_utils.models.serve.connection import NextTokenLogprobs, connect, logsumexp
from prb_utils.models.serve.dialect import Request
from prb_utils.schema import stable_hash

CONTRACT_PAIRS = 3   # pairs whose classifier scores are checked before the first chunk
CONTRACT_TOLERANCE = 0.05   # of max(1, |HF score|): a sigmoid or softmax is far outside it
HF_CHECK_MAX_BYTES = 2 * 1024**3   # weights this small are loaded in process to check the server against
SATURATION_SHARE = 0.25   # of the scores tied at the lowest or highest value: a saturated head
SATURATION_MIN_SCORES = 20


class _ServedMixin:
    """State shared by the served adapters: what HFAdapter sets up, minus the model, plus the engine.

    :meth:`prepare` sends the chunk's requests (the scorer runs it ahead, in its own thread, for
    :attr:`prefetch` chunks at once), so the next chunk's requests are in flight while this chunk's last ones
    finish and its rows are written: the server never idles between chunks. :meth:`run` only hands the
    scores on.
    """

    kind = ""
    prefetch = 2
    #: Tokens a request needs beyond its prompt (one generated token; the judge's forced continuation one more):
    #: prompts are fitted to the server's context less this.
    context_reserve = 1

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
               engine_config: EngineConfig, runner: str | None = None) -> None:
        self._setup_weightless(spec, seed=seed, tokenization=tokenization)
        self._read_context()
        self.engine_config = engine_config
        self.engine = connect(spec.name, self.source, device=device, dtype=dtype, options=engine_config,
                              runner=runner)
        self.requested_dtype = dtype
        served = self.engine.max_model_len   # the server's real context (e.g. --max-model-len), as it reports it
        if served:   # prompts are cut to it as the HF engine cuts them to the model's, and counted as truncated
            self.max_length = max(1, min(self.max_length, served - self.context_reserve))

    def _cache(self, purpose: str) -> RequestCache | None:
        if not hasattr(self, "_caches"):
            self._caches: dict[str, RequestCache | None] = {}
        named = f"{purpose}@{self._own_job}" if self._own_job else purpose
        if named not in self._caches:
            self._caches[named] = self.engine.cache(named, model_fingerprint(self.spec)) \
                if self.engine.options.cache_dir else None
        return self._caches[named]

    _own_job: str | None = None

    @contextmanager
    def own_requests(self, job: str | None, share: float = 1.0) -> Iterator[float]:
        """While one job runs that must send requests of its own (a retest: :attr:`prb_utils.probes.Probe.
        own_requests`): its request cache is its own, named by ``job`` (its store key), so no response another job
        cached is read (a rerun of the same job still resumes from its own), and the client keeps ``share`` of its
        requests in flight (the server batches fewer of them together); restored after. Yields ``share``."""
        client = self.engine.client
        before = (self._own_job, client.concurrency)
        self._own_job, client.concurrency = job, max(1, int(client.concurrency * share))
        try:
            yield share
        finally:
            self._own_job, client.concurrency = before

    def _engine_metadata(self) -> dict[str, Any]:
        return {
            "spec": self.spec, "kind": self.kind, "model_source": self.source, "model_type": None,
            "model_class": None, "n_parameters": None, "device": f"{self.engine.options.name}-server",
            "dtype": self.engine.dtype or self.requested_dtype, "chat_template_hash": chat_template_hash(self.tokenizer),
            "chat_template": "model" if has_chat_template(self.tokenizer) else "fallback",
            "max_length": self.max_length, "seed": self.seed, "n_pairs_scored": self.n_pairs,
            "n_truncated": self.n_truncated, "tokenization": self.tokenization,
            "special_tokens": self.special_mode(), "untrained_head": False, "newly_initialized": [],
            **self.engine.metadata(),
        }


class ServedJudgeRM(_ServedMixin, JudgeRM):
    """``judge:`` through a server engine (see the module docstring); rows as :class:`JudgeRM` gives them."""

    kind = "judge"
    context_reserve = 2

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto", seed: int = 0,
                 judge_mode: str = "logprob", judge_template: str | None = None,
                 max_new_tokens: int = MAX_NEW_TOKENS, tokenization: str = "auto",
                 engine_config: EngineConfig, **_: Any) -> None:
        if judge_mode not in MODES:
            raise PRBError(f"Unknown judge mode '{judge_mode}'; use logprob or generate.")
        self.template = load_judge_template(judge_template)
        self.mode = judge_mode
        self.kv_reuse = False
        self.max_new_tokens = max_new_tokens
        self._setup(spec, device=device, dtype=dtype, seed=seed, tokenization=tokenization,
                    engine_config=engine_config)
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
        dialect = self.engine.dialect
        requests = [dialect.completion_request(self.engine.model, s, max_tokens=self.max_new_tokens) for s in flat]
        texts = self.engine.client.map(requests, lambda r, _: dialect.completion_texts(r)[0],
                                       cache=self._cache("judge-generate"))
        return [(texts[2 * i], texts[2 * i + 1]) for i in range(len(seqs))]

    def run_metadata(self) -> dict[str, Any]:
        return {**self._engine_metadata(), "judge_mode": self.mode, "kv_reuse": False,
                "judge_template": self.template.name,
                "judge_template_hash": stable_hash([self.template.system, self.template.user]),
                "answer_prefix": "**Result:**" if self.mode == "logprob" else None,
                "max_new_tokens": self.max_new_tokens if self.mode == "generate" else None,
                "a_token_ids": self.a_ids, "b_token_ids": self.b_ids, **self.letters.metadata()}


class ServedImplicitRM(_ServedMixin, ImplicitRM):
    """``implicit:`` through a server engine: mean prompt log-prob of the response tokens."""

    kind = "implicit"

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto", seed: int = 0,
                 tokenization: str = "auto", engine_config: EngineConfig, **_: Any) -> None:
        self.kv_reuse = False
        self._setup(spec, device=device, dtype=dtype, seed=seed, tokenization=tokenization,
                    engine_config=engine_config)

    def run_remote(self, prepared: Any) -> list[PairScore]:
        flat = [(s, f) for seqs, firsts, _ in prepared.sequences for s, f in zip(seqs, firsts, strict=True)]
        dialect = self.engine.dialect
        requests = [dialect.prompt_logprobs_request(self.engine.model, s) for s, _ in flat]
        per_token = self.engine.client.map(
            requests, lambda r, i: dialect.prompt_logprobs(r, flat[i][0]), cache=self._cache("implicit"))
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



class ServedClassifierRM(_ServedMixin, ClassifierRM):
    """``classifier:`` through a server's pooling runner (vLLM's ``/classify`` without activation: the raw logits); the
    score is the single logit, or the softmax probability of the last class, as :class:`ClassifierRM`. The
    server's contract is checked before the first chunk (see the module docstring)."""

    kind = "classifier"
    context_reserve = 0   # /classify generates nothing

    def __init__(self, spec: ModelSpec, *, device: str = "auto", dtype: str = "auto", seed: int = 0,
                 tokenization: str = "auto", engine_config: EngineConfig, **_: Any) -> None:
        self.kv_reuse = False
        self._setup(spec, device=device, dtype=dtype, seed=seed, tokenization=tokenization,
                    engine_config=engine_config, runner="pooling")
        self.contract: dict[str, Any] | None = None
        self._contract_lock = threading.Lock()
        self._contract_error: EngineError | None = None
        self._scores: list[float] = []
        self._warned = False
        self._watch_lock = threading.Lock()   # chunks prepared ahead run in threads

    def prepare(self, pairs: Sequence[PairInput]) -> list[PairScore]:
        with self._contract_lock:
            if self._contract_error is not None:   # one check: a chunk prepared ahead does not repeat it
                raise self._contract_error
            if self.contract is None and pairs:
                try:
                    self.contract = self._check_contract(pairs[:CONTRACT_PAIRS])
                except EngineError as exc:
                    if not isinstance(exc, Cancelled):   # a stopped run checks again when it resumes
                        self._contract_error = exc
                    raise
        return super().prepare(pairs)

    def _requests(self, seqs: Sequence[Sequence[int]], *, activation: bool = False) -> list[Request]:
        return [self.engine.dialect.classify_request(self.engine.model, s, activation=activation) for s in seqs]

    def _class_values(self, response: Any, _: int = 0) -> list[float]:
        return self.engine.dialect.class_values(response)

    def _class_score(self, response: Any, _: int = 0) -> float:
        return class_score(self.engine.dialect.class_values(response))

    def _check_contract(self, pairs: Sequence[PairInput]) -> dict[str, Any]:
        """Raw logits from the server for ``pairs`` (see the module docstring); EngineError otherwise."""
        with self.tokenizer_lock:
            seqs = [s for group, _ in self._prepare(pairs).sequences for s in group]
        raw = self.engine.client.map(self._requests(seqs), self._class_values)
        served = [class_score(v) for v in raw]
        found: dict[str, Any] = {"n_inputs": len(seqs), "use_activation_sent": False}
        hf, why = self._hf_scores(pairs)
        if hf is not None:
            worst = max(abs(a - b) for a, b in zip(served, hf, strict=True))
            bound = CONTRACT_TOLERANCE * max(1.0, *(abs(h) for h in hf))
            found.update(method="hf", max_abs_difference=worst, raw_logits=worst <= bound)
            detail = f"they differ from the HF engine's by up to {worst:.3g} on {len(seqs)} inputs"
        else:
            activated = self.engine.client.map(self._requests(seqs, activation=True), self._class_values)
            honoured = activated != raw
            bounded = all(confined(v) for v in raw)
            found.update(method="activation", hf_check_skipped=why, use_activation_honoured=honoured,
                         values_in_unit_interval=bounded, raw_logits=honoured or not bounded)
            detail = (f"they stay in [0, 1] on {len(seqs)} inputs whether or not use_activation is set, on a head "
                      "whose logits are unbounded")
        if not found["raw_logits"]:
            raise EngineError(f"The {self.engine.label} server at {self.engine.url} does not return raw logits for {self.spec} "
                              f"({detail}): it applies an activation although the request says use_activation="
                              f"false; {self.engine.dialect.raw_logits_hint}.")
        return found

    def _hf_scores(self, pairs: Sequence[PairInput]) -> tuple[list[float] | None, str | None]:
        """The HF engine's scores (chosen, rejected per pair) when the local folder is small enough to load
        here, or (None, why not)."""
        folder = Path(self.source)
        if not folder.is_dir():
            return None, "the model has no local folder"
        size = sum(f.stat().st_size for f in folder.iterdir() if f.suffix in (".safetensors", ".bin", ".pt"))
        if size > HF_CHECK_MAX_BYTES:
            return None, f"its weights ({size / 1024**3:.1f} GiB) are too large to load beside the server"
        try:
            model = ClassifierRM(self._spec, device="cpu", dtype="float32", seed=self.seed,
                                 tokenization=self.tokenization)
            scores = [v for s in model.score_pairs(pairs) for v in (float(s.score_chosen), float(s.score_rejected))]
        except Exception as exc:  # the check falls back; the run is not the HF engine's to stop
            return None, f"it does not load in process ({type(exc).__name__})"
        del model
        gc.collect()
        return scores, None

    def run_remote(self, prepared: Any) -> list[PairScore]:
        requests = self._requests([s for seqs, _ in prepared.sequences for s in seqs])
        values = self.engine.client.map(requests, self._class_score, cache=self._cache("classifier"))
        scores = []
        for k, (seqs, truncated) in enumerate(prepared.sequences):
            chosen, rejected = values[2 * k], values[2 * k + 1]
            chosen, rejected = (math.nan if v is None else v for v in (chosen, rejected))
            self.n_truncated += int(truncated)
            scores.append(PairScore(chosen, rejected, nonfinite_reason(chosen, rejected),
                                    {"truncated": truncated, "n_tokens": sum(len(s) for s in seqs)}))
        self.n_pairs += len(prepared.sequences)
        self._watch([v for v in values if v is not None])
        return scores

    def _watch(self, values: Sequence[float]) -> None:
        """One warning, the first time the scores seen so far saturate."""
        with self._watch_lock:
            self._scores.extend(values)
            share, n = extreme_ties(self._scores), len(self._scores)
            warn = not self._warned and n >= SATURATION_MIN_SCORES and share >= SATURATION_SHARE
            self._warned = self._warned or warn
        if warn:
            print(f"prb: warning: {self.spec} saturates on the {self.engine.options.name} engine: {share:.0%} of its first "
                  f"{n} scores tie at the lowest or highest value, so its pairs end in ties there.",
                  file=sys.stderr)

    def run_metadata(self) -> dict[str, Any]:
        return {**self._engine_metadata(), "kv_reuse": False, "num_labels": getattr(self.config, "num_labels", None),
                "engine_classifier_check": self.contract,
                "engine_pooler_config": self.engine.pooler_config,
                "score_extreme_ties": extreme_ties(self._scores) if self._scores else None}


def class_score(logits: Sequence[float]) -> float:
    """The single logit, or the softmax probability of the last class (as :class:`ClassifierRM`).

    >>> class_score([2.5]), round(class_score([0.0, math.log(3)]), 6)
    (2.5, 0.75)
    """
    if len(logits) == 1:
        return float(logits[0])
    top = max(logits)
    weights = [math.exp(x - top) for x in logits]
    return weights[-1] / sum(weights)


def confined(values: Sequence[float]) -> bool:
    """Whether class values look activated: each in [0, 1] and, for several classes, summing to 1.

    >>> confined([0.7]), confined([2.1]), confined([0.2, 0.8]), confined([0.2, 0.3])
    (True, False, True, False)
    """
    inside = all(0.0 <= v <= 1.0 for v in values)
    return inside and (len(values) == 1 or abs(sum(values) - 1.0) < 1e-3)


def extreme_ties(scores: Sequence[float]) -> float:
    """Share of ``scores`` tied at the lowest or the highest value (a value counts when it occurs twice or more).

    >>> extreme_ties([0.0, 0.0, 0.3, 1.0, 1.0, 1.0]), extreme_ties([0.1, 0.2, 0.3, 0.3]), extreme_ties([])
    (0.8333333333333334, 0.5, 0.0)
    """
    finite = [v for v in scores if math.isfinite(v)]
    if not finite:
        return 0.0
    tied = 0
    for extreme in {min(finite), max(finite)}:
        count = finite.count(extreme)
        tied += count if count > 1 else 0
    return tied / len(finite)
