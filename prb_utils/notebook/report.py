"""HTML reports: execute the parameterized notebooks with papermill, export HTML, write an index page.

:func:`build_report` runs each notebook of ``notebooks/`` headlessly (widgets fall back to static tables
and figures), writes ``<out>/<name>.ipynb`` and ``<out>/<name>.html``, and ``<out>/index.html`` linking
the pages with the run metadata of the store. Notebooks find the data and the store through their
parameters (absolute paths are passed), never through the working folder. Each notebook's last cell calls
:func:`record_numbers`, which writes its key numbers to ``<out>/<name>.numbers.json`` during a report run.
Scoring is not done here: the ``prb report`` command scores what is missing first.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from prb_utils.errors import PRBError
from prb_utils.notebook.params import PARAMS_BY_NOTEBOOK, NotebookParams, resolve_data_source
from prb_utils.resources import resource_dir

NOTEBOOK_DIR = resource_dir("notebooks")  # the repository's notebooks/, or the packaged copy
KERNEL = "python3"
NUMBERS_ENV = "PRB_NUMBERS_DIR"  # where record_numbers writes; set for the kernels of a report run
TITLES = {
    "00_workshop_personalization": "Workshop: one question, two users",
    "01_pair_inspection": "Pair inspection",
    "02_accuracy_breakdown": "Accuracy breakdown",
    "03_downstream_correlation": "Downstream correlation",
}
METADATA_COLUMNS = ("model", "kind", "profile", "n_rows", "n_pairs", "dtype", "device", "seed", "prb", "torch",
                    "transformers", "python", "n_truncated", "n_failed", "finished")


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


def record_numbers(params: NotebookParams, **numbers: Any) -> Path | None:
    """Write a notebook's key numbers to ``<notebook>.numbers.json`` in the report folder, so that checks
    and readers use them without parsing HTML. Outside a report run (``PRB_NUMBERS_DIR`` unset) nothing
    is written and None is returned. The file holds the parameters, where ``prb_utils`` was imported from,
    and ``numbers`` (frames as lists of records, NaN as null)."""
    folder = os.environ.get(NUMBERS_ENV)
    if not folder:
        return None
    import prb_utils

    content = {"notebook": params.notebook, "prb_utils": str(Path(prb_utils.__file__).resolve().parent),
               "params": _plain(asdict(params)), "numbers": _plain(numbers)}
    target = Path(folder) / f"{params.notebook}.numbers.json"
    target.write_text(json.dumps(content, indent=1, ensure_ascii=False, allow_nan=False) + "\n",
                      encoding="utf-8")
    return target


_CDN_SCRIPT = re.compile(r'<script src="https://[^"]*">\s*</script>')


def export_html(ipynb: Path, target: Path) -> Path:
    """Write ``ipynb`` as a self-contained HTML page: images embedded, and without the template's CDN
    scripts (require.js, MathJax), which the static outputs do not need and offline readers cannot load."""
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(embed_images=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nbformat.read(str(ipynb), as_version=4))
    target.write_text(_CDN_SCRIPT.sub("", body), encoding="utf-8")
    return target


def _failure(exc: Any, name: str) -> str:
    source = str(getattr(exc, "source", "") or "").strip().splitlines()
    first = source[0][:80] if source else ""
    count = getattr(exc, "exec_count", None)
    where = f"cell [{count}]" if count else f"cell {getattr(exc, 'cell_index', '?')}"
    return f"{name}: {where} `{first}` raised {getattr(exc, 'ename', 'an error')}: {getattr(exc, 'evalue', '')}"


def run_notebook(path: Path, out: Path, parameters: dict[str, Any], *, progress: bool = False) -> PageResult:
    """Execute one notebook into ``out`` and export its HTML; an error cell is recorded, not raised."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    name = path.stem
    target = out / f"{name}.ipynb"
    started = time.perf_counter()
    error = None
    try:
        with _report_env(out):
            papermill.execute_notebook(str(path), str(target), parameters=parameters, kernel_name=KERNEL,
                                       progress_bar=progress, cwd=str(out), log_output=False)
    except PapermillExecutionError as exc:
        error = _failure(exc, name)
    seconds = time.perf_counter() - started
    page = export_html(target, out / f"{name}.html") if target.exists() else None
    return PageResult(name, target, page, seconds, error)


