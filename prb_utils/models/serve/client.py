"""A small client for a server engine (of any dialect), built for long scoring runs.

It sends requests as the engine's dialect builds them (:class:`~prb_utils.models.serve.dialect.Request`: a path and a
body) and reads the server's model list, settings, metrics and version where the dialect says and as it reads them:

- bounded concurrency: at most ``concurrency`` requests in flight per server, over every map of the client
  (the scorer's chunks sent ahead too; threads, the server batches them);
- several servers (``url`` a list, every one serving the same model): each request goes to the server with
  the fewest requests in flight (ties in turn), its retries to the same server, so a dead one is named;
- retries with exponential backoff on 429, 5xx, timeouts and connection errors (``retries`` attempts after
  the first), a per-request timeout;
- faults the user can fix end the run with one sentence (:class:`EngineError`, a :class:`PRBError` the
  scorer does not retry pair by pair): nothing answers at the URL, it is not an OpenAI-compatible server,
  the server does not serve the model, or the server stopped answering mid-run; a request the server
  refuses (HTTP 400, e.g. a prompt longer than its context) is an ordinary error for that pair only;
- a request cache (:class:`RequestCache`): every finished request's (reduced) result is appended to a JSON
  Lines file at once, so a killed run resumes without sending it again. Its key is the sha256 of the exact
  request body sent (canonical JSON bytes);
- an unusable response (no choices, no logprobs where they were asked for: the reducer raises
  :class:`UnusableResponse`) is never cached: that pair fails (a ``failed`` row, retried by the next run), and
  ``UNUSABLE_LIMIT`` unusable responses in a row end the run with one sentence (:class:`EngineError`);
- interruptible: :meth:`CompletionClient.cancel` (Ctrl-C) shuts down every open connection, so threads blocked
  on a server that accepts but never answers return at once, and backoff waits end too.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import threading
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError, set_aside
from prb_utils.models.serve.dialect import Dialect, Request, UnusableResponse
from prb_utils.schema import canonical_json, stable_hash

RETRY_STATUS = (408, 429, 500, 502, 503, 504)
BACKOFF_S = 0.5   # the first retry's wait (doubled at each next one), unless a client is given its own
UNUSABLE_LIMIT = 6   # unusable responses in a row after which the server, not the pairs, is at fault
#: Several servers answer one probe request (:meth:`CompletionClient.check_alike`): a mean absolute difference of
#: their numbers (log-probs, logits) above this means other numerics (float32 against bfloat16 differs by about 0.09
#: on SmolLM2; the same dtype on the same hardware by nothing).
PROBE_TOLERANCE = 0.02
SAME_SETTINGS = "every --engine-url must serve the model with the same dtype, max model length and engine arguments"


class EngineError(PRBError):
    """The engine cannot be used (unreachable, wrong server, unserved model, died): the run stops."""

    fatal = True


class RequestError(RuntimeError):
    """The server refused one request (HTTP 4xx): that pair fails, the run goes on."""


class Cancelled(EngineError):
    """The run was stopped (Ctrl-C) while this request waited or was in flight."""


def _tracked(track: Callable[[http.client.HTTPConnection], None]) -> urllib.request.OpenerDirector:
    """A urllib opener whose HTTP(S) connections are handed to ``track`` once connected (so another thread
    can shut them down; ``track`` may refuse one by raising OSError); proxies and everything else as
    ``urllib.request.urlopen``."""

    def made(http_class: Callable[..., http.client.HTTPConnection]) -> Callable[..., http.client.HTTPConnection]:
        def connection(host: str, **kw: Any) -> http.client.HTTPConnection:
            conn = http_class(host, **kw)
            opened = conn.connect

            def connect() -> None:
                opened()
                track(conn)

            conn.connect = connect  # type: ignore[method-assign]
            return conn
        return connection

    class HTTP(urllib.request.HTTPHandler):
        def do_open(self, http_class: Any, req: Any, **kw: Any) -> Any:
            return super().do_open(made(http_class), req, **kw)

    class HTTPS(urllib.request.HTTPSHandler):
        def do_open(self, http_class: Any, req: Any, **kw: Any) -> Any:
            return super().do_open(made(http_class), req, **kw)

    return urllib.request.build_opener(HTTP(), HTTPS())


def body_bytes(body: dict[str, Any]) -> bytes:
    """The canonical JSON bytes sent for a request body (sorted keys, no spaces).

    >>> body_bytes({"b": 1, "a": [1, 2]})
    b'{"a":[1,2],"b":1}'
    """
    return canonical_json(body).encode("utf-8")


def request_key(body: dict[str, Any]) -> str:
    """sha256 (hex) of :func:`body_bytes`: what the request cache and a counting proxy both compute."""
    return stable_hash(canonical_json(body), length=64)


class RequestCache:
    """Finished requests' results, one JSON line each (``{"key": ..., "value": ...}``), appended and flushed
    as each request finishes; a line cut short by a kill is ignored when the file is read again."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._values: dict[str, Any] = {}
        self._lock = threading.Lock()
        if self.path.is_file():
            with open(self.path, "rb") as fh:
                lines = fh.read().splitlines(keepends=True)
            kept: list[bytes] = []
            damaged = 0
            for number, line in enumerate(lines, start=1):
                try:
                    item = json.loads(line.decode("utf-8"))
                    self._values[str(item["key"])] = item["value"]
                    kept.append(line)
                except UnicodeDecodeError:   # damaged, unless it is the last line, cut by a kill
                    damaged += number < len(lines) or line.endswith(b"\n")
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by a kill
            if damaged:   # set aside, never lost; the sound lines are kept, the others' requests sent again
                set_aside(self.path, f"{damaged} line(s) not UTF-8 text", "its sound lines are kept, the other "
                          "requests sent again")
                with open(self.path, "wb") as fh:
                    fh.writelines(line if line.endswith(b"\n") else line + b"\n" for line in kept)

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: str) -> Any:
        return self._values.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self._values

    def put(self, key: str, value: Any) -> None:
        line = json.dumps({"key": key, "value": value}, separators=(",", ":")) + "\n"
        with self._lock:
            self._values[key] = value
            with open(self.path, "a", encoding="utf-8") as fh:
                if fh.tell() and not self._ends_with_newline():
                    fh.write("\n")   # after a line cut short by a kill
                fh.write(line)
                fh.flush()

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as fh:
            fh.seek(-1, 2)
            return fh.read(1) == b"\n"


