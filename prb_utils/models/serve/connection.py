"""The ``vllm`` engine: a connection to an OpenAI-compatible vLLM server, and the chat generator over it.

Its settings are the :class:`~prb_utils.models.engines.EngineConfig` of ``--engine vllm`` (``--engine-url``,
``--tensor-parallel-size``, ``--pipeline-parallel-size``, ``--engine-arg``, ``--engine-concurrency``). :func:`connect`
gives an :class:`Engine` for one model: the server(s) at ``urls`` (checked at once: each must answer and serve the
model, under the spec's name, its folder or hub id, the same on every server), or one prb starts with
:mod:`prb_utils.models.vllm_server` (shared by every kind and profile condition of the process).
:func:`default_concurrency` says how many requests prb keeps in flight per server when not told. The
adapters (:mod:`prb_utils.models.vllm_adapters`) send token ids rendered on the prb side with the model's own tokenizer and chat template, so both engines see the same tokens.

:class:`VLLMChatGenerator` has the ``generate``/``sample_batch``/``sample_n`` signatures and return shapes of
:class:`prb_utils.models.generation.ChatGenerator` (Best-of-N sampling and the rubric judge), through
the completions endpoint with ``n`` and a per-message seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models.base import ModelSpec
from prb_utils.models.device import resolve_placement
from prb_utils.models.engines import EngineConfig
from prb_utils.models.generation import ChatGeneration
from prb_utils.models.hf import load_tokenizer, resolve_source
from prb_utils.models.vllm_client import (
    CompletionClient,
    RequestCache,
    RequestError,
    UnusableResponse,
)
from prb_utils.models.vllm_server import LaunchOptions, engine_arg_value, get_server
from prb_utils.schema import stable_hash

#: Requests in flight per engine (data-parallel replica) when neither ``--engine-concurrency`` nor
#: ``--engine-arg max-num-seqs=N`` says: enough to keep a GPU's continuous batching busy on long prompts
#: (vLLM schedules at most ``max_num_batched_tokens`` tokens a step, 2048-16384 by default).
DEFAULT_CONCURRENCY = 16
#: At most this many requests in flight per server by default, however many engines it reports.
MAX_DEFAULT_CONCURRENCY = 1024
TOP_LOGPROBS = 20   # the top-k asked of a server that does not take logprob_token_ids
#: The text several ``--engine-url`` servers are asked about, to compare their numbers (``check_alike``).
PROBE_TEXT = "A reward model prefers the answer that follows the user's rubric. The quick brown fox jumps over the lazy dog."
#: Best-of-N sampling together (:meth:`VLLMChatGenerator.sample_together`): questions per group, per request slot
#: of the client (its concurrency x servers), so the server's slots stay full until a group's last requests.
QUESTIONS_PER_SLOT = 4


def default_concurrency(engine_args: Sequence[str] = (), engines: int | None = None) -> tuple[int, str]:
    """Requests in flight per server when not given, and where that number comes from: ``max-num-seqs`` of
    the engine arguments (else :data:`DEFAULT_CONCURRENCY`) times the engines behind the server
    (``data-parallel-size`` of the engine arguments prb starts the server with, else ``engines`` as the
    server's ``/metrics`` reports them), at most :data:`MAX_DEFAULT_CONCURRENCY`.

    >>> default_concurrency(["data-parallel-size=4"])
    (64, '16 per engine (prb default) x 4 engines (data-parallel-size)')
    >>> default_concurrency(["max-num-seqs=8"], engines=2)
    (16, '8 per engine (max-num-seqs) x 2 engines (/metrics)')
    """
    seqs = engine_arg_value(engine_args, "max-num-seqs")
    size = engine_arg_value(engine_args, "data-parallel-size")
    per, per_why = (int(seqs), "max-num-seqs") if seqs and seqs.isdigit() else (DEFAULT_CONCURRENCY, "prb default")
    if size and size.isdigit():
        count, count_why = int(size), "data-parallel-size"
    else:
        count, count_why = (engines, "/metrics") if engines else (1, "one engine assumed")
    total = min(MAX_DEFAULT_CONCURRENCY, max(1, per * count))
    return total, f"{per} per engine ({per_why}) x {count} engine{'s' if count != 1 else ''} ({count_why})"


@dataclass
class Engine:
    """A usable server for one model: the client, the served model id and what to record about it."""

    client: CompletionClient
    model: str
    url: str
    launched: bool
    version: str | None
    options: EngineConfig
    launch_command: list[str] = field(default_factory=list)
    start_seconds: float | None = None
    dtype: str | None = None   # of the server prb started (a server at --engine-url: unknown here)
    requested_dtype: str | None = None   # what the user asked for (the job key's dtype for a server at a URL)
    pooler_config: str | None = None   # as the server prb started logged it (a server at a URL does not say)
    concurrency_source: str | None = None   # why the client keeps this many requests in flight per server

    @property
    def max_model_len(self) -> int | None:
        """The served model's context as the server reports it (``/v1/models``): prompts are fitted to it."""
        return self.client.max_model_len

    def metadata(self) -> dict[str, Any]:
        urls = list(self.client.urls)
        return {"engine": "vllm", "engine_url": None if self.launched else self.url,
                "engine_urls": None if self.launched or len(urls) == 1 else urls,
                "engine_launched": self.launched, "engine_server_version": self.version,
                "engine_served_model": self.model, "engine_dtype": self.dtype,
                "engine_max_model_len": self.max_model_len,
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
        can change a response: the served model and its fingerprint, the server's version, dtype (as launched,
        or as asked of a server at a URL), engine arguments and parallel sizes, and the use (``purpose``)."""
        if not self.options.cache_dir:
            return None
        name = stable_hash({"model": self.model, "fingerprint": fingerprint, "purpose": purpose,
                            "server_version": self.version, "dtype": self.dtype or self.requested_dtype,
                            "engine_args": sorted(self.options.engine_args),
                            "tensor_parallel_size": self.options.tensor_parallel_size,
                            "pipeline_parallel_size": self.options.pipeline_parallel_size})
        return RequestCache(Path(self.options.cache_dir) / f"{name}.jsonl")


def connect(spec_name: str, source: str, *, device: str = "auto", dtype: str = "auto",
            options: EngineConfig, runner: str | None = None) -> Engine:
    """An :class:`Engine` serving ``source`` (the resolved folder or hub id of ``spec_name``) with the settings
    ``options``; ``runner`` (``pooling`` for classifiers) is passed to the server prb starts."""
    opts, given = options, options.concurrency
    if opts.urls:
        client = CompletionClient(opts.urls, concurrency=given or DEFAULT_CONCURRENCY)
        model = client.resolve_model([spec_name, source, Path(source).name if Path(source).exists() else ""])
        client.check_alike(*probe_request(model, runner))
        why = "--engine-concurrency"
        if not given:
            client.concurrency, why = default_concurrency(engines=client.data_parallel_engines())
        return Engine(client, model, client.url, False, client.version(), opts, requested_dtype=dtype,
                      concurrency_source=why)

    placement = resolve_placement(device, dtype)
    launch = LaunchOptions(dtype=str(placement.dtype).removeprefix("torch."),
                           device=str(placement.device).split(":")[0], engine=opts, runner=runner)
    server = get_server(source, spec_name, launch, progress=opts.progress)

    def describe() -> str:
        return "" if server.alive() else f"the vLLM server prb started has exited: {server.log_tail()}"

    concurrency, why = (given, "--engine-concurrency") if given else default_concurrency(opts.engine_args)
    client = CompletionClient(server.url, concurrency=concurrency, describe=describe)
    model = client.resolve_model([spec_name])
    return Engine(client, model, server.url, True, client.version(), opts, server.command(), server.started_s,
                  launch.dtype, requested_dtype=dtype,
                  pooler_config=server.logged_config("pooler_config") if runner == "pooling" else None,
                  concurrency_source=why)


def probe_request(model: str, runner: str | None = None) -> tuple[str, dict[str, Any], Callable[[Any], list[float]]]:
    """The request several servers of ``model`` are compared by (path, body, the numbers of its response): the
    prompt log-probs of :data:`PROBE_TEXT`, or its raw class values on a pooling server (``runner``)."""
    if runner == "pooling":
        return ("/classify", {"model": model, "input": PROBE_TEXT, "use_activation": False},
                lambda r: [float(x) for x in r["data"][0]["probs"]])
    return ("/v1/completions", {"model": model, "prompt": PROBE_TEXT, "max_tokens": 1, "temperature": 0.0,
                                "prompt_logprobs": 0}, _prompt_numbers)


def _prompt_numbers(response: Any) -> list[float]:
    """Every prompt log-prob of a completions response, position by position (token ids in order).

    >>> _prompt_numbers({"choices": [{"prompt_logprobs": [None, {"7": {"logprob": -1.5}}]}]})
    [-1.5]
    """
    out = []
    for entry in first_choice(response).get("prompt_logprobs") or []:
        for key in sorted(entry or {}, key=str):
            value = entry[key]
            out.append(float(value.get("logprob") if isinstance(value, dict) else value))
    return out


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


def first_choice(response: Any) -> dict[str, Any]:
    """The first choice of a completions response; :class:`UnusableResponse` when there is none.

    >>> first_choice({"choices": [{"text": "A"}]})
    {'text': 'A'}
    """
    choices = response.get("choices") if isinstance(response, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise UnusableResponse("a completions response without choices")
    return choices[0]


def top_logprobs(response: dict[str, Any]) -> dict[int, float]:
    """``{token id: log-prob}`` of the first generated position of a completions response asked with
    ``return_tokens_as_token_ids`` (keys ``"token_id:N"``); :class:`UnusableResponse` without logprobs."""
    tops = ((first_choice(response).get("logprobs") or {}).get("top_logprobs") or [None])[0]
    if not isinstance(tops, dict) or not tops:
        raise UnusableResponse("a completions response without the logprobs asked for")
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


def asked_prompt_logprobs(response: dict[str, Any], ids: Sequence[int]) -> list[float | None]:
    """:func:`prompt_token_logprobs` of a response asked for ``prompt_logprobs``; :class:`UnusableResponse`
    when a position after the first has no log-prob for its token."""
    values = prompt_token_logprobs(first_choice(response), ids)
    if len(ids) > 1 and any(v is None for v in values[1:]):
        raise UnusableResponse("a completions response without the prompt logprobs asked for")
    return values


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
                return asked_prompt_logprobs(response, body["prompt"])[-1]

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


def completion_text(response: dict[str, Any]) -> list[str]:
    """The texts of a completions response, in choice order; :class:`UnusableResponse` without choices."""
    choices = sorted(response.get("choices") or [], key=lambda c: int(c.get("index", 0)))
    if not choices:
        raise UnusableResponse("a completions response without choices")
    return [str(c.get("text") or "") for c in choices]


class VLLMChatGenerator(ChatGeneration):
    """Chat replies from a vLLM server, with :class:`~prb_utils.models.generation.ChatGenerator`'s API.

    ``VLLMChatGenerator(name, engine=EngineConfig("vllm", ...), device=..., dtype=...)``: ``name`` is an alias,
    folder or hub id (as for ``ChatGenerator``). Prompts are rendered with the tokenizer's chat template on the prb side and sent as
    token ids (no special tokens added, as ``ChatGenerator`` encodes them). Sampling is seeded per message:
    message ``i`` of a call gets seed ``seed + i`` and its ``n`` samples come from one request (``n``).
    """

    def __init__(self, name: str, *, engine: EngineConfig, device: str = "auto", dtype: str = "auto",
                 batch_size: int = 8) -> None:
        spec = ModelSpec("judge", name)
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
        return {"generator": self.name, "source": self.source, "device": "vllm-server", "dtype": None,
                "chat_template_hash": stable_hash(str(template)), **self.engine.metadata()}

    def _bodies(self, users: Sequence[str], system: str | None, *, n: int, max_new_tokens: int,
                temperature: float, top_p: float, seed: int, seeds: Sequence[int] | None = None) -> list[dict[str, Any]]:
        bodies = []
        for i, user in enumerate(users):
            ids = list(self.tokenizer(self.render(user, system), add_special_tokens=False)["input_ids"])
            body: dict[str, Any] = {"model": self.engine.model, "prompt": ids, "max_tokens": int(max_new_tokens),
                                    "n": int(n), "temperature": float(temperature), "skip_special_tokens": True}
            if temperature > 0:
                body.update(top_p=float(top_p), seed=int(seeds[i]) if seeds is not None else int(seed) + i)
            bodies.append(body)
        return bodies

    def _run(self, bodies: list[dict[str, Any]]) -> list[list[str]]:
        self.engine.client.resume()   # a call after a Ctrl-C (in a notebook) sends again
        try:
            texts = self.engine.client.map(bodies, lambda r, _: completion_text(r))
        except RequestError as exc:
            raise PRBError(f"The vLLM server refused a generation request: {exc}.") from None
        except UnusableResponse as exc:
            raise PRBError(f"The vLLM server at {self.engine.url} gave {exc}; run the same command again "
                           "once it answers as a vLLM server does.") from None
        return [[t.strip() for t in group] for group in texts]

    def generate(self, users: Sequence[str], *, system: str | None = None, max_new_tokens: int = 128,
                 temperature: float = 0.0, top_p: float = 1.0, seed: int = 0,
                 num_return_sequences: int = 1) -> list[list[str]]:
        """Per user message, ``num_return_sequences`` replies (greedy when ``temperature`` is 0)."""
        if temperature < 0:
            raise PRBError(f"temperature must be >= 0, got {temperature}.")
        return self._run(self._bodies(users, system, n=num_return_sequences, max_new_tokens=max_new_tokens,
                                      temperature=temperature, top_p=top_p, seed=seed))

    def sample_batch(self, users: Sequence[str], n: int, *, system: str | None = None, max_new_tokens: int = 128,
                     temperature: float = 1.0, top_p: float = 0.9, seed: int = 0) -> list[list[str]]:
        """``n`` sampled replies to each user message (one request per message, seeded ``seed + i``)."""
        if n < 1 or temperature <= 0:
            raise PRBError("sampling needs n >= 1 and a temperature > 0.")
        if not users:
            return []
        return self._run(self._bodies(users, system, n=n, max_new_tokens=max_new_tokens, temperature=temperature,
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
        return self._run(self._bodies(users, system, n=n, max_new_tokens=max_new_tokens, temperature=temperature,
                                      top_p=top_p, seed=0, seeds=seeds)) if users else []
