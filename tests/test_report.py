"""`prb report` end to end on the sample with the model-free baselines, the error path, and screenshots.

The screenshot test runs when Debian's ``chromium`` is on PATH (``.ci/run`` installs it); without it the
test is skipped and says so.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import numpy as np
import pytest

from prb_utils.cli import main
from prb_utils.errors import PRBError
from prb_utils.notebook.report import available_notebooks, build_report

NAMES = ["00_workshop_personalization", "01_pair_inspection", "02_accuracy_breakdown", "03_downstream_correlation"]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report")
    code = main(["report", "--data", "sample", "--model", "length", "--model", "lexical", "--profile", "none",
                 "--profile", "top3", "--out", str(root / "reports"), "--results", str(root / "results"),
                 "--no-progress"])
    assert code == 0
    return root / "reports"


def test_notebooks_folder_holds_the_four():
    assert available_notebooks() == NAMES


def test_index_links_every_page_with_run_metadata(report):
    index = (report / "index.html").read_text(encoding="utf-8")
    links = re.findall(r'href="([^"]+)"', index)
    assert links == [f"{name}.html" for name in NAMES]
    for name in NAMES:
        assert (report / f"{name}.html").is_file() and (report / f"{name}.ipynb").is_file()
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
    downstream = (report / "03_downstream_correlation.html").read_text(encoding="utf-8")
    assert "No BoN pipeline results" in downstream and "run_bon_pipeline" in downstream


def test_a_failing_notebook_names_the_cell_and_still_writes_pages(report, tmp_path):
    with pytest.raises(PRBError, match=r"01_pair_inspection: cell \[\d+\] `params = PairInspectionParams\(` raised "
                                       r"PRBError: .*unknown model spec 'bogus:x'"):
        build_report(data="sample", results=str(report.parent / "results"), out=str(tmp_path), models=["bogus:x"],
                     profiles=["none"], progress=False, notebooks=["01_pair_inspection"])
    assert "error:" in (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "PRBError" in (tmp_path / "01_pair_inspection.html").read_text(encoding="utf-8")


def test_unknown_notebook_is_refused(tmp_path):
    with pytest.raises(PRBError, match="Unknown notebook nope"):
        build_report(data="sample", results=str(tmp_path), out=str(tmp_path), models=[], profiles=[],
                     notebooks=["nope"])


def _screenshot(page: Path, target: Path, profile: Path) -> Path:
    subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", f"--screenshot={target}", "--window-size=1280,2000", page.as_uri()],
        check=False, capture_output=True, timeout=120,
    )
    return target


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (apt-get install chromium)")
def test_headless_chromium_screenshots_show_the_pages(report, tmp_path):
    import matplotlib.image as mpimg

    for name in ["index", *NAMES]:
        shot = _screenshot(report / f"{name}.html", tmp_path / f"{name}.png", tmp_path / f"profile-{name}")
        assert shot.is_file() and shot.stat().st_size > 10_000, name
        pixels = mpimg.imread(str(shot))[..., :3]
        colours = np.unique((pixels.reshape(-1, 3) * 255).astype(np.uint8), axis=0)
        assert len(colours) > 50, f"{name}: the screenshot looks blank ({len(colours)} colours)"
        if name != "index":  # figures and coloured boxes: clearly saturated pixels, not only grey text
            saturation = pixels.max(axis=2) - pixels.min(axis=2)
            assert (saturation > 0.25).mean() > 0.001, name
