"""The notebooks, executed headlessly with papermill on the sample, and the library code behind them.

The notebooks run once per test session (the ``sample_report`` fixture of ``conftest.py``: the two
model-free baselines ``length`` and ``lexical`` under ``none`` and ``top3``). Each executed notebook leaves
its key numbers in ``<name>.numbers.json``; the tests recompute those numbers from the store and the data
with plain pandas, scipy and statsmodels, and check that the pages hold static tables and figures.
"""

from __future__ import annotations

import html
import itertools
import json
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from conftest import REPORT_MODELS, REPORT_PARAMETERS, REPORT_PROBES, REPORT_PROFILES, SampleReport
from scipy import stats
from scipy.optimize import minimize_scalar
from statsmodels.stats.proportion import proportion_confint

from prb_utils.analysis.calibration import question_folds
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
from prb_utils.schema import stable_hash

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
NAMES = sorted(PARAMS_BY_NOTEBOOK)   # every page: a notebook and its parameters class
KEYS = ["model", "profile"]


# ------------------------------------------------------------------------------------------ helpers


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


def numbers(report: SampleReport, name: str) -> dict:
    """The key numbers the notebook recorded, after checking where the kernel imported prb_utils from."""
    content = json.loads((report.out / f"{name}.numbers.json").read_text(encoding="utf-8"))
    assert content["notebook"] == name
    assert Path(content["prb_utils"]) == REPO / "prb_utils"  # the tests run the source checkout
    return content["numbers"]


def frame(records: list[dict], keys: list[str]) -> pd.DataFrame:
    return pd.DataFrame(records).set_index(keys).sort_index()


def store_rows(report: SampleReport) -> pd.DataFrame:
    """The per-item rows of the session's store, read without the notebook helpers."""
    from prb_utils.store import load_results

    rows = load_results(report.results)
    return rows[rows["model"].isin(REPORT_MODELS) & rows["profile"].isin(REPORT_PROFILES)]


def expected_accuracy(rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """n, correct, ties, invalid, accuracy and the Wilson 95% interval per group, by plain counting."""
    outcome = rows["outcome"]
    table = pd.DataFrame({
        "n": rows.groupby(by).size(),
        "correct": (outcome == "correct").groupby([rows[c] for c in by]).sum(),
        "ties": (outcome == "tie").groupby([rows[c] for c in by]).sum(),
        "invalid": (outcome == "invalid").groupby([rows[c] for c in by]).sum(),
    })
    table["accuracy"] = table["correct"] / table["n"]
    low, high = proportion_confint(table["correct"], table["n"], alpha=0.05, method="wilson")
    return table.assign(ci_low=low, ci_high=high).sort_index()


def expected_clustered_accuracy(report: SampleReport, rows: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """:func:`expected_accuracy` with the interval of the store's resampling plan, drawn by hand: the questions the
    store recorded, sorted, drawn with replacement ``n_boot`` times by numpy's generator of the plan's seed; each
    resample's accuracy = its questions' correct pairs / their pairs; the percentile interval."""
    plan = json.loads((report.results / "resampling.json").read_text())
    assert plan["unit"] == "question"
    questions = {}
    for job in (report.results / "jobs").iterdir():
        questions.update(json.loads((job / "job.json").read_text()).get("questions") or {})
    table = expected_accuracy(rows, by)
    lows, highs = [], []
    for key in table.index:
        group = rows[(rows[by] == (key if isinstance(key, tuple) else (key,))).all(axis=1)]
        unit = [questions[f"{s}/{i}"] for s, i in zip(group["subset"], group["id"], strict=True)]
        labels = sorted(set(unit))
        sums = np.array([sum(o == "correct" for u, o in zip(unit, group["outcome"], strict=True) if u == q)
                         for q in labels], dtype=float)
        sizes = np.array([unit.count(q) for q in labels], dtype=float)
        draws = np.random.default_rng(plan["seed"]).integers(0, len(labels), size=(plan["n_boot"], len(labels)))
        stats_ = sums[draws].sum(axis=1) / sizes[draws].sum(axis=1)
        low, high = np.quantile(stats_, [0.025, 0.975])
        lows.append(low)
        highs.append(high)
    return table.assign(ci_low=lows, ci_high=highs)


def assert_same_table(recorded: pd.DataFrame, expected: pd.DataFrame) -> None:
    columns = list(expected.columns)
    pd.testing.assert_frame_equal(recorded[columns].astype(float), expected.astype(float), check_names=False,
                                  rtol=1e-9)


@pytest.fixture(scope="module")
def executed(sample_report) -> dict[str, nbformat.NotebookNode]:
    assert sample_report.error is None, sample_report.error
    return {name: nbformat.read(str(sample_report.out / f"{name}.ipynb"), as_version=4) for name in NAMES}


@pytest.fixture(scope="module")
def bench(sample_report) -> pd.DataFrame:
    from prb_utils.data import load_benchmark

    return load_benchmark(str(sample_report.root / "bench"))


# ------------------------------------------------------------------------------------ the notebook files


@pytest.mark.parametrize("name", NAMES)
def test_notebook_file_is_clean_and_parameterized(name):
    raw = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))
    assert all("id" in cell for cell in raw["cells"])   # nbformat 4.5: a cell without an id is a warning today
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
    following = nb.cells[tagged[0] + 1].source   # the page's parameters object, built from what papermill injected
    assert f"{PARAMS_BY_NOTEBOOK[name].__name__}.from_namespace(globals())" in following


