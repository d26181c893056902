"""Score reward models on a benchmark, one job per (model, profile condition), through the results store.

For each model (loaded once, and only when one of its jobs has pairs left to score) and each profile
condition, the pairs the store already holds are skipped; the rest are scored in chunks, each chunk written
as a part file as soon as it is scored (see :mod:`prb_utils.store`), with a tqdm bar in pairs/s.

Outcomes: ``correct`` when ``score_chosen > score_rejected``, ``tie`` when equal, ``wrong`` otherwise;
``invalid`` when the adapter says so (``invalid_reason``) or a score is NaN/inf (reason "non-finite score").
When the adapter raises on a chunk, each pair of the chunk is scored alone; pairs that still raise become
``invalid`` rows with the exception as reason (``failed`` true, tried again by the next run) and the run goes
on. After ``ABORT_AFTER_FAILURES`` consecutive failing pairs the model is broken rather than the pairs: the
error is raised (every chunk scored so far, failed rows included, stays in the store). Ctrl-C stops at
once; finished chunks are kept and the next run resumes. A job whose rows are all there but whose last run
was killed before its final metadata (e.g. during compaction) is finished by the next run without loading
the model: leftovers cleaned, parts compacted, truncated/failed counts taken from the rows.

Under ``torchrun`` (:mod:`prb_utils.distributed`) the ranks of one run score each job together: rank 0 holds
the job lock and tells every rank which pairs are left, each rank scores its round-robin share of them on its
own device into part files named with its rank, and when every rank is done (a barrier) rank 0 finishes the
job, recording ``world_size`` and the pairs each rank scored (``rank_pairs``) in the run metadata.
"""

from __future__ import annotations

import gc
import math
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from importlib import metadata as importlib_metadata
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from prb_utils import __version__
from prb_utils.data import DATA_ATTR, data_fingerprint, pair_keys_digest, user_key
from prb_utils.distributed import (
    World,
    barrier,
    broadcast,
    gather,
    kill_point,
    one_process_advice,
    setup,
    world,
)
from prb_utils.errors import PRBError
from prb_utils.models import ModelOptions, PairInput, load_model
from prb_utils.models.base import ModelSpec, parse_spec, spec_of
from prb_utils.models.engines import ENGINES, EngineConfig
from prb_utils.models.fingerprint import model_fingerprint
from prb_utils.models.hf import resolve_source
from prb_utils.models.kinds import ENCODER, MODEL_KINDS
from prb_utils.models.prompts import JUDGE_TEMPLATES, load_judge_template
from prb_utils.models.serve.connection import check_same_server, read_server_facts
from prb_utils.models.weights import weights_bytes
from prb_utils.probes import find_probe
from prb_utils.profile import (
    ProfileCondition,
    condition_records,
    parse_condition,
    rm_user_message,
)
from prb_utils.retrieval import encoder_errors, picked_by, post_selectors
from prb_utils.schema import ATTENTIONS, pair_key, stable_hash
from prb_utils.store import JobStore, missing_pairs, now, open_job, pair_hash, tidy_rows

MIN_CHUNK = 2
MAX_CHUNK = 1024
FIRST_CHUNK = 8
TARGET_CHUNK_SECONDS = 5.0
# A chunk is at most twice the one before: the next chunk's host work (prepared while this one runs on the
# device) then stays shorter than this chunk's device work even when the host needs a third of the device's
# time per pair (a 3B model on an H200: 7 ms against 20 ms per top3 pair); at 4x the device waited.
CHUNK_GROWTH = 2
ABORT_AFTER_FAILURES = 8  # consecutive pairs that raise even when scored alone
#: A job whose failed pairs (they raised even when scored alone) are more than this share (a third) of the pairs
#: it scored, and at least ``FAILED_PAIRS_TO_STOP`` of them, stops the run once its pairs are done: a server or model
#: that fails this often (every other response, say) is not one to report numbers from. What finished is kept;
#: the next run scores the failed pairs again.
MAX_FAILED_SHARE = 1 / 3
FAILED_PAIRS_TO_STOP = 3
#: Run-metadata counters an adapter keeps over its whole life (every condition of its model, this rank only): a
#: job records what its own pairs added, summed over the ranks of a torchrun world.
JOB_COUNTERS = ("n_pairs_scored", "tokens_computed", "oom_halvings", "n_letter_fallbacks", "engine_requests_sent",
                "engine_requests_cached", "engine_retries")
# While the preparing thread tokenizes, the thread that drives the device waits for the interpreter lock at
# most this long (Python's default is 5 ms). bench/host_overhead.py on one core, two runs each: 0.5 ms cost
# 11-12.7 host ms per pair in thread switches (8.8-9.1 at 5 ms); 2 ms gave 7.5-8.1 and the best shares.
SWITCH_INTERVAL_S = 0.002


class _Pair:
    """One pair as scored in one job: identity, metadata, and its RM input and hash, built on first use.

    The RM input (retrieval for ``top{K}``) and its hash are built lazily: a fresh job needs neither before
    its pairs are scored, so they are built in the scorer's preparing thread while the device runs the
    chunk before (a stored row's pair builds its hash at once, to be checked against the store)."""

    __slots__ = ("subset", "id", "category", "chosen", "rejected", "_record", "_condition", "_retriever",
                 "_prompt", "_hash")

    def __init__(self, record: Mapping[str, Any], condition: str, retriever: Callable[..., list[int]] | None) -> None:
        self.subset, self.id = str(record["subset"]), str(record["id"])
        self.category = str(record.get("category") or "")
        self.chosen, self.rejected = record["chosen"], record["rejected"]
        self._record, self._condition, self._retriever = record, condition, retriever
        self._prompt: str | None = None
        self._hash: str | None = None

    @property
    def key(self) -> str:
        return pair_key(self.subset, self.id)

    @property
    def prompt(self) -> str:
        if self._prompt is None:
            self._prompt = _user_message(self._record, self._condition, self._retriever)
        return self._prompt

    @property
    def hash(self) -> str:
        if self._hash is None:
            self._hash = pair_hash(self.subset, self.id, self.prompt, self.chosen, self.rejected,
                                   category=self.category)
        return self._hash


