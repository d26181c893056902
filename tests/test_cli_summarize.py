"""`prb summarize` and the table `prb score` prints: one row per job, --by, --pool, --compare, formats."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from prb_utils.analysis.metrics import TIE_RULES
from prb_utils.cli import main
from prb_utils.store import JobStore

IDS = [f"q{i}" for i in range(8)]


def job(out, model, profile, outcomes, *, subset=("a", "b"), **options):
    """A finished job of ``model`` under ``profile`` with the given outcomes, one per pair of IDS."""
    kind = model.split(":")[0]
    store = JobStore(out, {"model": model, "kind": kind, "profile": profile, "options": options})
    rows = pd.DataFrame({
        "model": model, "kind": kind, "profile": profile, "subset": [subset[i % 2] for i in range(len(IDS))],
        "category": "c", "id": IDS, "score_chosen": 1.0, "score_rejected": 0.0, "outcome": outcomes,
        "pair_hash": [f"h{i}" for i in IDS], "job": store.key,
    })
    with store.writing():
        store.write_part(rows)
        store.write_metadata({**store.description, "key": store.key, "created": "t", "finished": "t",
                              "pairs": {f"{s}/{i}": h for s, i, h in zip(rows.subset, rows.id, rows.pair_hash,
                                                                          strict=True)}})
    return store


@pytest.fixture
def store(tmp_path):
    """implicit:x as float32 and bfloat16 jobs, plus length, under none and full."""
    good, bad = ["correct"] * 6 + ["wrong"] * 2, ["wrong"] * 6 + ["correct"] * 2
    job(tmp_path, "implicit:x", "none", bad, dtype="float32", seed=0)
    job(tmp_path, "implicit:x", "full", good, dtype="float32", seed=0)
    job(tmp_path, "implicit:x", "none", good, dtype="bfloat16", seed=0)
    job(tmp_path, "implicit:x", "full", good, dtype="bfloat16", seed=0)
    job(tmp_path, "length", "none", ["tie"] * 8)
    job(tmp_path, "length", "full", ["correct"] * 8)
    return tmp_path


def summarize(capsys, store, *options):
    code = main(["summarize", "--results", str(store), *options])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_jobs_sharing_a_model_spec_are_rows_of_their_own_with_labels_saying_what_differs(store, capsys):
    code, out, _ = summarize(capsys, store, "--format", "csv")
    table = pd.read_csv(io.StringIO(out))
    assert code == 0 and len(table) == 6
    none = table[table.profile == "none"].set_index("job_label")["accuracy"]
    assert none.to_dict() == {"implicit:x [bfloat16]": 0.75, "implicit:x [float32]": 0.25, "length": 0.0}
    assert set(table["model"]) == {"implicit:x", "length"}


def test_by_without_model_still_keeps_model_and_job_unless_pool(store, capsys):
    _, out, _ = summarize(capsys, store, "--by", "subset,profile", "--format", "csv")
    table = pd.read_csv(io.StringIO(out))
    assert list(table.columns[:4]) == ["model", "job_label", "subset", "profile"] and len(table) == 12
    _, out, _ = summarize(capsys, store, "--by", "subset,profile", "--format", "csv", "--pool")
    pooled = pd.read_csv(io.StringIO(out))
    assert list(pooled.columns[:2]) == ["subset", "profile"] and len(pooled) == 4
    assert pooled["n"].tolist() == [12, 12, 12, 12]
    _, out, _ = summarize(capsys, store, "--by", "profile", "--pool")
    assert out.startswith("Pooled over every job")


def test_compare_respects_by_and_json_is_one_document(store, capsys):
    code, out, _ = summarize(capsys, store, "--by", "profile,subset", "--compare", "profile", "--format", "json")
    document = json.loads(out)
    assert code == 0 and set(document) == {"summary", "comparisons"}
    comparisons = pd.DataFrame(document["comparisons"])
    assert set(comparisons["subset"]) == {"a", "b"}  # compared within each subset, as --by says
    assert len(comparisons) == 2 * 2 and set(comparisons["level_a"]) == {"none"}
    assert "length" not in set(comparisons["job_label"])   # profile-blind: no member of the lifts' families
    assert len(document["summary"]) == 12


def test_compare_adjusts_within_the_findings_families_and_names_them(store, capsys):
    """`--compare profile` adjusts each condition's lifts together (as the pages do), leaves a profile-blind model
    out of every family, and says so under the table; the json comparisons carry the table's adjusted p."""
    code, out, _ = summarize(capsys, store, "--compare", "profile")
    assert code == 0 and "Families: p_holm is Holm-adjusted within each condition" in out
    assert "not members: length (never reads the profile)" in out
    code, out, _ = summarize(capsys, store, "--compare", "profile", "--format", "csv")
    table = pd.read_csv(io.StringIO(out))
    assert table.loc[table["job_label"] == "length", "p_value"].isna().all()
    tested = table[table["p_value"].notna()]
    from prb_utils.analysis.metrics import holm
    assert tested["p_holm"].tolist() == pytest.approx(list(holm(tested["p_value"])))   # one condition: one family
    code, out, _ = summarize(capsys, store, "--compare", "profile", "--format", "json")
    comparisons = pd.DataFrame(json.loads(out)["comparisons"]).set_index("job_label")
    assert comparisons["p_holm"].to_dict() == pytest.approx(tested.set_index("job_label")["p_holm"].to_dict())


