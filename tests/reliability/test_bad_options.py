"""Bad options through the CLI: each is exit 2 with one plain sentence on stderr and no traceback."""

from __future__ import annotations

import pytest
from rel_helpers import assert_user_error, run_main

from prb_utils.store import load_results

SCORE = ["score", "--data", "sample", "--limit", "1", "--no-progress"]


def model_cases(tmp_path):
    a_file = tmp_path / "weights.bin"
    a_file.write_text("not a model")
    return {
        "unknown kind": ("foo:bar", "Unknown model kind"),
        "kind without name": ("judge:", "lacks a name"),
        "baseline with a name": ("length:big", "takes no model name"),
        "unknown alias (not a hub id here)": ("embedding:minilmm", "not reachable"),
        "unreachable hub id": ("classifier:nobody-here/no-such-reward-model", "offline"),
        "missing local folder": (f"classifier:{tmp_path / 'no' / 'such' / 'folder'}", "does not exist"),
        "a file, not a folder": (f"classifier:{a_file}", "points to a file"),
    }


CASES = ["unknown kind", "kind without name", "baseline with a name", "unknown alias (not a hub id here)",
         "unreachable hub id", "missing local folder", "a file, not a folder"]


@pytest.mark.parametrize("case", CASES)
def test_bad_model_specs(tmp_path, capsys, case):
    spec, message = model_cases(tmp_path)[case]
    code, _, err = run_main(capsys, *SCORE, "--model", spec, "--out", str(tmp_path / "r"))
    lines = assert_user_error(code, err, lines=1)
    assert message in lines[0], lines


def test_a_bad_spec_is_refused_before_any_model_is_scored(tmp_path, capsys):
    """A typo in the second --model must not cost the (possibly hours of) scoring of the first."""
    out = tmp_path / "r"
    code, _, err = run_main(capsys, *SCORE, "--model", "length", "--model", "lenght", "--out", str(out))
    assert_user_error(code, err, lines=1)
    assert load_results(out).empty


def test_a_missing_model_folder_in_the_second_model_is_found_before_the_first_is_scored(tmp_path, capsys):
    """Issue 35 item 13: every model is resolved (its folder found, fingerprinted) before any scoring."""
    out, missing = tmp_path / "r", tmp_path / "no" / "such" / "folder"
    code, _, err = run_main(capsys, *SCORE, "--model", "length", "--model", f"classifier:{missing}", "--out", str(out))
    lines = assert_user_error(code, err, lines=1)
    assert "does not exist" in lines[0]
    assert load_results(out).empty


@pytest.mark.parametrize("condition", ["top0", "topx", "top-1", "top", "bottom3", "", "top3,full"])
def test_bad_profile_conditions(tmp_path, capsys, condition):
    code, _, err = run_main(capsys, *SCORE, "--model", "length", "--profile", condition, "--out", str(tmp_path))
    lines = assert_user_error(code, err, lines=1)
    assert "profile condition" in lines[0]


