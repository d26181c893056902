"""`prb report` on data that is not the shipped sample: every page speaks of the data it loaded, every command it
suggests names that data, page 00 shows two users only when they truly want opposite answers, and the report runs
no Best-of-N that page 03 could not rank."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from conftest import write_bon_frame

from prb_utils.cli import main
from prb_utils.data import load_benchmark
from prb_utils.downstream.pipeline import question_digests
from prb_utils.notebook.pair_view import NO_TWINS
from prb_utils.notebook.report import NOTEBOOK_DIR, available_notebooks, build_report, run_notebook

#: What a page on other data must never say: the sample's facts and commands.
SAMPLE_WORDS = ("--data sample", "shipped sample", "the sample's")


def _other_data(folder: Path, *, twins: bool) -> Path:
    """The sample renamed and rewritten as another data set (its own subsets, ids and texts) in ``folder``, one
    ``.jsonl`` per subset. ``twins=False`` gives every chosen answer its own words, so no two users want opposite
    answers to the same question any more."""
    data = load_benchmark("sample").reset_index(drop=True)
    data["subset"] = data["subset"].map(lambda s: f"Mine_{s.split('_')[0]}")
    data["id"] = [f"rec{n:03d}" for n in range(len(data))]
    data["question"] = "In short: " + data["question"]
    for column in ("chosen", "rejected"):   # the same change on both sides keeps each twin a twin
        data[column] = data[column] + " That is my advice."
    if not twins:
        data["chosen"] = data["chosen"] + " (" + data["id"] + ")"
    folder.mkdir()
    for subset, group in data.groupby("subset"):
        records = group.drop(columns="subset").to_dict("records")
        (folder / f"{subset}.jsonl").write_text("".join(json.dumps(r, default=str) + "\n" for r in records),
                                                encoding="utf-8")
    return folder


def _visible(page: Path) -> str:
    """A page's text as a reader can get at it (scripts and styles left out), entities decoded."""
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", page.read_text(encoding="utf-8"), flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


def _shown_twins(report: Path, data: pd.DataFrame) -> list[dict]:
    """The records of the twin pair page 00 showed (its key numbers: ``twins``), looked up in ``data``."""
    numbers = json.loads((report / "00_workshop_personalization.numbers.json").read_text(encoding="utf-8"))
    keys = numbers["numbers"].get("twins", [])
    by_key = {f"{r['subset']}/{r['id']}": r for r in data.to_dict("records")}
    return [by_key[k] for k in keys]


@pytest.mark.slow
def test_a_report_on_other_data_speaks_of_that_data(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _other_data(tmp_path / "mine", twins=True)
    assert main(["report", "--data", "mine", "--model", "length", "--model", "lexical", "--results", "store",
                 "--out", "reports", "--no-progress"]) == 0
    err = capsys.readouterr().err
    # two models: page 03 could not rank them, so no Best-of-N run, said once with the command on this data
    assert "Best-of-N: not run by the report: 2 RMs (length, lexical)" in err
    assert "prb bon --data mine --model length --model lexical --results store" in err
    assert not (tmp_path / "store" / "bon-report").exists()
    report = tmp_path / "reports"
    index = (report / "index.html").read_text(encoding="utf-8")
    assert index.count(">ok</span>") == len(available_notebooks())
    for page in sorted(report.glob("*.html")):
        text = _visible(page)
        assert not [w for w in SAMPLE_WORDS if w in text.lower()], page.name
    assert "page 03 ranks RMs by Best-of-N only from 3" in _visible(report / "03_downstream_correlation.html")
    # page 00: the two users shown chose opposite answers to the same question
    first, second = _shown_twins(report, load_benchmark(str(tmp_path / "mine")))
    assert first["question"] == second["question"] and first["id"] != second["id"]
    assert (first["chosen"], first["rejected"]) == (second["rejected"], second["chosen"])
    assert NO_TWINS not in _visible(report / "00_workshop_personalization.html")


@pytest.mark.slow
def test_page_00_says_so_when_no_two_users_disagree(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _other_data(tmp_path / "mine", twins=False)
    assert main(["score", "--data", "mine", "--model", "length", "--profile", "none", "--out", "store",
                 "--no-progress"]) == 0
    build_report(data="mine", results="store", out="reports", models=["length"], profiles=["none"],
                 progress=False, notebooks=["00_workshop_personalization"])
    page = _visible(tmp_path / "reports" / "00_workshop_personalization.html")
    assert NO_TWINS in page and "User 1" not in page
    assert _shown_twins(tmp_path / "reports", load_benchmark(str(tmp_path / "mine"))) == []
    assert "No twin pair in this data" in page and "No model scores in the store" not in page


@pytest.mark.slow
def test_page_03_leaves_out_a_best_of_n_run_made_on_other_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["score", "--data", "sample", "--limit", "2", "--model", "length", "--profile", "top3",
                 "--out", "store", "--no-progress"]) == 0
    sample = load_benchmark("sample")
    run_file = write_bon_frame(tmp_path / "store" / "bon") / "run.json"
    shown = {}
    for case, questions in (("same", sample), ("edited", sample.assign(question=sample["question"] + " Again?"))):
        record = {"policy": "smollm2", "n_samples": 8, "n_questions": 4, "rm_profile": "top3", "sampling": "exact",
                  "judge": "proxy:minilm", "judge_proxy": True, "questions": question_digests(questions)}
        run_file.write_text(json.dumps(record), encoding="utf-8")   # the frame's record, as the pipeline writes it
        out = tmp_path / case
        out.mkdir()
        page = run_notebook(NOTEBOOK_DIR / "03_downstream_correlation.ipynb", out,
                            {"data": "sample", "results": str(tmp_path / "store"), "n_boot": 200,
                             "interactive": False})
        assert page.error is None, page.error
        shown[case] = _visible(Path(page.html))
    assert "on other data" not in shown["same"] and "No BoN pipeline results" not in shown["same"]
    n = len(sample)
    assert f"was on other data: {n} of its {n} questions differ from the records here" in shown["edited"]
    assert "No BoN pipeline results in" in shown["edited"]   # the curves are left out, the command given
    assert "The pool's headroom" not in shown["edited"] and "The pool's headroom" in shown["same"]
