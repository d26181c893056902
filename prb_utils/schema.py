"""The shared vocabulary: result columns, outcomes, model kinds, baselines, pair filters, the default zoo,
and the one stable hash every fingerprint in prb is built from.

Nothing here imports anything else from prb, so every module may import it.

>>> stable_hash({"b": 1, "a": 2}) == stable_hash({"a": 2, "b": 1})
True
>>> len(stable_hash("text"))
16
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: Per-item result columns, in store order (see :mod:`prb_utils.store`).
RESULT_COLUMNS = [
    "model",
    "kind",
    "profile",
    "subset",
    "category",
    "id",
    "score_chosen",
    "score_rejected",
    "outcome",
    "invalid_reason",
    "p_chosen_ab",
    "p_chosen_ba",
    "verdict_ab",
    "verdict_ba",
    "truncated",
    "failed",
    "pair_hash",
    "job",
]
FLOAT_COLUMNS = ["score_chosen", "score_rejected", "p_chosen_ab", "p_chosen_ba"]

#: What one scored pair can end as. Only ``correct`` counts as correct.
OUTCOMES = ("correct", "wrong", "tie", "invalid")

#: The models the main job scores when none is given (all offline).
DEFAULT_ZOO = ("embedding:minilm", "implicit:smollm2", "judge:smollm2", "length", "lexical")

#: The profile condition that shows no profile: the baseline every lift is measured against.
NO_PROFILE = "none"
#: The personalized condition a command uses when it needs one and none is given (the three posts most
#: relevant to the question: the benchmark's main setting): the probes' base, the Best-of-N and RL reward's.
DEFAULT_CONDITION = "top3"

#: Profile conditions that show the RM the answer key: diagnostics, marked as oracle in every output.
ORACLE_CONDITIONS = ("rubric",)

#: The backends a model runs on, by name: the dtypes it is loaded in (``--dtype``; prb_utils.models.device maps
#: their spellings), the attention implementations (transformers' ``attn_implementation``; the first is prb's
#: default) and the engines (prb_utils.models.engines). A backend retest (``top3+retest-bfloat16``) names one.
DTYPE_NAMES = ("float32", "bfloat16", "float16")
ATTENTIONS = ("sdpa", "eager")
ENGINE_NAMES = ("hf", "vllm")


def is_oracle(condition: str) -> bool:
    """True for a profile condition that shows the RM the answer key (``rubric``).

    >>> is_oracle("rubric"), is_oracle("top3")
    (True, False)
    """
    return str(condition) in ORACLE_CONDITIONS


#: Pair-browser filters (notebook 01 and its widgets).
FILTERS = ("all", "disagreement", "profile_flips", "wrong")


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the same value always gives the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def stable_hash(value: Any, *, length: int = 16) -> str:
    """The first ``length`` hex digits of the sha256 of a value (text as is, anything else as canonical JSON)."""
    text = value if isinstance(value, str) else canonical_json(value)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def pair_key(subset: str, item_id: str) -> str:
    """The text that names a pair in a job's record and between ranks: ``subset/id``. Validation refuses two
    records with one key (subset ``x/y`` with id ``z`` and subset ``x`` with id ``y/z``).

    >>> pair_key("Art/Film", "7")
    'Art/Film/7'
    """
    return f"{subset}/{item_id}"


def canonical_spec(spec: str) -> str:
    """A model spec as the store writes it: the kind lower-cased, spaces trimmed.

    >>> canonical_spec(" Judge: x ")
    'judge:x'
    """
    kind, _, name = spec.strip().partition(":")
    return f"{kind.strip().lower()}:{name.strip()}" if name.strip() else kind.strip().lower()
