"""A stand-in server for the serve wing's tests, in one of two dialects, with numbers computed from the token ids
alone (no model); it appends every POST (path and body) to ``--log FILE`` (one JSON per line), so a test sees what
prb asked of it.

- ``vllm`` (the default): vLLM's OpenAI-compatible API: ``/v1/models``, ``/version``, ``/server_info`` (dev mode),
  ``/v1/completions`` (next-token log-probs asked by token id, prompt log-probs, completions) and ``/classify``;
- ``sglang``: SGLang's native API: ``/v1/models``, ``/health``, ``/get_server_info`` (its settings and version) and
  ``POST /generate`` taking ``input_ids`` (or ``text``) and ``sampling_params``, with the log-probs in
  ``meta_info`` as ``[logprob, token id, text]`` triples (``input_token_logprobs`` from ``logprob_start_len``,
  ``output_top_logprobs`` for ``top_logprobs_num``, ``output_token_ids_logprobs`` for ``token_ids_logprob``) and a
  list of ``n`` outputs for ``n`` > 1. Every other path answers 404.

Run as ``python standin_server.py --dialect sglang --model-path SOURCE --served-model-name NAME --port PORT --log
FILE [--dtype DTYPE]`` (``--model`` for ``vllm``), or in a test's own process: :class:`StandIn`.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "standin-1"


def token_logprob(token: int) -> float:
    """The log-prob the stand-in gives ``token`` wherever it is asked (a made-up rule, not a model)."""
    return -((int(token) % 97) + 1) / 10


def answer(body: dict, path: str) -> dict:
    """vLLM's answer to ``body`` posted at ``path``."""
    if path == "/classify":
        return {"data": [{"probs": [sum(body["input"]) % 13 - 6.0]}]}
    given = body.get("prompt") or []
    prompt = [ord(c) for c in given] if isinstance(given, str) else list(given)   # a text prompt: one "token" a letter
    choice: dict = {"index": 0, "text": " A"}
    if body.get("prompt_logprobs") is not None:
        choice["prompt_logprobs"] = [None] + [{str(t): {"logprob": token_logprob(t)}} for t in prompt[1:]]
    if body.get("logprob_token_ids"):
        choice["logprobs"] = {"top_logprobs": [{f"token_id:{t}": token_logprob(t) for t in body["logprob_token_ids"]}]}
    return {"choices": [dict(choice, index=i) for i in range(int(body.get("n") or 1))]}


def triple(token: int) -> list:
    """One SGLang log-prob entry: ``[logprob, token id, text]`` (the text is not asked for)."""
    return [token_logprob(token), int(token), None]


def generate(body: dict) -> dict | list:
    """SGLang's answer to ``body`` posted at ``/generate``."""
    given = body.get("input_ids") if body.get("input_ids") is not None else body.get("text") or ""
    ids = [ord(c) for c in given] if isinstance(given, str) else [int(t) for t in given]
    params = body.get("sampling_params") or {}
    n, seed = int(params.get("n") or 1), int(params.get("sampling_seed") or 0)
    outputs = []
    for i in range(n):
        meta: dict = {"prompt_tokens": len(ids), "completion_tokens": 1}
        if body.get("return_logprob"):
            start = int(body.get("logprob_start_len", -1))
            if start >= 0:
                meta["input_token_logprobs"] = [[None, ids[0], None] if k == 0 else triple(t)
                                                for k, t in enumerate(ids) if k >= start]
            if body.get("top_logprobs_num"):
                meta["output_top_logprobs"] = [[triple(t) for t in range(int(body["top_logprobs_num"]))]]
            if body.get("token_ids_logprob"):
                meta["output_token_ids_logprobs"] = [[triple(t) for t in body["token_ids_logprob"]]]
        words = " ".join(f"w{(seed + i + k) % 7}" for k in range(1 + (seed + i) % 3))
        outputs.append({"text": f"{words} 2" if params.get("temperature", 1.0) else " A", "meta_info": meta})
    return outputs if n > 1 else outputs[0]


class StandIn:
    """The stand-in served from a thread of the test's own process (``.url``; :meth:`close`), with what a test
    makes it: ``max_model_len`` (``/v1/models``), ``dtype`` (``/server_info``, as vLLM's dev mode says it; none:
    no ``/server_info``), ``tilt`` (every log-prob times this: a server that runs the model with other numerics),
    ``fail`` (the first that many POSTs answered HTTP 503, the next ones as usual), ``dialect`` (``vllm`` or
    ``sglang``; ``tilt`` and ``fail`` are vLLM's only). ``bodies`` lists every POST body answered, in arrival
    order."""

    def __init__(self, model: str, served_name: str | None = None, *, port: int = 0, log: str | None = None,
                 max_model_len: int = 2048, dtype: str | None = None, tilt: float = 1.0, fail: int = 0,
                 dialect: str = "vllm") -> None:
        self.bodies: list[dict] = []
        self.failed = 0
        lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, payload: dict | list, status: int = 200) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - the handler's API
                if dialect == "sglang":
                    self._sglang_get()
                elif self.path == "/v1/models":
                    self._send({"data": [{"id": served_name or model, "root": model, "max_model_len": max_model_len}]})
                elif self.path == "/version":
                    self._send({"version": VERSION})
                elif self.path.startswith("/server_info") and dtype:
                    self._send({"vllm_config": {"model_config": {"dtype": f"torch.{dtype}"}}})
                else:
                    self._send({"error": "not found"}, 404)

            def _sglang_get(self) -> None:
                if self.path == "/v1/models":
                    self._send({"data": [{"id": served_name or model, "root": model, "max_model_len": max_model_len}]})
                elif self.path == "/health":
                    self._send({})
                elif self.path == "/get_server_info":
                    self._send({"model_path": model, "dtype": dtype or "auto", "tp_size": 1,
                                "context_length": max_model_len, "version": VERSION})
                else:
                    self._send({"error": "not found"}, 404)

            def do_POST(self) -> None:  # noqa: N802 - the handler's API
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with lock:
                    if stand_in.failed < fail:
                        stand_in.failed += 1
                        self._send({"error": {"message": "Service Unavailable"}}, 503)
                        return
                    stand_in.bodies.append(body)
                    if log:
                        with open(log, "a", encoding="utf-8") as fh:
                            fh.write(json.dumps({"path": self.path, "body": body}) + "\n")
                if dialect == "sglang":
                    self._send(generate(body) if self.path == "/generate" else {"detail": "Not Found"},
                               200 if self.path == "/generate" else 404)
                else:
                    self._send(tilted(answer(body, self.path), tilt))

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def tilted(payload: dict, tilt: float) -> dict:
    """``payload`` with every log-prob multiplied by ``tilt``."""
    if tilt == 1.0:
        return payload
    for choice in payload.get("choices") or []:
        for entry in choice.get("prompt_logprobs") or []:
            for value in (entry or {}).values():
                value["logprob"] *= tilt
        for tops in (choice.get("logprobs") or {}).get("top_logprobs") or []:
            for key in tops:
                tops[key] *= tilt
    return payload


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dialect", choices=("vllm", "sglang"), default="vllm")
    parser.add_argument("--model", "--model-path", dest="model", required=True)
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--context-length", type=int, default=2048)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    StandIn(args.model, args.served_model_name, port=args.port, log=args.log, dtype=args.dtype,
            max_model_len=args.context_length, dialect=args.dialect)
    threading.Event().wait()   # served from its thread until the process is stopped


if __name__ == "__main__":
    main()