def code_lines(nb: nbformat.NotebookNode) -> int:
    """The lines of code of a notebook: non-blank, non-comment lines of its code cells (the parameters cell too)."""
    return sum(1 for cell in nb.cells if cell.cell_type == "code" for line in cell.source.splitlines()
               if line.strip() and not line.strip().startswith("#"))


def test_code_lines_count_code_only():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# words\nmore words"),
                                         nbformat.v4.new_code_cell("# a comment\n\nx = 1  # help\nprint(x)\n")])
    assert code_lines(nb) == 2


@pytest.mark.parametrize("name", NAMES)
def test_every_notebook_stays_thin(name):
    """A page is a setup cell, a parameters cell and one idea per cell, each calling the library: at most 120 lines
    of code, the logic (and the words of a missing input) in ``prb_utils``."""
    assert code_lines(nbformat.read(str(NOTEBOOKS / f"{name}.ipynb"), as_version=4)) <= 120


# ------------------------------------------------------------------------------------------ execution


def test_no_error_outputs(executed):
    for name, nb in executed.items():
        errors = [o for o in outputs(nb) if o.get("output_type") == "error"]
        assert not errors, f"{name}: {errors[0]['ename']}: {errors[0]['evalue']}" if errors else ""


def test_every_notebook_records_its_parameters(sample_report):
    for name in NAMES:
        content = json.loads((sample_report.out / f"{name}.numbers.json").read_text(encoding="utf-8"))
        params = content["params"]
        assert Path(params["data"]).is_absolute() and Path(params["results"]).is_absolute()  # made absolute
        assert Path(params["results"]) == sample_report.results
        assert params["models"] == REPORT_MODELS
        assert params["profiles"] == REPORT_PARAMETERS.get(name, {}).get("profiles", REPORT_PROFILES)
        assert params["interactive"] is False
        assert {k: params[k] for k in REPORT_PARAMETERS.get(name, {})} == REPORT_PARAMETERS.get(name, {})
        assert numbers(sample_report, name)["pairs"] == 42


def test_workshop_numbers_match_the_store(sample_report, bench, executed):
    recorded = frame(numbers(sample_report, "00_workshop_personalization")["quiz"], ["who", "profile"])
    answers = REPORT_PARAMETERS["00_workshop_personalization"]["quiz_answers"]
    items = quiz_items(bench, 6, seed=0)  # the quiz's pairs (its defaults: 6 pairs, seed 0)
    you = recorded.loc[("you", "what the RM sees")]
    assert you["n"] == len(answers)
    assert you["correct"] == sum(a == item.chosen_side for a, item in zip(answers, items, strict=False))
    rows = store_rows(sample_report)
    keys = {(item.subset, item.id) for item in items}
    on_quiz = rows[[(s, i) in keys for s, i in zip(rows["subset"], rows["id"], strict=True)]]
    expected = expected_accuracy(on_quiz, KEYS).rename_axis(["who", "profile"])
    assert_same_table(recorded.drop(index=[("you", "what the RM sees")]), expected[["n", "correct", "accuracy"]])

    text = html_text(executed["00_workshop_personalization"])
    assert text.count("What the RM sees") == 6  # one per quiz pair
    assert "You picked A." in text and "No guess recorded." in text  # three answers given for six pairs
    for condition in ("<code>none</code>", "<code>top3</code>", "<code>full</code>"):
        assert condition in text
    assert n_images(executed["00_workshop_personalization"]) >= 1


