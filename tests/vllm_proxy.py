"""A real HTTP proxy in front of a vLLM server for the engine tests: it counts the completion requests
(sha256 of each body, as :func:`prb_utils.models.serve.client.request_key` computes it), can hold requests
after a budget (so a test kills prb at a known point), can die (a server that stops answering), and can edit
what passes through (a server that answers unusably, one that ignores a request field, one started with other
settings)."""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prb_utils.models import EngineConfig

#: ``--engine-arg`` for the test servers: eager mode skips the torch.compile warm-up (about 100 s of a 2-core
#: CPU machine at every start, its AOT cache does not reload there); the numbers compared are the same. A tenth of
#: the memory for the KV cache (prb's CPU default is 0.3): SmolLM2's whole context needs far less, and the suite's
#: two workers may each hold servers at once.
EAGER = ("enforce-eager=true", "gpu-memory-utilization=0.1")
#: The engine of the servers the tests start themselves.
EAGER_ENGINE = EngineConfig("vllm", engine_args=EAGER)


class CountingProxy:
    """Forward everything to ``target``; ``keys`` lists the completion bodies' hashes in arrival order;
    ``max_in_flight`` is the most completion requests it held at once.

    ``answer_at_most``: answer that many completion requests, hold the rest until :meth:`release`.
    ``die_after``: answer completion requests one at a time and, after that many, drop every connection and
    stop listening (connections are refused from then on).
    ``edit_request(path, body) -> body``: what the server receives for a POST (the real server answers it).
    ``edit_response(path, body, data) -> data``: what prb receives for a POST the server answered with 200.
    ``edit_get(path, data) -> data``: what prb receives for a GET the server answered with 200 (``/v1/models``, ...).
    ``max_model_len``: a server started with ``--max-model-len`` that: ``/v1/models`` says so, and a completion
    whose prompt (token ids) leaves no room for one generated token is refused with HTTP 400 in vLLM's words.
    """

    def __init__(self, target: str, *, answer_at_most: int | None = None, die_after: int | None = None,
                 edit_request: Callable[[str, bytes], bytes] | None = None,
                 edit_response: Callable[[str, bytes, bytes], bytes] | None = None,
                 edit_get: Callable[[str, bytes], bytes] | None = None, max_model_len: int | None = None) -> None:
        self.target = target.rstrip("/")
        self.edit_get = edit_get
        self.max_model_len = max_model_len
        self.edit_request = edit_request
        self.edit_response = edit_response
        self.answer_at_most = answer_at_most
        self.die_after = die_after
        self.keys: list[str] = []
        self.answered = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._serial = threading.Lock()
        self.dead = False
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                proxy._forward(self, None)

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self.path.endswith("/completions"):
                    proxy._forward(self, body)
                    return
                with proxy._lock:
                    proxy.in_flight += 1
                    proxy.max_in_flight = max(proxy.max_in_flight, proxy.in_flight)
                self.counted = True
                try:
                    self._completion(body)
                finally:
                    proxy._answered(self)

            def _completion(self, body: bytes) -> None:
                with proxy._lock:
                    proxy.keys.append(hashlib.sha256(body).hexdigest())
                    turn = len(proxy.keys)
                if proxy.answer_at_most is not None and turn > proxy.answer_at_most:
                    proxy._released.wait(timeout=900)
                if proxy.die_after is not None:
                    with proxy._serial:
                        if not proxy.dead:
                            proxy._forward(self, body)
                            return
                    self.close_connection = True   # dead: no answer at all
                    return
                proxy._forward(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _too_long(self, body: bytes | None) -> bytes | None:
        """vLLM's HTTP 400 answer to a completion whose prompt does not fit ``max_model_len`` (None if it fits)."""
        if self.max_model_len is None or body is None:
            return None
        prompt = json.loads(body).get("prompt")
        if not isinstance(prompt, list) or len(prompt) + 1 <= self.max_model_len:
            return None
        return json.dumps({"error": {"message": f"This model's maximum context length is {self.max_model_len} tokens. "
                                                f"However, your prompt contains {len(prompt)} input tokens.",
                                     "type": "BadRequestError", "code": 400}}).encode()

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes | None) -> None:
        sent = self.edit_request(handler.path, body) if body is not None and self.edit_request else body
        request = urllib.request.Request(self.target + handler.path, data=sent, method=handler.command,
                                         headers={"Content-Type": "application/json"})
        refused = self._too_long(body) if handler.path.endswith("/completions") else None
        try:
            if refused is not None:
                status, data = 400, refused
            else:
                with urllib.request.urlopen(request, timeout=600) as response:
                    status, data = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, data = exc.code, exc.read()
        if body is not None and status == 200 and self.edit_response:
            data = self.edit_response(handler.path, body, data)
        if body is None and status == 200:
            if self.max_model_len is not None and handler.path.startswith("/v1/models"):
                found = json.loads(data)
                for model in found.get("data") or []:
                    model["max_model_len"] = self.max_model_len
                data = json.dumps(found).encode()
            if self.edit_get:
                data = self.edit_get(handler.path, data)
        self._answered(handler)   # no longer in flight once its answer starts back (the client may send the next)
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except OSError:   # the client is gone (killed)
            return
        if body is not None and handler.path.endswith("/completions"):
            with self._lock:
                self.answered += 1
                dying = self.die_after is not None and self.answered >= self.die_after and not self.dead
                self.dead = self.dead or dying
            if dying:
                threading.Thread(target=self.close, daemon=True).start()

    def _answered(self, handler: BaseHTTPRequestHandler) -> None:
        if getattr(handler, "counted", False):
            handler.counted = False  # type: ignore[attr-defined]
            with self._lock:
                self.in_flight -= 1

    def release(self) -> None:
        """Let held requests through and answer everything from now on."""
        self.answer_at_most = None
        self._released.set()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
