"""`prb report` on the sample with the model-free baselines: the pages, the index, the error paths, the
report folder and the paths handed to the notebooks, and screenshots.

The pages come from the session's report (``sample_report`` in ``conftest.py``: every notebook executed
once). The offline-page test loads every page in headless Chromium through Playwright (``playwright`` of
the dev extras, driving the system's ``/usr/bin/chromium``: no browser download) with the network
blocked. The screenshot test needs Debian's ``chromium`` on PATH: ``make test`` installs it where it can
(root with apt-get, as ``.ci/run`` is), and the test fails with that instruction where it is missing. The end-to-end ``prb report`` command from an installed wheel is in
``test_wheel.py``.
"""

from __future__ import annotations

import html
import json
import math
import re
import shutil
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from offline_browser import fresh, offline_page
from pdf_text import pdf_text
from test_model_sections import section_links

from prb_utils.cli import main
from prb_utils.errors import PRBError
from prb_utils.notebook import report as report_module
from prb_utils.notebook.markup import model_anchor
from prb_utils.notebook.params import PARAMS_BY_NOTEBOOK, AccuracyParams
from prb_utils.notebook.report import (
    NOTEBOOK_DIR,
    TITLES,
    PageResult,
    available_notebooks,
    build_report,
    check_out_folder,
    export_html,
    record_numbers,
    report_findings,
    run_notebook,
    write_index,
)

NAMES = sorted(PARAMS_BY_NOTEBOOK)   # every page: a notebook and its parameters class
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def report(sample_report) -> Path:
    assert sample_report.error is None, sample_report.error
    return sample_report.out


def test_notebooks_folder_holds_every_notebook():
    assert available_notebooks() == NAMES
    assert NOTEBOOK_DIR == REPO / "notebooks"  # a source checkout uses the repository's folder


def test_index_links_every_page_with_run_metadata(report, sample_report):
    from prb_utils.store import load_run_metadata

    index = (report / "index.html").read_text(encoding="utf-8")
    listed = index[index.index("<h2>Notebooks</h2>"):]   # above it: the leaderboard's links to each model's sections
    links = [link for link in re.findall(r'<a href="([^"]+)"', listed) if not link.startswith("jobs/")]
    assert links == [*(f"{name}{ending}" for name in NAMES for ending in (".html", ".ipynb", ".numbers.json")),
                     "results.csv"]  # each page, its executed notebook and its key numbers; every result
    for name in NAMES:
        assert (report / f"{name}.html").is_file() and (report / f"{name}.ipynb").is_file()
        assert (report / f"{name}.numbers.json").is_file()
        assert html.escape(report_module.QUESTIONS[name]) in index, name  # the question the page answers
    assert index.count(">ok<") == len(NAMES)
    assert "Scoring jobs" in index and "lexical" in index and "top3" in index and "transformers" in index
    assert "<th>store</th><td>results</td>" in index  # relative to where the report ran, never absolute
    table = index[index.index("<h2>Scoring jobs</h2>"):]
    header = re.findall(r"<th>([^<]*)</th>", table[:table.index("</thead>")])
    cells = [re.findall(r"<td>([^<]*)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table[table.index("<tbody>"):],
                                                                          re.DOTALL)]
    meta = load_run_metadata(sample_report.results)
    wall = [int(row[header.index("wall_s")]) for row in cells]
    assert len(wall) == len(meta) and min(wall) >= 0
    assert f"{len(meta)} scoring jobs, <b>{sum(wall)} s</b> of wall time in all" in index


def test_pages_have_no_error_and_hold_figures(report):
    for name in NAMES:
        nb = nbformat.read(str(report / f"{name}.ipynb"), as_version=4)
        outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"], name
        assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs), name
        page = (report / f"{name}.html").read_text(encoding="utf-8")
        assert page.count("data:image/png;base64") >= 1, name
        assert '<script src="https://' not in page, name  # self-contained: readable offline


def test_a_failing_notebook_names_the_cell_and_still_writes_pages(sample_report, tmp_path):
    with pytest.raises(PRBError, match=r"01_pair_inspection: cell \[\d+\] `params = PairInspectionParams\.from_namespace"
                                       r"\(globals\(\)\) .*` raised PRBError: Parameter 'max_pairs' must be an integer"):
        build_report(data="sample", results=str(sample_report.results), out=str(tmp_path), models=["length"],
                     profiles=["none"], progress=False, notebooks=["01_pair_inspection"],
                     parameters={"01_pair_inspection": {"max_pairs": "3"}})
    assert "error:" in (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "PRBError" in (tmp_path / "01_pair_inspection.html").read_text(encoding="utf-8")
    nb = nbformat.read(str(tmp_path / "01_pair_inspection.ipynb"), as_version=4)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert [e["ename"] for e in errors] == ["PRBError"]
    assert not (tmp_path / "01_pair_inspection.numbers.json").exists()  # the last cell never ran


def test_unknown_notebook_or_parameter_is_refused(tmp_path):
    with pytest.raises(PRBError, match="Unknown notebook nope"):
        build_report(data="sample", results=str(tmp_path), out=str(tmp_path), models=[], profiles=[],
                     notebooks=["nope"])
    with pytest.raises(PRBError, match="Unknown notebook nope"):
        build_report(data="sample", results=str(tmp_path), out=str(tmp_path), models=[], profiles=[],
                     parameters={"nope": {}})
    with pytest.raises(PRBError, match="Unknown parameter.*colour.*02_accuracy_breakdown"):
        build_report(data="sample", results=str(tmp_path), out=str(tmp_path / "out"), models=[], profiles=[],
                     parameters={"02_accuracy_breakdown": {"colour": "red"}})
    assert not (tmp_path / "out").exists()  # refused before anything is written


# -------------------------------------------------------------------------- the report folder and paths


def _sources() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(NOTEBOOK_DIR.glob("*.ipynb"))}


