"""`prb plan`: token counts equal the scorer's, truncation and its warnings, rates, exit codes, and no weights read."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tiny_models
from transformers import AutoTokenizer

from prb_utils.cli import main
from prb_utils.data import SAMPLE_DIR, load_benchmark
from prb_utils.models import ModelOptions, PairInput, load_model
from prb_utils.models.judge import MAX_NEW_TOKENS
from prb_utils.models.lm import CostModel
from prb_utils.plan import format_duration, plan_frame
from prb_utils.profile import rm_user_message
from prb_utils.scoring import score_benchmark

WEIGHT_SUFFIXES = (".safetensors", ".bin")


@pytest.fixture(scope="module")
def tiny_bert_classifier_dir(tmp_path_factory):
    """A tiny BertForSequenceClassification: an encoder classifier (no prompt cache)."""
    return tiny_models.build_bert_classifier(tmp_path_factory.mktemp("tiny_bert_cls"))


def _specs(request) -> dict[str, str]:
    lm, cls = request.getfixturevalue("tiny_lm_dir"), request.getfixturevalue("tiny_classifier_dir")
    return {"judge": f"judge:{lm}", "implicit": f"implicit:{lm}", "classifier": f"classifier:{cls}",
            "encoder classifier": f"classifier:{request.getfixturevalue('tiny_bert_classifier_dir')}",
            "embedding": f"embedding:{request.getfixturevalue('tiny_bert_dir')}", "judge generate": f"judge:{lm}"}


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _weightless_copy(folder: Path, to: Path) -> Path:
    shutil.copytree(folder, to)
    removed = [p for p in to.iterdir() if p.name.endswith(WEIGHT_SUFFIXES)]
    for path in removed:
        path.unlink()
    assert removed, "the tiny model folder had no weight file to remove"
    return to


def _planted(tmp_path: Path, question_words: int) -> Path:
    """The sample's Society subset with one more record whose question alone is longer than a tiny context."""
    lines = (SAMPLE_DIR / "Society_and_Culture.jsonl").read_text(encoding="utf-8").splitlines()
    long = dict(json.loads(lines[0]), id="soc-long", question=" ".join(["camera settings"] * question_words))
    path = tmp_path / "Society_and_Culture.jsonl"
    path.write_text("\n".join([*lines, json.dumps(long)]) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------ token counts


def test_classifier_tokens_equal_the_tokenizer_on_the_rm_inputs(tiny_classifier_dir):
    """Recomputed from scratch: the chat of each answer rendered by the tokenizer's template, tokenized, the
    prefix the two share counted once (the last token of each stays its own: the head reads it)."""
    data = load_benchmark("sample")
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_classifier_dir))
    whole = shared = 0
    for record in data.to_dict("records"):
        user = rm_user_message(record, "none")
        ids = [tokenizer(tokenizer.apply_chat_template([{"role": "user", "content": user},
                                                        {"role": "assistant", "content": answer}], tokenize=False),
                         add_special_tokens=False)["input_ids"] for answer in (record["chosen"], record["rejected"])]
        assert max(map(len, ids)) <= 256   # no truncation under none: the count is the tokenizer's alone
        n = min(_common_prefix(*ids), min(map(len, ids)) - 1)
        whole += sum(map(len, ids))
        shared += n + sum(len(s) - n for s in ids)
    row = plan_frame(data, [f"classifier:{tiny_classifier_dir}"], ["none"]).iloc[0]
    assert (row["input_tokens"], row["tokens"], row["truncated"], row["sharing"]) == (whole, shared, 0, "prompt cache")
    assert shared < whole


@pytest.mark.parametrize("kind", ["judge", "implicit", "classifier", "encoder classifier", "embedding",
                                  "judge generate"])
