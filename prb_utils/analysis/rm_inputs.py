"""The reward model's inputs rebuilt from the benchmark data, row by row of a store's results: which retriever
picked each job's posts (:func:`job_retrievers`), and per row the question, the posts shown, the input's size and
whether the rebuilt input hashes to the stored ``pair_hash`` (:func:`rm_inputs`), built exactly as scoring builds
it (same condition, same retriever). The profile-size curves and the calibration's input-size bins read them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from prb_utils.analysis.metrics import require_columns
from prb_utils.errors import PRBError
from prb_utils.models.aliases import ALIASES, resolve_alias
from prb_utils.profile import parse_condition, rm_user_message
from prb_utils.retrieval import retriever_from_label, retriever_label
from prb_utils.store import pair_hash


def job_retrievers(results: pd.DataFrame, run_metadata: pd.DataFrame | None = None) -> pd.Series:
    """The retriever behind each row: None for ``none``/``full``/``rubric``, else the job's retriever as
    :func:`prb_utils.retrieval.retriever_label` names it (a seeded ``random`` with its seed).

    Taken from a ``retriever`` column of ``results`` when there is one, else from ``run_metadata`` (the frame of
    :func:`prb_utils.store.load_run_metadata`, column ``option_retriever``). A ``top{K}`` row whose retriever is
    known from neither raises PRBError: guessing ``bm25`` would put a random or least-relevant ablation on the
    curve.

    >>> import pandas as pd
    >>> rows = pd.DataFrame({"profile": ["none", "top2"], "retriever": [None, "random"]})
    >>> job_retrievers(rows).tolist()
    [None, 'random']
    """
    posts_k = results["profile"].map(lambda c: parse_condition(c).retrieves)
    if "retriever" in results.columns:
        known = results["retriever"]
    elif run_metadata is not None and not run_metadata.empty and "option_retriever" in run_metadata.columns:
        require_columns(results, ["job"])
        seeds = run_metadata["option_retriever_seed"] if "option_retriever_seed" in run_metadata.columns else \
            pd.Series([0] * len(run_metadata), index=run_metadata.index)
        labels = [retriever_label(name if isinstance(name, str) else None, seed)
                  for name, seed in zip(run_metadata["option_retriever"], seeds, strict=True)]
        known = results["job"].map(dict(zip(run_metadata["job"], labels, strict=True)))
    else:
        known = pd.Series([None] * len(results), index=results.index, dtype=object)
    known = known.astype(object).where(posts_k, None)
    unknown = posts_k & known.isna()
    if unknown.any():
        raise PRBError(f"The retriever of {int(unknown.sum())} top{{K}} row(s) is unknown; pass "
                       "run_metadata=load_run_metadata(store) or add a 'retriever' column.")
    return known.where(known.notna(), None)


def _measure(tokenizer: Any) -> tuple[Callable[[str], int], str]:
    if tokenizer is None:
        return len, "characters"
    if hasattr(tokenizer, "encode"):
        def count(text: str) -> int:
            try:
                return len(tokenizer.encode(text, add_special_tokens=False))
            except TypeError:  # a `tokenizers.Tokenizer`: encode(text) -> Encoding
                encoded = tokenizer.encode(text)
                return len(getattr(encoded, "ids", encoded))
        return count, "tokens"
    if callable(tokenizer):
        return (lambda text: len(tokenizer(text))), "tokens"
    raise PRBError("tokenizer must have an encode method, be a callable returning tokens, or be None (characters).")


def load_tokenizer(name: str) -> Any:
    """A tokenizer to count RM-input tokens: None for ``""`` (count characters), an offline alias
    (``smollm2``, ``minilm``), or a local folder / hub id loaded with ``transformers.AutoTokenizer``."""
    if not name:
        return None

    source = str(resolve_alias(name, ALIASES[name].kinds[0])) if name in ALIASES else name
    if name not in ALIASES and name.startswith(("/", ".", "~")) and not Path(name).expanduser().is_dir():
        raise PRBError(f"The tokenizer folder {name} does not exist.")
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise PRBError(f"Cannot load a tokenizer from {name!r} ({str(exc).splitlines()[0][:120]}).") from None


def rm_inputs(
    results: pd.DataFrame,
    data: pd.DataFrame,
    *,
    retrievers: pd.Series | None = None,
    tokenizer: Any = None,
) -> pd.DataFrame:
    """Per row of ``results``: ``question``, ``posts_shown``, ``n_posts``, ``input_size`` and ``input_matches``
    (the rebuilt user message hashes to the row's ``pair_hash``; NA without one), plus the unit in
    ``frame.attrs["input_unit"]``. Rows whose pair is not in ``data`` raise PRBError."""
    require_columns(data, ["subset", "id", "question", "chosen", "rejected"], what="benchmark")
    count, unit = _measure(tokenizer)
    records = {(str(r["subset"]), str(r["id"])): r for r in data.to_dict("records")}
    retrievers = retrievers if retrievers is not None else pd.Series([None] * len(results), index=results.index)
    functions: dict[str | None, Any] = {}
    cache: dict[tuple, tuple[str, int, int, str, int]] = {}
    out = []
    for (subset, item_id, condition, retriever, stored) in zip(
            results["subset"].astype(str), results["id"].astype(str), results["profile"].astype(str), retrievers,
            results["pair_hash"] if "pair_hash" in results.columns else [None] * len(results), strict=True):
        record = records.get((subset, item_id))
        if record is None:
            raise PRBError(f"The pair {subset}/{item_id} of the results is not in the benchmark data given.")
        key = (subset, item_id, condition, retriever)
        if key not in cache:
            if retriever not in functions:
                functions[retriever] = retriever_from_label(retriever)
            message = rm_user_message(record, condition, retriever=functions[retriever])
            posts = record.get("profile")
            n_posts = len(posts) if posts is not None else 0
            cond = parse_condition(condition)
            shown = 0 if cond.k == 0 else (n_posts if cond.k is None else min(cond.k, n_posts))
            digest = pair_hash(subset, item_id, message, record["chosen"], record["rejected"],
                               category=str(record.get("category") or ""))
            cache[key] = (str(record["question"]), shown, n_posts, digest, count(message))
        question, shown, n_posts, digest, size = cache[key]
        matches = pd.NA if stored is None or pd.isna(stored) else digest == stored
        out.append({"question": question, "posts_shown": shown, "n_posts": n_posts, "input_size": size,
                    "input_matches": matches})
    frame = pd.DataFrame(out, index=results.index, columns=["question", "posts_shown", "n_posts", "input_size",
                                                            "input_matches"])
    frame.attrs["input_unit"] = unit
    return frame
