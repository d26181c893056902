"""Validated parameters of the notebooks: one dataclass per notebook, built in the cell after the
papermill ``parameters`` cell.

Each field is checked against its type (``str``, ``int``, ``float``, ``bool``, ``list[str]``,
``list[int]``, ``X | None`` and ``Literal`` choices) and against what it means (a profile condition must
parse, a model spec must name a known kind, ...). A wrong value raises :class:`PRBError` naming the
parameter, what was given and what is expected. :meth:`NotebookParams.from_dict` also rejects unknown names.

>>> PairInspectionParams(max_pairs=3).max_pairs
3
>>> PairInspectionParams(max_pairs="3")
Traceback (most recent call last):
...
prb_utils.errors.PRBError: Parameter 'max_pairs' must be an integer, got '3' (str).
"""

from __future__ import annotations

import json
import os
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Literal

import pandas as pd

from prb_utils.analysis.uncertainty import ResamplingPlan
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.models.base import parse_spec
from prb_utils.models.kinds import MODEL_KINDS, kind_names
from prb_utils.notebook.markup import prb_command
from prb_utils.probes import ATTRIBUTION
from prb_utils.profile import RETRIEVERS, parse_condition, probe_conditions
from prb_utils.resources import resource_dir, source_root
from prb_utils.schema import DEFAULT_CONDITION, ORACLE_CONDITIONS
from prb_utils.store import atomic_write, query_results

PROJECT_ROOT = source_root()  # the repository in a source checkout; None for an installed package
EXAMPLE_DOWNSTREAM = resource_dir("data") / "rewardbench2_downstream.csv"  # published figures, cited in data/README.md

_TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin is list:
        (inner,) = typing.get_args(tp)
        return f"a list of {_describe(inner).split(' ', 1)[1]}s"
    if origin in (typing.Union, types.UnionType):
        parts = [_describe(a) for a in typing.get_args(tp) if a is not type(None)]
        return " or ".join(parts) + " or None"
    return _TYPE_WORDS.get(tp, getattr(tp, "__name__", str(tp)))


def _matches(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in typing.get_args(tp))
    if origin is list:
        (inner,) = typing.get_args(tp)
        return isinstance(value, (list, tuple)) and all(_matches(v, inner) for v in value)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, tp)


def _shown(value: Any) -> str:
    text = repr(value)
    return (text if len(text) <= 60 else text[:57] + "...") + f" ({type(value).__name__})"


def resolve_path(path: str) -> Path:
    """A path as the user meant it, made absolute: relative to the working folder when it exists there, else
    relative to the project root when it exists there (a notebook opened from ``notebooks/`` finds
    ``results/``), else relative to the working folder."""
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        return candidate
    if not candidate.exists() and PROJECT_ROOT is not None and (PROJECT_ROOT / candidate).exists():
        return PROJECT_ROOT / candidate
    return candidate.absolute()


def resolve_data_source(source: str) -> str:
    """``sample`` and hub ids stay as they are; an existing local path becomes absolute (see
    :func:`resolve_path`), so a notebook running in another folder (the report's) still finds it."""
    if source == "sample":
        return source
    resolved = resolve_path(source)
    return str(resolved) if resolved.exists() else source


#: The file in a store where ``prb report`` keeps, per notebook, the models and conditions its page showed.
REPORT_VIEW = "report_view.json"