def _correct_by_condition(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, pair), one column per profile condition: is the verdict correct."""
    ok = rows.assign(ok=rows["outcome"] == "correct")
    return ok.pivot_table(index=["model", "subset", "id"], columns="profile", values="ok", aggfunc="first")


def test_pair_inspection_numbers_match_the_store(sample_report, executed):
    recorded = numbers(sample_report, "01_pair_inspection")
    rows = store_rows(sample_report)
    by_condition = _correct_by_condition(rows)
    flips = by_condition["none"] != by_condition["top3"]
    assert recorded["flips"] == int(flips.sum())
    per_profile = rows.assign(ok=rows["outcome"] == "correct").groupby(["profile", "subset", "id"])["ok"]
    disagree = (per_profile.nunique() > 1).groupby(level=["subset", "id"]).any()
    expected = {"all": 42, "wrong": rows.loc[rows["outcome"] != "correct", ["subset", "id"]].drop_duplicates().shape[0],
                "disagreement": int(disagree.sum()),
                "profile_flips": int(flips.groupby(level=["subset", "id"]).any().sum())}
    assert {r["filter"]: r["pairs"] for r in recorded["filters"]} == expected
    assert_same_table(frame(recorded["accuracy"], KEYS), expected_clustered_accuracy(sample_report, rows, KEYS))

    nb = executed["01_pair_inspection"]
    text = html_text(nb)
    assert text.count('class="prb-pair"') == 2  # max_pairs
    assert "chosen (follows the rubric)" in text and "prb-only" in text
    assert "fed to the RM under top3" in text
    assert n_images(nb) >= 1


def clustered_intervals(rows: pd.DataFrame, by: list[str], bench: pd.DataFrame, n_boot: int) -> pd.DataFrame:
    """Per group: the 95% percentile bootstrap of the accuracy over whole questions (``n_boot`` resamples, seed
    0), the unit every interval of page 02 resamples, with the question taken from the benchmark records and
    hashed as the store records it (so the clusters sort as every surface sorts them)."""
    from prb_utils.analysis.resampling import bootstrap_ci

    question = dict(zip(bench["subset"].astype(str) + "/" + bench["id"].astype(str),
                        bench["question"].map(stable_hash), strict=True))   # hashed, as the store keys them
    out = {}
    for key, group in rows.groupby(by):
        units = (group["subset"].astype(str) + "/" + group["id"].astype(str)).map(question).to_numpy()
        out[key] = bootstrap_ci((group["outcome"] == "correct").to_numpy(float), units=units, n_boot=n_boot, seed=0)
    return pd.DataFrame(out, index=["ci_low", "ci_high"]).T.sort_index()


def test_accuracy_breakdown_numbers_match_the_store(sample_report, executed, bench):
    recorded = numbers(sample_report, "02_accuracy_breakdown")
    n_boot = json.loads((sample_report.results / "resampling.json").read_text())["n_boot"]   # the store's plan
    rows = store_rows(sample_report)
    counts = ["n", "correct", "ties", "invalid", "accuracy"]
    by_subset = [*KEYS, "subset"]
    for table, by in ((recorded["overall"], KEYS), (recorded["per_subset"], by_subset)):
        shown = frame(table, by)
        assert_same_table(shown, expected_accuracy(rows, by)[counts])
        # one unit on every page: the interval resamples whole questions, never Wilson's independent pairs
        assert_same_table(shown, clustered_intervals(rows, by, bench, n_boot or None))
    assert set(frame(recorded["overall"], KEYS)["n"]) == {42}  # every pair scored by every job
    board = pd.DataFrame(recorded["leaderboard"])   # shared ranks: the leader at rank 1, never above a better one
    for _, part in board[~board["oracle"]].groupby("profile"):
        ranked = part[~part["locked"]].sort_values(["rank", "accuracy"], ascending=[True, False])
        assert ranked["accuracy"].tolist() == sorted(ranked["accuracy"], reverse=True)
        assert ranked["rank"].iloc[0] == 1 and ranked["rank"].is_monotonic_increasing
        assert (ranked["tied_with_leader"] == (ranked["rank"] == 1)).all()

    text = html_text(executed["02_accuracy_breakdown"])
    for column in ("ci_low", "a_only", "p_holm", "longer_wins", "theme", "aspects_bin", "rubric_inferable"):
        assert column in text, column
    assert "No judge" in text
    assert n_images(executed["02_accuracy_breakdown"]) >= 8


def cross_fitted_p_chosen(margins: np.ndarray, questions: np.ndarray) -> np.ndarray:
    """P(chosen) = sigmoid(beta x margin) with beta >= 0 fitted by scipy on the other question folds (the fold
    assignment is the library's; beta = 0, i.e. P = 0.5, where the other folds' margins sum to <= 0: the
    log-likelihood then falls from beta = 0 on)."""
    folds = question_folds(questions)
    p = np.empty(len(margins))
    for fold in np.unique(folds):
        train = margins[folds != fold]
        if train.sum() <= 0:
            p[folds == fold] = 0.5
            continue
        scale = np.sqrt(np.mean(train ** 2))
        best = minimize_scalar(lambda b, x=train / scale: float(np.sum(np.logaddexp(0, -b * x))), bounds=(0, 1e3),
                               method="bounded", options={"xatol": 1e-12})
        p[folds == fold] = 1 / (1 + np.exp(-best.x * margins[folds == fold] / scale))
    return p


def test_calibration_numbers_match_the_store(sample_report, executed, bench):
    recorded = numbers(sample_report, "02_accuracy_breakdown")
    rows = store_rows(sample_report)
    rows = rows[rows["outcome"] != "invalid"]
    question = dict(zip(bench["subset"].astype(str) + "/" + bench["id"].astype(str),
                        bench["question"].map(stable_hash), strict=True))   # hashed, as the store keys them
    calib = frame(recorded["calibration"], KEYS)
    assert list(calib.index) == sorted(itertools.product(REPORT_MODELS, REPORT_PROFILES))
    for (model, profile), group in rows.groupby(KEYS):
        margins = (group["score_chosen"] - group["score_rejected"]).to_numpy(dtype=float)
        p = cross_fitted_p_chosen(margins, (group["subset"].astype(str) + "/" + group["id"].astype(str))
                                  .map(question).to_numpy())
        q, y = np.r_[p, 1 - p], np.r_[np.ones(len(p)), np.zeros(len(p))]
        bins = np.minimum(np.floor(q * 10), 9)
        ece = sum(abs(y[bins == b].sum() - q[bins == b].sum()) for b in np.unique(bins)) / len(q)
        got = calib.loc[(model, profile)]
        assert got["note"] is None and got["n"] == len(group) and got["source"] == "temperature"
        assert got["ece"] == pytest.approx(ece, abs=1e-6) and 0 <= got["ece"] <= 1
        assert got["brier"] == pytest.approx(np.mean((1 - p) ** 2), rel=1e-6)
        assert got["log_loss"] == pytest.approx(-np.mean(np.log(p)), rel=1e-6)
        for name in ("ece", "brier", "log_loss"):
            assert got[f"{name}_low"] <= got[name] <= got[f"{name}_high"]
    assert all(r["note"] == "n/a: too few pairs (14 < 20)" for r in recorded["calibration_subsets"])  # 14 a subset
    bins = pd.DataFrame(recorded["calibration_bins"])
    assert (bins.groupby(KEYS)["n"].sum() == 2 * rows.groupby(KEYS).size()).all()  # each pair in both orders
    by_margin = pd.DataFrame(recorded["accuracy_by_margin"])
    assert (by_margin.groupby(KEYS)["n"].sum() == rows.groupby(KEYS).size()).all()
    rho = frame(recorded["length_correlations"], [*KEYS, "statistic"])
    for (model, profile), group in rows.groupby(KEYS):
        lengths = group.merge(bench.assign(id=bench["id"].astype(str)), on=["subset", "id"])
        diff = lengths["chosen"].str.len() - lengths["rejected"].str.len()
        expect = stats.spearmanr(lengths["score_chosen"] - lengths["score_rejected"], diff).statistic
        assert rho.loc[(model, profile, "margin ~ length difference"), "rho"] == pytest.approx(expect)
    assert rho.loc[("length", "none", "margin ~ length difference"), "rho"] == pytest.approx(1.0)  # it scores length
    none = rho.loc[("lexical", "none", "margin ~ profile length")]
    assert pd.isna(none["rho"]) and none["note"] == "n/a: the profile length does not vary"
    text = html_text(executed["02_accuracy_breakdown"])
    assert "temperature_max" in text and "log_loss_high" in text and "Does the RM know when it is right" not in text
    assert "No subset has a defined calibration" in text and "n/a: too few pairs (14 < 20)" in text


def brute_force_best_of_k(group: pd.DataFrame, k: int) -> float:
    """Mean quality of the highest-scored sample over every k-subset of one question's samples."""
    scores, quality = group["rm_score"].to_numpy(), group["quality"].to_numpy()
    picks = [quality[list(s)][np.argmax(scores[list(s)])] for s in itertools.combinations(range(len(scores)), k)]
    return float(np.mean(picks))


