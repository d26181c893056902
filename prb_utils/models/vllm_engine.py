"""The ``vllm`` engine: a connection to an OpenAI-compatible vLLM server, and the chat generator over it.

:class:`EngineOptions` holds what ``--engine vllm`` takes (``--engine-url``, ``--tensor-parallel-size``,
``--pipeline-parallel-size``, ``--engine-arg``, ``--engine-concurrency``). :func:`connect` gives an
:class:`Engine` for one model: the server(s) at ``url`` (checked at once: each must answer and serve the
model, under the spec's name, its folder or hub id, the same on every server), or one prb starts with
:mod:`prb_utils.models.vllm_server` (shared by every kind and profile condition of the process).
:func:`default_concurrency` says how many requests prb keeps in flight per server when not told. The adapters (:mod:`prb_utils.models.vllm_adapters`) send token ids rendered on
the prb side with the model's own tokenizer and chat template, so both engines see the same tokens.

:class:`VLLMChatGenerator` has the ``generate``/``sample_batch``/``sample_n`` signatures and return shapes of
:class:`prb_utils.downstream.generation.ChatGenerator` (Best-of-N sampling and the rubric judge), through
the completions endpoint with ``n`` and a per-message seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models.base import ModelSpec
from prb_utils.models.device import resolve_placement
from prb_utils.models.hf import load_tokenizer, resolve_source
from prb_utils.models.vllm_client import (
    CompletionClient,
    RequestCache,
    RequestError,
    UnusableResponse,
    url_list,
)
from prb_utils.models.vllm_server import LaunchOptions, engine_arg_value, get_server
from prb_utils.schema import stable_hash

#: Requests in flight per engine (data-parallel replica) when neither ``--engine-concurrency`` nor
#: ``--engine-arg max-num-seqs=N`` says: enough to keep a GPU's continuous batching busy on long prompts
#: (vLLM schedules at most ``max_num_batched_tokens`` tokens a step, 2048-16384 by default).
DEFAULT_CONCURRENCY = 16
#: At most this many requests in flight per server by default, however many engines it reports.
MAX_DEFAULT_CONCURRENCY = 1024
_PROCESS = {"concurrency": None}   # set_concurrency(): the CLI's --engine-concurrency for every engine made


def set_concurrency(concurrency: int | None) -> None:
    """Requests in flight per server for every engine this process connects from now on (``--engine-concurrency``;
    None: :func:`default_concurrency`), unless :class:`EngineOptions` gives one."""
    if concurrency is not None and int(concurrency) < 1:
        raise PRBError(f"--engine-concurrency must be at least 1, got {concurrency}.")
    _PROCESS["concurrency"] = None if concurrency is None else int(concurrency)


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


@dataclass(frozen=True)
class EngineOptions:
    """``--engine vllm`` settings; ``cache_dir`` holds the request caches (the store's ``engine/`` folder)."""

    url: str | tuple[str, ...] | None = None   # one server or several serving the same model
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    engine_args: tuple[str, ...] = ()
    concurrency: int | None = None   # per server; None: set_concurrency()'s, else default_concurrency()
    cache_dir: str | None = None
    progress: bool = True

    @classmethod
    def from_mapping(cls, given: Any) -> EngineOptions:
        if isinstance(given, EngineOptions):
            return given
        given = dict(given or {})
        given["engine_args"] = tuple(given.get("engine_args") or ())
        if given.get("url") is not None and not isinstance(given["url"], str):
            given["url"] = tuple(given["url"]) or None
        known = {k: v for k, v in given.items() if k in cls.__dataclass_fields__ and v is not None}
        return cls(**known)


@dataclass
class Engine:
    """A usable server for one model: the client, the served model id and what to record about it."""

    client: CompletionClient
    model: str
    url: str
    launched: bool
    version: str | None
    options: EngineOptions
    launch_command: list[str] = field(default_factory=list)
    start_seconds: float | None = None
    dtype: str | None = None   # of the server prb started (a server at --engine-url: unknown here)
    requested_dtype: str | None = None   # what the user asked for (the job key's dtype for a server at a URL)
    pooler_config: str | None = None   # as the server prb started logged it (a server at a URL does not say)
    concurrency_source: str | None = None   # why the client keeps this many requests in flight per server

    def metadata(self) -> dict[str, Any]:
        urls = list(self.client.urls)
        return {"engine": "vllm", "engine_url": None if self.launched else self.url,
                "engine_urls": None if self.launched or len(urls) == 1 else urls,
                "engine_launched": self.launched, "engine_server_version": self.version,
                "engine_served_model": self.model, "engine_dtype": self.dtype,
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
            options: EngineOptions | dict | None = None, runner: str | None = None) -> Engine:
    """An :class:`Engine` serving ``source`` (the resolved folder or hub id of ``spec_name``); ``runner``
    (``pooling`` for classifiers) is passed to the server prb starts."""
    opts = EngineOptions.from_mapping(options)
    if opts.tensor_parallel_size < 1 or opts.pipeline_parallel_size < 1:
        raise PRBError("--tensor-parallel-size and --pipeline-parallel-size must be at least 1.")
    given = opts.concurrency or _PROCESS["concurrency"]
    if opts.url:
        client = CompletionClient(url_list(opts.url), concurrency=given or DEFAULT_CONCURRENCY)
        model = client.resolve_model([spec_name, source, Path(source).name if Path(source).exists() else ""])
        why = "--engine-concurrency"
        if not given:
            client.concurrency, why = default_concurrency(engines=client.data_parallel_engines())
        return Engine(client, model, client.url, False, client.version(), opts, requested_dtype=dtype,
                      concurrency_source=why)

    placement = resolve_placement(device, dtype)
    launch = LaunchOptions(dtype=str(placement.dtype).removeprefix("torch."),
                           device=str(placement.device).split(":")[0],
                           tensor_parallel_size=opts.tensor_parallel_size,
                           pipeline_parallel_size=opts.pipeline_parallel_size, engine_args=tuple(opts.engine_args),
                           runner=runner)
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


def completion_text(response: dict[str, Any]) -> list[str]:
    """The texts of a completions response, in choice order; :class:`UnusableResponse` without choices."""
    choices = sorted(response.get("choices") or [], key=lambda c: int(c.get("index", 0)))
    if not choices:
        raise UnusableResponse("a completions response without choices")
    return [str(c.get("text") or "") for c in choices]


class VLLMChatGenerator:
    """Chat replies from a vLLM server, with :class:`~prb_utils.downstream.generation.ChatGenerator`'s API.

    ``VLLMChatGenerator(name, engine_url=None, device=..., dtype=..., tensor_parallel_size=...,
    pipeline_parallel_size=..., engine_args=(...))``: ``name`` is an alias, folder or hub id (as for
    ``ChatGenerator``). Prompts are rendered with the tokenizer's chat template on the prb side and sent as
    token ids (no special tokens added, as ``ChatGenerator`` encodes them). Sampling is seeded per message:
    message ``i`` of a call gets seed ``seed + i`` and its ``n`` samples come from one request (``n``).
    """

    def __init__(self, name: str, *, device: str = "auto", dtype: str = "auto", batch_size: int = 8,
                 engine_url: str | Sequence[str] | None = None, tensor_parallel_size: int = 1,
                 pipeline_parallel_size: int = 1,
                 engine_args: Sequence[str] = (), concurrency: int | None = None,
                 progress: bool = True) -> None:
        spec = ModelSpec("judge", name)
        self.name = name
        self.source = resolve_source(spec)
        self.tokenizer = load_tokenizer(spec, self.source)
        self.batch_size = int(batch_size)
        self.engine = connect(name, self.source, device=device, dtype=dtype, options=EngineOptions(
            url=engine_url if engine_url is None or isinstance(engine_url, str) else tuple(engine_url),
            tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
            engine_args=tuple(engine_args), concurrency=concurrency, progress=progress))

    def render(self, user: str, system: str | None) -> str:
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return (f"{system}\n\n" if system else "") + f"User: {user}\nAssistant:"

    def metadata(self) -> dict[str, Any]:
        template = getattr(self.tokenizer, "chat_template", None) or ""
        return {"generator": self.name, "source": self.source, "device": "vllm-server", "dtype": None,
                "chat_template_hash": stable_hash(str(template)), **self.engine.metadata()}

    def _bodies(self, users: Sequence[str], system: str | None, *, n: int, max_new_tokens: int,
                temperature: float, top_p: float, seed: int) -> list[dict[str, Any]]:
        bodies = []
        for i, user in enumerate(users):
            ids = list(self.tokenizer(self.render(user, system), add_special_tokens=False)["input_ids"])
            body: dict[str, Any] = {"model": self.engine.model, "prompt": ids, "max_tokens": int(max_new_tokens),
                                    "n": int(n), "temperature": float(temperature), "skip_special_tokens": True}
            if temperature > 0:
                body.update(top_p=float(top_p), seed=int(seed) + i)
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

    def sample_n(self, user: str, n: int, *, system: str | None = None, max_new_tokens: int = 128,
                 temperature: float = 1.0, top_p: float = 0.9, seed: int = 0) -> list[str]:
        """``n`` sampled replies to one user message."""
        return self.sample_batch([user], n, system=system, max_new_tokens=max_new_tokens, temperature=temperature,
                                 top_p=top_p, seed=seed)[0]

    def sample_each(self, users: Sequence[str], n: int, *, seeds: Sequence[int], system: str | None = None,
                    max_new_tokens: int = 128, temperature: float = 1.0, top_p: float = 0.9) -> list[list[str]]:
        """``n`` sampled replies to each user message, each seeded by its own seed (``seeds``) and sent on its
        own, one request after the other: requests in flight together are batched by the server, and a batched
        forward pass is not bit-stable, so a message's replies would depend on what ran beside it."""
        if len(seeds) != len(users):
            raise PRBError(f"sample_each needs one seed per message, got {len(seeds)} for {len(users)}.")
        return [self.sample_batch([user], n, system=system, max_new_tokens=max_new_tokens, temperature=temperature,
                                  top_p=top_p, seed=int(one))[0] for user, one in zip(users, seeds, strict=True)]

    def sample_batch(self, users: Sequence[str], n: int, *, system: str | None = None, max_new_tokens: int = 128,
                     temperature: float = 1.0, top_p: float = 0.9, seed: int = 0) -> list[list[str]]:
        """``n`` sampled replies to each user message (one request per message, seeded ``seed + i``)."""
        if n < 1 or temperature <= 0:
            raise PRBError("sampling needs n >= 1 and a temperature > 0.")
        if not users:
            return []
        return self._run(self._bodies(users, system, n=n, max_new_tokens=max_new_tokens, temperature=temperature,
                                      top_p=top_p, seed=seed))