def test_report_into_the_notebooks_folder_is_refused_before_scoring(capsys, monkeypatch, tmp_path):
    before = _sources()
    monkeypatch.chdir(REPO)
    for out in ("notebooks", str(NOTEBOOK_DIR), "notebooks/../notebooks/"):
        code = main(["report", "--data", "sample", "--model", "length", "--profile", "none", "--out", out,
                     "--results", str(tmp_path / "results"), "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith("prb: The report folder") and "holds the source notebooks" in err
    assert _sources() == before
    assert not (tmp_path / "results").exists()  # refused before scoring anything
    with pytest.raises(PRBError, match="holds the source notebooks"):
        build_report(data="sample", results=str(tmp_path), out=str(NOTEBOOK_DIR), models=[], profiles=[])
    assert _sources() == before


def test_other_report_folders_are_accepted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert check_out_folder("reports") == tmp_path / "reports"
    assert check_out_folder(str(REPO)) == REPO  # the notebooks' parent is fine: pages go to <out>/*.ipynb


@pytest.fixture
def notebook_calls(monkeypatch) -> dict[str, dict]:
    """``{notebook: parameters}`` of every notebook a report runs; the notebooks themselves are not executed
    (each leaves an empty ``.ipynb`` and no page)."""
    seen: dict[str, dict] = {}

    def fake_run(path, out, parameters, *, progress=False):
        seen[path.stem] = parameters
        (out / f"{path.stem}.ipynb").write_text("{}")
        return report_module.PageResult(path.stem, out / f"{path.stem}.ipynb", None, 0.0)

    monkeypatch.setattr(report_module, "run_notebook", fake_run)
    return seen


def test_relative_data_and_results_reach_the_notebooks_as_absolute_paths(tmp_path, monkeypatch, notebook_calls):
    """``prb report --data <relative path>``: the notebooks run in the report folder, so a relative path
    must be made absolute before they get it (it used to reach them as given and fail there)."""
    (tmp_path / "mine").mkdir()
    records = [{"id": f"r{i}", "question": f"Which pan for dish {i}?", "profile": [], "chosen": f"A cheap pan {i}.",
                "rejected": f"A copper pan {i}."} for i in range(3)]
    (tmp_path / "mine" / "small.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    seen = notebook_calls
    monkeypatch.chdir(tmp_path)
    build_report(data="mine/small.jsonl", results="store", out="reports", models=["length"], profiles=["none"],
                 progress=False)
    assert sorted(seen) == NAMES
    for parameters in seen.values():
        assert parameters["data"] == str(tmp_path / "mine" / "small.jsonl")
        assert parameters["results"] == str(tmp_path / "store")
    from prb_utils.data import load_benchmark

    assert len(load_benchmark(seen["02_accuracy_breakdown"]["data"])) == 3  # loadable from anywhere


def test_hub_ids_and_sample_stay_as_given(tmp_path, monkeypatch):
    from prb_utils.notebook.params import resolve_data_source, resolve_path

    monkeypatch.chdir(tmp_path)
    assert resolve_data_source("sample") == "sample"
    assert resolve_data_source("QiyaoMa/Personalized-RewardBench") == "QiyaoMa/Personalized-RewardBench"
    (tmp_path / "d.jsonl").write_text("")
    assert resolve_data_source("d.jsonl") == str(tmp_path / "d.jsonl")
    assert resolve_path("nowhere") == tmp_path / "nowhere"


# ------------------------------------------------------------------------------------ recorded numbers


def test_record_numbers_adds_a_later_call_to_what_the_page_recorded_before(tmp_path, monkeypatch):
    """A page records its opening conclusions first and its tables last: the file holds both; a key given again
    takes its newer value."""
    monkeypatch.setenv(report_module.NUMBERS_ENV, str(tmp_path))
    params = AccuracyParams(n_boot=100)
    record_numbers(params, conclusions=[{"sentence": "first"}], n=1)
    target = record_numbers(params, n=2, pairs=42)
    content = json.loads(target.read_text(encoding="utf-8"))
    assert content["numbers"] == {"conclusions": [{"sentence": "first"}], "n": 2, "pairs": 42}


def test_record_numbers_writes_plain_json_only_in_a_report_run(tmp_path, monkeypatch):
    params = AccuracyParams(n_boot=100)
    monkeypatch.delenv(report_module.NUMBERS_ENV, raising=False)
    assert record_numbers(params, n=1) is None  # an interactive session writes nothing
    monkeypatch.setenv(report_module.NUMBERS_ENV, str(tmp_path))
    table = pd.DataFrame({"model": ["a", "b"], "accuracy": [0.5, math.nan]}).set_index("model")
    target = record_numbers(params, table=table, n=np.int64(3), ratio=np.float64(0.25), missing=None,
                            nested={"x": [1, 2.0, float("inf")]})
    assert target == tmp_path / "02_accuracy_breakdown.numbers.json"
    content = json.loads(target.read_text(encoding="utf-8"))
    assert content["notebook"] == "02_accuracy_breakdown"
    assert content["params"]["n_boot"] == 100
    assert Path(content["prb_utils"]) == REPO / "prb_utils"
    assert content["numbers"] == {"table": [{"model": "a", "accuracy": 0.5}, {"model": "b", "accuracy": None}],
                                  "n": 3, "ratio": 0.25, "missing": None, "nested": {"x": [1, 2.0, None]}}


# ------------------------------------------------------------------------------------------ screenshots


def test_headless_chromium_screenshots_show_the_pages(report, tmp_path):
    """Each page as a 1280 x 2000 screenshot in one headless Chromium (the network blocked), not blank."""
    import matplotlib.image as mpimg

    assert shutil.which("chromium"), "the report tests need a headless Chromium: apt-get install chromium"

    with offline_page(width=1280, height=2000) as (browser_page, _):
        shots = {}
        for name in ["index", *NAMES]:
            browser_page.goto((report / f"{name}.html").as_uri(), wait_until="load")
            shots[name] = tmp_path / f"{name}.png"
            browser_page.screenshot(path=str(shots[name]))
    for name, shot in shots.items():
        assert shot.is_file() and shot.stat().st_size > 10_000, name
        pixels = mpimg.imread(str(shot))[..., :3]
        rgb = (pixels.reshape(-1, 3) * 255).astype(np.uint32)
        colours = np.unique(rgb[:, 0] << 16 | rgb[:, 1] << 8 | rgb[:, 2])   # one number per colour
        assert len(colours) > 50, f"{name}: the screenshot looks blank ({len(colours)} colours)"
        # figures and coloured boxes: clearly saturated pixels, not only grey text (the index and page 02 open with
        # their conclusions and the leaderboard, text and tables; the workshop page's first screen is text and pale
        # answer boxes now that code is hidden)
        if name not in ("index", "00_workshop_personalization", "02_accuracy_breakdown"):
            saturation = pixels.max(axis=2) - pixels.min(axis=2)
            assert (saturation > 0.25).mean() > 0.001, name


# ------------------------------------------------------- titles, back links, headline, kernel transport


def _title(page: str) -> str:
    match = re.search(r"<title>(.*?)</title>", page, re.DOTALL)
    assert match, "the page has no <title>"
    return match.group(1).strip()


def test_every_page_has_its_title_and_a_link_back_to_the_index(report):
    assert _title((report / "index.html").read_text(encoding="utf-8")) == "Personalized RewardBench report"
    for name in NAMES:
        page = (report / f"{name}.html").read_text(encoding="utf-8")
        assert _title(page) == TITLES[name], name
        body = page[page.index("<body"):]
        first_link = re.search(r'<a\b[^>]*href="([^"]*)"', body)
        assert first_link and first_link.group(1) == "index.html", name  # the first thing a reader can click
        assert body.index('href="index.html"') < body.index("jp-Cell"), name  # above the first cell


def test_pages_reference_nothing_on_the_network(report):
    external = re.compile(r"""(?:\bsrc\s*=|<link\b[^>]*\bhref\s*=|\bimport\s*\(|@import|url\()\s*["']?(?:https?:)?//""",
                          re.IGNORECASE)
    for page in sorted(report.glob("*.html")):
        text = page.read_text(encoding="utf-8")
        assert not external.findall(text), page.name
        for cdn in ("cdnjs.cloudflare.com", "unpkg.com", "cdn.jsdelivr.net", "require.min.js", "mathjax", "mermaid.esm"):
            assert cdn not in text.lower(), f"{page.name} mentions {cdn}"


def test_index_opens_with_the_findings_and_02_says_the_same(report, sample_report):
    """The index's headline is the findings layer's: per condition, the tied group at rank 1 (recomputed here from
    the store) in one sentence, the same sentence and leaders page 02 records, and no "best" by point estimate."""
    from conftest import REPORT_MODELS, REPORT_PROFILES

    from prb_utils.analysis.findings import compute_findings
    from prb_utils.data import load_benchmark
    from prb_utils.store import load_results

    index = (report / "index.html").read_text(encoding="utf-8")
    assert index.index('id="headline"') < index.index("<h2>Notebooks</h2>") < index.index("<h2>Scoring jobs</h2>")
    headline = html.unescape(index[index.index('id="headline"'):index.index("<h2>Notebooks</h2>")])
    rows = load_results(sample_report.results)
    rows = rows[rows["model"].isin(REPORT_MODELS) & rows["profile"].isin(REPORT_PROFILES)]
    found = compute_findings(rows, load_benchmark("sample"), model="job_label", calibrate=False)
    said = found.headline()
    assert [h["profile"] for h in said] == ["none", "top3"]  # none first
    for h in said:
        assert h["sentence"] in headline
        ranked = found.board[(found.board["profile"] == h["profile"]) & (found.board["rank"] == 1)]
        assert sorted(h["leaders"]) == sorted(ranked["model"])
    assert "Best accuracy" not in headline and "best model" not in headline
    page02 = json.loads((report / "02_accuracy_breakdown.numbers.json").read_text(encoding="utf-8"))
    assert page02["numbers"]["findings"]["headline"] == said


def _score_sample(store: Path, models, profiles) -> None:
    specs = [arg for model in models for arg in ("--model", model)]
    conditions = [arg for profile in profiles for arg in ("--profile", profile)]
    assert main(["score", "--data", "sample", *specs, *conditions, "--out", str(store), "--no-progress"]) == 0


def test_findings_and_job_order_follow_model_then_condition(tmp_path, capsys):
    store = tmp_path / "results"
    _score_sample(store, ["lexical", "length"], ["top3", "full", "none"])
    capsys.readouterr()
    found = report_findings(str(store), [], [])
    assert found.conditions() == ["none", "top3", "full"]
    assert set(found.board["model"]) == {"lexical", "length"}
    assert report_findings(str(store), ["length"], ["none"]).board["model"].tolist() == ["length"]
    assert report_findings(str(tmp_path / "empty"), [], []) is None
    write_index(tmp_path, [], data="sample", results=str(store), models=[], profiles=[])
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    jobs = index[index.index("<h2>Scoring jobs</h2>"):]
    listed = re.findall(r"<tr>\s*<td>(\w+)</td>\s*<td>\w+</td>\s*<td>(\w+)</td>", jobs)
    assert listed == [(m, p) for m in ("length", "lexical") for p in ("none", "top3", "full")]
    write_index(tmp_path, [], data="sample", results=str(tmp_path / "empty"), models=[], profiles=[])
    assert "No scored pairs in the store" in (tmp_path / "index.html").read_text(encoding="utf-8")

def test_the_index_lists_the_best_of_n_stage_and_the_whole_run_beside_the_job_times(tmp_path, capsys):
    """The report's stages are named as they start and timed; the index lists the Best-of-N stage's time and
    the run's total wall time beside the scoring jobs' times."""
    from prb_utils.notebook.stages import Stages

    store = tmp_path / "store"
    assert main(["score", "--data", "sample", "--limit", "2", "--model", "length", "--out", str(store),
                 "--no-progress"]) == 0
    stages = Stages(progress=True)
    with stages.stage("scoring 1 jobs", total=1, unit="job") as bar:
        bar.update(1)
    with stages.stage("Best-of-N (sampling, scoring, judging)", kind="bon"):
        pass
    assert "== scoring 1 jobs" in capsys.readouterr().err   # named as it starts
    stages.seconds["Best-of-N (sampling, scoring, judging)"] = 61.4   # as if the stage had taken a minute
    index = write_index(tmp_path, [], data="sample", results=str(store), models=[], profiles=[],
                        timings={"bon": stages.of_kind("bon"), "total": stages.total() + 100}).read_text()
    jobs = index.index("scoring jobs, <b>")
    assert index.index("The Best-of-N stage: <b>61 s</b>") > jobs
    assert re.search(r"The whole run \(scoring, Best-of-N, notebooks, this page\): <b>1\d\d s</b>", index)
    assert "Best-of-N stage" not in write_index(tmp_path, [], data="sample", results=str(store), models=[],
                                                profiles=[]).read_text()


def test_a_report_kernel_runs_over_ipc_without_the_tcp_warning_and_logs_only_critical_errors(tmp_path, capfd):
    notebook = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                 "language": "python"}})
    notebook.cells = [nbformat.v4.new_markdown_cell("# Where the kernel listens"), nbformat.v4.new_code_cell(
        "import json, logging\nfrom ipykernel import get_connection_info\nfrom ipykernel.kernelapp import IPKernelApp\n"
        "info = get_connection_info(unpack=True)\n"
        "level = logging.getLevelName(IPKernelApp.instance().log_level)\n"
        "print(json.dumps({'transport': info['transport'], 'ip': info['ip'], 'log_level': level}))")]
    source = tmp_path / "src" / "kernel_probe.ipynb"
    source.parent.mkdir()
    nbformat.write(notebook, str(source))
    out = tmp_path / "out"
    out.mkdir()
    capfd.readouterr()
    page = run_notebook(source, out, {})
    captured = capfd.readouterr()
    assert page.error is None and page.html is not None
    assert "without encryption" not in captured.err and "without encryption" not in captured.out
    executed = nbformat.read(str(page.ipynb), as_version=4)
    printed = "".join(o.get("text", "") for c in executed.cells for o in c.get("outputs", []))
    info = json.loads(printed)
    assert info["transport"] == "ipc"
    assert info["log_level"] == "CRITICAL"  # no "KeyboardInterrupt caught in kernel" ERROR line at shutdown
    assert Path(info["ip"]).is_absolute()
    assert not Path(info["ip"]).parent.exists()  # the private socket folder is removed afterwards
    html_page = page.html.read_text(encoding="utf-8")
    assert _title(html_page) == "Where the kernel listens"  # no TITLES entry: the first heading


# ----------------------------------------------------------------- every page offline in a real browser

