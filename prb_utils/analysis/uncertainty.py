"""The store's one resampling plan: which unit every interval and paired test resamples, the seed, the resample
count rule and the interval method, chosen once and used by every page, the index, ``prb summarize``,
``prb score``'s table, ``prb probe`` and the exports, so that one (model, condition, statistic) has one interval
wherever it is shown.

The plan is a record (:class:`ResamplingPlan`). A store keeps its plan in ``resampling.json`` (written by
``prb score --units``/``prb report --units``); a store without one reads the default plan: whole questions as
units, seed 0, :func:`prb_utils.analysis.resampling.default_n_boot` resamples (10,000 below 50 units, else
2,000), percentile bootstrap intervals at 95%. Pairs as units (``--units pair``) give Wilson intervals and the
exact McNemar test, and then everywhere.

The unit keys are the hashes the store records for each pair at scoring time (the question's text, the user's
``user_id`` or profile: :func:`prb_utils.analysis.metrics.unit_labels` computes the same keys from the benchmark
records), so a page that reads the benchmark and a command that reads the store draw the same resamples.

>>> plan = ResamplingPlan()
>>> plan.unit, plan.method, plan.resamples(39), plan.resamples(120)
('question', 'bootstrap', 10000, 2000)
>>> ResamplingPlan(unit="pair").method
'wilson'
>>> ResamplingPlan.from_dict(plan.to_dict()) == plan
True
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from prb_utils.analysis.metrics import accuracy_table, compare, profile_lift, two_way_labels, unit_labels
from prb_utils.analysis.resampling import LEVEL, SEED, TWO_WAY_UNIT, check_uncertainty, default_n_boot
from prb_utils.errors import PRBError

#: The units a plan can resample: whole questions (default), whole users, questions and users crossed (two-way:
#: where users recur across questions), or single pairs (Wilson, McNemar).
PLAN_UNITS = ("question", "user", TWO_WAY_UNIT, "pair")
PLAN_FILE = "resampling.json"
#: Why the default unit is the question: the sentence every rule line cites.
UNIT_REASONS = {
    "question": "a question is asked for several users and twin pairs share it, so its pairs are alike",
    "user": "one user's pairs share the profile the RM reads",
    TWO_WAY_UNIT: "a question's pairs are alike and so are a user's, and users recur across questions (clustering by "
                  "question alone is then liberal: bench/verdict_size.py)",
    "pair": "pairs taken as independent, as asked (--units pair)",
}


@dataclass(frozen=True)
class ResamplingPlan:
    """One store's resampling plan: ``unit`` (:data:`PLAN_UNITS`), ``seed``, ``n_boot`` (None: the automatic rule,
    :func:`prb_utils.analysis.resampling.default_n_boot`) and the interval ``level``."""

    unit: str = "question"
    seed: int = SEED
    n_boot: int | None = None
    level: float = LEVEL

    def __post_init__(self) -> None:
        if self.unit not in PLAN_UNITS:
            raise PRBError(f"Unknown resampling unit {self.unit!r}; use {', '.join(PLAN_UNITS)}.")
        check_uncertainty(self.level, self.n_boot)

    # ------------------------------------------------------------------------------------------ what it is
    @property
    def method(self) -> str:
        """The interval method of one accuracy: ``wilson`` with pairs as units, else ``bootstrap``."""
        return "wilson" if self.unit == "pair" else "bootstrap"

    @property
    def units(self) -> str | None:
        """The column :meth:`attach` adds (None with pairs as units: each pair is its own unit)."""
        return None if self.unit == "pair" else self.unit

    def resamples(self, n_units: int) -> int:
        """The number of resamples for ``n_units`` resampled units under this plan."""
        return default_n_boot(n_units, self.n_boot)

    def rule(self) -> str:
        """The plan in one sentence, for the rule line under every table that shows its intervals.

        >>> ResamplingPlan().rule().split(";")[0]
        'Intervals (95%): percentile bootstrap over whole questions (seed 0, 10,000 resamples below 50 questions, else 2,000)'
        """
        head = f"Intervals ({self.level:.0%})"
        if self.unit == "pair":
            return (f"{head}: Wilson over pairs; paired tests: exact McNemar; the unit is the pair: "
                    f"{UNIT_REASONS['pair']}")
        if self.unit == TWO_WAY_UNIT:
            count = f"{self.n_boot:,} resamples" if self.n_boot else "10,000 resamples below 50, else 2,000"
            return (f"{head}: pigeonhole bootstrap over questions and users crossed (Owen 2007; seed {self.seed}, "
                    f"{count} of the fewer); paired tests: the two-way cluster-robust z test over questions and "
                    f"users (Cameron, Gelbach and Miller 2011); the unit is the question and the user: "
                    f"{UNIT_REASONS[TWO_WAY_UNIT]}")
        count = (f"{self.n_boot:,} resamples" if self.n_boot else
                 f"10,000 resamples below 50 {self.unit}s, else 2,000")
        return (f"{head}: percentile bootstrap over whole {self.unit}s (seed {self.seed}, {count}); paired tests: sign "
                f"flips over whole {self.unit}s (the clustered McNemar test); the unit is the {self.unit}: "
                f"{UNIT_REASONS[self.unit]}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> ResamplingPlan:
        known = {k: values[k] for k in ("unit", "seed", "n_boot", "level") if k in values}
        return cls(**known)

    def with_overrides(self, *, unit: str | None = None, n_boot: int | None = None) -> ResamplingPlan:
        """This plan with the ``unit`` or ``n_boot`` a user gave explicitly (None or 0 keeps the plan's)."""
        return replace(self, **{k: v for k, v in (("unit", unit), ("n_boot", n_boot)) if v})

    # ----------------------------------------------------------------------------------------- the store
    @classmethod
    def of_store(cls, folder: str | os.PathLike) -> ResamplingPlan:
        """The plan kept in the store ``folder`` (``resampling.json``), or the default plan."""
        path = Path(folder) / PLAN_FILE
        if not path.is_file():
            return cls()
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except (ValueError, TypeError) as exc:
            raise PRBError(f"The resampling plan {path} cannot be read ({exc}); delete it to use the default plan "
                           "(whole questions as units).") from None

    def save(self, folder: str | os.PathLike) -> Path:
        """Keep this plan in the store ``folder`` (every later page and command reads it)."""
        path = Path(folder) / PLAN_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    # ------------------------------------------------------------------------------------ the statistics
    def attach(self, results: pd.DataFrame, data: pd.DataFrame | None = None, *, keys: bool = False) -> pd.DataFrame:
        """``results`` with the unit column of this plan (:attr:`units`), from ``data``: the benchmark records, or
        with ``keys=True`` the keys the store recorded (:func:`prb_utils.store.pair_units`); both give the same
        labels (:func:`prb_utils.analysis.metrics.unit_labels`). A pair the data lacks is its own unit."""
        if self.units is None:
            return results
        if self.unit == TWO_WAY_UNIT:
            question, user = two_way_labels(results, data, keys=keys)
            return results.assign(question=question.to_numpy(), user=user.to_numpy(),
                                  **{TWO_WAY_UNIT: (question + "+" + user).to_numpy()})
        return results.assign(**{self.units: unit_labels(results, data, self.unit, keys=keys).to_numpy()})

    @property
    def interval_method(self) -> str:
        """The interval method in words, for exports and captions.

        >>> ResamplingPlan().interval_method, ResamplingPlan(unit="pair").interval_method
        ('percentile bootstrap over whole questions', 'wilson')
        """
        if self.unit == TWO_WAY_UNIT:
            return "pigeonhole bootstrap over questions and users"
        return "wilson" if self.unit == "pair" else f"percentile bootstrap over whole {self.unit}s"

    def accuracy(self, results: pd.DataFrame, by: str | Sequence[str] = ("model", "profile"), *,
                 half_credit: bool = False) -> pd.DataFrame:
        """:func:`prb_utils.analysis.metrics.accuracy_table` under this plan (``results`` carry the unit column:
        :meth:`attach`)."""
        return accuracy_table(results, by, half_credit=half_credit, ci=self.method, units=self.units,
                              n_boot=self.n_boot, seed=self.seed, level=self.level)

    def compare(self, results: pd.DataFrame, column: str, **options: Any) -> pd.DataFrame:
        """:func:`prb_utils.analysis.metrics.compare` under this plan (its Holm family: every row returned)."""
        return compare(results, column, units=self.units, n_boot=self.n_boot, seed=self.seed, level=self.level,
                       **options)

    def lift(self, results: pd.DataFrame, **options: Any) -> pd.DataFrame:
        """:func:`prb_utils.analysis.metrics.profile_lift` under this plan."""
        return profile_lift(results, units=self.units, n_boot=self.n_boot, seed=self.seed, level=self.level,
                            **options)

    def options(self) -> dict[str, Any]:
        """The keyword arguments every resampling function of prb takes (``units``, ``n_boot``, ``seed``,
        ``level``)."""
        return {"units": self.units, "n_boot": self.n_boot, "seed": self.seed, "level": self.level}