def test_compare_as_csv_is_one_table_from_metrics_summarize(store, capsys):
    code, out, _ = summarize(capsys, store, "--compare", "profile", "--format", "csv")
    assert code == 0 and out.count("job_label") == 1
    table = pd.read_csv(io.StringIO(out))
    assert {"vs", "diff", "diff_ci_low", "diff_ci_high", "p_value", "p_holm"} <= set(table.columns)
    full = table[table.profile == "full"].set_index("job_label")
    assert full.loc["implicit:x [float32]", "diff"] == pytest.approx(0.5)
    assert full.loc["implicit:x [bfloat16]", "diff"] == pytest.approx(0.0)


def test_compare_model_compares_jobs(store, capsys):
    code, out, _ = summarize(capsys, store, "--compare", "model", "--format", "csv")
    table = pd.read_csv(io.StringIO(out))
    assert code == 0 and "job_label" in table.columns and table["vs"].notna().sum() == 4


def test_half_credit_with_compare_is_refused_with_one_sentence(store, capsys):
    code, _, err = summarize(capsys, store, "--compare", "profile", "--half-credit")
    assert code == 2 and err.startswith("prb: Half credit") and "Traceback" not in err
    code, out, _ = summarize(capsys, store, "--half-credit", "--format", "csv")
    assert code == 0 and "credit" in out.splitlines()[0] and "Ties:" not in out  # a csv is the table alone
    code, out, _ = summarize(capsys, store, "--half-credit")
    assert code == 0 and f"Ties: {TIE_RULES[True]}." in out.splitlines()
    code, out, _ = summarize(capsys, store)
    assert code == 0 and f"Ties: {TIE_RULES[False]}." in out.splitlines() and "tie_rate" in out.splitlines()[0]


def test_a_finished_job_whose_parts_are_gone_is_named_on_stderr(store, capsys):
    gone = job(store, "lexical", "none", ["correct"] * 8)
    for part in gone.parts():
        part.unlink()
    code, out, err = summarize(capsys, store)
    assert code == 0 and f"prb: warning: Job {gone.key} (lexical [none]) holds 0 of its 8 pairs" in err


def test_score_dedupes_a_repeated_model_and_prints_one_row_per_job(tmp_path, capsys):
    args = ["score", "--data", "sample", "--limit", "2", "--model", "length", "--model", "LENGTH",
            "--model", "length", "--out", str(tmp_path), "--no-progress"]
    assert main(args) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("length")]
    assert len(lines) == 1 and " 6 " in lines[0]  # 2 pairs in each of 3 subsets, counted once


def test_prb_score_and_prb_summarize_label_a_job_alike(tmp_path, capsys):
    """A `--retriever random --seed 3` job scored beside an earlier BM25 job of the same model: `prb score` prints
    it with the label `prb summarize` gives it (`lexical [random, retriever_seed=3]`), not a bare `lexical`."""

    def rows(printed: str) -> list[list[str]]:
        return [line.split() for line in printed.strip().split("\n\n")[0].splitlines()[1:]]

    out = str(tmp_path / "r")
    common = ["--data", "sample", "--limit", "1", "--profile", "top2", "--out", out, "--no-progress"]
    assert main(["score", "--model", "lexical", *common]) == 0
    capsys.readouterr()
    assert main(["score", "--model", "lexical", "--retriever", "random", "--seed", "3", *common]) == 0
    scored = rows(capsys.readouterr().out)
    assert main(["summarize", "--results", out]) == 0
    summary = rows(capsys.readouterr().out)
    assert len(scored) == 1 and len(summary) == 2
    assert scored[0][:4] == ["lexical", "lexical", "[random,", "retriever_seed=3]"]
    assert scored[0] in summary