def _open_offline(pages: list[Path], *, width: int = 1280, probe=None, color_scheme: str = "light") -> dict[str, dict]:
    """Load each page in headless Chromium with every request that is not a local file aborted
    (:func:`offline_browser.offline_page`); per page: the requests that tried to leave, console errors, page
    errors, title, width, the first link, and what ``probe(page)`` returns (``probe``, when given, acts on the
    loaded page). ``color_scheme``: the screen's preferred scheme (``light`` or ``dark``)."""
    seen: dict[str, dict] = {}
    with offline_page(width=width, color_scheme=color_scheme) as (page, current):
        for path in pages:
            fresh(current)
            page.goto(path.as_uri(), wait_until="networkidle")
            current.update(
                title=page.title(),
                width=page.evaluate("document.documentElement.scrollWidth"),
                first_link=page.evaluate("(() => { const a = document.querySelector('body a[href]');"
                                         " return a ? a.getAttribute('href') : null; })()"),
                probe=probe(page) if probe is not None else None,
            )
            seen[path.name] = dict(current)
    return seen


def test_every_page_loads_offline_in_chromium_without_errors(report):
    pages = [report / "index.html", *sorted(p for p in report.glob("*.html") if p.name != "index.html")]
    assert [p.stem for p in pages[1:]] == available_notebooks()  # every notebook's page, none forgotten
    seen = _open_offline(pages)
    for name, facts in seen.items():
        assert facts["blocked"] == [] and facts["requests"] == [], f"{name} tried the network: {facts}"
        assert facts["console"] == [], f"{name}: console errors {facts['console']}"
        assert facts["errors"] == [], f"{name}: page errors {facts['errors']}"
        assert facts["width"] <= 1280, f"{name} is {facts['width']} px wide: wider than a 1280 px window"
    assert seen["index.html"]["title"] == "Personalized RewardBench report"
    for name in NAMES:
        assert seen[f"{name}.html"]["title"] == TITLES[name]
        assert seen[f"{name}.html"]["first_link"] == "index.html", name


def test_the_offline_check_catches_a_page_that_reaches_out(tmp_path):
    """The browser check itself: a page with CDN references is caught (and nothing leaves: aborted)."""
    page = tmp_path / "cdn.html"
    page.write_text('<!DOCTYPE html><html><head><title>cdn</title><link rel="icon" href="data:,">'
                    '<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js"></script>'
                    '</head><body><img src="http://example.com/a.png"></body></html>', encoding="utf-8")
    facts = _open_offline([page])["cdn.html"]
    assert sorted(facts["blocked"]) == ["http://example.com/a.png",
                                        "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.1.10/require.min.js"]
    assert facts["console"]  # the aborted loads are reported as errors


def test_the_index_fits_a_1280_px_window_with_a_wide_store(tmp_path, capsys):
    store = tmp_path / ("a-store-folder-with-a-rather-long-name-" * 4) / "results"
    _score_sample(store, ["length", "lexical"], ["none", "top3"])
    capsys.readouterr()
    pages = [PageResult(name, tmp_path / f"{name}.ipynb", None, 1.0,
                        error=None if name != "01_pair_inspection" else "01_pair_inspection: cell [3] " + "x" * 300)
             for name in NAMES]
    index = write_index(tmp_path, pages, data="sample", results=str(store), models=[], profiles=[])
    facts = _open_offline([index])["index.html"]
    assert facts["width"] <= 1280, facts
    assert facts["blocked"] == [] and facts["console"] == [] and facts["errors"] == []


def _pair_list_probe(page) -> dict:
    """On 01's page: the pair table's rows with every row shown, the rows left by searching a pair id and a
    category, and where a click on the found row's link lands."""
    rows = "#prb-pair-list tbody tr"
    page.wait_for_selector("#prb-pair-list.dataTable")  # DataTables ran, from the page's own bundle
    facts = {"info": page.inner_text(".dt-info")}
    page.select_option(".dt-length select", "-1")  # every row on one page
    facts["hrefs"] = page.eval_on_selector_all(f"{rows} a", "links => links.map(a => a.getAttribute('href'))")
    page.fill(".dt-search input", "cooking")
    facts["cooking"] = page.eval_on_selector_all(rows, "trs => trs.map(tr => tr.innerText)")
    page.fill(".dt-search input", "soc-013")
    facts["found"] = page.eval_on_selector_all(f"{rows} a", "links => links.map(a => a.getAttribute('href'))")
    page.click(f"{rows} a")
    facts["hash"] = page.evaluate("location.hash")
    facts["target"] = page.evaluate("""(() => { const el = document.getElementById(location.hash.slice(1));
        return el ? {top: el.getBoundingClientRect().top, height: window.innerHeight, scrolled: window.scrollY,
                     tag: el.tagName} : null; })()""")
    return facts


def test_the_pair_table_lists_every_pair_searches_and_links_to_cards(report, sample_report):
    from prb_utils.data import load_benchmark
    from prb_utils.notebook.pair_view import pair_anchor

    bench = load_benchmark(str(sample_report.root / "bench"))
    facts = _open_offline([report / "01_pair_inspection.html"], probe=_pair_list_probe)["01_pair_inspection.html"]
    assert facts["blocked"] == [] and facts["console"] == [] and facts["errors"] == [], facts
    probe = facts["probe"]
    assert probe["info"].endswith(f"of {len(bench)} entries") and len(bench) == 42
    expected = [f"#{pair_anchor(s, i)}" for s, i in zip(bench["subset"], bench["id"], strict=True)]
    assert sorted(probe["hrefs"]) == sorted(expected)  # every sample pair, each once
    cooking = int((bench["category"] == "cooking").sum())
    assert cooking <= len(probe["cooking"]) < len(bench)  # the search box filters the rows
    assert all("cooking" in row.lower() for row in probe["cooking"])
    assert probe["found"] == ["#pair-Society_and_Culture-soc-013"]
    assert probe["hash"] == "#pair-Society_and_Culture-soc-013"
    target = probe["target"]
    assert target is not None, "no element has the id the row links to"
    # the card is in view (its top within a pixel of the window's: layout heights are fractional, scrolling is not)
    assert target["scrolled"] > 0 and -1 < target["top"] < target["height"]


FLIP_CELLS = """() => [...document.querySelectorAll('#prb-flip-list tbody tr')].map(tr => {
  const cells = [...tr.children], text = document.createRange();
  text.selectNodeContents(cells[2]);
  return {subset_right: text.getBoundingClientRect().right, id_left: cells[3].getBoundingClientRect().left,
          id: cells[3].innerText.trim(), margins: [cells[6].innerText.trim(), cells[7].innerText.trim()]}; })"""


def test_01s_flip_list_keeps_each_pair_id_readable_and_reads_margins_with_one_precision(report):
    """At 1366 px every subset name stays inside its cell (it wraps at its underscores), so the pair id beside it
    reads; margin_none and margin read alike, 3 decimals (before: e-notation beside 0.106)."""

    def probe(p):
        _show_all_rows(p, "prb-flip-list")
        return p.evaluate(FLIP_CELLS)

    facts = _open_offline([report / "01_pair_inspection.html"], width=1366, probe=probe)["01_pair_inspection.html"]
    assert facts["console"] == [] and facts["errors"] == [], facts
    rows = facts["probe"]
    assert rows and all(r["id"] for r in rows)
    assert [r["id"] for r in rows if r["subset_right"] > r["id_left"]] == []   # no subset runs over an id
    margins = [m for r in rows for m in r["margins"]]
    assert all(re.fullmatch(r"-?\d+\.\d{3}|-?\d{2,}|[<>] -?0\.001", m) for m in margins), margins


def test_the_index_links_a_csv_of_every_per_item_result(report, sample_report):
    from conftest import REPORT_MODELS, REPORT_PROFILES

    from prb_utils.store import load_results

    index = (report / "index.html").read_text(encoding="utf-8")
    assert '<a href="results.csv" download>' in index
    written = pd.read_csv(report / "results.csv", dtype={"id": str})
    shown = set(REPORT_PROFILES)   # every condition any page showed (page 05: the probes)
    for name in NAMES:
        shown |= set(json.loads((report / f"{name}.numbers.json").read_text(encoding="utf-8"))["params"]["profiles"])
    stored = load_results(sample_report.results)
    stored = stored[stored["model"].isin(REPORT_MODELS) & stored["profile"].isin(shown)]
    assert len(written) == len(stored) > 0
    key = ["job", "subset", "id"]
    merged = written.merge(stored, on=key, suffixes=("", "_store"))
    assert len(merged) == len(stored)
    assert (merged["outcome"] == merged["outcome_store"]).all()
    assert np.allclose(merged["score_chosen"], merged["score_chosen_store"], equal_nan=True)
    assert {"job_label", "pair_hash"} <= set(written.columns)


def test_no_page_shows_the_absolute_store_path(report, sample_report):
    for name in NAMES:
        page = (report / f"{name}.html").read_text(encoding="utf-8")
        assert str(sample_report.results) not in page, name
        assert "injected-parameters" not in page, name


