"""Profile conditions: which of the user's past posts reach a reward model, and how they are shown.

Conditions: ``none`` (question only, as the benchmark's reference scripts do), ``top{K}`` (the K posts most
relevant to the question, BM25 by default), ``full`` (every post), and the diagnostic oracle ``rubric``: the
user's rubric aspects themselves are shown (an upper bound, never a benchmark result; see :data:`ORACLE_CONDITIONS`).

Leakage guard: :func:`rm_user_message` reads only the question and the posts' ``category`` and ``text``
through :func:`rm_visible_fields`; rubric aspects, their evidence and reasons, and the narrative are the
answer key and never reach a reward model under any other condition, whatever the options. Under
``rubric`` only the aspects' text is shown (never their evidence or reason, nor the narrative).

>>> record = {"question": "Best pan for eggs?", "profile": [{"id": "p1", "category": "cooking",
...           "text": "Cheap nonstick pans?"}], "narrative": "SECRET", "rubric_aspects": []}
>>> print(rm_user_message(record, "full"))
Here are questions this user asked before:
- [cooking] Cheap nonstick pans?
<BLANKLINE>
Question: Best pan for eggs?
>>> rm_user_message(record, "none")
'Best pan for eggs?'
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from prb_utils import probes as probe_registry
from prb_utils.bm25 import bm25_retrieve, least_retrieve, top_indices
from prb_utils.errors import PRBError
from prb_utils.schema import ORACLE_CONDITIONS, stable_hash

PROFILE_HEADER = "Here are questions this user asked before:"
QUESTION_PREFIX = "Question: "
ORACLE_HEADER = "This user expects an answer that:"
_CONDITION = re.compile(r"^(none|full|rubric|top([0-9]+))$")
_DIGITS = re.compile(r"[0-9]+")
SEED_MAX = 2**32 - 1   # numpy's and torch's seeding take 0 .. 2**32 - 1


@dataclass(frozen=True)
class ProfileCondition:
    """A parsed profile condition: ``k`` is None for ``full``, 0 for ``none``; ``probe`` names the personalization
    probe (:data:`prb_utils.probes.PROBES`) applied to the records, None for the benchmark's own records;
    ``retriever`` and ``retriever_seed`` pick a top{K} condition's posts when it is spelled with them
    (``top3:random:3``; None: the command's ``--retriever``/``--seed``). ``name`` is the condition the store and
    every table name (``top3``, ``top3+swap``); the retriever is a fact of the job, shown in its label
    (``lexical [random, retriever_seed=3]``), so a store written before keeps its job keys. ``spelling`` gives the
    whole condition back as it is written."""

    name: str
    k: int | None
    probe: str | None = None
    retriever: str | None = None
    retriever_seed: int | None = None

    @property
    def oracle(self) -> bool:
        """True for ``rubric``: the RM sees the answer key (a diagnostic, never a benchmark result)."""
        return self.name in ORACLE_CONDITIONS

    @property
    def retrieves(self) -> bool:
        """True for ``top{K}`` (and its probes): a retriever picks the posts; none, full and rubric pick none."""
        return bool(self.k) and not self.oracle

    @property
    def base(self) -> str:
        """The condition without its probe (``top3+swap`` -> ``top3``)."""
        return self.name.partition("+")[0]

    @property
    def spelling(self) -> str:
        """The condition as written on a command line, its retriever included (``top3:random:3+swap``).

        >>> parse_condition("TOP3:random:3+swap").spelling, parse_condition("full").spelling
        ('top3:random:3+swap', 'full')
        >>> parse_condition("top3:Dense:BAAI/bge-small-en-v1.5").spelling   # a folder or hub id keeps its case
        'top3:dense:BAAI/bge-small-en-v1.5'
        """
        picked = "".join(f":{part}" for part in (self.retriever, self.retriever_seed) if part is not None)
        return f"{self.base}{picked}" + (f"+{self.probe}" if self.probe else "")


def parse_condition(text: str | ProfileCondition) -> ProfileCondition:
    """Parse ``none``, ``full`` or ``top{K}`` (K >= 1); a ``top{K}`` may name its retriever after ``:`` (``bm25``,
    ``least``, ``random`` with an optional ``:SEED``, ``dense:NAME``); any but the oracle ``rubric`` may end in
    ``+PROBE`` (a personalization probe of :mod:`prb_utils.probes`).

    >>> parse_condition("top3")
    ProfileCondition(name='top3', k=3, probe=None, retriever=None, retriever_seed=None)
    >>> parse_condition("top3+swap").probe, parse_condition("top3:random:3").retriever_seed
    ('swap', 3)
    >>> parse_condition("top3+retest-bfloat16").name   # a backend retest (prb_utils.probes.backend_variant)
    'top3+retest-bfloat16'
    """
    if isinstance(text, ProfileCondition):
        return text
    written, plus, probe_name = str(text).strip().partition("+")
    probe_name = probe_name.lower()
    base_text, colon, picked = written.partition(":")
    base_text = base_text.lower()
    if plus:
        base = parse_condition(written)
        if base.oracle or probe_registry.find_probe(probe_name) is None:
            raise PRBError(f"Unknown profile condition '{text}'; a probe follows none, full or topK after '+': "
                           f"one of {', '.join(probe_registry.PROBES)}, or {probe_registry.backend_spellings()} "
                           "(e.g. top3+swap).")
        found = probe_registry.find_probe(probe_name)
        needs = found.needs_posts
        if needs and (base.k == 0 or (base.k is not None and needs > base.k)):
            what = (f"leaves out the post shown at position {needs}" if found.leaves_out else
                    f"changes nothing unless at least {needs} post{'s are' if needs > 1 else ' is'} shown")
            raise PRBError(f"Profile condition '{text}': {probe_name} {what}, but {base.name} shows "
                           f"{'no post' if base.k == 0 else f'at most {base.k}'} (e.g. top3+{probe_name}).")
        return replace(base, name=f"{base.name}+{probe_name}", probe=probe_name)
    match = _CONDITION.match(base_text)
    if not match or (match.group(2) is not None and int(match.group(2)) < 1):
        raise PRBError(f"Unknown profile condition '{text}'; use none, full or topK with K >= 1 (e.g. top3).")
    name = match.group(1)
    if colon:
        if not name.startswith("top"):
            raise PRBError(f"Profile condition '{text}' names a retriever, but only topK retrieves posts "
                           f"(e.g. top3:random:3).")
        return ProfileCondition(name, int(match.group(2)), None, *_retriever_part(picked, text))
    if name == "none":
        return ProfileCondition("none", 0)
    if name == "full":
        return ProfileCondition("full", None)
    if name == "rubric":
        return ProfileCondition("rubric", 0)
    return ProfileCondition(name, int(match.group(2)))


def _retriever_part(picked: str, text: Any) -> tuple[str, int | None]:
    """``(retriever, seed)`` of the part of a condition after ``topK:`` (``random:3`` -> ``("random", 3)``); the
    retriever's name is read in any case, the folder or hub id after ``dense:`` as written.

    >>> _retriever_part("Dense:BAAI/bge-small-en-v1.5", "top3:Dense:BAAI/bge-small-en-v1.5")
    ('dense:BAAI/bge-small-en-v1.5', None)
    """
    method, colon, rest = picked.partition(":")
    method = method.lower()
    spec, seed = (f"{method}{colon}{rest}", None) if method != "random" else (method, rest if colon else None)
    known = spec in RETRIEVERS or (method == "dense" and rest.strip() != "")
    if not known:
        raise PRBError(f"Unknown retriever in profile condition '{text}'; after topK: use one of "
                       f"{', '.join(RETRIEVERS)}, random with a seed as random:SEED (e.g. top3:random:3).")
    if seed is None:
        return spec, None
    try:
        return spec, parse_seed(seed)
    except PRBError as bad:
        raise PRBError(f"Profile condition '{text}' has a bad seed: {bad} "
                       f"(e.g. top3:random:3).") from None


def parse_seed(text: str) -> int:
    """A seed as written on a command line or in a condition: digits 0-9 only, from 0 to :data:`SEED_MAX`;
    PRBError in one sentence for anything else (an empty text, a sign, ``²``, ``1_0``, 26 digits).

    >>> parse_seed("42"), parse_seed("4294967295")
    (42, 4294967295)
    >>> parse_seed("²")
    Traceback (most recent call last):
    ...
    prb_utils.errors.PRBError: expected a seed of digits 0-9 from 0 to 4294967295, got '²'
    """
    text = str(text)
    if not _DIGITS.fullmatch(text) or len(text.lstrip("0")) > len(str(SEED_MAX)) or int(text) > SEED_MAX:
        raise PRBError(f"expected a seed of digits 0-9 from 0 to {SEED_MAX}, got '{text}'")
    return int(text)


Retriever = Callable[[str, Sequence[str], int], list[int]]
Embedder = Callable[[list[str]], Any]


def random_retriever(seed: int = 0) -> Retriever:
    """``k`` posts drawn uniformly at random, the same for the same (seed, question, posts) on every run.

    >>> pick = random_retriever(seed=1)
    >>> pick("q", ["a", "b", "c", "d"], 2) == pick("q", ["a", "b", "c", "d"], 2)
    True
    """

    def retrieve(question: str, posts: Sequence[str], k: int) -> list[int]:
        if k >= len(posts):
            return list(range(len(posts)))
        rng = random.Random(stable_hash([seed, question, list(posts)]))
        return sorted(rng.sample(range(len(posts)), k))

    return retrieve


RETRIEVERS = ("bm25", "dense:NAME", "random", "least")
DEFAULT_RETRIEVER = RETRIEVERS[0]  #: what ``top{K}`` means unless a job names another: a label need not say it


def condition_sort_key(condition: object) -> tuple[int, float, str]:
    """Sort key of a profile condition: none, top1, top2, ..., full, then the oracle conditions, then names
    that are not conditions.

    >>> sorted(["full", "rubric", "top10", "none", "top2", "x"], key=condition_sort_key)
    ['none', 'top2', 'top10', 'full', 'rubric', 'x']
    """
    name = str(condition)
    if name in ORACLE_CONDITIONS:
        return (1, 0.0, name)
    try:
        k = parse_condition(name).k
    except PRBError:
        return (2, 0.0, name)
    return (0, float("inf") if k is None else float(k), name)


def make_retriever(spec: str | None, *, embed: Embedder | None = None, seed: int = 0) -> Retriever:
    """The post selector behind ``top{K}``: ``bm25`` (default), ``dense:NAME``, ``random`` (seeded), ``least``.

    ``dense:NAME`` ranks by cosine similarity of the vectors ``embed`` returns. This module imports no model
    code: the caller loads the encoder named after ``dense:`` and passes its embed function (texts ->
    L2-normalised row vectors). ``random`` and ``least`` (the k least relevant posts by BM25) are ablations:
    set beside ``bm25`` they show whether choosing the relevant posts matters.
    """
    if spec in (None, "", "bm25"):
        return bm25_retrieve
    if spec == "least":
        return least_retrieve
    if spec == "random":
        return random_retriever(seed)
    if spec.startswith("dense:"):
        if embed is None:
            raise PRBError(f"Retriever '{spec}' needs an embed function (load the encoder first).")
        return _dense_retriever(embed)
    raise PRBError(f"Unknown retriever '{spec}'; use one of {', '.join(RETRIEVERS)} (e.g. dense:minilm).")


def _dense_retriever(embed: Embedder) -> Retriever:
    def retrieve(question: str, posts: Sequence[str], k: int) -> list[int]:
        if k >= len(posts):
            return list(range(len(posts)))
        vectors = embed([question, *posts])
        return top_indices((vectors[1:] @ vectors[0]).tolist(), k)

    return retrieve


def rm_visible_fields(record: Mapping[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    """The only parts of a record a reward model may see: the question and (category, text) of each post."""
    posts = record.get("profile")
    posts = list(posts) if posts is not None else []
    return str(record["question"]), [(str(p.get("category") or ""), str(p["text"])) for p in posts]


def selected_posts(
    record: Mapping[str, Any], condition: str | ProfileCondition, *, retriever: Retriever | None = None
) -> list[int]:
    """Indices of the profile posts that the condition shows to the reward model, in the order shown. A drop probe
    (``top3+drop2``: :attr:`prb_utils.probes.Probe.leaves_out`) leaves out the post its base shows at that position,
    and no other post takes its place (a record showing fewer posts is shown as under the base); ``reversed``
    (:attr:`prb_utils.probes.Probe.reverse_posts`) shows the base's posts in reverse order.

    >>> record = {"question": "cheap pans", "profile": [{"text": t} for t in ("boots", "cheap pans", "pans", "cheap")]}
    >>> selected_posts(record, "top3"), selected_posts(record, "top3+drop2"), selected_posts(record, "full+drop4")
    ([1, 2, 3], [1, 3], [0, 1, 2])
    >>> selected_posts(record, "top3+reversed")
    [3, 2, 1]
    """
    cond = parse_condition(condition)
    question, posts = rm_visible_fields(record)
    if cond.k == 0 or not posts:
        return []
    if cond.k is None:
        shown = list(range(len(posts)))
    else:
        shown = list((retriever or bm25_retrieve)(question, [text for _, text in posts], cond.k))
    found = probe_registry.PROBES.get(cond.probe) if cond.probe else None   # a backend retest leaves none out
    position = found.leaves_out if found is not None else 0
    if 0 < position <= len(shown):
        del shown[position - 1]
    return shown[::-1] if found is not None and found.reverse_posts else shown


def rm_user_message(
    record: Mapping[str, Any], condition: str | ProfileCondition, *, retriever: Retriever | None = None
) -> str:
    """The user turn a reward model sees: the question, preceded by the selected posts when there are any.

    Each post shows as ``- [category] text``, as the benchmark's reference renders it, or ``- text`` without a
    category (as under the ``untagged`` probe, :data:`prb_utils.probes.PROBES`), under the line
    :data:`PROFILE_HEADER` (none under ``headerless``), then the question after :data:`QUESTION_PREFIX`. The posts
    come first because a message too long for a model is cut from the left: the cut removes posts (the first shown;
    under ``reversed`` the base's last), never the question. Under the oracle condition ``rubric`` the rubric
    aspects are shown instead of posts (nothing else of the answer key).

    >>> data = pd.DataFrame({"subset": "S", "id": ["a"], "question": "Q?",
    ...                      "profile": [[{"category": "cooking", "text": "Pans?"}]]})
    >>> print(rm_user_message(condition_records(data, "full+untagged")[0], "full+untagged"))
    Here are questions this user asked before:
    - Pans?
    <BLANKLINE>
    Question: Q?
    """
    cond = parse_condition(condition)
    if cond.oracle:
        return _oracle_message(record)
    question, posts = rm_visible_fields(record)
    chosen = selected_posts(record, cond, retriever=retriever)
    if not chosen:
        return question
    lines = [f"- [{posts[i][0]}] {posts[i][1]}" if posts[i][0] else f"- {posts[i][1]}" for i in chosen]
    found = probe_registry.PROBES.get(cond.probe) if cond.probe else None   # a backend retest keeps the header
    header = [] if found is not None and not found.header else [PROFILE_HEADER]
    return "\n".join([*header, *lines, "", f"{QUESTION_PREFIX}{question}"])


def _oracle_message(record: Mapping[str, Any]) -> str:
    """The ``rubric`` condition's user turn: the aspects' text only, then the question."""
    aspects = [str(a.get("aspect") or "") for a in (record.get("rubric_aspects") or [])]
    lines = [f"- {a}" for a in aspects if a.strip()]
    question = str(record["question"])
    if not lines:
        return question
    return "\n".join([ORACLE_HEADER, *lines, "", f"{QUESTION_PREFIX}{question}"])


_POST_BULLET = re.compile(r"^- (?:\[[^\]\n]*\] )?", re.MULTILINE)


def user_text(message: str) -> str:
    """The user's own words in an :func:`rm_user_message`: the question and the selected posts' texts.

    prb's wrapper is removed: the :data:`PROFILE_HEADER` line, each post's ``"- "`` bullet and
    ``"[category] "`` tag, and the ``"Question: "`` prefix. Post categories are left out on purpose: they
    are StackExchange community names the site assigns (cooking, travel, law), not words the user wrote.
    A message without the header that does not start with a post's bullet (``headerless``) is the bare question
    and comes back unchanged. (Should a post or the question itself contain a line starting with ``"- [x] "`` or
    the text ``"\\n\\nQuestion: "``, that wrapper-shaped piece is dropped too; the rest of its words stay.)

    >>> record = {"question": "Best pan for eggs?", "profile": [{"category": "cooking", "text": "Cheap pans?"}]}
    >>> print(user_text(rm_user_message(record, "full")))
    Cheap pans?
    Best pan for eggs?
    >>> user_text(rm_user_message(record, "full+headerless")) == user_text(rm_user_message(record, "full"))
    True
    >>> user_text("Best pan for eggs?")
    'Best pan for eggs?'
    """
    header = next((h for h in (PROFILE_HEADER, ORACLE_HEADER) if message.startswith(h + "\n")), None)
    if header is None and not message.startswith("- "):
        return message
    posts, sep, question = message[len(header) + 1 if header else 0:].rpartition("\n\n" + QUESTION_PREFIX)
    if not sep:
        return message
    return "\n".join([_POST_BULLET.sub("", posts), question])


def probe_conditions(base: str, probes: Sequence[str] | None = None, *, most_posts: int = 0) -> list[str]:
    """The base condition and each probe of it (:func:`prb_utils.probes.default_probes` when ``probes`` is empty);
    :data:`prb_utils.probes.ATTRIBUTION` stands for the drop probes of every post the base shows: K of them for
    ``topK``, ``most_posts`` (the longest profile of the data) for ``full`` (at most
    :data:`prb_utils.probes.DROP_MAX`), none for ``none``.

    >>> probe_conditions("top3", ["swap", "retest"])
    ['top3', 'top3+swap', 'top3+retest']
    >>> probe_conditions("top2", ["attribution"]), probe_conditions("full", ["attribution"], most_posts=1)
    (['top2', 'top2+drop1', 'top2+drop2'], ['full', 'full+drop1'])
    """
    base = parse_condition(base)
    if base.probe or base.oracle:
        raise PRBError(f"--profile {base.name}: a probe transforms none, full or topK (e.g. --profile top3).")
    shown = most_posts if base.k is None else base.k
    if probe_registry.ATTRIBUTION in (probes or ()) and not shown:
        raise PRBError(f"--profile {base.name} --probe {probe_registry.ATTRIBUTION}: {base.name} shows no post, so there is none to "
                       f"leave out (e.g. --profile top3).")
    names = [drop for name in (probes or probe_registry.default_probes())
             for drop in (probe_registry.drop_probes(shown) if name == probe_registry.ATTRIBUTION else [name])]
    return [base.spelling, *(f"{base.spelling}+{name}" for name in dict.fromkeys(names))]


def condition_records(data: pd.DataFrame, condition: str | ProfileCondition, *, seed: int = 0,
                      records: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The records a condition's RM sees: the benchmark's own (``records`` when given, already built from
    ``data``), or, for a probe condition (``top3+swap``), as its probe transforms them
    (:func:`prb_utils.probes.apply_probe`, seeded by ``seed``).

    >>> data = pd.DataFrame({"subset": "S", "id": ["a"], "question": "Q", "chosen": "x", "rejected": "y"})
    >>> condition_records(data, "none+label-swap")[0]["chosen"]
    'y'
    """
    name = parse_condition(condition).probe
    if name is None:
        return records if records is not None else data.to_dict("records")
    return probe_registry.apply_probe(data, name, seed).to_dict("records")