def test_jobs_record_their_questions_and_summarize_clusters_by_them(tmp_path, capsys):
    """`prb score` keeps each pair's question (hashed) in job.json; `prb summarize` resamples whole questions by
    default (a twin pair's two users in one unit) and pairs with --units pair (Wilson, exact McNemar)."""
    from prb_utils.data import load_benchmark, user_key
    from prb_utils.schema import stable_hash
    from prb_utils.store import pair_units

    out = str(tmp_path / "r")
    assert main(["score", "--data", "sample", "--model", "length", "--model", "lexical", "--profile", "none",
                 "--profile", "top3", "--out", out, "--no-progress"]) == 0
    capsys.readouterr()
    bench = load_benchmark("sample")
    units = pair_units(out).set_index(["subset", "id"])
    for record in bench.itertuples():
        assert units.loc[(record.subset, str(record.id)), "question"] == stable_hash(record.question)
        assert units.loc[(record.subset, str(record.id)), "user"] == user_key(record.profile)
    questions = units["question"]
    assert questions.nunique() < len(questions)   # the sample's twin pairs share a question
    clustered = summarize(capsys, out, "--compare", "profile", "--format", "csv")[1]
    pairs = summarize(capsys, out, "--compare", "profile", "--format", "csv", "--units", "pair")[1]
    a, b = (pd.read_csv(io.StringIO(t)).set_index(["job_label", "profile"]) for t in (clustered, pairs))
    assert (a["accuracy"] == b["accuracy"]).all()
    assert not np.allclose(a["ci_low"], b["ci_low"])   # a bootstrap over questions, not Wilson over pairs
    users = summarize(capsys, out, "--format", "csv", "--units", "user")[1]
    assert (pd.read_csv(io.StringIO(users)).set_index(["job_label", "profile"])["accuracy"] == a["accuracy"]).all()


def test_a_condition_spelled_with_its_retriever_is_the_job_of_the_options_spelling(tmp_path, capsys):
    """`--profile top3:random:3` scores the job `--profile top3 --retriever random --seed 3` wrote (same key, same
    scores: a store written before is read, not scored again), and one command can set it beside BM25's top3."""
    common = ["--data", "sample", "--limit", "2", "--model", "lexical", "--no-progress"]
    old, new = tmp_path / "old", tmp_path / "new"
    assert main(["score", *common, "--profile", "top3", "--retriever", "random", "--seed", "3", "--out", str(old)]) == 0
    assert main(["score", *common, "--profile", "top3", "--profile", "top3:random:3", "--out", str(new)]) == 0
    capsys.readouterr()
    old_keys = {p.name for p in (old / "jobs").iterdir()}
    new_keys = {p.name for p in (new / "jobs").iterdir()}
    assert len(old_keys) == 1 and len(new_keys) == 2 and old_keys < new_keys
    assert main(["summarize", "--results", str(new)]) == 0
    printed = capsys.readouterr().out
    assert "lexical [random, retriever_seed=3]" in printed and "[bm25]" not in printed  # bm25: what top3 means
    assert main(["score", *common, "--profile", "top3:dense", "--out", str(new)]) == 2
    assert "Unknown retriever in profile condition 'top3:dense'" in capsys.readouterr().err


def test_compare_model_pairs_the_jobs_of_different_models(store, capsys):
    """Comparing jobs of two different model specs pairs them on their pairs (the spec is no key of the
    comparison): before, `length` against `implicit:x` found no pair in common."""
    code, out, _ = summarize(capsys, store, "--compare", "model", "--format", "csv")
    table = pd.read_csv(io.StringIO(out))
    tested = table[table["vs"].notna()]
    assert code == 0 and set(tested["n_pairs"]) == {8} and "length" in set(tested["job_label"]) | set(tested["vs"])


def test_summarize_says_what_the_pages_say_of_a_locked_judge_and_of_ties(tmp_path, capsys):
    """The command line carries the findings' verdicts: a judge that answers "A" on every pair gets "n/a" against
    chance and the lock warning under the table (not an interval read as a result), and a model whose verdict
    against chance turns on how ties count is named with both verdicts."""
    part = job(tmp_path, "judge:x", "none", ["correct"] * 8).parts()[0]
    rows = pd.read_parquet(part).assign(verdict_ab="chosen", verdict_ba="rejected")   # always "A"
    rows.to_parquet(part, index=False)
    job(tmp_path, "length", "none", ["tie"] * 8)
    code, out, _ = summarize(capsys, tmp_path)
    assert code == 0
    judge_line = next(line for line in out.splitlines() if line.strip().startswith("judge:x"))
    assert "n/a: position-locked" in judge_line and "above chance" not in judge_line
    assert "Position-locked judge judge:x none" in out
    assert "Ties decide length length none's verdict against chance: below chance when a tie counts as wrong, " \
           "not distinguishable from chance with half credit (8 ties of 8 pairs)." in out
    code, out, _ = summarize(capsys, tmp_path, "--format", "json")
    chance = {r["model"]: r["chance"] for r in json.loads(out)}
    assert chance == {"judge:x": "n/a: position-locked", "length": "below chance"}


def test_score_prints_the_oracle_condition_with_its_verdicts(tmp_path, capsys):
    """The rubric oracle's rows (marked in the table) get their verdicts too, ties or not."""
    code = main(["score", "--data", "sample", "--limit", "3", "--model", "lexical", "--profile", "none",
                 "--profile", "rubric", "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0 and "rubric" in out and "chance" in out.splitlines()[0]