def test_downstream_numbers_match_the_inputs(sample_report, executed):
    recorded = numbers(sample_report, "03_downstream_correlation")
    rows = store_rows(sample_report)
    top3 = expected_clustered_accuracy(sample_report, rows[rows["profile"] == "top3"], ["model"])
    assert_same_table(frame(recorded["prb"], ["model"]), top3)

    bon_frame = pd.read_parquet(sample_report.results / "bon" / "bon_frame.parquet")
    bon_table = frame(recorded["bon"], ["model"])
    for k in (1, 2, 4, 8):
        expected = bon_frame.groupby(["model", "subset", "id"]).apply(brute_force_best_of_k, k).groupby("model").mean()
        np.testing.assert_allclose(bon_table[f"bon@{k}"], expected.sort_index(), rtol=1e-9)

    ppo = pd.read_csv(sample_report.ppo)
    pooled = (ppo["score"] * ppo["n"]).groupby(ppo["rm"]).sum() / ppo["n"].groupby(ppo["rm"]).sum()
    np.testing.assert_allclose(frame(recorded["ppo"], ["model"])["ppo"], pooled.sort_index(), rtol=1e-9)

    example = pd.read_csv(DownstreamParams().downstream_path, comment="#", index_col=0)
    coefficients = {"spearman": stats.spearmanr, "kendall": stats.kendalltau, "pearson": stats.pearsonr}
    checked = 0
    for row in recorded["example_agreement"]:
        if row["metric"] in coefficients:
            value = coefficients[row["metric"]](example[row["benchmark"]], example[row["downstream"]])[0]
            assert row["estimate"] == pytest.approx(value, rel=1e-9), row
            assert row["ci_low"] <= row["estimate"] <= row["ci_high"], row
            checked += 1
    assert checked >= 3

    # groups, leave-one-RM-out and the claim test on the published table, recomputed with scipy
    by_group = pd.DataFrame(recorded["example_by_group"])
    spearman = by_group[by_group["metric"] == "spearman"].set_index("rms")
    paper = "on-policy, the paper's group (with the 3 poor)"
    assert spearman["n"].to_dict() == {"all RMs": 17, "without on-policy-poor": 14, paper: 12,
                                       "on-policy without the 3 poor": 9}
    good = example[example["group"] != "on-policy-poor"]
    assert spearman.loc["without on-policy-poor", "estimate"] == pytest.approx(
        stats.spearmanr(good["rbv2"], good["ppo"])[0], rel=1e-9)
    on_policy = example[example["group"].isin(["on-policy", "on-policy-poor"])]
    assert spearman.loc[paper, "estimate"] == pytest.approx(stats.spearmanr(on_policy["rbv2"], on_policy["ppo"])[0],
                                                            rel=1e-9)
    assert round(spearman.loc[paper, "estimate"], 3) == 0.441   # RewardBench 2's Table 8 / Fig. 4 group
    loo = pd.DataFrame(recorded["example_leave_one_out"])
    pearson = loo[loo["metric"] == "pearson"].set_index("left_out")["value"]
    for rm in example.index:
        rest = example.drop(index=rm)
        assert pearson[str(rm)] == pytest.approx(stats.pearsonr(rest["rbv2"], rest["ppo"])[0], rel=1e-9)
    difference = recorded["example_difference"][0]
    assert difference["diff"] == pytest.approx(stats.spearmanr(example["rbv2"], example["ppo"])[0]
                                               - stats.spearmanr(example["bon"], example["ppo"])[0], rel=1e-9)
    assert difference["ci_low"] <= difference["diff"] <= difference["ci_high"]
    pool = pd.DataFrame(recorded["bon_headroom"]).set_index("model")
    kmax = int(pool["k"].iloc[0])
    np.testing.assert_allclose(pool["bon"], bon_table.loc[pool.index, f"bon@{kmax}"], rtol=1e-9)
    np.testing.assert_allclose(pool["share"], (pool["bon"] - pool["random"]) / (pool["oracle"] - pool["random"]))

    nb = executed["03_downstream_correlation"]
    text = html_text(nb)
    assert "No BoN pipeline results" not in text  # the BoN frame in <results>/bon is used
    assert "Only 2 RM(s) have both" in text and "2 RM(s) have both a PPO outcome" in text
    assert n_images(nb) >= 3  # BoN curves, agreement bars, scatter and rank-rank


