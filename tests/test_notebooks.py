"""The notebooks, executed headlessly with papermill on the sample, and the library code behind them.

The model subset is the two model-free baselines (``length``, ``lexical``), scored once into a temporary
store; every notebook must run without an error cell and hold its tables and figures as static outputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest

from prb_utils.errors import PRBError
from prb_utils.notebook.pair_view import (
    filter_counts,
    filter_pairs,
    flip_table,
    pair_html,
    pair_summary,
    word_diff,
)
from prb_utils.notebook.params import (
    PARAMS_BY_NOTEBOOK,
    AccuracyParams,
    DownstreamParams,
    NotebookParams,
    PairInspectionParams,
    WorkshopParams,
)
from prb_utils.notebook.widgets import QuizItem, quiz_comparison, quiz_items

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
NAMES = ["00_workshop_personalization", "01_pair_inspection", "02_accuracy_breakdown", "03_downstream_correlation"]
MODELS = ["length", "lexical"]
PROFILES = ["none", "top3"]
FAST = {  # per-notebook parameters that keep the run short
    "00_workshop_personalization": {"quiz_answers": ["A", "B", "A"]},
    "01_pair_inspection": {"max_pairs": 2},
    "02_accuracy_breakdown": {"n_resamples": 200},
    "03_downstream_correlation": {"n_boot": 200},
}


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    from prb_utils.data import load_benchmark
    from prb_utils.scoring import score_benchmark

    out = tmp_path_factory.mktemp("store")
    score_benchmark(load_benchmark("sample"), MODELS, PROFILES, out=out, progress=False)
    return out


def execute(name: str, out_dir: Path, **parameters) -> nbformat.NotebookNode:
    """Run one notebook with papermill (headless, kernel python3) and return the executed notebook."""
    import papermill

    target = out_dir / f"{name}.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS / f"{name}.ipynb"), str(target), parameters=parameters,
                               kernel_name="python3", progress_bar=False, cwd=str(out_dir))
    return nbformat.read(str(target), as_version=4)


def outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]


def html_text(nb: nbformat.NotebookNode) -> str:
    """Every text/html and text/plain output and stream of the notebook, joined."""
    parts = []
    for o in outputs(nb):
        if o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        for mime in ("text/html", "text/plain", "text/markdown"):
            value = o.get("data", {}).get(mime)
            if value:
                parts.append(value if isinstance(value, str) else "".join(value))
    return "\n".join(parts)


def n_images(nb: nbformat.NotebookNode) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs(nb))


def write_bon_frame(folder: Path) -> Path:
    """A small tidy BoN frame as the BoN pipeline writes it (two RMs, 4 questions x 8 samples)."""
    rng = np.random.default_rng(0)
    rows = [{"model": model, "subset": "Art_and_Entertainment", "id": f"art-00{q}", "sample_idx": i,
             "rm_score": float(rng.normal()), "quality": float(rng.uniform()), "judge": "proxy:minilm",
             "judge_proxy": True}
            for model in MODELS for q in range(1, 5) for i in range(8)]
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(folder / "bon_frame.parquet", index=False)
    return folder


@pytest.fixture(scope="module")
def executed(store, tmp_path_factory) -> dict[str, nbformat.NotebookNode]:
    out = tmp_path_factory.mktemp("executed")
    common = {"results": str(store), "models": MODELS, "profiles": PROFILES, "interactive": False}
    bon_dir = write_bon_frame(out / "bon")
    ppo = out / "ppo.csv"
    ppo.write_text("rm,subset,score,n\nlength,Art,0.4,10\nlexical,Art,0.6,10\nlexical,Society,0.5,30\n")
    extra = {**FAST, "03_downstream_correlation": {**FAST["03_downstream_correlation"], "bon_dir": str(bon_dir),
                                                   "ppo": str(ppo)}}
    return {name: execute(name, out, **common, **extra[name]) for name in NAMES}


# ------------------------------------------------------------------------------------ the notebook files


@pytest.mark.parametrize("name", NAMES)
def test_notebook_file_is_clean_and_parameterized(name):
    nb = nbformat.read(str(NOTEBOOKS / f"{name}.ipynb"), as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    lines = [line for line in nb.cells[tagged[0]].source.splitlines() if line.strip()]
    for line in lines:  # typed literal with a help comment, nothing else
        assert ":" in line.split("=")[0] and "  # " in line, line
    declared = [line.split(":")[0] for line in lines]
    assert declared == PARAMS_BY_NOTEBOOK[name].names()
    following = nb.cells[tagged[0] + 1].source
    assert f"{PARAMS_BY_NOTEBOOK[name].__name__}(" in following


# ------------------------------------------------------------------------------------------ execution


def test_no_error_outputs(executed):
    for name, nb in executed.items():
        errors = [o for o in outputs(nb) if o.get("output_type") == "error"]
        assert not errors, f"{name}: {errors[0]['ename']}: {errors[0]['evalue']}" if errors else ""


def test_workshop_outputs(executed):
    nb = executed["00_workshop_personalization"]
    text = html_text(nb)
    assert "Question (the same for every user)" in text
    assert text.count("What the RM sees") == 6  # one per quiz pair
    assert "The user wanted <b>Response" in text
    assert "You picked A." in text and "No guess recorded." in text  # three answers given for six pairs
    assert "You and the reward models on the quiz pairs" in text
    for condition in ("<code>none</code>", "<code>top3</code>", "<code>full</code>"):
        assert condition in text
    assert n_images(nb) >= 1


def test_pair_inspection_outputs(executed):
    nb = executed["01_pair_inspection"]
    text = html_text(nb)
    assert "Pairs matching filter <code>all</code>: 42 of 42" in text
    assert text.count('class="prb-pair"') == 2  # max_pairs
    assert "chosen (follows the rubric)" in text and "prb-only" in text
    assert "fed to the RM under top3" in text
    assert "profile_flips" in text and "outcome_none" in text
    assert n_images(nb) >= 1


def test_accuracy_breakdown_outputs(executed):
    nb = executed["02_accuracy_breakdown"]
    text = html_text(nb)
    for column in ("ci_low", "a_only", "p_holm", "longer_wins", "theme", "aspects_bin", "rubric_inferable"):
        assert column in text, column
    assert "No judge" in text
    assert n_images(nb) >= 8


def test_downstream_outputs(executed):
    nb = executed["03_downstream_correlation"]
    text = html_text(nb)
    assert "No BoN pipeline results" not in text  # the BoN frame given by bon_dir is used
    assert "bon@8" in text and "Only 2 RM(s) have both" in text
    assert "Society_and_Culture" in text and "2 RM(s) have both a PPO outcome" in text  # the PPO table
    assert "spearman" in text and "weighted_tau" in text
    assert "rm-a" in text  # the illustrative table
    sources = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "Illustrative numbers" in sources
    assert n_images(nb) >= 3  # BoN curves, agreement bars, scatter and rank-rank


def test_workshop_runs_without_any_scores(tmp_path):
    nb = execute("00_workshop_personalization", tmp_path, results=str(tmp_path / "no-store"), interactive=False,
                 quiz_pairs=2)
    assert not [o for o in outputs(nb) if o.get("output_type") == "error"]
    text = html_text(nb)
    assert "No model scores in the store yet" in text and "No model has scored this pair yet" in text
    assert "Question (the same for every user)" in text


def test_bad_parameter_fails_with_a_clear_message(store, tmp_path):
    from papermill.exceptions import PapermillExecutionError

    with pytest.raises(PapermillExecutionError) as info:
        execute("01_pair_inspection", tmp_path, results=str(store), max_pairs="3")
    assert info.value.ename == "PRBError"
    assert "Parameter 'max_pairs' must be an integer" in info.value.evalue


# ------------------------------------------------------------------------------------------ parameters


def test_params_reject_ill_typed_and_unknown_values():
    with pytest.raises(PRBError, match="'half_credit' must be true or false"):
        AccuracyParams(half_credit="yes")
    with pytest.raises(PRBError, match="'models' must be a list of strings"):
        AccuracyParams(models="length")
    with pytest.raises(PRBError, match="'filter' must be one of"):
        PairInspectionParams(filter="everything")
    with pytest.raises(PRBError, match="unknown model spec 'bogus:x'"):
        NotebookParams(models=["bogus:x"])
    with pytest.raises(PRBError, match="profiles.*top0"):
        NotebookParams(profiles=["top0"])
    with pytest.raises(PRBError, match="quiz_answers"):
        WorkshopParams(quiz_answers=["C"])
    with pytest.raises(PRBError, match="Unknown parameter.*colour"):
        AccuracyParams.from_dict({"colour": "red"})
    with pytest.raises(PRBError, match="'ks'"):
        DownstreamParams(ks=[0])
    assert AccuracyParams.from_dict({"half_credit": True}).half_credit is True
    assert NotebookParams(limit=3).limit == 3


def test_params_resolve_paths_and_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = DownstreamParams(results=str(tmp_path / "store"))
    assert params.ppo_path is None
    with pytest.raises(PRBError, match="'ppo'"):
        _ = DownstreamParams(ppo="nowhere").ppo_path
    assert params.bon_path == tmp_path / "store" / "bon"
    assert params.downstream_path.is_file()
    assert "ILLUSTRATIVE" in params.downstream_path.read_text().splitlines()[0]
    assert DownstreamParams(downstream_csv="").downstream_path is None
    with pytest.raises(PRBError, match="does not exist"):
        _ = DownstreamParams(downstream_csv="missing.csv").downstream_path


# ------------------------------------------------------------------------------------ pair view, quiz


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    data = pd.DataFrame({
        "subset": "S", "id": ["a", "b", "c"], "category": ["x", "x", "y"], "question": ["Q1", "Q1", "Q2"],
        "profile": [[{"id": "p", "category": "x", "text": "cheap pans please"}]] * 3,
        "rubric_aspects": [[{"aspect": "Cheap", "evidence": "e", "reason": "r"}]] * 3,
        "narrative": "N", "chosen": ["use a cheap pan", "use a cast-iron pan", "yes"],
        "rejected": ["use a cast-iron pan", "use a cheap pan", "no"],
    })
    rows = []
    outcomes = {("m1", "none"): ["correct", "wrong", "correct"], ("m1", "top3"): ["correct", "correct", "correct"],
                ("m2", "none"): ["correct", "wrong", "wrong"], ("m2", "top3"): ["correct", "wrong", "wrong"]}
    for (model, profile), outs in outcomes.items():
        for pid, outcome in zip(["a", "b", "c"], outs, strict=True):
            rows.append({"model": model, "profile": profile, "subset": "S", "id": pid, "outcome": outcome,
                         "score_chosen": 1.0 if outcome == "correct" else 0.0, "score_rejected": 0.5})
    return data, pd.DataFrame(rows)


def test_word_diff_marks_only_differing_words():
    a, b = word_diff("use a cheap pan", "use a cast-iron pan")
    assert "cheap" in a and "cast-iron" in b and a.count("prb-only") == 1 and b.count("prb-only") == 1
    same_a, same_b = word_diff("same words", "same words")
    assert "prb-only" not in same_a + same_b


def test_pair_summary_and_filters():
    data, results = _frames()
    summary = pair_summary(data, results).set_index("id")
    assert summary.loc["b", "profile_flips"] and not summary.loc["a", "profile_flips"]
    assert summary.loc["c", "disagreement"] and not summary.loc["a", "disagreement"]
    assert summary.loc["c", "wrong_models"] == "m2"
    summary = summary.reset_index()
    assert list(filter_pairs(summary, mode="wrong", model="m1")["id"]) == ["b"]
    assert list(filter_pairs(summary, category="y")["id"]) == ["c"]
    assert dict(zip(filter_counts(summary)["filter"], filter_counts(summary)["pairs"], strict=True)) == {
        "all": 3, "disagreement": 2, "profile_flips": 1, "wrong": 2}
    with pytest.raises(PRBError, match="Unknown pair filter"):
        filter_pairs(summary, mode="odd")
    flips = flip_table(results)
    assert list(zip(flips["model"], flips["id"], flips["outcome"], strict=True)) == [("m1", "b", "correct")]


def test_pair_html_highlights_selected_posts_and_lists_scores():
    data, results = _frames()
    text = pair_html(data.iloc[0].to_dict(), results, condition="top3")
    assert "prb-retrieved" in text and "Cheap" in text and "m2" in text
    text_none = pair_html(data.iloc[0].to_dict(), None, condition="none")
    assert "prb-retrieved" not in text_none and "No model has scored" in text_none
    assert "<script>" not in pair_html({**data.iloc[2].to_dict(), "question": "<script>"}, None)


def test_quiz_items_and_comparison():
    data, results = _frames()
    items = quiz_items(data, 2, seed=0)
    assert [i.id for i in items] == ["a", "b"]  # the shared question comes first
    assert items == quiz_items(data, 2, seed=0)
    fixed = [QuizItem("S", "a", "A"), QuizItem("S", "b", "B")]
    table = quiz_comparison(fixed, ["A", "A"], results).set_index(["who", "profile"])
    assert table.loc[("you", "what the RM sees"), "correct"] == 1
    assert table.loc[("you", "what the RM sees"), "n"] == 2
    assert table.loc[("m1", "top3"), "accuracy"] == 1.0
    assert table.loc[("m2", "none"), "accuracy"] == 0.5
    unanswered = quiz_comparison(fixed, [None, None], results)
    assert unanswered.iloc[0]["n"] == 0 and pd.isna(unanswered.iloc[0]["accuracy"])


def test_notebooks_are_valid_json_without_outputs():
    for name in NAMES:
        raw = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())
        nbformat.validate(nbformat.from_dict(raw))


def test_widgets_when_a_frontend_is_there(monkeypatch):
    import ipywidgets

    import prb_utils.notebook.widgets as widgets

    shown = []
    monkeypatch.setattr(widgets, "use_widgets", lambda interactive: interactive)
    monkeypatch.setattr(widgets, "_display", shown.append)
    data, results = _frames()
    box = widgets.pair_browser(data, results, mode="wrong")
    count, pair = box.children[2], box.children[3]
    assert "<b>2</b> of 3" in count.value and pair.value == "S\tb"
    box.children[1].children[1].value = "m2"  # the "wrong model" dropdown
    assert "<b>2</b> of 3" in count.value
    box.children[1].children[0].value = "profile_flips"
    assert "<b>1</b> of 3" in count.value

    session = widgets.quiz(data, results, n=2, interactive=True)
    buttons = [w for w in _walk(shown[-1]) if isinstance(w, ipywidgets.Button)]
    assert len(buttons) == 4 and session.answers == [None, None]
    buttons[0].click()  # "Response A" of the first pair
    buttons[3].click()  # "Response B" of the second pair
    assert session.answers == ["A", "B"] and buttons[1].disabled
    reveals = [w.value for w in _walk(shown[-1]) if isinstance(w, ipywidgets.HTML) and "The user wanted" in w.value]
    assert len(reveals) == 2
    assert session.comparison().iloc[0]["n"] == 2


def test_no_frontend_means_static(monkeypatch):
    from prb_utils.notebook.widgets import use_widgets

    assert use_widgets(True) is False  # pytest is no notebook kernel
    assert use_widgets(False) is False
    monkeypatch.setenv("PRB_HEADLESS", "1")
    assert use_widgets(True) is False


def _walk(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from _walk(child)
