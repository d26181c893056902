"""Which posts a job's RM sees: the post selector behind each ``top{K}`` condition (the condition's own retriever
and seed, else the command's), and how tables and rebuilds name a job's retriever.

The retrievers themselves (BM25+, ``random``, ``least``, ``dense:NAME``) are :func:`prb_utils.profile.make_retriever`'s;
this module adds the one thing they leave out, loading a dense retriever's encoder, so scoring, exports and the
profile curves rebuild exactly the posts a job showed.

>>> from prb_utils.profile import parse_condition
>>> picked_by(parse_condition("top3:random:3"), "bm25", 0), picked_by(parse_condition("full"), None, 0)
(('random', 3), None)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from prb_utils.errors import PRBError
from prb_utils.models.embedding import load_encoder
from prb_utils.profile import ProfileCondition, make_retriever


def post_selectors(conditions: Sequence[ProfileCondition], retriever: str | None, seed: int
                   ) -> dict[str, Callable[..., list[int]] | None]:
    """``{spelling: post selector}`` of each condition (None where it picks no posts), one selector per distinct
    retriever and seed (:func:`picked_by`)."""
    picks = {c.spelling: picked_by(c, retriever, seed) for c in conditions}
    built = {pick: _retriever(*pick) for pick in dict.fromkeys(picks.values()) if pick is not None}
    return {spelling: built.get(pick) for spelling, pick in picks.items()}


def picked_by(condition: ProfileCondition, retriever: str | None, seed: int) -> tuple[str, int] | None:
    """``(retriever, seed)`` that picks a top{K} condition's posts: the condition's own (``top3:random:3``), else
    the command's ``retriever`` (default ``bm25``) and ``seed``; None for a condition that picks none."""
    if not condition.retrieves:
        return None
    return (condition.retriever or retriever or "bm25",
            int(seed if condition.retriever_seed is None else condition.retriever_seed))


SEED_LABEL = ", retriever_seed="


def retriever_label(name: str | None, seed: int | None = 0) -> str | None:
    """How tables name a job's retriever: its spec, and the seed of a seeded ``random`` one.

    >>> retriever_label("random", 3), retriever_label("bm25"), retriever_label(None)
    ('random, retriever_seed=3', 'bm25', None)
    """
    if not name:
        return None
    seed = int(seed) if seed is not None and seed == seed else 0
    return f"{name}{SEED_LABEL}{seed}" if name == "random" and seed else str(name)


def retriever_from_label(label: str | None) -> Callable[..., list[int]] | None:
    """The post selector a job used, from its :func:`retriever_label` (None for no retriever): the one way every
    RM input is rebuilt (profile curves, exports), so a rebuild shows exactly the posts the model saw."""
    if not label:
        return None
    name, _, seed = str(label).partition(SEED_LABEL)
    return _retriever(name, int(seed or 0))


def _retriever(spec: str | None, seed: int = 0) -> Callable[..., list[int]] | None:
    if spec and spec.startswith("dense:"):
        with encoder_errors(spec):
            embed = load_encoder(spec.split(":", 1)[1])
        return make_retriever(spec, embed=embed)
    return make_retriever(spec, seed=seed)


@contextmanager
def encoder_errors(spec: str) -> Iterator[None]:
    """A dense retriever's encoder that cannot be found or loaded is the retriever's error (the user named a
    retriever, not a model)."""
    try:
        yield
    except PRBError as exc:
        raise PRBError(f"The retriever '{spec}' cannot use its encoder: {exc}") from None
