"""Readers for the reference scripts' files, on fixtures written here in the reference formats."""

from __future__ import annotations

import json

import numpy as np
import pytest

from prb_utils.downstream.bon import bon_curves
from prb_utils.downstream.reference_files import (
    read_accuracy_summaries,
    read_bon_eval,
    read_bon_folder,
    read_bon_samples,
    read_bon_scored,
    read_evaluation_summary,
    read_pairwise_summary,
    read_pointwise_summary,
    read_ppo_csv,
    read_ppo_results,
    reference_curves,
)
from prb_utils.errors import PRBError


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def bon_fixture(folder):
    """A reference BoN run: 2 questions x 3 samples, k in 1, 2 (as score.py and evaluate.py write)."""
    samples = []
    for qid in ("q1", "q2"):
        for i in range(3):
            samples.append({"id": qid, "query": f"question {qid}", "profile": "Post 1 (Category: x):\nhi",
                            "sample_idx": i, "aspects": "Be brief, Cite sources",
                            "generated_response": f"answer {qid}-{i}"})
    write_jsonl(folder / "Art_samples.jsonl", samples)
    scores = [0.1, 0.9, 0.5, 0.7, 0.2, 0.3]
    write_jsonl(folder / "Art_scored.jsonl", [dict(s, score=v) for s, v in zip(samples, scores, strict=True)])
    write_jsonl(folder / "Art_k1.jsonl", [
        {"id": "q1", "query": "question q1", "output": "answer q1-0", "aspects": "Be brief, Cite sources",
         "score": 0.1},
        {"id": "q2", "query": "question q2", "output": "answer q2-0", "aspects": "Be brief, Cite sources",
         "score": 0.7}])
    write_jsonl(folder / "Art_k2.jsonl", [
        {"id": "q1", "query": "question q1", "output": "answer q1-1", "aspects": "Be brief, Cite sources",
         "score": 0.9},
        {"id": "q2", "query": "question q2", "output": "answer q2-0", "aspects": "Be brief, Cite sources",
         "score": 0.7}])
    for k, lists in ((1, ([0, 1], [2, 2])), (2, ([2, 2], [2, 2]))):
        write_jsonl(folder / f"Art_eval_k{k}.jsonl", [
            {"id": qid, "query": f"question {qid}", "answer": "a", "aspects": "Be brief, Cite sources",
             "scores": [float(s) for s in sc], "average_score": float(np.mean(sc))}
            for qid, sc in zip(("q1", "q2"), lists, strict=True)])
    summary = {"Art_and_Entertainment": {
        "1": {"k": 1, "num_examples": 2, "mean_score": 1.25, "std_score": 0.75, "min_score": 0.5,
              "max_score": 2.0},
        "2": {"k": 2, "num_examples": 2, "mean_score": 2.0, "std_score": 0.0, "min_score": 2.0,
              "max_score": 2.0}}}
    (folder / "evaluation_summary.json").write_text(json.dumps(summary, indent=2))


def test_bon_readers(tmp_path):
    bon_fixture(tmp_path)
    samples = read_bon_samples(tmp_path / "Art_samples.jsonl")
    assert len(samples) == 6 and set(samples["subset"]) == {"Art_and_Entertainment"}
    assert samples.loc[1, "response"] == "answer q1-1"
    scored = read_bon_scored(tmp_path / "Art_scored.jsonl", model="rm-x")
    assert list(scored.columns[:6]) == ["model", "subset", "id", "sample_idx", "rm_score", "question"]
    assert scored["rm_score"].tolist() == [0.1, 0.9, 0.5, 0.7, 0.2, 0.3]
    ev = read_bon_eval(tmp_path / "Art_eval_k1.jsonl")
    assert ev["k"].unique().tolist() == [1]
    assert ev["quality"].tolist() == [0.25, 1.0]
    assert not ev["parse_suspect"].any()
    summary = read_evaluation_summary(tmp_path / "evaluation_summary.json")
    assert summary["k"].tolist() == [1, 2]
    assert summary["quality"].tolist() == [0.625, 1.0]


