"""A second server dialect, SGLang's native API, as a contributor adds an engine: this one module and one record in
``ENGINES`` (the seam test registers it). Its server is the stand-in of ``standin_server.py`` (``--dialect sglang``),
started by prb's launcher.

Requests go to ``POST /generate`` with ``input_ids`` and ``sampling_params``; log-probs come back in ``meta_info`` as
``[logprob, token id, text]`` triples: ``input_token_logprobs`` (from ``logprob_start_len``), ``output_top_logprobs``
(``top_logprobs_num``) and ``output_token_ids_logprobs`` (``token_ids_logprob``); ``n`` samples come back as a list.
The server reports its settings and version at ``/get_server_info``.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prb_utils.models.serve.dialect import PROBE_TEXT, Dialect, Request, UnusableResponse, parse_engine_args

STANDIN = Path(__file__).with_name("standin_server.py")
GENERATE = "/generate"


def meta(response: Any) -> dict[str, Any]:
    """The ``meta_info`` of a ``/generate`` answer for one input (the first of several outputs)."""
    first = response[0] if isinstance(response, list) and response else response
    found = first.get("meta_info") if isinstance(first, dict) else None
    if not isinstance(found, dict):
        raise UnusableResponse("a /generate response without meta_info")
    return found


def by_token(entries: Any) -> dict[int, float]:
    """``{token id: log-prob}`` of a list of ``[logprob, token id, text]`` triples."""
    return {int(e[1]): float(e[0]) for e in entries or [] if isinstance(e, list) and e[0] is not None}


class SGLangLikeDialect(Dialect):
    """SGLang's native ``/generate`` API on the stand-in server."""

    name = "standin"
    label = "SGLang stand-in"
    serve_hint = "python standin_server.py --dialect sglang"
    python_variable = "PRB_STANDIN_PYTHON"
    venv = ".venv-standin"
    install_hint = "nothing: the tests' own Python runs it"
    duplicated_args = {"dtype": "--dtype", "tp-size": "--tensor-parallel-size", "pp-size": "--pipeline-parallel-size",
                       "model-path": "--model", "served-model-name": "--model"}
    max_sequences_arg = "max-running-requests"
    data_parallel_arg = "dp-size"
    health_path = "/health"
    server_info_path = "/get_server_info"
    version_path = "/get_server_info"

    def find_python(self) -> Path:
        return Path(sys.executable)

    def server_command(self, python: Path, source: str, served_name: str, port: int, launch: Any) -> list[str]:
        log = Path(launch.engine.cache_dir or tempfile.gettempdir()) / "standin-requests.jsonl"
        return [str(python), str(STANDIN), "--dialect", "sglang", "--model-path", source, "--served-model-name",
                served_name, "--host", "127.0.0.1", "--port", str(port), "--dtype", launch.dtype, "--log", str(log),
                *parse_engine_args(launch.engine.engine_args)]

    def letters_request(self, model: str, prompt: Sequence[int], tokens: Sequence[int], *,
                        top_k: int | None) -> Request:
        body: dict[str, Any] = {"input_ids": list(prompt), "return_logprob": True,
                                "sampling_params": {"max_new_tokens": 1, "temperature": 0.0}}
        body.update({"token_ids_logprob": list(tokens)} if top_k is None else {"top_logprobs_num": int(top_k)})
        return Request(GENERATE, body)

    def prompt_logprobs_request(self, model: str, prompt: Sequence[int]) -> Request:
        return Request(GENERATE, {"input_ids": list(prompt), "return_logprob": True, "logprob_start_len": 0,
                                  "sampling_params": {"max_new_tokens": 1, "temperature": 0.0}})

    def completion_request(self, model: str, prompt: Sequence[int], *, max_tokens: int, n: int | None = None,
                           temperature: float = 0.0, top_p: float | None = None, seed: int | None = None) -> Request:
        params: dict[str, Any] = {"max_new_tokens": int(max_tokens), "temperature": float(temperature),
                                  "skip_special_tokens": True, **({"n": int(n)} if n is not None else {})}
        if temperature > 0:
            params.update(top_p=float(top_p if top_p is not None else 1.0), sampling_seed=int(seed or 0))
        return Request(GENERATE, {"input_ids": list(prompt), "sampling_params": params})

    def probe_request(self, model: str, runner: str | None = None) -> tuple[Request, Callable[[Any], list[float]]]:
        request = Request(GENERATE, {"text": PROBE_TEXT, "return_logprob": True, "logprob_start_len": 0,
                                     "sampling_params": {"max_new_tokens": 1, "temperature": 0.0}})
        return request, lambda r: [float(e[0]) for e in meta(r).get("input_token_logprobs") or [] if e[0] is not None]

    def top_logprobs(self, response: Any) -> dict[int, float]:
        info = meta(response)
        found = (info.get("output_token_ids_logprobs") or info.get("output_top_logprobs") or [None])[0]
        if not found:
            raise UnusableResponse("a /generate response without the logprobs asked for")
        return by_token(found)

    def prompt_logprobs(self, response: Any, ids: Sequence[int]) -> list[float | None]:
        entries = meta(response).get("input_token_logprobs") or []
        values: list[float | None] = []
        for k, token in enumerate(ids):   # each entry names its token: a value for another token is none
            entry = entries[k] if k < len(entries) else None
            known = isinstance(entry, list) and entry[0] is not None and int(entry[1]) == int(token)
            values.append(float(entry[0]) if known else None)
        if len(ids) > 1 and any(v is None for v in values[1:]):
            raise UnusableResponse("a /generate response without the input logprobs asked for")
        return values

    def completion_texts(self, response: Any) -> list[str]:
        outputs = response if isinstance(response, list) else [response]
        if not outputs or not all(isinstance(o, dict) and "text" in o for o in outputs):
            raise UnusableResponse("a /generate response without text")
        return [str(o["text"]) for o in outputs]

    def read_server_info(self, payload: Any) -> dict[str, Any]:
        info = payload if isinstance(payload, dict) else {}
        return {"dtype": str(info["dtype"])} if info.get("dtype") not in (None, "auto") else {}
