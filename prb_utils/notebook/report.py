"""HTML reports: execute the parameterized notebooks with papermill, export HTML, write an index page.

:func:`build_report` runs each notebook of ``notebooks/`` headlessly (widgets fall back to static tables
and figures; kernels over the local ipc transport), writes ``<out>/<name>.ipynb`` and
``<out>/<name>.html`` (titled, a link back to the index at the top, nothing fetched from the network), and
``<out>/index.html``: the headline result, a link per page, and the run metadata of the store. Notebooks
find the data and the store through their parameters (absolute paths are passed), never through the
working folder. Each notebook's last cell calls
:func:`record_numbers`, which writes its key numbers to ``<out>/<name>.numbers.json`` during a report run.
Scoring is not done here: the ``prb report`` command scores what is missing first.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

import prb_utils
from prb_utils import __version__
from prb_utils.analysis.findings import Findings, compute_findings, page_sentences
from prb_utils.analysis.uncertainty import ResamplingPlan
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.formatting import format_frame
from prb_utils.notebook.board_view import board_html
from prb_utils.notebook.manual import manual_html
from prb_utils.notebook.markup import display_path
from prb_utils.notebook.model_sections import page_sections
from prb_utils.notebook.params import (
    PARAMS_BY_NOTEBOOK,
    NotebookParams,
    report_view,
    resolve_data_source,
    write_report_view,
)
from prb_utils.notebook.rm_seen import RENDERED_COLUMN, rendered_column, store_jobs
from prb_utils.notebook.stages import Stages
from prb_utils.profile import condition_sort_key, parse_condition
from prb_utils.resources import resource_dir, source_commit
from prb_utils.schema import canonical_spec
from prb_utils.store import JOB_FILE, JOBS_DIR, atomic_write, load_run_metadata, query_results

NOTEBOOK_DIR = resource_dir("notebooks")  # the repository's notebooks/, or the packaged copy
KERNEL = "python3"
NUMBERS_ENV = "PRB_NUMBERS_DIR"  # where record_numbers writes; set for the kernels of a report run
RESULTS_CSV = "results.csv"
#: Each page's title and the one question it answers: from its parameters class (a new page is its notebook and
#: its class in :data:`prb_utils.notebook.params.PARAMS_BY_NOTEBOOK`).
TITLES = {name: cls.title for name, cls in PARAMS_BY_NOTEBOOK.items()}
METADATA_COLUMNS = ("job", "model", "kind", "profile", "retriever", "data_source", "data_digest", "n_rows", "n_pairs",
                    "wall_s", "dtype", "device", "seed", "prb", "torch", "transformers", "python", "n_truncated",
                    "n_failed", "finished")
QUESTIONS = {name: cls.question for name, cls in PARAMS_BY_NOTEBOOK.items()}


@dataclass
class PageResult:
    """What happened to one notebook: its pages, how long it took, and the failing cell if any."""

    name: str
    ipynb: Path
    html: Path | None
    seconds: float
    error: str | None = None


def available_notebooks(folder: Path = NOTEBOOK_DIR) -> list[str]:
    """Names (without ``.ipynb``) of the notebooks in ``folder``, sorted."""
    return sorted(p.stem for p in Path(folder).glob("*.ipynb"))


def _declared(name: str, path: Path) -> set[str]:
    if name in PARAMS_BY_NOTEBOOK:
        return set(PARAMS_BY_NOTEBOOK[name].names())
    import papermill

    return set(papermill.inspect_notebook(str(path)))


def notebook_parameters(name: str, values: dict[str, Any], path: Path,
                        extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The subset of ``values`` the notebook declares in its parameters cell, updated with ``extra``
    (parameters for this notebook only; a name it does not declare is a :class:`PRBError`)."""
    accepted = _declared(name, path)
    unknown = sorted(set(extra or {}) - accepted)
    if unknown:
        raise PRBError(f"Unknown parameter(s) {', '.join(unknown)} for the {name} notebook; "
                       f"known: {', '.join(sorted(accepted))}.")
    return {**{k: v for k, v in values.items() if k in accepted}, **(extra or {})}


def check_out_folder(out: str | Path, notebooks: Path = NOTEBOOK_DIR) -> Path:
    """``out`` as an absolute folder; :class:`PRBError` when it is the folder of the source notebooks."""
    out_dir = Path(out).expanduser().resolve()
    if out_dir == Path(notebooks).resolve():
        raise PRBError(f"The report folder {out} holds the source notebooks, which the executed copies would "
                       "overwrite; choose another --out folder (default: reports).")
    return out_dir


