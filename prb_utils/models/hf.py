"""Shared plumbing for the transformers-backed adapters: loading, token counting, truncation, metadata."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models.aliases import ALIASES, resolve_alias
from prb_utils.models.base import ModelSpec
from prb_utils.models.device import Placement, configure_threads, resolve_placement
from prb_utils.models.prompts import chat_template_hash, has_chat_template
from prb_utils.models.quiet import quiet_transformers

DEFAULT_BATCH_TOKENS = {"cpu": 4096, "cuda": 16384, "mps": 4096}
MAX_LENGTH_FALLBACK = 2048


def resolve_source(spec: ModelSpec) -> str:
    """The folder or hub id to load for ``spec`` (aliases resolved, local folders checked)."""
    name = spec.name
    if name in ALIASES:
        return str(resolve_alias(name, spec.kind))
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise PRBError(f"Model '{spec.canonical}' points to a file; give the model's folder instead.")
        if not (path / "config.json").is_file():
            raise PRBError(f"Model folder '{name}' of spec '{spec.canonical}' has no config.json (not a saved model).")
        return str(path)
    looks_local = name.startswith((".", "/", "~", "\\")) or name.count("/") > 1 or "\\" in name
    if looks_local:
        raise PRBError(f"Model folder '{name}' of spec '{spec.canonical}' does not exist.")
    return name


def _load_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError]
    try:
        from huggingface_hub.errors import HFValidationError

        errors.append(HFValidationError)
    except ImportError:  # pragma: no cover - old huggingface_hub
        pass
    return tuple(errors)


def load_pretrained(spec: ModelSpec, source: str, loader: Callable[..., Any], **kwargs: Any) -> Any:
    """``loader(source, **kwargs)`` with "not found / not reachable" errors turned into a PRBError."""
    try:
        with quiet_transformers():
            return loader(source, **kwargs)
    except _load_errors() as exc:
        if Path(source).is_dir():
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise PRBError(f"Model '{spec.canonical}' could not be loaded from its folder: {first}") from exc
        raise PRBError(
            f"Model '{spec.canonical}' could not be loaded: '{source}' is not a usable local folder and the hub "
            f"id is not reachable (offline?) ({type(exc).__name__})."
        ) from exc


def load_tokenizer(spec: ModelSpec, source: str) -> Any:
    from transformers import AutoTokenizer

    tokenizer = load_pretrained(spec, source, AutoTokenizer.from_pretrained)
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token_id is not None:
            tokenizer.pad_token = tokenizer.eos_token
        elif tokenizer.unk_token_id is not None:
            tokenizer.pad_token = tokenizer.unk_token
    return tokenizer


def model_max_length(tokenizer: Any, config: Any, source: str | None = None) -> int:
    """The longest input the model takes: the smallest of the config's positions, the tokenizer's limit and a
    sentence-transformers ``max_seq_length`` when the folder has one."""
    found: list[int] = []
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            found.append(value)
            break
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < 1_000_000:
        found.append(limit)
    if source:
        st_config = Path(source) / "sentence_bert_config.json"
        if st_config.is_file():
            import json

            value = json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length")
            if isinstance(value, int) and value > 0:
                found.append(value)
    return min(found) if found else MAX_LENGTH_FALLBACK


def encode(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a rendered RM input: the chat template supplies special tokens; the fallback format
    takes the tokenizer's own (see :mod:`prb_utils.models.prompts`)."""
    return list(tokenizer(text, add_special_tokens=not has_chat_template(tokenizer))["input_ids"])


def fit_user_message(tokenizer: Any, user: str, count: Callable[[str], int], max_length: int) -> tuple[str, bool]:
    """Drop tokens from the left of the user message until ``count(user)`` fits ``max_length``.

    The profile block comes first in the message, so old posts go before the question; the responses are
    kept whole. Returns the (possibly shortened) message and whether it was shortened; an empty message
    that still does not fit is returned as ``""`` (the caller then cuts the sequence itself).
    """
    n = count(user)
    if n <= max_length:
        return user, False
    try:
        offsets = tokenizer(user, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        starts = [int(o[0]) for o in offsets]
    except (NotImplementedError, TypeError, KeyError, ValueError):  # slow tokenizers: cut by characters
        starts = list(range(0, len(user), 4))
    drop = n - max_length
    while drop < len(starts):
        candidate = user[starts[drop]:]
        n = count(candidate)
        if n <= max_length:
            return candidate, True
        drop += max(1, n - max_length)
    return "", True


def nonfinite_reason(*values: float) -> str | None:
    """The invalid reason for scores that are NaN or infinite (they are still returned as they are)."""
    if all(math.isfinite(v) for v in values):
        return None
    return "the model returned a non-finite score (NaN or inf)"


class HFAdapter:
    """Common state of the transformers adapters: spec, placement, tokenizer, truncation count, metadata."""

    kind = ""

    def __init__(self, spec: ModelSpec, *, device: str, dtype: str, batch_tokens: int | None, seed: int) -> None:
        self.spec = spec.canonical
        self._spec = spec
        self.seed = seed
        self.threads = configure_threads()
        self.placement: Placement = resolve_placement(device, dtype)
        self.source = resolve_source(spec)
        self.tokenizer = load_tokenizer(spec, self.source)
        self.batch_tokens = int(batch_tokens or DEFAULT_BATCH_TOKENS.get(self.placement.device.split(":")[0], 4096))
        self.n_truncated = 0
        self.n_pairs = 0
        self.model: Any = None
        self.max_length = MAX_LENGTH_FALLBACK

    def _model_kwargs(self) -> dict[str, Any]:
        p = self.placement
        kwargs: dict[str, Any] = {"dtype": p.dtype, "device_map": p.device_map}
        if p.attn_implementation:
            kwargs["attn_implementation"] = p.attn_implementation
        return kwargs

    def _load(self, loader: Callable[..., Any], **kwargs: Any) -> Any:
        import torch

        torch.manual_seed(self.seed)
        try:
            model = load_pretrained(self._spec, self.source, loader, **self._model_kwargs(), **kwargs)
        except (ValueError, TypeError) as exc:
            if "attn_implementation" not in str(exc) and "sdpa" not in str(exc).lower():
                raise
            kwargs = {**self._model_kwargs(), **kwargs}
            kwargs.pop("attn_implementation", None)
            model = load_pretrained(self._spec, self.source, loader, **kwargs)
        model.eval()
        self.model = model
        self.max_length = model_max_length(self.tokenizer, model.config, self.source)
        return model

    @property
    def input_device(self) -> Any:
        return self.model.device

    def run_metadata(self) -> dict[str, Any]:
        model = self.model
        config = getattr(model, "config", None)
        return {
            "spec": self.spec,
            "kind": self.kind,
            "model_source": self.source,
            "model_type": getattr(config, "model_type", None),
            "model_class": type(model).__name__ if model is not None else None,
            "n_parameters": sum(p.numel() for p in model.parameters()) if model is not None else None,
            "device": str(self.input_device) if model is not None else self.placement.device,
            "device_map": str(self.placement.device_map),
            "dtype": str(self.placement.dtype).replace("torch.", ""),
            "attn_implementation": getattr(config, "_attn_implementation", None),
            "chat_template_hash": chat_template_hash(self.tokenizer),
            "chat_template": "model" if has_chat_template(self.tokenizer) else "fallback",
            "max_length": self.max_length,
            "batch_tokens": self.batch_tokens,
            "torch_threads": self.threads,
            "seed": self.seed,
            "n_pairs_scored": self.n_pairs,
            "n_truncated": self.n_truncated,
        }
