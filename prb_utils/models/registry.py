"""``load_model`` (spec string -> adapter) and ``list_models`` (what ``prb models`` shows)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pandas as pd

from prb_utils.errors import PRBError
from prb_utils.models.aliases import ALIASES, alias_status
from prb_utils.models.base import KINDS, PairInput, RewardModel, check_engine, parse_spec  # noqa: F401
from prb_utils.models.baselines import BASELINE_CLASSES
from prb_utils.models.classifier import ClassifierRM
from prb_utils.models.embedding import EmbeddingRM
from prb_utils.models.implicit import ImplicitRM
from prb_utils.models.judge import JudgeRM
from prb_utils.models.prompts import TOKENIZATIONS
from prb_utils.models.vllm_adapters import VLLMClassifierRM, VLLMImplicitRM, VLLMJudgeRM

#: The kinds the ``vllm`` engine runs (the others run in process whatever the engine).
VLLM_KINDS = ("judge", "implicit", "classifier")

KIND_HELP = {
    "classifier": "sequence-classification reward model; score = single logit (or softmax of the last class)",
    "judge": "causal LM comparing both responses, both A/B orders; P(A) vs P(B) or generate + parse",
    "implicit": "causal LM; score = mean token log-prob of the response given the prompt",
    "embedding": "encoder; score = cosine similarity of RM input and response (mean pooling)",
    "length": "baseline: the longer response wins (characters)",
    "lexical": "baseline: the response sharing more of the RM input's content words wins",
}


def load_model(spec: str, *, device: str = "auto", dtype: str = "auto", batch_tokens: int | None = None,
               judge_mode: str = "logprob", judge_template: str | None = None, seed: int = 0,
               kv_reuse: bool = True, tokenization: str = "auto", allow_untrained_head: bool = False,
               engine: str = "hf", engine_options: Any = None) -> RewardModel:
    """Load the reward model named by ``spec`` (``KIND:NAME``; NAME = hub id, local folder or alias).

    ``tokenization``: ``auto`` (special tokens exactly once) or ``reference`` (as the benchmark's reference
    scripts tokenize; see :mod:`prb_utils.models.prompts`); embeddings always take the tokenizer's own.
    ``judge_template``: ``default``, ``reference``, a file or a template string. ``allow_untrained_head``:
    score even when the checkpoint lacks weights the kind needs (they are then random), instead of refusing.
    ``engine``: ``hf`` (transformers in this process) or ``vllm`` (``judge:``, ``implicit:`` and
    ``classifier:`` through an OpenAI-compatible vLLM server, :mod:`prb_utils.models.vllm_engine`; ``engine_options`` holds its
    :class:`~prb_utils.models.vllm_engine.EngineOptions`); the other kinds always run in process.

    Raises PRBError for an unknown kind or alias, a missing or broken folder, a checkpoint of the wrong kind,
    or a hub id that is not reachable.

    >>> load_model("length").score_pairs([PairInput("k", "q", "long answer", "short")])[0].score_chosen
    11.0
    """
    parsed = parse_spec(spec)
    if tokenization not in TOKENIZATIONS:
        raise PRBError(f"Unknown tokenization '{tokenization}'; use {' or '.join(TOKENIZATIONS)}.")
    common: dict[str, Any] = {"device": device, "dtype": dtype, "batch_tokens": batch_tokens, "seed": seed,
                              "allow_untrained_head": allow_untrained_head}
    tokens = {"tokenization": tokenization}
    check_engine(engine)
    if engine == "vllm" and parsed.kind in VLLM_KINDS:
        if parsed.kind == "classifier":
            return VLLMClassifierRM(parsed, engine_options=engine_options, device=device, dtype=dtype, seed=seed,
                                    **tokens)
        if parsed.kind == "judge":
            return VLLMJudgeRM(parsed, judge_mode=judge_mode, judge_template=judge_template, engine_options=engine_options,
                               device=device, dtype=dtype, seed=seed, **tokens)
        return VLLMImplicitRM(parsed, engine_options=engine_options, device=device, dtype=dtype, seed=seed, **tokens)
    if parsed.kind in ("length", "lexical"):
        return BASELINE_CLASSES[parsed.kind]()
    if parsed.kind == "classifier":
        return ClassifierRM(parsed, kv_reuse=kv_reuse, **tokens, **common)
    if parsed.kind == "judge":
        return JudgeRM(parsed, judge_mode=judge_mode, judge_template=judge_template, kv_reuse=kv_reuse, **tokens,
                       **common)
    if parsed.kind == "implicit":
        return ImplicitRM(parsed, kv_reuse=kv_reuse, **tokens, **common)

    return EmbeddingRM(parsed, **common)


def list_models() -> Any:
    """One row per kind (``NAME`` = any hub id or folder) and per offline alias, with availability here.

    Columns: kind, name, description, available (bool), detail.
    """


    rows = []
    torch_ok = importlib.util.find_spec("torch") is not None and importlib.util.find_spec("transformers") is not None
    for kind in KINDS:
        if kind in ("length", "lexical"):
            rows.append({"kind": kind, "name": "", "description": KIND_HELP[kind], "available": True,
                         "detail": "no model needed"})
            continue
        rows.append({"kind": kind, "name": "<hub id or folder>", "description": KIND_HELP[kind],
                     "available": torch_ok, "detail": "hub ids need the network or a local copy"})
        for alias in ALIASES.values():
            if kind in alias.kinds:
                ok, detail = alias_status(alias.name)
                rows.append({"kind": kind, "name": alias.name, "description": alias.description(kind),
                             "available": bool(ok and torch_ok), "detail": detail})
    return pd.DataFrame(rows, columns=["kind", "name", "description", "available", "detail"])
