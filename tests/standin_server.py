"""A stand-in OpenAI-compatible server for the engine seam test: a second server engine that is not vLLM.

Run as ``python standin_server.py --model SOURCE --served-model-name NAME --port PORT --log FILE``. It answers
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
    prompt = list(body.get("prompt") or [])
    choice: dict = {"index": 0, "text": " A"}
    if body.get("prompt_logprobs") is not None:
        choice["prompt_logprobs"] = [None] + [{str(t): {"logprob": token_logprob(t)}} for t in prompt[1:]]
    if body.get("logprob_token_ids"):
        choice["logprobs"] = {"top_logprobs": [{f"token_id:{t}": token_logprob(t) for t in body["logprob_token_ids"]}]}
    return {"choices": [dict(choice, index=i) for i in range(int(body.get("n") or 1))]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    lock = threading.Lock()

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
                self._send({"data": [{"id": args.served_model_name, "root": args.model, "max_model_len": 2048}]})
            elif self.path == "/version":
                self._send({"version": VERSION})
            else:
                self._send({"error": "not found"}, 404)

        def do_POST(self) -> None:  # noqa: N802 - the handler's API
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            with lock, open(args.log, "a", encoding="utf-8") as log:
                log.write(json.dumps({"path": self.path, "body": body}) + "\n")
            self._send(answer(body, self.path))

        def log_message(self, *_: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