def _metadata_table(results: str, models: Sequence[str], profiles: Sequence[str]) -> pd.DataFrame:
    from prb_utils.notebook.params import canonical_spec
    from prb_utils.store import load_run_metadata

    meta = load_run_metadata(results)
    if meta.empty:
        return meta
    if models:
        meta = meta[meta["model"].isin([canonical_spec(m) for m in models])]
    if profiles:
        from prb_utils.profile import parse_condition

        meta = meta[meta["profile"].isin([parse_condition(p).name for p in profiles])]
    return meta[[c for c in METADATA_COLUMNS if c in meta.columns]].reset_index(drop=True)


def write_index(out: Path, pages: Sequence[PageResult], *, data: str, results: str, models: Sequence[str],
                profiles: Sequence[str]) -> Path:
    """``out/index.html``: a link per notebook page (with its status and time) and the run metadata."""
    from prb_utils import __version__

    esc = html.escape
    rows = []
    for page in pages:
        title = esc(TITLES.get(page.name, page.name))
        link = f'<a href="{esc(page.html.name)}">{title}</a>' if page.html else title
        status = ('<span style="color:#1a7f1a">ok</span>' if page.error is None
                  else f'<span style="color:#b22">error: {esc(page.error)}</span>')
        rows.append(f"<tr><td>{link}</td><td><code>{esc(page.name)}.ipynb</code></td><td>{status}</td>"
                    f"<td>{page.seconds:.1f} s</td></tr>")
    meta = _metadata_table(results, models, profiles)
    meta_html = (meta.to_html(index=False, border=0, na_rep="") if not meta.empty
                 else "<p><i>No scoring job in the store for these models and conditions.</i></p>")
    facts = [("generated", datetime.now(UTC).isoformat(timespec="seconds")), ("prb", __version__),
             ("data", data), ("store", str(results)), ("models", ", ".join(models) or "all in the store"),
             ("profile conditions", ", ".join(profiles) or "all in the store")]
    facts_html = "".join(f"<tr><th>{esc(k)}</th><td>{esc(str(v))}</td></tr>" for k, v in facts)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>prb report</title>
<style>
body {{ font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: left; font-size: 0.9em; }}
</style></head><body>
<h1>Personalized RewardBench report</h1>
<h2>Notebooks</h2>
<table><thead><tr><th>page</th><th>notebook</th><th>status</th><th>time</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>
<h2>Run</h2><table>{facts_html}</table>
<h2>Scoring jobs</h2>{meta_html}
</body></html>
"""
    target = out / "index.html"
    target.write_text(page, encoding="utf-8")
    return target


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
) -> Path:
    """Execute the notebooks (all of ``notebooks/``, or the named ones) and write ``out/index.html``.

    Each notebook gets the parameters ``data`` and ``results`` (local paths made absolute, since the
    notebooks run in ``out``), ``models``, ``profiles`` and ``interactive=False`` (those it declares),
    then its own entry of ``parameters`` (notebook name -> parameter values). ``out`` must not be the
    folder of the source notebooks. Returns the index path. When a notebook raises, the other notebooks
    still run, every page and the index are written, and then :class:`PRBError` names the notebook and
    the failing cell.
    """
    from tqdm.auto import tqdm

    out_dir = check_out_folder(out)
    names = list(notebooks) if notebooks else available_notebooks()
    known = available_notebooks()
    unknown = [n for n in [*names, *(parameters or {})] if n not in known]
    if unknown:
        raise PRBError(f"Unknown notebook {', '.join(unknown)}; available: {', '.join(known) or 'none'}.")
    values = {"data": resolve_data_source(data), "results": str(Path(results).expanduser().resolve()),
              "models": list(models), "profiles": list(profiles), "interactive": False}
    paths = {name: NOTEBOOK_DIR / f"{name}.ipynb" for name in names}
    chosen = {name: notebook_parameters(name, values, paths[name], (parameters or {}).get(name)) for name in names}
    out_dir.mkdir(parents=True, exist_ok=True)
    pages = []
    bar = tqdm(names, desc="notebooks", unit="notebook", disable=not progress)
    for name in bar:
        bar.set_postfix_str(name)
        pages.append(run_notebook(paths[name], out_dir, chosen[name]))
    bar.close()
    index = write_index(out_dir, pages, data=data, results=values["results"], models=models, profiles=profiles)
    failed = [p for p in pages if p.error]
    if failed:
        raise PRBError(f"Notebook {failed[0].error} (pages written to {out_dir}; "
                       f"{len(failed)} of {len(pages)} notebooks failed).")
    return index
