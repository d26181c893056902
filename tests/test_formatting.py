"""The formatting layer: every column a page shows declares its kind in one registry
(``prb_utils.formatting.COLUMN_KINDS``), each kind has one rule, a non-zero number never reads as zero, a count
never carries decimals, and the browser's rule (``render_js``) writes the same text as Python's."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import IPython.display
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import PPO_CSV, REPORT_PARAMETERS, write_bon_frame

from prb_utils.cli import main
from prb_utils.data import SAMPLE_DIR
from prb_utils.downstream import correlation, predictors
from prb_utils.formatting import (
    COLUMN_KINDS,
    KINDS,
    MISSING,
    declared_kind,
    format_frame,
    format_interval,
    format_value,
    guess_kind,
    kind_of,
    render_js,
    undeclared,
)
from prb_utils.notebook import report, widgets

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
ZERO_TEXTS = {"0", "-0", "0.0", "-0.0", "0.00", "-0.00", "0.000", "-0.000", "0e+0", "0.000e+0"}
# Magnitudes every kind is tried at: a non-zero value among them must never read as zero.
MAGNITUDES = [1e-9, 3.7e-7, 2e-5, 0.0004, 0.00049, 0.0005, 0.00051, 0.0012, 0.0625, 0.0846, 0.366, 0.5, 0.9995, 1.0,
              4.7857, 9.999, 10.0, 12.345, 448.0, 998.5, 999.5, 1234.0, 9124.0, 123456.789]


# ------------------------------------------------------------------ the two reported cases and each rule
def test_the_reported_cases_read_as_their_kind():
    """Page 02's style table printed length_coef 0.366 [0.288, 0.444] as "0 0 0" (its name said "length") and
    page 03's diff_n_boot_valid 9124 as "9124.000" (its name said "diff")."""
    style = pd.DataFrame({"length_coef": [0.366, -0.0846], "length_low": [0.288, -0.215],
                          "length_high": [0.444, 0.0459], "diff_n_boot_valid": [9124, 200]})
    assert format_frame(style).values.tolist() == [["0.366", "0.288", "0.444", "9,124"],
                                                   ["-0.085", "-0.215", "0.046", "200"]]
    assert kind_of("length_coef") == "coefficient" and kind_of("diff_n_boot_valid") == "count"
    assert format_interval(0.366, 0.288, 0.444, sense=kind_of("length_coef")) == "0.366 [0.288, 0.444]"


@pytest.mark.parametrize(("kind", "value", "text"), [
    ("proportion", 0.5714285, "0.571"), ("proportion", -1.85e-17, "0.000"), ("proportion", 0.0004, "< 0.001"),
    ("proportion", -0.0004, "> -0.001"), ("coefficient", 0.366, "0.366"), ("coefficient", -0.0846, "-0.085"),
    ("coefficient", 12.345, "12.35"), ("coefficient", 0.0002, "< 0.001"), ("count", 9124.0, "9,124"),
    ("count", 20.5, "20.5"), ("rank", 3.0, "3"), ("length", 448.4, "448"), ("length", 0.31, "0.31"),
    ("seconds", 0.004, "0.004"), ("seconds", 75.2, "75"), ("p_value", 0.0004, "< 0.001"), ("p_value", 0.0424, "0.042"),
    ("temperature", math.inf, "infinite"), ("temperature", 0.00528, "0.00528"), ("label", 1234.0, "1234"),
    ("score", 0.49273591, "0.493"), ("score", -0.008928395, "-0.009"), ("score", 0.00073250229, "0.001"), ("score", 0.0004, "< 0.001"),
    ("score", 465.0, "465"), ("score", 12.345, "12.35"), ("number", 0.000372, "3.720e-4"), ("number", -0.2081588767313895, "-0.2082"), ("number", 448.0, "448"),
])
def test_each_kind_has_one_rule(kind, value, text):
    assert format_value(value, sense=kind) == text
    assert format_value(float("nan"), sense=kind) == MISSING and format_value(None, sense=kind) == MISSING


@pytest.mark.parametrize("kind", KINDS)
def test_no_kind_prints_a_non_zero_number_as_zero_nor_a_whole_count_with_decimals(kind):
    for size in MAGNITUDES:
        for value in (size, -size):
            text = format_value(value, sense=kind)
            assert text not in ZERO_TEXTS, (kind, value, text)
            if kind in ("count", "rank", "label") and float(value).is_integer():
                assert "." not in text, (kind, value, text)
    noise = format_value(3e-10, sense=kind)  # float noise is 0 (a p-value's floor: "< 0.001")
    assert noise == "< 0.001" if kind == "p_value" else noise in ZERO_TEXTS


