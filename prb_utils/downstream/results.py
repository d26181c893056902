"""The one reader of finished downstream runs: a Best-of-N folder (``prb bon``) and an RL table (``prb ppo`` or
the reference scripts'), with what their records say about how they were made (the pages word it:
:mod:`prb_utils.notebook.downstream_page`).

>>> load_bon("no/such/folder") is None
True
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from prb_utils.downstream import reference_files
from prb_utils.downstream.rubric_judge import JUDGE_PROTOCOLS, judge_label


def _run_record(path: Path) -> dict[str, Any]:
    """A run's ``run.json`` ({} when there is none)."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


@dataclass(frozen=True)
class BonResults:
    """A finished ``prb bon`` run: its tidy frame (``bon_frame.parquet``) and its record (``run.json``)."""

    folder: Path
    frame: pd.DataFrame
    run: dict[str, Any] = field(default_factory=dict)

    @property
    def n_samples(self) -> int:
        """Answers sampled per question (the fewest any question has)."""
        return int(self.frame.groupby(["model", "subset", "id"]).size().min())

    @property
    def judge(self) -> str:
        return str(self.frame["judge"].dropna().iloc[0])

    @property
    def proxy(self) -> bool:
        return bool(self.frame["judge_proxy"].fillna(False).any())

    @property
    def label(self) -> str:
        """The judge as figures name it (a proxy or a weak judge says so)."""
        return judge_label(self.judge, self.proxy)

    @property
    def quality_rule(self) -> str:
        return str(self.frame["quality_rule"].iloc[0]) if "quality_rule" in self.frame.columns else "argmax"

    @property
    def questions(self) -> int:
        return int(self.frame.groupby(["subset", "id"]).ngroups)

    def ks(self, wanted: list[int]) -> list[int]:
        """The ``wanted`` k values the run can show (at most its N)."""
        return [k for k in wanted if k <= self.n_samples]

    @property
    def protocol(self) -> str:
        """The judge's protocol, as :data:`~prb_utils.downstream.rubric_judge.JUDGE_PROTOCOLS` words it."""
        return JUDGE_PROTOCOLS.get(self.judge.partition(":")[0], "a judge object")

    @property
    def sampling(self) -> str | None:
        """How the answers were sampled (``batched`` or ``exact``; a run recorded before the modes existed sampled
        each question on its own); None without a record."""
        return self.run.get("sampling", "exact") if self.run else None


def load_bon(folder: str | Path) -> BonResults | None:
    """The ``prb bon`` run in ``folder``, or None when it holds none."""
    folder = Path(folder)
    frame_file = folder / "bon_frame.parquet"
    if not frame_file.is_file():
        return None
    return BonResults(folder, pd.read_parquet(frame_file), _run_record(folder / "run.json"))


@dataclass(frozen=True)
class RLResults:
    """RL outcomes per RM and subset (``rm, subset, score, n[, trainer]``), with the record of a ``prb ppo`` run."""

    path: Path
    table: pd.DataFrame
    run: dict[str, Any] = field(default_factory=dict)

    @property
    def trainer(self) -> str:
        """The trainer(s) named in the table (``PPO`` for a table that names none: the paper's)."""
        return " / ".join(sorted(set(self.table["trainer"]))) if "trainer" in self.table.columns else "PPO"

    @property
    def quality_rule(self) -> str | None:
        """How a ``prb ppo`` run read an answer's quality (its ``run.json``; None for a proxy judge or no record)."""
        return None if self.run.get("judge_proxy") else self.run.get("quality_rule")


def load_rl(path: str | Path | None) -> RLResults | None:
    """RL outcomes from a CSV ``rm,subset,score[,n[,trainer]]`` (``prb ppo`` writes ``<results>/ppo/ppo.csv``, with
    its ``run.json`` beside it) or the reference scripts' ``PPO/result`` folder; None for no path."""
    if path is None:
        return None
    path = Path(path)
    read = reference_files.read_ppo_results if path.is_dir() else reference_files.read_ppo_csv
    return RLResults(path, read(path), _run_record(path.parent / "run.json") if path.is_file() else {})
