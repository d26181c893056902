"""Griffe extension: prb's docstrings are written for ``doctest`` and Sphinx; this makes them read well as
Markdown in the API reference without changing them.

- each run of ``>>>`` lines and their expected output becomes a fenced ``pycon`` block (else Markdown would read
  ``>>>`` as nested quotes and ``[a][b]`` in an output as a link);
- Sphinx roles (``:func:`~prb_utils.x.y```) become code spans (`` `y` ``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:func|data|class|mod|meth|attr|obj|exc|const):`(~?)([^`]+)`")


def _role(match: re.Match) -> str:
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


def fence_doctests(text: str) -> str:
    """Each ``>>>`` example (its continuation and output lines up to a blank line) as a fenced block."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    in_fence = False
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith("```"):
            in_fence = not in_fence
        if in_fence or not stripped.startswith(">>>"):
            out.append(ROLE.sub(_role, line) if not in_fence else line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        block = []
        while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
            block.append(lines[i][len(indent):])
            i += 1
        if out and out[-1].strip():
            out.append("")
        out += [f"{indent}```pycon", *(f"{indent}{b}" for b in block), f"{indent}```", ""]
    return "\n".join(out)


class MarkdownDocstrings(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence_doctests(obj.docstring.value)