# ------------------------------------------------------------------ the registry and how headers are read
def test_every_declared_kind_is_a_kind_and_headers_are_read_by_their_statistic():
    assert set(COLUMN_KINDS.values()) <= set(KINDS)
    assert declared_kind("top3: rank") == "rank" and declared_kind("top3+swap: tie rate") == "proportion"
    assert declared_kind(("none", "accuracy")) == "proportion"  # a two-row header: condition over statistic
    assert declared_kind(("p_perm", "kendall")) == "p_value"  # a pivot: statistic over coefficient
    assert declared_kind(("n", "")) == "count"
    assert declared_kind("full: accuracy in Society_and_Culture") == "proportion"
    assert declared_kind("bon_gain@8") == "score" and declared_kind("oracle (rubric)") == "proportion"
    assert declared_kind("mystery") is None and kind_of("mystery") == "number"


def test_a_column_declared_nowhere_is_found_and_only_then_guessed_from_its_name():
    frame = pd.DataFrame({"model": ["a"], "accuracy": [0.5], "my_rate": [0.25], "verdict": [None],
                          "locked": [True]}).set_index("model")
    assert undeclared(frame) == ["my_rate"]  # text, gaps and booleans are not numbers
    assert guess_kind("my_rate") == "proportion" and kind_of("my_rate") == "proportion"
    assert guess_kind("length_chosen") == "length" and kind_of("length_coef") == "coefficient"  # declared first


# ------------------------------------------------------------------ the browser writes what Python writes
@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the browser's render functions")
def test_the_browser_rule_writes_the_python_text_for_every_kind(tmp_path):
    values = sorted({v for size in MAGNITUDES for v in (size, -size)} | {0.0, 0.5714285, 0.0846, 20.5})
    script = ["const out = {};"]
    for kind in KINDS:
        script.append(f"out[{json.dumps(kind)}] = {json.dumps(values)}.map(v => ({render_js(kind)})(v, 'display'));")
    script.append("console.log(JSON.stringify(out));")
    (tmp_path / "render.js").write_text("\n".join(script), encoding="utf-8")
    shown = json.loads(subprocess.run(["node", str(tmp_path / "render.js")], capture_output=True, text=True,
                                      check=True).stdout)
    for kind in KINDS:
        assert shown[kind] == [format_value(v, sense=kind) for v in values], kind


# ------------------------------------------------------------------ every number every page shows
def _sample_store(root: Path, judge: Path, embedding: Path) -> None:
    """The sample scored by the two baselines under the conditions every page reads (none, top3, full, rubric,
    top3 with the random retriever), the probes of page 05, a BoN frame for page 03, and a tiny random judge
    and embedding RM under none and top3 (page 02's judge tables, page 04's difficulty tiers)."""
    shutil.copytree(SAMPLE_DIR, root / "bench")
    (root / "ppo.csv").write_text(PPO_CSV, encoding="utf-8")
    specs = ["--model", "length", "--model", "lexical"]
    common = ["--data", "bench", *specs, "--out", "results", "--no-progress"]
    assert main(["score", *common, *(a for p in ("none", "top3", "full", "rubric") for a in ("--profile", p))]) == 0
    assert main(["score", *common, "--profile", "top3", "--retriever", "random"]) == 0
    assert main(["probe", *common, "--probe", "swap", "--probe", "label-swap"]) == 0
    assert main(["score", "--data", "bench", "--model", f"judge:{judge}", "--model", f"embedding:{embedding}",
                 "--profile", "none", "--profile", "top3", "--out", "results", "--no-progress"]) == 0
    write_bon_frame(root / "results" / "bon")