@pytest.mark.parametrize("given", [[], ["--profile", "none"]])
def test_a_default_report_scores_profile_sizes_for_the_curve_with_the_cheap_models_only(tmp_path, monkeypatch,
                                                                                         notebook_calls, given,
                                                                                         tiny_lm_dir):
    from prb_utils.analysis import profile_curves as pc
    from prb_utils.notebook.params import DiagnosticsParams
    from prb_utils.probes import default_probes
    from prb_utils.store import load_results, load_run_metadata, query_results

    seen = notebook_calls
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--data", "sample", "--limit", "2", "--model", "length", "--model", "lexical", "--model",
                 f"implicit:{tiny_lm_dir}", "--device", "cpu", *given, "--results", "store", "--out", "reports",
                 "--bon-n", "0", "--no-progress"]) == 0   # the jobs are what this test reads, not a Best-of-N run
    jobs = set(zip(*load_results(tmp_path / "store")[["model", "profile"]].to_numpy().T, strict=True))
    main_profiles = ["none"] if given else ["none", "top3"]
    curve = [] if given else list(DiagnosticsParams.curve_profiles)
    oracle = [] if given else ["rubric"]
    probes = [] if given else [f"top3+{p}" for p in default_probes()]   # page 05: the quick models' probes
    drops = [] if given else ["top3+drop1", "top3+drop2", "top3+drop3"]   # and the model-free ones' attribution
    assert jobs == ({(m, p) for m in ("length", "lexical") for p in [*main_profiles, *curve, *oracle, *probes,
                                                                     *drops]}
                    | {(f"implicit:{tiny_lm_dir}", p) for p in main_profiles})  # an LLM only under the report's
    meta = load_run_metadata(tmp_path / "store")
    shuffled = meta[meta.get("option_retriever", pd.Series(index=meta.index, dtype=object)).astype(str) == "random"]
    assert sorted(zip(shuffled["model"], shuffled["profile"], strict=True)) == (
        [] if given else [("length", "top2"), ("lexical", "top2")])  # random posts beside BM25's top2
    # with --profile, 04 shows every condition the store holds for the models (it asks the report for none)
    assert seen["04_personalization_diagnostics"]["profiles"] == ([] if given else [*main_profiles, *curve, *oracle])
    assert seen["02_accuracy_breakdown"]["profiles"] == main_profiles  # the other pages keep the report's conditions
    if not given:
        assert seen["05_reading_the_user"]["profiles"] == ["top3", *probes, *drops]
        assert seen["05_reading_the_user"]["models"] == ["length", "lexical"]   # the quick models only
    if not given:  # what 04 reads: its retrieval ablation and oracle gap have rows on a default run
        rows = query_results(tmp_path / "store", profiles=seen["04_personalization_diagnostics"]["profiles"])
        rows = rows.assign(model_spec=rows["model"], model=rows["job_label"])  # as the notebooks load them
        ablation = pc.retrieval_ablation(rows, run_metadata=meta, n_boot=50)
        gap = pc.oracle_gap(rows, run_metadata=meta, n_boot=50)
        assert not ablation.empty and not gap.empty
        assert not pc.missing_sections(rows, meta)
        plain = query_results(tmp_path / "store", profiles=seen["02_accuracy_breakdown"]["profiles"])
        assert set(plain["job_label"]) == {"length", "lexical", f"implicit:{tiny_lm_dir}"}  # no retriever in a label


def test_results_csv_never_hands_a_spreadsheet_a_formula(tmp_path):
    """A record id or category that starts like a formula is written with a leading apostrophe."""
    import csv

    from prb_utils.data import load_benchmark
    from prb_utils.notebook.report import write_results_csv
    from prb_utils.scoring import score_benchmark

    data = load_benchmark("sample", limit=2).reset_index(drop=True)
    data.loc[0, "id"], data.loc[0, "category"] = "=HYPERLINK(\"http://x\")", "@SUM(A1)"
    score_benchmark(data, ["length"], ["none"], out=tmp_path / "results", progress=False)
    path = write_results_csv(tmp_path, str(tmp_path / "results"), [], [])
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    planted = [r for r in rows if "HYPERLINK" in r["id"]]
    assert len(planted) == 1 and planted[0]["id"].startswith("'=") and planted[0]["category"] == "'@SUM(A1)"
    assert not any(v.startswith(("=", "+", "@")) for r in rows for v in r.values())


def test_the_reports_best_of_n_never_replaces_a_larger_run(tmp_path, monkeypatch, capsys):
    """A `prb bon` run in results/bon that covers the report's models is shown as it is; otherwise the report's
    small run is written apart, to results/bon-report, and the full run's files stay untouched."""
    import argparse

    from prb_utils import cli
    from prb_utils.downstream import pipeline

    calls = []
    monkeypatch.setattr(pipeline, "run_bon_pipeline", lambda data, **kw: calls.append(kw))
    full = tmp_path / "results" / "bon"
    full.mkdir(parents=True)
    (full / "bon_frame.parquet").write_bytes(b"the full run's frame")
    args = argparse.Namespace(data="sample", subset=None, limit=None, drop_invalid=False, results=str(tmp_path / "results"),
                              bon_n=4, bon_limit=1, bon_judge="proxy", device="cpu", seed=0, no_progress=True,
                              engine="hf", engine_url=None, tensor_parallel_size=1, pipeline_parallel_size=1,
                              engine_arg=[], engine_concurrency=None, exact_sampling=False)
    from prb_utils.data import load_benchmark
    from prb_utils.downstream.rubric_judge import judge_identity

    same = {"judge_identity": judge_identity("proxy"), "questions": pipeline.question_digests(load_benchmark("sample"))}
    (full / "run.json").write_text(json.dumps({"models": ["length", "lexical", "embedding:minilm"], "rm_profile": "top3",
                                               "n_samples": 8, "n_questions": 42, **same}), encoding="utf-8")
    options = cli._model_options(args)
    assert cli._report_bon(args, options, ["length", "lexical"], rm_profile="top3") == full and calls == []
    # an exact run (before the modes existed, every run was) serves --exact-sampling; a batched one does not
    exact = argparse.Namespace(**{**vars(args), "exact_sampling": True})
    assert cli._report_bon(exact, options, ["length", "lexical"], rm_profile="top3") == full and calls == []
    batched = json.loads((full / "run.json").read_text(encoding="utf-8"))
    (full / "run.json").write_text(json.dumps({**batched, "sampling": "batched"}), encoding="utf-8")
    assert cli._report_bon(args, options, ["length", "lexical"], rm_profile="top3") == full and calls == []
    cli._report_bon(exact, options, ["length", "lexical"], rm_profile="top3")
    assert [(c["folder"], c["sampling"].exact) for c in calls] == [(cli.REPORT_BON_FOLDER, True)]
    calls.clear()
    (full / "run.json").write_text(json.dumps({"models": ["length"], "rm_profile": "top3", "n_samples": 8,
                                               "n_questions": 42, **same}), encoding="utf-8")   # lexical is missing
    capsys.readouterr()
    shown = cli._report_bon(args, options, ["length", "lexical"], rm_profile="top3")
    assert shown == tmp_path / "results" / cli.REPORT_BON_FOLDER
    # its size is said before it runs: one question per subset of the sample's 3, 4 answers each, and the judge
    assert "Best-of-4 on 3 questions (1 per subset): 12 answers sampled" in capsys.readouterr().err
    assert [c["folder"] for c in calls] == [cli.REPORT_BON_FOLDER]
    assert (full / "bon_frame.parquet").read_bytes() == b"the full run's frame"


def test_page_03_never_shows_a_best_of_n_run_on_other_data_or_by_another_judge(tmp_path, tiny_lm_dir, monkeypatch,
                                                                             notebook_calls, capsys):
    """#35 item 6. Before: a `prb bon` run in results/bon made on other data (the same ids, other questions) or with
    another judge was shown on page 03 without a word; only one on the report's data and judge is shown now."""
    from prb_utils.data import load_benchmark
    from prb_utils.downstream import pipeline

    other = tmp_path / "other"   # the sample's subsets and ids, other questions
    other.mkdir()
    for subset, group in load_benchmark("sample").groupby("subset"):
        records = group.assign(question=group["question"] + " (edited)").drop(columns="subset").to_dict("records")
        (other / f"{subset}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    results = str(tmp_path / "results")

    def bon(data: str) -> None:
        assert main(["bon", "--data", data, "--limit", "1", "--model", "length", "--policy", str(tiny_lm_dir), "--n", "2",
                     "--rm-profile", "none", "--judge", "proxy", "--device", "cpu", "--results", results,
                     "--no-progress"]) == 0, capsys.readouterr().err
        capsys.readouterr()

    calls = []
    real = pipeline.run_bon_pipeline

    def report(judge: str) -> str:
        monkeypatch.setattr(pipeline, "run_bon_pipeline", lambda data, **kw: calls.append(kw))
        try:
            assert main(["report", "--data", "sample", "--model", "length", "--profile", "none", "--bon-n", "2",
                         "--bon-limit", "1", "--bon-judge", judge, "--results", results, "--out",
                         str(tmp_path / "reports"), "--no-progress"]) == 0
        finally:
            monkeypatch.setattr(pipeline, "run_bon_pipeline", real)
        return Path(notebook_calls["03_downstream_correlation"]["bon_dir"]).name

    bon(str(other))
    assert report("proxy") == "bon-report" and len(calls) == 1
    assert "was made on other data" in capsys.readouterr().err
    bon("sample")   # the report's data and judge: shown as it is
    assert report("proxy") == "bon" and len(calls) == 1
    capsys.readouterr()
    assert report("llm:smollm2") == "bon-report" and len(calls) == 2
    assert "with another judge than llm:smollm2" in capsys.readouterr().err


def test_the_index_and_results_csv_count_only_the_reports_data(tmp_path):
    """A store that also holds another file's pairs: the headline and results.csv use the report's pairs only."""
    from prb_utils.data import load_benchmark
    from prb_utils.notebook.report import report_findings, write_results_csv
    from prb_utils.scoring import score_benchmark

    ours = load_benchmark("sample", limit=2)
    other = load_benchmark("sample", limit=4).assign(id=lambda d: "other-" + d["id"].astype(str))
    results = str(tmp_path / "results")
    for data in (ours, other):
        score_benchmark(data, ["length"], ["none"], out=results, progress=False)
    headline = report_findings(results, ["length"], ["none"], ours[["subset", "id"]])
    assert headline.board["n"].tolist() == [len(ours)]
    written = pd.read_csv(write_results_csv(tmp_path, results, [], [], ours[["subset", "id"]]))
    assert sorted(written["id"].astype(str)) == sorted(ours["id"].astype(str))
    # unrestricted: both data sets, each its own job (the renamed frame is no longer the sample: no shared key)
    assert sorted(report_findings(results, ["length"], ["none"]).board["n"]) == [len(ours), len(other)]


def test_prb_report_subset_and_limit_reach_every_page(tmp_path, monkeypatch, notebook_calls):
    """`prb report --subset S --limit N` scores those pairs and every page shows exactly them."""
    from prb_utils.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["report", "--data", "sample", "--model", "length", "--profile", "none", "--subset",
                 "Society_and_Culture", "--limit", "2", "--bon-n", "0", "--results", "store", "--out", "reports",
                 "--no-progress"]) == 0
    assert sorted(notebook_calls) == NAMES
    for parameters in notebook_calls.values():
        assert parameters["subsets"] == ["Society_and_Culture"] and parameters["limit"] == 2
    written = pd.read_csv(tmp_path / "reports" / "results.csv")
    assert len(written) == 2 and set(written["subset"]) == {"Society_and_Culture"}


