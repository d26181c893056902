"""MkDocs hook: pages generated from the code, so that they are never retyped.

- ``<!-- prb:cli -->`` becomes the command-line reference, rendered from ``prb_utils.cli.build_parser()``.
- ``<!-- prb:api -->`` becomes one mkdocstrings block per name of the curated top-level API
  (``prb_utils._PUBLIC``), grouped by the module that defines it.
- ``<!-- prb:notebook NAME -->`` becomes the notebook ``notebooks/NAME.ipynb`` as committed (its Markdown and code
  cells, no outputs), converted by nbconvert's Markdown exporter, so the site shows the notebook the report runs.
- Every notebook under ``notebooks/`` gets its page (``notebooks/NAME.md``, generated) and its entry in the nav's
  "The notebooks" section, titled by its parameters class: a new page is its notebook and its class.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

from mkdocs.structure.files import File

import prb_utils
from prb_utils.analysis.findings import RULES_END, RULES_START
from prb_utils.cli import build_parser
from prb_utils.notebook.manual import rule_anchor
from prb_utils.notebook.params import PARAMS_BY_NOTEBOOK

CLI_MARKER = "<!-- prb:cli -->"
API_MARKER = "<!-- prb:api -->"
NOTEBOOK_MARKER = re.compile(r"<!-- prb:notebook (?P<name>[\w-]+) -->")
RULE_ITEM = re.compile(r"^- \*\*(?P<name>[^*]+)\*\*:.*$", flags=re.MULTILINE)
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOK_SECTION = "The notebooks"   # the nav section the hook fills, one entry per notebook
NOTEBOOK_PAGE = """<!-- prb:notebook {name} -->

---

*The notebook `notebooks/{name}.ipynb` as committed, without outputs. `prb report` (and `make report`) executes it
with papermill and writes the executed page to the report; open it live with `.venv/bin/jupyter lab notebooks/`.*
"""


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _option_row(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{name}`" for name in action.option_strings)
    else:
        names = f"`{action.metavar or action.dest}` (positional)"
    if action.nargs == 0:
        value = "flag"
    elif action.choices is not None:
        value = " \\| ".join(f"`{choice}`" for choice in action.choices)
    else:
        metavar = action.metavar or action.dest.upper()
        value = f"`{metavar}`"
    if isinstance(action, argparse._AppendAction):
        value += " (repeatable)"
    if action.required:
        value += " (required)"
    default = action.default
    shown = "" if default in (None, False, argparse.SUPPRESS, [], ()) or action.nargs == 0 else f"`{default}`"
    help_text = (action.help or "").replace("%%", "%")
    if "%(" in help_text:
        help_text = help_text % {**vars(action), "prog": "prb", "default": default}
    return f"| {names} | {value} | {_cell(shown)} | {_cell(help_text)} |"


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """``name -> (one-line help, parser)`` of every subcommand of ``parser``, in the parser's order."""
    found: dict[str, tuple[str, argparse.ArgumentParser]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found[name] = (helps.get(name, ""), sub)
    return found


def render_cli(parser: argparse.ArgumentParser) -> str:
    """The command-line reference as Markdown: per subcommand its help, description, usage and options."""
    lines: list[str] = []
    for name, (summary, sub) in subcommands(parser).items():
        lines += [f"## prb {name}", ""]
        if summary:
            lines += [summary[0].upper() + summary[1:] + ".", ""]
        if sub.description:
            lines += [" ".join(sub.description.replace("%%", "%").split()), ""]
        usage = sub.format_usage().strip().removeprefix("usage: ")
        lines += ["```text", usage, "```", ""]
        lines += ["| option | value | default | what it does |", "|---|---|---|---|"]
        lines += [_option_row(action) for action in sub._actions if not isinstance(action, argparse._HelpAction)]
        lines.append("")
    return "\n".join(lines)


def public_api() -> dict[str, list[str]]:
    """``module -> names`` of the curated top-level API, modules and names in the package's order."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for name, module in prb_utils._PUBLIC.items():
        grouped[module].append(name)
    return dict(grouped)


def render_api() -> str:
    lines: list[str] = []
    for module, names in public_api().items():
        lines += [f"## `{module}`", ""]
        for name in names:
            lines += [f"::: {module}.{name}", "    options:", "      heading_level: 3", "      show_root_full_path: false",
                      ""]
    return "\n".join(lines)


def render_notebook(name: str) -> str:
    """The notebook ``notebooks/<name>.ipynb`` as Markdown (nbconvert's exporter; committed without outputs, so
    its prose and code only; its first heading is the page's title)."""
    import nbformat
    from nbconvert import MarkdownExporter

    body, _ = MarkdownExporter().from_notebook_node(nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4))
    return body


def anchor_rules(markdown: str) -> str:
    """Each item of the rules list between ``RULES_START`` and ``RULES_END`` with its anchor (attr_list on the
    item: ``{: #rule-NAME }`` on its own continuation line)."""
    if RULES_START not in markdown or RULES_END not in markdown:
        return markdown
    head, rest = markdown.split(RULES_START, 1)
    rules, tail = rest.split(RULES_END, 1)
    rules = RULE_ITEM.sub(lambda item: f"{item[0]}\n  {{: #{rule_anchor(item['name'])} }}", rules)
    return f"{head}{RULES_START}{rules}{RULES_END}{tail}"


def on_page_markdown(markdown: str, page, config, files) -> str:  # MkDocs passes page, config and files
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, render_cli(build_parser()))
    if API_MARKER in markdown:
        markdown = markdown.replace(API_MARKER, render_api())
    markdown = anchor_rules(markdown)
    return NOTEBOOK_MARKER.sub(lambda found: render_notebook(found["name"]), markdown)


def notebook_pages() -> dict[str, str]:
    """``{docs path: nav title}`` of every notebook under ``notebooks/``: its number and its page's title (its
    parameters class's ``title``; the file name for a notebook without one)."""
    pages = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        page = PARAMS_BY_NOTEBOOK.get(path.stem)
        pages[f"notebooks/{path.stem}.md"] = f"{path.stem[:2]} {page.title if page and page.title else path.stem}"
    return pages


def _fill_notebooks(nav: list) -> None:
    for entry in nav:
        if not isinstance(entry, dict):
            continue
        for key, value in entry.items():
            if key == NOTEBOOK_SECTION:
                entry[key] = [{title: path} for path, title in notebook_pages().items()]
            elif isinstance(value, list):
                _fill_notebooks(value)


def on_config(config):  # MkDocs passes the validated config
    """The nav's notebook section lists every notebook (mkdocs.yml types none of them)."""
    _fill_notebooks(config["nav"] or [])
    return config


def on_files(files, config):  # MkDocs passes the site's files and config
    """One generated page per notebook (:data:`NOTEBOOK_PAGE`), unless ``docs/`` holds a page of that name."""
    for path in notebook_pages():
        if files.get_file_from_path(path) is None:
            files.append(File.generated(config, path, content=NOTEBOOK_PAGE.format(name=Path(path).stem)))
    return files
