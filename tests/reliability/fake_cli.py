"""The real ``prb`` CLI (``prb_utils.cli.main``) with test-only fake reward models loadable by spec.

Run as ``python fake_cli.py score --data ... --model classifier:fake-slow ...``. Specs other than
``classifier:fake-*`` go to the real ``load_model``. Nothing in the library is changed: this process
replaces the scorer's ``prb_utils.scoring._load_model`` before calling ``main``, the way a test monkeypatches it.

Fakes (scores are a deterministic hash of prompt and response, so runs are comparable):
- ``fake-slow``: sleeps ``PRB_FAKE_DELAY`` seconds per pair (default 0.01); appends the store's
  ``pair_hash`` of every scored pair to the file ``PRB_FAKE_LOG`` when set (lets a test pick a kill point
  by progress and see which pairs were scored).
- ``fake-nan``: NaN score for ids ending in 1, +inf for ids ending in 2.
- ``fake-faulty``: raises ``ValueError`` for ids ending in 3, wherever they fall in the run.
- ``fake-breaks``: scores the first ``PRB_FAKE_GOOD_CALLS`` calls (default 2), then raises on every call.
Every fake reports ``truncated`` for ids ending in 5 (so truncation counts can be checked).
``PRB_FAKE_CHUNK_SECONDS`` (when set) makes scoring's adaptive chunks small, so a run writes many parts.
``PRB_FAKE_COMPACT_PAUSE`` (seconds, when set): before a job's compaction, touch ``<log>.compacting`` and
pause, so a test can kill the process exactly between the last part file and the job's final metadata.
``PRB_FAKE_BLOCK_AFTER`` (N, when set): once the fakes of this process have scored N pairs, touch
``<log>.blocked`` and wait (inside ``score_pairs``, before the chunk is returned) until ``<log>.release``
exists, so a test can signal or kill the process at a known point whatever the machine's speed.
"""

from __future__ import annotations

import hashlib
import math
import os
import signal
import sys
import time
from pathlib import Path

SCORED = [0]  # pairs the fakes of this process have scored (for PRB_FAKE_BLOCK_AFTER)


def text_score(prompt: str, response: str) -> float:
    return int(hashlib.sha256(f"{prompt}|{response}".encode()).hexdigest()[:8], 16) / 16**8


class FakeModel:
    kind = "classifier"

    def __init__(self, spec: str) -> None:
        from prb_utils.models import PairScore

        self.spec = spec
        self.behaviour = spec.split(":", 1)[1].removeprefix("fake-")
        self.delay = float(os.environ.get("PRB_FAKE_DELAY", "0.01"))
        self.log = os.environ.get("PRB_FAKE_LOG")
        self.good_calls = int(os.environ.get("PRB_FAKE_GOOD_CALLS", "2"))
        self.calls = 0
        self.score_type = PairScore

    def score_pairs(self, pairs):
        self.calls += 1
        if self.behaviour == "breaks" and self.calls > self.good_calls:
            raise RuntimeError("device lost")
        out = []
        for pair in pairs:
            item_id = pair.key.rsplit("/", 1)[1]
            if self.behaviour == "faulty" and item_id.endswith("3"):
                raise ValueError(f"cannot score {pair.key}")
            chosen, rejected = text_score(pair.prompt, pair.chosen), text_score(pair.prompt, pair.rejected)
            if self.behaviour == "nan" and item_id.endswith("1"):
                chosen = math.nan
            if self.behaviour == "nan" and item_id.endswith("2"):
                rejected = math.inf
            out.append(self.score_type(chosen, rejected, extra={"truncated": item_id.endswith("5")}))
        for pair in pairs:
            time.sleep(self.delay)
            if self.log:
                with open(self.log, "a", encoding="utf-8") as fh:
                    fh.write(self.hash(pair) + "\n")
            SCORED[0] += 1
            block_if_asked(self.log)
        return out

    @staticmethod
    def hash(pair) -> str:
        """The store's ``pair_hash`` of this pair (what the model saw), to match log lines with rows."""
        from prb_utils.store import pair_hash

        subset, item_id = pair.key.rsplit("/", 1)
        category = sample_categories().get(pair.key, "")  # part of the hash; the model never sees it
        return pair_hash(subset, item_id, pair.prompt, pair.chosen, pair.rejected, category=category)

    def run_metadata(self):
        return {"dtype": "float32", "device": "cpu", "name": self.spec, "max_length": 512}


def sample_categories(cache: dict = {}) -> dict[str, str]:  # noqa: B006 - a deliberate per-process cache
    """``{"subset/id": category}`` of the shipped sample (the data these tests score)."""
    if not cache:
        from prb_utils.data import load_benchmark

        frame = load_benchmark("sample")
        cache.update({f"{s}/{i}": str(c or "") for s, i, c in zip(frame["subset"], frame["id"], frame["category"],
                                                                 strict=True)})
    return cache


def block_if_asked(log: str | None) -> None:
    """With ``PRB_FAKE_BLOCK_AFTER=N``: after exactly N scored pairs, touch ``<log>.blocked`` and wait until
    ``<log>.release`` exists (a signal such as SIGINT interrupts the wait)."""
    after = os.environ.get("PRB_FAKE_BLOCK_AFTER")
    if not after or not log or SCORED[0] != int(after):
        return
    Path(log + ".blocked").touch()
    release = Path(log + ".release")
    while not release.exists():
        time.sleep(0.01)


def install() -> None:
    from prb_utils import scoring

    real = scoring._load_model

    def load_model(spec, options):
        if str(spec).strip().startswith("classifier:fake-"):
            return FakeModel(str(spec).strip())
        return real(spec, options)

    scoring._load_model = load_model  # the scorer's one loading seam, as tests/test_scoring.py patches it
    real_fingerprint = scoring._fingerprint
    scoring._fingerprint = lambda spec: (f"fake:{spec}" if str(spec).strip().startswith("classifier:fake-")
                                         else real_fingerprint(spec))
    pause = os.environ.get("PRB_FAKE_COMPACT_PAUSE")
    if pause:
        from prb_utils.store import JobStore

        compact = JobStore.compact

        def slow_compact(self):
            open(os.environ["PRB_FAKE_LOG"] + ".compacting", "a").close()
            time.sleep(float(pause))
            return compact(self)

        JobStore.compact = slow_compact
    seconds = os.environ.get("PRB_FAKE_CHUNK_SECONDS")
    if seconds:
        scoring.TARGET_CHUNK_SECONDS = float(seconds)
        scoring.FIRST_CHUNK = scoring.MIN_CHUNK = 2


if __name__ == "__main__":
    install()
    from prb_utils.cli import main

    sys.exit(main(sys.argv[1:]))


def child_main(argv: list[str], env: dict[str, str], stdout_path: str, stderr_path: str) -> None:
    """Entry point of a ``multiprocessing`` child: set the environment, send stdout/stderr to files, run
    the CLI, exit with its code (so a test can SIGKILL a real ``prb score`` process at any point)."""
    os.environ.update(env)
    # Ctrl-C raises KeyboardInterrupt here whatever the test run inherited (a shell's background job ignores SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for fd, path in ((1, stdout_path), (2, stderr_path)):
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(handle, fd)
        os.close(handle)
    install()
    from prb_utils.cli import main

    sys.exit(main(argv))
