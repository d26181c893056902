"""Texts that reward models see: chat rendering, the judge prompt, and judge-answer parsing.

RM input: the chat ``[user: prompt, assistant: response]`` where ``prompt`` is the RM-visible user message
(question, preceded by the profile block when the profile condition includes posts), rendered with the
tokenizer's chat template. The rendered text already carries the model's special tokens, so it is tokenized
with ``add_special_tokens=False``.

Fallback for tokenizers without a chat template (encoders such as MiniLM, base LMs): the plain text
``"User: {prompt}\\n\\nAssistant: {response}"`` (the generation prompt is ``"User: {prompt}\\n\\nAssistant:"``),
tokenized with the tokenizer's own special tokens (``[CLS] ... [SEP]``, ``<s>``, ...).

Judge prompt: :data:`JUDGE_TEMPLATE` (the user message; ``{question}``, ``{response_a}`` and
``{response_b}`` are filled in) can be replaced by a template file holding the same three placeholders.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from prb_utils.errors import PRBError
from prb_utils.schema import stable_hash

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

JUDGE_ANSWER_PREFIX = "**Result:**"
PLACEHOLDERS = ("{question}", "{response_a}", "{response_b}")
_PLACEHOLDER = re.compile(r"\{(question|response_a|response_b)\}")
_VERDICT = re.compile(r"\*\*\s*Result\s*:?\s*\*\*\s*:?\s*[\[(\"']?\s*(?:Response\s+)?([AB])\b", re.IGNORECASE)


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def chat_template_hash(tokenizer: Any) -> str:
    """sha256 (first 16 hex digits) of the chat template, or ``"fallback"`` when there is none."""
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        return "fallback"
    return stable_hash(template if isinstance(template, str) else repr(template))


def render_chat(tokenizer: Any, user: str, assistant: str | None = None) -> str:
    """The chat ``[user, assistant]`` as text; with ``assistant=None``, the prompt up to the assistant's turn.

    >>> render_chat(None, "Hi?", "Hello.")
    'User: Hi?\\n\\nAssistant: Hello.'
    >>> render_chat(None, "Hi?")
    'User: Hi?\\n\\nAssistant:'
    """
    if not has_chat_template(tokenizer):
        text = FALLBACK_USER + user + FALLBACK_ASSISTANT
        return text if assistant is None else text + " " + assistant
    messages = [{"role": "user", "content": user}]
    if assistant is None:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    messages.append({"role": "assistant", "content": assistant})
    return tokenizer.apply_chat_template(messages, tokenize=False)


def with_answer_prefix(generation_prompt: str, prefix: str = JUDGE_ANSWER_PREFIX) -> str:
    """The generation prompt followed by the judge's answer prefix (a space between them when needed)."""
    if not prefix:
        return generation_prompt
    if generation_prompt and not generation_prompt[-1].isspace():
        return generation_prompt + " " + prefix
    return generation_prompt + prefix


def load_judge_template(template: str | Path | None) -> str:
    """The judge template: the default, a file's text, or a template string (recognised by its placeholders).

    Raises PRBError when the file is missing or a placeholder is absent.
    """
    if template is None:
        return JUDGE_TEMPLATE
    text = str(template)
    if not all(p in text for p in PLACEHOLDERS):
        path = Path(text).expanduser()
        if not path.is_file():
            raise PRBError(f"Judge template file '{template}' was not found.")
        text = path.read_text(encoding="utf-8")
    missing = [p for p in PLACEHOLDERS if p not in text]
    if missing:
        raise PRBError(f"The judge template lacks the placeholder(s) {', '.join(missing)}.")
    return text


def fill_judge_template(template: str, *, question: str, response_a: str, response_b: str) -> str:
    """Fill the three placeholders in one pass (braces elsewhere, and inside the texts, stay as they are).

    >>> fill_judge_template("Q={question} A={response_a} B={response_b} {x}", question="{response_b}",
    ...                     response_a="a", response_b="b")
    'Q={response_b} A=a B=b {x}'
    """
    values = {"question": question, "response_a": response_a, "response_b": response_b}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def parse_verdict(text: str) -> str | None:
    """``"A"`` or ``"B"`` from a judge's answer (``**Result:** A``), or None when it cannot be parsed.

    >>> parse_verdict("Reasoning... **Result:** B"), parse_verdict("**Result:**A"), parse_verdict("I think A")
    ('B', 'A', None)
    """
    found = _VERDICT.findall(text or "")
    return found[-1].upper() if found else None