# ------------------------------------------------------------------------------------------ outcomes


def outcome(score_chosen: float, score_rejected: float, invalid_reason: str | None = None) -> tuple[str, str | None]:
    """``(outcome, invalid_reason)`` of one scored pair.

    >>> outcome(0.7, 0.3), outcome(1.0, 1.0), outcome(float("nan"), 0.0)
    (('correct', None), ('tie', None), ('invalid', 'non-finite score'))
    """
    if invalid_reason:
        return "invalid", str(invalid_reason)
    try:
        chosen, rejected = float(score_chosen), float(score_rejected)
    except (TypeError, ValueError):
        return "invalid", "non-numeric score"
    if not (math.isfinite(chosen) and math.isfinite(rejected)):
        return "invalid", "non-finite score"
    if chosen > rejected:
        return "correct", None
    if chosen == rejected:
        return "tie", None
    return "wrong", None


def _error_reason(exc: BaseException) -> str:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


# ------------------------------------------------------------------------------------------ job setup


def _spec_kind(spec: str) -> tuple[str, str]:
    """Canonical spec text and kind, without loading anything (PRBError on an unknown kind)."""

    parsed = parse_spec(spec)
    return parsed.canonical, parsed.kind




def _template_id(judge_template: str | None) -> str:
    """A judge template is identified by its content: a named template (``None`` = ``default``) by its
    system and user text, so a new prb wording rescores; a file by its content; a string by itself."""
    return "sha256:" + stable_hash(_template_text(judge_template or "default"))


def _template_text(judge_template: str) -> str:
    """The template's text: a named template's system and user messages, else the user message read from
    the file or given as text (PRBError, as when the judge loads it, for a missing or unreadable file)."""

    template = load_judge_template(judge_template)
    if judge_template in JUDGE_TEMPLATES:
        return f"{template.system or ''}\0{template.user}"
    return template.user


def job_options(kind: str, condition: str, options: ModelOptions | None = None, *,
                retriever: str | None = None, retriever_seed: int | None = None) -> dict[str, Any]:
    """The options that can change a score of this kind under this condition (they go into the job key).
    ``retriever_seed`` (a ``random`` retriever's; default the options' seed) is keyed only when it is not 0.

    The device type and dtype are :meth:`~prb_utils.models.ModelOptions.placement`'s (``auto`` resolved in
    process; ``server`` and the dtype asked on a server engine). Execution
    details that cannot change a score (batch size) are kept in the run metadata only. A ``dense:NAME``
    retriever adds its encoder's fingerprint. The engine adds its part only for a kind it serves
    (:meth:`~prb_utils.models.engines.EngineConfig.key_options`), so every ``hf`` key stays what it was.
    """
    options = options or ModelOptions()
    traits = MODEL_KINDS[kind]
    key: dict[str, Any] = {}
    if traits.weights:
        key.update(options.placement(kind), seed=int(options.seed))
    key.update(options.engine.key_options(kind))
    if traits.weights and not options.engine.remote(kind) and options.attention != ATTENTIONS[0]:
        key["attention"] = options.attention   # prb's default attention keys nothing, so every key stays
    backend = _backend(condition)
    if backend is not None:
        key["backend"] = f"{backend[0]}={backend[1]}"   # a backend retest: never the base job, never pooled with it
    if traits.chat_template:
        key["tokenization"] = options.tokenization
    if traits.judge_options:
        key.update(judge_mode=options.judge_mode, judge_template=_template_id(options.judge_template))
    if parse_condition(condition).probe and int(options.seed) != 0:
        key["probe_seed"] = int(options.seed)   # a probe's seeded choices (seed 0: no key of its own)
    if parse_condition(condition).retrieves:  # only top{K} retrieves posts (none, full and rubric do not)
        key["retriever"] = retriever or "bm25"
        seed = int(options.seed if retriever_seed is None else retriever_seed)
        if key["retriever"] == "random" and seed != 0:
            key["retriever_seed"] = seed  # baselines carry no seed of their own (seed 0: no key change)
        if key["retriever"].startswith("dense:"):
            with encoder_errors(key["retriever"]):
                key["retriever_fingerprint"] = _fingerprint(
                    spec_of(ENCODER, key["retriever"].split(":", 1)[1]))
    return key


def _backend(condition: str | ProfileCondition) -> tuple[str, str] | None:
    """The ``(option, value)`` of a backend retest condition (``top3+retest-bfloat16``), else None."""
    name = parse_condition(condition).probe
    found = find_probe(name) if name else None
    return found.backend if found is not None else None


def backend_options(options: ModelOptions, kind: str, condition: str | ProfileCondition,
                    spec: str = "") -> ModelOptions:
    """The options a job of ``kind`` under ``condition`` loads its model with: ``options``, or for a backend retest
    (``top3+retest-bfloat16``: :func:`prb_utils.probes.backend_variant`) those with its option replaced. PRBError in
    one sentence where the variant cannot apply: a model-free kind (it has no dtype, attention or engine), an
    attention implementation on a server engine (the server picks it), an engine neither side of which serves
    the kind, a dtype on a server at ``--engine-url`` (it runs in the dtype it was started with), or the value the
    base job already runs with (no other backend to compare).

    >>> backend_options(ModelOptions(device="cpu"), "implicit", "top3+retest-bfloat16").dtype
    'bfloat16'
    >>> backend_options(ModelOptions(device="cpu"), "length", "top3+retest-eager")
    Traceback (most recent call last):
    prb_utils.errors.PRBError: length [top3+retest-eager]: length is a model-free baseline, with no attention to retest; retest a model with weights.
    """
    backend = _backend(condition)
    if backend is None:
        return options
    option, value = backend
    spec = spec or kind
    words = f"{spec} [{parse_condition(condition).name}]"
    if not MODEL_KINDS[kind].weights:
        raise PRBError(f"{words}: {kind} is a model-free baseline, with no {option} to retest; retest a model with "
                       "weights.")
    engine = options.engine
    if option == "engine":
        if value == engine.name:
            raise PRBError(f"{words}: the base job already runs on the {value} engine; retest on another engine "
                           f"(--engine {engine.name} is the base's).")
        other = (EngineConfig(value, cache_dir=engine.cache_dir, progress=engine.progress)
                 if ENGINES[value].in_process else replace(engine, name=value))
        if not (engine.remote(kind) or other.remote(kind)):
            raise PRBError(f"{words}: {kind} runs in this process on every engine (a server engine serves "
                           f"{', '.join(ENGINES[value].adapters or ENGINES[engine.name].adapters)}), so the {value} "
                           "engine would score it as the base job does.")
        return replace(options, engine=other)
    if option == "attention" and engine.remote(kind):
        raise PRBError(f"{words}: on the {engine.name} engine the server picks {spec}'s attention; an attention "
                       "retest runs the model in this process (--engine hf).")
    if option == "dtype" and engine.remote(kind) and engine.urls:
        raise PRBError(f"{words}: the server at --engine-url runs {spec} in the dtype it was started with; a dtype "
                       "retest runs the model in this process (--engine hf) or on a server prb starts.")
    changed = replace(options, **{option: value})
    if option == "dtype" and changed.placement(kind)["dtype"] == options.placement(kind)["dtype"]:
        raise PRBError(f"{words}: the base job already runs in {value} (--dtype {options.dtype}); retest another "
                       "dtype.")
    if option == "attention" and value == options.attention:
        raise PRBError(f"{words}: the base job already runs with {value} attention; retest another.")
    return changed