def test_pages_hide_their_code_until_asked_and_show_the_parameters_they_ran_with(tmp_path):
    """In Chromium: a code cell's input is hidden, ticking "show the code" shows it; markdown stays visible;
    the parameters papermill ran the page with are listed at the top, local paths by their last part."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A page\nSome words a reader reads."),
                nbformat.v4.new_code_cell("answer = 42\nprint(answer)")]
    nb.metadata["papermill"] = {"parameters": {"results": str(tmp_path / "store"), "limit": 2}}
    source = tmp_path / "02_accuracy_breakdown.ipynb"
    nbformat.write(nb, str(source))
    page = export_html(source, tmp_path / "page.html")

    def probe(p):
        code = "document.querySelector('.jp-CodeCell .jp-Cell-inputWrapper')"
        hidden = p.evaluate(f"getComputedStyle({code}).display")
        words = p.evaluate("getComputedStyle(document.querySelector('.jp-MarkdownCell .jp-Cell-inputWrapper')).display")
        p.click("label.prb-code-toggle")
        return hidden, words, p.evaluate(f"getComputedStyle({code}).display"), p.inner_text("details.prb-params")

    hidden, words, shown, parameters = _open_offline([page], probe=probe)["page.html"]["probe"]
    assert hidden == "none" and words != "none" and shown != "none"
    assert "store" in parameters.split()
    assert str(tmp_path) not in parameters and "limit" in parameters


# ------------------------------------------------------------------- tables sort on a header click


HEADER = """([table, title]) => [...document.querySelectorAll(`#${table} thead th`)]
  .findIndex(h => h.querySelector('.dt-column-title')?.innerText.trim() === title)"""
COLUMN_TEXT = """([table, index]) => [...document.querySelectorAll(`#${table} tbody tr`)]
  .map(tr => tr.children[index]?.innerText.trim())"""


def _click_header(page, table: str, title: str) -> tuple[str, list[str]]:
    """Click the text of ``title``'s header in ``table`` (not its sort arrow), wait until the header says it
    sorts in a new direction, and return that direction and the column's cells."""
    index = page.evaluate(HEADER, [table, title])
    assert index >= 0, f"{table} has no header {title!r}"
    th = page.locator(f"#{table} thead th").nth(index)
    before = th.get_attribute("aria-sort")
    th.locator(".dt-column-title").click()
    page.wait_for_function("([table, i, before]) => { const s = document.querySelectorAll(`#${table} thead th`)[i]"
                           ".getAttribute('aria-sort'); return s !== null && s !== before; }", arg=[table, index, before])
    return th.get_attribute("aria-sort"), page.evaluate(COLUMN_TEXT, [table, index])


def _show_all_rows(page, table: str) -> None:
    page.wait_for_selector(f"#{table}.dataTable")
    if page.locator(f"#{table}_wrapper .dt-length select").count():  # a short table has no page-length menu
        page.select_option(f"#{table}_wrapper .dt-length select", "-1")


def _share(text: str) -> float:
    k, n = text.split("/")
    return int(k) / int(n) if int(n) else -1.0


def test_the_pair_list_sorts_correct_as_a_number_on_a_click_of_its_header_text(tmp_path):
    """A pair list where ``correct`` is k/10: a click on the header's text (not its arrow) sorts the rows by
    k/10 as a number ("9/10" before "10/10"; as text "10/10" came before "2/10"), a second click reverses."""
    import itables
    from itables.javascript import generate_init_offline_itables_html

    from prb_utils.notebook.pair_view import pair_list_html

    correct = [10, 2, 9, 0, 5, 10, 1]
    summary = pd.DataFrame({"subset": "S", "id": [f"p{i}" for i in range(len(correct))], "category": "c",
                            "question": "Q", "n_scores": 10, "n_correct": correct, "disagreement": False,
                            "profile_flips": False, "wrong_models": ""})
    page = tmp_path / "list.html"
    page.write_text("<!DOCTYPE html><html><head><title>list</title><link rel='icon' href='data:,'></head><body>"
                    + generate_init_offline_itables_html(itables.options.dt_bundle)
                    + pair_list_html(summary, table_id="planted") + "</body></html>", encoding="utf-8")

    def probe(p):
        _show_all_rows(p, "planted")
        before = p.evaluate(COLUMN_TEXT, ["planted", 4])
        up = _click_header(p, "planted", "correct")
        down = _click_header(p, "planted", "correct")
        headers = p.eval_on_selector_all("#planted thead th", "ths => ths.map(th => th.innerText.trim())")
        return before, up, down, headers

    facts = _open_offline([page], probe=probe)["list.html"]
    assert facts["console"] == [] and facts["errors"] == [] and facts["blocked"] == [], facts
    before, (up_sort, up), (down_sort, down), headers = facts["probe"]
    assert before == [f"{k}/10" for k in correct]  # as the summary gave them
    assert up_sort == "ascending" and up == [f"{k}/10" for k in sorted(correct)]
    assert down_sort == "descending" and down == [f"{k}/10" for k in sorted(correct, reverse=True)]
    assert headers[4] == "correct"


def _report_sort_probe(page) -> dict:
    """On 01's page: the pair list sorted by a click on the text of its ``correct`` header, then on ``pair``;
    the filter-count table (every frame is a DataTable there) sorted by a click on ``pairs``."""
    _show_all_rows(page, "prb-pair-list")
    headers = page.eval_on_selector_all("#prb-pair-list thead th", "ths => ths.map(th => th.innerText.trim())")
    facts = {"headers": headers, "before": page.evaluate(COLUMN_TEXT, ["prb-pair-list", headers.index("correct")])}
    facts["correct"] = _click_header(page, "prb-pair-list", "correct")
    facts["pair"] = _click_header(page, "prb-pair-list", "pair")
    counts = page.evaluate("""() => [...document.querySelectorAll('table.dataTable')]
      .find(t => [...t.querySelectorAll('thead th')].some(th => th.innerText.trim() === 'filter')).id""")
    facts["pairs"] = _click_header(page, counts, "pairs")
    return facts


def test_report_tables_sort_on_a_click_of_the_header_text(report):
    facts = _open_offline([report / "01_pair_inspection.html"], probe=_report_sort_probe)["01_pair_inspection.html"]
    assert facts["console"] == [] and facts["errors"] == [] and facts["blocked"] == [], facts
    probe = facts["probe"]
    assert len(probe["before"]) == 42
    sort, shown = probe["correct"]
    assert sort == "ascending" and [_share(t) for t in shown] == sorted(_share(t) for t in probe["before"])
    assert len(set(shown)) > 1  # the column has something to sort
    sort, pairs = probe["pair"]
    assert sort == "ascending" and pairs == sorted(pairs) and pairs != probe["before"]
    sort, counts = probe["pairs"]
    assert sort == "ascending" and [int(c) for c in counts] == sorted(int(c) for c in counts) and len(counts) > 1


def _answers_probe(page) -> dict:
    """On 00's page: the quiz's answer boxes, what the page shows before and after the first is opened."""
    answers = page.locator("details.prb-answer")
    reveals = page.locator("details.prb-answer .prb-reveal")
    facts = {"n": answers.count(), "visible_before": [reveals.nth(i).is_visible() for i in range(reveals.count())],
             "text_before": page.inner_text("body"),
             "summaries": answers.locator("summary").all_inner_texts()}
    answers.first.locator("summary").click()
    facts["visible_after"] = [reveals.nth(i).is_visible() for i in range(reveals.count())]
    facts["opened"] = reveals.first.inner_text()
    return facts


def test_the_workshop_page_hides_each_answer_key_until_opened(report):
    """00 in the static report, as projected to a room: every quiz pair's answer key and the models' verdicts
    are folded behind "Show the answer"; opening one shows that one only."""
    name = "00_workshop_personalization"
    facts = _open_offline([report / f"{name}.html"], probe=_answers_probe)[f"{name}.html"]
    assert facts["console"] == [] and facts["errors"] == [] and facts["blocked"] == [], facts
    probe = facts["probe"]
    numbers = json.loads((report / f"{name}.numbers.json").read_text(encoding="utf-8"))["numbers"]
    steps = len(numbers["quiz_pairs"]) + len(numbers["quiz_twins"])  # each pair's key, and each twin's
    assert steps > len(numbers["quiz_pairs"]) > 1
    assert probe["n"] == steps and probe["summaries"] == ["Show the answer"] * steps
    assert probe["visible_before"] == [False] * steps
    assert "The user wanted" not in probe["text_before"] and "You picked" not in probe["text_before"]
    assert probe["visible_after"] == [True] + [False] * (steps - 1)
    assert "The user wanted Response" in probe["opened"] and "You picked A." in probe["opened"]
    assert "What the models said on this pair" in probe["opened"]


# ------------------------------------------------------------------ print, dark palette, alt text


def _print_probe(page, rows: int) -> dict:
    """01's page: the pair list's rows on screen, then with print media (every row, no inputs or paging),
    then on screen again."""
    selector = "#prb-pair-list tbody tr"
    page.wait_for_selector("#prb-pair-list.dataTable")
    facts = {"screen": page.locator(selector).count()}
    page.emulate_media(media="print")
    page.wait_for_function(f"document.querySelectorAll({selector!r}).length === {rows}")
    facts["print"] = page.locator(selector).count()
    facts["hidden"] = page.evaluate("""() => ['.dt-search', '.dt-paging', '.dt-length', 'label.prb-code-toggle',
        '#prb-show-code', 'nav.prb-nav', '.jp-CodeCell .jp-Cell-inputWrapper']
        .map(s => [s, getComputedStyle(document.querySelector(s)).display])""")
    page.emulate_media(media="screen")
    page.wait_for_function(f"document.querySelectorAll({selector!r}).length === {facts['screen']}")
    facts["back"] = page.locator(selector).count()
    return facts


def test_printing_a_page_prints_every_row_without_inputs_or_paging(report):
    facts = _open_offline([report / "01_pair_inspection.html"], probe=lambda p: _print_probe(p, 42))
    probe = facts["01_pair_inspection.html"]["probe"]
    assert probe["screen"] == 25 and probe["print"] == 42 and probe["back"] == 25  # the 42 sample pairs
    assert [display for _, display in probe["hidden"]] == ["none"] * len(probe["hidden"]), probe["hidden"]


