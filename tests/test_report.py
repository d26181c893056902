"""`prb report` on the sample with the model-free baselines: the pages, the index, the error paths, the
report folder and the paths handed to the notebooks, and screenshots.

The pages come from the session's report (``sample_report`` in ``conftest.py``: every notebook executed
once). The screenshot test needs Debian's ``chromium`` on PATH: ``make test`` installs it where it can
(root with apt-get, as ``.ci/run`` is), and the test fails with that instruction where it is missing. The end-to-end ``prb report`` command from an installed wheel is in
``test_wheel.py``.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

from prb_utils.cli import main
from prb_utils.errors import PRBError
from prb_utils.notebook import report as report_module
from prb_utils.notebook.params import AccuracyParams
from prb_utils.notebook.report import (
    NOTEBOOK_DIR,
    available_notebooks,
    build_report,
    check_out_folder,
    record_numbers,
)

NAMES = ["00_workshop_personalization", "01_pair_inspection", "02_accuracy_breakdown", "03_downstream_correlation"]
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def report(sample_report) -> Path:
    assert sample_report.error is None, sample_report.error
    return sample_report.out


def test_notebooks_folder_holds_the_four():
    assert available_notebooks() == NAMES
    assert NOTEBOOK_DIR == REPO / "notebooks"  # a source checkout uses the repository's folder


def test_index_links_every_page_with_run_metadata(report):
    index = (report / "index.html").read_text(encoding="utf-8")
    links = re.findall(r'href="([^"]+)"', index)
    assert links == [f"{name}.html" for name in NAMES]
    for name in NAMES:
        assert (report / f"{name}.html").is_file() and (report / f"{name}.ipynb").is_file()
        assert (report / f"{name}.numbers.json").is_file()
    assert index.count(">ok<") == 4
    assert "Scoring jobs" in index and "lexical" in index and "top3" in index and "transformers" in index


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
    with pytest.raises(PRBError, match=r"01_pair_inspection: cell \[\d+\] `params = PairInspectionParams\(` raised "
                                       r"PRBError: Parameter 'max_pairs' must be an integer"):
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


def test_relative_data_and_results_reach_the_notebooks_as_absolute_paths(tmp_path, monkeypatch):
    """``prb report --data <relative path>``: the notebooks run in the report folder, so a relative path
    must be made absolute before they get it (it used to reach them as given and fail there)."""
    (tmp_path / "mine").mkdir()
    records = [{"id": f"r{i}", "question": f"Which pan for dish {i}?", "profile": [], "chosen": f"A cheap pan {i}.",
                "rejected": f"A copper pan {i}."} for i in range(3)]
    (tmp_path / "mine" / "small.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    seen: dict[str, dict] = {}

    def fake_run(path, out, parameters, *, progress=False):
        seen[path.stem] = parameters
        (out / f"{path.stem}.ipynb").write_text("{}")
        return report_module.PageResult(path.stem, out / f"{path.stem}.ipynb", None, 0.0)

    monkeypatch.setattr(report_module, "run_notebook", fake_run)
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


def _screenshot(page: Path, target: Path, profile: Path) -> Path:
    subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", f"--screenshot={target}", "--window-size=1280,2000", page.as_uri()],
        check=False, capture_output=True, timeout=120,
    )
    return target


def test_headless_chromium_screenshots_show_the_pages(report, tmp_path):
    import matplotlib.image as mpimg

    assert shutil.which("chromium"), "the report tests need a headless Chromium: apt-get install chromium"

    for name in ["index", *NAMES]:
        shot = _screenshot(report / f"{name}.html", tmp_path / f"{name}.png", tmp_path / f"profile-{name}")
        assert shot.is_file() and shot.stat().st_size > 10_000, name
        pixels = mpimg.imread(str(shot))[..., :3]
        colours = np.unique((pixels.reshape(-1, 3) * 255).astype(np.uint8), axis=0)
        assert len(colours) > 50, f"{name}: the screenshot looks blank ({len(colours)} colours)"
        if name != "index":  # figures and coloured boxes: clearly saturated pixels, not only grey text
            saturation = pixels.max(axis=2) - pixels.min(axis=2)
            assert (saturation > 0.25).mean() > 0.001, name
