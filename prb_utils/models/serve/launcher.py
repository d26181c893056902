"""Start and stop a local server of the engine's dialect (a server engine without ``--engine-url``).

The command line, the Python that runs it and its environment come from the engine's dialect
(:meth:`~prb_utils.models.serve.dialect.Dialect.server_command`), and so do its health path and the
reading of its log; every message names the engine. It listens on
127.0.0.1 on a free port and is given the local folder of the model (an offline alias resolves to its converted
folder), served under the spec's name. :func:`get_server` keeps the server of a (model folder, launch options) for
the whole process, so every kind and profile condition of a run on that model shares it (one server at a time:
another model stops the previous one's); :func:`stop_started` stops them (the CLI calls it at the end, on errors and
on Ctrl-C), and :func:`stop_all` (``atexit``) stops every server the process started, those of :class:`Server`
objects made by hand too.

Never an orphan: the server starts in a session of its own with a parent-death signal (Linux
``PR_SET_PDEATHSIG``: it gets SIGTERM when prb dies, even from SIGKILL), and stopping it signals the whole
process group (the engine's worker processes included), SIGTERM first, SIGKILL after a grace period.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models.engines import EngineConfig, dialect_of

START_TIMEOUT_S = 900.0
STOP_GRACE_S = 20.0


def server_log(options: LaunchOptions, served_name: str) -> Path:
    """A new log file for a server prb starts: ``<store>/engine/logs/<engine>-<time>-<name>-<random>.log`` beside the
    run's request caches, kept with the run; the system's temporary folder only for a server started outside a
    run (no ``cache_dir``) or when the store cannot hold it."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", served_name).strip("_")[-40:] or "model"
    prefix = f"{options.engine.name}-{time.strftime('%Y%m%d-%H%M%S')}-{slug}-"
    cache_dir, folder = options.engine.cache_dir, None
    if cache_dir:
        folder = Path(cache_dir) / "logs"
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            folder = None
    handle, name = tempfile.mkstemp(prefix=prefix if folder else "prb-" + prefix, suffix=".log", dir=folder)
    os.close(handle)
    return Path(name)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def engine_arg_value(items: Sequence[str], key: str) -> str | None:
    """The value the last ``KEY=VALUE`` of ``items`` gives ``key`` (spelt with dashes or underscores), or None.

    >>> engine_arg_value(["data_parallel_size=2", "--max-num-seqs=8"], "data-parallel-size")
    '2'
    """
    found = None
    for item in items:
        name, sep, value = str(item).partition("=")
        if sep and name.strip().lstrip("-").replace("_", "-") == key:
            found = value.strip()
    return found