def _luminance(colour: str) -> float:
    """WCAG relative luminance of a CSS ``rgb()``/``rgba()`` colour (alpha ignored)."""
    channels = [float(c) / 255 for c in re.findall(r"[\d.]+", colour)[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


DARK_PROBE = """() => {
  const background = el => { for (; el; el = el.parentElement) { const c = getComputedStyle(el).backgroundColor;
      if (c !== 'rgba(0, 0, 0, 0)' && c !== 'transparent') return c; } return 'rgb(255, 255, 255)'; };
  const pick = sel => [...document.querySelectorAll(sel)].filter(el => el.innerText.trim()).slice(0, 20)
      .map(el => [getComputedStyle(el).color, background(el)]);
  return {body: [getComputedStyle(document.body).color, background(document.body)],
          dark_class: document.documentElement.classList.contains('dark'),
          text: pick('.jp-RenderedHTMLCommon p'), boxes: pick('.prb-view div[style*="background"]'),
          tables: pick('table.dataTable td'),
          figures: [...document.querySelectorAll('.jp-RenderedImage img')].map(i => getComputedStyle(i).filter)};
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_pages_follow_the_preferred_colour_scheme_with_readable_text(report, scheme):
    """Every text sample (paragraphs, the pair views' coloured boxes, the interactive tables) keeps a WCAG AA
    contrast of 4.5 against what is behind it; under a dark preference the page is dark."""
    name = "01_pair_inspection.html"
    facts = _open_offline([report / name], probe=lambda p: p.evaluate(DARK_PROBE), color_scheme=scheme)[name]
    probe = facts["probe"]
    assert facts["console"] == [] and facts["errors"] == [], facts
    text, behind = probe["body"]
    assert (_luminance(behind) < 0.05) == (scheme == "dark") and probe["dark_class"] == (scheme == "dark")
    assert probe["figures"], "no figure sampled"   # a dark screen draws each figure dark, a light one as drawn
    assert all(("invert" in f) == (scheme == "dark") for f in probe["figures"]), probe["figures"]
    for kind in ("text", "boxes", "tables"):
        assert probe[kind], f"no {kind} sampled"
        low = [(fg, bg) for fg, bg in probe[kind] if _contrast(fg, bg) < 4.5]
        assert not low, f"{scheme}: {kind} hard to read: {low[:3]}"
    index = _open_offline([report / "index.html"], probe=lambda p: p.evaluate(DARK_PROBE.replace(
        "'.jp-RenderedHTMLCommon p'", "'td, p, a'")), color_scheme=scheme)["index.html"]["probe"]
    assert (_luminance(index["body"][1]) < 0.05) == (scheme == "dark")
    low = [(fg, bg) for fg, bg in index["text"] if _contrast(fg, bg) < 4.5]
    assert index["text"] and not low, f"{scheme}: the index is hard to read: {low[:3]}"


def test_every_figure_has_its_title_as_alt_text(report):
    for name in NAMES:
        page = (report / f"{name}.html").read_text(encoding="utf-8")
        alts = re.findall(r'<img [^>]*?alt="([^"]*)"', page)
        assert len(alts) == page.count("<img ") >= 1, name
        assert all(alt.strip() and "No description" not in alt for alt in alts), (name, alts)
    workshop = (report / "00_workshop_personalization.html").read_text(encoding="utf-8")
    assert 'alt="One question, two users: each model&#x27;s margin per user and profile condition' in workshop \
        or "alt=\"One question, two users: each model's margin per user and profile condition" in workshop


# ------------------------------------------------------------------------------- 01's verdict flips


def _flip_probe(page) -> dict:
    """01's page: the flip table's rows (every row shown), a click on the first linked id, and then on the
    back link of the card it lands on."""
    _show_all_rows(page, "prb-flip-list")
    facts = {"rows": page.locator("#prb-flip-list tbody tr").count(),
             "links": page.eval_on_selector_all("#prb-flip-list tbody a", "as => as.map(a => a.getAttribute('href'))")}
    in_view = """(() => { const el = document.getElementById(location.hash.slice(1));
        return el ? el.getBoundingClientRect().top < window.innerHeight && el.getBoundingClientRect().bottom > 0 : null; })()"""
    page.click("#prb-flip-list tbody a")
    facts["card"] = (page.evaluate("location.hash"), page.evaluate(in_view))
    page.click(f"[id='{facts['card'][0][1:]}'] a.prb-back")
    facts["back"] = (page.evaluate("location.hash"), page.evaluate(in_view))
    return facts


def test_the_flip_table_counts_each_direction_and_links_to_cards_and_back(report, sample_report):
    """01: per model, wrong -> correct and correct -> wrong between none and top3 (recomputed from the store);
    every flip in an interactive table whose ids jump to the cards, and each card links back to the pair list."""
    from conftest import REPORT_MODELS, REPORT_PROFILES

    from prb_utils.notebook.pair_view import pair_anchor
    from prb_utils.store import load_results

    rows = load_results(sample_report.results)
    rows = rows[rows["model"].isin(REPORT_MODELS) & rows["profile"].isin(REPORT_PROFILES)]
    ok = rows.assign(ok=rows["outcome"] == "correct").pivot_table(index=["model", "subset", "id"], columns="profile",
                                                                   values="ok", aggfunc="first")
    expected = {model: [int((~g["none"] & g["top3"]).sum()), int((g["none"] & ~g["top3"]).sum())]
                for model, g in ok.groupby(level="model")}
    recorded = json.loads((report / "01_pair_inspection.numbers.json").read_text(encoding="utf-8"))["numbers"]
    counts = {r["model"]: [r["wrong → correct"], r["correct → wrong"]] for r in recorded["flip_counts"]}
    assert counts == {m: c for m, c in expected.items() if sum(c)} and sum(map(sum, counts.values())) == recorded["flips"]

    facts = _open_offline([report / "01_pair_inspection.html"], probe=_flip_probe)["01_pair_inspection.html"]
    assert facts["console"] == [] and facts["errors"] == [] and facts["blocked"] == [], facts
    probe = facts["probe"]
    assert probe["rows"] == recorded["flips"] > 0 and len(probe["links"]) == probe["rows"]
    flipped = ok[ok["none"] != ok["top3"]].reset_index()
    assert sorted(probe["links"]) == sorted(f"#{pair_anchor(s, i)}" for s, i in zip(flipped["subset"], flipped["id"],
                                                                                       strict=True))
    assert probe["card"][0] == probe["links"][0] and probe["card"][1] is True
    assert probe["back"] == ("#prb-pair-list", True)


def test_interactive_tables_say_each_number_as_the_static_ones_and_sort_as_numbers(tmp_path):
    """A frame shown as the notebooks show every frame (widgets.table_html): each cell in the browser reads
    exactly as the formatting layer's Python rule writes it (proportions with 3 decimals, p-values with their
    floor, counts whole, other numbers at most 4 significant digits, a gap as a dash); a header click sorts by
    the numbers, not the text."""
    import itables
    from itables.javascript import generate_init_offline_itables_html

    from prb_utils.formatting import format_value
    from prb_utils.notebook.widgets import table_html

    frame = pd.DataFrame({"model": ["a", "b", "c"], "share": [0.5, 0.0123, 0.25], "p_holm": [0.5, 0.00002, 1.0],
                          "n": [10, 2, 1234], "margin": [12.5, -0.2081588767313895, 0.000012],
                          "lift": [-1.85e-17, float("nan"), 0.25]})
    page = tmp_path / "table.html"
    page.write_text("<!DOCTYPE html><html><head><title>t</title><link rel='icon' href='data:,'></head><body>"
                    + generate_init_offline_itables_html(itables.options.dt_bundle)
                    + table_html(frame) + "</body></html>", encoding="utf-8")

    def probe(p):
        table = p.evaluate("document.querySelector('table[id]').id")
        p.wait_for_selector(f"#{table}.dataTable")
        shown = [p.evaluate(COLUMN_TEXT, [table, i]) for i in range(frame.shape[1])]
        return shown, _click_header(p, table, "share")

    facts = _open_offline([page], probe=probe)["table.html"]
    assert facts["console"] == [] and facts["errors"] == [], facts
    shown, (direction, ordered) = facts["probe"]
    for i, column in enumerate(frame.columns[1:], start=1):
        assert shown[i] == [format_value(v, column) for v in frame[column]], column
    assert shown[1] == ["0.500", "0.012", "0.250"] and shown[2] == ["0.500", "< 0.001", "1.000"]
    assert shown[3] == ["10", "2", "1,234"] and shown[5] == ["0.000", "—", "0.250"]
    assert direction == "ascending" and ordered == ["0.012", "0.250", "0.500"]


# ------------------------------------------------------------------ one formatting layer, every page, printed
A4_LANDSCAPE = {"width": 1123, "height": 794}  # A4 landscape at 96 px per inch
NUMBER_CELL = re.compile(r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[+-]?\d+)?$", re.IGNORECASE)
PRINT_PROBE = """async () => {
  const totals = () => [...document.querySelectorAll('table.dataTable')].map(t => {
    const info = t.closest('.dt-container')?.querySelector('.dt-info');
    const m = info && info.innerText.match(/of ([\\d,]+) entr/);
    return m ? Number(m[1].replace(/,/g, '')) : t.querySelectorAll('tbody tr').length; });
  return totals();
}"""
ROWS_SHOWN = """() => [...document.querySelectorAll('table.dataTable')].map(t => t.querySelectorAll('tbody tr').length)"""
CELLS = """() => ({cells: [...document.querySelectorAll("td")].filter(td => td.offsetParent !== null)
                   .map(td => td.innerText.trim()).filter(Boolean),
              width: document.documentElement.scrollWidth})"""


def _significant_digits(text: str) -> int:
    mantissa = re.split(r"[eE]", text.replace(",", "").lstrip("+-"))[0]
    digits = mantissa.replace(".", "").lstrip("0")
    return len(digits.rstrip("0")) if "." not in mantissa else len(digits)


def _printed_pages(page) -> dict:
    """One page in print emulation at A4 landscape: each interactive table's total rows, the rows it prints,
    every table cell's text and the page's width."""
    totals = page.evaluate(PRINT_PROBE)
    page.emulate_media(media="print")
    expected = json.dumps(json.dumps(totals, separators=(",", ":")))  # a JS string literal of the JSON
    if totals:
        page.wait_for_function(f"JSON.stringify(({ROWS_SHOWN})()) === {expected}", timeout=20_000)
    facts = {"totals": totals, "printed": page.evaluate(ROWS_SHOWN), **page.evaluate(CELLS)}
    page.emulate_media(media="screen")
    return facts


def test_every_page_prints_every_row_and_says_each_number_one_way(report):
    """Across the index and every page, printed at A4 landscape: every interactive table prints all its rows,
    no page is wider than the paper, and no table cell holds "NaN", e-notation inside [1e-3, 1e3] or a decimal
    number with more than 4 significant digits (one formatting layer by meaning)."""
    pages = [report / "index.html", *(report / f"{name}.html" for name in NAMES)]
    seen = _open_offline(pages, width=A4_LANDSCAPE["width"], probe=_printed_pages)
    for name, facts in seen.items():
        probe = facts["probe"]
        assert facts["errors"] == [], (name, facts["errors"])
        assert probe["printed"] == probe["totals"], f"{name}: printed {probe['printed']} of {probe['totals']} rows"
        assert probe["width"] <= A4_LANDSCAPE["width"], f"{name} is {probe['width']} px wide in print"
        numbers = [c for c in probe["cells"] if NUMBER_CELL.match(c)]
        assert numbers, f"{name}: no number in any table"
        assert not [c for c in probe["cells"] if c.lower() in ("nan", "inf", "-inf") or c == "None"], name
        inside = [c for c in numbers if "e" in c.lower() and 1e-3 <= abs(float(c.replace(",", ""))) < 1e3]
        assert not inside, f"{name}: e-notation inside [1e-3, 1e3]: {inside[:5]}"
        long = [c for c in numbers if "." in c and "e" not in c.lower() and _significant_digits(c) > 4]
        assert not long, f"{name}: more than 4 significant digits: {long[:5]}"


A4_PORTRAIT = {"width": 794, "height": 1123}  # A4 portrait at 96 px per inch, a browser's default print
PRINTED_ROWS = """() => [...document.querySelectorAll('tbody tr')].map(tr => [...tr.querySelectorAll('td')]
  .filter(td => td.offsetParent !== null && td.getBoundingClientRect().right <= document.documentElement.clientWidth)
  .map(td => td.innerText.trim()))"""


def _printed_rows(page) -> list[list[str]]:
    """Each table row of the page in print emulation: the text of its cells that lie inside the paper's width."""
    page.emulate_media(media="print")
    rows = page.evaluate(PRINTED_ROWS)
    page.emulate_media(media="screen")
    return rows


def test_page_05_prints_every_verdict_and_every_check_on_a4_portrait(report):
    """Page 05 printed on A4 portrait: every model's reading verdict and every probe's check lie on the paper, in
    the row of their model (the tables are narrow enough; nothing is cut at the right edge)."""
    numbers = json.loads((report / "05_reading_the_user.numbers.json").read_text(encoding="utf-8"))["numbers"]
    seen = _open_offline([report / "05_reading_the_user.html"], width=A4_PORTRAIT["width"], probe=_printed_rows)
    facts = seen["05_reading_the_user.html"]
    assert facts["errors"] == [] and facts["width"] <= A4_PORTRAIT["width"]
    rows = facts["probe"]
    checks = [e for e in numbers["effects"] if e["probe"] != "swap"]
    assert numbers["verdicts"] and checks
    for v in numbers["verdicts"]:
        assert any(v["model"] in row and v["verdict"] in row for row in rows), v["model"]
    for e in checks:
        assert e["check"] in ("pass", "fail")
        assert any({e["model"], e["probe"], e["check"]} <= set(row) for row in rows), (e["model"], e["probe"])


def test_the_leader_and_tied_group_are_the_same_on_the_index_and_page_02(report):
    """The index and page 02 render one findings object: the headline sentences (leaders and tied group per
    condition) printed on both pages are the same, and the locked judge is never ranked on either."""
    numbers = json.loads((report / "02_accuracy_breakdown.numbers.json").read_text(encoding="utf-8"))["numbers"]
    headline = numbers["findings"]["headline"]
    index = html.unescape((report / "index.html").read_text(encoding="utf-8"))
    page = html.unescape((report / "02_accuracy_breakdown.html").read_text(encoding="utf-8"))
    assert headline, "page 02 recorded no headline"
    for said in headline:
        assert said["sentence"] in index and said["sentence"] in page
    board = pd.DataFrame(numbers["findings"]["leaderboard"])
    assert board.loc[board["locked"], "rank"].isna().all()


# ------------------------------------------------------------------ provenance and the live view
def test_the_index_cites_each_job_and_results_csv_holds_every_row_the_pages_used(report, sample_report):
    """Each scoring job links to the report's copy of its job.json (its key, fingerprint, options); results.csv
    holds the rows of every condition any page used (page 04's extra conditions included), with their pair
    hash; the index names the prb version (and the commit, from a source checkout)."""
    from prb_utils import __version__
    from prb_utils.store import load_results

    index = (report / "index.html").read_text(encoding="utf-8")
    jobs = re.findall(r'<a href="jobs/([0-9a-f]+)\.json">', index)
    assert jobs, "no job.json linked"
    for job in jobs:
        record = json.loads((report / "jobs" / f"{job}.json").read_text(encoding="utf-8"))
        assert record["key"] == job and record["model"] and "fingerprint" in record
    assert f"<th>prb</th><td>{__version__}" in index
    used = set()
    for name in NAMES:
        params = json.loads((report / f"{name}.numbers.json").read_text(encoding="utf-8"))["params"]
        used |= set(params.get("profiles") or [])
    written = pd.read_csv(report / "results.csv")
    assert used <= set(written["profile"]), (used, set(written["profile"]))
    stored = load_results(sample_report.results)
    expected = stored[stored["profile"].isin(used)]
    assert len(written) == len(expected) and written["pair_hash"].notna().all()


def test_a_live_notebook_on_a_reported_store_shows_the_jobs_its_page_showed(report, sample_report, tmp_path):
    """Opened live with no models or conditions, page 02 shows the jobs the report's page showed, not every job
    of the store (a later job under another condition stays out), and says the same tied group."""
    from prb_utils.analysis.findings import compute_findings
    from prb_utils.notebook.params import REPORT_VIEW, report_view, write_report_view

    assert set(report_view(sample_report.results)) == set(NAMES)   # every report records what each page showed
    store = tmp_path / "results"
    shutil.copytree(sample_report.results, store)
    shown = json.loads((report / "02_accuracy_breakdown.numbers.json").read_text(encoding="utf-8"))["params"]
    write_report_view(store, {"02_accuracy_breakdown": shown})   # the session's report (other tests report again)
    _score_sample(store, ["length"], ["full"])   # a job the report never showed
    params = AccuracyParams(results=str(store))
    bench = params.load_data()
    live = params.load_results(bench)
    numbers = json.loads((report / "02_accuracy_breakdown.numbers.json").read_text(encoding="utf-8"))["numbers"]
    static = pd.DataFrame(numbers["findings"]["leaderboard"])
    assert set(zip(live["model"], live["profile"], strict=True)) == set(zip(static["model"], static["profile"], strict=True))
    assert compute_findings(live, bench).headline() == numbers["findings"]["headline"]
    (store / REPORT_VIEW).unlink()   # no report on this store: every job
    assert "full" in set(AccuracyParams(results=str(store)).load_results(bench)["profile"])


def test_every_surface_prints_one_interval_per_number(sample_report):
    """The census of bench/interval_census.py on the session's report: each (model, condition, statistic, subset)
    accuracy or lift has one interval, to the printed digit, across the pages' numbers, the index,
    `prb summarize` and the export; and the census does see every one of those surfaces (so that it can fail)."""
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    from interval_census import census, distinct

    frame = census(sample_report.out, sample_report.results)
    table = distinct(frame)
    several = table[table["distinct"] > 1]
    assert several.empty, several.to_string() + "\n" + frame.merge(several[["model", "profile", "subset"]]).to_string()
    assert {"index", "prb summarize", "export", "01_pair_inspection", "02_accuracy_breakdown",
            "04_personalization_diagnostics"} <= set(frame["surface"])
    overall = table[(table["statistic"] == "accuracy") & (table["subset"] == "") & ~table["profile"].str.contains("+",
                                                                                                            regex=False)]
    assert len(overall) >= 4 and overall["surfaces"].str.count(",").min() >= 4   # each seen on 5 surfaces or more
    assert (table["statistic"] == "lift").any()
    for statistic in ("lift p_holm", "comparison p_holm"):   # one adjusted p per test: the pages' and the command's
        seen = table[(table["statistic"] == statistic) & ~table["profile"].str.contains("+", regex=False)]
        assert len(seen) and seen["surfaces"].str.contains("prb summarize").all(), statistic
        assert seen["surfaces"].str.contains("02_accuracy_breakdown").all(), statistic


def test_prb_report_with_profile_still_shows_the_probes_and_curves_the_store_holds(tmp_path, monkeypatch,
                                                                                  notebook_calls):
    """`prb report --profile top3` (the tutorial's example): pages 02 and the index show the conditions asked,
    while 04 and 05 show every condition the store holds for the models (a probe run made before is not hidden
    behind "0 model(s) probed"), and page 05 reads the probe job scored before the report."""
    from prb_utils.cli import main
    from prb_utils.notebook.params import ReadingParams

    monkeypatch.chdir(tmp_path)
    assert main(["probe", "--data", "sample", "--limit", "2", "--model", "lexical", "--probe", "swap",
                 "--out", "store", "--no-progress"]) == 0
    assert main(["report", "--data", "sample", "--limit", "2", "--model", "lexical", "--profile", "top3",
                 "--bon-n", "0", "--results", "store", "--out", "reports", "--no-progress"]) == 0
    assert notebook_calls["02_accuracy_breakdown"]["profiles"] == ["top3"]
    for page in ("04_personalization_diagnostics", "05_reading_the_user"):
        assert notebook_calls[page]["profiles"] == []
    shown = ReadingParams(data="sample", results="store", models=["lexical"], limit=2).load_results()
    assert "top3+swap" in set(shown["profile"])
# ------------------------------------------------------------------ the leaderboard on a screen, a page, a phone
BOARD_PROBE = """() => ({width: document.documentElement.scrollWidth, view: window.innerWidth,
  blocks: [...document.querySelectorAll('.prb-board section.prb-board-condition:not(.prb-board-oracle)')].map(s => ({
    condition: s.dataset.condition,
    heads: [...s.querySelectorAll('thead th')].filter(th => getComputedStyle(th).display !== 'none')
      .map(th => [th.innerText.trim(), th.getBoundingClientRect().right]),
    secondary: [...s.querySelectorAll('th.secondary')].filter(th => getComputedStyle(th).display !== 'none').length,
    cells: [...s.querySelectorAll('td')].filter(td => getComputedStyle(td).display !== 'none')
      .map(td => [td.dataset.label, td.getBoundingClientRect().right]),
    links: [...s.querySelectorAll('td[data-label="model"] a')].map(a => a.getAttribute('href'))}))})"""


def _board_probe(page) -> dict:
    """The leaderboard's blocks as laid out, then again after a click on its "more columns" toggle."""
    before = page.evaluate(BOARD_PROBE)
    page.click(".prb-board label")
    return {"before": before, "after": page.evaluate(BOARD_PROBE)}


def _board_rows(report: Path) -> pd.DataFrame:
    numbers = json.loads((report / "02_accuracy_breakdown.numbers.json").read_text(encoding="utf-8"))["numbers"]
    board = pd.DataFrame(numbers["findings"]["leaderboard"])
    return board[~board["oracle"]]


def test_the_leaderboard_fits_a_1366_px_screen_with_every_column_and_its_toggle(report):
    """On the index and page 02 at 1366x900: a block per benchmark condition whose rank, model, accuracy, chance,
    lift and lift verdict headers (and every cell) lie inside the window without any toggle; the secondary
    columns appear only after a click on "more columns"; each model links to its section on 01 and 05, and those
    sections exist."""
    board = _board_rows(report)
    conditions = list(dict.fromkeys(board["profile"]))
    seen = _open_offline([report / "index.html", report / "02_accuracy_breakdown.html"], width=1366,
                         probe=_board_probe)
    for name, facts in seen.items():
        before, after = facts["probe"]["before"], facts["probe"]["after"]
        assert before["width"] <= 1366, f"{name}: {before['width']} px wide"
        assert [b["condition"] for b in before["blocks"]] == conditions, name
        for block in before["blocks"]:
            heads = [h for h, _ in block["heads"]]
            wanted = ["rank", "model", "accuracy [95% CI]", "against chance"]
            if block["condition"] != "none":
                wanted += ["lift over none [95% CI]", "lift verdict"]
            assert heads == wanted, (name, block["condition"], heads)
            outside = [x for x in block["heads"] + block["cells"] if x[1] > before["view"]]
            assert not outside, f"{name} {block['condition']}: outside the window: {outside}"
            assert block["secondary"] == 0, name
        assert all(b["secondary"] == 3 for b in after["blocks"]), (name, after["blocks"])
        links = {href for b in before["blocks"] for href in b["links"]}
        assert links == {f"{page}.html#{model_anchor(m)}" for m in board["model"]
                         for page in ("01_pair_inspection", "05_reading_the_user")}, name
    effects = json.loads((report / "05_reading_the_user.numbers.json").read_text(encoding="utf-8"))["numbers"]["effects"]
    sections = {"01_pair_inspection": set(board["model"]), "05_reading_the_user": {r["model"] for r in effects}}
    assert sections["05_reading_the_user"], "page 05 probed no model"
    for page, models in sections.items():
        text = (report / f"{page}.html").read_text(encoding="utf-8")
        for model in models:
            assert f'id="{model_anchor(model)}"' in text, (page, model)


def test_every_link_to_a_section_of_a_page_lands_on_an_element_that_exists(report):
    """Every ``href="NN_page.html#id"`` of every page of the report (the leaderboard's links to the models' pairs on
    01 and probes on 05 among them) names an id the target page holds: none silently lands on the page's top."""
    links, missing = section_links(report)
    targets = {target for _, target, _ in links}
    assert {"01_pair_inspection.html", "05_reading_the_user.html"} <= targets, targets   # the leaderboard's links
    assert not missing, missing


def _pdf_probe(page) -> str:
    return pdf_text(page.pdf(format="A4", prefer_css_page_size=True, print_background=True))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_the_a4_print_of_02_and_05_holds_every_rank_and_every_verdict(report):
    """Printed to PDF at A4 (page.pdf, as a reader prints): page 02 holds each leaderboard row, its rank, model,
    accuracy [CI], its verdict against chance and its lift verdict in that order, and page 05 every verdict and
    check it recorded; no sort arrow, download button or word broken in two is printed."""
    from prb_utils.formatting import format_interval, format_value

    seen = _open_offline([report / "02_accuracy_breakdown.html", report / "05_reading_the_user.html"],
                         probe=_pdf_probe)
    page02 = _one_line(seen["02_accuracy_breakdown.html"]["probe"])
    for r in _board_rows(report).itertuples():
        rank = "—" if r.locked else format_value(r.rank, "rank")
        pattern = (rf"{re.escape(rank)} [^\[]*?{re.escape(r.model)} pairs probes "
                   rf"{re.escape(format_interval(r.accuracy, r.ci_low, r.ci_high))} "
                   rf"{re.escape('position-locked: not ranked' if r.locked else r.chance)}")
        if r.lift_verdict:
            pattern += rf" [^\]]*\] {re.escape(r.lift_verdict)}"
        assert re.search(pattern, page02), f"02 prints no row {pattern!r}"
    for condition in dict.fromkeys(_board_rows(report)["profile"]):
        assert f"Under {condition}" in page02
    numbers = json.loads((report / "05_reading_the_user.numbers.json").read_text(encoding="utf-8"))["numbers"]
    page05 = _one_line(seen["05_reading_the_user.html"]["probe"])
    said = [r["verdict"] for r in numbers["verdicts"] if r.get("verdict")]
    said += [r["check"] for r in numbers["effects"] if r.get("check")]
    assert said, "page 05 recorded no verdict"
    for verdict in said:
        assert _one_line(verdict) in page05, f"05 prints no {verdict!r}"
    for text in (page02, page05):
        assert "▲" not in text and "▼" not in text and " CSV " not in f" {text} "
        assert "inconclusiv e" not in text


#: The visible table cells (of a selector) with a word (between spaces, hyphens, underscores or slashes) wider than
#: the cell's text box: a word the layout breaks inside ("inconclusiv e").
BROKEN_WORDS = """(cells) => { const ctx = document.createElement('canvas').getContext('2d');
  return [...document.querySelectorAll(cells)].filter(td => td.offsetParent !== null && td.innerText.trim())
    .filter(td => { const s = getComputedStyle(td); ctx.font = s.font;
      const room = td.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
      return Math.max(...td.innerText.split(/[\\s\\-_/]+/).map(w => ctx.measureText(w).width)) > room + 1; })
    .map(td => td.innerText.trim()).slice(0, 5); }"""


def _phone_probe(page) -> dict:
    # the index's other tables hold hashes and file names, which may break anywhere
    cells = ".prb-board td" if page.url.endswith("index.html") else "td"
    return {**page.evaluate(BOARD_PROBE), "broken": page.evaluate(BROKEN_WORDS, cells)}


def test_on_a_390_px_phone_the_index_leaderboard_stacks_and_nothing_is_cut(report):
    """At 390 px the index's leaderboard rows stack (every accuracy inside the screen), and no cell of its
    leaderboard, nor any table cell of 01 (the pair list) and 02, breaks a word inside (a wide table scrolls in its
    own box instead)."""
    seen = _open_offline([report / "index.html", report / "01_pair_inspection.html",
                          report / "02_accuracy_breakdown.html"], width=390, probe=_phone_probe)
    facts = seen["index.html"]["probe"]
    assert facts["width"] <= 390, facts["width"]
    accuracy = [right for b in facts["blocks"] for label, right in b["cells"] if label == "accuracy"]
    assert len(accuracy) == len(_board_rows(report)) and max(accuracy) <= 390, accuracy
    for name, page in seen.items():
        assert page["probe"]["width"] <= 390, f"{name} is {page['probe']['width']} px wide on a phone"
        assert page["probe"]["broken"] == [], f"{name} breaks words inside: {page['probe']['broken']}"


BUNDLE = re.compile(r"window\._itables_\w+ = injectModule\(")  # the DataTables bundle, embedded once per copy


def test_each_page_embeds_the_table_library_once_and_shows_no_index_column(report):
    for name in NAMES:
        text = (report / f"{name}.html").read_text(encoding="utf-8")
        copies = len(BUNDLE.findall(text))
        assert copies <= 1, f"{name} embeds the table library {copies} times"
        assert "<th>index</th>" not in text, f"{name} shows a table with an index column"
    assert len(BUNDLE.findall((report / "01_pair_inspection.html").read_text(encoding="utf-8"))) == 1


def test_a_table_downloads_its_rows_as_csv_offline_without_an_index_column(tmp_path):
    """widgets.table_html of a filtered frame (its row numbers are no column): its CSV button, clicked with the
    network blocked, downloads the table's header and every row, the numbers as stored."""
    import itables
    from itables.javascript import generate_init_offline_itables_html

    from prb_utils.notebook.widgets import table_html

    frame = pd.DataFrame({"model": ["a", "b", "c", "d"], "accuracy": [0.5, 0.61234, 0.25, 0.9]})
    shown = frame[frame["model"] != "a"]
    page = tmp_path / "table.html"
    page.write_text("<!DOCTYPE html><html><head><title>t</title><link rel='icon' href='data:,'></head><body>"
                    + generate_init_offline_itables_html(itables.options.dt_bundle)
                    + table_html(shown, caption="Accuracy per model") + "</body></html>", encoding="utf-8")

    def probe(p):
        p.wait_for_selector("table.dataTable")
        heads = p.evaluate("[...document.querySelectorAll('table.dataTable thead th')].map(th => th.innerText.trim())")
        with p.expect_download() as download:
            p.click(".dt-buttons button")
        return heads, download.value.suggested_filename, Path(download.value.path()).read_text(encoding="utf-8")

    facts = _open_offline([page], probe=probe)["table.html"]
    assert facts["blocked"] == [] and facts["requests"] == [] and facts["errors"] == [], facts
    heads, filename, csv = facts["probe"]
    assert heads == ["model", "accuracy"]
    assert filename == "Accuracy_per_model.csv"
    lines = csv.lstrip("\ufeff").strip().splitlines()
    assert lines[0].replace('"', "") == "model,accuracy"
    assert [line.replace('"', "") for line in lines[1:]] == ["b,0.61234", "c,0.25", "d,0.9"]