@pytest.mark.notebooks
@pytest.mark.slow
def test_workshop_runs_without_any_scores(tmp_path):
    nb = execute("00_workshop_personalization", tmp_path, results=str(tmp_path / "no-store"), interactive=False,
                 quiz_pairs=2)
    assert not [o for o in outputs(nb) if o.get("output_type") == "error"]
    text = html_text(nb)
    assert "No model scores in the store for this data yet" in text and "No model has scored this pair yet" in text
    assert "Question (the same for every user)" in text


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


def test_params_from_a_notebook_namespace_take_the_declared_names_only():
    namespace = {"half_credit": True, "limit": 5, "plt": object(), "results": "store", "__name__": "__main__"}
    params = AccuracyParams.from_namespace(namespace)
    assert (params.half_credit, params.limit, params.results) == (True, 5, "store")
    assert params.n_boot == AccuracyParams().n_boot and params.baseline_profile == "none"   # absent: the default
    assert isinstance(params, AccuracyParams)
    with pytest.raises(PRBError, match="'half_credit' must be true or false"):   # checked as the constructor checks
        AccuracyParams.from_namespace({"half_credit": "yes"})


def test_params_resolve_paths_and_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = DownstreamParams(results=str(tmp_path / "store"))
    assert params.ppo_path is None
    with pytest.raises(PRBError, match="'ppo'"):
        _ = DownstreamParams(ppo="nowhere").ppo_path
    assert params.bon_path == tmp_path / "store" / "bon"
    assert params.downstream_path.is_file()
    assert params.downstream_path.read_text().splitlines()[0].startswith("id,base_model,")
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
    assert [i.id for i in items] == ["a", "c"]  # the shared question comes first; b is a's twin, never asked
    assert items[0].twin.id == "b" and items[0].twin.chosen_side != items[0].chosen_side and items[1].twin is None
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

    def buttons():
        return [w for w in _walk(shown[-1]) if isinstance(w, ipywidgets.Button) and w.description != "Try again"]

    assert len(buttons()) == 2 and session.answers == [None, None]  # one pair at a time
    buttons()[0].click()  # "Response A" of the first pair; its twin (b) follows, then the second pair
    buttons()[2].click()  # "Response A" of the twin step
    buttons()[5].click()  # "Response B" of the second pair
    assert session.answers == ["A", "B"] and session.twin_answers == ["A", None] and buttons()[1].disabled
    reveals = [w.value for w in _walk(shown[-1]) if isinstance(w, ipywidgets.HTML) and "The user wanted" in w.value]
    assert len(reveals) == 3
    assert session.comparison().iloc[0]["n"] == 2  # the twin is not scored


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


