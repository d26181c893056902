"""User-controlled text (folder names, model specs, commands) placed safely into notebook Markdown."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePath

_TICKS = re.compile(r"`+")


def md_code(value: object) -> str:
    """``value`` as one Markdown code span that no text can break out of: the fence is one backtick longer
    than the longest run of backticks inside, and line breaks become spaces. Inside a code span Markdown
    renders every character literally (``<img onerror=...>`` is shown as text, never as a tag).

    >>> md_code("results")
    '`results`'
    >>> md_code("a`b")
    '`` a`b ``'
    """
    text = " ".join(str(value).splitlines())
    fence = "`" * (max((len(run) for run in _TICKS.findall(text)), default=0) + 1)
    pad = " " if fence != "`" or text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def display_path(value: object) -> str:
    """How a page names a local path: an absolute path by its last part (a page never shows where this
    machine keeps its files), anything else (``sample``, a hub id, a relative path) as given.

    >>> from pathlib import Path
    >>> display_path(Path("results").absolute()), display_path("results/bon"), display_path("sample")
    ('results', 'results/bon', 'sample')
    """

    text = str(value)
    return PurePath(text).name if PurePath(text).is_absolute() else text


#: Where each command writes: ``prb score`` and ``prb probe`` a store (``--out``), the downstream commands into one (``--results``).
STORE_OPTION = {"score": "--out", "probe": "--out", "bon": "--results", "ppo": "--results"}


def prb_command(verb: str, *, data: object, store: object, models: Sequence[str] = (),
                profile: str | Sequence[str] | None = None, subsets: Sequence[str] = (), limit: int | None = None,
                probes: Sequence[str] = ()) -> str:
    """The shell command ``prb VERB`` on ``data`` (its ``subsets`` and first ``limit`` pairs of each, when given)
    into the store ``store`` (paths as pages show them: never an absolute local path), for ``models`` and the
    profile condition(s) ``profile`` (and, for ``prb probe``, its ``probes``), quoted for a shell. Every command a page or the board suggests is built here,
    on its own data.

    >>> prb_command("score", data="sample", models=["length", "judge:smollm2"], profile="top3", store="results")
    'prb score --data sample --model length --model judge:smollm2 --profile top3 --out results'
    >>> prb_command("bon", data="my data.jsonl", models=["length"], store="my results")
    "prb bon --data 'my data.jsonl' --model length --results 'my results'"
    >>> prb_command("score", data="d.jsonl", profile=["none", "top3"], store="results")
    'prb score --data d.jsonl --profile none --profile top3 --out results'
    >>> prb_command("probe", data="sample", models=["lexical"], profile="top2", subsets=["a b"], limit=4, store="r")
    "prb probe --data sample --model lexical --profile top2 --subset 'a b' --limit 4 --out r"
    >>> prb_command("probe", data="sample", models=["lexical"], profile="top3", probes=["attribution"], store="r")
    'prb probe --data sample --model lexical --profile top3 --probe attribution --out r'
    """
    profiles = [profile] if isinstance(profile, str) else list(profile or ())
    parts = ["prb", verb, "--data", shlex.quote(display_path(data))]
    parts += [f"--model {shlex.quote(m)}" for m in models]
    parts += [f"--profile {shlex.quote(p)}" for p in profiles]
    parts += [f"--subset {shlex.quote(s)}" for s in subsets]
    parts += [f"--limit {limit}"] if limit else []
    parts += [f"--probe {shlex.quote(p)}" for p in probes]
    parts += [STORE_OPTION[verb], shlex.quote(display_path(store))]
    return " ".join(parts)


def chain(*commands: str) -> str:
    """Commands run one after the other, each only if the one before succeeded.

    >>> chain("prb score --data d", "", "prb bon --data d")
    'prb score --data d && prb bon --data d'
    """
    return " && ".join(c for c in commands if c)


#: What :func:`md_text` writes for each character that Markdown or HTML would read as markup: numeric character
#: references, which both read as the plain character (never as a tag, an emphasis, a link, a code span or math).
_MARKUP = {c: f"&#{ord(c)};" for c in "&<>\"'\\`*_[]$|~#!"}


def md_text(value: object) -> str:
    """``value`` as plain text inside Markdown or HTML: every character either could read as markup (``<``,
    ``&``, quotes, ``*``, ``_``, backticks, brackets, ``$``, ``|``, ``~``, ``#``, ``!``, the backslash) becomes a
    numeric character reference, shown as itself; line breaks become spaces. The one way a page puts a sentence
    with names (a model spec, a condition, a path, a data field) into Markdown or HTML; the library's sentences
    stay plain text and are escaped here, where a page renders them.

    >>> md_text("Under top3, embedding:m/<img src=x onerror=alert(1)> leads.")
    'Under top3, embedding:m/&#60;img src=x onerror=alert(1)&#62; leads.'
    >>> md_text("a *b*\\n# c")
    'a &#42;b&#42; &#35; c'
    """
    return " ".join(str(value).splitlines()).translate(str.maketrans(_MARKUP))


def md_sentences(items: Iterable[Mapping[str, object]]) -> str:
    r"""A page's opening conclusions (:func:`prb_utils.analysis.findings.page_sentences`) as a Markdown list, each
    ``sentence`` escaped (:func:`md_text`).

    >>> md_sentences([{"sentence": "Under top3, a*b leads."}, {"sentence": "No lift."}])
    '- Under top3, a&#42;b leads.\n- No lift.'
    """
    return "\n".join(f"- {md_text(item['sentence'])}" for item in items)


_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def model_anchor(model: object) -> str:
    """The stable HTML id of a model's section on a page (its pairs on 01, its probes on 05), which each
    leaderboard row links to: ``model-`` and the name with every run of other characters as ``-``.

    >>> model_anchor("embedding:minilm"), model_anchor("lexical [random]")
    ('model-embedding-minilm', 'model-lexical-random')
    """
    return "model-" + (_ID_UNSAFE.sub("-", str(model)).strip("-") or "x")