def report_view(results: str | os.PathLike) -> dict[str, dict[str, list[str]]]:
    """Per notebook, the ``models`` and ``profiles`` its page showed in the last report on the store
    ``results`` ({} when no report has run there, or the file cannot be read).

    >>> report_view("no-such-store")
    {}
    """
    try:
        view = json.loads((Path(results) / REPORT_VIEW).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return view if isinstance(view, dict) else {}


def write_report_view(results: str | os.PathLike, view: typing.Mapping[str, typing.Mapping[str, Any]], *,
                      beside: str | os.PathLike | None = None) -> Path:
    """Record :func:`report_view` in the store ``results`` (the folder is made when missing), written atomically:
    the pages of ``view`` are replaced, the other pages keep what their last report showed. Where the store
    cannot be written (a finished store on a read-only disk) the view goes to the folder ``beside`` (the
    report's) when given, else PRBError in one sentence. Returns the file written.

    >>> import tempfile
    >>> store = Path(tempfile.mkdtemp())
    >>> write_report_view(store, {"02_accuracy_breakdown": {"models": ["length"]}}).name
    'report_view.json'
    >>> report_view(store)["02_accuracy_breakdown"]
    {'models': ['length'], 'profiles': []}
    """
    merged = {**report_view(results), **{name: {"models": list(v.get("models") or []),
                                                "profiles": list(v.get("profiles") or [])} for name, v in view.items()}}
    data = (json.dumps(merged, indent=1) + "\n").encode("utf-8")
    targets = [Path(results) / REPORT_VIEW, *([Path(beside) / REPORT_VIEW] if beside is not None else [])]
    for target in targets:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, lambda fh: fh.write(data))
            return target
        except OSError as exc:
            failed = (target, exc)
    target, exc = failed
    raise PRBError(f"Cannot write {target} ({exc.strerror or exc}); make room (or fix the folder's permissions) "
                   "and run the same command again: the scores in the store are kept.")


@dataclass(frozen=True)
class ReportJobs:
    """Jobs a page asks ``prb report`` to score beyond its models x conditions: ``models`` under ``profiles``, with
    ``retriever`` picking the posts where it is not the run's."""

    models: tuple[str, ...]
    profiles: tuple[str, ...]
    retriever: str | None = None


@dataclass(frozen=True)
class ReportNeeds:
    """What a page asks of ``prb report`` (:meth:`NotebookParams.report_needs`): the jobs it needs scored and the
    parameters it runs with beside the report's own.

    >>> ReportNeeds().jobs, ReportNeeds().parameters
    ((), {})
    """

    jobs: tuple[ReportJobs, ...] = ()
    parameters: dict[str, Any] = field(default_factory=dict)


def quick_models(models: Sequence[str]) -> tuple[str, ...]:
    """The models of a kind that scores the sample in seconds on a CPU (:attr:`~prb_utils.models.kinds.ModelKind.
    quick`), in the given order.

    >>> quick_models(["judge:smollm2", "lexical", "embedding:minilm"])
    ('lexical', 'embedding:minilm')
    """
    return tuple(m for m in models if MODEL_KINDS[parse_spec(m).kind].quick)


def model_free(models: Sequence[str]) -> tuple[str, ...]:
    """The models that load no weights (the baselines), in the given order.

    >>> model_free(["judge:smollm2", "lexical", "length"])
    ('lexical', 'length')
    """
    return tuple(m for m in models if not MODEL_KINDS[parse_spec(m).kind].weights)


