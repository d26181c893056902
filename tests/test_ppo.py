"""prb ppo: GRPO (TRL's real trainer) on a tiny random policy with cheap RMs, the table, resuming, exit 2."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from prb_utils.cli import build_parser, main
from prb_utils.data import load_benchmark
from prb_utils.downstream.ppo import (
    BASELINE_RM,
    RMReward,
    TrainOptions,
    comparison_pairs,
    default_judge,
    last_checkpoint,
    read_reward_log,
    run_ppo,
    split_questions,
)
from prb_utils.downstream.reference_files import read_ppo_csv
from prb_utils.models import ModelOptions, load_model

#: Tiny and quick: 8-token completions, 2 per prompt, 2 prompts per step, one profile post in the prompt.
# a rate small enough that two steps on a tiny random policy do not make it answer nothing (that is divergence)
TINY = TrainOptions(num_generations=2, prompts_per_step=2, max_new_tokens=8, learning_rate=1e-6, policy_posts=1)


def _run(policy, out, *, models=("length",), steps=2, **kw):
    return run_ppo("sample", out=out, policy=str(policy), models=list(models), steps=steps, judge="proxy",
                   eval_questions=3, training=TINY, options=ModelOptions(device="cpu"), save_steps=1, progress=False,
                   **kw)


def tiny_ppo_argv(policy, out, *, steps: int = 2, learning_rate: str = "1e-6") -> list[str]:
    """``prb ppo`` of a tiny policy on the length RM: 3 held-out questions, 8-token answers, the proxy judge."""
    return ["ppo", "--policy", str(policy), "--model", "length", "--steps", str(steps), "--judge", "proxy",
            "--results", str(out), "--eval-questions", "3", "--policy-posts", "1", "--max-new-tokens", "8",
            "--num-generations", "2", "--learning-rate", learning_rate, "--save-steps", "1", "--device", "cpu",
            "--no-progress"]


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_split_is_seeded_disjoint_and_covers_every_subset():
    data = load_benchmark("sample")
    train, held = split_questions(data, eval_questions=3, seed=0)
    again, held_again = split_questions(data, eval_questions=3, seed=0)
    assert held["id"].tolist() == held_again["id"].tolist() and train["id"].tolist() == again["id"].tolist()
    assert sorted(held["subset"]) == sorted(data["subset"].unique())  # round robin over the subsets
    assert not set(held["question"]) & set(train["question"])
    assert len(train) + data["question"].isin(held["question"]).sum() == len(data)
    other = [split_questions(data, eval_questions=3, seed=s)[1]["id"].tolist() for s in range(1, 6)]
    assert any(ids != held["id"].tolist() for ids in other)
    with pytest.raises(Exception, match="no question to train on"):
        split_questions(data, eval_questions=data["question"].nunique(), seed=0)


def test_comparison_pairs_cover_every_completion():
    for n in range(1, 7):
        for pairwise in (False, True):
            pairs = comparison_pairs(n, pairwise=pairwise)
            assert sorted({i for p in pairs for i in p}) == list(range(n))
    assert comparison_pairs(4, pairwise=True) == [(0, 1), (1, 2), (2, 3), (3, 0)]


def test_pointwise_reward_is_the_rm_score_of_each_completion():
    reward = RMReward(load_model("length"), pairwise=False)
    texts = ["a", "abc", "abcdef", "ab", "x"]
    qids = ["q1", "q1", "q1", "q2", "q2"]
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    got = reward(prompts=[None] * 5, completions=completions, qid=qids, rm_prompt=["question"] * 5)
    assert got == [1.0, 3.0, 6.0, 2.0, 1.0]
    assert reward.calls == 1


def test_judge_reward_is_a_win_probability_against_a_sibling(tiny_lm_dir):
    reward = RMReward(load_model(f"judge:{tiny_lm_dir}", device="cpu"), pairwise=True)
    got = reward.scores(["q", "q", "r", "r", "r"], ["the question"] * 5,
                        ["cook eggs", "travel budget", "anime music", "short list", "the camera"])
    assert all(0.0 < g < 1.0 for g in got)
    assert got[0] + got[1] == pytest.approx(1.0)  # two completions: P(win) and 1 - P(win)
    assert sum(got[2:]) == pytest.approx(1.5)  # a cycle of three: each pair's win probabilities sum to 1


def test_default_judge_is_the_bon_default():
    bon = build_parser().parse_args(["bon"]).judge
    assert build_parser().parse_args(["ppo"]).judge == bon == default_judge()


@pytest.mark.slow
def test_two_step_ppo_on_a_tiny_policy(tiny_lm_dir, tmp_path):
    out = tmp_path / "results"
    code = main(tiny_ppo_argv(tiny_lm_dir, out))
    assert code == 0
    table = read_ppo_csv(out / "ppo" / "ppo.csv")
    assert sorted(table["rm"].unique()) == sorted([BASELINE_RM, "length"])
    assert sorted(table["subset"].unique()) == sorted(load_benchmark("sample")["subset"].unique())
    assert table["n"].tolist() == [1] * 6  # one held-out question per subset, each rated
    assert table["score"].between(0, 1).all()
    assert set(table["trainer"]) == {"GRPO"}   # the table names its trainer: GRPO is never called PPO
    run = json.loads((out / "ppo" / "run.json").read_text())
    assert run["policy_dtype"] == "float32" and run["judge_placement"] is None   # CPU's auto; the proxy runs no LLM
    answers = pd.read_parquet(out / "ppo" / "answers.parquet")
    assert answers.groupby("rm").size().to_dict() == {BASELINE_RM: 3, "length": 3}
    assert set(answers["judge"]) == {"proxy:minilm"} and answers["judge_proxy"].all()
    (run_dir,) = (out / "ppo" / "runs").iterdir()
    checkpoint, step = last_checkpoint(run_dir)
    assert step == 2 and checkpoint.name == "checkpoint-2"
    assert read_reward_log(run_dir)["step"].tolist() == [0, 1]
    before, after = _weights(tiny_lm_dir), _weights(checkpoint)
    assert before.keys() == after.keys()
    assert any(not before[k].equal(after[k]) for k in before)  # the policy was trained


@pytest.mark.slow
def test_rerun_trains_nothing_and_more_steps_resume_from_the_checkpoint(tiny_lm_dir, tmp_path):
    out = tmp_path / "results"
    first = _run(tiny_lm_dir, out, steps=1)
    (run_dir,) = (out / "ppo" / "runs").iterdir()
    assert first.trained == ["length"] and last_checkpoint(run_dir)[1] == 1
    one_step = _weights(run_dir / "checkpoint-1")

    again = _run(tiny_lm_dir, out, steps=1)
    assert again.trained == []  # finished: not trained again
    assert read_reward_log(run_dir)["step"].tolist() == [0]
    pd.testing.assert_frame_equal(again.table, first.table)

    more = _run(tiny_lm_dir, out, steps=2)
    assert more.trained == ["length"]
    assert read_reward_log(run_dir)["step"].tolist() == [0, 1]  # exactly one more step ran, from step 1
    checkpoint, step = last_checkpoint(run_dir)
    assert step == 2 and not (run_dir / "checkpoint-1").exists()
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert [e["step"] for e in state["log_history"] if "loss" in e] == [1, 2]  # step 1 came from the checkpoint
    assert any(not one_step[k].equal(v) for k, v in _weights(checkpoint).items())

    with pytest.raises(Exception, match="already trained 2 steps"):
        _run(tiny_lm_dir, out, steps=1)

    other = _run(tiny_lm_dir, out, models=("lexical",), steps=2)  # another RM, same setting: rows are kept
    assert sorted(other.table["rm"].unique()) == sorted([BASELINE_RM, "length", "lexical"])
    assert sorted(read_ppo_csv(out / "ppo" / "ppo.csv")["rm"].unique()) == sorted([BASELINE_RM, "length", "lexical"])


@pytest.mark.parametrize("extra, message", [
    (["--model", "nope:x"], "Unknown model kind"),
    (["--judge", "bogus"], "Unknown rubric judge"),
    (["--eval-questions", "1000"], "no question to train on"),
    (["--rm-profile", "rubric"], "answer key"),
    (["--num-generations", "1"], "at least 2 completions"),
])
def test_user_mistakes_exit_2(tmp_path, capsys, extra, message):
    code = main(["ppo", "--results", str(tmp_path / "r"), "--model", "length", "--no-progress", *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "r" / "ppo" / "runs").exists()  # refused before training anything


def test_an_rl_table_names_its_trainer_and_one_without_is_the_papers_ppo(tmp_path):
    grpo, plain = tmp_path / "grpo.csv", tmp_path / "plain.csv"
    grpo.write_text("rm,subset,score,n,trainer\na,Art,0.5,3,GRPO\n", encoding="utf-8")
    plain.write_text("rm,subset,score\na,Art,0.5\n", encoding="utf-8")
    assert read_ppo_csv(grpo)["trainer"].tolist() == ["GRPO"]
    assert read_ppo_csv(plain)["trainer"].tolist() == ["PPO"]


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "lots"])
def test_a_bad_kl_coefficient_exits_2_in_one_sentence(value, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["ppo", "--kl-coef", value])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--kl-coef" in err and "Traceback" not in err


def test_the_kl_coefficient_option_defaults_to_no_penalty():
    args = build_parser().parse_args(["ppo", "--kl-coef", "0.04"])
    assert args.kl_coef == 0.04
    assert build_parser().parse_args(["ppo"]).kl_coef == 0.0


def _ppo_process(policy, out, log):
    """A real ``prb ppo`` child process (tiny options), its stderr in ``log``."""
    import os
    import subprocess
    import sys

    argv = [sys.executable, "-m", "prb_utils.cli", *tiny_ppo_argv(policy, out)]
    with open(log, "w", encoding="utf-8") as err:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "HF_HUB_OFFLINE": "1"})


@pytest.mark.slow
def test_two_prb_ppo_on_one_results_folder_take_turns(tiny_lm_dir, tmp_path):
    """While `<results>/ppo/.lock` is held (by another prb ppo, or here by this test), prb ppo waits, says so in
    one line and writes nothing; two prb ppo started together each finish, and every step is trained and
    logged once."""
    import time

    from prb_utils.store import folder_lock

    out = tmp_path / "held"
    with folder_lock(out / "ppo"):
        waiting = _ppo_process(tiny_lm_dir, out, tmp_path / "held.err")
        while waiting.poll() is None and "waiting for another prb ppo" not in (tmp_path / "held.err").read_text():
            time.sleep(0.05)
        said = (tmp_path / "held.err").read_text()
        assert "prb: waiting for another prb ppo on the results folder" in said, said
        assert waiting.poll() is None and not (out / "ppo" / "runs").exists()   # nothing trained while it waits
    assert waiting.wait(timeout=600) == 0
    assert read_reward_log(next((out / "ppo" / "runs").iterdir()))["step"].tolist() == [0, 1]

    out = tmp_path / "together"
    both = [_ppo_process(tiny_lm_dir, out, tmp_path / f"together-{i}.err") for i in range(2)]
    assert [p.wait(timeout=600) for p in both] == [0, 0]
    (run_dir,) = (out / "ppo" / "runs").iterdir()
    assert read_reward_log(run_dir)["step"].tolist() == [0, 1]   # each step logged once, not twice
    lines = (run_dir / "rewards.jsonl").read_text().splitlines()
    assert len(lines) == 2
    pd.testing.assert_frame_equal(read_ppo_csv(out / "ppo" / "ppo.csv"), read_ppo_csv(tmp_path / "held" / "ppo" / "ppo.csv"))


@pytest.mark.slow
def test_a_diverged_policy_is_left_out_of_the_rl_table_with_its_reason(tiny_lm_dir, tmp_path, capsys):
    """Issue 35 item 14: `--learning-rate 1e30` trains a policy that answers nothing (before: its empty answers
    were judged and ranked above the untrained policy); it is marked diverged, with the reason, and left out."""
    out = tmp_path / "results"
    code = main(tiny_ppo_argv(tiny_lm_dir, out, steps=1, learning_rate="1e30"))
    assert code == 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("prb:")]
    assert err == ["prb: warning: the policy trained on length diverged after 1 GRPO step(s) at learning rate 1e+30: "
                   "every held-out answer is empty; it is left out of the RL table."]
    assert set(read_ppo_csv(out / "ppo" / "ppo.csv")["rm"]) == {BASELINE_RM}
    assert json.loads((out / "ppo" / "run.json").read_text())["diverged"] == {
        "length": "diverged after 1 GRPO step(s) at learning rate 1e+30: every held-out answer is empty"}


@pytest.mark.slow
def test_a_policy_diverging_mid_training_is_left_out_in_one_sentence_not_a_traceback(tiny_lm_dir, tmp_path, capsys):
    """Issue 50: `--steps 2 --save-steps 1 --learning-rate 1e30` ended in a RuntimeError traceback (sampling step
    2 from non-finite probabilities); the policy is marked diverged, with the step, and left out; a rerun says the
    same."""
    out = tmp_path / "results"
    said = ("prb: warning: the policy trained on length diverged after 1 GRPO step(s) at learning rate 1e+30: its "
            "probabilities were no longer finite in GRPO step 2; it is left out of the RL table.")
    for _ in range(2):
        code = main(tiny_ppo_argv(tiny_lm_dir, out, steps=2, learning_rate="1e30"))
        err = capsys.readouterr().err
        assert code == 0 and "Traceback" not in err
        assert [line for line in err.splitlines() if line.startswith("prb:")] == [said]
        assert set(read_ppo_csv(out / "ppo" / "ppo.csv")["rm"]) == {BASELINE_RM}
        assert "no longer finite in GRPO step 2" in json.loads((out / "ppo" / "run.json").read_text())["diverged"][
            "length"]


def test_non_finite_weights_are_named(tmp_path):
    """A checkpoint holding a NaN is diverged whatever it answers; a healthy one is not."""
    from tiny_models import build_causal_lm

    from prb_utils.downstream.ppo import nonfinite_weights

    assert nonfinite_weights(build_causal_lm(tmp_path / "ok")) is None
    assert nonfinite_weights(build_causal_lm(tmp_path / "nan", nan=True)).startswith("non-finite weights (")


@pytest.mark.slow
def test_damaged_rl_files_are_named_set_aside_and_computed_anew(tiny_lm_dir, tmp_path, capsys):
    """Issue 35 item 12: a cut checkpoint, a verdict cache and an answer cache without their columns, and a
    ppo.csv that is not UTF-8 (before: tracebacks) are each one sentence naming the file, kept beside it under
    another name, and computed anew; the rerun ends with the RL table of the first run."""
    out = tmp_path / "results"
    argv = tiny_ppo_argv(tiny_lm_dir, out, steps=1)
    assert main(argv) == 0
    first = read_ppo_csv(out / "ppo" / "ppo.csv")
    (run_dir,) = (out / "ppo" / "runs").iterdir()
    weights = run_dir / "checkpoint-1" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    (verdicts,) = (out / "ppo" / "judge").glob("*.parquet")
    (answers,) = run_dir.glob("answers-*.parquet")
    for cache, column in ((verdicts, "failed"), (answers, "response")):
        pd.read_parquet(cache).drop(columns=[column]).to_parquet(cache)
    (out / "ppo" / "ppo.csv").write_bytes(b"rm,subset,score\n\xff\xfe,Art,0.5\n")
    capsys.readouterr()
    assert main(argv) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("prb:")]
    assert len(warned) == 4 and all("is damaged" in line and "set aside as" in line for line in warned)
    for named in (run_dir / "checkpoint-1", verdicts, answers, out / "ppo" / "ppo.csv"):
        assert sum(str(named) in line for line in warned) == 1
    assert (run_dir / "damaged-checkpoint-1" / "model.safetensors").is_file()
    assert last_checkpoint(run_dir)[1] == 1 and _weights(run_dir / "checkpoint-1")   # trained again, whole
    assert (out / "ppo" / "ppo.csv.damaged").read_bytes().startswith(b"rm,subset,score\n\xff")
    pd.testing.assert_frame_equal(read_ppo_csv(out / "ppo" / "ppo.csv"), first)


def test_an_earlier_runs_rows_read_by_another_quality_rule_are_not_merged(tmp_path, capsys):
    """One RL table, one reading of an answer's quality: rows an earlier run of the same setting read by the
    argmax verdicts stay out of a table read by the expected verdicts (and are merged under the same rule)."""
    from prb_utils.downstream.ppo import _merge_previous

    setting = {"policy": "p", "steps": 2}
    (tmp_path / "run.json").write_text(json.dumps({**setting, "quality_rule": "argmax"}), encoding="utf-8")
    (tmp_path / "ppo.csv").write_text("rm,subset,score,n,trainer\nold,Art_and_Entertainment,0.5,3,GRPO\n",
                                      encoding="utf-8")
    table = pd.DataFrame({"rm": ["new"], "subset": ["Art_and_Entertainment"], "score": [0.485],
                          "n": pd.array([3], dtype="Int64"), "trainer": ["GRPO"]})
    other = _merge_previous(tmp_path, table, setting, rule="expected")   # the earlier answers are gone
    assert other["rm"].tolist() == ["new"] and "argmax quality rule" in capsys.readouterr().err
    same = _merge_previous(tmp_path, table, setting, rule="argmax")
    assert sorted(same["rm"]) == ["new", "old"]
    # with the earlier run's judged answers at hand, its rows are read again by this run's rule
    pd.DataFrame({"rm": "old", "subset": "Art_and_Entertainment", "quality": [0.5, 0.5, 0.5],
                  "quality_expected": [0.4, 0.5, 0.6], "quality_rule": "argmax"}).to_parquet(tmp_path / "answers.parquet")
    reread = _merge_previous(tmp_path, table, setting, rule="expected").set_index("rm")
    assert reread.loc["old", "score"] == pytest.approx(0.5) and reread.loc["old", "n"] == 3
    pd.DataFrame({"rm": "old", "subset": "Art_and_Entertainment", "quality": [0.5, 0.5, 0.5],
                  "quality_expected": [0.4, 0.4, 0.4], "quality_rule": "argmax"}).to_parquet(tmp_path / "answers.parquet")
    assert _merge_previous(tmp_path, table, setting, rule="expected").set_index("rm").loc["old", "score"] == (
        pytest.approx(0.4))


def test_the_rl_judge_is_loaded_on_the_device_and_dtype_its_cache_is_keyed_by(tmp_path, monkeypatch):
    from prb_utils.downstream import ppo

    seen = {}

    class Stop(Exception):
        pass

    def fake_load(spec, options=None, **overrides):
        seen.update(overrides, spec=spec, device=options.device, dtype=options.dtype)
        raise Stop

    monkeypatch.setattr(ppo, "load_judge", fake_load)
    data = load_benchmark("sample", limit=1)
    answers = data[["subset", "id"]].assign(response="an answer")
    with pytest.raises(Stop):
        ppo.judge_answers(answers, data, cache=tmp_path / "judge.parquet", judge="llm:x", progress=False,
                          options=ModelOptions(device="cpu", dtype="bfloat16"))
    assert seen == {"spec": "llm:x", "device": "cpu", "dtype": "bfloat16"}   # the run's options whole


@pytest.mark.parametrize(("damage", "reason"), [
    (lambda f: f.assign(response=[None, *f["response"][1:]]), "1 row with no response"),
    (lambda f: pd.concat([f, f.head(1)], ignore_index=True), "2 rows with one subset, id"),
])
def test_an_rl_answer_cache_with_wrong_values_is_set_aside_naming_the_file(tmp_path, capsys, monkeypatch,
                                                                            damage, reason):
    """Issue 50: an RL answer cache with its columns but an empty or a duplicated row (before: read as it was)
    is one sentence naming the file, set aside and answered anew."""
    from prb_utils.downstream import ppo

    held_out = load_benchmark("sample").head(2)
    fresh = pd.DataFrame({"subset": held_out["subset"].astype(str), "id": held_out["id"].astype(str),
                          "response": ["one", "two"], "prompt_hash": "h"})
    monkeypatch.setattr(ppo, "generate_answers", lambda *a, **k: fresh)
    path = tmp_path / "answers.parquet"
    damage(fresh).to_parquet(path)
    got = ppo._cached_answers(path, "m", held_out, posts=1, max_new_tokens=8, options=ModelOptions())
    pd.testing.assert_frame_equal(got, fresh)
    (line,) = [w for w in capsys.readouterr().err.splitlines() if w.startswith("prb:")]
    assert str(path) in line and reason in line and "set aside" in line


def test_an_rl_verdict_cache_with_a_quality_out_of_range_is_judged_anew(tmp_path, capsys):
    from prb_utils.downstream.ppo import judge_answers

    held_out = load_benchmark("sample").head(1)
    answers = pd.DataFrame({"subset": held_out["subset"].astype(str), "id": held_out["id"].astype(str),
                            "response": ["A cheap answer."]})
    cache = tmp_path / "verdicts.parquet"
    first = judge_answers(answers, held_out, cache=cache, judge="proxy", progress=False)
    pd.read_parquet(cache).assign(quality=7.0).to_parquet(cache)
    again = judge_answers(answers, held_out, cache=cache, judge="proxy", progress=False)
    pd.testing.assert_frame_equal(again, first)
    (line,) = [w for w in capsys.readouterr().err.splitlines() if w.startswith("prb:")]
    assert str(cache) in line and "quality is not a number from 0 to 1" in line
