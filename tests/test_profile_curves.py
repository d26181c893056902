"""Profile-size curves, retrieval ablation and oracle gap, checked against brute force on a tiny store built in
code (the model-free baselines ``length`` and ``lexical`` scored through the real store)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from prb_utils.analysis import profile_curves as pc
from prb_utils.analysis.rm_inputs import load_tokenizer
from prb_utils.bm25 import bm25_retrieve
from prb_utils.errors import PRBError
from prb_utils.models import ModelOptions
from prb_utils.profile import ORACLE_HEADER, PROFILE_HEADER, QUESTION_PREFIX
from prb_utils.scoring import score_benchmark
from prb_utils.store import load_results, load_run_metadata

N_BOOT = 300


def make_data() -> pd.DataFrame:
    """Eight pairs: four questions, each asked by two users with different posts and rubrics."""
    records = []
    for q in range(4):
        for user in range(2):
            i = 2 * q + user
            posts = [{"id": f"p{i}{j}", "category": "cooking" if j % 2 == 0 else "travel",
                      "text": f"Post {j} of user {i}: {'cheap pans' if j == user else 'long flights'} word{j}"}
                     for j in range(3 + user)]  # 3 or 4 posts
            records.append({
                "subset": "Alpha" if q % 2 == 0 else "Beta", "id": f"q{i}", "category": "cooking",
                "question": f"How should I cook dish {q} with cheap pans?",
                "profile": posts,
                "rubric_aspects": [{"aspect": f"Mentions cheap pans {i}", "evidence": "", "reason": ""}],
                "narrative": "N",
                "chosen": f"Use cheap pans for dish {q}." + " really" * user,
                "rejected": f"Any pan works for dish {q} at home" + " ok" * (i % 3),
            })
    return pd.DataFrame(records)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("curves")
    data = make_data()
    score_benchmark(data, ["length", "lexical"], ["none", "top1", "top2", "full", "rubric"], out=out, progress=False)
    score_benchmark(data, ["length", "lexical"], ["top2"], out=out, retriever="random", progress=False)
    return data, load_results(out), load_run_metadata(out)


def brute_message(record: dict, condition: str) -> str:
    """The RM user message, written out by hand from the record (bm25 top-k via the retriever)."""
    posts = record["profile"]
    if condition == "none":
        return record["question"]
    if condition == "rubric":
        aspects = [f"- {a['aspect']}" for a in record["rubric_aspects"]]
        return "\n".join([ORACLE_HEADER, *aspects, "", QUESTION_PREFIX + record["question"]])
    if condition == "full":
        picked = list(range(len(posts)))
    else:
        picked = bm25_retrieve(record["question"], [p["text"] for p in posts], int(condition[3:]))
    lines = [f"- [{posts[j]['category']}] {posts[j]['text']}" for j in picked]
    return "\n".join([PROFILE_HEADER, *lines, "", QUESTION_PREFIX + record["question"]])


def brute_cluster_ci(correct: np.ndarray, questions: list[str], n_boot: int, seed: int) -> tuple[float, float]:
    """Percentile bootstrap drawing whole questions, one resample at a time."""
    rng = np.random.default_rng(seed)
    units = sorted(set(questions))
    members = {u: [i for i, q in enumerate(questions) if q == u] for u in units}
    stats = []
    draws = rng.integers(0, len(units), size=(n_boot, len(units)))
    for draw in draws:
        idx = [i for d in draw for i in members[units[d]]]
        stats.append(correct[idx].mean())
    low, high = np.percentile(stats, [2.5, 97.5])
    return float(low), float(high)


def test_curve_matches_brute_force(store):
    data, results, meta = store
    curve = pc.profile_size_curve(results, data, run_metadata=meta, n_boot=N_BOOT, seed=3)
    records = {(r["subset"], r["id"]): r for r in data.to_dict("records")}
    retriever = dict(zip(meta["job"], meta.get("option_retriever", pd.Series([None] * len(meta))), strict=True))
    assert len(curve) == 2 * 6  # two models x (none, top1, top2 bm25, top2 random, full, rubric)
    for row in curve.itertuples():
        wanted = row.retriever if isinstance(row.retriever, str) else None
        jobs = [j for j, r in retriever.items() if (r if isinstance(r, str) else None) == wanted]
        rows = results[(results["model"] == row.model) & (results["profile"] == row.profile)]
        if row.profile.startswith("top"):
            rows = rows[rows["job"].isin(jobs)]
        assert row.n == len(rows) == 8
        correct = rows["outcome"].eq("correct").to_numpy(dtype=float)
        assert row.accuracy == pytest.approx(correct.mean())
        assert row.correct == int(correct.sum()) and row.ties == int(rows["outcome"].eq("tie").sum())
        questions = [records[(s, i)]["question"] for s, i in zip(rows["subset"], rows["id"], strict=True)]
        assert row.n_questions == 4
        assert (row.ci_low, row.ci_high) == pytest.approx(brute_cluster_ci(correct, questions, N_BOOT, 3))
        if row.retriever != "random":
            sizes = [len(brute_message(records[(s, i)], row.profile)) for s, i in zip(rows["subset"], rows["id"],
                                                                                       strict=True)]
            assert row.input_size == pytest.approx(np.mean(sizes))
        n_posts = [len(records[(s, i)]["profile"]) for s, i in zip(rows["subset"], rows["id"], strict=True)]
        expected_k = {"none": 0.0, "top1": 1.0, "top2": 2.0, "full": np.mean(n_posts)}.get(row.profile)
        if row.profile == "rubric":
            assert row.oracle and np.isnan(row.k) and pd.isna(row.retriever)
        else:
            assert not row.oracle and row.k == pytest.approx(expected_k)
        assert row.input_unit == "characters"
    assert curve.attrs["input_mismatches"] == 0  # every rebuilt input hashes to what the model saw
    by = curve.set_index(["model", "profile", curve["retriever"].fillna("-")])
    assert by.loc[("length", "full", "-"), "k"] == 3.5  # users have 3 and 4 posts
    assert by.loc[("length", "top2", "random"), "posts_shown"] == 2.0
    assert by.loc[("length", "none", "-"), "input_size"] < by.loc[("length", "top1", "bm25"), "input_size"] < \
        by.loc[("length", "full", "-"), "input_size"]


def test_clustering_by_question_widens_the_interval_when_users_agree():
    data = make_data()
    rows = pd.DataFrame({"model": "m", "profile": "none", "subset": data["subset"], "id": data["id"],
                         "outcome": ["correct", "correct", "wrong", "wrong"] * 2})  # both users of a question agree
    clustered = pc.profile_size_curve(rows, data, n_boot=2000).iloc[0]
    from prb_utils.analysis.resampling import bootstrap_ci

    flat = bootstrap_ci(rows["outcome"].eq("correct").to_numpy(dtype=float), n_boot=2000)
    assert clustered.n_questions == 4 and clustered.accuracy == 0.5
    assert clustered.ci_high - clustered.ci_low > flat[1] - flat[0]


def test_tokens_when_a_tokenizer_is_given(store):
    data, results, meta = store
    rows = results[results["profile"].isin(["none", "full"]) & results["model"].eq("length")]
    curve = pc.profile_size_curve(rows, data, run_metadata=meta, tokenizer=str.split, n_boot=100)
    records = {(r["subset"], r["id"]): r for r in data.to_dict("records")}
    full = curve[curve["profile"] == "full"].iloc[0]
    words = [len(brute_message(records[k], "full").split()) for k in records]
    assert full.input_unit == "tokens" and full.input_size == pytest.approx(np.mean(words))


def test_a_real_tokenizer_folder_counts_its_tokens(store, tiny_lm_dir):
    data, results, meta = store
    tokenizer = load_tokenizer(str(tiny_lm_dir))
    rows = results[results["profile"].eq("rubric") & results["model"].eq("lexical")]
    point = pc.profile_size_curve(rows, data, run_metadata=meta, tokenizer=tokenizer, n_boot=100).iloc[0]
    records = {(r["subset"], r["id"]): r for r in data.to_dict("records")}
    counts = [len(tokenizer.encode(brute_message(records[k], "rubric"), add_special_tokens=False)) for k in records]
    assert point.input_unit == "tokens" and point.input_size == pytest.approx(np.mean(counts))
    assert load_tokenizer("") is None
    with pytest.raises(PRBError, match="tokenizer folder /no/such/folder does not exist"):
        load_tokenizer("/no/such/folder")


def test_unknown_retriever_is_refused_not_guessed(store):
    data, results, _ = store
    with pytest.raises(PRBError, match="retriever of .* top\\{K\\} row"):
        pc.profile_size_curve(results, data, n_boot=100)
    missing = data[data["id"] != "q0"]
    with pytest.raises(PRBError, match="q0 of the results is not in the benchmark"):
        pc.profile_size_curve(results[results["profile"] == "none"], missing, n_boot=100)


def test_plot_keeps_the_oracle_off_the_curve(store):
    data, results, meta = store
    curve = pc.profile_size_curve(results, data, run_metadata=meta, n_boot=100)
    points = pc.curve_points(curve)
    assert set(points["profile"]) == {"none", "top1", "top2", "full"} and set(points["retriever"].dropna()) == {"bm25"}
    ax = pc.profile_size_plot(curve)
    curves = {c.get_label(): c.lines[0] for c in ax.containers}
    assert sorted(curves) == ["length", "lexical"]
    assert [len(line.get_xdata()) for line in curves.values()] == [4, 4]  # none, top1, top2, full: no rubric point
    assert any("(oracle)" in text.get_text() for text in ax.get_legend().get_texts())
    assert ax.right_ax.get_ylabel() == "mean RM input (characters)"
    ax.figure.canvas.draw()   # the legend sits off the curves: outside both the accuracy and the input-size axes
    legend = ax.get_legend().get_window_extent()
    assert not legend.overlaps(ax.get_window_extent()) and not legend.overlaps(ax.right_ax.get_window_extent())
    plt.close("all")


def test_retrieval_ablation_matches_brute_force(store):
    data, results, meta = store
    table = pc.retrieval_ablation(results, run_metadata=meta, n_boot=200)
    assert set(zip(table["model"], table["profile"], table["baseline"], table["retriever"], strict=True)) == {
        ("length", "top2", "bm25", "random"), ("lexical", "top2", "bm25", "random")}
    retriever = dict(zip(meta["job"], meta["option_retriever"], strict=True))
    for row in table.itertuples():
        rows = results[(results["model"] == row.model) & (results["profile"] == "top2")]
        acc = {r: rows[rows["job"].map(retriever) == r]["outcome"].eq("correct").mean() for r in ("bm25", "random")}
        assert row.diff == pytest.approx(acc["random"] - acc["bm25"]) and row.n_pairs == 8
    assert pc.retrieval_ablation(results[results["profile"] != "top2"], run_metadata=meta).empty


def test_oracle_gap_is_marked_and_matches_brute_force(store):
    _, results, _ = store
    gap = pc.oracle_gap(results, n_boot=200)
    assert list(gap["model"]) == ["length", "lexical"] and gap["is_oracle"].all()
    for row in gap.itertuples():
        acc = {c: results[(results["model"] == row.model) & (results["profile"] == c)]["outcome"].eq("correct").mean()
               for c in ("full", "rubric")}
        assert row.gap == pytest.approx(acc["rubric"] - acc["full"])
    assert pc.oracle_gap(results[results["profile"] != "rubric"]).empty
    with pytest.raises(PRBError, match="not an oracle"):
        pc.oracle_gap(results, oracle="full")


def test_a_model_that_never_reads_the_profile_is_split_off_by_its_kind(store):
    from prb_utils.models.kinds import MODEL_KINDS

    _, results, meta = store
    kept, blind = pc.split_profile_blind(results, meta)
    assert blind == sorted({m for m, k in zip(results["model"], results["kind"], strict=True)
                            if not MODEL_KINDS[k].reads_profile}) == ["length"]
    assert set(kept["kind"]) == {k for k in results["kind"] if MODEL_KINDS[k].reads_profile} == {"lexical"}
    assert len(kept) == (results["model"] == "lexical").sum()
    assert pc.reads_profile(results.assign(kind="someone-elses-kind")).all()  # an unknown kind is not left out
    sighted, none = pc.split_profile_blind(results[results["model"] == "lexical"], meta)
    assert none == [] and len(sighted) == (results["model"] == "lexical").sum()
    # the ablation and the oracle gap of the rows that read the profile hold no profile-blind model
    assert set(pc.retrieval_ablation(kept, run_metadata=meta, n_boot=100)["model"]) == {"lexical"}
    assert set(pc.oracle_gap(kept, n_boot=100)["model"]) == {"lexical"}


def _accuracy(rows: pd.DataFrame) -> float:
    return float(rows["outcome"].eq("correct").mean())


def test_the_oracle_is_called_an_upper_bound_only_where_it_is_one(store):
    from prb_utils.analysis.findings import oracle_gaps

    data, results, meta = store
    curve = pc.profile_size_curve(results, data, run_metadata=meta, n_boot=100)
    board = pc.oracle_board(curve, results, run_metadata=meta)
    # the benchmark retriever's points and the oracle, never the random retriever's top2 (an ablation)
    assert sorted(board[board["model"] == "lexical"]["profile"]) == ["full", "none", "rubric", "top1", "top2"]
    assert len(board) == 10 and not board["locked"].any()
    retriever = results["job"].map(dict(zip(meta["job"], meta["option_retriever"], strict=True)))
    gaps = oracle_gaps(board, profile_blind=pc.split_profile_blind(results, meta)[1]).set_index("model")
    lexical = results[(results["model"] == "lexical") & ~retriever.eq("random")]
    bench = {c: _accuracy(lexical[lexical["profile"] == c]) for c in ("none", "top1", "top2", "full")}
    oracle = _accuracy(lexical[lexical["profile"] == "rubric"])
    assert gaps.loc["lexical", "gap"] == pytest.approx(oracle - max(bench.values()))
    assert gaps.loc["lexical", "verdict"] == ("upper bound" if oracle >= max(bench.values()) else "not an upper bound")
    assert gaps.loc["length", "verdict"] == "profile-blind"
    sentences = dict(zip(gaps.index, pc.oracle_sentences(gaps.reset_index()), strict=True))
    assert sentences["length"] == "length: profile-blind, so it has no oracle gap."
    assert f"the oracle (rubric, {oracle:.3f}) is " in sentences["lexical"]
    # lower the oracle below a benchmark condition, then raise it above all: the words follow
    for shift, words in ((-0.5, "is not an upper bound: it is below"), (+0.5, "is an upper bound: at least")):
        moved = board.assign(accuracy=np.where(board["oracle"], board["accuracy"] + shift, board["accuracy"]))
        said = pc.oracle_sentences(oracle_gaps(moved[moved["model"] == "lexical"]))
        assert len(said) == 1 and words in said[0]
    # a position-locked condition is not a benchmark condition to beat
    locked = board.assign(locked=(board["model"] == "lexical") & (board["profile"] != "none") & ~board["oracle"])
    best = oracle_gaps(locked[locked["model"] == "lexical"]).iloc[0]
    assert best["best_condition"] == "none" and best["best_accuracy"] == pytest.approx(bench["none"])
    assert pc.oracle_board(curve[~curve["oracle"]]).query("oracle").empty
    assert oracle_gaps(pc.oracle_board(curve.iloc[0:0])).empty


def test_missing_sections_name_the_command(store):
    _, results, meta = store
    assert pc.missing_sections(results, meta) == {}
    only = results[results["profile"].isin(["none", "top1"]) & results["job"].map(
        dict(zip(meta["job"], meta["option_retriever"], strict=True))).isin([np.nan, "bm25"])]
    need = pc.missing_sections(only, meta)
    assert set(need) == {"ablation", "oracle"} and "--retriever random" in need["ablation"]
    assert "--profile rubric" in need["oracle"]


# ------------------------------------------------------------------------------------------ notebook 04

NOTEBOOK = "04_personalization_diagnostics"


def _execute(folder, store, monkeypatch):
    import nbformat
    import papermill

    from prb_utils.notebook.report import NOTEBOOK_DIR

    folder.mkdir(exist_ok=True)
    monkeypatch.setenv("PRB_NUMBERS_DIR", str(folder))
    papermill.execute_notebook(str(NOTEBOOK_DIR / f"{NOTEBOOK}.ipynb"), str(folder / f"{NOTEBOOK}.ipynb"),
                               parameters={"results": str(store), "interactive": False, "n_boot": 200},
                               kernel_name="python3", progress_bar=False, cwd=str(folder))
    nb = nbformat.read(str(folder / f"{NOTEBOOK}.ipynb"), as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "\n".join(o.get("text", "") or o.get("data", {}).get("text/markdown", "") for o in outputs)
    images = sum("image/png" in o.get("data", {}) for o in outputs)
    import json

    return json.loads((folder / f"{NOTEBOOK}.numbers.json").read_text())["numbers"], text, images


def test_notebook_04_file_is_clean_and_parameterized():
    import nbformat

    from prb_utils.notebook.params import PARAMS_BY_NOTEBOOK, DiagnosticsParams
    from prb_utils.notebook.report import NOTEBOOK_DIR

    nb = nbformat.read(str(NOTEBOOK_DIR / f"{NOTEBOOK}.ipynb"), as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    lines = [line for line in nb.cells[tagged[0]].source.splitlines() if line.strip()]
    assert all(":" in line.split("=")[0] and "  # " in line for line in lines)
    assert [line.split(":")[0] for line in lines] == DiagnosticsParams.names()
    assert PARAMS_BY_NOTEBOOK[NOTEBOOK] is DiagnosticsParams
    assert "DiagnosticsParams.from_namespace(globals())" in nb.cells[tagged[0] + 1].source
    with pytest.raises(PRBError, match="'retriever' must be one of"):
        DiagnosticsParams(retriever="bm26")
    with pytest.raises(PRBError, match="'n_boot' must be at least 100"):
        DiagnosticsParams(n_boot=5)


@pytest.mark.slow
@pytest.mark.notebooks
def test_notebook_04_on_the_sample(tmp_path, monkeypatch):
    from prb_utils.cli import main
    from prb_utils.data import load_benchmark
    from prb_utils.profile import rm_user_message

    store = tmp_path / "results"
    base = ["score", "--data", "sample", "--model", "length", "--model", "lexical", "--out", str(store), "--no-progress"]
    assert main([*base, "--profile", "none", "--profile", "top3"]) == 0
    numbers, text, images = _execute(tmp_path / "first", store, monkeypatch)
    rows, bench = load_results(store), load_benchmark("sample")
    records = {(r["subset"], r["id"]): r for r in bench.to_dict("records")}
    assert numbers["pairs"] == 42 and len(numbers["curve"]) == 4 and images == 1
    for point in numbers["curve"]:
        mine = rows[(rows["model"] == point["model"]) & (rows["profile"] == point["profile"])]
        assert point["n"] == len(mine) == 42 and point["accuracy"] == pytest.approx(brute_accuracy(mine))
        sizes = [len(rm_user_message(records[(s, i)], point["profile"])) for s, i in zip(mine["subset"], mine["id"],
                                                                                          strict=True)]
        assert point["input_size"] == pytest.approx(np.mean(sizes)) and point["input_unit"] == "characters"
    assert "no ablation. Fill it with `prb score" in text and "no oracle gap. Fill it with `prb score" in text
    assert numbers["ablation"] == [] and numbers["oracle_gap"] == []
    # "every RM" of the hardest pairs counts reward models only: two baselines leave nothing to count, said so
    counted = {(r.get("job_label", r.get("model")), r["counted"], r["reason"]) for r in numbers["counted_rms"]}
    assert counted == {("length", False, "baseline"), ("lexical", False, "baseline")}
    assert "Left out (baseline): length, lexical." in text and "n/a: no reward model left to count" in text
    assert numbers["tiers"] == [] and numbers["hardest"] == 0

    assert main([*base, "--profile", "full", "--profile", "rubric"]) == 0
    assert main([*base, "--profile", "top3", "--retriever", "random"]) == 0
    numbers, text, _ = _execute(tmp_path / "second", store, monkeypatch)
    assert "Fill it with" not in text
    # length never reads the profile: left out of the ablation and the oracle gap, and named once
    assert numbers["left_out_profile_blind"] == ["length"]
    assert text.count("Left out of the retrieval ablation and the oracle gap: length (never reads the profile).") == 1
    assert {(r["model"], r["retriever"]) for r in numbers["ablation"]} == {("lexical", "random")}
    assert [(r["model"], r["is_oracle"]) for r in numbers["oracle_gap"]] == [("lexical", True)]
    rubric = [p for p in numbers["curve"] if p["profile"] == "rubric"]
    assert len(rubric) == 2 and all(p["oracle"] and p["k"] is None for p in rubric)
    # the oracle is an upper bound only where it is at least every benchmark condition, counted by hand
    rows = load_results(store)
    lexical = rows[(rows["model"] == "lexical") & (rows["job_label"] != "lexical [random]")]
    bench = {c: brute_accuracy(lexical[lexical["profile"] == c]) for c in ("none", "top3", "full")}
    oracle = brute_accuracy(lexical[lexical["profile"] == "rubric"])
    [found] = numbers["oracle_gaps"]
    assert found["model"] == "lexical" and found["oracle_accuracy"] == pytest.approx(oracle)
    assert found["best_accuracy"] == pytest.approx(max(bench.values()))
    verdict = "upper bound" if oracle >= max(bench.values()) else "not an upper bound"
    assert found["verdict"] == verdict and f"lexical: the oracle (rubric, {oracle:.3f}) is " in text
    assert (f"is {verdict}:" if verdict != "upper bound" else "is an upper bound:") in text


def brute_accuracy(rows: pd.DataFrame) -> float:
    return float((rows["outcome"] == "correct").sum() / len(rows))


@pytest.mark.slow
@pytest.mark.notebooks
def test_notebook_04_flags_a_position_locked_judge(tmp_path, monkeypatch, tiny_lm_dir):
    from prb_utils.analysis.breakdowns import position_locked
    from prb_utils.cli import main

    store = tmp_path / "results"
    assert main(["score", "--data", "sample", "--limit", "2", "--model", "length", "--model", f"judge:{tiny_lm_dir}",
                 "--device", "cpu", "--profile", "none", "--profile", "top3", "--out", str(store),
                 "--no-progress"]) == 0
    locked = position_locked(load_results(store))
    assert locked["locked"].all()  # the tiny random judge answers by position
    import nbformat

    _execute(tmp_path / "page", store, monkeypatch)
    nb = nbformat.read(str(tmp_path / "page" / f"{NOTEBOOK}.ipynb"), as_version=4)
    shown = "".join(o.get("data", {}).get("text/markdown", "") for c in nb.cells if c.cell_type == "code"
                    for o in c.get("outputs", []))
    assert shown.count("Position-locked judge") == len(locked) > 0


def test_a_seeded_random_retriever_job_is_rebuilt_with_its_own_seed(tmp_path):
    """A `--retriever random --seed 3` job: the curve rebuilds exactly the RM inputs it scored (no input
    mismatch), labels the retriever with its seed, and the export shows the posts the model saw."""
    import json

    from prb_utils.data import load_benchmark
    from prb_utils.export import export_results
    from prb_utils.scoring import score_benchmark
    from prb_utils.store import load_results, load_run_metadata

    data = load_benchmark("sample", limit=3)
    out = tmp_path / "results"
    scored = score_benchmark(data, ["length"], ["top1"], out=out, options=ModelOptions(seed=3), retriever="random",
                             progress=False)
    results, meta = load_results(out), load_run_metadata(out)
    inputs = pc.rm_inputs(results, data, retrievers=pc.job_retrievers(results, meta))
    assert inputs["input_matches"].all()
    curve = pc.profile_size_curve(results, data, run_metadata=meta, n_boot=50)
    assert set(curve["retriever"].dropna()) == {"random, retriever_seed=3"}
    assert curve["model"].tolist() == ["length"] * len(curve)
    export_results(out, tmp_path / "eee", format="every_eval_ever", data=data, data_source="sample")
    lines = [json.loads(line) for f in (tmp_path / "eee").rglob("*.jsonl") for line in f.read_text().splitlines()]
    seen = {f"{row.subset}/{row.id}": row.pair_hash for row in scored.itertuples()}
    assert len(lines) == len(seen)
    from prb_utils.retrieval import retriever_from_label
    from prb_utils.scoring import _build_pairs

    pairs = _build_pairs(data.to_dict("records"), "top1", retriever_from_label("random, retriever_seed=3"))
    expected = {p.key: p.prompt for p in pairs}
    assert {p.key: p.hash for p in pairs} == seen
    formatted = sorted(line["input"]["formatted"] for line in lines)
    assert formatted == sorted(expected.values())


def test_curve_labels_name_the_retriever_and_each_option():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from prb_utils.analysis.profile_curves import job_series, profile_size_plot

    meta = pd.DataFrame({"job": ["a", "b"], "model": "length", "fingerprint": "f", "option_seed": [0, 3.0],
                         "option_dtype": "float32"})
    rows = pd.DataFrame({"model": "length", "job": ["a", "b"], "profile": "none"})
    assert job_series(rows, meta).tolist() == ["length [seed=0]", "length [seed=3]"]  # never "length [3.0]"
    curve = pd.DataFrame({"model": "length", "retriever": [None, "random, retriever_seed=3", None],
                          "profile": ["none", "top2", "full"], "k": [0.0, 2.0, 4.0], "oracle": False,
                          "accuracy": [0.5, 0.6, 0.7], "ci_low": [0.4, 0.5, 0.6], "ci_high": [0.6, 0.7, 0.8],
                          "input_size": [10.0, 30.0, 50.0], "input_unit": "characters"})
    ax = profile_size_plot(curve, retriever="random, retriever_seed=3")
    labels = ax.get_legend_handles_labels()[1]
    assert "length [random, retriever_seed=3]" in labels
    plt.close("all")