@contextmanager
def _report_env(out: Path) -> Iterator[None]:
    """Tell the kernels papermill starts (they inherit the environment) that no frontend is there and
    where :func:`record_numbers` writes."""
    values = {"PRB_HEADLESS": "1", NUMBERS_ENV: str(out)}
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _plain(value: Any) -> Any:
    """``value`` as JSON data: frames become lists of records (a named index becomes columns), NaN None."""
    if isinstance(value, pd.Series):
        value = value.to_frame()
    if isinstance(value, pd.DataFrame):
        frame = value if isinstance(value.index, pd.RangeIndex) else value.reset_index()
        return json.loads(frame.to_json(orient="records", double_precision=15))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


#: The numbers each page recorded in this kernel, by file: a page records its conclusions first, the rest last.
_RECORDED: dict[Path, dict[str, Any]] = {}


def record_numbers(params: NotebookParams, **numbers: Any) -> Path | None:
    """Write a notebook's key numbers to ``<notebook>.numbers.json`` in the report folder, so that checks
    and readers use them without parsing HTML. Outside a report run (``PRB_NUMBERS_DIR`` unset) nothing
    is written and None is returned. The file holds the parameters, where ``prb_utils`` was imported from,
    and ``numbers`` (frames as lists of records, NaN as null); a later call of the same kernel adds its numbers
    to those recorded before (a page records its opening conclusions, then its tables)."""
    folder = os.environ.get(NUMBERS_ENV)
    if not folder:
        return None

    target = Path(folder) / f"{params.notebook}.numbers.json"
    recorded = _RECORDED.setdefault(target, {})
    recorded.update(_plain(numbers))
    content = {"notebook": params.notebook, "prb_utils": str(Path(prb_utils.__file__).resolve().parent),
               "params": _plain(asdict(params)), "numbers": recorded}
    write_report_file(target, json.dumps(content, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    return target


def write_report_file(target: Path, content: str | bytes) -> Path:
    """``content`` (text as UTF-8) as the report file ``target``, written atomically
    (:func:`prb_utils.store.atomic_write`): a full disk leaves no empty or cut file, and is a PRBError in one
    sentence naming the file.

    >>> import tempfile
    >>> write_report_file(Path(tempfile.mkdtemp()) / "index.html", "<p>hi</p>").read_text()
    '<p>hi</p>'
    """
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        atomic_write(target, lambda fh: fh.write(data))
    except OSError as exc:
        raise _cannot_write_report(target, exc) from None
    return target


def _cannot_write_report(target: Path, exc: OSError) -> PRBError:
    return PRBError(f"Cannot write the report file {target} ({exc.strerror or exc}); make room (or fix the "
                    "folder's permissions) and run prb report again: the scores in the store are kept.")


# The lab template with every network reference taken out at its source: require.js, the widget manager
# (unpkg), MathJax and mermaid come from CDNs; the static outputs need none of them (figures are embedded
# PNGs, tables plain HTML, the notebooks' Markdown holds no TeX). Each page also gets a link back to the
# index at its top and an empty icon, so a browser asks for no favicon.
PAGE_TEMPLATE = "prb_page.html.j2"
_PAGE_TEMPLATE_SOURCE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_css -%}
<link rel="icon" href="data:,">
<style type="text/css">
nav.prb-nav { font-family: var(--jp-ui-font-family, sans-serif); font-size: 0.95em;
              padding: 8px 4px 6px; margin: 0 0 6px; border-bottom: 1px solid #ddd; }
nav.prb-nav a { text-decoration: none; color: #1565c0; }
nav.prb-nav a:hover { text-decoration: underline; }
#prb-show-code:not(:checked) ~ .jp-CodeCell .jp-Cell-inputWrapper { display: none; }
label.prb-code-toggle { font-family: var(--jp-ui-font-family, sans-serif); font-size: 0.9em; color: #555; }
details.prb-params { font-family: var(--jp-ui-font-family, sans-serif); font-size: 0.9em; margin: 0 0 8px; }
details.prb-params td { padding: 1px 10px 1px 0; vertical-align: top; }
{{ resources.prb_page_css }}
</style>
{%- endblock html_head_css -%}
{%- block body_header -%}
{{ super() }}
<script>{{ resources.prb_page_js }}</script>
<nav class="prb-nav"><a class="prb-index-link" href="index.html">&larr; All report pages (index)</a></nav>
{{ resources.prb_parameters }}
<input type="checkbox" id="prb-show-code"><label class="prb-code-toggle" for="prb-show-code"> show the code</label>
{%- endblock body_header -%}
{% block data_png scoped %}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}"
{%- set alt = output | get_metadata('alt', 'image/png') -%}
{%- if alt %} alt="{{ alt | escape_html }}"{%- endif %}
{%- set width = output | get_metadata('width', 'image/png') -%}
{%- if width is not none %} width={{ width | escape_html }}{%- endif %}
{%- set height = output | get_metadata('height', 'image/png') -%}
{%- if height is not none %} height={{ height | escape_html }}{%- endif %}
class="
{%- if output | get_metadata('unconfined', 'image/png') %}unconfined{%- endif %}
{%- if output | get_metadata('needs_background', 'image/png') == 'light' %} jp-needs-light-background{%- endif %}
{%- if output | get_metadata('needs_background', 'image/png') == 'dark' %} jp-needs-dark-background{%- endif %}"
>
</div>
{% endblock data_png %}
"""
#: Table cells break between words, never inside one ("inconclusiv e"): tables are laid out by their content (the
#: lab's fixed layout squeezes a column below its longest word), and a table wider than a screen scrolls in its box.
#: Print (A4 landscape, cells wrapping between words so wide tables fit the paper): no code, no inputs, no
#: navigation, pagination, download buttons or sort arrows (every row is printed: :data:`PAGE_SCRIPT`). Dark palette on screens that prefer it: JupyterLab's dark theme variables (added by
#: :func:`export_html`), and the light boxes of the pair views keep dark text.
PAGE_CSS = """
.jp-RenderedHTMLCommon table { table-layout: auto; }
.jp-OutputArea-output td, .jp-OutputArea-output th { word-break: normal; overflow-wrap: break-word; hyphens: none; }
@media screen { .jp-RenderedHTMLCommon.jp-OutputArea-output { overflow-x: auto; } }
@media print {
  nav.prb-nav, #prb-show-code, label.prb-code-toggle, .jp-CodeCell .jp-Cell-inputWrapper, .dt-length,
  .dt-search, .dt-paging, .dt-info, .dt-buttons, .dt-column-order, input, select,
  button { display: none !important; }
  table.dataTable.nowrap th, table.dataTable.nowrap td { white-space: normal !important; }
  table.dataTable th, table.dataTable td, .jp-OutputArea-output table td, .jp-OutputArea-output table th {
    padding: 2px 4px !important; font-size: 0.8em; }
}
@page { size: A4 landscape; margin: 10mm; }
@media screen and (prefers-color-scheme: dark) {
  body { background: var(--jp-layout-color0); color: var(--jp-content-font-color1); }
  nav.prb-nav { border-bottom-color: #444; }
  nav.prb-nav a, .jp-RenderedHTMLCommon a { color: #8ab4f8; }
  label.prb-code-toggle { color: #bbb; }
  .prb-view [style*="background"], .prb-view pre { color: #111 !important; }
  .prb-view [style*="background"] a { color: #0b4f9c !important; }
  .prb-view [style*="color:#555"] { color: #bbb !important; }
  .prb-view summary[style*="color:#1565c0"] { color: #8ab4f8 !important; }
  /* figures are drawn light; on a dark screen their lightness is inverted and their hues turned back, so each
     model keeps its hue on a dark background (the print and light pages keep the drawn figure) */
  .jp-RenderedImage img { background: #fff; filter: invert(0.9) hue-rotate(180deg); }
}
"""
#: Before printing, every interactive table shows all its rows (its page length set to "All", an option added
#: where the table's menu lacks it), and after,
#: the length it had; on a screen that prefers dark, the page tells itables so (its tables follow the
#: ``data-jp-theme-light`` flag of the page).
PAGE_SCRIPT = """(() => {
  const every = () => document.querySelectorAll('.dt-length select').forEach(s => {
    if (s.value === '-1') return;
    if (![...s.options].some(o => o.value === '-1')) s.add(new Option('All', '-1'));
    s.dataset.prbBefore = s.value; s.value = '-1'; s.dispatchEvent(new Event('change', {bubbles: true})); });
  const back = () => document.querySelectorAll('.dt-length select[data-prb-before]').forEach(s => {
    s.value = s.dataset.prbBefore; delete s.dataset.prbBefore; s.dispatchEvent(new Event('change', {bubbles: true})); });
  addEventListener('beforeprint', every); addEventListener('afterprint', back);
  matchMedia('print').addEventListener('change', e => (e.matches ? every() : back()));
  const dark = matchMedia('(prefers-color-scheme: dark)');
  const theme = () => { document.body.dataset.jpThemeLight = dark.matches ? 'false' : 'true'; };
  theme(); dark.addEventListener('change', theme);
})();"""
_HEADING = re.compile(r"^\s*#\s+(.+?)\s*#*\s*$", re.MULTILINE)


def page_title(name: str, nb: Any = None) -> str:
    """The title of a notebook's page: :data:`TITLES`, else the first Markdown heading of ``nb``, else
    ``name``."""
    if name in TITLES:
        return TITLES[name]
    for cell in getattr(nb, "cells", None) or []:
        if cell.get("cell_type") == "markdown":
            match = _HEADING.search(cell.get("source", ""))
            if match:
                return match.group(1)
    return name


def export_html(ipynb: Path, target: Path) -> Path:
    """Write ``ipynb`` as a self-contained HTML page that loads nothing from the network: images embedded,
    the template's CDN scripts (require.js, widgets, MathJax, mermaid) left out, the browser title set to
    :func:`page_title`, a link back to ``index.html`` at the top, the parameters the page ran with under it
    (:func:`parameters_html`; papermill's injected-parameters cell itself is left out, its values are absolute
    local paths), the code hidden until "show the code" is ticked (the nbconvert ``--no-input`` reading,
    kept reversible, with no script), each figure's title as its alt text (:func:`prb_utils.notebook.widgets.
    figures_with_alt_text`), a print stylesheet and a dark palette (:data:`PAGE_CSS`, :data:`PAGE_SCRIPT`)."""
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(ipynb), as_version=4)
    nb.metadata["title"] = page_title(ipynb.stem, nb)  # the lab template's <title>
    ran_with = dict((nb.metadata.get("papermill") or {}).get("parameters") or {})
    # papermill's injected parameters hold this machine's absolute paths; the index lists the run's values
    nb.cells = [c for c in nb.cells if "injected-parameters" not in c.get("metadata", {}).get("tags", [])]
    exporter = HTMLExporter(embed_images=True, exclude_input_prompt=True, exclude_output_prompt=True,
                            extra_loaders=[jinja2.DictLoader({PAGE_TEMPLATE: _PAGE_TEMPLATE_SOURCE})],
                            template_file=PAGE_TEMPLATE)
    page_css = PAGE_CSS + "@media screen and (prefers-color-scheme: dark) {\n" + _dark_theme_css(exporter) + "\n}\n"
    body, _ = exporter.from_notebook_node(nb, resources={"prb_parameters": parameters_html(ran_with),
                                                         "prb_page_css": page_css, "prb_page_js": PAGE_SCRIPT})
    return write_report_file(target, body)


def _dark_theme_css(exporter: Any) -> str:
    """JupyterLab's dark theme variables (the lab template's ``static/theme-dark.css``), "" when not found."""
    for folder in exporter.template_paths:
        path = Path(folder) / "static" / "theme-dark.css"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return ""


def parameters_html(parameters: Mapping[str, Any]) -> str:
    """The parameters a page actually ran with, as a small open table (local paths by their last part).

    >>> "<td>results</td>" in parameters_html({"results": "/somewhere/results", "limit": 0})
    True
    """
    if not parameters:
        return ""

    def shown(value: Any) -> str:
        if isinstance(value, str):
            return display_path(value)
        if isinstance(value, list):
            return ", ".join(map(str, value)) or "(all)"
        return str(value)

    rows = "".join(f"<tr><td><code>{html.escape(str(k))}</code></td><td>{html.escape(shown(v))}</td></tr>"
                   for k, v in parameters.items())
    return f'<details class="prb-params" open><summary>Parameters of this page</summary><table>{rows}</table></details>'


def _failure(exc: Any, name: str) -> str:
    source = str(getattr(exc, "source", "") or "").strip().splitlines()
    first = source[0][:80] if source else ""
    count = getattr(exc, "exec_count", None)
    where = f"cell [{count}]" if count else f"cell {getattr(exc, 'cell_index', '?')}"
    return f"{name}: {where} `{first}` raised {getattr(exc, 'ename', 'an error')}: {getattr(exc, 'evalue', '')}"


@contextmanager
def _local_kernel_config() -> Iterator[Any]:
    """The kernel manager's configuration for a kernel on this machine: the ``ipc`` transport (Unix
    sockets in a private temporary folder, removed afterwards) instead of TCP on localhost, which the
    kernel warns about ("running over TCP without encryption"). Windows has no ipc transport in ZeroMQ:
    there the defaults (TCP) stay."""
    from traitlets.config import Config

    if os.name == "nt":
        yield Config()
        return
    folder = tempfile.mkdtemp(prefix="prb-kernel-")  # mode 0700: only this user reaches the sockets
    try:
        yield Config({"KernelManager": {"transport": "ipc", "ip": os.path.join(folder, "kernel")}})
    finally:
        shutil.rmtree(folder, ignore_errors=True)


#: Command-line options of every report kernel. jupyter_client sends each kernel SIGINT before its shutdown
#: request, and a kernel still handling a message then logs "KeyboardInterrupt caught in kernel" as an ERROR
#: on the report's terminal although nothing failed; a cell's real errors are recorded in its notebook.
KERNEL_ARGUMENTS = ("--IPKernelApp.log_level=CRITICAL",)


def run_notebook(path: Path, out: Path, parameters: dict[str, Any], *, progress: bool = False) -> PageResult:
    """Execute one notebook into ``out`` (its kernel over the local ipc transport) and export its HTML; an
    error cell is recorded, not raised."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    name = path.stem
    target = out / f"{name}.ipynb"
    # papermill saves the notebook after every cell: it writes a hidden file, moved into place when done, so a
    # full disk leaves no empty or cut notebook
    partial = out / f".{name}.partial.ipynb"
    started = time.perf_counter()
    error = None
    try:
        with _report_env(out), _local_kernel_config() as config:
            papermill.execute_notebook(str(path), str(partial), parameters=parameters, kernel_name=KERNEL,
                                       progress_bar=progress, cwd=str(out), log_output=False, config=config,
                                       extra_arguments=list(KERNEL_ARGUMENTS))
    except PapermillExecutionError as exc:
        error = _failure(exc, name)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise _cannot_write_report(target, exc) from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    if partial.exists():
        os.replace(partial, target)
    seconds = time.perf_counter() - started
    page = export_html(target, out / f"{name}.html") if target.exists() else None
    return PageResult(name, target, page, seconds, error)


def _metadata_table(results: str, models: Sequence[str], profiles: Sequence[str]) -> pd.DataFrame:
    """One row per scoring job of the store (the chosen models and conditions), by model then condition."""

    meta = load_run_metadata(results)
    if meta.empty:
        return meta
    if models:
        meta = meta[meta["model"].isin([canonical_spec(m) for m in models])]
    if profiles:
        meta = meta[meta["profile"].isin([parse_condition(p).name for p in profiles])]
    order = sorted(range(len(meta)), key=lambda i: (str(meta["model"].iloc[i]),
                                                     condition_sort_key(meta["profile"].iloc[i]),
                                                     str(meta["finished"].iloc[i]) if "finished" in meta else ""))
    meta = meta.iloc[order]
    if {"started", "finished"} <= set(meta.columns):  # the job's wall time, to the second its times are kept to
        wall = pd.to_datetime(meta["finished"], errors="coerce", utc=True) - pd.to_datetime(
            meta["started"], errors="coerce", utc=True)
        meta = meta.assign(wall_s=wall.dt.total_seconds())
    if "option_retriever" in meta.columns:
        meta = meta.assign(retriever=meta["option_retriever"])
    return meta[[c for c in METADATA_COLUMNS if c in meta.columns]].reset_index(drop=True)


JOB_FILES = "jobs"  # the report's copies of each job's job.json


def _with_job_files(out: Path, results: str, meta: pd.DataFrame) -> pd.DataFrame:
    """``meta`` (:func:`_metadata_table`) with its text escaped and a last column ``job.json``: a link to the
    report's copy of each job's record (``out/jobs/<job>.json``: its key, options, fingerprints and run
    metadata), so a reader can cite exactly what was scored."""
    if meta.empty or "job" not in meta.columns:
        return meta.map(lambda v: html.escape(v) if isinstance(v, str) else v)
    folder = out / JOB_FILES
    folder.mkdir(parents=True, exist_ok=True)
    links = []
    for job in meta["job"].astype(str):
        source = Path(results) / JOBS_DIR / job / JOB_FILE
        if source.is_file():
            write_report_file(folder / f"{job}.json", source.read_bytes())
            links.append(f'<a href="{JOB_FILES}/{html.escape(job)}.json"><code>{html.escape(job)}</code></a>')
        else:
            links.append(html.escape(job))
    shown = meta.drop(columns="job").map(lambda v: html.escape(v) if isinstance(v, str) else v)
    return shown.assign(**{"job.json": links})


def store_display(results: str | Path) -> str:
    """How the index names the store: relative to the working folder when it lies under it, else by its last
    part (a page never shows where this machine keeps its files).

    >>> store_display(Path("results").absolute()), store_display("/elsewhere/results")
    ('results', 'results')
    """
    path = Path(results).expanduser().absolute()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return display_path(str(path))


def report_rows(results: str, models: Sequence[str], profiles: Sequence[str],
                data: pd.DataFrame | None = None) -> pd.DataFrame:
    """The store's per-item rows of the report's models, profile conditions and data
    (:func:`prb_utils.store.query_results`), with ``job_label``."""

    return query_results(results, models=models, profiles=profiles, data=data)


def _report_pairs(data: str, *, subsets: Sequence[str] = (), limit: int | None = None) -> pd.DataFrame | None:
    """The (subset, id, question) of the report's data (its ``subsets`` and ``limit``), for the index and
    ``results.csv`` (None when it cannot be read: its pages then say why)."""

    try:
        return load_benchmark(data, subsets=list(subsets) or None, limit=limit or None,
                              drop_invalid=True)[["subset", "id", "question"]]
    except PRBError:
        return None


def write_results_csv(out: Path, results: str, models: Sequence[str], profiles: Sequence[str],
                      data: pd.DataFrame | None = None, *, records: pd.DataFrame | None = None) -> Path | None:
    """``out/results.csv``: every per-item row behind the report (:func:`report_rows`), for a spreadsheet or
    another tool; ``None`` (and no file) when there is none. With ``records`` (the report's benchmark records),
    a last column ``rendered_input`` holds what each row's model saw (:func:`prb_utils.notebook.rm_seen.rendered_column`)."""
    rows = report_rows(results, models, profiles, data)
    if rows.empty:
        return None
    if records is not None:
        rows = rows.assign(**{RENDERED_COLUMN: rendered_column(rows, records, store_jobs(results))})
    return write_report_file(out / RESULTS_CSV, spreadsheet_safe(rows).to_csv(index=False))


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell that a spreadsheet would run as a formula (starting with ``=``, ``+``,
    ``-``, ``@``, a tab or a carriage return: CSV formula injection) prefixed with ``'``; numbers untouched.

    >>> spreadsheet_safe(pd.DataFrame({"id": ["=HYPERLINK(1)", "q1"], "score": [-0.5, 1.0]})).values.tolist()
    [["'=HYPERLINK(1)", -0.5], ['q1', 1.0]]
    """
    out = frame.copy()
    for column in out.select_dtypes(include="object").columns:
        out[column] = out[column].map(lambda v: f"'{v}" if isinstance(v, str) and v.startswith(FORMULA_STARTS)
                                      else v)
    return out


def report_findings(results: str, models: Sequence[str], profiles: Sequence[str],
                    data: pd.DataFrame | None = None) -> Findings | None:
    """The findings of the report's rows (:func:`report_rows`, one job per ``job_label``), clustered by the
    question of ``data`` (its ``question`` column, when it has one): the verdicts the index renders, the same
    :func:`prb_utils.analysis.findings.compute_findings` page 02 renders. None when the store has no such rows."""
    rows = report_rows(results, models, profiles, data)
    if rows.empty:
        return None
    questions = data if data is not None and "question" in data.columns else None
    return compute_findings(rows, questions, model="job_label", calibrate=False,
                            plan=ResamplingPlan.of_store(results))  # the store's plan, as every page and command


def _findings_html(found: Findings | None, sections: Mapping[str, set[str]] | None = None) -> str:
    """The index's headline: its conclusions in plain sentences (:func:`prb_utils.analysis.findings.page_sentences`
    of the index: each condition's tied group against chance, the lift verdicts, the oracle, locks), the
    leaderboard as page 02 shows it (:func:`prb_utils.notebook.board_view.board_html`: a block per condition,
    verdicts in words beside the numbers, a locked judge greyed and unranked, the oracle apart with its verdict;
    each model linked to the sections ``sections`` names: :func:`prb_utils.notebook.model_sections.page_sections`),
    and the rules under it."""
    esc = html.escape
    if found is None:
        return ('<p class="headline"><i>No scored pairs in the store for these models and conditions: '
                "run <code>prb score</code> first.</i></p>")
    sentences = "".join(f'<p class="headline">{esc(h["sentence"])}</p>' for h in page_sentences(found, "index"))
    notes = "".join(f'<p class="note">{esc(note)}</p>' for note in found.notes())
    return f"{sentences}{board_html(found, sections=sections)}{notes}"


def write_index(out: Path, pages: Sequence[PageResult], *, data: str, results: str, models: Sequence[str],
                profiles: Sequence[str], csv: Path | None = None, pairs: pd.DataFrame | None = None,
                job_profiles: Sequence[str] | None = None, timings: Mapping[str, float] | None = None) -> Path:
    """``out/index.html``: the findings (:func:`report_findings`, :func:`_findings_html`) and where the manual
    explains each statistic (:func:`prb_utils.notebook.manual.manual_html`), a link per notebook page with the
    question it answers (:data:`QUESTIONS`), its executed notebook, its ``numbers.json``, status and time;
    the run facts (the store by :func:`store_display`); and every scoring job the pages used (the
    conditions of ``job_profiles``, default ``profiles``; all when empty), by model then condition, with its
    wall time and the total, beside ``timings`` (``bon``: the Best-of-N stage's seconds; ``total``: the whole
    run's wall time) when given. The page fits a 1280 px window: the wide jobs table scrolls inside its own
    box."""
    import nbformat


    esc = html.escape
    rows = []
    for page in pages:
        nb = nbformat.read(str(page.ipynb), as_version=4) if page.ipynb.is_file() and page.name not in TITLES else None
        title = esc(page_title(page.name, nb))
        link = f'<a href="{esc(page.html.name)}">{title}</a>' if page.html else title
        status = ('<span style="color:#1a7f1a">ok</span>' if page.error is None
                  else f'<span style="color:#b22">error: {esc(page.error)}</span>')
        numbers = out / f"{page.name}.numbers.json"
        files = [f'<a href="{esc(page.ipynb.name)}"><code>{esc(page.ipynb.name)}</code></a>' if page.ipynb.is_file()
                 else f"<code>{esc(page.name)}.ipynb</code>"]
        if numbers.is_file():
            files.append(f'<a href="{esc(numbers.name)}">numbers</a>')
        question = f'<br><span class="question">{esc(QUESTIONS[page.name])}</span>' if page.name in QUESTIONS else ""
        rows.append(f"<tr><td>{link}{question}</td><td>{' · '.join(files)}</td><td>{status}</td>"
                    f"<td>{page.seconds:.1f} s</td></tr>")
    headline = _findings_html(report_findings(results, models, profiles, pairs), page_sections(results, pairs))
    manual = manual_html(out, unit=ResamplingPlan.of_store(results).unit)   # each statistic's rule in the manual
    meta = _metadata_table(results, models, profiles if job_profiles is None else job_profiles)
    total = ""
    if "wall_s" in meta.columns and meta["wall_s"].notna().any():
        total = (f'<p>{len(meta)} scoring jobs, <b>{meta["wall_s"].sum():.0f} s</b> of wall time in all (each job\'s '
                 "time is kept to the second; a job scored in an earlier run shows that run's time).</p>")
    total += "".join(f"<p>{label}: <b>{timings[key]:.0f} s</b> of wall time.</p>" for key, label in (
        ("bon", "The Best-of-N stage"), ("total", "The whole run (scoring, Best-of-N, notebooks, this page)"))
        if timings and timings.get(key) is not None)
    meta = _with_job_files(out, results, meta)
    meta_html = (f'{total}<div class="scroll">{format_frame(meta).to_html(index=False, border=0, escape=False)}'
                 "</div>" if not meta.empty else "<p><i>No scoring job in the store for these models and conditions.</i></p>")
    commit = source_commit()
    facts = [("generated", datetime.now(UTC).isoformat(timespec="seconds")),
             ("prb", __version__ + (f" (commit {commit})" if commit else "")),
             ("data", data), ("store", store_display(results)), ("models", ", ".join(models) or "all in the store"),
             ("profile conditions", ", ".join(profiles) or "all in the store")]
    facts_html = "".join(f"<tr><th>{esc(k)}</th><td>{esc(str(v))}</td></tr>" for k, v in facts)
    download = (f'<p><a href="{esc(csv.name)}" download>Download every per-item result (CSV)</a>: one row per '
                "job and pair, the columns of the store.</p>" if csv is not None else "")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Personalized RewardBench report</title>
<link rel="icon" href="data:,">
<style>
body {{ font-family: sans-serif; margin: 2em auto; padding: 0 1em; max-width: 1100px; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: left; font-size: 0.9em; }}
td {{ overflow-wrap: anywhere; }}
.headline {{ font-size: 1.15em; margin: 0.5em 0; }}
tr.locked td {{ color: #777; }}
.note {{ color: #555; font-size: 0.85em; margin-top: -1em; }}
.warn {{ color: #a04000; font-size: 0.9em; }}
.question {{ color: #555; font-size: 0.9em; }}
.scroll {{ max-width: 100%; overflow-x: auto; }}
.scroll td, .scroll th {{ white-space: nowrap; }}
@media screen and (max-width: 600px) {{ .secondary {{ display: none; }} }}
@page {{ size: A4 landscape; margin: 12mm; }}
@media print {{
  body {{ max-width: none; margin: 0; }}
  .scroll {{ overflow: visible; }}
  .scroll td, .scroll th {{ white-space: normal; }}
  th, td {{ padding: 2px 5px; font-size: 0.75em; }}
}}
@media screen and (prefers-color-scheme: dark) {{
  body {{ background: #111; color: #e6e6e6; }}
  th, td {{ border-bottom-color: #444; }}
  a {{ color: #8ab4f8; }}
  tr.locked td {{ color: #9a9a9a; }}
  .note, .question {{ color: #b0b0b0; }}
  .warn {{ color: #f0a060; }}
}}
</style></head><body>
<h1>Personalized RewardBench report</h1>
<section id="headline"><h2>Headline</h2>{headline}{manual}</section>
<h2>Notebooks</h2>
<table><thead><tr><th>page: the question it answers</th><th>executed notebook, key numbers</th><th>status</th>
<th>time</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>
<p>The pages took {sum(page.seconds for page in pages):.1f} s of kernel time in all (run two at a time).</p>
<h2>Run</h2><table>{facts_html}</table>
<h2>Scoring jobs</h2>{download}{meta_html}
</body></html>
"""
    return write_report_file(out / "index.html", page)


def build_report(
    *,
    data: str,
    results: str,
    out: str,
    models: Sequence[str],
    profiles: Sequence[str],
    progress: bool = True,
    notebooks: Sequence[str] | None = None,
    parameters: Mapping[str, Mapping[str, Any]] | None = None,
    jobs: int = 2,
    subsets: Sequence[str] = (),
    limit: int | None = None,
    stages: Stages | None = None,
    rendered_inputs: bool = False,
) -> Path:
    """Execute the notebooks (all of ``notebooks/``, or the named ones; ``jobs`` at a time) and write
    ``out/index.html``.

    Each notebook gets the parameters ``data`` and ``results`` (local paths made absolute, since the
    notebooks run in ``out``), ``models``, ``profiles``, ``subsets``, ``limit`` and ``interactive=False``
    (those it declares),
    then its own entry of ``parameters`` (notebook name -> parameter values). ``out`` must not be the
    folder of the source notebooks. Returns the index path. When a notebook raises, the other notebooks
    still run, every page and the index are written, and then :class:`PRBError` names the notebook and
    the failing cell. ``stages`` (:class:`~prb_utils.notebook.stages.Stages`): the run's stages so far; the
    notebooks are one more, each named as it starts, and the index lists the Best-of-N stage and the total.
    ``rendered_inputs``: ``results.csv`` also holds what each model saw for each pair (:func:`write_results_csv`).
    """

    out_dir = check_out_folder(out)
    names = list(notebooks) if notebooks else available_notebooks()
    known = available_notebooks()
    unknown = [n for n in [*names, *(parameters or {})] if n not in known]
    if unknown:
        raise PRBError(f"Unknown notebook {', '.join(unknown)}; available: {', '.join(known) or 'none'}.")
    values = {"data": resolve_data_source(data), "results": str(Path(results).expanduser().resolve()),
              "models": list(models), "profiles": list(profiles), "interactive": False,
              "subsets": list(subsets), "limit": int(limit or 0)}
    paths = {name: NOTEBOOK_DIR / f"{name}.ipynb" for name in names}
    chosen = {name: notebook_parameters(name, values, paths[name], (parameters or {}).get(name)) for name in names}
    out_dir.mkdir(parents=True, exist_ok=True)
    # a live notebook on this store then shows what its page shows; a read-only store gets it beside the report
    view = write_report_view(values["results"], chosen, beside=out_dir)
    if view.parent == out_dir and Path(values["results"]) != out_dir:
        live = "what an earlier report showed" if report_view(values["results"]) else "every job"
        print(f"prb: note: the store {values['results']} cannot be written, so the report's view of it (the models "
              f"and conditions each page showed) is in {view}; a live notebook on the store shows {live}.",
              file=sys.stderr)
    done: dict[str, PageResult] = {}
    stages = stages or Stages(progress=progress)

    def run(name: str) -> PageResult:
        if stages.progress:
            tqdm.write(f"   notebook {name} started", file=sys.stderr)
        return run_notebook(paths[name], out_dir, chosen[name])

    # the kernels are mostly single-threaded Python: two at a time keep two cores busy
    with (stages.stage(f"running {len(names)} notebooks", total=len(names), unit="notebook") as bar,
          _report_env(out_dir), ThreadPoolExecutor(max_workers=max(1, min(int(jobs), len(names) or 1))) as pool):
        running = {pool.submit(run, name): name for name in names}
        for future in as_completed(running):
            done[running[future]] = future.result()
            bar.set_postfix_str(f"{running[future]} done")
            bar.update()
    pages = [done[name] for name in names]
    pairs = _report_pairs(values["data"], subsets=subsets, limit=limit)
    asked = [chosen[name].get("profiles", list(profiles)) for name in names]
    used = [] if any(not p for p in asked) else list(dict.fromkeys(c for p in asked for c in p))
    records = load_benchmark(values["data"], subsets=list(subsets) or None, limit=limit or None,
                             drop_invalid=True) if rendered_inputs and pairs is not None else None
    csv = write_results_csv(out_dir, values["results"], models, used, pairs,  # every row any page used
                            records=records)
    index = write_index(out_dir, pages, data=data, results=values["results"], models=models, profiles=profiles,
                        csv=csv, pairs=pairs, job_profiles=used,
                        timings={"bon": stages.of_kind("bon"), "total": stages.total()})
    failed = [p for p in pages if p.error]
    if failed:
        raise PRBError(f"Notebook {failed[0].error} (pages written to {out_dir}; "
                       f"{len(failed)} of {len(pages)} notebooks failed).")
    return index
