"""A stand-in OpenAI-compatible server for the engine seam test: a second server engine that is not vLLM.

Run as ``python standin_server.py --model SOURCE --served-model-name NAME --port PORT --log FILE`` (or in a test's
own process: :class:`StandIn`). It answers
``/v1/models``, ``/version``, ``/v1/completions`` (next-token log-probs asked by token id, prompt log-probs,
completions) and ``/classify`` with numbers computed from the token ids alone (no model), and appends every POST
body to ``FILE`` (one JSON per line), so a test sees what prb asked of it.
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


class StandIn:
    """The stand-in served from a thread of the test's own process (``.url``; :meth:`close`), with what a test
    makes it: ``max_model_len`` (``/v1/models``), ``dtype`` (``/server_info``, as vLLM's dev mode says it; none:
    no ``/server_info``), ``tilt`` (every log-prob times this: a server that runs the model with other numerics),
    ``fail`` (the first that many POSTs answered HTTP 503, the next ones as usual). ``bodies`` lists every POST
    body answered, in arrival order."""

    def __init__(self, model: str, served_name: str | None = None, *, port: int = 0, log: str | None = None,
                 max_model_len: int = 2048, dtype: str | None = None, tilt: float = 1.0, fail: int = 0) -> None:
        self.bodies: list[dict] = []
        self.failed = 0
        lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, payload: dict, status: int = 200) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - the handler's API
                if self.path == "/v1/models":
                    self._send({"data": [{"id": served_name or model, "root": model, "max_model_len": max_model_len}]})
                elif self.path == "/version":
                    self._send({"version": VERSION})
                elif self.path.startswith("/server_info") and dtype:
                    self._send({"vllm_config": {"model_config": {"dtype": f"torch.{dtype}"}}})
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
    parser.add_argument("--model", required=True)
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    StandIn(args.model, args.served_model_name, port=args.port, log=args.log)
    threading.Event().wait()   # served from its thread until the process is stopped


if __name__ == "__main__":
    main()
