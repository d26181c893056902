"""``load_model`` (spec string -> adapter) and ``list_models`` (what ``prb models`` shows)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from prb_utils.models.aliases import ALIASES, alias_status
from prb_utils.models.base import RewardModel, parse_spec
from prb_utils.models.device import resolve_placement
from prb_utils.models.engines import EngineConfig
from prb_utils.models.kinds import MODEL_KINDS, load_class
from prb_utils.schema import ATTENTIONS


@dataclass(frozen=True)
class ModelOptions:
    """How reward models are loaded and run, built once (the command line's options) and passed whole to
    :func:`load_model`, :func:`~prb_utils.scoring.score_benchmark` and the downstream pipelines. Each kind's
    adapter takes the fields its record lists (:attr:`~prb_utils.models.kinds.ModelKind.options`); ``engine``
    says where the kinds it serves run.

    ``tokenization``: ``auto`` (special tokens exactly once) or ``reference`` (as the benchmark's reference
    scripts tokenize; see :mod:`prb_utils.models.prompts`); embeddings always take the tokenizer's own.
    ``judge_template``: ``default``, ``reference``, a file or a template string. ``allow_untrained_head``:
    score even when the checkpoint lacks weights the kind needs (they are then random), instead of refusing.
    ``attention``: the attention implementation of a model in this process (:data:`~prb_utils.models.device.
    ATTENTIONS`; a backend retest, ``top3+retest-eager``, changes it for its job).

    >>> ModelOptions(device="cpu").for_kind("embedding")["device"]
    'cpu'
    """

    device: str = "auto"
    dtype: str = "auto"
    batch_tokens: int | None = None
    seed: int = 0
    judge_mode: str = "logprob"
    judge_template: str | None = None
    tokenization: str = "auto"
    allow_untrained_head: bool = False
    kv_reuse: bool = True
    attention: str = ATTENTIONS[0]
    engine: EngineConfig = field(default_factory=EngineConfig)

    def for_kind(self, kind: str) -> dict[str, Any]:
        """The keywords the adapters of ``kind`` take."""
        return {name: getattr(self, name) for name in MODEL_KINDS[kind].options}

    def placement(self, kind: str) -> dict[str, str]:
        """``{"device": type, "dtype": name}`` a model of ``kind`` really runs with under these options: the one
        placement rule of RM jobs, the policy and the judge (their job keys, cache keys and run records). {} for a
        kind without weights; ``auto`` resolved (:func:`~prb_utils.models.device.resolve_placement`: ``--dtype
        auto`` on a CPU is float32, on a GPU bfloat16), which is also the dtype prb starts a server with; on a
        server engine that serves the kind, the device ``server``, and for a server at ``--engine-url`` the dtype
        as asked (the server's own is read from it and recorded in the run metadata).

        >>> ModelOptions(device="cpu", dtype="bfloat16").placement("implicit"), ModelOptions().placement("length")
        ({'device': 'cpu', 'dtype': 'bfloat16'}, {})
        """
        if not MODEL_KINDS[kind].weights:
            return {}
        if self.engine.remote(kind) and self.engine.urls:
            return {"device": "server", "dtype": self.dtype}
        resolved = resolve_placement(self.device, self.dtype)
        dtype = str(resolved.dtype).removeprefix("torch.")
        if self.engine.remote(kind):
            return {"device": "server", "dtype": dtype}
        return {"device": str(resolved.device).split(":")[0], "dtype": dtype}


def load_model(spec: str, options: ModelOptions | None = None, **overrides: Any) -> RewardModel:
    """Load the reward model named by ``spec`` (``KIND:NAME``; NAME = hub id, local folder or alias) with
    ``options`` (default :class:`ModelOptions`), any of its fields replaced by ``overrides``.

    A kind the engine serves (``options.engine``, e.g. ``judge:`` on ``vllm``) runs there through the engine's
    adapter; every other kind runs in this process.

    Raises PRBError for an unknown kind or alias, a missing or broken folder, a checkpoint of the wrong kind,
    or a hub id that is not reachable.

    >>> from prb_utils.models.base import PairInput
    >>> load_model("length").score_pairs([PairInput("k", "q", "long answer", "short")])[0].score_chosen
    11.0
    """
    options = replace(options or ModelOptions(), **overrides)
    parsed = parse_spec(spec)
    kind = MODEL_KINDS[parsed.kind]
    served = options.engine.adapter(kind.name)
    if served:
        return load_class(served)(parsed, engine_config=options.engine, **options.for_kind(kind.name))
    adapter = kind.load_adapter()
    return adapter(parsed, **options.for_kind(kind.name)) if kind.weights else adapter()


def list_models() -> Any:
    """One row per kind (``NAME`` = any hub id or folder) and per offline alias, with availability here.

    Columns: kind, name, description, available (bool), detail.
    """


    rows = []
    torch_ok = importlib.util.find_spec("torch") is not None and importlib.util.find_spec("transformers") is not None
    for kind in MODEL_KINDS.values():
        if not kind.weights:
            rows.append({"kind": kind.name, "name": "", "description": kind.help, "available": True,
                         "detail": "no model needed"})
            continue
        rows.append({"kind": kind.name, "name": "<hub id or folder>", "description": kind.help,
                     "available": torch_ok, "detail": "hub ids need the network or a local copy"})
        for alias in ALIASES.values():
            if kind.name in alias.kinds:
                ok, detail = alias_status(alias.name)
                rows.append({"kind": kind.name, "name": alias.name, "description": alias.description(kind.name),
                             "available": bool(ok and torch_ok), "detail": detail})
    return pd.DataFrame(rows, columns=["kind", "name", "description", "available", "detail"])
