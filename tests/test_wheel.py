"""A real package: the wheel, built from the source distribution, carries the sample and the notebooks, and
an installed copy (not the repository) runs ``prb validate sample`` and ``prb report`` from a folder outside
the repository.

Offline and fast: the sdist and the wheel are built without build isolation from a copy of the tree (the
repository stays untouched); the wheel goes with ``--no-deps`` into a fresh venv whose only extra path
(a ``.pth`` file) is the project venv's site-packages, for the dependencies. The project venv's editable
install is not visible there (``.pth`` files in an added path are not processed), and the checks below
prove that the installed copy ran, in the CLI and in the notebook kernels. ``JUPYTER_PATH`` points at the
project venv's ``share/jupyter`` for the same reason: the shared dependencies keep their data files there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from prb_utils.notebook.params import PARAMS_BY_NOTEBOOK

pytestmark = [pytest.mark.slow, pytest.mark.notebooks]

REPO = Path(__file__).resolve().parent.parent
NAMES = sorted(PARAMS_BY_NOTEBOOK)   # every page: a notebook and its parameters class
SKIPPED = shutil.ignore_patterns(".*", "__pycache__", "*.pyc", "build", "dist", "*.egg-info", "results", "reports",
                                 "_bundled")


def run(args: list[str], cwd: Path, *, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    """Run a command; fail with its output when it exits non-zero. Returns stdout."""
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def build_wheel(work: Path) -> Path:
    """sdist from a copy of the tree, then the wheel from the unpacked sdist (as ``python -m build`` does)."""
    source = work / "source"
    shutil.copytree(REPO, source, ignore=SKIPPED)
    sdist = run([sys.executable, "-c", "from setuptools import build_meta as b; print(b.build_sdist('dist'))"],
                source).strip().splitlines()[-1]
    with tarfile.open(source / "dist" / sdist) as archive:
        archive.extractall(work / "sdist", filter="data")
    unpacked = next((work / "sdist").iterdir())
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", str(work / "wheel"), str(unpacked)], work)
    (wheel,) = (work / "wheel").glob("prb-*.whl")
    return wheel


def make_venv(work: Path) -> Path:
    """A venv without pip whose extra path is the project venv's site-packages (the dependencies)."""
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], work)
    python = venv / "bin" / "python"
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], work).strip())
    (site / "_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return venv


def clean_env() -> dict[str, str]:
    """No PYTHONPATH (the repository must not be importable); the dependencies' Jupyter data files
    (nbconvert's templates) from the project venv, where the shared dependencies installed them."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PRB_NUMBERS_DIR", "PRB_HEADLESS")}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
            "JUPYTER_PATH": str(Path(sys.prefix) / "share" / "jupyter")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    """The wheel built and installed into a fresh venv: paths of the wheel, the venv and its site-packages."""
    work = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(work)
    venv = make_venv(work)
    python = venv / "bin" / "python"
    # --ignore-installed: never touch the project venv's own (editable) prb, which pip can see on the path
    run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q", str(wheel)],
        work, env=clean_env())
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], work).strip())
    outside = work / "elsewhere"
    outside.mkdir()
    return {"wheel": wheel, "venv": venv, "site": site, "cwd": outside}


def test_the_wheel_holds_the_sample_and_the_notebooks(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    for path in sorted((REPO / "data").rglob("*")) + sorted((REPO / "notebooks").glob("*.ipynb")):
        relative = path.relative_to(REPO)
        if path.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
            assert f"prb_utils/_bundled/{relative.as_posix()}" in names, path
    assert {f"prb_utils/_bundled/notebooks/{name}.ipynb" for name in NAMES} <= names
    assert not any("__pycache__" in n or n.startswith(("data/", "notebooks/", "tests/")) for n in names)
    # JupyterLab's overrides (the news toast off), installed where the environment's lab reads them
    assert any(n.endswith(".data/data/share/jupyter/lab/settings/overrides.json") for n in names)


def test_the_installed_copy_is_the_one_imported(installed):
    probe = ("import json, prb_utils, prb_utils.resources as r, prb_utils.data as d, prb_utils.notebook.report as p; "
             "print(json.dumps({'file': prb_utils.__file__, 'root': str(r.source_root()), 'sample': str(d.SAMPLE_DIR), "
             "'notebooks': str(p.NOTEBOOK_DIR)}))")
    found = json.loads(run([str(installed["venv"] / "bin" / "python"), "-c", probe], installed["cwd"], env=clean_env()))
    package = installed["site"] / "prb_utils"
    assert Path(found["file"]) == package / "__init__.py"
    assert found["root"] == "None"  # not a source checkout
    assert Path(found["sample"]) == package / "_bundled" / "data" / "sample"
    assert Path(found["notebooks"]) == package / "_bundled" / "notebooks"


def test_installed_prb_validates_the_sample(installed):
    out = run([str(installed["venv"] / "bin" / "prb"), "validate", "sample"], installed["cwd"], env=clean_env())
    for subset in ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture"):
        assert subset in out


def test_installed_prb_report_runs_every_notebook(installed):
    cwd = installed["cwd"]
    run([str(installed["venv"] / "bin" / "prb"), "report", "--model", "length", "--profile", "none", "--bon-n", "2", "--out",
         "rep", "--no-progress"], cwd, env=clean_env(), timeout=600)
    index = (cwd / "rep" / "index.html").read_text(encoding="utf-8")
    assert index.count(">ok<") == len(NAMES)
    package = installed["site"] / "prb_utils"
    for name in NAMES:
        assert (cwd / "rep" / f"{name}.html").is_file()
        content = json.loads((cwd / "rep" / f"{name}.numbers.json").read_text(encoding="utf-8"))
        assert Path(content["prb_utils"]) == package  # the kernels imported the installed copy too
        assert content["params"]["data"] == "sample" and content["numbers"]["pairs"] == 42
    overall = json.loads((cwd / "rep" / "02_accuracy_breakdown.numbers.json").read_text())["numbers"]["overall"]
    from prb_utils.store import load_results

    rows = load_results(cwd / "results")
    assert [(r["model"], r["profile"], r["n"], r["correct"]) for r in overall] == [
        ("length", "none", len(rows), int((rows["outcome"] == "correct").sum()))]
    downstream = (cwd / "rep" / "03_downstream_correlation.html").read_text(encoding="utf-8")
    # page 03 shows the report's own small Best-of-N run (the installed sections render it) and names the command
    # that scores the accuracies its agreement section needs (the report scored `none` only)
    assert "bon-report" in downstream and "The pool&#39;s headroom at k = " in downstream.replace("'", "&#39;")
    assert "missing: benchmark accuracies" in downstream
    assert "prb score --data sample --model length --profile top3" in downstream
