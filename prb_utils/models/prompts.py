"""Texts that reward models see: chat rendering, the judge prompt, and judge-answer parsing.

RM input: the chat ``[user: prompt, assistant: response]`` where ``prompt`` is the RM-visible user message
(question, preceded by the profile block when the profile condition includes posts), rendered with the
tokenizer's chat template.

Special tokens (``--tokenization``, see :func:`prb_utils.models.hf.encode_ids`): a chat template may or may not
write the tokens the tokenizer itself adds (Llama-3's template writes ``<|begin_of_text|>``, which its tokenizer
also adds; a BERT-like encoder given a template needs ``[CLS] ... [SEP]`` from the tokenizer). ``auto``
(default) adds the tokenizer's special tokens unless the rendered text's own token ids already begin (end)
with them, so every input carries them exactly once. ``reference`` tokenizes as the benchmark's reference
scripts do: the pointwise script calls ``tokenizer(text)`` on the rendered chat, so the tokenizer's tokens are
always added (a Llama-3 template then gets a second BOS); the pairwise judge script uses vLLM's ``LLM.chat``,
which encodes the rendered chat with ``add_special_tokens=False``, so a judge adds none. A prompt that the
model continues (judge, implicit) never gets the tokenizer's end tokens (``[SEP]``, ``</s>``).

Fallback for tokenizers without a chat template (encoders such as MiniLM, base LMs): the plain text
``"User: {prompt}\\n\\nAssistant: {response}"`` (the generation prompt is ``"User: {prompt}\\n\\nAssistant:"``),
tokenized with the tokenizer's own special tokens (``[CLS] ... [SEP]``, ``<s>``, ...).

Judge prompt: a :class:`JudgeTemplate` (optional system message + user message; ``{question}``,
``{response_a}`` and ``{response_b}`` are filled in). ``--judge-template`` takes a name from
:data:`JUDGE_TEMPLATES` (``default``: :data:`JUDGE_TEMPLATE`, prb's personalised user-only prompt;
``reference``: the benchmark's own pairwise prompt, :data:`REFERENCE_SYSTEM` + :data:`REFERENCE_USER`), a file
or a template string holding the three placeholders (a user message without a system message).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.schema import stable_hash

FALLBACK_SYSTEM = "System: "
FALLBACK_USER = "User: "
FALLBACK_ASSISTANT = "\n\nAssistant:"

JUDGE_TEMPLATE = """\
Two assistants answered a request from one particular user. Both answers may be fine in general; decide which \
one THIS user would prefer. If the request shows questions the user asked before, use them to infer the \
user's background, needs and tastes.

[Request]
{question}

[Response A]
{response_a}

[Response B]
{response_b}

Which response fits this user better? Answer "**Result:** A" or "**Result:** B"."""

# The reference scripts' pairwise judge prompt, verbatim (read with ``.strip()`` as the scripts do) from
# github.com/Martin-qyma/Personalized-RewardBench, prompts/pairwise_system.txt and prompts/pairwise_user.txt
# (commit d8a0cdaa), used by evaluation/pairwise.py as the system and user messages. Only the placeholders
# ``{Response_A}``/``{Response_B}`` are renamed to prb's ``{response_a}``/``{response_b}``. The typos
# ("espects") are the reference's own and are kept so that the prompt is exactly theirs.
REFERENCE_SYSTEM = (
    "You are a fair and insightful judge. Your task is to evaluate a user\u2019s question and two candidate "
    "answers. Select the answer that best aligns with the user\u2019s expected espects.\n\n"
    "Here are some rules of the evaluation:\n"
    "1. Responses should NOT contain more/less than what the instruction asks for, as such responses do NOT "
    "precisely execute the instruction.\n"
    "2. You should avoid any potential bias and your judgment should be as objective as possible. Here are some "
    "potential sources of bias:\n"
    "- The order in which the responses were presented should NOT affect your judgment, as Response A and "
    "Response B are **equally likely** to be the better.\n"
    "- The length of the responses should NOT affect your judgement, as a longer response does not necessarily "
    "correspond to a better response. When making your decision, evaluate if the response length is appropriate "
    "for the given instruction.\n\n"
    "Your reply should strictly follow this format:\n"
    "**Reasoning:** <feedback evaluating the responses within 100 words>\n"
    "**Result:** <A or B>"
)
REFERENCE_USER = (
    "User's current question:\n```\n{question}\n```\n\n"
    "Response A:\n```\n{response_a}\n```\n\n"
    "Response B:\n```\n{response_b}\n```"
)


@dataclass(frozen=True)
class JudgeTemplate:
    """A judge prompt: ``user`` holds the three placeholders; ``system`` (optional) is sent as a system
    message; ``name`` says where it came from (a template name, ``file`` or ``text``)."""

    user: str
    system: str | None = None
    name: str = "text"


JUDGE_TEMPLATES = {
    "default": JudgeTemplate(JUDGE_TEMPLATE, None, "default"),
    "reference": JudgeTemplate(REFERENCE_USER, REFERENCE_SYSTEM, "reference"),
}
JUDGE_ANSWER_PREFIX = "**Result:**"
TOKENIZATIONS = ("auto", "reference")
PLACEHOLDERS = ("{question}", "{response_a}", "{response_b}")
_PLACEHOLDER = re.compile(r"\{(question|response_a|response_b)\}")
_FILL = r"[\s*\[(\"'`]*"
_LETTER = _FILL + r"(?:response\s+)?([AB])\b"
# "Result", then ":" with any bold markers around it, then the letter; ``more`` catches "A or B", "A/B", ...
_VERDICT = re.compile(r"result[\s*]*:" + _LETTER
                      + r"(?P<more>[\s*\])\"'`]*(?:or|and|/|,|&|vs\.?|versus)" + _LETTER + r")?", re.IGNORECASE)


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def chat_template_hash(tokenizer: Any) -> str:
    """sha256 (first 16 hex digits) of the chat template, or ``"fallback"`` when there is none."""
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        return "fallback"
    return stable_hash(template if isinstance(template, str) else repr(template))


def render_chat(tokenizer: Any, user: str, assistant: str | None = None, *, system: str | None = None) -> str:
    """The chat ``[system?, user, assistant]`` as text; with ``assistant=None``, the prompt up to the
    assistant's turn. Without a chat template, a system message goes first as ``"System: ...\\n\\n"``.

    >>> render_chat(None, "Hi?", "Hello.")
    'User: Hi?\\n\\nAssistant: Hello.'
    >>> render_chat(None, "Hi?", system="Be brief.")
    'System: Be brief.\\n\\nUser: Hi?\\n\\nAssistant:'
    """
    if not has_chat_template(tokenizer):
        text = (FALLBACK_SYSTEM + system + "\n\n" if system else "") + FALLBACK_USER + user + FALLBACK_ASSISTANT
        return text if assistant is None else text + " " + assistant
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    if assistant is not None:
        messages.append({"role": "assistant", "content": assistant})
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=assistant is None)
    except Exception as exc:  # jinja raises its own TemplateError (e.g. "System role not supported")
        if not system:
            raise
        raise PRBError("This model's chat template refuses a system message, which the chosen judge template "
                       f"needs ({exc}); use --judge-template default or a template file.") from exc


def with_answer_prefix(generation_prompt: str, prefix: str = JUDGE_ANSWER_PREFIX) -> str:
    """The generation prompt followed by the judge's answer prefix (a space between them when needed)."""
    if not prefix:
        return generation_prompt
    if generation_prompt and not generation_prompt[-1].isspace():
        return generation_prompt + " " + prefix
    return generation_prompt + prefix