def test_reading_the_user_numbers_match_the_store(sample_report, executed, bench):
    """Page 05 on the baselines' probes: the length baseline is profile-blind (no verdict, no member of the swap
    family; swapping users moves nothing), the lexical one's verdicts move and get a verdict of the rule; label-swap
    gives 1 - accuracy - tie rate for both (the harness check, pass)."""
    from prb_utils.analysis.probe_effects import READING_VERDICTS, probe_effects
    from prb_utils.notebook.markup import md_text
    from prb_utils.store import load_results

    recorded = numbers(sample_report, "05_reading_the_user")
    verdicts = pd.DataFrame(recorded["verdicts"]).set_index("model")
    assert verdicts.loc["length", "verdict"].startswith("n/a: profile-blind")
    assert verdicts.loc["length", "sensitivity"] == 0 and verdicts.loc["length", "family"] == ""
    assert verdicts.loc["lexical", "change_rate"] > 0 and verdicts.loc["lexical", "verdict"] in READING_VERDICTS
    assert verdicts.loc["lexical", "family"].startswith("top3+swap: Holm over")
    effects = pd.DataFrame(recorded["effects"]).set_index(["model", "probe"])
    rows = load_results(sample_report.results)
    for model in REPORT_MODELS:
        mine = rows[(rows["model"] == model) & (rows["profile"] == "top3")]
        assert effects.loc[(model, "label-swap"), "accuracy_probe"] == pytest.approx(
            (mine["outcome"] == "wrong").mean())
        assert effects.loc[(model, "label-swap"), "check"] == "pass"
    expected = probe_effects(rows[rows["model"].isin(REPORT_MODELS)], bench)
    assert len(expected) == len(effects)
    assert n_images(executed["05_reading_the_user"]) >= 1
    # the page opens with one sentence per probed model and a pass or fail for every probe but swap
    said = {s["model"]: s for s in recorded["conclusions"]}
    assert sorted(said) == sorted(REPORT_MODELS)
    for model in REPORT_MODELS:
        assert said[model]["checks"] == {p: effects.loc[(model, p), "check"] for p in REPORT_PROBES if p != "swap"}
        assert set(said[model]["checks"].values()) <= {"pass", "fail"}
        assert said[model]["sentence"].startswith(f"{model}: with another user's posts its accuracy")
        assert md_text(said[model]["sentence"]) in html_text(executed["05_reading_the_user"])
    lexical = said["lexical"]
    assert lexical["verdict"] == verdicts.loc["lexical", "verdict"] and lexical["diff"] == pytest.approx(
        effects.loc[("lexical", "swap"), "diff"])
    members = int(verdicts.loc["lexical", "family"].split("over ")[1].split(" ")[0])
    assert f"Holm over {members} model{'s' if members != 1 else ''} (p = " in lexical["sentence"]
    assert lexical["sentence"].endswith(f"{lexical['verdict']}. Checks: shuffle {lexical['checks']['shuffle']}, "
                                        f"label-swap {lexical['checks']['label-swap']}.")
    shuffle = effects.loc[("lexical", "shuffle")]   # the shuffle check: the changed share against the tolerance
    assert shuffle["check"] == ("pass" if shuffle["check_high"] <= shuffle["tolerance"] else "fail")
    assert shuffle["check_value"] == pytest.approx(1 - shuffle["verdicts_kept"])