@dataclass(frozen=True)
class NotebookParams:
    """Parameters every notebook shares: where the data and the store are, which models and conditions."""

    data: str = "sample"
    results: str = "results"
    models: list[str] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)
    subsets: list[str] = field(default_factory=list)
    limit: int = 0
    interactive: bool = True

    notebook: ClassVar[str] = "notebook"
    #: Whether the page's ``n_boot`` (where it has one) counts resamples of pairs' units (:meth:`plan`).
    n_boot_resamples_pairs: ClassVar[bool] = True
    #: The page's title (its browser title and index link) and the one question it answers (under the link).
    title: ClassVar[str] = ""
    question: ClassVar[str] = ""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            value = getattr(self, f.name)
            if not _matches(value, hints[f.name]):
                raise PRBError(
                    f"Parameter '{f.name}' must be {_describe(hints[f.name])}, got {_shown(value)}."
                )
            if isinstance(value, tuple):
                object.__setattr__(self, f.name, list(value))
        self._check_values()

    def _check_values(self) -> None:
        if not self.data.strip():
            raise PRBError("Parameter 'data' must name a source: 'sample', a hub id, or a local path.")
        if not self.results.strip():
            raise PRBError("Parameter 'results' must name the store folder (e.g. 'results').")
        for spec in self.models:
            kind = spec.split(":", 1)[0].strip().lower()
            if kind not in kind_names():
                raise PRBError(
                    f"Parameter 'models' has the unknown model spec '{spec}'; a spec starts with one of "
                    f"{', '.join(kind_names())}."
                )
        for condition in self.profiles:
            try:
                parse_condition(condition)
            except PRBError as exc:
                raise PRBError(f"Parameter 'profiles': {exc}") from None
        if self.limit < 0:
            raise PRBError(f"Parameter 'limit' must be 0 (all pairs) or a positive number of pairs, got {self.limit}.")

    def _check_condition(self, name: str) -> None:
        """Parameter ``name`` holds a profile condition (none, full, topK)."""

        try:
            parse_condition(getattr(self, name))
        except PRBError as exc:
            raise PRBError(f"Parameter '{name}': {exc}") from None

    def _check_n_boot(self) -> None:
        """``n_boot``: 0 (automatic, :func:`prb_utils.analysis.resampling.default_n_boot`) or at least 100."""
        if self.n_boot:
            self._check_at_least("n_boot", 100)

    def _check_at_least(self, name: str, low: int) -> None:
        value = getattr(self, name)
        if value < low:
            raise PRBError(f"Parameter '{name}' must be at least {low}, got {value}.")

    @classmethod
    def report_needs(cls, models: Sequence[str], profiles: Sequence[str], *, asked_profiles: bool,
                     retriever: str | None = None) -> ReportNeeds:
        """What this page asks of ``prb report`` for ``models`` under the report's ``profiles`` (``asked_profiles``:
        the user chose them with ``--profile``; ``retriever``: the run's); nothing by default."""
        return ReportNeeds()

    @classmethod
    def names(cls) -> list[str]:
        """The parameter names this notebook accepts."""
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, values: typing.Mapping[str, Any]) -> NotebookParams:
        """Build from a mapping, rejecting names the notebook does not know."""
        unknown = sorted(set(values) - set(cls.names()))
        if unknown:
            raise PRBError(
                f"Unknown parameter(s) {', '.join(unknown)} for the {cls.notebook} notebook; "
                f"known: {', '.join(cls.names())}."
            )
        return cls(**dict(values))

    @classmethod
    def from_namespace(cls, namespace: typing.Mapping[str, Any]) -> NotebookParams:
        """Build from a notebook's global namespace (``globals()``, after the ``parameters`` cell and the values
        papermill injected): every parameter this notebook declares, checked as in the constructor; a name the
        namespace lacks keeps its default. No page retypes its parameter names.

        >>> AccuracyParams.from_namespace({"limit": 3, "half_credit": True, "plt": object()}).limit
        3
        """
        return cls(**{name: namespace[name] for name in cls.names() if name in namespace})

    @property
    def results_dir(self) -> Path:
        """The store folder, resolved (see :func:`resolve_path`)."""
        return resolve_path(self.results)

    @property
    def data_source(self) -> str:
        """The data source, resolved (see :func:`resolve_data_source`)."""
        return resolve_data_source(self.data)

    def load_data(self) -> pd.DataFrame:
        """The benchmark pairs (``load_benchmark``), restricted to ``subsets`` and ``limit`` (0: all)."""

        return load_benchmark(self.data_source, subsets=self.subsets or None, limit=self.limit or None,
                              drop_invalid=True)

    def command(self, verb: str, *, models: Sequence[str] = (), profile: str | Sequence[str] | None = None) -> str:
        """The ``prb VERB`` command a page suggests, on this page's own data and store
        (:func:`~prb_utils.notebook.markup.prb_command`).

        >>> NotebookParams(data="mine.jsonl").command("score", models=["length"], profile=["none", "top3"])
        'prb score --data mine.jsonl --model length --profile none --profile top3 --out results'
        """
        return prb_command(verb, data=self.data, store=self.results, models=models, profile=profile)

    def plan(self) -> ResamplingPlan:
        """The store's resampling plan (:meth:`ResamplingPlan.of_store`): every interval of the page comes from it,
        as on every other page and in ``prb summarize``. A page's ``n_boot`` parameter, when not 0, departs from the
        plan's resample count on purpose (its intervals then differ from the other pages' in the last digits); page
        03's ``n_boot`` is its resamples of RMs, not of pairs, and leaves the plan alone."""
        given = getattr(self, "n_boot", 0) if self.n_boot_resamples_pairs else 0
        return ResamplingPlan.of_store(self.results_dir).with_overrides(n_boot=given or None)

    def load_results(self, data: pd.DataFrame | None = None, *,
                     profiles: typing.Sequence[str] | None = None) -> pd.DataFrame:
        """Per-item rows of the store for the chosen models and conditions (all when the lists are empty),
        restricted to the pairs of ``data`` when given. Every job is kept, never pooled: the ``model``
        column holds the job label (the spec, plus what differs where several jobs share a spec: another
        seed, dtype, judge mode, ``judge:smollm2 [generate]``), so ``(model, profile)`` names exactly one
        job and every table and figure grouped by ``model`` shows one row per job. ``model_spec`` keeps the
        spec as given (the key that downstream tables match on). When neither models nor conditions are given
        and ``prb report`` has run on this store, the page shows what its report page showed
        (:func:`report_view`), so the live notebook and the static page have the same jobs and labels.
        ``profiles`` replaces the page's conditions for this one query (e.g. a probe the page shows apart)."""

        models, profiles = self.models, (self.profiles if profiles is None else list(profiles))
        if not models and not profiles:  # a live page shows the jobs its last report page showed
            view = report_view(self.results_dir).get(self.notebook, {})
            models, profiles = list(view.get("models") or []), list(view.get("profiles") or [])
        rows = query_results(self.results_dir, models=models, profiles=profiles, data=data)
        rows = rows.assign(model_spec=rows["model"], model=rows["job_label"])
        return rows.reset_index(drop=True)


