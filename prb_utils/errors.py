"""Errors a user can fix: the CLI prints their one-sentence message and exits with status 2."""

from __future__ import annotations


class PRBError(Exception):
    """A mistake the user can fix (bad data, unknown model spec, missing file, bad option)."""


class DataError(PRBError):
    """Benchmark data with invalid records; ``problems`` holds one line per problem."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])
