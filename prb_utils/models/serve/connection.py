"""The connection to a server engine, and the chat generator over it, written once over the engine's dialect.

Its settings are the :class:`~prb_utils.models.engines.EngineConfig` of ``--engine NAME`` (``--engine-url``,
``--tensor-parallel-size``, ``--pipeline-parallel-size``, ``--engine-arg``, ``--engine-concurrency``). :func:`connect`
gives a :class:`Connection` for one model: the server(s) at ``urls`` (checked at once: each must answer and serve the
model, under the spec's name, its folder or hub id, the same on every server), or one prb starts with
:mod:`prb_utils.models.serve.launcher` (shared by every kind and profile condition of the process). Its metadata names
the engine it is. :func:`default_concurrency` says how many requests prb keeps in flight per server when not told.
The adapters (:mod:`prb_utils.models.serve.adapters`) send token ids rendered on the prb side with the model's own
tokenizer and chat template, so every engine sees the same tokens.

:class:`ServedChatGenerator` has the ``generate``/``sample_batch``/``sample_n`` signatures and return shapes of
:class:`prb_utils.models.generation.ChatGenerator` (Best-of-N sampling and the rubric judge), through
the dialect's completion request with ``n`` and a per-message seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models.base import spec_of
from prb_utils.models.device import resolve_placement
from prb_utils.models.engines import EngineConfig, dialect_of
from prb_utils.models.generation import ChatGeneration
from prb_utils.models.hf import load_tokenizer, resolve_source
from prb_utils.models.kinds import CAUSAL_LM
from prb_utils.models.serve.client import (
    CompletionClient,
    EngineError,
    RequestCache,
    RequestError,
)
from prb_utils.models.serve.dialect import Dialect, Request, UnusableResponse
from prb_utils.models.serve.launcher import LaunchOptions, engine_arg_value, get_server
from prb_utils.schema import stable_hash

#: Requests in flight per engine (data-parallel replica) when neither ``--engine-concurrency`` nor the server's
#: own maximum of sequences (vLLM's ``--engine-arg max-num-seqs=N``) says: enough to keep a GPU's continuous
#: batching busy on long prompts (vLLM schedules at most ``max_num_batched_tokens`` tokens a step, 2048-16384).
DEFAULT_CONCURRENCY = 16
#: At most this many requests in flight per server by default, however many engines it reports.
MAX_DEFAULT_CONCURRENCY = 1024
#: Best-of-N sampling together (:meth:`ServedChatGenerator.sample_together`): questions per group, per request slot
#: of the client (its concurrency x servers), so the server's slots stay full until a group's last requests.
QUESTIONS_PER_SLOT = 4


def default_concurrency(dialect: Dialect, engine_args: Sequence[str] = (), engines: int | None = None) -> tuple[int, str]:
    """Requests in flight per server when not given, and where that number comes from: the dialect's maximum of
    sequences among the engine arguments (vLLM's ``max-num-seqs``; else :data:`DEFAULT_CONCURRENCY`) times the
    engines behind the server (its data-parallel size among the engine arguments prb starts the server with, else
    ``engines`` as the server's metrics report them), at most :data:`MAX_DEFAULT_CONCURRENCY`.

    >>> vllm = dialect_of("vllm")
    >>> default_concurrency(vllm, ["data-parallel-size=4"])
    (64, '16 per engine (prb default) x 4 engines (data-parallel-size)')
    >>> default_concurrency(vllm, ["max-num-seqs=8"], engines=2)
    (16, '8 per engine (max-num-seqs) x 2 engines (/metrics)')
    """
    seqs = engine_arg_value(engine_args, dialect.max_sequences_arg) if dialect.max_sequences_arg else None
    size = engine_arg_value(engine_args, dialect.data_parallel_arg) if dialect.data_parallel_arg else None
    per, per_why = ((int(seqs), dialect.max_sequences_arg) if seqs and seqs.isdigit()
                    else (DEFAULT_CONCURRENCY, "prb default"))
    if size and size.isdigit():
        count, count_why = int(size), dialect.data_parallel_arg
    else:
        count, count_why = (engines, dialect.metrics_path or "metrics") if engines else (1, "one engine assumed")
    total = min(MAX_DEFAULT_CONCURRENCY, max(1, per * count))
    return total, f"{per} per engine ({per_why}) x {count} engine{'s' if count != 1 else ''} ({count_why})"


@dataclass
class Connection:
    """A usable server for one model: the client, the served model id, the engine's dialect and what to record
    about it (its metadata names the engine it is)."""

    client: CompletionClient
    model: str
    url: str
    launched: bool
    version: str | None
    options: EngineConfig
    launch_command: list[str] = field(default_factory=list)
    start_seconds: float | None = None
    dtype: str | None = None   # of the server prb started, or as a server at --engine-url reports it (else None)
    requested_dtype: str | None = None   # what the user asked for (the job key's dtype for a server at a URL)
    pooler_config: str | None = None   # as the server prb started logged it (a server at a URL does not say)
    concurrency_source: str | None = None   # why the client keeps this many requests in flight per server
    #: how this engine's server is asked and read (:attr:`~prb_utils.models.engines.EngineType.dialect`); resolved
    #: once, from the engine's record, when not given
    dialect: Dialect | None = None

    def __post_init__(self) -> None:
        if self.dialect is None:
            self.dialect = dialect_of(self.options.name)

    @property
    def label(self) -> str:
        """The engine as messages name it (``vLLM``)."""
        return str(self.dialect.label)

    @property
    def max_model_len(self) -> int | None:
        """The served model's context as the server reports it (``/v1/models``): prompts are fitted to it."""
        return self.client.max_model_len

    def metadata(self) -> dict[str, Any]:
        urls = list(self.client.urls)
        return {"engine": self.options.name, "engine_dialect": self.options.engine.dialect,
                "engine_url": None if self.launched else self.url,
                "engine_urls": None if self.launched or len(urls) == 1 else urls,
                "engine_launched": self.launched,
                **server_facts(self.client, self.model, self.dtype, self.version),
                "tensor_parallel_size": self.options.tensor_parallel_size,
                "pipeline_parallel_size": self.options.pipeline_parallel_size,
                "engine_args": list(self.options.engine_args),
                "engine_launch_command": self.launch_command[1:] if self.launch_command else None,
                "engine_start_seconds": self.start_seconds, "engine_concurrency": self.client.concurrency,
                "engine_concurrency_source": self.concurrency_source,
                "engine_requests_per_url": dict(self.client.sent_per_url) if len(urls) > 1 else None,
                "engine_requests_sent": self.client.requests_sent,
                "engine_requests_cached": self.client.requests_cached,
                "engine_retries": self.client.retried}

    def cache(self, purpose: str, fingerprint: str) -> RequestCache | None:
        """The request cache for one use of this model (``None`` without ``cache_dir``), named by everything that
        can change a response: the engine, the served model and its fingerprint, the server's version, dtype (as launched,
        or as asked of a server at a URL), engine arguments and parallel sizes, and the use (``purpose``)."""
        if not self.options.cache_dir:
            return None
        name = stable_hash({"engine": self.options.name, "model": self.model, "fingerprint": fingerprint,
                            "purpose": purpose,
                            "server_version": self.version, "dtype": self.dtype or self.requested_dtype,
                            "engine_args": sorted(self.options.engine_args),
                            "tensor_parallel_size": self.options.tensor_parallel_size,
                            "pipeline_parallel_size": self.options.pipeline_parallel_size})
        return RequestCache(Path(self.options.cache_dir) / f"{name}.jsonl")


def connect(spec_name: str, source: str, *, device: str = "auto", dtype: str = "auto",
            options: EngineConfig, runner: str | None = None) -> Connection:
    """A :class:`Connection` serving ``source`` (the resolved folder or hub id of ``spec_name``) with the settings
    ``options``; ``runner`` (``pooling`` for classifiers) is passed to the server prb starts."""
    opts, given = options, options.concurrency
    dialect = dialect_of(opts.name)
    if opts.urls:
        client, model, reported = _at_urls(spec_name, source, opts, concurrency=given or DEFAULT_CONCURRENCY)
        if reported and dtype not in ("auto", reported):
            raise EngineError(f"The server at {client.url} runs the model in {reported} (its server info), not in the "
                              f"{dtype} that --dtype asks for; start it with --dtype {dtype}, or give --dtype "
                              f"{reported} or auto.")
        client.check_alike(*dialect.probe_request(model, runner))
        why = "--engine-concurrency"
        if not given:
            client.concurrency, why = default_concurrency(dialect, engines=client.data_parallel_engines())
        return Connection(client, model, client.url, False, client.version(), opts, dtype=reported, requested_dtype=dtype,
                          concurrency_source=why, dialect=dialect)

    placement = resolve_placement(device, dtype)
    launch = LaunchOptions(dtype=str(placement.dtype).removeprefix("torch."),
                           device=str(placement.device).split(":")[0], engine=opts, runner=runner)
    server = get_server(source, spec_name, launch, progress=opts.progress)

    def describe() -> str:
        return "" if server.alive() else f"the {dialect.label} server prb started has exited: {server.log_tail()}"

    concurrency, why = (given, "--engine-concurrency") if given else default_concurrency(dialect, opts.engine_args)
    client = CompletionClient(server.url, dialect=dialect, concurrency=concurrency, describe=describe)
    model = client.resolve_model([spec_name])
    return Connection(client, model, server.url, True, client.version(), opts, server.command(), server.started_s,
                      launch.dtype, requested_dtype=dtype,
                      pooler_config=server.logged_config("pooler_config") if runner == "pooling" else None,
                      concurrency_source=why, dialect=dialect)


#: What a job's run metadata records of the server its rows came from (its context, dtype and identity), by the
#: name messages give it: compared when the job's rows are reused (:func:`server_change`).
SERVER_FACTS = {"engine_max_model_len": "max model length", "engine_dtype": "dtype",
                "engine_served_model": "served model", "engine_model_root": "weights",
                "engine_server_version": "server version"}


def server_facts(client: CompletionClient, model: str, dtype: str | None, version: str | None) -> dict[str, Any]:
    """The :data:`SERVER_FACTS` of the server(s) of ``client`` serving ``model`` (after ``resolve_model``): the
    context (the smallest of several servers'), the dtype it runs (``dtype``: as launched, or as the server
    reports it, None when it does not say), the served id, its weights (``root``) and the server's version."""
    card = client.cards.get(client.url) or {}
    return {"engine_max_model_len": client.max_model_len, "engine_dtype": dtype, "engine_served_model": model,
            "engine_model_root": card.get("root"), "engine_server_version": version}


def server_change(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> tuple[str, Any, Any] | None:
    """How the server a job's rows came from (``recorded``, its run metadata) differs from the server now
    (``current``): ``(fact in words, recorded, now)`` of the first of :data:`SERVER_FACTS` both say and differ in;
    None when none does (a fact either does not say, as an older record or a server that does not report its dtype,
    is not compared).

    >>> server_change({"engine_max_model_len": 512, "engine_dtype": None}, {"engine_max_model_len": 8192,
    ...               "engine_dtype": "bfloat16"})
    ('max model length', 512, 8192)
    >>> server_change({"engine_dtype": "float32"}, {"engine_dtype": "float32", "engine_max_model_len": 64}) is None
    True
    """
    for name, words in SERVER_FACTS.items():
        before, now = recorded.get(name), current.get(name)
        if before is not None and now is not None and str(before) != str(now):
            return words, before, now
    return None


def check_same_server(recorded: Mapping[str, Any], current: Mapping[str, Any], job: str, url: str | None) -> None:
    """EngineError in one sentence when the rows of ``job`` (its run metadata ``recorded``) came from a server
    that differs from the one they would be reused against now (``current``: :func:`server_change`)."""
    change = server_change(recorded, current)
    if change is None:
        return
    words, before, now = change
    raise EngineError(f"{job} was scored on a server with {words} {before}, but the server at {url} has {now}; "
                      "prb does not reuse its rows against another server: start the server as before, or give "
                      "another --out to score the job on this one.")


def read_server_facts(spec_name: str, source: str, options: EngineConfig) -> dict[str, Any]:
    """The :data:`SERVER_FACTS` of the server(s) at ``options.urls`` serving ``source`` (a few GETs: no tokenizer,
    no request to the model), to compare a finished job's record with before its rows are reused."""
    client, model, reported = _at_urls(spec_name, source, options)
    return server_facts(client, model, reported, client.version())


def _at_urls(spec_name: str, source: str, options: EngineConfig, *, concurrency: int = DEFAULT_CONCURRENCY
             ) -> tuple[CompletionClient, str, str | None]:
    """A client of the servers at ``options.urls``, the id they serve the model under and the dtype the first
    reports (its dialect's server info; None when it does not say)."""
    client = CompletionClient(options.urls, dialect=dialect_of(options.name), concurrency=concurrency)
    model = client.resolve_model([spec_name, source, Path(source).name if Path(source).exists() else ""])
    return client, model, client.settings(client.url).get("dtype")


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


class NextTokenLogprobs:
    """Next-token log-probs of given token ids after each prompt, from a server (the judge's letters, the rubric
    judge's digits): asked by id (vLLM's ``logprob_token_ids``; a server that refuses it is asked for its top-k),
    and a token the server did not return gets its exact log-prob from the prompt logprobs of the prompt followed
    by that token (the forced continuation), never a default. Bodies and answers are the dialect's.

    ``cache(purpose)`` gives the request cache of ``<purpose>-letters`` and ``<purpose>-forced`` (or None).
    """

    def __init__(self, engine: Connection, *, purpose: str = "judge",
                 cache: Any = lambda purpose: None) -> None:
        self.engine = engine
        self.dialect = engine.dialect
        self.purpose = purpose
        self._cache = cache
        self.request = "ids"   # or "top-k" on a server without logprob_token_ids
        self.top_k = self.dialect.top_k
        self.n_fallback = 0

    def __call__(self, prompts: Sequence[Sequence[int]], tokens: Sequence[int]) -> list[dict[int, float]]:
        """Per prompt (token ids), ``{token: log-prob}`` for every one of ``tokens`` (NaN if the server gave
        no value even for the forced continuation)."""
        tokens = list(tokens)
        found = self._asked([list(p) for p in prompts], tokens)
        missing = [(i, tok) for i, t in enumerate(found) for tok in tokens if tok not in t]
        if missing:
            self.n_fallback += len(missing)
            sequences = [[*prompts[i], tok] for i, tok in missing]
            forced = [self.dialect.prompt_logprobs_request(self.engine.model, ids) for ids in sequences]

            def last(response: Any, k: int) -> float | None:
                return self.dialect.prompt_logprobs(response, sequences[k])[-1]

            values = self.engine.client.map(forced, last, cache=self._cache(f"{self.purpose}-forced"))
            for (i, tok), value in zip(missing, values, strict=True):
                found[i][tok] = math.nan if value is None else float(value)
        return found

    def _asked(self, prompts: list[list[int]], tokens: list[int]) -> list[dict[int, float]]:
        def request(ids: list[int]) -> Request:
            return self.dialect.letters_request(self.engine.model, ids, tokens,
                                                top_k=None if self.request == "ids" else self.top_k)

        def reduce(response: Any, _: int) -> dict[str, float]:
            tops = self.dialect.top_logprobs(response)
            return {str(t): tops[t] for t in tokens if t in tops}

        while True:
            try:
                values = self.engine.client.map([request(p) for p in prompts], reduce,
                                                cache=self._cache(f"{self.purpose}-letters"))
                return [{int(k): float(v) for k, v in t.items()} for t in values]
            except RequestError as exc:
                text = str(exc)
                if self.request == "ids" and self.dialect.refuses_token_ids(text):
                    self.request = "top-k"
                elif self.request == "top-k" and self.dialect.refuses_top_k(text) and self.top_k != self.dialect.top_k:
                    self.top_k = self.dialect.top_k
                else:
                    raise

    def metadata(self) -> dict[str, Any]:
        return {"letter_request": self.request, "top_logprobs": self.top_k if self.request == "top-k" else None,
                "n_letter_fallbacks": self.n_fallback}


class ServedChatGenerator(ChatGeneration):
    """Chat replies from a server engine, with :class:`~prb_utils.models.generation.ChatGenerator`'s API.

    ``ServedChatGenerator(name, engine=EngineConfig("vllm", ...), device=..., dtype=...)``: ``name`` is an alias,
    folder or hub id (as for ``ChatGenerator``). Prompts are rendered with the tokenizer's chat template on the prb side and sent as
    token ids (no special tokens added, as ``ChatGenerator`` encodes them). Sampling is seeded per message:
    message ``i`` of a call gets seed ``seed + i`` and its ``n`` samples come from one request (``n``).
    """

    def __init__(self, name: str, *, engine: EngineConfig, device: str = "auto", dtype: str = "auto",
                 batch_size: int = 8) -> None:
        spec = spec_of(CAUSAL_LM, name)
        self.name = name
        self.source = resolve_source(spec)
        self.tokenizer = load_tokenizer(spec, self.source)
        self.batch_size = int(batch_size)
        self.engine = connect(name, self.source, device=device, dtype=dtype, options=engine)
        self._next_tokens = NextTokenLogprobs(self.engine, purpose="next-token")

    def next_token_probabilities(self, groups: Sequence[Sequence[Sequence[int]]],
                                 candidates: Sequence[Sequence[int]], *,
                                 batch_tokens: int | None = None) -> list[list[tuple[float, ...]]]:
        """Per group of prompts (token ids), per prompt, the probability that the next token is one of each
        candidate set's ids (:class:`NextTokenLogprobs`; the server plans its own batches, so
        ``batch_tokens`` is not used here)."""
        flat = [list(p) for group in groups for p in group]
        found = iter(self._next_tokens(flat, [t for ids in candidates for t in ids]))
        return [[tuple(math.exp(logsumexp([lp[t] for t in ids])) for ids in candidates)
                 for lp in (next(found) for _ in group)] for group in groups]

    def metadata(self) -> dict[str, Any]:
        template = getattr(self.tokenizer, "chat_template", None) or ""
        return {"generator": self.name, "source": self.source, "device": f"{self.engine.options.name}-server",
                "dtype": self.engine.dtype,   # as prb started the server, or as a server at a URL reports it
                "chat_template_hash": stable_hash(str(template)), **self.engine.metadata()}

    def _requests(self, users: Sequence[str], system: str | None, *, n: int, max_new_tokens: int,
                  temperature: float, top_p: float, seed: int, seeds: Sequence[int] | None = None) -> list[Request]:
        requests = []
        for i, user in enumerate(users):
            ids = list(self.tokenizer(self.render(user, system), add_special_tokens=False)["input_ids"])
            requests.append(self.engine.dialect.completion_request(
                self.engine.model, ids, max_tokens=max_new_tokens, n=n, temperature=temperature, top_p=top_p,
                seed=int(seeds[i]) if seeds is not None else int(seed) + i))
        return requests

    def _run(self, requests: list[Request]) -> list[list[str]]:
        self.engine.client.resume()   # a call after a Ctrl-C (in a notebook) sends again
        dialect = self.engine.dialect
        try:
            texts = self.engine.client.map(requests, lambda r, _: dialect.completion_texts(r))
        except RequestError as exc:
            raise PRBError(f"The {dialect.label} server refused a generation request: {exc}.") from None
        except UnusableResponse as exc:
            raise PRBError(f"The {dialect.label} server at {self.engine.url} gave {exc}; run the same command again "
                           f"once it answers as a {dialect.label} server does.") from None
        return [[t.strip() for t in group] for group in texts]

    def generate(self, users: Sequence[str], *, system: str | None = None, max_new_tokens: int = 128,
                 temperature: float = 0.0, top_p: float = 1.0, seed: int = 0,
                 num_return_sequences: int = 1) -> list[list[str]]:
        """Per user message, ``num_return_sequences`` replies (greedy when ``temperature`` is 0)."""
        if temperature < 0:
            raise PRBError(f"temperature must be >= 0, got {temperature}.")
        return self._run(self._requests(users, system, n=num_return_sequences, max_new_tokens=max_new_tokens,
                                      temperature=temperature, top_p=top_p, seed=seed))

    def sample_batch(self, users: Sequence[str], n: int, *, system: str | None = None, max_new_tokens: int = 128,
                     temperature: float = 1.0, top_p: float = 0.9, seed: int = 0) -> list[list[str]]:
        """``n`` sampled replies to each user message (one request per message, seeded ``seed + i``)."""
        if n < 1 or temperature <= 0:
            raise PRBError("sampling needs n >= 1 and a temperature > 0.")
        if not users:
            return []
        return self._run(self._requests(users, system, n=n, max_new_tokens=max_new_tokens, temperature=temperature,
                                      top_p=top_p, seed=seed))

    def sampling_groups(self, users: Sequence[str], *, system: str | None = None, max_new_tokens: int = 128,
                        batch_tokens: int | None = None) -> list[list[int]]:
        """Messages :meth:`sample_together` sends together: :data:`QUESTIONS_PER_SLOT` per request slot of the
        client (the server plans its own batches, so ``batch_tokens`` is not used here)."""
        size = QUESTIONS_PER_SLOT * self.engine.client.concurrency * len(self.engine.client.urls)
        return [list(range(start, min(start + size, len(users)))) for start in range(0, len(users), size)]

    def sample_together(self, users: Sequence[str], n: int, *, seeds: Sequence[int], system: str | None = None,
                        max_new_tokens: int = 128, temperature: float = 1.0, top_p: float = 0.9,
                        on_step: Callable[[], None] | None = None) -> list[list[str]]:
        """``n`` sampled replies to each message: one request per message seeded by its own seed (the same body
        :meth:`sample_each` sends), all in flight together up to the client's concurrency; the server batches
        them, so a message's replies may differ from the ones it gets alone (``on_step`` is not called)."""
        if len(seeds) != len(users):
            raise PRBError(f"sample_together needs one seed per message, got {len(seeds)} for {len(users)}.")
        if n < 1 or temperature <= 0:
            raise PRBError("sampling needs n >= 1 and a temperature > 0.")
        return self._run(self._requests(users, system, n=n, max_new_tokens=max_new_tokens, temperature=temperature,
                                      top_p=top_p, seed=0, seeds=seeds)) if users else []