def test_plan_counts_the_sequences_the_adapter_builds(kind, request):
    """Against the loaded adapter's own prepared token ids (the scorer's inputs, truncation included): input
    tokens, truncated pairs, and the shared prefix counted once where a decoder shares it (a generating judge
    runs its prompts whole, in a context that keeps room for its answer)."""
    spec = _specs(request)[kind]
    mode = "generate" if kind == "judge generate" else "logprob"
    data = load_benchmark("sample")
    rm = load_model(spec, device="cpu", judge_mode=mode)
    pairs = [PairInput(f"{r['subset']}/{r['id']}", rm_user_message(r, "full"), r["chosen"], r["rejected"])
             for r in data.to_dict("records")]
    row = plan_frame(data, [spec], ["full"], options=ModelOptions(judge_mode=mode)).iloc[0]
    if kind == "embedding":
        found = [[len(rm._encode(t, keep=side)[0]) for t, side in dict.fromkeys(
            [(p.prompt, "left"), (p.chosen, "right"), (p.rejected, "right")])] for p in pairs]
        assert row["input_tokens"] == sum(map(sum, found))
        distinct = dict.fromkeys(t for p in pairs for t in [(p.prompt, "left"), (p.chosen, "right"),
                                                              (p.rejected, "right")])
        assert row["tokens"] == sum(len(rm._encode(t, keep=side)[0]) for t, side in distinct) < row["input_tokens"]
        assert row["truncated"] == sum(any(rm._encode(t, keep="left")[1] for t in (p.prompt, p.chosen, p.rejected))
                                       for p in pairs)
        return
    sequences = rm.prepare(pairs).sequences
    whole = sum(len(s) for built in sequences for s in built[0])
    computed = 0
    for built in sequences:
        seqs = built[0]
        firsts = built[1] if kind == "implicit" else [len(s) for s in seqs]   # wanted from the last position on
        n = min(_common_prefix(*seqs), min(map(len, seqs)) - 1, min(firsts))
        whole_only = kind in ("encoder classifier", "judge generate")
        computed += sum(map(len, seqs)) if whole_only else n + sum(len(s) - n for s in seqs)
    assert (row["input_tokens"], row["tokens"]) == (whole, computed)
    assert row["truncated"] == sum(bool(built[-1]) for built in sequences) > 0   # the tiny contexts cut `full`
    assert row["sharing"] == ("none" if whole_only else "prompt cache")
    assert row["context"] == rm.max_length - (MAX_NEW_TOKENS if mode == "generate" else 0) >= max(
        len(s) for built in sequences for s in built[0])


@pytest.mark.parametrize("kind", ["judge", "implicit", "classifier", "encoder classifier", "embedding"])
def test_plan_tokens_equal_what_scoring_computes(kind, request, tmp_path):
    """`score_benchmark` on the same data: the forward passes compute exactly the planned tokens when the prompt
    cache serves every pair (a cost model without a fixed cost per pass, one pair per batch and per chunk); an
    embedding model embeds each distinct text of a chunk once, and the plan counts it once (issue 35 item 15:
    before, twin pairs' shared answers were planned twice)."""
    spec = _specs(request)[kind]
    data = load_benchmark("sample")
    rm = load_model(spec, device="cpu", batch_tokens=1)
    runner = getattr(rm, "runner", None)
    if runner is not None:
        runner.cost = CostModel(overhead=0)
    rows = score_benchmark(data, [rm], ["top3"], out=tmp_path / "store", progress=False,
                           chunk_size=len(data) if kind == "embedding" else 1)
    computed = runner.tokens_computed + getattr(rm, "tokens_computed", 0) if runner is not None else \
        rm.tokens_computed
    row = plan_frame(data, [spec], ["top3"]).iloc[0]
    assert row["tokens"] == computed
    assert row["truncated"] == int(rows["truncated"].sum())
    assert row["pairs"] == len(rows) == len(data)