def _pdeathsig() -> None:  # pragma: no cover - runs in the child
    """In the child, before exec: get SIGTERM when the parent dies (Linux only; elsewhere a no-op)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class LaunchOptions:
    """How to start the server: everything but the model (part of the server's identity); the engine (its dialect
    builds the command line), the parallel sizes and the server arguments are those of ``engine``."""

    dtype: str = "auto"
    device: str = "auto"
    engine: EngineConfig = field(default_factory=lambda: EngineConfig("vllm"))
    max_logprobs: int = 20
    runner: str | None = None   # ``pooling`` for classifiers (vLLM picks one from the architecture otherwise)

    def key(self) -> tuple:
        engine = self.engine
        return (engine.name, self.dtype, self.device, engine.tensor_parallel_size, engine.pipeline_parallel_size,
                engine.engine_args, self.max_logprobs, self.runner)


@dataclass
class Server:
    """One server process of the engine ``options.engine`` serving ``source`` as ``served_name``; :meth:`start`
    waits for health. Its command line, Python and environment come from the engine's dialect."""

    source: str
    served_name: str
    options: LaunchOptions = field(default_factory=LaunchOptions)
    python: Path | None = None
    port: int = 0
    process: subprocess.Popen | None = None
    log_path: Path | None = None
    started_s: float | None = None

    @property
    def dialect(self) -> Any:
        return dialect_of(self.options.engine.name)

    @property
    def label(self) -> str:
        """The engine as messages name it (``vLLM``)."""
        return str(self.dialect.label)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The command line (:meth:`~prb_utils.models.serve.dialect.Dialect.server_command` of the dialect)."""
        return self.dialect.server_command(self.python, self.source, self.served_name, self.port, self.options)

    def start(self, timeout_s: float = START_TIMEOUT_S, progress: bool = True) -> Server:
        self.python = self.python or self.dialect.find_python()
        self.port = self.port or free_port()
        self.log_path = server_log(self.options, self.served_name)
        env = self.dialect.server_environment(dict(os.environ))
        if progress:
            print(f"Starting {self.label} for {self.served_name} on {self.url} (log: {self.log_path})…",
                  file=sys.stderr)
        started = time.perf_counter()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                            preexec_fn=_pdeathsig if sys.platform.startswith("linux") else None)
        _RUNNING.add(self)
        try:
            self._wait(timeout_s)
        except BaseException:
            self.stop()
            raise
        self.started_s = time.perf_counter() - started
        if progress:
            print(f"{self.label} ready after {self.started_s:.0f} s.", file=sys.stderr)
        return self

    def _wait(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            code = self.process.poll() if self.process else 1
            if code is not None:
                raise PRBError(f"The {self.label} server for {self.served_name} exited (code {code}) before it was ready: "
                               f"{self.log_tail()}")
            if _healthy(self.url + self.dialect.health_path):
                return
            time.sleep(1.0)
        raise PRBError(f"The {self.label} server for {self.served_name} was not ready after {timeout_s:.0f} s "
                       f"(log: {self.log_path}).")

    def log_tail(self, lines: int = 3) -> str:
        """The server's last error, on one line, as its dialect reads its log."""
        text = self._log()
        return "no log" if text is None else self.dialect.last_error(text, lines) + f" (log: {self.log_path})"

    def logged_config(self, name: str) -> str | None:
        """The setting ``name`` as the server logged it at start (its dialect reads it), or None."""
        text = self._log()
        return None if text is None else self.dialect.logged_config(text, name)

    def _log(self) -> str | None:
        try:
            return Path(self.log_path).read_text(encoding="utf-8", errors="replace") if self.log_path else ""
        except OSError:
            return None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``STOP_GRACE_S``; idempotent."""
        _RUNNING.discard(self)
        process, self.process = self.process, None
        if process is None:
            return
        try:
            pgid = os.getpgid(process.pid)
        except ProcessLookupError:
            pgid = None
        for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
            try:
                if pgid is not None:
                    os.killpg(pgid, sig)
                else:
                    process.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout=wait)
                if pgid is None or not _group_alive(pgid):
                    break
            except subprocess.TimeoutExpired:
                continue
        if pgid is not None and _group_alive(pgid):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _healthy(url: str) -> bool:
    """Whether ``url`` (a server's health path) answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            response.read()
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


_RUNNING: set[Server] = set()
_SERVERS: dict[tuple, Server] = {}
_LOCK = threading.RLock()


def get_server(source: str, served_name: str, options: LaunchOptions, *, progress: bool = True) -> Server:
    """The running server for this model folder and options, started on first use and kept for the process.

    One server runs at a time: starting one for another model (or other options) stops the previous one
    first, since each sizes its KV cache from the memory of the whole device.
    """
    key = (str(source), served_name, options.key())
    with _LOCK:
        server = _SERVERS.get(key)
        if server is not None and server.alive():
            return server
        stop_started()
        server = Server(str(source), served_name, options).start(progress=progress)
        _SERVERS[key] = server
        return server


def stop_started() -> None:
    """Stop every server :func:`get_server` started (a server made and started by hand keeps running)."""
    with _LOCK:
        for server in list(_SERVERS.values()):
            server.stop()
        _SERVERS.clear()


def stop_all() -> None:
    """Stop every server this process started, by :func:`get_server` or by hand."""
    for server in list(_RUNNING):
        server.stop()
    _SERVERS.clear()


atexit.register(stop_all)
