"""What a reward model saw for one pair: the exact texts its scorer tokenizes, with any truncation marked.

Every adapter builds its inputs in one method, ``input_texts(user, pair)`` (a classifier's chosen and rejected
chats, a judge's two orders, an implicit RM's chat prompt with each response, an embedding model's plain RM
input and responses), and the scorer tokenizes exactly those texts; :func:`render_pair` calls the same method
and the same fitting (the user message cut from the left until the longest input fits the model), so what it
shows cannot drift from what was scored. :func:`rendered_input` does it for a model spec without loading its
weights (the tokenizer and ``config.json`` only, as ``prb plan`` counts tokens). The baselines run no model:
``length`` reads the two responses, ``lexical`` the user's words (:func:`prb_utils.profile.user_text`) and the
responses.

>>> from prb_utils.models.base import PairInput
>>> shown = rendered_input("lexical", PairInput("k", "Cheap tent?", "A cheap tent", "A tent"))
>>> [(t.label, t.text) for t in shown.texts][0], shown.truncated
(("the user's words", 'Cheap tent?'), False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prb_utils.models.base import PairInput, parse_spec
from prb_utils.models.embedding import KEEP, ROLES, EmbeddingRM
from prb_utils.models.kinds import MODEL_KINDS
from prb_utils.models.quiet import quiet_transformers
from prb_utils.models.registry import ModelOptions, load_model
from prb_utils.models.token_counts import token_counter

#: The mark put where an input was cut (:meth:`RenderedText.marked`).
CUT_MARK = "[… cut here …]"


@dataclass(frozen=True)
class RenderedText:
    """One text a model read: its ``label`` (``chosen``, ``order AB (chosen as A)``, ...), the ``text`` as the
    tokenizer received it (chat template applied), ``n_tokens`` (after truncation; None for a baseline) and,
    when it was cut, ``cut_at`` (the character of ``text`` where the cut is) and ``cut`` (what was cut)."""

    label: str
    text: str
    n_tokens: int | None = None
    cut_at: int | None = None
    cut: str = ""

    @property
    def truncated(self) -> bool:
        return bool(self.cut)

    def marked(self, mark: str = CUT_MARK) -> str:
        """``text`` with ``mark`` where it was cut (the text itself when it was not).

        >>> RenderedText("x", "old posts. Question?", cut_at=11, cut="the start").marked()
        'old posts. [… cut here …]Question?'
        """
        if self.cut_at is None:
            return self.text
        return self.text[: self.cut_at] + mark + self.text[self.cut_at:]


@dataclass(frozen=True)
class RenderedInput:
    """Every text one model read for one pair, and a ``note`` on how it reads them."""

    model: str
    kind: str
    texts: tuple[RenderedText, ...]
    note: str = ""

    @property
    def truncated(self) -> bool:
        return any(t.truncated for t in self.texts)

    def as_text(self) -> str:
        """One plain text of every input, each under its label, cuts marked (a CSV cell)."""
        return "\n\n".join(f"### {t.label}\n{t.marked()}" for t in self.texts)


def _cut_user(kept: str, whole: str, context: int) -> str:
    dropped = len(whole) - len(kept)
    if not kept:
        return f"the whole user message ({dropped:,} characters) was dropped to fit {context:,} tokens"
    return f"the first {dropped:,} characters of the user message were dropped to fit {context:,} tokens"


def _added_specials(rm: Any, text: str, ids: Sequence[int]) -> str:
    """The special tokens the tokenizer adds around ``text`` (its BOS, ``[CLS] ... [SEP]``), as words; "" when
    it adds none (or ``ids`` do not hold the text's own tokens whole)."""
    own = list(rm.tokenizer(text, add_special_tokens=False)["input_ids"])
    n = len(ids)
    start = next((i for i in range(n - len(own) + 1) if list(ids[i:i + len(own)]) == own), None) if own else None
    if start is None or len(own) == n:
        return ""
    words = rm.tokenizer.convert_ids_to_tokens(list(ids[:start]) + list(ids[start + len(own):]))
    before, after = " ".join(map(str, words[:start])), " ".join(map(str, words[start:]))
    parts = ([f"{before} before"] if before else []) + ([f"{after} after"] if after else [])
    return f"the tokenizer adds {' and '.join(parts)} each text"


def render_pair(rm: Any, pair: PairInput) -> RenderedInput:
    """What ``rm`` (a loaded adapter, a weightless counter of :func:`~prb_utils.models.token_counts.token_counter`
    or a baseline) reads for ``pair``: its ``input_texts`` for the user message its scorer keeps, each with
    the number of tokens its scorer computes and any cut marked."""
    if not MODEL_KINDS[rm.kind].weights:
        texts = rm.input_texts(pair.prompt, pair)
        return RenderedInput(rm.spec, rm.kind, tuple(RenderedText(label, text) for label, text in
                                                     zip(rm.input_labels, texts, strict=True)), rm.reads)
    if isinstance(rm, EmbeddingRM):
        return _render_apart(rm, pair)
    with rm.tokenizer_lock, quiet_transformers():
        kept, fitted_built, fit_truncated = rm._fitted(pair)
        built = rm._sequences_many([pair])[0]
    seqs = built[0]
    fitted_seqs = fitted_built[0] if isinstance(fitted_built, tuple) else fitted_built   # before the responses' cut
    texts = rm.input_texts(kept, pair)
    context = rm._room() if hasattr(rm, "_room") else rm.max_length
    shown = []
    for label, text, ids, whole in zip(rm.input_labels, texts, seqs, fitted_seqs, strict=True):
        cut_at, cut = None, ""
        if fit_truncated:
            found = text.find(kept) if kept else -1
            cut_at, cut = (found if found >= 0 else None), _cut_user(kept, pair.prompt, context)
        if len(whole) > len(ids):   # the responses alone were too long: the sequence itself was cut
            cut_at = 0 if rm.cut_keeps_end else len(text)
            cut = f"only the {'last' if rm.cut_keeps_end else 'first'} {len(ids):,} tokens were kept"
        shown.append(RenderedText(label, text, len(ids), cut_at, cut))
    template = "its chat template" if rm.tokenizer.chat_template else "the plain 'User: ... Assistant:' format"
    notes = [f"rendered with {template}", _added_specials(rm, texts[0], seqs[0])]
    return RenderedInput(rm.spec, rm.kind, tuple(shown), "; ".join(n for n in notes if n))


def _render_apart(rm: EmbeddingRM, pair: PairInput) -> RenderedInput:
    """An embedding model's texts, each tokenized and cut on its own (no chat, no shared fitting)."""
    shown = []
    with rm.tokenizer_lock, quiet_transformers():
        for label, role, text in zip(rm.input_labels, ROLES, rm.input_texts(pair.prompt, pair), strict=True):
            (ids, cut), = rm._encode_many([text], keep=KEEP[role])
            cut_at, what = None, ""
            if cut:
                left = KEEP[role] == "left"
                cut_at = _kept_from(rm.tokenizer, text, len(ids), left=left)
                what = (f"only the last {len(ids):,} tokens were kept" if left
                        else f"only the first {len(ids):,} tokens were kept")
            shown.append(RenderedText(label, text, len(ids), cut_at, what))
    return RenderedInput(rm.spec, rm.kind, tuple(shown), "plain texts (no chat template), each embedded apart; "
                         "score: the cosine similarity of the RM input and each response")


def _kept_from(tokenizer: Any, text: str, n_kept: int, *, left: bool) -> int:
    """Where in ``text`` a cut to ``n_kept`` tokens (the tokenizer's special tokens among them) falls: the start
    of the first kept token (``left``: the start was dropped) or the end of the last one; the text's start or
    end where the tokenizer gives no offsets."""
    try:
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        specials = len(tokenizer(text, add_special_tokens=True)["input_ids"]) - len(offsets)
    except (NotImplementedError, TypeError, KeyError, ValueError):   # a slow tokenizer: no offsets
        return 0 if left else len(text)
    body = max(1, min(len(offsets), n_kept - specials))
    return int(offsets[len(offsets) - body][0]) if left else int(offsets[body - 1][1])


_COUNTERS: dict[tuple[str, ModelOptions], Any] = {}


def rendered_input(spec: str, pair: PairInput, options: ModelOptions | None = None) -> RenderedInput:
    """What the model ``spec`` (with the options that shape its input: ``judge_mode``, ``judge_template``,
    ``tokenization``) reads for ``pair``, without loading its weights (:func:`render_pair`); the tokenizer of
    each spec and options is loaded once per process. PRBError as loading the model gives for a spec it
    cannot read."""
    options = options or ModelOptions()
    key = (parse_spec(spec).canonical, options)
    if key not in _COUNTERS:
        _COUNTERS[key] = token_counter(spec, options) or load_model(spec)
    return render_pair(_COUNTERS[key], pair)