def load_judge_template(template: str | Path | None) -> JudgeTemplate:
    """The judge template: a name from :data:`JUDGE_TEMPLATES` (``None`` = ``default``), a file's text, or a
    template string (recognised by its placeholders); files and strings are user messages only.

    Raises PRBError when the file is missing or a placeholder is absent.

    >>> load_judge_template("reference").system.startswith("You are a fair and insightful judge.")
    True
    """
    if template is None:
        return JUDGE_TEMPLATES["default"]
    text = str(template)
    if text in JUDGE_TEMPLATES:
        return JUDGE_TEMPLATES[text]
    name = "text"
    if not all(p in text for p in PLACEHOLDERS):
        text, name = _read_template_file(str(template)), "file"
    missing = [p for p in PLACEHOLDERS if p not in text]
    if missing:
        raise PRBError(f"The judge template lacks the placeholder(s) {', '.join(missing)}.")
    return JudgeTemplate(text, None, name)


def _read_template_file(given: str) -> str:
    """The text of the template file ``given``; PRBError in one sentence when it is not a readable text file."""
    path = Path(given).expanduser()
    try:
        found = path.is_file()
    except (OSError, ValueError):  # a text too long for a file name, say
        found = False
    if not found:
        raise PRBError(f"Judge template '{given}' is neither a template name ({', '.join(JUDGE_TEMPLATES)}) "
                       "nor a file that was found.")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PRBError(f"The judge template file {given} is not UTF-8 text (byte {exc.start}); give a text file "
                       "holding the placeholders {question}, {response_a} and {response_b}.") from None
    except OSError as exc:
        raise PRBError(f"Cannot read the judge template file {given} ({exc.strerror or exc}).") from None


def fill_judge_template(template: str, *, question: str, response_a: str, response_b: str) -> str:
    """Fill the three placeholders in one pass (braces elsewhere, and inside the texts, stay as they are).

    >>> fill_judge_template("Q={question} A={response_a} B={response_b} {x}", question="{response_b}",
    ...                     response_a="a", response_b="b")
    'Q={response_b} A=a B=b {x}'
    """
    values = {"question": question, "response_a": response_a, "response_b": response_b}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def parse_verdict(text: str) -> str | None:
    """``"A"`` or ``"B"`` from a judge's answer, or None when it cannot be parsed.

    Reads what the reference script reads (it strips ``*`` and ``"`` and takes the letter after
    ``result:``, any case): ``**Result:** A``, ``**Result: A**``, ``Result: **B**``, ``result: a``,
    ``**Final Result:** A``, ``**Result:** Response B`` (but not the article in ``result: a tie``). The last
    such verdict counts (the reference takes the first); one naming both letters
    (``Result: A or B``) is ambiguous and gives None, as does a text without a verdict (the reference would
    count it as "A"; prb never guesses).

    >>> parse_verdict("Reasoning... **Result:** B"), parse_verdict("Result: **a**"), parse_verdict("I think A")
    ('B', 'A', None)
    >>> parse_verdict("**Result:** A or B") is None
    True
    """
    text = text or ""
    found = [m for m in _VERDICT.finditer(text) if not _is_article(m, text)]
    if not found or found[-1].group("more"):
        return None
    return found[-1].group(1).upper()


def _is_article(match: re.Match[str], text: str) -> bool:
    """A lowercase "a" that starts a phrase ("result: a tie") is the article, not a verdict."""
    return match.group(1) == "a" and re.match(r"[ \t]+[A-Za-z]", text[match.end(1):]) is not None
