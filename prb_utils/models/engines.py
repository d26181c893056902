"""The engine seam: the engines a model can run on (:data:`ENGINES`, records with their traits) and one frozen
:class:`EngineConfig` (which engine, and its settings) built once, by the command line or the caller, and passed
whole to everything that loads a model, samples answers or runs a judge.

An engine record names, as ``module:Class``, the adapters of the kinds its server runs and its chat generator
(Best-of-N sampling, LLM rubric judges). A kind it does not list runs in this process whatever the engine. A
server engine's adapters, chat generator, client, connection and launcher are the serve wing's
(:mod:`prb_utils.models.serve`), written once over its *dialect* (how it is started, what it is asked, how its
answers read): a new server engine is one dialect module and one record here (:data:`SERVED_ADAPTERS`,
:data:`SERVED_CHAT_GENERATOR` and its dialect):

>>> EngineConfig("vllm", urls="http://127.0.0.1:8000").remote("judge")
True
>>> EngineConfig().remote("judge"), EngineConfig("vllm").remote("embedding")
(False, False)
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models.kinds import load_class


@dataclass(frozen=True)
class EngineType:
    """One engine and its traits: ``adapters`` (kind -> ``module:Class``) are the kinds its server runs (none
    for the in-process engine, which runs each kind's own adapter); ``chat_generator`` is the
    ``module:Class`` of its chat generator; ``in_process``: no server (no server options; torchrun ranks)."""

    name: str
    help: str
    chat_generator: str
    adapters: Mapping[str, str] = field(default_factory=dict)
    in_process: bool = False
    #: ``module:Class`` of a server engine's dialect (a :class:`~prb_utils.models.serve.dialect.Dialect`;
    #: :mod:`prb_utils.models.serve.vllm` is the first)
    dialect: str | None = None


#: The serve wing's adapters, by kind: every OpenAI-compatible server engine runs these over its dialect.
SERVED_ADAPTERS = {"judge": "prb_utils.models.serve.adapters:ServedJudgeRM",
                   "implicit": "prb_utils.models.serve.adapters:ServedImplicitRM",
                   "classifier": "prb_utils.models.serve.adapters:ServedClassifierRM"}
#: The serve wing's chat generator (Best-of-N sampling, LLM rubric judges on a server engine).
SERVED_CHAT_GENERATOR = "prb_utils.models.serve.connection:ServedChatGenerator"


#: The engines a model can run on, by name (``--engine`` takes its choices from here).
ENGINES: dict[str, EngineType] = {engine.name: engine for engine in (
    EngineType("hf", "transformers in this process", "prb_utils.models.generation:ChatGenerator",
               in_process=True),
    EngineType("vllm", "judge:, implicit: and classifier: RMs, the BoN policy and the LLM rubric judges on an "
               "OpenAI-compatible vLLM server (one prb starts from .venv-vllm, or the --engine-url given)",
               SERVED_CHAT_GENERATOR, SERVED_ADAPTERS, dialect="prb_utils.models.serve.vllm:VLLMDialect"),
)}

def dialect_of(name: str) -> Any:
    """The dialect of the server engine ``name`` (an instance of its record's ``dialect`` class); PRBError for an
    engine that runs in this process.

    >>> dialect_of("vllm").label
    'vLLM'
    """
    engine = ENGINES[check_engine(name)]
    if not engine.dialect:
        raise PRBError(f"The {name} engine runs models in this process: it has no server dialect.")
    return load_class(engine.dialect)()


def check_engine(name: str) -> str:
    """``name`` when it names one of :data:`ENGINES`, else a PRBError naming them.

    >>> check_engine("vllm")
    'vllm'
    """
    if name not in ENGINES:
        raise PRBError(f"Unknown engine '{name}'; use {' or '.join(ENGINES)}.")
    return name


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a server's address (a scheme other than http or https, no host, a cut IPv6 address,
    a port that is not a number from 1 to 65535), or None.

    >>> url_problem("http://[::1]:8000/v1") is None, url_problem("http://[::1"), url_problem("127.0.0.1:8000")
    (True, 'Invalid IPv6 URL', 'it does not start with http:// or https://')
    """
    try:
        parts = urllib.parse.urlsplit(str(url).strip())
        port = parts.port
    except ValueError as exc:
        return str(exc)
    for why, wrong in (("it does not start with http:// or https://", parts.scheme.lower() not in ("http", "https")),
                       ("it names no host", not parts.hostname), ("its port is 0", port == 0)):
        if wrong:
            return why
    return None


@dataclass(frozen=True)
class EngineConfig:
    """Which engine models run on, and its settings (the command line's ``--engine*`` options).

    ``urls``: running servers of the model (several share the requests); none: prb starts one with
    ``tensor_parallel_size``, ``pipeline_parallel_size`` and ``engine_args`` (``KEY=VALUE`` options of
    ``vllm serve``). ``concurrency``: requests kept in flight per server (None: derived from the server).
    ``cache_dir`` (the request caches) and ``progress`` are set per run by :meth:`for_run`. Options that
    cannot take effect are refused in one sentence.

    >>> EngineConfig("vllm", urls="http://x:1").metadata()["engine_url"]
    'http://x:1'
    >>> EngineConfig(engine_args=["max-model-len=4096"])
    Traceback (most recent call last):
    prb_utils.errors.PRBError: --engine-url, --engine-arg, --engine-concurrency, --tensor-parallel-size and --pipeline-parallel-size need --engine vllm.
    """

    name: str = "hf"
    urls: tuple[str, ...] = ()
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    engine_args: tuple[str, ...] = ()
    concurrency: int | None = None
    cache_dir: str | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        urls = (self.urls,) if isinstance(self.urls, str) else tuple(self.urls or ())
        object.__setattr__(self, "urls", tuple(dict.fromkeys(str(u) for u in urls)))
        object.__setattr__(self, "engine_args", tuple(str(a) for a in self.engine_args or ()))
        engine = ENGINES[check_engine(self.name)]
        if self.concurrency is not None and int(self.concurrency) < 1:
            raise PRBError(f"--engine-concurrency must be at least 1, got {self.concurrency}.")
        if self.tensor_parallel_size < 1 or self.pipeline_parallel_size < 1:
            raise PRBError("--tensor-parallel-size and --pipeline-parallel-size must be at least 1.")
        server = self.urls or self.engine_args or self.concurrency or self.launches_parallel
        if engine.in_process and server:
            raise PRBError("--engine-url, --engine-arg, --engine-concurrency, --tensor-parallel-size and "
                           f"--pipeline-parallel-size need --engine {_server_engines()}.")
        if self.urls and (self.engine_args or self.launches_parallel):
            raise PRBError("--engine-arg, --tensor-parallel-size and --pipeline-parallel-size configure the server "
                           "prb starts; with --engine-url, start your server with them instead.")
        for url in self.urls:
            why = url_problem(url)
            if why:
                raise PRBError(f"--engine-url {url!r} is not a URL ({why}); give the server's address, e.g. "
                               "http://127.0.0.1:8000.")
        if self.engine_args:   # those prb owns or that duplicate its options are refused, as the dialect names them
            dialect_of(self.name).check_engine_args(self.engine_args)

    @property
    def engine(self) -> EngineType:
        return ENGINES[self.name]

    @property
    def in_process(self) -> bool:
        return self.engine.in_process

    @property
    def launches_parallel(self) -> bool:
        return self.tensor_parallel_size != 1 or self.pipeline_parallel_size != 1

    def remote(self, kind: str) -> bool:
        """Whether a model of ``kind`` runs on this engine's server (else in this process)."""
        return kind in self.engine.adapters

    def adapter(self, kind: str) -> str | None:
        """The ``module:Class`` of the adapter this engine runs ``kind`` with (None: the kind's own)."""
        return self.engine.adapters.get(kind)

    def for_run(self, out: str | Path, *, progress: bool = True) -> EngineConfig:
        """This configuration with the request caches of the store ``out`` (``out/engine``) and its progress."""
        return replace(self, cache_dir=str(Path(out) / "engine"), progress=progress)

    def key_options(self, kind: str) -> dict[str, Any]:
        """What the engine adds to the key of a job of ``kind`` (nothing when the kind runs in process, so every
        ``hf`` key stays what it was): the engine and its arguments (its placement, the device ``server`` and the
        dtype as asked, is :meth:`~prb_utils.models.ModelOptions.placement`'s)."""
        if not self.remote(kind):
            return {}
        options: dict[str, Any] = {"engine": self.name}
        if self.engine_args:
            options["engine_args"] = list(self.engine_args)
        return options

    def metadata(self) -> dict[str, Any]:
        """The run metadata of this configuration (``{"engine": "hf"}`` in process)."""
        if self.engine.in_process:
            return {"engine": self.name}
        url = None if not self.urls else self.urls[0] if len(self.urls) == 1 else list(self.urls)
        return {"engine": self.name, "engine_dialect": self.engine.dialect, "engine_url": url,
                "tensor_parallel_size": self.tensor_parallel_size,
                "pipeline_parallel_size": self.pipeline_parallel_size, "engine_args": list(self.engine_args)}

    def chat_generator(self, model: str, **options: Any) -> Any:
        """A chat generator of ``model`` on this engine (``generate``, ``sample_batch``, ``sample_each``,
        ``sample_n``; :class:`~prb_utils.models.generation.ChatGenerator`'s API on every engine)."""
        generator = load_class(self.engine.chat_generator)
        return generator(model, **options) if self.engine.in_process else generator(model, engine=self, **options)


#: Models in this process (``--engine hf``): the default everywhere an engine is taken.
IN_PROCESS = EngineConfig()


def _server_engines() -> str:
    return " or ".join(name for name, engine in ENGINES.items() if not engine.in_process)