@dataclass(frozen=True)
class WorkshopParams(NotebookParams):
    """00_workshop_personalization: the quiz and the final comparison."""

    quiz_pairs: int = 6
    quiz_profile: str = "top3"
    quiz_answers: list[str] = field(default_factory=list)
    seed: int = 0

    notebook: ClassVar[str] = "00_workshop_personalization"
    title: ClassVar[str] = 'Workshop: one question, two users'
    question: ClassVar[str] = "Why must a reward model read the user's profile? You play the RM on real pairs."

    def _check_values(self) -> None:
        super()._check_values()
        self._check_at_least("quiz_pairs", 1)
        self._check_condition("quiz_profile")
        bad = [a for a in self.quiz_answers if a not in ("A", "B")]
        if bad:
            raise PRBError(f"Parameter 'quiz_answers' holds {bad[0]!r}; each answer must be 'A' or 'B'.")
        if len(self.quiz_answers) > self.quiz_pairs:
            raise PRBError(
                f"Parameter 'quiz_answers' has {len(self.quiz_answers)} answers for {self.quiz_pairs} quiz pairs."
            )


@dataclass(frozen=True)
class PairInspectionParams(NotebookParams):
    """01_pair_inspection: which pairs to browse (defaults: every pair; the first 50 cards in full)."""

    category: str = ""
    filter: Literal["all", "disagreement", "profile_flips", "wrong"] = "all"
    wrong_model: str = ""
    pair_id: str = ""
    max_pairs: int = 50  # cards in full when static; 0 for all; the rest collapsed
    view_profile: str = "top3"

    notebook: ClassVar[str] = "01_pair_inspection"
    title: ClassVar[str] = 'Pair inspection'
    question: ClassVar[str] = 'What did each model do on each pair, and which verdicts does the profile flip?'

    def _check_values(self) -> None:
        super()._check_values()
        self._check_at_least("max_pairs", 0)
        self._check_condition("view_profile")


@dataclass(frozen=True)
class AccuracyParams(NotebookParams):
    """02_accuracy_breakdown: options of the accuracy tables."""

    baseline_profile: str = "none"
    half_credit: bool = False
    n_boot: int = 0  # 0: automatic (resampling.default_n_boot), the same resamples as every other page

    notebook: ClassVar[str] = "02_accuracy_breakdown"
    title: ClassVar[str] = 'Accuracy breakdown'
    question: ClassVar[str] = 'Which model is most accurate under each profile condition, and does the profile help?'

    def _check_values(self) -> None:
        super()._check_values()
        self._check_condition("baseline_profile")
        self._check_n_boot()


