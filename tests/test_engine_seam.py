"""The engine seam: a new kind is one record (plus its adapter), a new engine is one record (plus its module);
no code tests a kind by its name, and the engine's settings are one object, never retyped as keywords."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from prb_utils.cli import main
from prb_utils.data import load_benchmark
from prb_utils.downstream.rubric_judge import load_judge
from prb_utils.errors import PRBError
from prb_utils.models import (
    ENGINES,
    MODEL_KINDS,
    EngineConfig,
    ModelOptions,
    PairScore,
    list_models,
    load_model,
    parse_spec,
)
from prb_utils.models.engines import EngineType
from prb_utils.models.kinds import ModelKind
from prb_utils.scoring import job_options, score_benchmark
from prb_utils.store import load_run_metadata

PACKAGE = Path(__file__).resolve().parents[1] / "prb_utils"


class WordsBaseline:
    """A model-free kind defined only here: the answer with more words wins."""

    kind = "words"
    spec = "words"
    method = "words"

    def score_pairs(self, pairs: Any) -> list[PairScore]:
        return [PairScore(float(len(p.chosen.split())), float(len(p.rejected.split()))) for p in pairs]

    def run_metadata(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind}


class EchoJudge:
    """A judge served by an engine defined only here: it records what the engine handed it."""

    kind = "judge"

    def __init__(self, spec: Any, *, engine_config: EngineConfig, **options: Any) -> None:
        self.spec = spec.canonical
        self.engine_config = engine_config
        self.options = options

    def score_pairs(self, pairs: Any) -> list[PairScore]:
        return [PairScore(float(len(p.chosen)), float(len(p.rejected))) for p in pairs]

    def run_metadata(self) -> dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind, "served_by": self.engine_config.name}


class EchoChat:
    """The chat generator of the engine defined here: every reply is a fixed verdict."""

    def __init__(self, model: str, *, engine: EngineConfig, **options: Any) -> None:
        self.model, self.engine = model, engine

    def generate(self, users: Any, **_: Any) -> list[list[str]]:
        return [["[2, 0]"] for _ in users]

    def metadata(self) -> dict[str, Any]:
        return {"generator": self.model, "engine": self.engine.name}


@pytest.fixture
def words_kind(monkeypatch):
    monkeypatch.setitem(MODEL_KINDS, "words", ModelKind("words", "baseline: the answer with more words wins",
                                                        f"{__name__}:WordsBaseline", weights=False, quick=True))


@pytest.fixture
def echo_engine(monkeypatch):
    monkeypatch.setitem(ENGINES, "echo", EngineType("echo", "a server defined in a test", f"{__name__}:EchoChat",
                                                    {"judge": f"{__name__}:EchoJudge"}))


def test_a_new_kind_is_one_record(words_kind, tmp_path, capsys):
    assert parse_spec("words").canonical == "words"
    with pytest.raises(PRBError, match="takes no model name"):
        parse_spec("words:x")
    assert isinstance(load_model("words"), WordsBaseline)
    assert "words" in set(list_models()["kind"])
    data = load_benchmark("sample", limit=2)
    rows = score_benchmark(data, ["words"], ["none"], out=tmp_path / "store", progress=False)
    expected = ["correct" if len(c.split()) > len(r.split()) else "wrong" if len(c.split()) < len(r.split()) else "tie"
                for c, r in zip(data["chosen"], data["rejected"], strict=True)]
    assert rows["kind"].tolist() == ["words"] * len(data) and rows["outcome"].tolist() == expected
    assert job_options("words", "none") == {}   # no weights: no placement, seed or tokenization in its key
    assert main(["score", "--data", "sample", "--limit", "2", "--model", "words", "--out", str(tmp_path / "cli"),
                 "--no-progress"]) == 0
    assert "words" in capsys.readouterr().out


def test_a_new_engine_is_one_record(echo_engine, tmp_path, capsys):
    config = EngineConfig("echo", urls="http://127.0.0.1:9")
    assert config.remote("judge") and not config.remote("implicit")
    model = load_model("judge:smollm2", ModelOptions(device="cpu", judge_mode="generate", engine=config))
    assert isinstance(model, EchoJudge) and model.engine_config == config
    assert model.options["judge_mode"] == "generate" and model.options["device"] == "cpu"
    # the job key names the engine for the kind it serves, and only for it
    assert job_options("judge", "none", ModelOptions(engine=config))["engine"] == "echo"
    assert "engine" not in job_options("implicit", "none", ModelOptions(engine=config))
    with pytest.raises(PRBError, match="need --engine vllm or echo"):
        EngineConfig(engine_args=("max-model-len=64",))
    judge = load_judge("llm-ref:smollm2", engine=config)
    assert judge.metadata == {"generator": "smollm2", "engine": "echo"}
    out = tmp_path / "store"
    assert main(["score", "--data", "sample", "--limit", "1", "--model", "judge:smollm2", "--engine", "echo",
                 "--engine-url", "http://127.0.0.1:9", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    meta = load_run_metadata(out)
    assert meta["served_by"].tolist() == ["echo"] and meta["option_engine"].tolist() == ["echo"]


def _sources() -> list[tuple[Path, ast.AST]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(PACKAGE.rglob("*.py"))]


def _names_kind(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "kind") or (isinstance(node, ast.Attribute) and node.attr == "kind")


def _literals(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)


def test_no_code_tests_a_kind_by_its_name():
    """Every question about a kind is a trait of its record: no ``kind == "judge"`` or ``kind in ("a", "b")``."""
    found = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_names_kind(side) for side in sides) and any(_literals(side) for side in sides):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert found == []


ENGINE_KEYWORDS = {"engine_url", "urls", "tensor_parallel_size", "pipeline_parallel_size", "engine_args", "concurrency"}


def test_the_engine_settings_are_one_object_never_retyped_as_keywords():
    """No function takes two or more of the engine's settings as parameters and no class but EngineConfig holds two
    or more of them as fields (they travel as one EngineConfig), and no parameter named ``engine`` is a plain
    string."""
    found = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                if len(ENGINE_KEYWORDS & {a.arg for a in params}) >= 2:
                    found.append(f"{path.name}:{node.name}")
                found += [f"{path.name}:{node.name}(engine: str)" for a in params
                          if a.arg == "engine" and isinstance(a.annotation, ast.Name) and a.annotation.id == "str"]
            elif isinstance(node, ast.ClassDef) and node.name != "EngineConfig":
                held = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
                if len(ENGINE_KEYWORDS & held) >= 2:
                    found.append(f"{path.name}:{node.name}")
    assert found == []


def test_a_started_vllm_servers_log_stays_with_the_run_not_in_the_temp_folder(tmp_path, capsys, monkeypatch):
    """Issue 35 item 15: the log of a server prb starts goes to ``<store>/engine/logs`` (before: one
    ``prb-vllm-*.log`` left in the system temp folder per start). A stand-in server Python that fails at once
    is enough: the sentence names the log, which holds its error."""
    import tempfile

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'RuntimeError: this stand-in has no vLLM'\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PRB_VLLM_PYTHON", str(fake))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "system-temp"))
    (tmp_path / "system-temp").mkdir()
    store = tmp_path / "store"
    code = main(["score", "--data", "sample", "--limit", "1", "--model", "implicit:smollm2", "--engine", "vllm",
                 "--out", str(store), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "this stand-in has no vLLM" in err[0], err
    (log,) = (store / "engine" / "logs").glob("vllm-*.log")
    assert str(log) in err[0] and "this stand-in has no vLLM" in log.read_text()
    assert not list((tmp_path / "system-temp").iterdir())


def test_a_request_cache_line_that_is_not_utf8_is_set_aside_and_the_sound_lines_kept(tmp_path, capsys):
    """Issue 35 item 12: a request cache holding bytes that are not UTF-8 (before: a UnicodeDecodeError
    traceback when the run opened it) is one sentence naming it; the file is kept as ``NAME.damaged`` and its
    sound responses are kept, so only the damaged line's request is sent again. A last line cut by a kill
    stays silent, as before."""
    from prb_utils.models.vllm_client import RequestCache

    path = tmp_path / "engine" / "cache.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"key": "a", "value": 1}\n{"key": "b", "value": "\xff\xfe"}\n{"key": "c", "value": 3}\n')
    cache = RequestCache(path)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"prb: warning: {path} is damaged (1 line(s) not UTF-8 text)")
    assert (cache.get("a"), "b" in cache, cache.get("c")) == (1, False, 3)
    assert (tmp_path / "engine" / "cache.jsonl.damaged").read_bytes().count(b"\n") == 3
    assert len(RequestCache(path)) == 2 and not capsys.readouterr().err   # the rewritten file reads cleanly
    path.write_bytes(path.read_bytes() + b'{"key": "d", "value": "\xe2\x82')   # a kill cut the last line
    assert len(RequestCache(path)) == 2 and not capsys.readouterr().err