def test_bon_folder_and_curves_join_with_quality(tmp_path):
    bon_fixture(tmp_path)
    run = read_bon_folder(tmp_path, model="rm-x")
    assert set(run["selected"]["k"]) == {1, 2}  # the eval files are not mistaken for k files
    assert set(run["eval"]["k"]) == {1, 2}
    curves = reference_curves(run["eval"], model="rm-x")
    assert curves["mean"].tolist() == [0.625, 1.0]
    assert (curves["method"] == "first").all()
    # the scored file plus per-sample quality gives the tidy BoN form for exact curves
    frame = run["scored"].assign(quality=[0.0, 1.0, 0.5, 0.5, 0.0, 1.0])
    exact = bon_curves(frame, [1, 3], oracle=False, methods=["exact"])
    assert exact.set_index("k").loc[3, "mean"] == pytest.approx((1.0 + 0.5) / 2)


def test_eval_parse_suspect(tmp_path):
    path = write_jsonl(tmp_path / "Society_eval_k4.jsonl", [
        {"id": 1, "query": "q", "answer": "a", "aspects": "A, B", "scores": [], "average_score": 0.0},
        {"id": 2, "query": "q", "answer": "a", "aspects": "A, B", "scores": [2.0], "average_score": 2.0},
        {"id": 3, "query": "q", "answer": "a", "aspects": "A, B", "scores": [7.0, 1.0], "average_score": 4.0},
        {"id": 4, "query": "q", "answer": "a", "aspects": "A, B", "scores": [1.0, 2.0], "average_score": 1.5}])
    ev = read_bon_eval(path)
    assert ev["parse_suspect"].tolist() == [True, True, True, False]
    assert ev["subset"].iloc[0] == "Society_and_Culture" and ev["k"].iloc[0] == 4
    assert ev["id"].tolist() == ["1", "2", "3", "4"]


@pytest.mark.parametrize(
    "content, message",
    [('{"id": "q1", "query": "x"\n', "line 1: not valid JSON"),
     ('{"id": "q1", "query": "x", "answer": "a", "scores": [1], "average_score": 1}\n[1]\n', "line 2"),
     ('\n{"id": "q1", "query": "x", "answer": "a", "scores": [1]}\n', "line 2: field 'average_score'"),
     ('{"id": "q1", "query": "x", "answer": "a", "scores": ["x"], "average_score": 1}\n', "line 1: field 'scores'")],
)
def test_bad_jsonl_names_file_and_line(tmp_path, content, message):
    path = tmp_path / "Art_eval_k2.jsonl"
    path.write_text(content)
    with pytest.raises(PRBError, match=message) as info:
        read_bon_eval(path)
    assert "Art_eval_k2.jsonl" in str(info.value)


def test_bad_summary_json(tmp_path):
    path = tmp_path / "evaluation_summary.json"
    path.write_text('{"Art_and_Entertainment": {"1": {"k": 1}}}')
    with pytest.raises(PRBError, match="expected fields"):
        read_evaluation_summary(path)
    path.write_text('{\n"a": \n')
    with pytest.raises(PRBError, match="line"):
        read_evaluation_summary(path)


POINTWISE = "\n".join([
    "=" * 70, "POINTWISE SCORE COMPARISON", "=" * 70,
    "Model:       Skywork-Reward-V2-Llama-3.2-3B", "Subset:      Art", "Comparisons: 767", "",
    "Chosen win rate:   71.19% (546/767)", "Rejected wins:     219  Ties: 2", "",
    "Avg chosen score:   3.1234", "Avg rejected score: 2.4567", "Avg diff (chosen - rejected): 0.6667",
    "=" * 70])

PAIRWISE = "\n".join([
    "=" * 70, "PAIRWISE EVALUATION COMPLETE", "=" * 70,
    "Subset:   Lifestyle_and_Personal_Development", "Split:    test", "Model:    Qwen/Qwen2.5-7B-Instruct",
    "Seed:     42", "", "Overall Accuracy: 60.26% (596/989)", "", "Position-specific Accuracy:",
    "  Pos in A: 70.00% (500 pairs)", "  Pos in B: 50.31% (489 pairs)", "  Position bias: 19.69%", "",
    "Prediction Distribution:", "  Predicted A: 600 (60.67%)", "  Predicted B: 389 (39.33%)", "",
    "Failed parses: 12", "=" * 70])