@dataclass(frozen=True)
class DownstreamParams(NotebookParams):
    """03_downstream_correlation: where the BoN results and the downstream table are."""

    bon_dir: str = ""
    ppo: str = ""
    downstream_csv: str = "example"
    ks: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    benchmark_profile: str = "top3"
    n_boot: int = 0   # 0: automatic (resampling.default_n_boot: 10,000 resamples for fewer than 50 RMs)

    notebook: ClassVar[str] = "03_downstream_correlation"
    n_boot_resamples_pairs: ClassVar[bool] = False   # its n_boot resamples RMs
    title: ClassVar[str] = 'Downstream correlation'
    question: ClassVar[str] = 'Does benchmark accuracy predict how well an RM picks answers downstream?'

    def _check_values(self) -> None:
        super()._check_values()
        if not self.ks or any(k < 1 for k in self.ks):
            raise PRBError(f"Parameter 'ks' must be a non-empty list of positive integers, got {self.ks}.")
        self._check_n_boot()
        self._check_condition("benchmark_profile")

    @property
    def bon_path(self) -> Path:
        """The BoN pipeline's folder: ``bon_dir``, or ``<results>/bon`` when empty."""
        return resolve_path(self.bon_dir) if self.bon_dir else self.results_dir / "bon"

    @property
    def ppo_path(self) -> Path | None:
        """PPO outcomes: a CSV ``rm,subset,score[,n]`` or a reference ``PPO/result`` folder; when empty, the
        table ``prb ppo`` writes (``<results>/ppo/ppo.csv``) if there is one, else None."""
        if not self.ppo:
            written = self.results_dir / "ppo" / "ppo.csv"
            return written if written.is_file() else None
        path = resolve_path(self.ppo)
        if not path.exists():
            raise PRBError(f"Parameter 'ppo': {self.ppo} does not exist.")
        return path

    @property
    def downstream_path(self) -> Path | None:
        """The downstream CSV: the shipped RewardBench 2 table (published figures), a path, or None when empty."""
        if not self.downstream_csv:
            return None
        if self.downstream_csv == "example":
            return EXAMPLE_DOWNSTREAM
        path = resolve_path(self.downstream_csv)
        if not path.is_file():
            raise PRBError(f"Parameter 'downstream_csv': the file {self.downstream_csv} does not exist.")
        return path


@dataclass(frozen=True)
class DiagnosticsParams(NotebookParams):
    """04_personalization_diagnostics: profile-size curves, retrieval ablation, oracle gap, hardest pairs."""

    retriever: str = "bm25"
    tokenizer: str = ""
    n_boot: int = 0  # 0: the store's plan (resampling.default_n_boot)
    max_hardest: int = 10

    notebook: ClassVar[str] = "04_personalization_diagnostics"
    title: ClassVar[str] = 'Personalization diagnostics'
    question: ClassVar[str] = 'Why does the profile help or not: how much of it, which posts, the answer key?'
    #: Without ``--profile`` the report scores its quick models under these sizes too (the profile-size curve:
    #: k = 0, 1, 2, 3, all), and its model-free ones under the oracle and, with random posts, under
    #: ``ablation_profile`` (BM25's is a curve point): the oracle gap and the retrieval ablation, in seconds.
    curve_profiles: ClassVar[tuple[str, ...]] = ("top1", "top2", "full")
    ablation_profile: ClassVar[str] = "top2"

    @classmethod
    def report_needs(cls, models: Sequence[str], profiles: Sequence[str], *, asked_profiles: bool,
                     retriever: str | None = None) -> ReportNeeds:
        """The curve, oracle and ablation jobs of the quick and model-free models (none when ``--profile`` chose
        the conditions); the page shows every condition the store holds for the models when it asks none.

        >>> needs = DiagnosticsParams.report_needs(["lexical", "judge:smollm2"], ["none", "top3"], asked_profiles=False)
        >>> [(j.models, j.profiles, j.retriever) for j in needs.jobs]
        [(('lexical',), ('top1', 'top2', 'full'), None), (('lexical',), ('rubric',), None), (('lexical',), ('top2',), 'random')]
        """
        curve = () if asked_profiles else quick_models(models)
        if not curve:
            return ReportNeeds(parameters={"profiles": []})
        free = model_free(models)
        jobs = [ReportJobs(curve, cls.curve_profiles)]
        if free:
            jobs.append(ReportJobs(free, ORACLE_CONDITIONS))
            if retriever in (None, "bm25"):   # the ablation's other retriever, on the same pairs
                jobs.append(ReportJobs(free, (cls.ablation_profile,), "random"))
        shown = [*profiles, *cls.curve_profiles, *(ORACLE_CONDITIONS if free else ())]
        return ReportNeeds(tuple(jobs), {"profiles": list(dict.fromkeys(shown))})

    def _check_values(self) -> None:
        super()._check_values()

        if self.retriever not in ("bm25", "random", "least") and not self.retriever.startswith("dense:"):
            raise PRBError(f"Parameter 'retriever' must be one of {', '.join(RETRIEVERS)}, got {self.retriever!r}.")
        self._check_n_boot()
        self._check_at_least("max_hardest", 1)