def test_no_weight_is_read(tiny_lm_dir, tmp_path, capsys):
    """A model folder without its weight file plans exactly as the whole folder, while scoring it fails."""
    bare = _weightless_copy(tiny_lm_dir, tmp_path / "bare")
    data = load_benchmark("sample", limit=3)
    columns = ["input_tokens", "tokens", "truncated", "longest", "context"]
    with_weights = plan_frame(data, [f"judge:{tiny_lm_dir}"], ["none", "top3"])[columns]
    without = plan_frame(data, [f"judge:{bare}"], ["none", "top3"])[columns]
    assert without.equals(with_weights)
    assert main(["plan", "--data", "sample", "--limit", "3", "--model", f"implicit:{bare}"]) == 0
    assert main(["score", "--data", "sample", "--limit", "3", "--model", f"implicit:{bare}", "--out",
                 str(tmp_path / "store"), "--no-progress"]) == 2
    assert "could not be loaded" in capsys.readouterr().err


# ------------------------------------------------------------------ truncation and warnings


def test_planted_long_record_is_counted_truncated_and_warned(tiny_lm_dir, tmp_path, capsys):
    data_file = _planted(tmp_path, question_words=200)
    spec = f"implicit:{tiny_lm_dir}"
    assert main(["plan", "--data", str(data_file), "--model", spec]) == 0
    captured = capsys.readouterr()
    frame = plan_frame(load_benchmark(str(data_file)), [spec], ["none"])
    assert frame["truncated"].tolist() == [1]
    assert frame["longest"].iloc[0] > 400 > 256 == frame["context"].iloc[0]
    warnings = [line for line in captured.err.splitlines() if line.startswith("prb: warning:")]
    assert warnings == [f"prb: warning: {spec} [none]: 1 of 15 pairs exceed the model's context of 256 tokens "
                        f"(max_position_embeddings 256, tokenizer model_max_length 256; longest input "
                        f"{frame['longest'].iloc[0]} tokens): scoring cuts their user message from the left."]
    scored = score_benchmark(load_benchmark(str(data_file)), [spec], ["none"], out=tmp_path / "store",
                             options=ModelOptions(device="cpu"), progress=False)
    assert scored.loc[scored["truncated"].astype(bool), "id"].tolist() == ["soc-long"]