def test_accuracy_summaries(tmp_path):
    (tmp_path / "Art_Skywork-Reward-V2-Llama-3.2-3B_pointwise.txt").write_text(POINTWISE)
    (tmp_path / "Lifestyle_Qwen2.5-7B-Instruct_pairwise.txt").write_text(PAIRWISE)
    table = read_accuracy_summaries(tmp_path)
    assert list(table.columns[:8]) == ["model", "subset", "mode", "n", "correct", "wrong", "ties", "accuracy"]
    point = table[table["mode"] == "pointwise"].iloc[0]
    assert (point["n"], point["correct"], point["ties"]) == (767, 546, 2)
    assert point["accuracy"] == pytest.approx(546 / 767)
    assert point["subset"] == "Art_and_Entertainment"
    pair = read_pairwise_summary(tmp_path / "Lifestyle_Qwen2.5-7B-Instruct_pairwise.txt")
    assert pair["failed_parses"] == 12 and pair["pos_in_b_n"] == 489 and pair["seed"] == 42
    assert pair["pos_in_a_accuracy"] == pytest.approx(0.70)


def test_bad_summary_text(tmp_path):
    path = tmp_path / "Art_x_pointwise.txt"
    path.write_text(POINTWISE.replace("Ties: 2", "Ties: 5"))
    with pytest.raises(PRBError, match=r"Art_x_pointwise.txt, line 8"):
        read_pointwise_summary(path)
    path.write_text(POINTWISE.replace("Comparisons: 767", ""))
    with pytest.raises(PRBError, match="Comparisons"):
        read_pointwise_summary(path)


def test_ppo_csv(tmp_path):
    path = tmp_path / "ppo.csv"
    path.write_text("rm,subset,score,n\nrm-a,Art,0.6,100\nrm-a,Society_and_Culture,0.5,\nrm-b,,0.4,10\n")
    df = read_ppo_csv(path)
    assert df["subset"].tolist() == ["Art_and_Entertainment", "Society_and_Culture", "all"]
    assert df["score"].tolist() == [0.6, 0.5, 0.4]
    assert np.isnan(df["n"].iloc[1])


@pytest.mark.parametrize(
    "content, message",
    [("model,score\n", "line 1: the header"),
     ("rm,subset,score\nrm-a,Art,high\n", "line 2: field 'score'"),
     ("rm,subset,score\nrm-a,Art,0.1\n\nrm-a,Art,0.2\n", "line 4: .*twice"),
     ("rm,subset,score,n\nrm-a,Art,0.1,-3\n", "line 2: field 'n'"),
     ("rm,subset,score\n,Art,0.1\n", "line 2: field 'rm'"),
     ("rm,subset,score\n", "no data rows")],
)
def test_ppo_csv_errors(tmp_path, content, message):
    path = tmp_path / "ppo.csv"
    path.write_text(content)
    with pytest.raises(PRBError, match=message):
        read_ppo_csv(path)


def test_ppo_reference_results(tmp_path):
    write_jsonl(tmp_path / "Art_skywork_evaluation.jsonl", [
        {"id": "a", "query": "q", "answer": "x", "aspects": "A, B", "scores": [2.0, 1.0], "average_score": 1.5},
        {"id": "b", "query": "q", "answer": "x", "aspects": "A, B", "scores": [0.0, 1.0], "average_score": 0.5}])
    (tmp_path / "Art_skywork_evaluation.txt").write_text(
        "=== Evaluation Summary ===\nTotal entries:  2\nAverage score:  1.0000\n")
    (tmp_path / "Society_qwen_evaluation.txt").write_text(
        "=== Evaluation Summary ===\nTotal entries:  30\nAverage score:  1.2000\nStd dev:        0.1\n"
        "Min:            0.0\nMax:            2.0\njudge: Qwen/Qwen2.5-32B-Instruct\nsubset: Society_and_Culture\n")
    df = read_ppo_results(tmp_path, tags={"skywork": "Skywork/Skywork-Reward-V2"})
    rows = {r["rm"]: r for r in df.to_dict("records")}
    assert rows["Skywork/Skywork-Reward-V2"]["score"] == pytest.approx(0.5)
    assert rows["Skywork/Skywork-Reward-V2"]["n"] == 2
    assert rows["qwen"]["score"] == pytest.approx(0.6) and rows["qwen"]["subset"] == "Society_and_Culture"
    assert len(df) == 2  # the .txt beside a .jsonl is not counted twice
