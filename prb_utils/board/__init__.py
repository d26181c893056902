"""The Personalized RewardBench board: many submissions (``prb export --format every_eval_ever``) in one static
site that opens from disk with no network, recomputes every number from the per-item rows, drills down to pairs,
compares any two runs, and keeps its view in the link.

:func:`build_board` checks every submission (:mod:`prb_utils.submission`), refuses a set that mixes data sets or
misses pairs, recomputes the numbers (:mod:`prb_utils.board.recompute`) and writes the site
(:mod:`prb_utils.board.site`); given a report folder, it links the board and the report into each other
(:mod:`prb_utils.board.report_links`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from prb_utils.analysis.probe_effects import split_probe
from prb_utils.analysis.uncertainty import ResamplingPlan
from prb_utils.board.recompute import board_numbers
from prb_utils.board.report_links import index_paragraph, link_index, report_jobs, report_links
from prb_utils.board.site import write_site
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.schema import pair_key
from prb_utils.submission import Submission, check_data, find_submissions, read_submission

__all__ = ["BoardBuild", "build_board", "check_submissions"]


@dataclass(frozen=True)
class BoardBuild:
    """What :func:`build_board` wrote: the page, the numbers behind it, and the notes it printed."""

    page: Path
    numbers: dict = field(repr=False)
    notes: list[str] = field(default_factory=list)


def check_submissions(paths: Sequence[str | os.PathLike], *, data_source: str | None = None,
                      duplicates: list[str] | None = None,
                      loaded: dict[tuple[str, str], pd.DataFrame] | None = None) -> list[Submission]:
    """Read and check every submission of ``paths`` (files or export folders) as one board: each on its own
    (:func:`prb_utils.submission.read_submission`; against ``data_source``, the benchmark loaded with each job's
    filters, when given), then together: one data set (the same data digest) and the
    same pairs. PRBError, one sentence naming the file and the field, for the first problem. A file named twice is
    read once (a sentence in ``duplicates``); the same job in two sources is two runs of the board, one per source.
    ``loaded``: where the benchmarks loaded for the check are kept (by the job's limit and subsets), for reuse."""
    submissions, seen, notes = [], {}, []
    loaded = {} if loaded is None else loaded
    for number, given in enumerate(paths, 1):
        source = source_name(given, number, paths)
        for path in find_submissions([given]):
            if path.resolve() in seen:
                notes.append(f"{path} is named twice (also in {seen[path.resolve()]}); it is read once.")
                continue
            seen[path.resolve()] = source
            found = replace(read_submission(path), source=source)
            if data_source is not None:
                check_data(found.rows, _benchmark(data_source, found, loaded), os.fspath(path), found.data)
            submissions.append(found)
    if not submissions:
        raise PRBError("Name at least one submission (a file or folder that `prb export --format every_eval_ever` "
                       "wrote).")
    first = submissions[0]
    for other in submissions[1:]:
        if other.data != first.data:
            raise PRBError(f"{other.path}: source_metadata.additional_details.data_fingerprint {other.data} differs "
                           f"from {first.path.name}'s {first.data}: one board holds results on one data set.")
    held = {s.path: {pair_key(a, b) for a, b in zip(s.rows["subset"], s.rows["id"], strict=True)}
            for s in submissions}
    everyone = set().union(*held.values())
    for s in submissions:
        if missing := sorted(everyone - held[s.path]):
            raise PRBError(f"{s.path}: its per-item rows lack {len(missing)} pair(s) the other submissions of the "
                           f"same data scored (e.g. sample_id {missing[0]}).")
    if duplicates is not None:
        duplicates += notes
    return submissions


def _benchmark(source: str, submission: Submission, loaded: dict[tuple[str, str], pd.DataFrame]) -> pd.DataFrame:
    """The benchmark ``source`` loaded with the filters the submission's job scored (``data_limit``,
    ``data_subsets``), once per filter."""
    limit, subsets = submission.provenance.get("data_limit", ""), submission.provenance.get("data_subsets", "")
    if (limit, subsets) not in loaded:
        loaded[(limit, subsets)] = load_benchmark(source, limit=int(limit) if limit.isdigit() else None,
                                                  subsets=subsets.split(",") if subsets else None, drop_invalid=True)
    return loaded[(limit, subsets)]


def source_name(given: str | os.PathLike, number: int, paths: Sequence[str | os.PathLike]) -> str:
    """How the board names the source ``given`` (the ``number``-th of ``paths``): its folder or file name, or
    ``submission N`` where two sources share a name.

    >>> source_name("exports/team-a", 1, ["exports/team-a", "b"]), source_name("x/run", 2, ["y/run", "x/run"])
    ('team-a', 'submission 2')
    """
    names = [Path(p).stem if Path(p).suffix == ".json" else Path(p).name for p in paths]
    name = names[number - 1]
    return name if names.count(name) == 1 and name else f"submission {number}"


def board_plan(submissions: Sequence[Submission], notes: list[str]) -> ResamplingPlan:
    """The resampling plan the submissions' intervals were computed under (their provenance's
    ``resampling_plan``) when they all name one, else the default plan (and a note)."""
    named = {s.provenance.get("resampling_plan", "") for s in submissions}
    if len(named) == 1 and (text := named.pop()):
        try:
            return ResamplingPlan.from_dict(json.loads(text))
        except (ValueError, TypeError):
            raise PRBError(f"{submissions[0].path}: source_metadata.additional_details.resampling_plan cannot be "
                           "read.") from None
    plan = ResamplingPlan()
    notes.append(f"The submissions name different resampling plans (or none); the board uses the default: {plan.rule()}.")
    return plan


def build_board(paths: Sequence[str | os.PathLike], out: str | os.PathLike, *, data_source: str | None = None,
                plan: ResamplingPlan | None = None, report: str | os.PathLike | None = None) -> BoardBuild:
    """Check the submissions of ``paths`` (against ``data_source`` when given), recompute every number under
    ``plan`` (default: the plan the submissions name, :func:`board_plan`), and write ``out/index.html`` (and
    ``out/board.json``, the same numbers as data). With ``data_source``, the probe readings also read the
    benchmark's records (profiles and twins), as page 05 does: the benchmark loaded with the first probe job's
    filters (every submission of a board holds the same pairs). With ``report`` (a folder ``prb report`` wrote),
    the board and the report link into each other (:mod:`prb_utils.board.report_links`): the report's index
    gets a paragraph that links to the board."""
    notes: list[str] = []
    if report is not None:
        report_jobs(Path(report))   # a folder that is no report is refused before anything is computed
    loaded: dict[tuple[str, str], pd.DataFrame] = {}
    submissions = check_submissions(paths, data_source=data_source, duplicates=notes, loaded=loaded)
    data = None
    if data_source is not None:
        probed = [s for s in submissions if split_probe(s.condition)[1]] or submissions
        data = _benchmark(data_source, probed[0], loaded)
    numbers = board_numbers(submissions, plan=plan or board_plan(submissions, notes), data=data)
    numbers["notes"] = [*notes, *numbers["notes"]]
    if report is not None:
        numbers["report"] = report_links(numbers["models"], Path(report), Path(out))
    page = write_site(numbers, out)
    if report is not None:
        link_index(Path(report), index_paragraph(numbers["models"], numbers["report"]["cards"], page, Path(report)))
    return BoardBuild(page=page, numbers=numbers, notes=list(numbers["notes"]))
