"""The stages of a ``prb report`` run, said as they start and timed: scoring the jobs, the Best-of-N run, the
notebooks. Each stage is named on stderr when it starts and gets a tqdm bar (with its ETA) over its own
units; its wall time is kept, and the index lists the Best-of-N stage's time and the run's total.

>>> stages = Stages(progress=False)
>>> with stages.stage("scoring 2 jobs", total=2, unit="job") as bar:
...     bar.update(2)
>>> list(stages.seconds), stages.total() >= stages.seconds["scoring 2 jobs"] >= 0
(['scoring 2 jobs'], True)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tqdm.auto import tqdm


class Stages:
    """The stages of one run: :meth:`stage` names, bars and times one; ``seconds`` holds each finished stage's
    wall time by name (in order) and :meth:`total` the run's wall time so far (from this object's creation)."""

    def __init__(self, *, progress: bool = True) -> None:
        self.progress = progress
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}
        self.kinds: dict[str, str] = {}

    @contextmanager
    def stage(self, name: str, *, total: int | None = None, unit: str = "step", kind: str = "") -> Iterator[Any]:
        """A stage: ``name`` printed as it starts, a tqdm bar over ``total`` ``unit``s (its ETA follows; none
        when ``total`` is None: the stage's own steps draw theirs), its wall time kept under ``name`` (``kind``
        tags it, e.g. ``bon``, so the index finds it)."""
        if self.progress:
            tqdm.write(f"== {name}", file=sys.stderr)
        bar = None if total is None else tqdm(total=total, desc=name, unit=unit, disable=not self.progress,
                                              file=sys.stderr, dynamic_ncols=True)
        started = time.perf_counter()
        try:
            yield bar
        finally:
            if bar is not None:
                bar.close()
            self.seconds[name] = time.perf_counter() - started
            if kind:
                self.kinds[name] = kind

    def of_kind(self, kind: str) -> float | None:
        """The wall time of the stages tagged ``kind`` together (None when none ran)."""
        found = [s for name, s in self.seconds.items() if self.kinds.get(name) == kind]
        return sum(found) if found else None

    def total(self) -> float:
        """Seconds since the run began."""
        return time.perf_counter() - self.started