def _run_page(path: Path, parameters: dict, shown: list[pd.DataFrame]) -> None:
    """Execute a notebook's code cells in this process, as papermill would with ``parameters`` (set after the
    cell tagged ``parameters``), keeping every frame the page displays or shows as a table."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    scope: dict = {"__name__": "__main__"}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), str(path), "exec"), scope)  # noqa: S102 - the project's notebook
            if "parameters" in cell.get("metadata", {}).get("tags", []):
                scope.update(parameters)


@pytest.fixture(scope="module")
def page_frames(tmp_path_factory, tiny_lm_dir, tiny_bert_dir) -> dict[str, list[pd.DataFrame]]:
    """Every frame each page (00-05) and the index show, on a small store of the baselines (and two tiny RMs)."""
    root = tmp_path_factory.mktemp("formatting_store")
    frames: dict[str, list[pd.DataFrame]] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        matplotlib.use("Agg")
        _sample_store(root, tiny_lm_dir, tiny_bert_dir)
        for path in sorted(NOTEBOOKS.glob("0*.ipynb")):
            shown = frames.setdefault(path.stem, [])

            def keep(obj, *_, _shown=shown, **__) -> None:
                if isinstance(obj, pd.DataFrame):
                    _shown.append(obj)

            patch.setattr(IPython.display, "display", keep)
            patch.setattr(widgets, "show_table", lambda frame, caption="", _keep=keep: _keep(frame))
            patch.setattr(widgets, "init_tables", lambda **_: None)
            parameters = {"data": "bench", "results": "results", "models": [], "profiles": [], "interactive": False,
                          **REPORT_PARAMETERS.get(path.stem, {})}
            if path.stem == "03_downstream_correlation":
                parameters["ppo"] = str(root / "ppo.csv")
            _run_page(path, parameters, shown)
            plt.close("all")
        found = report.report_findings("results", [], [], None)
        frames["index"] = [found.board, report._metadata_table("results", [], [])]
    return frames


# A pivot whose headers are data, not statistics (page 03's PPO outcome per subset: its columns are the CSV's
# subsets). Its cells fall back to "other number"; the page would declare them by naming its columns.
DATA_HEADERS = {("03_downstream_correlation", "subset")}


def _cells(frame: pd.DataFrame):
    """(column, value) for every numeric cell of ``frame`` as the tables show it (a named index as columns)."""
    plain = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
    shown = frame if plain else frame.reset_index(allow_duplicates=True)
    for i, column in enumerate(shown.columns):
        for value in shown.iloc[:, i]:
            if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)) \
                    and not pd.isna(value):
                yield column, float(value)


@pytest.mark.slow
def test_every_number_every_page_shows_is_declared_and_never_reads_as_zero(page_frames):
    """Each page's frames: every numeric column has a declared kind, no non-zero number reads as zero, and no
    whole count carries decimals; the style table's coefficients read as coefficients."""
    missing, zero, decimals = [], [], []
    for page, frames in page_frames.items():
        assert frames, f"{page} showed no table"
        for frame in frames:
            if (page, frame.columns.name) not in DATA_HEADERS:
                missing += [(page, c) for c in undeclared(frame)]
            for column, value in _cells(frame):
                text = format_value(value, column)
                if abs(value) >= 1e-9 and text in ZERO_TEXTS:
                    zero.append((page, column, value, text))
                if kind_of(column) in ("count", "rank") and value.is_integer() and "." in text:
                    decimals.append((page, column, value, text))
    assert not missing, f"columns with no declared kind (add them to COLUMN_KINDS): {sorted(set(missing), key=str)}"
    assert not zero, f"non-zero numbers shown as zero: {zero[:10]}"
    assert not decimals, f"whole counts shown with decimals: {decimals[:10]}"
    judged = [f for f in page_frames["02_accuracy_breakdown"] if "order_consistency" in f.columns]
    assert judged, "page 02 showed no judge table"
    style = [f for f in page_frames["02_accuracy_breakdown"] if "length_coef" in f.columns]
    assert style, "page 02 showed no style table"
    coefficients = style[0]["length_coef"].dropna()
    assert len(coefficients) and all(format_value(v, "length_coef") == f"{v:.3f}" or abs(v) < 5e-4
                                     for v in coefficients)


@pytest.mark.slow
def test_the_pages_show_every_kind_of_number(page_frames):
    """The page test above reaches proportions, coefficients, counts, ranks, lengths, p-values and temperatures:
    a page that stopped showing one would leave its rule untested."""
    seen = {kind_of(c) for frames in page_frames.values() for f in frames for c, _ in _cells(f)}
    assert {"proportion", "coefficient", "count", "rank", "length", "p_value", "temperature", "seconds"} <= seen


def test_format_frame_keeps_repeated_headers_and_two_header_rows():
    frame = pd.DataFrame([[0.5, 3.0, 0.366]], columns=pd.MultiIndex.from_tuples(
        [("none", "accuracy"), ("none", "n"), ("style", "length_coef")]))
    assert format_frame(frame).values.tolist() == [["0.500", "3", "0.366"]]
    twice = pd.DataFrame([[0.5, 0.5]], columns=["accuracy", "accuracy"])
    assert format_frame(twice).values.tolist() == [["0.500", "0.500"]]



def test_page_03s_predictor_table_reads_its_draws_as_a_count():
    """The table page 03 shows when enough RMs have BoN results (not reached by the baseline store): every
    column declared, ``diff_n_boot_valid`` whole ("200", never "200.000")."""
    rng = np.random.default_rng(0)
    statistics = pd.DataFrame(rng.uniform(size=(6, 3)), columns=["mean_accuracy", "worst_subset", "margin_effect"],
                              index=pd.Index([f"rm{i}" for i in range(6)], name="model"))
    downstream = pd.Series(rng.uniform(size=6), index=statistics.index)
    table = predictors.predictor_table(statistics, downstream, n_boot=200)
    shown = correlation.p_display(table)
    assert undeclared(table) == [] and undeclared(shown) == []
    draws = table["diff_n_boot_valid"].dropna()
    assert len(draws) and all(format_value(v, "diff_n_boot_valid") == f"{int(v):,}" for v in draws)
