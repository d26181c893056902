"""Token counts of the RM inputs before any model is loaded: the adapters' own tokenization, weights never read.

:func:`token_counter` gives, for a ``classifier:``, ``judge:``, ``implicit:`` or ``embedding:`` spec, an object
built like the adapter (the same tokenizer, chat template, special tokens and truncation to the model's
context, from the tokenizer and ``config.json`` alone) whose :meth:`~TokenCounting.count` says per pair how many
tokens the scorer's forward passes take:

- decoders (judge in ``logprob`` mode, implicit, a classifier with a decoder's ``score`` head) run the prefix
  that a pair's sequences share once, on the prompt cache (:class:`~prb_utils.models.lm.Group`): ``computed``
  is the shared prefix plus each sequence's continuation (a judge's two orders, a classifier's or implicit
  RM's chosen and rejected);
- an encoder classifier, a judge in ``generate`` mode (prompt tokens only; it generates up to
  :data:`~prb_utils.models.judge.MAX_NEW_TOKENS` more per order) and an embedding model run every sequence
  whole (an embedding model each of the pair's distinct texts: RM input, chosen, rejected).

``longest`` is the longest sequence before truncation, so a caller can compare it with the model's
:func:`~prb_utils.models.hf.declared_lengths`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.models.base import ModelSpec, PairInput, parse_spec
from prb_utils.models.classifier import ClassifierRM
from prb_utils.models.embedding import EmbeddingRM
from prb_utils.models.hf import HFAdapter, declared_lengths
from prb_utils.models.implicit import ImplicitRM
from prb_utils.models.judge import MAX_NEW_TOKENS, MODES, JudgeRM
from prb_utils.models.kinds import MODEL_KINDS, load_class
from prb_utils.models.lm import Group
from prb_utils.models.prompts import load_judge_template
from prb_utils.models.quiet import quiet_transformers
from prb_utils.models.registry import ModelOptions

PROMPT_CACHE = "prompt cache"
WHOLE = "none"


@dataclass(frozen=True)
class PairTokens:
    """One pair's RM inputs as the scorer computes them: ``input_tokens`` (every sequence whole, after
    truncation), ``computed`` (after prefix sharing), ``longest`` (the longest sequence before truncation);
    ``attended``: the keys the computed tokens attend, summed (a token at position i of a causal decoder attends
    i + 1; an encoder's every token attends the whole text), the part of the cost that grows with length."""

    input_tokens: int
    computed: int
    longest: int
    truncated: bool
    attended: int = 0


#: Position of the mean token of the forward pass a rate is measured on (``bench/gpu_throughput.py``'s plain
#: forward pass runs 2,048-token sequences).
RATE_POSITION = 1024


def attention_share(config: Any) -> float:
    """Attention's cost per attended key relative to a token's weight cost, from a decoder's ``config.json``:
    a token costs 2 x the body's parameters (embeddings and head aside) in FLOPs plus 4 x layers x hidden per key
    it attends (scores and weighted values), so a token at position i costs ``1 + share * i`` weight units.
    0 where the config does not say its shape (the cost is then linear in tokens, as before).

    >>> from types import SimpleNamespace as NS
    >>> round(attention_share(NS(num_hidden_layers=32, hidden_size=4096, intermediate_size=14336,
    ...                          num_attention_heads=32, num_key_value_heads=8)) * 1e6, 1)   # Llama-3.1-8B
    37.6
    """
    layers, hidden = getattr(config, "num_hidden_layers", None), getattr(config, "hidden_size", None)
    if not isinstance(layers, int) or not isinstance(hidden, int) or layers < 1 or hidden < 1:
        return 0.0
    inter = getattr(config, "intermediate_size", None) or 4 * hidden
    heads = getattr(config, "num_attention_heads", None) or 1
    kv = getattr(config, "num_key_value_heads", None) or heads
    kv_dim = hidden * kv // heads
    body = layers * (2 * hidden * hidden + 2 * hidden * kv_dim + 3 * hidden * inter)
    return 2.0 * layers * hidden / body


def equivalent_tokens(tokens: int, attended: int, share: float) -> float:
    """Tokens at the cost of the rate's own pass (:data:`RATE_POSITION`): ``tokens + share * attended`` weight
    units, over a rate token's ``1 + share * RATE_POSITION``. Short inputs cost less than a flat count, long
    ones more (about 1.5x at 35k tokens for the 8B shape)."""
    return (tokens + share * attended) / (1 + share * RATE_POSITION)


def attended_keys(seqs: Sequence[Sequence[int]], shared: int) -> int:
    """Keys the computed tokens attend in a causal decoder: the shared prefix once (positions 0..shared-1),
    then each sequence's continuation (positions shared..len-1); token i attends i + 1 keys.

    >>> attended_keys([(1, 2, 3), (1, 2, 4, 5)], 2)   # prefix 1+2, continuations 3 and 3+4
    13
    """
    def upto(n: int) -> int:
        return n * (n + 1) // 2

    return upto(shared) + sum(upto(len(s)) - upto(shared) for s in seqs)


def shared_count(seqs: Sequence[Sequence[int]], need_from: Sequence[int]) -> int:
    """Tokens a decoder computes for sequences run on their shared prefix's cache: the prefix once, then each
    continuation (:attr:`~prb_utils.models.lm.Group.shared`).

    >>> shared_count([(1, 2, 3, 4), (1, 2, 5)], [3, 2])
    5
    """
    n = Group(tuple(tuple(s) for s in seqs), tuple(need_from)).shared
    return n + sum(len(s) - n for s in seqs)


class TokenCounting(HFAdapter):
    """What the weightless counters share: the adapter's tokenizer and context without its weights."""

    sharing = PROMPT_CACHE

    def _weightless(self, spec: ModelSpec, tokenization: str) -> None:
        self._setup_weightless(spec, tokenization=tokenization)
        self._read_context()

    @property
    def declared(self) -> dict[str, int]:
        """The model's declared lengths (:func:`~prb_utils.models.hf.declared_lengths`)."""
        return declared_lengths(self.tokenizer, self.config, self.source)

    @property
    def context(self) -> int:
        """The longest sequence the scorer feeds this model (longer inputs are cut)."""
        return self.max_length

    def count(self, pairs: Sequence[PairInput]) -> list[PairTokens]:
        """Per pair, its tokens as the adapter would build and the scorer compute them."""
        context = self.max_length
        self.max_length = sys.maxsize // 2   # whole inputs first: their length is what the warnings compare
        try:
            with quiet_transformers():   # no "longer than the maximum" notice per long text: the plan counts them
                whole = self._sequences_many(pairs)
        finally:
            self.max_length = context
        longest_of = [max(len(s) for s in built[0]) for built in whole]
        long = [i for i, n in enumerate(longest_of) if n > self.context]
        with quiet_transformers():   # the adapter's own fitting: the user message cut from the left
            for i, built in zip(long, self._sequences_many([pairs[i] for i in long]) if long else [], strict=True):
                whole[i] = built
        out = []
        for built, longest in zip(whole, longest_of, strict=True):
            seqs, truncated = built[0], bool(built[-1])
            shared = Group(tuple(tuple(x) for x in seqs), tuple(self._need_from(built))).shared \
                if self.sharing == PROMPT_CACHE else 0
            computed = shared + sum(len(x) - shared for x in seqs)
            out.append(PairTokens(sum(map(len, seqs)), computed, longest, truncated, attended_keys(seqs, shared)))
        return out

    @property
    def attention(self) -> float:
        """:func:`attention_share` of this model's config."""
        return attention_share(self.config)

    def _need_from(self, built: tuple[Any, ...]) -> list[int]:
        return [len(s) - 1 for s in built[0]]   # the last position's state (a verdict, a score head)


class JudgeTokens(TokenCounting, JudgeRM):
    """A judge's two orders per pair (:class:`~prb_utils.models.judge.JudgeRM`), without its weights."""

    def __init__(self, spec: ModelSpec, *, judge_mode: str = "logprob", judge_template: str | None = None,
                 tokenization: str = "auto", **_: Any) -> None:
        if judge_mode not in MODES:
            raise PRBError(f"Unknown judge mode '{judge_mode}'; use logprob or generate.")
        self.template = load_judge_template(judge_template)
        self.mode = judge_mode
        self.max_new_tokens = MAX_NEW_TOKENS
        self._weightless(spec, tokenization)
        self.sharing = PROMPT_CACHE if judge_mode == "logprob" else WHOLE

    @property
    def context(self) -> int:
        return self._room()   # generate mode keeps room for the answer


class ImplicitTokens(TokenCounting, ImplicitRM):
    """Chosen and rejected after the chat prompt (:class:`~prb_utils.models.implicit.ImplicitRM`)."""

    def __init__(self, spec: ModelSpec, *, tokenization: str = "auto", **_: Any) -> None:
        self._weightless(spec, tokenization)

    def _need_from(self, built: tuple[Any, ...]) -> list[int]:
        return [max(0, f - 1) for f in built[1]]   # from the position before the first response token


class ClassifierTokens(TokenCounting, ClassifierRM):
    """Chosen and rejected chats (:class:`~prb_utils.models.classifier.ClassifierRM`); a decoder's ``score``
    head runs them on the prompt cache, an encoder whole."""

    def __init__(self, spec: ModelSpec, *, tokenization: str = "auto", **_: Any) -> None:
        self._weightless(spec, tokenization)
        self.sharing = PROMPT_CACHE if has_decoder_head(self.config) else WHOLE


def has_decoder_head(config: Any) -> bool:
    """Whether ``AutoModelForSequenceClassification`` builds a decoder's ``score`` head for ``config`` (what
    :class:`~prb_utils.models.classifier.ClassifierRM` checks on the loaded model): the model is built on the
    meta device, so no weight is read or allocated."""
    import torch
    from transformers import AutoModelForSequenceClassification

    with torch.device("meta"), quiet_transformers():
        model = AutoModelForSequenceClassification.from_config(config)
    return getattr(model, "score", None) is not None and not getattr(config, "is_encoder_decoder", False)


class EmbeddingTokens(TokenCounting, EmbeddingRM):
    """The RM input and both responses, each embedded whole (:class:`~prb_utils.models.embedding.EmbeddingRM`:
    the tokenizer's special tokens, cut to the model's maximum)."""

    sharing = WHOLE

    def __init__(self, spec: ModelSpec, *, tokenization: str = "auto", **_: Any) -> None:
        self._weightless(spec, "auto")   # an embedding model always takes the tokenizer's own special tokens

    def count(self, pairs: Sequence[PairInput]) -> list[PairTokens]:
        """Per pair its texts' tokens (``input_tokens``) and, as ``computed``, those of its texts no pair before
        it in ``pairs`` has: the scorer embeds each distinct text of a chunk once (twin pairs share the question
        and both answers), so ``pairs`` stands for one chunk."""
        texts = [list(dict.fromkeys([("prompt", p.prompt), ("response", p.chosen), ("response", p.rejected)]))
                 for p in pairs]
        flat = [text for group in texts for _, text in group]
        with quiet_transformers():
            lengths = iter([len(ids) for ids in self.tokenizer(flat, add_special_tokens=True)["input_ids"]] if flat
                           else [])
        out = []
        seen: set[tuple[str, str]] = set()
        for group in texts:
            found = [next(lengths) for _ in group]
            kept = [min(n, self.max_length) for n in found]
            new = sum(n for n, text in zip(kept, group, strict=True) if text not in seen)
            both_ways = sum(n * n for n, text in zip(kept, group, strict=True) if text not in seen)
            seen.update(group)
            out.append(PairTokens(sum(kept), new, max(found), max(found) > self.max_length, both_ways))
        return out


def token_counter(spec: str, options: ModelOptions | None = None) -> TokenCounting | None:
    """The weightless token counter of ``spec`` (its kind's :attr:`~prb_utils.models.kinds.ModelKind.counter`;
    None for the baselines, which run no model) with the options that shape its inputs (``judge_mode``,
    ``judge_template``, ``tokenization``); PRBError as :func:`~prb_utils.models.load_model` gives for a spec,
    folder, tokenizer or config it cannot read."""
    parsed = parse_spec(spec)
    kind = MODEL_KINDS[parsed.kind]
    if kind.counter is None:
        return None
    with quiet_transformers():
        return load_class(kind.counter)(parsed, **(options or ModelOptions()).for_kind(kind.name))
