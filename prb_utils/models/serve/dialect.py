"""The serving dialect: the contract one server engine keeps with the serve wing, in the manner of
lm-evaluation-harness's ``TemplateAPI`` (a class per server API that builds its payloads and parses its answers).

Everything the launcher, the client, the connection and the adapters do not share between servers is a method or an
attribute of :class:`Dialect`:

- **launching**: the Python that runs the server (:meth:`Dialect.find_python`), its command line
  (:meth:`Dialect.server_command`) and environment, the health path, and the engine arguments prb keeps for itself
  (:attr:`Dialect.owned_args`: refused) or that duplicate one of its own options (:attr:`Dialect.duplicated_args`:
  refused, naming prb's option);
- **requests**: each a :class:`Request`, ``(path, body)``: the next-token log-probs of given tokens, the prompt
  log-probs, completions, class values and the request several servers are compared by;
- **answers**: parsers given the token ids that were sent (never a body's field): :meth:`Dialect.top_logprobs`,
  :meth:`Dialect.prompt_logprobs`, :meth:`Dialect.completion_texts`, :meth:`Dialect.class_values`; a response
  without what was asked for raises :class:`UnusableResponse`;
- **reports**: the readers of the server's settings (its dtype among them), its ``/metrics`` (engines behind it)
  and its version, and of its log (the last error, a logged setting);
- **wording**: :attr:`Dialect.label` (``vLLM``) and :attr:`Dialect.serve_hint` (``vllm serve``), in every message.

A new server engine is one module with a :class:`Dialect` subclass and one record in
:data:`prb_utils.models.engines.ENGINES` naming it (:mod:`prb_utils.models.serve.vllm` is the first).

Example:
    >>> Request("/generate", {"input_ids": [1, 2]}).path
    '/generate'
    >>> abbreviated("hos", ("port", "host")), abbreviated("max-model-len", ("port", "host")) is None
    ('host', True)
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from prb_utils.errors import PRBError

#: The top-k asked of a server that does not take log-probs by token id.
TOP_LOGPROBS = 20
#: The text several ``--engine-url`` servers are asked about, to compare their numbers (``check_alike``).
PROBE_TEXT = "A reward model prefers the answer that follows the user's rubric. The quick brown fox jumps over the lazy dog."


class UnusableResponse(RuntimeError):
    """A response without what was asked for (no choices, no logprobs): raised by a dialect's parser; the client
    never caches it, that pair fails (retried next run), and ``UNUSABLE_LIMIT`` in a row stop the run."""


class Request(NamedTuple):
    """One request to a server: the path it is posted to and its JSON body."""

    path: str
    body: dict[str, Any]


def parse_engine_args(items: Sequence[str]) -> list[str]:
    """``KEY=VALUE`` items as server options (``KEY`` with or without leading dashes; a bare ``KEY`` is a flag).

    >>> parse_engine_args(["max-model-len=4096", "--enforce-eager", "enable_prefix_caching=true"])
    ['--max-model-len', '4096', '--enforce-eager', '--enable-prefix-caching', 'true']
    """
    out: list[str] = []
    for item in items:
        key, sep, value = str(item).partition("=")
        key = key.strip().lstrip("-").replace("_", "-")
        if not key:
            raise PRBError(f"--engine-arg '{item}' has no key; write KEY=VALUE, e.g. max-model-len=4096.")
        out.append("--" + key)
        if sep:
            out.append(value.strip())
    return out


def abbreviated(key: str, options: Sequence[str] | Mapping[str, str]) -> str | None:
    """The option of ``options`` that the server option ``key`` names as an argparse command line reads it: the
    option itself, or one it abbreviates (argparse takes any prefix of an option, ``--hos`` for ``--host``); None
    for neither."""
    if not key:
        return None
    if key in options:
        return key
    return next((option for option in options if option.startswith(key)), None)


class Dialect(ABC):
    """How prb starts one engine's server, what it asks it and how it reads the answers (see the module docstring).

    Subclasses set the class attributes and define the abstract methods; the rest has a default that a server
    which does not say (no settings, no ``/metrics``) keeps.
    """

    #: the engine's name (its record's), its name in messages and how its server is started by hand
    name: ClassVar[str]
    label: ClassVar[str]
    serve_hint: ClassVar[str]
    #: the variable naming the server's Python, the project folder's environment with it, and how to make one
    python_variable: ClassVar[str]
    venv: ClassVar[str]
    install_hint: ClassVar[str]
    #: engine arguments prb sets itself (refused), and those that duplicate a prb option (theirs -> prb's; refused)
    owned_args: ClassVar[tuple[str, ...]] = ("port", "host")
    duplicated_args: ClassVar[Mapping[str, str]] = {}
    #: the engine arguments that say the concurrency: sequences per engine, engines behind the endpoint
    max_sequences_arg: ClassVar[str | None] = None
    data_parallel_arg: ClassVar[str | None] = None
    #: how to make the server return a classifier's raw logits, when it applies an activation (a message's end)
    raw_logits_hint: ClassVar[str] = "start the server so that it returns raw logits"
    #: the top-k asked of a server that refuses log-probs by token id
    top_k: ClassVar[int] = TOP_LOGPROBS
    #: OpenAI's model list (served ids, weights, context), and the path a started server is ready at
    models_path: ClassVar[str] = "/v1/models"
    health_path: ClassVar[str] = "/v1/models"
    #: where the server reports its settings, its metrics and its version (None: it does not)
    server_info_path: ClassVar[str | None] = None
    metrics_path: ClassVar[str | None] = None
    version_path: ClassVar[str | None] = "/version"

    # ------------------------------------------------------------------------------------------ launching
    def find_python(self) -> Path:
        """The Python that runs the server: ``$<python_variable>``, else ``<venv>`` in the working folder or in
        the project folder this package lies in; PRBError naming how to make one when there is none."""
        given = os.environ.get(self.python_variable)
        if given:
            path = Path(given).expanduser()
            if not path.is_file():
                raise PRBError(f"{self.python_variable} names {given}, which is not a file; point it at the Python "
                               f"of an environment that has {self.label} installed.")
            return path
        for root in (Path.cwd(), Path(__file__).resolve().parents[3]):
            for name in ("bin/python", "Scripts/python.exe"):
                candidate = root / self.venv / name
                if candidate.is_file():
                    return candidate
        raise PRBError(f"The {self.name} engine needs a Python with {self.label}: run `{self.install_hint}` (it "
                       f"creates {self.venv}), set {self.python_variable}, or give --engine-url of a running server.")

    @abstractmethod
    def server_command(self, python: Path, source: str, served_name: str, port: int, launch: Any) -> list[str]:
        """The command line of a server of ``source`` served as ``served_name`` on 127.0.0.1:``port``, with the
        launch options ``launch`` (:class:`~prb_utils.models.serve.launcher.LaunchOptions`)."""

    def server_environment(self, env: dict[str, str]) -> dict[str, str]:
        """The server's environment, from this process's ``env``."""
        return env

    def check_engine_args(self, items: Sequence[str]) -> None:
        """PRBError in one sentence for an engine argument prb owns or that duplicates a prb option."""
        for arg in items:
            key = arg.split("=", 1)[0].strip().lstrip("-").replace("_", "-").lower()
            owned = abbreviated(key, self.owned_args)
            if owned:
                raise PRBError(f"--engine-arg {arg!r}{self._read_as(key, owned)}: prb chooses the server's {owned} "
                               "itself (a free port on 127.0.0.1: a server on another address would be reachable, "
                               "without authentication, by others).")
            duplicated = abbreviated(key, self.duplicated_args)
            if duplicated:
                raise PRBError(f"--engine-arg {arg!r}{self._read_as(key, duplicated)} duplicates prb's "
                               f"{self.duplicated_args[duplicated]}: give that option instead, so that the server "
                               "runs with what the job records.")

    def _read_as(self, key: str, option: str) -> str:
        return "" if key == option else f" ({self.label} reads {key} as --{option})"

    # ------------------------------------------------------------------------------------------ requests
    @abstractmethod
    def letters_request(self, model: str, prompt: Sequence[int], tokens: Sequence[int], *,
                        top_k: int | None) -> Request:
        """The next-token log-probs of ``tokens`` after ``prompt``: asked by id, or the ``top_k`` most likely."""

    @abstractmethod
    def prompt_logprobs_request(self, model: str, prompt: Sequence[int]) -> Request:
        """The log-prob of each prompt token given the ones before it."""

    @abstractmethod
    def completion_request(self, model: str, prompt: Sequence[int], *, max_tokens: int, n: int | None = None,
                           temperature: float = 0.0, top_p: float | None = None, seed: int | None = None) -> Request:
        """``n`` completions of ``prompt`` (the server's one when None; greedy at temperature 0, else sampled with
        ``top_p`` and ``seed``)."""

    def classify_request(self, model: str, tokens: Sequence[int], *, activation: bool = False) -> Request:
        """The class values of one input; without activation: the raw logits."""
        raise PRBError(f"The {self.label} engine serves no classifier; run classifier: models with --engine hf.")

    @abstractmethod
    def probe_request(self, model: str, runner: str | None = None) -> tuple[Request, Callable[[Any], list[float]]]:
        """The request several servers of ``model`` are compared by, and the numbers of its response (``runner``:
        ``pooling`` for a classifier's server)."""

    def refuses_token_ids(self, error: str) -> bool:
        """Whether a refused request says the server does not take log-probs by token id."""
        return False

    def refuses_top_k(self, error: str) -> bool:
        """Whether a refused request says the top-k asked is above the server's maximum."""
        return False

    # ------------------------------------------------------------------------------------------ answers
    @abstractmethod
    def top_logprobs(self, response: Any) -> dict[int, float]:
        """``{token id: log-prob}`` at the first generated position of a :meth:`letters_request`'s response;
        :class:`UnusableResponse` without them."""

    @abstractmethod
    def prompt_logprobs(self, response: Any, ids: Sequence[int]) -> list[float | None]:
        """Per position of the prompt ``ids`` (the token ids sent), its token's log-prob (None for the first);
        :class:`UnusableResponse` when a position after the first has none."""

    @abstractmethod
    def completion_texts(self, response: Any) -> list[str]:
        """The texts of a :meth:`completion_request`'s response, in order; :class:`UnusableResponse` without."""

    def class_values(self, response: Any) -> list[float]:
        """The class values of a :meth:`classify_request`'s response; :class:`UnusableResponse` without them."""
        raise UnusableResponse(f"a {self.label} server gives no class values")

    # ------------------------------------------------------------------------------------------ reports
    def read_server_info(self, payload: Any) -> dict[str, Any]:
        """The settings a server reports at :attr:`server_info_path`, by name in words (``dtype``, ``quantization``,
        ...; the dtype without ``torch.``); {} for a server that does not say."""
        return {}

    def read_metrics(self, text: str) -> int | None:
        """How many engines answer behind the endpoint, from its :attr:`metrics_path` text; None: it does not say."""
        return None

    def read_version(self, payload: Any) -> str | None:
        """The server's version from its :attr:`version_path` answer; None when it does not say."""
        found = payload.get("version") if isinstance(payload, dict) else None
        return str(found) if found else None

    def last_error(self, log: str, lines: int = 3) -> str:
        """The last error of the server's log, on one line (by default its last ``lines`` lines)."""
        kept = [line.strip() for line in log.splitlines() if line.strip()]
        return " | ".join(kept[-lines:])[-600:] if kept else "an empty log"

    def logged_config(self, log: str, name: str) -> str | None:
        """The setting ``name`` as the server logged it at start; None when its log does not say."""
        return None
