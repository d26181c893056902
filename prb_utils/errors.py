"""Errors a user can fix: the CLI prints their one-sentence message and exits with status 2; a damaged cache
file is set aside (:func:`set_aside`) with one sentence instead, where computing it anew is safe."""

from __future__ import annotations

import os
import sys
from pathlib import Path


class PRBError(Exception):
    """A mistake the user can fix (bad data, unknown model spec, missing file, bad option)."""


class DataError(PRBError):
    """Benchmark data with invalid records; ``problems`` holds one line per problem."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])


def set_aside(path: str | os.PathLike, reason: str, remedy: str = "it is computed anew", *,
              name: str | None = None) -> Path:
    """Move a damaged cache file (or folder) out of the way, to ``name`` (default ``NAME.damaged``; ``-2``,
    ``-3``, ... added when taken) beside it, so that nothing is lost and the run computes it anew; one
    ``prb: warning:`` sentence on stderr names it, the reason and what follows. Returns where it went.

    >>> import tempfile
    >>> cache = Path(tempfile.mkdtemp()) / "judge.parquet"
    >>> _ = cache.write_text("x")
    >>> set_aside(cache, "a test").name, cache.exists()
    ('judge.parquet.damaged', False)
    """
    path = Path(path)
    base = name or f"{path.name}.damaged"
    target, n = path.with_name(base), 1
    while target.exists():
        n += 1
        target = path.with_name(f"{base}-{n}")
    path.rename(target)
    print(f"prb: warning: {path} is damaged ({reason}); it is set aside as {target.name} and {remedy}.",
          file=sys.stderr)
    return target