def base_url(url: str) -> str:
    """A server's address as the client keeps it (no trailing ``/``, ``/v1`` or ``/v1/completions``).

    >>> base_url("http://127.0.0.1:8000/v1/")
    'http://127.0.0.1:8000'
    """
    url = str(url).strip().rstrip("/")
    for suffix in ("/v1/completions", "/v1"):
        url = url.removesuffix(suffix)
    return url


def url_list(url: str | Sequence[str]) -> tuple[str, ...]:
    """One URL or several as a tuple of :func:`base_url` addresses, each once, in order.

    >>> url_list(["http://a:1/v1", "http://b:2", "http://a:1"])
    ('http://a:1', 'http://b:2')
    """
    given = [url] if isinstance(url, str) else list(url)
    return tuple(dict.fromkeys(base_url(u) for u in given))


class CompletionClient:
    """Requests of the engine's ``dialect`` to ``url`` (one address or several serving the same model);
    ``concurrency`` requests at most in flight on each server."""

    def __init__(self, url: str | Sequence[str], *, dialect: Dialect, concurrency: int = 16, timeout_s: float = 600.0,
                 retries: int = 4, backoff_s: float | None = None, describe: Callable[[], str] | None = None) -> None:
        self.dialect = dialect
        self.label = dialect.label   # the engine as messages name it, and how its server is started by hand
        self.serve_hint = dialect.serve_hint
        self.urls = url_list(url)
        if not self.urls:
            raise EngineError("No server address was given.")
        self.url = self.urls[0]   # the first server: where checks and one-server messages go
        self.concurrency = max(1, int(concurrency))
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.backoff_s = float(BACKOFF_S if backoff_s is None else backoff_s)
        self.describe = describe   # why the server stopped answering (e.g. the launched server's log)
        self.requests_sent = 0
        self.requests_cached = 0
        self.retried = 0
        self._count_lock = threading.Lock()
        self._ever_answered = False
        self._cancelled = threading.Event()
        self._unusable_streak = 0
        self.cards: dict[str, dict[str, Any]] = {}   # per server, the served model's /v1/models entry
        self.in_flight = dict.fromkeys(self.urls, 0)
        self.sent_per_url = dict.fromkeys(self.urls, 0)   # requests handed to each server (retries not counted)
        self._slots = threading.Condition()
        self._connections: weakref.WeakSet[http.client.HTTPConnection] = weakref.WeakSet()
        self._opener = _tracked(self._track)

    def _track(self, conn: http.client.HTTPConnection) -> None:
        with self._count_lock:
            self._connections.add(conn)
        if self._cancelled.is_set():   # cancel() ran while this one connected: it never sends
            conn.close()
            raise OSError("the run was stopped")

    def cancel(self) -> None:
        """Send no more requests (the run was stopped): requests not yet sent end at once, requests in flight
        end too (their connections are shut down), in every thread that maps through this client, until
        :meth:`resume`."""
        self._cancelled.set()
        with self._slots:
            self._slots.notify_all()   # requests waiting for a free slot end too
        with self._count_lock:
            connections = list(self._connections)
        for conn in connections:
            sock = getattr(conn, "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)   # a recv blocked in another thread returns at once
                except OSError:
                    pass

    def resume(self) -> None:
        self._cancelled.clear()

    # ------------------------------------------------------------------ plain calls

    def _open(self, path: str, body: dict[str, Any] | None, timeout: float, url: str | None = None) -> Any:
        data = body_bytes(body) if body is not None else None
        request = urllib.request.Request((url or self.url) + path, data=data, method="POST" if data else "GET",
                                         headers={"Content-Type": "application/json"})
        with self._opener.open(request, timeout=timeout) as response:
            raw = response.read()
        self._ever_answered = True
        return json.loads(raw)

    def get_json(self, path: str, timeout: float = 10.0, url: str | None = None) -> Any:
        """GET ``path`` once (of the first server, or ``url``); EngineError in one sentence when nothing (usable)
        answers."""
        url = url or self.url
        try:
            return self._open(path, None, timeout, url)
        except urllib.error.HTTPError as exc:
            raise EngineError(f"The server at {url} answered {path} with HTTP {exc.code}; is it an "
                              f"OpenAI-compatible server ({self.serve_hint})?") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise EngineError(f"No server answers at {url} ({reason}); start one ({self.serve_hint} MODEL) or "
                              "leave out --engine-url to let prb start it.") from None
        except ValueError:
            raise EngineError(f"The server at {url} did not answer {path} with JSON; is it an "
                              f"OpenAI-compatible server ({self.serve_hint})?") from None

    def served_models(self, url: str | None = None) -> list[dict[str, Any]]:
        url = url or self.url
        path = self.dialect.models_path
        found = self.get_json(path, url=url)
        data = found.get("data") if isinstance(found, dict) else None
        if not isinstance(data, list):
            raise EngineError(f"The server at {url} did not list its models at {path}; is it an "
                              f"OpenAI-compatible server ({self.serve_hint})?")
        return [m for m in data if isinstance(m, dict)]

    def resolve_model(self, names: Sequence[str]) -> str:
        """The served model id matching one of ``names`` (a spec name, its folder, ...); EngineError naming
        what the server serves otherwise. With several servers, every one must serve it under the same id,
        from the same weights (``root``) and on the same server version (all three name the request cache):
        EngineError naming the first server that does not."""
        found = [(url, self._resolve_on(url, names)) for url in self.urls]
        self.cards = dict(found)
        first_url, first = found[0]
        versions = {url: self.version(url) for url in self.urls} if len(self.urls) > 1 else {}
        for url, model in found[1:]:
            if (model.get("id"), model.get("root")) != (first.get("id"), first.get("root")) \
                    or versions[url] != versions[first_url]:
                raise EngineError(f"The server at {url} serves {_described(model, versions[url], self.label)} but the "
                                  f"one at {first_url} serves {_described(first, versions[first_url], self.label)}; "
                                  f"every --engine-url must serve the same model on the same {self.label} version.")
        return str(first.get("id"))

    @property
    def max_model_len(self) -> int | None:
        """The context (prompt and generated tokens) of the served model, as :meth:`resolve_model` read it from
        the model list (the smallest of several servers'); None when the server does not say."""
        found = [int(c["max_model_len"]) for c in self.cards.values()
                 if str(c.get("max_model_len", "")).isdigit()]
        return min(found) if found else None

    def settings(self, url: str) -> dict[str, Any]:
        """What :meth:`check_alike` compares of one server: its max model length and the settings it reports
        (the dialect's ``server_info_path``, as :meth:`~prb_utils.models.serve.dialect.Dialect.read_server_info`
        reads it: its dtype among them)."""
        card = self.cards.get(url) or {}
        found: dict[str, Any] = {"max model length": card.get("max_model_len")}
        path = self.dialect.server_info_path
        if path:
            try:
                found.update(self.dialect.read_server_info(self._open(path, None, 10.0, url)))
            except (urllib.error.URLError, OSError, ValueError, AttributeError, http.client.HTTPException):
                pass
        return found

    def check_alike(self, probe: Request, numbers: Callable[[Any], list[float]]) -> None:
        """With several servers (after :meth:`resolve_model`): EngineError in one sentence naming the first server
        that differs from the first one in its settings (:meth:`settings`), or whose answer to the ``probe``
        request (``numbers`` of the response) differs by more than :data:`PROBE_TOLERANCE` (another dtype or
        other engine arguments: what a server started without dev mode does not say)."""
        if len(self.urls) < 2:
            return
        first = self.urls[0]
        base = self.settings(first)
        for url in self.urls[1:]:
            for name, value in self.settings(url).items():
                if name in base and value != base[name]:
                    raise EngineError(f"The server at {url} serves the model with {name} {value} but the one at "
                                      f"{first} with {base[name]}; {SAME_SETTINGS}.")
        answers = [self._probe_numbers(url, probe, numbers) for url in self.urls]
        for url, answer in zip(self.urls[1:], answers[1:], strict=True):
            if len(answer) != len(answers[0]):
                raise EngineError(f"The servers at {first} and {url} read the same prompt differently ({len(answers[0])} "
                                  f"and {len(answer)} numbers back); {SAME_SETTINGS}.")
            gap = sum(abs(a - b) for a, b in zip(answers[0], answer, strict=True)) / max(1, len(answer))
            if not gap <= PROBE_TOLERANCE:
                raise EngineError(f"The servers at {first} and {url} answer the same request with other numbers (a "
                                  f"mean difference of {gap:.3g}, more than {PROBE_TOLERANCE}), so they run the model "
                                  f"with another dtype or other engine arguments; {SAME_SETTINGS}.")

    def _probe_numbers(self, url: str, probe: Request, numbers: Callable[[Any], list[float]]) -> list[float]:
        """The numbers of one server's answer to the ``probe`` request, asked with the client's retries (a 5xx, a
        timeout, a dropped connection: :meth:`_send`); EngineError in one sentence when it still cannot be read, so
        servers that were not compared are never mixed."""
        try:
            return numbers(self._send(url, probe))
        except (EngineError, RequestError, UnusableResponse, KeyError, TypeError, IndexError, ValueError,
                AttributeError) as exc:
            if isinstance(exc, Cancelled):
                raise
            why = str(exc).rstrip(".") if isinstance(exc, (EngineError, RequestError)) else "an answer without numbers"
            raise EngineError(f"The servers at {', '.join(self.urls)} could not be compared: the request that checks "
                              f"they run the model alike failed at {url} ({why}), so prb does not share the job "
                              "between them; give one --engine-url, or run the same command again once every server "
                              "answers.") from None

    def _resolve_on(self, url: str, names: Sequence[str]) -> dict[str, Any]:
        models = self.served_models(url)
        wanted = [str(n) for n in names if n]
        for name in wanted:
            for model in models:
                if name in (str(model.get("id")), str(model.get("root"))):
                    return model
        served = ", ".join(str(m.get("id")) for m in models) or "nothing"
        raise EngineError(f"The server at {url} does not serve the model '{wanted[0]}' (it serves {served}); "
                          f"start it with --served-model-name {wanted[0]} or name a model it serves.")

    def data_parallel_engines(self, url: str | None = None) -> int | None:
        """How many engines (data-parallel replicas) answer behind ``url`` (the first server by default): the
        dialect's reading of its metrics (vLLM: the distinct ``engine`` labels of ``/metrics``); None when it does not
        say."""
        if not self.dialect.metrics_path:
            return None
        request = urllib.request.Request((url or self.url) + self.dialect.metrics_path, method="GET")
        try:
            with self._opener.open(request, timeout=10.0) as response:
                text = response.read().decode("utf-8", errors="replace")
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
            return None
        return self.dialect.read_metrics(text)

    def version(self, url: str | None = None) -> str | None:
        """The server's version, where its dialect says it is and as it reads it; None when it does not say."""
        if not self.dialect.version_path:
            return None
        try:
            return self.dialect.read_version(self._open(self.dialect.version_path, None, 10.0, url))
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
            return None

    # ------------------------------------------------------------------ completions

    def post(self, request: Request) -> Any:
        """POST ``request`` with retries and backoff to the server with the fewest requests in flight (waiting for
        a free slot); RequestError for a refused request, EngineError naming the server when it stopped answering."""
        return self._post(request)[0]

    def _acquire(self) -> str:
        """A server with a free slot (the fewest in flight; ties: the one handed the fewest so far), taken."""
        with self._slots:
            while True:
                if self._cancelled.is_set():
                    raise Cancelled("The run was stopped before this request was sent.")
                url = min(self.urls, key=lambda u: (self.in_flight[u], self.sent_per_url[u]))
                if self.in_flight[url] < self.concurrency:
                    self.in_flight[url] += 1
                    self.sent_per_url[url] += 1
                    return url
                self._slots.wait(1.0)

    def _release(self, url: str) -> None:
        with self._slots:
            self.in_flight[url] -= 1
            self._slots.notify()

    def _post(self, request: Request) -> tuple[Any, str]:
        """:meth:`post`, and the server that answered."""
        url = self._acquire()
        try:
            return self._send(url, request), url
        finally:
            self._release(url)

    def _send(self, url: str, request: Request) -> Any:
        last: BaseException | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                with self._count_lock:
                    self.retried += 1
                self._cancelled.wait(self.backoff_s * 2 ** (attempt - 1) * (1 + 0.25 * random.random()))
            if self._cancelled.is_set():
                raise Cancelled("The run was stopped before this request was answered.")
            with self._count_lock:
                self.requests_sent += 1
            try:
                return self._open(request.path, request.body, self.timeout_s, url)
            except urllib.error.HTTPError as exc:
                detail = _error_detail(exc)
                if exc.code in RETRY_STATUS:
                    last = exc
                    continue
                if exc.code == 404 and "model" in detail.lower():
                    raise EngineError(f"The server at {url} does not serve the model asked for ({detail}).") \
                        from None
                raise RequestError(f"the server refused the request (HTTP {exc.code}: {detail})") from None
            except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
                if self._cancelled.is_set():   # its connection was shut down by cancel()
                    raise Cancelled("The run was stopped before this request was answered.") from None
                last = exc   # refused, reset, timed out
        why = self.describe() if self.describe else ""
        reason = getattr(last, "reason", None) or last
        raise EngineError(f"The server at {url} stopped answering after {self.retries + 1} attempts "
                          f"({reason}){'; ' + why if why else ''}.")

    def map(self, requests: Sequence[Request], reduce: Callable[[Any, int], Any], *,
            cache: RequestCache | None = None) -> list[Any]:
        """``reduce(response, i)`` for every request ``requests[i]`` (each posted to its own path), at most
        ``concurrency`` in flight per server, in order; identical requests are sent once (the first one's ``i`` is
        reduced), results found in ``cache`` are not sent again and new ones are added to it as each request
        finishes. A reducer raising :class:`UnusableResponse` caches nothing and fails the map (:class:`EngineError`
        once :data:`UNUSABLE_LIMIT` responses in a row were unusable)."""
        keys = [request_key(request.body) for request in requests]
        values: dict[str, Any] = {}
        first: dict[str, int] = {}   # each distinct body once, at its first index
        for i, key in enumerate(keys):
            if key in values or key in first:
                continue
            if cache is not None and key in cache:
                values[key] = cache.get(key)
                self.requests_cached += 1
            else:
                first[key] = i
        todo = [(i, key) for key, i in first.items()]
        stop = threading.Event()

        def one(i: int, key: str) -> None:
            if stop.is_set():
                return
            if self._cancelled.is_set():
                raise EngineError("The run was stopped before this request was sent.")
            response, url = self._post(requests[i])
            try:
                value = reduce(response, i)
            except UnusableResponse as exc:
                self._unusable(exc, url)
                raise
            with self._count_lock:
                self._unusable_streak = 0
            values[key] = value
            if cache is not None:
                cache.put(key, value)

        if todo:
            self._run(todo, one, stop)
        return [values[key] for key in keys]

    def _unusable(self, exc: UnusableResponse, url: str) -> None:
        with self._count_lock:
            self._unusable_streak += 1
            streak = self._unusable_streak
        if streak >= UNUSABLE_LIMIT:
            raise EngineError(f"The server at {url} gave {streak} unusable responses in a row ({exc}); "
                              f"is it a {self.label} server serving this model ({self.serve_hint})?") from None

    def _run(self, todo: list[tuple[int, str]], one: Callable[[int, str], None], stop: threading.Event) -> None:
        """``one(i, key)`` for every item in a bounded thread pool; the first error stops the rest."""
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency * len(self.urls), len(todo)))
        try:
            futures = [pool.submit(one, i, key) for i, key in todo]
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in done if f.exception() is not None]
            if failed:
                stop.set()
                for f in pending:
                    f.cancel()
                errors = [f.exception() for f in failed]
                raise next((e for e in errors if isinstance(e, EngineError)), errors[0])
        except BaseException as exc:
            stop.set()
            if not isinstance(exc, Exception):   # Ctrl-C in the thread that maps: end the requests in flight
                self.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)


def _described(model: dict[str, Any], version: str | None, label: str) -> str:
    root = model.get("root")
    where = f" from {root}" if root and root != model.get("id") else ""
    return f"'{model.get('id')}'{where} ({label} {version or 'version unknown'})"


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        found = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return exc.reason or ""
    if isinstance(found, dict):
        error = found.get("error", found)
        if isinstance(error, dict):
            return str(error.get("message") or error)[:300]
        return str(found.get("message") or error)[:300]
    return str(found)[:300]
