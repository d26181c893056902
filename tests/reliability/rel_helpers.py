"""Shared helpers of the reliability tests: tiny PRB files built in code, and running the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from prb_utils.cli import main

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def record(i: int, **overrides) -> dict:
    """A valid PRB record; ``...`` as an override removes the field."""
    rec = {
        "id": f"r{i}",
        "question": f"Which budget pan should I buy for recipe {i}?",
        "profile": [
            {"id": f"r{i}-p1", "category": "cooking", "text": f"Cheap pans that last for dish {i}?"},
            {"id": f"r{i}-p2", "category": "travel", "text": "Hostels in Lisbon?"},
        ],
        "rubric_aspects": [{"aspect": "Budget", "evidence": "I am broke", "reason": "Student"}],
        "narrative": "I want cheap advice.",
        "category": "cooking",
        "chosen": f"A thin cast iron pan for recipe {i}, it is cheap and lasts.",
        "rejected": f"A premium copper pan for recipe {i}." + " Really." * (i % 3),
    }
    rec.update(overrides)
    return {k: v for k, v in rec.items() if v is not ...}


def write_lines(path: Path, lines: list) -> Path:
    """Write a .jsonl file: dicts are dumped, str lines kept as text, bytes lines written as they are."""
    chunks = []
    for line in lines:
        if isinstance(line, dict):
            chunks.append(json.dumps(line).encode())
        elif isinstance(line, str):
            chunks.append(line.encode())
        else:
            chunks.append(line)
    path.write_bytes(b"\n".join(chunks) + b"\n")
    return path


def env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: offline, quiet, the repository importable."""
    base = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return {**base, **extra}


def prb(*args: str, timeout: float = 120, **extra_env: str) -> subprocess.CompletedProcess:
    """``python -m prb_utils ARGS`` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "prb_utils", *args], capture_output=True, text=True,
                          timeout=timeout, env=env(**extra_env), cwd=REPO)


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """``prb_utils.cli.main(args)`` in-process: (exit code, stdout, stderr)."""
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_user_error(code: int, err: str, *, lines: int | None = None) -> list[str]:
    """Exit 2, no traceback, plain non-empty lines on stderr (exactly ``lines`` of them when given)."""
    assert code == 2, err
    assert "Traceback" not in err, err
    found = [line for line in err.strip().splitlines() if line.strip()]
    assert found, "no message on stderr"
    if lines is not None:
        assert len(found) == lines, found
    return found


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per-item rows in a canonical order with the columns that must match between runs."""
    keys = ["model", "profile", "subset", "id"]
    cols = [*keys, "kind", "category", "score_chosen", "score_rejected", "outcome", "invalid_reason", "pair_hash"]
    return frame[cols].sort_values(keys).reset_index(drop=True)


# ------------------------------------------------------------------------------ CLI processes to kill

PRELOAD = ["fake_cli", "prb_utils.cli", "prb_utils.data", "prb_utils.profile", "prb_utils.scoring",
           "prb_utils.store", "prb_utils.analysis.metrics", "prb_utils.models", "rank_bm25", "tqdm.auto",
           "pyarrow.parquet"]


class CliProcess:
    """``prb_utils.cli.main(argv)`` (with the fakes of ``fake_cli.py``) in a child process of a forkserver
    that has imported the library once, so a child starts in milliseconds and can be killed at any point."""

    def __init__(self, argv: list[str], folder: Path, name: str, **extra_env: str) -> None:
        import multiprocessing

        import fake_cli

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        folder.mkdir(parents=True, exist_ok=True)
        self.stdout_path, self.stderr_path = folder / f"{name}.out", folder / f"{name}.err"
        self.log = folder / f"{name}.log"
        env_vars = {"HF_HUB_OFFLINE": "1", "PRB_FAKE_LOG": str(self.log), **extra_env}
        self.process = ctx.Process(target=fake_cli.child_main,
                                   args=(argv, env_vars, str(self.stdout_path), str(self.stderr_path)))
        self.process.start()

    def scored(self) -> list[str]:
        """``pair_hash`` of each pair the fake model scored in this process, in order."""
        return self.log.read_text().split() if self.log.exists() else []

    def kill(self) -> bool:
        """SIGKILL the process; False when it had already ended."""
        import signal

        try:
            os.kill(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        return True

    def wait(self, timeout: float = 120) -> int:
        self.process.join(timeout)
        assert self.process.exitcode is not None, "the CLI process did not finish"
        return self.process.exitcode

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text() if self.stdout_path.exists() else ""

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""
