"""Shared plumbing for the transformers-backed adapters: loading, special tokens, truncation, metadata.

Loading refuses, with one PRBError sentence, a folder transformers cannot read (unknown ``model_type``,
truncated or pickled weights, no tokenizer) and a checkpoint that lacks weights the kind needs (a causal LM
loaded as ``classifier:`` gets a newly initialised, random head): pass ``allow_untrained_head=True`` to score
with such a head on purpose (the ``minilm`` classifier alias does); the run metadata records
``untrained_head`` and the ``newly_initialized`` weights either way.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models.aliases import ALIASES, resolve_alias
from prb_utils.models.base import ModelSpec
from prb_utils.models.device import Placement, configure_threads, resolve_placement
from prb_utils.models.prompts import TOKENIZATIONS, chat_template_hash, has_chat_template
from prb_utils.models.quiet import quiet_transformers
from prb_utils.schema import ATTENTIONS

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


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.txt", "vocab.json")


def has_tokenizer_files(folder: Path) -> bool:
    """Whether a model folder holds something a tokenizer can load from (names as transformers saves them)."""
    return any(p.is_file() and (p.name.startswith(("tokenizer", "vocab", "spiece", "sentencepiece"))
                                or p.suffix in (".model", ".tiktoken")) for p in folder.iterdir())


def _first_line(exc: BaseException) -> str:
    """The first sentence of an error message, without terminal colours."""
    text = _ANSI.sub("", str(exc)).strip()
    first = (text.splitlines() or [type(exc).__name__])[0]
    return first.split(". ")[0].strip().rstrip(".:") or type(exc).__name__


def folder_problem(exc: BaseException) -> str:
    """What is wrong with a model folder, in a few words, from the error transformers or torch raised."""
    text = _ANSI.sub("", str(exc))
    found = re.search(r"model type `([^`]*)`", text)
    if found:
        return (f"its config.json names the model_type '{found.group(1)}', which transformers does not know "
                "(a newer transformers may)")
    if type(exc).__name__ == "SafetensorError" or "deserializing header" in text:
        return f"its safetensors weights are truncated or corrupt ({_first_line(exc)})"
    if "Weights only load failed" in text or type(exc).__name__ == "UnpicklingError":
        return ("its pickled .bin weights hold Python objects that torch's safe loader refuses (convert them to "
                "safetensors, only if you trust their source)")
    return f"{_first_line(exc)} ({type(exc).__name__})"


def load_pretrained(spec: ModelSpec, source: str, loader: Callable[..., Any], **kwargs: Any) -> Any:
    """``loader(source, **kwargs)`` with "not found / not reachable / unreadable" errors turned into a PRBError.

    From a local folder any loading error is the folder's (unknown model type, truncated or pickled weights,
    missing tokenizer files), except an attention-implementation refusal, which the caller retries.
    """
    try:
        with quiet_transformers():
            return loader(source, **kwargs)
    except PRBError:
        raise
    except Exception as exc:
        if _is_attn_refusal(exc):
            raise
        local = Path(source).is_dir()
        if local:
            raise PRBError(f"Model '{spec.canonical}' could not be loaded from its folder {source}: "
                           f"{folder_problem(exc)}.") from exc
        if not isinstance(exc, _load_errors()):
            raise
        raise PRBError(
            f"Model '{spec.canonical}' could not be loaded: '{source}' is not a usable local folder and the hub "
            f"id is not reachable (offline?) ({type(exc).__name__})."
        ) from exc


def _is_attn_refusal(exc: Exception) -> bool:
    return isinstance(exc, (ValueError, TypeError)) and ("attn_implementation" in str(exc)
                                                         or "sdpa" in str(exc).lower())


def load_tokenizer(spec: ModelSpec, source: str) -> Any:
    from transformers import AutoTokenizer

    folder = Path(source)
    if folder.is_dir() and not has_tokenizer_files(folder):
        raise PRBError(f"Model folder {source} of '{spec.canonical}' has no tokenizer (none of "
                       f"{', '.join(TOKENIZER_FILES[:3])}, ...); save the tokenizer beside the model.")
    tokenizer = load_pretrained(spec, source, AutoTokenizer.from_pretrained)
    if not callable(tokenizer) or not hasattr(tokenizer, "convert_tokens_to_ids"):
        raise PRBError(f"Model '{spec.canonical}' has no usable tokenizer in {source}.")
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token_id is not None:
            tokenizer.pad_token = tokenizer.eos_token
        elif tokenizer.unk_token_id is not None:
            tokenizer.pad_token = tokenizer.unk_token
    return tokenizer


def newly_initialized(info: dict[str, Any]) -> list[str]:
    """Weights transformers initialised at random: missing from the checkpoint or of a mismatched shape."""
    keys = {str(k) for k in info.get("missing_keys") or ()}
    keys |= {str(k[0]) if isinstance(k, (tuple, list)) else str(k) for k in info.get("mismatched_keys") or ()}
    return sorted(keys)


#: The length a RoPE-scaled model's positions were trained at: declared, but no limit on its input.
TRAINED_LENGTH = "rope_scaling original_max_position_embeddings"


def declared_lengths(tokenizer: Any, config: Any, source: str | None = None) -> dict[str, int]:
    """The lengths a model declares, by name: the config's positions (the first of ``max_position_embeddings``,
    ``n_positions``, ...), the tokenizer's ``model_max_length``, a sentence-transformers ``max_seq_length`` when
    the folder has one, and :data:`TRAINED_LENGTH` when the config scales RoPE beyond its training length.

    >>> from types import SimpleNamespace as NS
    >>> declared_lengths(NS(model_max_length=4096), NS(max_position_embeddings=131072,
    ...                  rope_scaling={"original_max_position_embeddings": 8192}))
    {'max_position_embeddings': 131072, 'tokenizer model_max_length': 4096, 'rope_scaling original_max_position_embeddings': 8192}
    """
    found: dict[str, int] = {}
    for attr in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            found[attr] = value
            break
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < 1_000_000:
        found["tokenizer model_max_length"] = limit
    if source:
        st_config = Path(source) / "sentence_bert_config.json"
        if st_config.is_file():
            value = json.loads(st_config.read_text(encoding="utf-8")).get("max_seq_length")
            if isinstance(value, int) and value > 0:
                found["sentence-transformers max_seq_length"] = value
    rope = getattr(config, "rope_scaling", None)
    trained = rope.get("original_max_position_embeddings") if isinstance(rope, dict) else None
    if isinstance(trained, int) and 0 < trained:
        found[TRAINED_LENGTH] = trained
    return found


def model_max_length(tokenizer: Any, config: Any, source: str | None = None) -> int:
    """The longest input the model takes: the smallest of its :func:`declared_lengths` (the config's positions,
    the tokenizer's limit and a sentence-transformers ``max_seq_length``; not the RoPE training length)."""
    found = [v for k, v in declared_lengths(tokenizer, config, source).items() if k != TRAINED_LENGTH]
    return min(found) if found else MAX_LENGTH_FALLBACK


def special_token_ids(tokenizer: Any, probe: str = "hello world") -> tuple[list[int], list[int]]:
    """The ids the tokenizer adds before and after a text (``[CLS]``/``[SEP]``, a BOS, ...), found by
    tokenizing ``probe`` with and without special tokens.

    >>> special_token_ids(lambda text, add_special_tokens: {"input_ids": [1, 7, 8, 2] if add_special_tokens
    ...                                                      else [7, 8]})
    ([1], [2])
    """
    full = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
    body = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    for start in range(len(full) - len(body) + 1):
        if full[start:start + len(body)] == body:
            return full[:start], full[start + len(body):]
    return [], []


def encode_ids(tokenizer: Any, text: str, *, mode: str, specials: tuple[list[int], list[int]],
               continued: bool = False) -> list[int]:
    """Token ids of a rendered RM input. ``mode``: ``always`` (the tokenizer's special tokens, as
    ``tokenizer(text)`` gives them), ``never`` (``add_special_tokens=False``) or ``auto`` (add the tokenizer's
    leading/trailing tokens unless the text's own ids already begin/end with them, so a template that writes
    its BOS gets exactly one). ``continued``: the model continues this text (a prompt), so no trailing tokens."""
    return encode_many(tokenizer, [text], mode=mode, specials=specials, continued=continued)[0]


def encode_many(tokenizer: Any, texts: Sequence[str], *, mode: str, specials: tuple[list[int], list[int]],
                continued: bool = False) -> list[list[int]]:
    """:func:`encode_ids` of every text, in one batch call of the tokenizer (a fast tokenizer encodes the
    batch in Rust, without a Python call per text)."""
    if not texts:
        return []
    if mode == "always" and not continued:
        return [list(ids) for ids in tokenizer(list(texts), add_special_tokens=True)["input_ids"]]
    found = [list(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]
    if mode == "never":
        return found
    prefix, suffix = specials
    suffix = [] if continued else suffix
    if mode == "always":
        return [prefix + ids + suffix for ids in found]
    out = []
    for ids in found:
        head = [] if prefix and ids[: len(prefix)] == prefix else prefix
        tail = [] if suffix and ids[-len(suffix):] == suffix else suffix
        out.append(head + ids + tail)
    return out


def encode(tokenizer: Any, text: str, *, continued: bool = False) -> list[int]:
    """:func:`encode_ids` in ``auto`` mode (``always`` for the fallback format without a chat template)."""
    mode = "auto" if has_chat_template(tokenizer) else "always"
    return encode_ids(tokenizer, text, mode=mode, specials=special_token_ids(tokenizer), continued=continued)


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


def _cut_until_fits(users: Sequence[str], pairs: Sequence[Any], cut: dict[int, tuple[list[int], int]],
                    out: list[Any], refer: list[int], room: int, build_many: Callable[[list[str], list[Any]], list[Any]],
                    length: Callable[[Any], int]) -> None:
    """:func:`fitted`'s loop for every pair of ``cut`` (pair -> its message's token starts and the first cut), each
    round's cuts built in one call: a cut that fits goes to ``out`` (truncated), one that does not moves on by the
    tokens it is over; a pair with no cut left goes to ``refer`` (fitted as :func:`fitted` does)."""
    pending = list(cut)
    while pending:
        texts = [users[i][cut[i][0][cut[i][1]]:] for i in pending]
        again = []
        for i, built in zip(pending, build_many(texts, [pairs[i] for i in pending]), strict=True):
            n = length(built)
            if n <= room:
                out[i] = (built, True)
                continue
            starts, first = cut[i]
            first += max(1, n - room)
            if first < len(starts):
                cut[i] = (starts, first)
                again.append(i)
            else:
                refer.append(i)
        pending = again


def fitted(tokenizer: Any, user: str, build: Callable[[str], Any], length: Callable[[Any], int],
           max_length: int) -> tuple[str, Any, bool]:
    """``(user message, build(user message), truncated)`` for the message :func:`fit_user_message` keeps,
    building each candidate message once (``length`` measures a built value)."""
    build = lru_cache(maxsize=4)(build)
    user, truncated = fit_user_message(tokenizer, user, lambda u: length(build(u)), max_length)
    return user, build(user), truncated


#: Characters per token assumed when a long user message's tail is tokenized alone (:meth:`HFAdapter._fit_many`);
#: then 1.2x the most a call's tails held (1.8x after a tail too short). English text runs at 4-7 characters a token.
TAIL_CHARS_PER_TOKEN = 8.0
#: Tokens the tail holds beyond the model's context, and the last tokens that measure the template's share.
TAIL_MARGIN = 64
PIECE_TOKENS = 16
#: Where a text's tail can be tokenized apart with the same tokens as inside the whole text: a space before a
#: non-space starts a pre-token in byte-level BPE (GPT-2, Llama-3 rules), Metaspace and whitespace pre-tokenizers.
TAIL_START = re.compile(r" (?=\S)")
#: The first tail of a call is checked against :func:`fitted` in the first calls, then in one call of this many.
FIT_CHECKS = 8
FIT_CHECK_EVERY = 8


def nonfinite_reason(*values: float) -> str | None:
    """The invalid reason for scores that are NaN or infinite (they are still returned as they are)."""
    if all(math.isfinite(v) for v in values):
        return None
    return "the model returned a non-finite score (NaN or inf)"


class HFAdapter:
    """Common state of the transformers adapters: spec, placement, tokenizer, truncation count, metadata."""

    kind = ""
    unused_weights: tuple[str, ...] = ()  # prefixes of weights the adapter never uses (missing ones are fine)
    reference_specials = "always"   # special tokens under ``--tokenization reference`` (see special_mode)
    cut_keeps_end = False   # an input too long even with no user message keeps its start (a judge: its end)

    def __init__(self, spec: ModelSpec, *, device: str, dtype: str, batch_tokens: int | None, seed: int,
                 tokenization: str = "auto", allow_untrained_head: bool = False,
                 attention: str = ATTENTIONS[0]) -> None:
        self.threads = configure_threads()
        self.placement: Placement = resolve_placement(device, dtype, attention)
        self._setup_weightless(spec, seed=seed, tokenization=tokenization, allow_untrained_head=allow_untrained_head)
        self.batch_tokens = int(batch_tokens or DEFAULT_BATCH_TOKENS.get(self.placement.device.split(":")[0], 4096))

    def _setup_weightless(self, spec: ModelSpec, *, seed: int = 0, tokenization: str = "auto",
                          allow_untrained_head: bool = False) -> None:
        """What every adapter of a model sets up before (or without: a server engine, a token counter) its
        weights: the spec, the tokenizer and its state, the counters."""
        if tokenization not in TOKENIZATIONS:
            raise PRBError(f"Unknown tokenization '{tokenization}'; use {' or '.join(TOKENIZATIONS)}.")
        self.spec = spec.canonical
        self._spec = spec
        self.seed = seed
        self.tokenization = tokenization
        self.allow_untrained_head = allow_untrained_head
        self.untrained: list[str] = []
        self.source = resolve_source(spec)
        self.tokenizer = load_tokenizer(spec, self.source)
        self.n_truncated = 0
        self.n_pairs = 0
        self.model: Any = None
        self.max_length = MAX_LENGTH_FALLBACK
        self._specials: tuple[list[int], list[int]] | None = None
        self.tokenizer_lock = threading.RLock()
        self._shares_prompt = True   # encode_after: tokenize a shared prompt once (until a check says otherwise)
        self._fits_tails = bool(getattr(self.tokenizer, "is_fast", False))   # _fit_many (until a check says otherwise)
        self._chars_per_token = TAIL_CHARS_PER_TOKEN
        self.fit_counts = {"tail": 0, "whole": 0, "reference": 0, "checked": 0, "calls": 0}

    def _read_context(self) -> None:
        """The model's configuration and context length from its ``config.json`` alone (no weights read)."""
        from transformers import AutoConfig

        self.config = load_pretrained(self._spec, self.source, AutoConfig.from_pretrained)
        self.max_length = model_max_length(self.tokenizer, self.config, self.source)

    def special_mode(self) -> str:
        """How :meth:`encode` treats special tokens (see :func:`encode_ids`): the fallback format always takes
        the tokenizer's; ``reference`` always adds them, except for a judge (the reference judge runs vLLM's
        ``LLM.chat``, which adds none); ``auto`` adds them once."""
        if not has_chat_template(self.tokenizer):
            return "always"
        if self.tokenization == "reference":
            return self.reference_specials
        return "auto"

    def encode(self, text: str, *, continued: bool = False) -> list[int]:
        """Token ids of a rendered RM input (``continued``: a prompt the model goes on from)."""
        return self.encode_many([text], continued=continued)[0]

    def encode_many(self, texts: Sequence[str], *, continued: bool = False) -> list[list[int]]:
        """:meth:`encode` of every text in one batch call of the tokenizer."""
        if self._specials is None:
            self._specials = special_token_ids(self.tokenizer)
        return encode_many(self.tokenizer, texts, mode=self.special_mode(), specials=self._specials,
                           continued=continued)

    def encode_after(self, prompts: Sequence[str], texts: Sequence[Sequence[str]]) -> list[list[list[int]]] | None:
        """:meth:`encode_many` of each group of ``texts``, whose texts all begin with the group's rendered
        prompt (a classifier's chosen and rejected chats), tokenizing each prompt once, in one batch call: a
        fast tokenizer splits its input at special tokens and encodes the pieces apart, so a prompt up to
        its last special token has the same ids in every text. A tokenizer that treats a text's first piece
        apart (a ``Metaspace`` pre-tokenizer with ``prepend_scheme="first"``) would differ: the first group
        of every call is checked against :meth:`encode_many`, and on a difference this adapter stops sharing.
        None where sharing is off or does not apply (the caller then tokenizes whole)."""
        if not texts or not self._shares_prompt or self.special_mode() == "always":
            return None
        specials = [str(t.content) for t in self.tokenizer.added_tokens_decoder.values() if t.special and t.content]
        cuts = [max((p.rfind(t) + len(t) for t in specials if t in p), default=0) for p in prompts]
        if min(cuts) <= 0 or not all(text.startswith(p) for p, g in zip(prompts, texts, strict=True) for text in g):
            return None
        if self._specials is None:
            self._specials = special_token_ids(self.tokenizer)
        pieces = [p[:c] for p, c in zip(prompts, cuts, strict=True)]
        pieces += [text[c:] for c, g in zip(cuts, texts, strict=True) for text in g]
        ids = self.tokenizer(pieces, add_special_tokens=False)["input_ids"]
        heads, tails = ids[: len(prompts)], iter(ids[len(prompts):])
        joined = [[list(head) + list(next(tails)) for _ in g] for head, g in zip(heads, texts, strict=True)]
        out = [encode_many(lambda _texts, add_special_tokens, j=j: {"input_ids": j}, g, mode=self.special_mode(),
                           specials=self._specials) for j, g in zip(joined, texts, strict=True)]
        if out[0] != self.encode_many(texts[0]):
            self._shares_prompt = False   # this tokenizer encodes a text's first piece apart
            return None
        return out

    def _fit_many(self, pairs: Sequence[Any], room: int, build_many: Callable[[list[str], list[Any]], list[Any]],
                  length: Callable[[Any], int], *, tails_left: int = 2) -> list[tuple[Any, bool]]:
        """``(build(user message), truncated)`` of every pair, the user message fitted to ``room`` tokens exactly
        as :func:`fitted` fits it (cut from the left at a token of the message tokenized alone, the first cut
        where ``length(built) <= room``), with far less tokenizing. ``build_many(users, pairs)`` builds each
        pair's value for a user message in one batch call.

        A message too long for ``room`` by its characters alone never has its head tokenized: only a tail that
        holds more than ``room`` tokens, from a space before a word (where tokenizers start a piece, so the
        tail's tokens are the whole message's last tokens), with offsets. The tokens the template and
        responses add come from a short piece of the tail built as the model sees it, which places the first
        cut as the whole count would; each cut is then built and measured as :func:`fitted` does. The other
        pairs are built whole in one call, and those found too long are cut from the message's own tokens
        (no whole build again). The first tail of a call is checked against :func:`fitted` (in the first
        :data:`FIT_CHECKS` calls, then one call in :data:`FIT_CHECK_EVERY`); on a difference this adapter stops
        fitting tails (its tokenizer treats a text's first piece apart) and
        fits them as :func:`fitted` does. A pair whose tail does not place its cut also goes that way."""
        users = [p.prompt for p in pairs]
        out: list[tuple[Any, bool] | None] = [None] * len(pairs)
        tail_chars = int((room + TAIL_MARGIN) * self._chars_per_token)
        starts_at: dict[int, int] = {}   # pair -> where its tail starts (0: the whole message)
        whole: list[int] = []
        for i, user in enumerate(users):
            found = TAIL_START.search(user, len(user) - tail_chars) if tails_left > 0 and self._fits_tails and \
                len(user) > tail_chars else None
            if found is not None and found.start() > 0:
                starts_at[i] = found.start()
            else:
                whole.append(i)
        counted: dict[int, int] = {}   # a whole message too long: the length of its whole build
        for i, built in zip(whole, build_many([users[i] for i in whole], [pairs[i] for i in whole]) if whole else [],
                            strict=True):
            n = length(built)
            if n <= room:
                out[i] = (built, False)
            else:
                counted[i] = n
                starts_at[i] = 0
        if not starts_at:
            return out   # type: ignore[return-value]
        self.fit_counts["whole"] += len(counted)
        order = list(starts_at)
        self.fit_counts["calls"] += 1
        try:
            enc = self.tokenizer([users[i][starts_at[i]:] for i in order], add_special_tokens=False,
                                 return_offsets_mapping=True)["offset_mapping"]
        except (NotImplementedError, TypeError, KeyError, ValueError):   # no offsets: fitted's own way
            enc = None
        refer: list[int] = []
        cut: dict[int, tuple[list[int], int]] = {}   # pair -> (absolute token starts, index of the first cut)
        if enc is None:
            refer = order
        else:
            starts = {i: [starts_at[i] + int(o[0]) for o in offsets] for i, offsets in zip(order, enc, strict=True)}
            tailed = [i for i in order if starts_at[i] > 0]
            extra = dict.fromkeys(counted, 0)
            extra.update({i: counted[i] - len(starts[i]) for i in counted})   # exact: the whole message's tokens
            pieces = [i for i in tailed if len(starts[i]) > room + TAIL_MARGIN]
            if pieces:   # what the template and responses add: a short piece built less its own tokens
                texts = [users[i][starts[i][-PIECE_TOKENS]:] for i in pieces]
                alone = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
                built = build_many(texts, [pairs[i] for i in pieces])
                extra.update({i: length(b) - len(a) for i, b, a in zip(pieces, built, alone, strict=True)})
            short = []
            for i in order:
                first = extra[i] + len(starts[i]) - room if i in extra else -1
                if 0 <= first < len(starts[i]):
                    cut[i] = (starts[i], first)
                elif starts_at[i] > 0:   # a tail too short to place the cut: a longer one (at last the whole message)
                    short.append(i)
                else:
                    refer.append(i)
            if tailed:   # the next tails: 1.2x the characters per token seen here (1.8x after a short one)
                seen = max(((len(users[i]) - starts_at[i]) / max(1, len(starts[i])) for i in tailed), default=0.0)
                self._chars_per_token = min(4 * TAIL_CHARS_PER_TOKEN, max(1.0, 1.2 * seen) * (1.5 if short else 1))
            if short:
                for i, found in zip(short, self._fit_many([pairs[i] for i in short], room, build_many, length,
                                                          tails_left=tails_left - 1), strict=True):
                    out[i] = found
        _cut_until_fits(users, pairs, cut, out, refer, room, build_many, length)
        checked = next((i for i in order if i in cut and starts_at[i] > 0 and out[i] is not None), None)
        passed = self.fit_counts["checked"]
        if checked is not None and (passed < FIT_CHECKS or self.fit_counts["calls"] % FIT_CHECK_EVERY == 0):
            self.fit_counts["checked"] += 1
            _, built, truncated = fitted(self.tokenizer, users[checked], lambda u: build_many([u], [pairs[checked]])[0],
                                         length, room)
            if (built, truncated) != out[checked]:
                self._fits_tails = False   # this tokenizer's tail tokens differ from the whole text's
                refer = sorted(set(refer) | {i for i in cut if starts_at[i] > 0})
        self.fit_counts["tail"] += sum(1 for i in cut if starts_at[i] > 0 and i not in refer)
        self.fit_counts["reference"] += len(set(refer))
        for i in sorted(set(refer)):
            _, built, truncated = fitted(self.tokenizer, users[i], lambda u, i=i: build_many([u], [pairs[i]])[0],
                                         length, room)
            out[i] = (built, truncated)
        return out   # type: ignore[return-value]

    def score_pairs(self, pairs: Sequence[Any]) -> list[Any]:
        """Scores of ``pairs``: :meth:`run` of :meth:`prepare`. The scorer calls the two apart, so that the
        host work of the next chunk (tokens, batch plan) overlaps with the device work of this one."""
        return self.run(self.prepare(pairs))

    def prepare(self, pairs: Sequence[Any]) -> Any:
        """The host work of scoring ``pairs`` (token ids, truncation, batch plan), safe to run in another
        thread while :meth:`run` computes an earlier chunk: it holds the tokenizer's lock."""
        with self.tokenizer_lock:
            return self._prepare(pairs)

    def _prepare(self, pairs: Sequence[Any]) -> Any:   # pragma: no cover - every adapter defines it
        raise NotImplementedError

    def run(self, prepared: Any) -> list[Any]:   # pragma: no cover - every adapter defines it
        raise NotImplementedError

    def _model_kwargs(self) -> dict[str, Any]:
        p = self.placement
        kwargs: dict[str, Any] = {"dtype": p.dtype, "device_map": p.device_map}
        if p.attn_implementation:
            kwargs["attn_implementation"] = p.attn_implementation
        return kwargs

    def _load(self, loader: Callable[..., Any], **kwargs: Any) -> Any:
        import torch

        torch.manual_seed(self.seed)
        kwargs["output_loading_info"] = True
        try:
            model, info = load_pretrained(self._spec, self.source, loader, **self._model_kwargs(), **kwargs)
        except (ValueError, TypeError) as exc:
            if not _is_attn_refusal(exc):
                raise
            kwargs = {**self._model_kwargs(), **kwargs}
            kwargs.pop("attn_implementation", None)
            model, info = load_pretrained(self._spec, self.source, loader, **kwargs)
        self.untrained = [k for k in newly_initialized(info) if not k.startswith(self.unused_weights)]
        self._check_trained(type(model).__name__)
        model.eval()
        self.model = model
        self.max_length = model_max_length(self.tokenizer, model.config, self.source)
        return model

    def _check_trained(self, model_class: str) -> None:
        """PRBError when loading initialised weights at random, unless ``allow_untrained_head``."""
        if not self.untrained or self.allow_untrained_head:
            return
        shown = ", ".join(self.untrained[:4]) + (f" and {len(self.untrained) - 4} more" if len(self.untrained) > 4
                                                 else "")
        raise PRBError(
            f"Model '{self.spec}' is not a {self.kind} checkpoint: loading it as {model_class} leaves the weights "
            f"{shown} newly initialised at random, so use a checkpoint made for this kind, or pass "
            "allow_untrained_head=True (--allow-untrained-head) to score with a random head on purpose."
        )

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
            "tokenization": self.tokenization,
            "special_tokens": self.special_mode(),
            "untrained_head": bool(self.untrained),
            "newly_initialized": list(self.untrained),
        }