@dataclass(frozen=True)
class ReadingParams(NotebookParams):
    """05_reading_the_user: the personalization probes (:data:`prb_utils.probes.PROBES`)."""

    base_profile: str = DEFAULT_CONDITION
    n_boot: int = 0  # 0: automatic (resampling.default_n_boot)

    notebook: ClassVar[str] = "05_reading_the_user"
    title: ClassVar[str] = 'Is it reading the user?'
    question: ClassVar[str] = 'Does the RM read this user, or react to any profile? The probes say.'

    @classmethod
    def report_needs(cls, models: Sequence[str], profiles: Sequence[str], *, asked_profiles: bool,
                     retriever: str | None = None) -> ReportNeeds:
        """Every default probe of the default condition for the quick models, and its leave-one-post-out jobs
        (``--probe attribution``) for the model-free ones, which take seconds (none when ``--profile`` chose the
        conditions: the page then shows every probe the store holds for the models).

        >>> needs = ReadingParams.report_needs(["lexical", "judge:smollm2"], ["none"], asked_profiles=False)
        >>> needs.parameters["models"], needs.jobs[-1].profiles
        (['lexical'], ('top3+drop1', 'top3+drop2', 'top3+drop3'))
        """
        probed = () if asked_profiles else quick_models(models)
        if not probed:
            return ReportNeeds(parameters={"profiles": []})
        conditions = probe_conditions(DEFAULT_CONDITION)
        jobs = [ReportJobs(probed, tuple(conditions[1:]))]
        free = model_free(probed)
        drops = probe_conditions(DEFAULT_CONDITION, [ATTRIBUTION])[1:] if free else []
        if drops:
            jobs.append(ReportJobs(free, tuple(drops)))
        return ReportNeeds(tuple(jobs), {"models": list(probed), "profiles": [*conditions, *drops]})

    def _check_values(self) -> None:
        super()._check_values()
        self._check_condition("base_profile")
        self._check_n_boot()


PARAMS_BY_NOTEBOOK: dict[str, type[NotebookParams]] = {
    cls.notebook: cls
    for cls in (WorkshopParams, PairInspectionParams, AccuracyParams, DownstreamParams, DiagnosticsParams,
                ReadingParams)
}


def headless() -> bool:
    """True when no notebook frontend can show widgets (no IPython kernel, or ``PRB_HEADLESS`` is set, as
    :func:`prb_utils.notebook.report.build_report` does for papermill runs)."""
    if os.environ.get("PRB_HEADLESS"):
        return True
    try:
        from ipykernel.zmqshell import ZMQInteractiveShell
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - both ship with the notebook stack
        return True
    return not isinstance(get_ipython(), ZMQInteractiveShell)