def test_warns_beyond_the_rope_training_length(tiny_lm_dir, tmp_path, capsys):
    """A config that declares RoPE scaling from a shorter training length: inputs within the context but past
    that length get their own warning line (only config.json is read, so the weights are left out)."""
    folder = _weightless_copy(tiny_lm_dir, tmp_path / "scaled")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config["rope_scaling"] = {"rope_type": "linear", "factor": 4.0, "original_max_position_embeddings": 64}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    spec = f"implicit:{folder}"
    frame = plan_frame(load_benchmark("sample"), [spec], ["none"])
    assert frame["truncated"].tolist() == [0] and frame["longest"].iloc[0] > 64
    assert main(["plan", "--data", "sample", "--model", spec, "--model", f"implicit:{tiny_lm_dir}"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("prb: warning:")]
    assert len(warnings) == 1   # the unscaled model, same inputs: no warning
    assert re.match(rf"prb: warning: {re.escape(spec)} \[none\]: [0-9]+ of 42 pairs are longer than the 64 "
                    "tokens the model's positions were trained at", warnings[0])


# ------------------------------------------------------------------ the table, rates, baselines


def test_rate_gives_device_time_and_baselines_show_pairs_only(tiny_lm_dir, capsys):
    spec = f"judge:{tiny_lm_dir}"
    assert main(["plan", "--data", "sample", "--model", spec, "--model", "length", "--profile", "none",
                 "--profile", "top3", "--rate", "1000"]) == 0
    out = capsys.readouterr().out
    frame = plan_frame(load_benchmark("sample"), [spec, "length"], ["none", "top3"], rate=1000.0)
    judge = frame[frame["model"] == spec]
    # inputs of a few hundred tokens attend fewer keys than the rate's 2,048-token pass: less than a flat count
    assert ((judge["device_s"] > 0) & (judge["device_s"] < judge["tokens"] / 1000)).all()
    baseline = frame[frame["model"] == "length"]
    assert baseline["pairs"].tolist() == [42, 42] and baseline["tokens"].isna().all()
    assert baseline["device_s"].isna().all()
    lines = out.splitlines()
    assert sum(line.split()[0] in (spec, "length") for line in lines) == 4   # one table, a row per job
    assert all(line.split()[-1] != "n/a" for line in lines if line.startswith(spec))
    assert "tokens and device time: n/a for length: they run no model." in out
    assert f"device time, all jobs: {format_duration(judge['device_s'].sum())} (tokens weighed by the keys" in out


def test_a_rate_per_model_times_each_model_at_its_own_rate(tiny_lm_dir, tiny_classifier_dir, capsys):
    """`--rate SPEC=N` gives that model its own rate (a judge and a classifier run at different speeds); a plain
    `--rate N` is every other model's; a rate for a model not planned is refused in one sentence."""
    judge, classifier = f"judge:{tiny_lm_dir}", f"classifier:{tiny_classifier_dir}"
    base = ["plan", "--data", "sample", "--limit", "2", "--model", judge, "--model", classifier]
    one = plan_frame(load_benchmark("sample", limit=2), [judge, classifier], ["none"], rate=1000.0)
    mixed = plan_frame(load_benchmark("sample", limit=2), [judge, classifier], ["none"],
                       rate={judge: 250.0, None: 1000.0})
    seconds = dict(zip(one["model"], one["device_s"], strict=True))
    assert dict(zip(mixed["model"], mixed["device_s"], strict=True)) == pytest.approx(
        {judge: seconds[judge] * 4, classifier: seconds[classifier]})
    assert main([*base, "--rate", f"{judge}=250", "--rate", "1000"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()
            if line.split() and line.split()[0] in (judge, classifier)}
    assert rows[judge].endswith(" " + format_duration(seconds[judge] * 4))
    assert rows[classifier].endswith(" " + format_duration(seconds[classifier]))
    assert main([*base, "--rate", "lexical=10"]) == 2
    assert "--rate lexical=...: lexical is not one of the --model specs planned" in capsys.readouterr().err


def test_device_time_grows_with_length_as_attention_does():
    """A flat count at the rate's own length; about 1.5x per token at 35k tokens for the Llama-3.1-8B shape;
    a model whose config does not give its shape is costed linearly."""
    from types import SimpleNamespace

    from prb_utils.models.token_counts import RATE_POSITION, attended_keys, attention_share, equivalent_tokens

    share = attention_share(SimpleNamespace(num_hidden_layers=32, hidden_size=4096, intermediate_size=14336,
                                            num_attention_heads=32, num_key_value_heads=8))
    def per_token(length):
        seq = [(0,) * length]
        return equivalent_tokens(length, attended_keys(seq, 0), share) / length

    assert per_token(2 * RATE_POSITION) == pytest.approx(1.0, rel=1e-3)
    assert 1.4 < per_token(35_000) < 1.7 and per_token(500) < 1
    assert attended_keys([(1, 2, 3), (1, 2, 4, 5)], 2) == 3 + 3 + 7   # the prefix's keys counted once
    assert attention_share(SimpleNamespace()) == 0 and equivalent_tokens(100, 10**9, 0.0) == 100


def test_without_rate_device_time_is_na_with_its_reason(tiny_lm_dir, capsys):
    assert main(["plan", "--data", "sample", "--limit", "2", "--model", f"implicit:{tiny_lm_dir}"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.lstrip().startswith("implicit:"))
    assert row.split()[-1] == "n/a"
    assert "device time: n/a, no rate given: pass --rate TOKENS_PER_S" in out
    assert "bench/gpu_throughput.py" in out


def test_issue_command_runs_in_a_subprocess(tiny_lm_dir):
    """The command of the issue, as a user types it (a real process): one table, exit 0."""
    done = subprocess.run([sys.executable, "-m", "prb_utils", "plan", "--data", "sample", "--model",
                           f"judge:{tiny_lm_dir}", "--profile", "none", "--profile", "full"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:4] == ["model", "profile", "pairs", "input_tokens"]
    assert [line.split()[1] for line in lines[1:3]] == ["none", "full"]
    assert "Traceback" not in done.stderr


# ------------------------------------------------------------------ bad options


@pytest.mark.parametrize("argv, expected", [
    (["--model", "nope:x"], "Unknown model kind in 'nope:x'"),
    (["--model", "length", "--profile", "top0"], "Unknown profile condition 'top0'"),
    ([], "Give at least one --model"),
    (["--model", "length", "--engine-url", "http://127.0.0.1:1"], "need --engine vllm"),
    (["--model", "classifier:./no/such/folder"], "does not exist"),
    (["--model", "length", "--data", "./no-such-data.jsonl"], "no-such-data"),
])
def test_bad_options_exit_2_with_one_sentence(argv, expected, capsys):
    data = [] if "--data" in argv else ["--data", "sample"]
    assert main(["plan", *data, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0] and err[0].startswith("prb: ")


@pytest.mark.parametrize("rate", ["0", "-5", "nan", "inf", "fast"])
def test_bad_rate_is_refused_by_the_parser(rate, capsys):
    """Every number out of range gets the same sentence (issue 35 item 15: -5 and nan once read "of 0 or more",
    a range that holds 0, which is refused too); the learning rate says the same."""
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "--data", "sample", "--model", "length", "--rate", rate])
    assert exit_info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--rate" in last
    assert last.endswith("is not a number" if rate == "fast" else f"'{rate}' is not a finite number above 0")
    with pytest.raises(SystemExit):
        main(["ppo", "--learning-rate", rate])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.endswith("is not a number" if rate == "fast" else f"'{rate}' is not a finite number above 0")


def test_a_job_records_its_load_and_the_plan_adds_the_load_time_at_that_rate(tiny_lm_dir, tmp_path, capsys):
    """Scoring records how long the model took to load and the bytes of its checkpoint files; their ratio, given
    back as `--load-rate`, makes the plan's load time that same load time (one load per model, however many
    conditions); a folder without weight files has n/a weights, a plan without a rate says how to get one."""
    spec = f"implicit:{tiny_lm_dir}"
    assert main(["score", "--data", "sample", "--limit", "2", "--model", spec, "--model", "length", "--profile",
                 "none", "--profile", "top3", "--out", str(tmp_path / "store"), "--no-progress"]) == 0
    runs = [json.loads(f.read_text())["run"] for f in (tmp_path / "store" / "jobs").rglob("job.json")]
    recorded = [run for run in runs if "weights_bytes" in run]
    on_disk = sum(f.stat().st_size for f in tiny_lm_dir.iterdir() if f.suffix in WEIGHT_SUFFIXES)
    assert len(recorded) == 2 and {run["weights_bytes"] for run in recorded} == {on_disk}
    assert all(run["load_s"] > 0 for run in recorded)
    rate = on_disk / recorded[0]["load_s"] / 1e9
    capsys.readouterr()
    assert main(["plan", "--data", "sample", "--limit", "2", "--model", spec, "--model", "length", "--profile", "none",
                 "--profile", "top3", "--rate", "1000", "--load-rate", repr(rate)]) == 0
    out = capsys.readouterr().out
    assert (f"model loading, {spec}: weights {on_disk / 1e9:.2f} GB, load time "
            f"{format_duration(recorded[0]['load_s'])}") in out
    assert out.count("model loading,") == 1 and "plus loading 1 model at --load-rate" in out
    device = plan_frame(load_benchmark("sample", limit=2), [spec], ["none", "top3"], rate=1000.0)["device_s"].sum()
    assert f"device time, all jobs: {format_duration(device + recorded[0]['load_s'])} " in out
    bare = _weightless_copy(tiny_lm_dir, tmp_path / "bare")
    assert main(["plan", "--data", "sample", "--limit", "2", "--model", f"implicit:{bare}"]) == 0
    out = capsys.readouterr().out
    assert f"model loading, implicit:{bare}: weights n/a (no checkpoint files here), load time n/a" in out
    assert main(["plan", "--data", "sample", "--limit", "2", "--model", spec]) == 0
    assert "load time: n/a, no load rate given: pass --load-rate GB_PER_S" in capsys.readouterr().out