def test_unreachable_hub_dataset_is_a_clear_offline_message(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run_main(capsys, "score", "--data", "nobody-here/no-such-dataset", "--model", "length",
                            "--out", str(tmp_path))
    lines = assert_user_error(code, err, lines=1)
    assert "no network?" in lines[0] and "nobody-here/no-such-dataset" in lines[0]


def test_unwritable_output_folder(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    for out in (blocker, blocker / "results"):
        code, _, err = run_main(capsys, *SCORE, "--model", "length", "--out", str(out))
        lines = assert_user_error(code, err, lines=1)
        assert "output folder" in lines[0] and str(out) in lines[0]


def test_store_folder_that_is_not_a_store(tmp_path, capsys):
    """``--out`` pointing at a folder whose ``jobs`` entry is a file (e.g. another tool's output)."""
    out = tmp_path / "elsewhere"
    out.mkdir()
    (out / "jobs").write_text("someone else's file")
    code, _, err = run_main(capsys, *SCORE, "--model", "length", "--out", str(out))
    assert_user_error(code, err, lines=1)


@pytest.mark.parametrize("retriever, message", [("foo", "Unknown retriever"), (
    "dense:no-such-encoder", "The retriever 'dense:no-such-encoder' cannot use its encoder")])
def test_bad_retrievers(tmp_path, capsys, retriever, message):
    code, _, err = run_main(capsys, *SCORE, "--model", "length", "--profile", "top2", "--retriever", retriever,
                            "--out", str(tmp_path))
    lines = assert_user_error(code, err, lines=1)
    assert message in lines[0]


def test_the_documented_dense_retriever_works(tmp_path, capsys):
    code, _, err = run_main(capsys, *SCORE, "--model", "length", "--profile", "top2", "--retriever", "dense:minilm",
                            "--out", str(tmp_path))
    assert code == 0, err
    assert len(load_results(tmp_path)) == 3


def test_missing_judge_template_file(tmp_path, capsys, tiny_lm_dir):
    code, _, err = run_main(capsys, *SCORE, "--model", f"judge:{tiny_lm_dir}", "--judge-template",
                            str(tmp_path / "my_template.txt"), "--out", str(tmp_path / "r"), "--device", "cpu")
    lines = assert_user_error(code, err, lines=1)
    assert "my_template.txt" in lines[0]


def test_cuda_asked_for_where_there_is_none(tmp_path, capsys, tiny_classifier_dir, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, _, err = run_main(capsys, *SCORE, "--model", f"classifier:{tiny_classifier_dir}", "--device", "cuda",
                            "--out", str(tmp_path))
    lines = assert_user_error(code, err, lines=1)
    assert "cuda" in lines[0].lower()


def test_a_token_budget_smaller_than_one_pair_still_scores_the_same(tmp_path, capsys, tiny_classifier_dir):
    spec = f"classifier:{tiny_classifier_dir}"
    code, _, err = run_main(capsys, *SCORE, "--model", spec, "--out", str(tmp_path / "a"), "--device", "cpu")
    assert code == 0, err
    code, _, err = run_main(capsys, *SCORE, "--model", spec, "--out", str(tmp_path / "b"), "--device", "cpu",
                            "--batch-tokens", "1")
    assert code == 0, err
    a, b = load_results(tmp_path / "a"), load_results(tmp_path / "b")
    assert a["score_chosen"].round(5).tolist() == b["score_chosen"].round(5).tolist()


@pytest.mark.parametrize("args, message", [
    (["--limit", "0"], "positive integer"),
    (["--limit", "x"], "positive integer"),
    (["--device", "tpu"], "invalid choice"),
    (["--batch-tokens", "-5"], "positive integer"),
])
def test_argument_errors_exit_2_ending_with_one_sentence(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as info:
        run_main(capsys, *SCORE, "--model", "length", *args, "--out", str(tmp_path))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and message in err.strip().splitlines()[-1]


@pytest.mark.parametrize("args, message", [
    (["summarize", "--results", "{tmp}/nothing-here"], "No results"),
    (["summarize", "--results", "{store}", "--by", "modle"], "Unknown --by column"),
    (["score", "--data", "{tmp}/data.csv", "--model", "length", "--out", "{tmp}/r"], "not a .jsonl"),
    (["score", "--data", "{tmp}", "--model", "length", "--out", "{tmp}/r"], "holds no .jsonl"),
    (["score", "--data", "sample", "--out", "{tmp}/r"], "--model"),
])
def test_other_user_mistakes(tmp_path, capsys, args, message):
    store = tmp_path / "store"
    code, _, err = run_main(capsys, *SCORE, "--model", "length", "--out", str(store))
    assert code == 0, err
    (tmp_path / "data.csv").write_text("id,question\n1,Q?\n")
    args = [a.format(tmp=tmp_path / "empty" if a == "{tmp}" else tmp_path, store=store) for a in args]
    (tmp_path / "empty").mkdir()
    code, _, err = run_main(capsys, *args)
    lines = assert_user_error(code, err, lines=1)
    assert message in lines[0], lines


@pytest.mark.parametrize("extra, message", [
    (["--engine", "vllm", "--engine-url", "notaurl"], "is not a URL"),
    (["--engine", "vllm", "--engine-arg", "port=9000"], "chooses the server's port"),
    (["--engine", "vllm", "--engine-arg=--host=0.0.0.0"], "chooses the server's host"),
    # abbreviations vLLM's argparse reads as the option (#50 item 4; before: the server listened on every
    # interface, or ran bfloat16 while job.json said float32)
    (["--engine", "vllm", "--engine-arg", "hos=0.0.0.0"], "(vLLM reads hos as --host): prb chooses the server's host"),
    (["--engine", "vllm", "--engine-arg", "p=9000"], "prb chooses the server's port"),
    (["--engine", "vllm", "--engine-arg", "dtyp=bfloat16", "--dtype", "float32"],
     "(vLLM reads dtyp as --dtype) duplicates prb's --dtype"),
    (["--engine", "vllm", "--engine-arg", "served_model=x"], "duplicates prb's --model"),
])
def test_engine_options_prb_owns_or_cannot_use_are_one_sentence(tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.setenv("PRB_VLLM_PYTHON", str(tmp_path / "missing" / "python"))   # never a server, even unrefused
    code, _, err = run_main(capsys, *SCORE, "--model", "judge:smollm2", "--out", str(tmp_path / "r"), *extra)
    assert code == 2 and message in err and "Traceback" not in err


def test_the_vllm_engine_with_only_model_free_models_warns_that_it_has_no_effect(tmp_path, capsys):
    code, _, err = run_main(capsys, *SCORE, "--model", "length", "--engine", "vllm", "--out", str(tmp_path / "r"))
    assert code == 0 and "--engine vllm has no effect" in err


@pytest.mark.parametrize(("argv", "said"), [
    (["score", "--data", "sample", "--limit", "1", "--model", "judge:smollm2", "--engine", "vllm",
      "--engine-url", "http://[::1"], "--engine-url 'http://[::1' is not a URL (Invalid IPv6 URL)"),
    (["score", "--data", "sample", "--limit", "1", "--model", "length", "--profile", "top2", "--retriever",
      "dense:nonexistent"], "The retriever 'dense:nonexistent' cannot use its encoder"),
    (["bon", "--limit", "1", "--model", "length", "--policy", "implicit:smollm2"],
     "give --policy smollm2, not --policy implicit:smollm2"),
    (["ppo", "--steps", "1", "--policy", "implicit:smollm2"], "give --policy smollm2, not --policy implicit:smollm2"),
    (["ppo", "--steps", "1", "--policy-posts", "-1"], "argument --policy-posts: expected 0 or a positive integer"),
])
def test_a_message_names_the_option_the_user_gave(tmp_path, capsys, argv, said):
    """Issue 50's four old messages that named the wrong thing: a cut IPv6 address read as a server not answering
    JSON, a dense retriever's encoder blamed on a model, a reward-model spec as --policy read as a hub id, and
    --policy-posts -1 named as ``policy_posts``."""
    out = ["--out" if argv[0] == "score" else "--results", str(tmp_path / "r")]
    try:
        code, _, err = run_main(capsys, *argv, *out, "--no-progress")
    except SystemExit as stopped:   # argparse's refusal: usage, then one sentence
        code, err = stopped.code, capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert said in err.strip().splitlines()[-1], err
    assert not (tmp_path / "r" / "bon" / "samples").exists()