def _fingerprint(spec: str | ModelSpec) -> str:
    return model_fingerprint(spec)


def _given_fingerprint(given: Any, spec: str) -> str:
    """The fingerprint of a spec string, or of an already-loaded model (its ``fingerprint`` attribute,
    else its class name)."""
    if isinstance(given, str):
        return _fingerprint(spec)
    return str(getattr(given, "fingerprint", None) or f"object:{type(given).__module__}.{type(given).__qualname__}")


def _user_message(row: Mapping[str, Any], condition: str, retriever: Callable[..., list[int]] | None) -> str:
    return rm_user_message(row, condition, retriever=retriever)


def _pair_input(key: str, prompt: str, chosen: str, rejected: str) -> Any:
    return PairInput(key=key, prompt=prompt, chosen=chosen, rejected=rejected)


def _load_model(spec: str, options: ModelOptions) -> Any:
    """The scorer's one place that loads a model (tests replace it to load fakes)."""
    return load_model(spec, options)


def _build_pairs(
    records: list[dict[str, Any]], condition: str, retriever: Callable[..., list[int]] | None
) -> list[_Pair]:
    return [_Pair(row, condition, retriever) for row in records]


def _pair_hashes(pairs: Sequence[_Pair]) -> dict[str, str]:
    return {p.key: p.hash for p in pairs}


