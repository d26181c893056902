"""Runs several ``prb`` command lines in one process (one torchrun rank, or a plain process), so that one launch
of real ranks tries many cases: ``python tests/rank_driver.py CASES.json OUT_DIR``.

CASES.json is a list of ``{"name", "argv", "env"?}``; ``{rank}`` in an argument becomes this process's ``RANK``
(so ranks can be given different command lines), and ``argv`` may be ``{"0": [...], "1": [...]}`` by rank;
``env`` is set before the case runs. After each case ``OUT_DIR/rank<RANK>.json`` holds every result so far
(``name``, exit ``code``, ``err``: what the case wrote on stderr, ``seconds``), so a case that hangs still leaves
the results of the cases before it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
import traceback
from pathlib import Path

from prb_utils.cli import main


def run_case(case: dict, rank: str) -> dict:
    argv = case["argv"]
    if isinstance(argv, dict):
        argv = argv[rank]
    os.environ.update(case.get("env") or {})
    err = io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main([arg.replace("{rank}", rank) for arg in argv])
        except SystemExit as exc:   # argparse
            code = exc.code
        except BaseException:   # a real bug: its traceback is what the test shows
            traceback.print_exc()
            code = -1
    return {"name": case["name"], "code": code, "err": err.getvalue(), "seconds": time.monotonic() - start}


def drive(cases_file: str, out_dir: str) -> None:
    cases = json.loads(Path(cases_file).read_text())
    rank = os.environ.get("RANK", "0")
    results: list[dict] = []
    target = Path(out_dir) / f"rank{rank}.json"
    for case in cases:
        results.append(run_case(case, rank))
        target.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    drive(sys.argv[1], sys.argv[2])