def test_every_page_opens_with_the_findings_sentences(sample_report, executed, bench):
    """Pages 01-04 record the sentences they open with (findings.page_sentences), shown right after the setup:
    02 says what the index says, word for word; 03 the tied group of its benchmark condition; 04 the lifts as 02
    words them; 01 the verdicts top3 changes against none, counted here by hand."""
    from prb_utils.analysis.findings import page_sentences
    from prb_utils.notebook.markup import md_text
    from prb_utils.notebook.report import report_findings

    said = {name: numbers(sample_report, name)["conclusions"] for name in NAMES if name[:2] in ("01", "02", "03", "04")}
    for name, sentences in said.items():
        assert sentences, name
        opening = next(c for c in executed[name].cells if c.get("id") == f"conclusions-{name[:2]}")
        shown = html_text(nbformat.from_dict({"cells": [opening]}))
        assert all(md_text(s["sentence"]) in shown for s in sentences), name
    found = report_findings(str(sample_report.results), REPORT_MODELS, REPORT_PROFILES, bench)
    index = [s["sentence"] for s in page_sentences(found, "index")]
    assert [s["sentence"] for s in said["02_accuracy_breakdown"]] == index
    index_html = (sample_report.out / "index.html").read_text(encoding="utf-8")
    assert all(html.escape(sentence) in index_html for sentence in index)
    assert [s["profile"] for s in said["03_downstream_correlation"] if s["topic"] == "rank"] == ["top3"]
    lifts = [s for s in said["02_accuracy_breakdown"] if s["topic"] == "lift"]
    assert lifts and [s for s in said["04_personalization_diagnostics"] if s["topic"] == "lift"] == lifts
    rows = store_rows(sample_report)
    right = rows.assign(ok=rows["outcome"] == "correct").pivot_table(index=["subset", "id"], columns=["model", "profile"],
                                                                      values="ok", aggfunc="first")
    change = next(s for s in said["01_pair_inspection"] if s["topic"] == "change")
    assert change["changed"] == {"lexical": int((right[("lexical", "none")] != right[("lexical", "top3")]).sum())}