def unit_keys(records: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """``{pair key: (question hash, user hash)}`` of the benchmark's records: the units a clustered interval or
    test resamples (pairs of one question, its users and twin pairs, share the first; one user's pairs the
    second, :func:`prb_utils.data.user_key`: the record's ``user_id`` when it has one, else its profile).
    Computed once per scoring call, beside the scoring (a full profile takes about half a millisecond to hash),
    from the benchmark's own records: a probe's pairs belong to their own user and question whatever profile the
    probe shows.

    >>> keys = unit_keys([{"subset": "S", "id": "1", "question": "Q", "profile": [{"text": "a"}]},
    ...                   {"subset": "S", "id": "2", "question": "Q", "profile": []},
    ...                   {"subset": "S", "id": "3", "question": "R", "profile": [], "user_id": "u1"},
    ...                   {"subset": "S", "id": "4", "question": "R", "profile": [{"text": "b"}], "user_id": "u1"}])
    >>> keys["S/1"][0] == keys["S/2"][0], keys["S/1"][1] == keys["S/2"][1], keys["S/3"][1] == keys["S/4"][1]
    (True, False, True)
    """
    return {pair_key(str(r["subset"]), str(r["id"])): (stable_hash(str(r.get("question") or "")),
                                                       user_key(r.get("profile"), r.get("user_id")))
            for r in records}


def _record_pairs(meta: dict[str, Any], pairs: Sequence[_Pair], units: Mapping[str, tuple[str, str]]) -> None:
    """Keep in the job's record each pair's RM-input hash, its question's and its user's hash (``units``, from
    :func:`unit_keys`: the units a clustered interval or test resamples, :func:`prb_utils.store.pair_units`)."""
    meta["pairs"] = {**(meta.get("pairs") or {}), **_pair_hashes(pairs)}
    known = [p.key for p in pairs if p.key in units]
    meta["questions"] = {**(meta.get("questions") or {}), **{k: units[k][0] for k in known}}
    meta["users"] = {**(meta.get("users") or {}), **{k: units[k][1] for k in known}}


# ------------------------------------------------------------------------------------------ scoring


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _row(pair: _Pair, score: Any, *, job: str, spec: str, kind: str, profile: str) -> dict[str, Any]:
    extra = dict(getattr(score, "extra", None) or {})
    result, reason = outcome(score.score_chosen, score.score_rejected, getattr(score, "invalid_reason", None))
    truncated = extra.get("truncated")
    return {
        "model": spec,
        "kind": kind,
        "profile": profile,
        "subset": pair.subset,
        "category": pair.category,
        "id": pair.id,
        "score_chosen": _as_float(score.score_chosen),
        "score_rejected": _as_float(score.score_rejected),
        "outcome": result,
        "invalid_reason": reason,
        "p_chosen_ab": _as_float(extra["p_chosen_ab"]) if "p_chosen_ab" in extra else None,
        "p_chosen_ba": _as_float(extra["p_chosen_ba"]) if "p_chosen_ba" in extra else None,
        "verdict_ab": extra.get("verdict_ab"),
        "verdict_ba": extra.get("verdict_ba"),
        "truncated": None if truncated is None else bool(truncated),
        "failed": False,
        "pair_hash": pair.hash,
        "job": job,
    }


def _failed_row(pair: _Pair, exc: BaseException, *, job: str, spec: str, kind: str, profile: str) -> dict[str, Any]:
    return {
        "model": spec, "kind": kind, "profile": profile, "subset": pair.subset, "category": pair.category,
        "id": pair.id, "score_chosen": None, "score_rejected": None, "outcome": "invalid",
        "invalid_reason": _error_reason(exc), "failed": True, "pair_hash": pair.hash, "job": job,
    }


def _inputs(pairs: Sequence[_Pair]) -> list[Any]:
    return [_pair_input(p.key, p.prompt, p.chosen, p.rejected) for p in pairs]


def _score_once(model: Any, pairs: Sequence[_Pair], prepared: Future | None = None) -> list[Any]:
    if prepared is not None:
        scores = list(model.run(prepared.result()))   # the prepare's own error, if any, is raised here
    else:
        scores = list(model.score_pairs(_inputs(pairs)))
    if len(scores) != len(pairs):
        raise RuntimeError(f"the adapter returned {len(scores)} scores for {len(pairs)} pairs")
    return scores


def score_chunk(model: Any, pairs: Sequence[_Pair], *, prepared: Future | None = None,
                **labels: str) -> tuple[list[dict[str, Any]], list[Exception]]:
    """Rows for one chunk, plus one entry per pair (None or its exception) when the chunk call failed.

    ``prepared``: the future of ``model.prepare(pairs)`` when the host work ran ahead (see :class:`_Prefetcher`).
    On an adapter error, every pair is tried alone and pairs that still raise become ``failed`` invalid rows.
    """
    try:
        return [_row(p, s, **labels) for p, s in zip(pairs, _score_once(model, pairs, prepared), strict=True)], []
    except Exception as chunk_error:
        if getattr(chunk_error, "fatal", False):  # the engine is gone (not this chunk's fault): stop the run
            raise
        if len(pairs) == 1:
            return [_failed_row(pairs[0], chunk_error, **labels)], [chunk_error]
    rows, errors = [], []
    for pair in pairs:
        try:
            rows.append(_row(pair, _score_once(model, [pair])[0], **labels))
            errors.append(None)
        except Exception as exc:
            if getattr(exc, "fatal", False):
                raise
            errors.append(exc)
            rows.append(_failed_row(pair, exc, **labels))
    return rows, errors


class _Prefetcher:
    """Runs ``model.prepare`` (tokens, truncation, batch plan; for a server engine, the requests) for the
    next chunks in worker threads while the current chunk runs on the device, so the device never waits for
    the host. Models without ``prepare``/``run`` (baselines, plain ``score_pairs`` objects) are scored
    whole, in the main thread. ``model.prefetch`` (default 1) chunks are prepared ahead."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.ahead = max(1, int(getattr(model, "prefetch", 1))) if _splits(model) else 0
        self.pool = ThreadPoolExecutor(self.ahead, thread_name_prefix="prb-prepare") if self.ahead else None
        if callable(getattr(model, "resume", None)):
            model.resume()

    def submit(self, pairs: Sequence[_Pair]) -> Future | None:
        if self.pool is None:
            return None
        return self.pool.submit(lambda: self.model.prepare(_inputs(pairs)))   # RM inputs built there too

    def close(self, *, stopped: bool = False) -> None:
        """Stop preparing; ``stopped`` (Ctrl-C, an error): a model that can (a server engine) also stops the
        requests of the chunks prepared ahead. A chunk being tokenized finishes in its thread."""
        if self.pool is None:
            return
        if stopped and callable(getattr(self.model, "cancel", None)):
            self.model.cancel()
        self.pool.shutdown(wait=False, cancel_futures=True)


def _splits(model: Any) -> bool:
    return callable(getattr(model, "prepare", None)) and callable(getattr(model, "run", None))


def _next_chunk_size(current: int, seconds: float, n_pairs: int, floor: int = MIN_CHUNK) -> int:
    """The next chunk's pairs: about :data:`TARGET_CHUNK_SECONDS` of scoring at this chunk's rate, growing at most
    :data:`CHUNK_GROWTH` times, never under ``floor`` (:func:`_min_chunk`) nor over :data:`MAX_CHUNK`."""
    if n_pairs <= 0 or seconds <= 0:
        return max(floor, min(MAX_CHUNK, current * 2))
    wanted = int(TARGET_CHUNK_SECONDS * n_pairs / seconds)
    return max(floor, min(MAX_CHUNK, wanted, current * CHUNK_GROWTH))


def _min_chunk(model: Any) -> int:
    """The fewest pairs an adaptive chunk holds: :data:`MIN_CHUNK`, or more where the model asks for more
    (``min_chunk``: an embedding RM's pairs that fill one batch, since smaller chunks run smaller batches, which
    a busy CPU runs slower per token)."""
    return max(MIN_CHUNK, min(MAX_CHUNK, int(getattr(model, "min_chunk", MIN_CHUNK) or MIN_CHUNK)))


# ------------------------------------------------------------------------------------------ run metadata


def _version(package: str) -> str | None:
    try:
        return importlib_metadata.version(package)
    except importlib_metadata.PackageNotFoundError:
        return None


def package_versions() -> dict[str, str | None]:
    """Versions of the packages that shape a score (read without importing them)."""

    return {
        "prb": _version("prb") or __version__,
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "python": sys.version.split()[0],
    }


def _model_metadata(model: Any) -> dict[str, Any]:
    try:
        found = dict(model.run_metadata() or {})
    except Exception as exc:  # metadata must never cost the scores
        found = {"run_metadata_error": _error_reason(exc)}
    return found


# ------------------------------------------------------------------------------------------ the job loop


class _LazyModel:
    """Loads a model the first time it is needed, once, for every profile condition."""

    def __init__(self, spec: Any, options: ModelOptions) -> None:
        self._given = spec if not isinstance(spec, str) else None
        self._spec = spec if isinstance(spec, str) else None
        self._options = options
        self.model = self._given
        self._server: dict[str, Any] | None = None
        #: how long this process took to load the model and the bytes of its checkpoint files (a job's run
        #: metadata keeps them: their ratio is the read rate ``prb plan --load-rate`` asks for); empty until loaded
        self.loaded: dict[str, Any] = {}

    def server_facts(self, kind: str) -> dict[str, Any] | None:
        """What the server(s) at ``--engine-url`` that a model of ``kind`` runs on say of themselves
        (:data:`~prb_utils.models.serve.connection.SERVER_FACTS`, read once, the model not loaded); None for a
        model that runs in this process or on a server prb starts (its context and dtype are in the job's key)."""
        engine = self._options.engine
        if self._spec is None or not engine.urls or not engine.remote(kind):
            return None
        if self._server is None:
            spec = parse_spec(self._spec)
            self._server = read_server_facts(spec.name, resolve_source(spec), engine)
        return self._server

    def get(self) -> Any:
        if self.model is None:
            started = time.perf_counter()
            self.model = _load_model(self._spec, self._options)
            self.loaded = {"load_s": round(time.perf_counter() - started, 3)}
            spec = parse_spec(self._spec)
            if MODEL_KINDS[spec.kind].weights:
                self.loaded["weights_bytes"] = weights_bytes(resolve_source(spec))
        return self.model

    def release(self) -> None:
        """Drop a model this slot loaded; one with weights is collected at once (its memory is back before the next
        model loads), a model-free one is not (a full collection costs a quarter of a second in a large heap)."""
        if self._given is None and self.model is not None:
            self.model = None
            if MODEL_KINDS[parse_spec(self._spec).kind].weights:
                gc.collect()
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_available():
                torch.cuda.empty_cache()


def _run_job(
    store: JobStore,
    todo: list[_Pair],
    lazy: _LazyModel,
    labels: dict[str, str],
    *,
    run: dict[str, Any],
    progress: bool,
    chunk_size: int | None,
    ranks: World | None = None,
) -> None:
    """Score ``todo`` into ``store`` (the caller holds the job lock). With the ``ranks`` of a torchrun world,
    every rank calls this with the same ``todo`` and scores its share; rank 0, once all are done, finishes
    the job."""

    ranks = ranks or World()
    everyone, todo = todo, ranks.share(todo)
    model = lazy.get() if todo else None   # a rank without a share (fewer pairs than ranks) loads nothing
    run = {**run, "options": {**run["options"], **lazy.loaded}}
    with _batch_share(model, parse_condition(labels["profile"]), labels["job"]) as share:
        if share != 1.0:
            run = {**run, "options": {**run["options"], "batch_share": share}}
        _score_job(store, everyone, todo, model, labels, run=run, progress=progress, chunk_size=chunk_size,
                   ranks=ranks)


@contextmanager
def _batch_share(model: Any, condition: ProfileCondition, job: str = "") -> Iterator[float]:
    """The model's batch budget scaled by the condition's probe (:attr:`prb_utils.probes.Probe.batch_share`:
    ``retest`` batches the same pairs in half the tokens) for one job, then restored; yields the share used (1.0
    for a model without a token-budget batcher). A model on a server engine (one with ``own_requests``) keeps that
    share of its requests in flight instead and, for a probe that asks it (:attr:`~prb_utils.probes.Probe.
    own_requests`), sends the job's own requests (a request cache of the job ``job``'s own)."""
    probe = find_probe(condition.probe) if condition.probe else None
    share = probe.batch_share if probe else 1.0
    own = getattr(model, "own_requests", None)
    if probe is not None and callable(own) and (probe.own_requests or share != 1.0):
        with own(job if probe.own_requests else None, share) as used:
            yield used
        return
    batcher = getattr(model, "batcher", None)
    if share == 1.0 or not hasattr(batcher, "budget"):
        yield 1.0
        return
    budget = batcher.budget
    batcher.budget = max(1, int(budget * share))
    try:
        yield share
    finally:
        batcher.budget = budget


def _job_words(labels: Mapping[str, str]) -> str:
    return f"Job {labels['job']} ({labels['spec']} [{labels['profile']}])"


def _check_reused_server(store: JobStore, lazy: _LazyModel, labels: Mapping[str, str], options: ModelOptions) -> None:
    """Before a job's stored rows are reused on a server at ``--engine-url``: EngineError in one sentence when the
    server they came from (the job's run metadata) differs from this one in its context, dtype or identity
    (:func:`~prb_utils.models.serve.connection.check_same_server`)."""
    recorded = (store.metadata() or {}).get("run")
    if not isinstance(recorded, Mapping) or not store.parts():
        return
    current = lazy.server_facts(labels["kind"])
    if current is not None:
        check_same_server(recorded, current, _job_words(labels), options.engine.urls[0])


def _score_job(store: JobStore, everyone: list[_Pair], todo: list[_Pair], model: Any, labels: dict[str, str], *,
               run: dict[str, Any], progress: bool, chunk_size: int | None, ranks: World) -> None:
    """The body of :func:`_run_job`: this rank's ``todo`` of ``everyone`` scored with ``model`` into ``store``."""
    counted = _counters(model)   # what the model counted before this job (its earlier conditions)
    if ranks.is_main:
        meta = store.metadata() or {**store.description, "key": store.key, "created": now()}
        if run["n_pairs"] > len(everyone) and isinstance(meta.get("run"), Mapping):   # rows of an earlier run kept
            found = _model_metadata(model)
            check_same_server(meta["run"], found, _job_words(labels), found.get("engine_url"))
        meta.update(finished=None, updated=now(), n_pairs=run["n_pairs"], data=run["data"])
        meta["run"] = {**run["options"], **_model_metadata(model), **package_versions(), "started": now()}
        store.write_metadata(meta)

    floor = _min_chunk(model)
    size = chunk_size or max(FIRST_CHUNK, floor)
    bar = tqdm(total=len(todo), unit="pairs", desc=_job_name(labels),
               disable=not progress, file=sys.stderr, dynamic_ncols=True)
    prefetch = _Prefetcher(model)
    writer = ThreadPoolExecutor(1, thread_name_prefix="prb-write")   # rows reach the store while the next chunk runs
    pending: deque[tuple[list[_Pair], Future | None]] = deque()
    written: Future | None = None
    queued = streak = failed = 0
    last_error: Exception | None = None

    def schedule() -> None:
        nonlocal queued
        while queued < len(todo) and len(pending) <= prefetch.ahead:
            chunk = todo[queued : queued + size]
            queued += len(chunk)
            pending.append((chunk, prefetch.submit(chunk)))

    stopped = True
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)   # the device's thread gets the interpreter back within this
    try:
        schedule()
        while pending:
            chunk, prepared = pending.popleft()
            schedule()   # the chunks after this one are prepared while it runs
            started = time.perf_counter()
            rows, errors = score_chunk(model, chunk, prepared=prepared, **_row_labels(labels))
            seconds = time.perf_counter() - started
            if written is not None:
                written.result()   # one write at a time, in order; a failed write stops the run here
                kill_point(ranks)
            written = writer.submit(store.write_part, pd.DataFrame(rows),
                                    rank=ranks.rank if ranks.distributed else None)
            bar.update(len(chunk))
            for error in errors or [None]:
                streak = streak + 1 if error is not None else 0
                if streak >= ABORT_AFTER_FAILURES:
                    raise error  # a broken model, not a bad pair (the failed pairs are retried next run)
            failed += sum(error is not None for error in errors)
            last_error = next((e for e in reversed(errors) if e is not None), last_error)
            if chunk_size is None:
                size = _next_chunk_size(size, seconds, len(chunk), floor)
        stopped = False
    finally:
        sys.setswitchinterval(switch)
        prefetch.close(stopped=stopped)
        writer.shutdown(wait=True)   # every chunk scored is in the store, even after Ctrl-C or an error
        bar.close()
    if written is not None:
        written.result()
    barrier(ranks)   # every rank's rows are in the store
    mine = {k: v - counted.get(k, 0) for k, v in _counters(model).items()}
    everywhere = gather(ranks, (mine, failed))
    _stop_if_failing(sum(f for _, f in everywhere), len(everyone), labels, last_error)
    if not ranks.is_main:
        return

    _record_pairs(meta, run["pairs"], run["units"].result())   # every RM input is built now
    meta["data_fingerprint"] = run["data_fingerprint"].result()
    meta["run"].update(_model_metadata(model))  # again, with this job's own counters, every rank's:
    meta["run"].update({k: sum(c.get(k, 0) for c, _ in everywhere) for k in {k for c, _ in everywhere for k in c}})
    meta["run"]["n_scored"] = len(everyone)
    if ranks.distributed:
        meta["run"].update(world_size=ranks.size, rank_pairs=[[p.key for p in s] for s in ranks.shares(everyone)])
    _finish_job(store, meta)


def _counters(model: Any) -> dict[str, int]:
    """The :data:`JOB_COUNTERS` a model reports now (none without a model)."""
    if model is None:
        return {}
    found = _model_metadata(model)
    return {k: int(v) for k in JOB_COUNTERS if isinstance(v := found.get(k), int | float) and not isinstance(v, bool)}


def _job_name(labels: Mapping[str, str]) -> str:
    """How progress and messages name a job: its model and its condition as the user wrote it (``top3:bm25+swap``,
    where the store's rows say ``top3+swap``).

    >>> _job_name({"spec": "length", "profile": "top3+swap", "written": "top3:bm25+swap"})
    'length [top3:bm25+swap]'
    """
    return f"{labels['spec']} [{labels.get('written') or labels['profile']}]"


def _row_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels every row of a job carries (:func:`_row`): all but the condition as written."""
    return {k: v for k, v in labels.items() if k != "written"}


def _stop_if_failing(failed: int, scored: int, labels: Mapping[str, str], last: BaseException | None) -> None:
    """PRBError (the run stops; what finished is kept) when ``failed`` of the ``scored`` pairs of a job exceed
    :data:`MAX_FAILED_SHARE`, counting from :data:`FAILED_PAIRS_TO_STOP`; ``last``: this rank's last error."""
    if failed < FAILED_PAIRS_TO_STOP or failed <= MAX_FAILED_SHARE * scored:
        return
    why = f" (the last: {_error_reason(last)})" if last is not None else ""
    raise PRBError(f"{failed} of the {scored} pairs of {_job_name(labels)} failed{why}, more than "
                   "the third a job may lose, so its accuracy would mean little: the pairs that finished are kept, "
                   "and the same command run again scores the failed ones once the model or its server answers "
                   "reliably.")


def _finish_job(store: JobStore, meta: dict[str, Any]) -> None:
    """Compact the job, check that it holds a row for every pair it expects, count truncated and failed pairs
    from its rows, mark it finished (lock held). A shortfall (a part file gone meanwhile) raises PRBError and
    leaves the job unfinished, so the next run scores the missing pairs again."""
    store.compact()
    rows = store.read()
    expected = meta.get("pairs") or {}
    missing = missing_pairs(expected, rows)
    if missing:
        store.write_metadata(meta)
        raise PRBError(f"Job {store.key} ({meta.get('model')} [{meta.get('profile')}]) holds "
                       f"{len(expected) - len(missing)} of its {len(expected)} pairs (missing e.g. {missing[0]}): "
                       "a part file disappeared while it ran; run the same command again to rescore them.")
    run = meta.setdefault("run", {})
    run["n_truncated"] = int(rows["truncated"].fillna(False).sum())
    run["n_failed"] = int(rows["failed"].sum())
    meta.update(finished=now(), updated=now())
    store.write_metadata(meta)


def _finish_interrupted(store: JobStore, run: dict[str, Any]) -> None:
    """Finish a job whose rows are complete but whose last run was killed before its final metadata
    (during compaction, say): no model is needed. Skipped when another process holds the job, since that
    process finishes it itself."""
    with store.writing(wait=False) as held:
        if held is not None:
            _finish_unfinished(store, run)


def _finish_unfinished(store: JobStore, run: dict[str, Any]) -> None:
    """:func:`_finish_job` for a job with every pair scored, unless it is already finished (lock held)."""
    meta = store.metadata() or {**store.description, "key": store.key, "created": now()}
    if meta.get("finished"):
        return  # another process finished it meanwhile
    meta.update(n_pairs=run["n_pairs"], data_fingerprint=run["data_fingerprint"].result(), data=run["data"])
    _record_pairs(meta, run["pairs"], run["units"].result())
    _finish_job(store, meta)


def score_benchmark(
    data: pd.DataFrame,
    models: Sequence[Any],
    profiles: Sequence[str],
    *,
    out: str | os.PathLike = "results",
    options: ModelOptions | None = None,
    retriever: str | None = None,
    progress: bool = True,
    chunk_size: int | None = None,
) -> pd.DataFrame:
    """Score every model under every profile condition; return exactly these jobs' rows from the store.

    ``models`` holds spec strings (``"judge:smollm2"``) or already-loaded reward models (anything with
    ``spec``, ``kind`` and ``score_pairs``), loaded with ``options`` (:class:`~prb_utils.models.ModelOptions`:
    device, dtype, seed, judge and tokenization options, and the engine). Pairs already in the store are read,
    not scored again; a model is loaded only when one of its jobs has pairs left. ``chunk_size`` fixes the
    pairs per part file (default: adaptive, about five seconds of scoring per chunk). Rows come back in model,
    profile, data order.

    On a server engine (``options.engine``, e.g. ``vllm``) the kinds it serves score there (at its ``urls``, or
    on a server started here and kept for the process; :func:`prb_utils.models.serve.launcher.stop_started` stops
    it); finished requests are cached under ``out/engine`` so a killed run sends only the missing ones.

    >>> from prb_utils.data import load_benchmark
    >>> import tempfile
    >>> rows = score_benchmark(load_benchmark("sample", limit=2), ["length"], ["none"], out=tempfile.mkdtemp(),
    ...                        progress=False)
    >>> len(rows), rows["model"].iloc[0]
    (6, 'length')
    """

    options = options or ModelOptions()
    if world().distributed and not options.engine.in_process:
        raise PRBError(f"--engine {options.engine.name} runs as one process: {one_process_advice()} (a vLLM "
                       "server spreads over GPUs itself, e.g. --engine-arg data-parallel-size=N).")
    current = setup()   # under torchrun: this rank's place, the process group joined
    progress = progress and current.is_main
    records = data.to_dict("records")
    # hashing every record takes seconds at full size: it runs beside the scoring, and is kept at the job's end
    # (by rank 0 alone under torchrun: the rank that finishes jobs)
    hashing = ThreadPoolExecutor(1, thread_name_prefix="prb-fingerprint")
    fingerprint = hashing.submit(data_fingerprint, data) if len(data) and current.is_main else _done(None)
    units = hashing.submit(unit_keys, records) if len(data) and current.is_main else _done({})
    hashing.shutdown(wait=False)
    identity = _data_record(data, current)
    conditions = list({c.spelling: c for c in map(parse_condition, profiles)}.values())
    picks = {c.spelling: picked_by(c, retriever, options.seed) for c in conditions}
    selectors = post_selectors(conditions, retriever, options.seed)
    pairs_by_condition = {
        c.spelling: _build_pairs(condition_records(data, c.name, seed=options.seed, records=records), c.name,
                                 selectors[c.spelling])
        for c in conditions}
    load_options = replace(options, engine=options.engine.for_run(out, progress=progress))

    frames = []
    # every model is resolved (an unknown spec, a missing folder) before anything is scored, and every backend
    # retest's options checked
    resolved = [(given, spec, kind, _given_fingerprint(given, spec)) for given, spec, kind in _resolve_models(models)]
    own_options = {(spec, c.spelling): _job_model_options(given, spec, kind, c, options)
                   for given, spec, kind, _ in resolved for c in conditions}
    for given, spec, kind, model_fp in resolved:
        lazy = _LazyModel(given if not isinstance(given, str) else spec, load_options)
        try:
            for written in conditions:
                condition, (retriever_name, retriever_seed) = written.name, picks[written.spelling] or (None, None)
                job_model = own_options[(spec, written.spelling)]
                key = job_options(kind, condition, job_model, retriever=retriever_name, retriever_seed=retriever_seed)
                pairs = pairs_by_condition[written.spelling]
                store = _open_job(out, {"model": spec, "kind": kind, "profile": condition, "options": key,
                                        "fingerprint": model_fp}, identity, pairs, current)
                labels = {"job": store.key, "spec": spec, "kind": kind, "profile": condition, "written": written.spelling}
                run = {"n_pairs": len(pairs), "data_fingerprint": fingerprint, "units": units, "pairs": pairs,
                       "options": _run_options(job_model, condition), "data": identity}
                with _job_model(lazy, spec, job_model, options, out=out, progress=progress) as job_lazy:
                    if current.distributed:
                        _distributed_job(store, pairs, job_lazy, labels, run=run, progress=progress,
                                         chunk_size=chunk_size, ranks=current)
                    elif _missing(store, pairs):
                        with store.writing(on_wait=_waiting_message if progress else None):
                            todo = _missing(store, pairs)  # another process may have scored them meanwhile
                            if todo:
                                _run_job(store, todo, job_lazy, labels, run=run, progress=progress,
                                         chunk_size=chunk_size)
                            else:
                                _finish_unfinished(store, run)
                    else:
                        _check_reused_server(store, job_lazy, labels, job_model)
                        if store.parts() and not store.metadata().get("finished"):
                            _finish_interrupted(store, run)
                        if progress:
                            print(f"{_job_name(labels)}: {len(pairs)} pairs read from the store", file=sys.stderr)
                frames.append(_select(store, pairs))
        finally:
            lazy.release()
    if not frames:
        return tidy_rows([])
    return tidy_rows(pd.concat(frames, ignore_index=True))


def _job_model_options(given: Any, spec: str, kind: str, condition: ProfileCondition,
                       options: ModelOptions) -> ModelOptions:
    """The options the job of ``spec`` under ``condition`` loads its model with (:func:`backend_options`); PRBError
    for a backend retest of a model given already loaded (it cannot be loaded again with another option)."""
    found = backend_options(options, kind, condition, spec)
    if found is not options and not isinstance(given, str):
        option, value = _backend(condition) or ("", "")
        raise PRBError(f"{spec} [{condition.name}]: a model passed in already loaded cannot be loaded again with "
                       f"{option} {value}; pass its spec (KIND:NAME) instead.")
    return found


def _run_options(options: ModelOptions, condition: str) -> dict[str, Any]:
    """The options a job's run metadata records: as asked (``dtype`` ``auto``; the model's own record says what
    it ran with), the attention where it is not prb's default, and a backend retest's option (``backend``)."""
    recorded = {"device": options.device, "dtype": options.dtype, "batch_tokens": options.batch_tokens,
                "seed": options.seed, **options.engine.metadata()}
    if options.attention != ATTENTIONS[0]:
        recorded["attention"] = options.attention
    backend = _backend(condition)
    if backend is not None:
        recorded["backend"] = {backend[0]: backend[1]}
    return recorded


@contextmanager
def _job_model(lazy: _LazyModel, spec: str, job_model: ModelOptions, options: ModelOptions, *, out: str | os.PathLike,
               progress: bool) -> Iterator[_LazyModel]:
    """The lazy model a job scores with: ``lazy`` (the model's, kept for its other jobs) when the job takes the
    run's ``options``; for a backend retest a model of its own (``job_model``), loaded only if the job has pairs
    left, with the run's model released first (one model in memory at a time), and released after the job."""
    if job_model is options:
        yield lazy
        return
    lazy.release()
    own = _LazyModel(spec, replace(job_model, engine=job_model.engine.for_run(out, progress=progress)))
    try:
        yield own
    finally:
        own.release()


def _distributed_job(
    store: JobStore,
    pairs: list[_Pair],
    lazy: _LazyModel,
    labels: dict[str, str],
    *,
    run: dict[str, Any],
    progress: bool,
    chunk_size: int | None,
    ranks: World,
) -> None:
    """One job scored by every rank of a torchrun world (``ranks``). Rank 0 alone reads which pairs are left
    and holds the job lock meanwhile (another run on the job waits, as ever); every rank scores its share of
    those pairs into part files of its own (:func:`_run_job`), rank 0 finishes the job once all are done, and
    a last barrier lets every rank read it whole."""
    with ExitStack() as held:
        keys: list[str] = []
        if ranks.is_main:
            if _missing(store, pairs):
                held.enter_context(store.writing(on_wait=_waiting_message if progress else None))
                keys = [p.key for p in _missing(store, pairs)]   # another process may have scored them meanwhile
                if not keys:
                    _finish_unfinished(store, run)
            else:
                if store.parts() and not store.metadata().get("finished"):
                    _finish_interrupted(store, run)
                if progress:
                    print(f"{_job_name(labels)}: {len(pairs)} pairs read from the store", file=sys.stderr)
        keys = broadcast(ranks, keys)
        if keys:
            by_key = {p.key: p for p in pairs}
            absent = [k for k in keys if k not in by_key]
            if absent:
                raise PRBError(f"Rank {ranks.rank} has no pair {absent[0]} in its data, which rank 0 has: every rank "
                               "must read the same --data.")
            _run_job(store, [by_key[k] for k in keys], lazy, labels, run=run, progress=progress,
                     chunk_size=chunk_size, ranks=ranks)
        barrier(ranks)


def _data_record(data: pd.DataFrame, current: World) -> dict[str, Any]:
    """What ``data`` is, for its jobs' key and record: the identity :func:`prb_utils.data.load_benchmark` gave
    it (``attrs["data"]``) while it holds the pairs it was loaded with; a frame built in code, or one whose rows
    were filtered or renamed since (pandas keeps ``attrs`` through that), has none (``source`` and ``digest``
    None: its jobs are keyed without their data, as before).
    Under torchrun every rank takes rank 0's (the ranks' records were compared already), so they share a key."""
    given = data.attrs.get(DATA_ATTR)
    record: dict[str, Any] = {"source": None, "digest": None}
    if isinstance(given, Mapping) and given.get("keys") == pair_keys_digest(data):
        record = {name: value for name, value in given.items() if name != "keys"}
    return broadcast(current, record) if current.distributed else record


def _open_job(out: str | os.PathLike, description: dict[str, Any], identity: Mapping[str, Any],
              pairs: Sequence[_Pair], current: World) -> JobStore:
    """The job of ``description`` on ``identity``'s data (:func:`prb_utils.store.open_job`: an older job of the
    same data is continued); under torchrun, the job rank 0 found."""
    if identity.get("digest"):
        description = {**description, "data": identity["digest"]}
    if not current.distributed:
        return open_job(out, description, lambda: _pair_hashes(pairs))
    key = open_job(out, description, lambda: _pair_hashes(pairs)).key if current.is_main else None
    return JobStore(out, description, key=broadcast(current, key))


def _done(value: Any) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def _missing(store: JobStore, pairs: Sequence[_Pair]) -> list[_Pair]:
    """The pairs without a stored row of the same RM input (a pair with no row is not built here)."""
    done = store.done()
    return [p for p in pairs if (held := done.get((p.subset, p.id))) is None or held != p.hash]


def _resolve_models(models: Sequence[Any]) -> list[tuple[Any, str, str]]:
    """``(given, canonical spec, kind)`` per model, each canonical spec once (``LENGTH`` is ``length``)."""
    seen: dict[str, tuple[Any, str, str]] = {}
    for given in models:
        spec, kind = _spec_kind(given) if isinstance(given, str) else (str(given.spec), str(given.kind))
        seen.setdefault(spec, (given, spec, kind))
    return list(seen.values())


def _select(store: JobStore, pairs: Sequence[_Pair]) -> pd.DataFrame:
    """The job's rows of exactly these pairs (matching hashes), in the pairs' order; PRBError naming the job
    and the counts when any is missing (never a silently shorter table)."""
    rows = store.read()
    wanted = pd.DataFrame({"subset": [p.subset for p in pairs], "id": [p.id for p in pairs],
                           "pair_hash": [p.hash for p in pairs]})
    selected = wanted.merge(rows, on=["subset", "id", "pair_hash"], how="inner")[rows.columns]
    if len(selected) != len(pairs):
        raise PRBError(f"Job {store.key} ({store.description['model']} [{store.description['profile']}]) holds "
                       f"{len(selected)} of the {len(pairs)} pairs asked for; run the same command again to "
                       "score the missing ones.")
    return selected


def _waiting_message(store: JobStore) -> None:
    print(f"Waiting for another process that is scoring job {store.key} ({store.description['model']}, "
          f"{store.description['profile']})…", file=sys.stderr)
