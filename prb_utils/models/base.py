"""The adapter contract: pair inputs, pair scores, the RewardModel protocol, and spec parsing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from prb_utils.errors import PRBError
from prb_utils.models.kinds import MODEL_KINDS, loader_kind


@dataclass(frozen=True)
class PairInput:
    """One benchmark pair as a reward model sees it; ``prompt`` is the RM-visible user message."""

    key: str
    prompt: str
    chosen: str
    rejected: str


@dataclass
class PairScore:
    """Scores for one pair (higher = better). NaN/inf scores are returned as they come; the scorer maps
    them, and any pair with ``invalid_reason`` set, to the outcome ``invalid``."""

    score_chosen: float
    score_rejected: float
    invalid_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class RewardModel(Protocol):
    spec: str
    kind: str

    def score_pairs(self, pairs: Sequence[PairInput]) -> list[PairScore]: ...

    def run_metadata(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ModelSpec:
    """A parsed ``KIND:NAME`` spec (``name`` is empty for the baselines)."""

    kind: str
    name: str

    @property
    def canonical(self) -> str:
        kind = MODEL_KINDS.get(self.kind)
        return self.kind if kind is not None and not kind.weights else f"{self.kind}:{self.name}"


@dataclass(frozen=True)
class GivenSpec(ModelSpec):
    """A policy, a rubric judge or a retriever's encoder: resolved as its ``kind`` is (:func:`spec_of`), but named in
    messages as the user wrote it (``given``, e.g. ``org/x`` for ``--policy org/x``, ``llm:org/x`` or ``proxy:foo``
    for ``--judge``), never as ``judge:org/x`` or ``embedding:foo``.

    >>> GivenSpec("judge", "org/x", "llm:org/x").canonical, GivenSpec("judge", "org/x").canonical
    ('llm:org/x', 'org/x')
    """

    given: str = ""

    @property
    def canonical(self) -> str:
        return self.given or self.name


def spec_of(architecture: str, name: str, given: str = "") -> GivenSpec:
    """The spec that loads ``name`` (an alias, folder or hub id) as a model of ``architecture``
    (:data:`~prb_utils.models.kinds.CAUSAL_LM`, :data:`~prb_utils.models.kinds.ENCODER`) that is no reward model:
    of its :func:`~prb_utils.models.kinds.loader_kind`, named in messages as ``given`` (default ``name``).

    >>> from prb_utils.models.kinds import CAUSAL_LM
    >>> spec_of(CAUSAL_LM, "org/x").kind, spec_of(CAUSAL_LM, "org/x", "llm:org/x").canonical
    ('judge', 'llm:org/x')
    """
    return GivenSpec(loader_kind(architecture), name, given)


def parse_spec(spec: str) -> ModelSpec:
    """Parse ``KIND:NAME`` (or ``length`` / ``lexical``); PRBError on an unknown kind or a missing name.

    >>> parse_spec(" judge:smollm2 ")
    ModelSpec(kind='judge', name='smollm2')
    >>> parse_spec("length").canonical
    'length'
    """
    text = str(spec).strip()
    kind, sep, name = text.partition(":")
    kind, name = kind.strip().lower(), name.strip()
    if kind not in MODEL_KINDS:
        raise PRBError(f"Unknown model kind in '{spec}'; use one of {', '.join(MODEL_KINDS)} (e.g. judge:smollm2).")
    if not MODEL_KINDS[kind].weights:
        if name:
            raise PRBError(f"The baseline '{kind}' takes no model name; write just '{kind}'.")
        return ModelSpec(kind, "")
    if not name:
        raise PRBError(f"Model spec '{spec}' lacks a name; write {kind}:NAME with a hub id, folder or alias.")
    return ModelSpec(kind, name)
