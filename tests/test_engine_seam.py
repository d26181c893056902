"""The engine seam: a new kind is one record (plus its adapter), a new engine is one record (plus its module);
no code tests a kind by its name, and the engine's settings are one object, never retyped as keywords."""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from prb_utils.cli import main
from prb_utils.data import load_benchmark
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
from prb_utils.models.engines import SERVED_ADAPTERS, SERVED_CHAT_GENERATOR, EngineType
from prb_utils.models.implicit import ImplicitRM
from prb_utils.models.kinds import CAUSAL_LM, CHAT_OPTIONS, ModelKind
from prb_utils.scoring import job_options, score_benchmark
from prb_utils.store import load_results, load_run_metadata

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


#: The second dialect, SGLang's native ``/generate`` API, as a contributor writes one: one module (this) and one record.
STANDIN_DIALECT = Path(__file__).with_name("standin_dialect.py")
STANDIN_RECORD = EngineType("standin", "an SGLang-like server defined in the tests", SERVED_CHAT_GENERATOR,
                            {kind: SERVED_ADAPTERS[kind] for kind in ("judge", "implicit")},
                            dialect=f"{STANDIN_DIALECT.stem}:SGLangLikeDialect")


@pytest.fixture
def words_kind(monkeypatch):
    monkeypatch.setitem(MODEL_KINDS, "words", ModelKind("words", "baseline: the answer with more words wins",
                                                        f"{__name__}:WordsBaseline", weights=False, quick=True))


@pytest.fixture
def standin_engine(monkeypatch):
    monkeypatch.setitem(ENGINES, "standin", STANDIN_RECORD)


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


class TinyLogprobRM(ImplicitRM):
    """A weight kind defined only here: the implicit RM's score under a kind of its own."""

    kind = "tinylp"


@pytest.fixture
def weight_kind(monkeypatch):
    monkeypatch.setitem(MODEL_KINDS, "tinylp", ModelKind(
        "tinylp", "a causal LM's mean response log-prob, as a kind of its own", f"{__name__}:TinyLogprobRM",
        CHAT_OPTIONS, chat_template=True, architecture=CAUSAL_LM,
        counter="prb_utils.models.token_counts:ImplicitTokens", model_type="Tiny log-prob"))


def test_a_new_weight_kind_is_one_record(weight_kind, tmp_path, tiny_lm_dir, capsys):
    """A kind with weights, defined here, through prb score (its placement, seed and tokenization keyed), prb plan
    (its token counter), prb export (its model type) and an offline alias (resolved by its architecture)."""
    out, exported = tmp_path / "store", tmp_path / "export"
    common = ["--data", "sample", "--limit", "1", "--device", "cpu", "--no-progress"]
    assert main(["score", "--model", f"tinylp:{tiny_lm_dir}", "--profile", "none", "--out", str(out), *common]) == 0
    rows = load_results(out)
    assert set(rows["kind"]) == {"tinylp"} and rows["score_chosen"].lt(0).all()
    key = load_run_metadata(out).iloc[0]
    assert (key["option_device"], key["option_dtype"], key["option_seed"]) == ("cpu", "float32", 0)
    assert key["option_tokenization"] == "auto"
    capsys.readouterr()
    assert main(["plan", "--model", f"tinylp:{tiny_lm_dir}", "--model", "tinylp:smollm2", "--data", "sample",
                 "--limit", "1", "--profile", "none"]) == 0
    planned = [line.split() for line in capsys.readouterr().out.splitlines() if line.lstrip().startswith("tinylp:")]
    assert len(planned) == 2 and all(line[3].replace(",", "").isdigit() for line in planned)   # tokens counted
    assert main(["export", "--format", "rewardbench", "--results", str(out), "--out", str(exported)]) == 0
    (summary,) = exported.glob("none/tinylp/*.json")
    assert json.loads(summary.read_text())["model_type"] == "Tiny log-prob"


def _asked(out: Path) -> list[dict[str, Any]]:
    """Every POST the stand-in answered (path and body), in order."""
    log = out / "engine" / "standin-requests.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []


def test_a_new_server_engine_is_one_dialect_and_one_record(standin_engine, tmp_path, tiny_lm_dir, capsys):
    """A second dialect (SGLang's ``/generate`` with ``input_ids``: tests/standin_dialect.py and one record, nothing
    else) runs ``prb score`` with a judge and an implicit RM against a server prb starts itself, through the real
    launcher, client, request cache and metadata: every request is the dialect's, the run records name the dialect
    and its server's dtype, and a rerun on a new store reads every response from the request cache."""
    config = EngineConfig("standin")
    assert config.remote("judge") and config.remote("implicit") and not config.remote("classifier")
    assert job_options("judge", "none", ModelOptions(engine=config))["engine"] == "standin"
    with pytest.raises(PRBError, match="standin"):   # the server options name every server engine
        EngineConfig(engine_args=("max-model-len=64",))
    with pytest.raises(PRBError, match="duplicates prb's --tensor-parallel-size"):   # the dialect's own arguments
        EngineConfig("standin", engine_args=("tp-size=2",))
    with pytest.raises(PRBError, match="SGLang stand-in reads hos as --host"):
        EngineConfig("standin", engine_args=("hos=0.0.0.0",))
    out = tmp_path / "store"
    args = ["score", "--data", "sample", "--limit", "1", "--model", f"implicit:{tiny_lm_dir}",
            "--model", f"judge:{tiny_lm_dir}", "--engine", "standin", "--device", "cpu", "--out", str(out),
            "--no-progress"]
    assert main(args) == 0, capsys.readouterr().err
    meta = load_run_metadata(out)
    assert set(meta["engine"]) == {"standin"} and meta["engine_launched"].all()
    assert set(meta["engine_dialect"]) == {STANDIN_RECORD.dialect}
    assert set(meta["engine_dtype"]) == {"float32"} and set(meta["dtype"]) == {"float32"}
    assert set(meta["device"]) == {"standin-server"}
    assert set(meta["engine_server_version"]) == {"standin-1"}   # read from /get_server_info, as the dialect says
    assert all("--dialect sglang" in " ".join(command) for command in meta["engine_launch_command"])
    asked = _asked(out)
    assert asked and {a["path"] for a in asked} == {"/generate"}
    bodies = [a["body"] for a in asked]
    assert all(isinstance(b.get("input_ids"), list) and "prompt" not in b for b in bodies)
    assert any("token_ids_logprob" in b for b in bodies) and any(b.get("logprob_start_len") == 0 for b in bodies)
    rows = load_results(out)
    implicit, judge = rows[rows["kind"] == "implicit"], rows[rows["kind"] == "judge"]
    assert len(implicit) == 3 and implicit[["score_chosen", "score_rejected"]].stack().between(-9.8, -0.1).all()
    assert len(judge) and judge[["score_chosen", "score_rejected"]].stack().between(0, 1).all()
    assert not rows["failed"].fillna(False).any()
    shutil.rmtree(out / "jobs")   # the scores are gone, the request cache is kept: nothing is asked again
    assert main(args) == 0
    capsys.readouterr()
    assert _asked(out) == asked
    again = load_results(out)
    columns, order = ["kind", "subset", "id", "score_chosen", "score_rejected"], ["kind", "subset", "id"]
    pd.testing.assert_frame_equal(again[columns].sort_values(order, ignore_index=True),
                                  rows[columns].sort_values(order, ignore_index=True))


def test_best_of_n_with_an_llm_judge_runs_on_the_second_dialect(standin_engine, tmp_path, tiny_lm_dir, capsys):
    """``prb bon`` on the SGLang-like engine: the policy samples ``n`` answers per question from one ``/generate``
    request each (seeded by ``sampling_seed``), an implicit RM scores them and the LLM rubric judge reads its digits'
    log-probs there too; ``run.json`` names the engine, its dialect and the dtype the server runs."""
    out = tmp_path / "bon-run"
    assert main(["bon", "--data", "sample", "--limit", "1", "--model", "length", "--model", f"implicit:{tiny_lm_dir}",
                 "--policy", str(tiny_lm_dir), "--n", "2", "--judge", f"llm:{tiny_lm_dir}", "--engine", "standin",
                 "--device", "cpu", "--results", str(out), "--no-progress"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    run = json.loads((out / "bon" / "run.json").read_text())
    assert (run["engine"], run["engine_dialect"], run["policy_dtype"]) == ("standin", STANDIN_RECORD.dialect, "float32")
    assert run["judge_placement"]["dtype"] == "float32"
    bodies = [a["body"] for a in _asked(out) if a["path"] == "/generate"]
    assert len(bodies) == len(_asked(out))
    sampled = [b for b in bodies if b["sampling_params"].get("n") == 2]
    assert sampled and all("sampling_seed" in b["sampling_params"] for b in sampled)
    assert any("token_ids_logprob" in b for b in bodies)   # the rubric judge's digits
    curves = pd.read_csv(out / "bon" / "curves.csv")
    assert {"length", f"implicit:{tiny_lm_dir}"} <= set(curves["model"]) and set(curves["k"]) == {1, 2}


def test_a_second_dialects_server_that_does_not_start_is_named_in_its_words(standin_engine, tmp_path, tiny_lm_dir,
                                                                           capsys):
    """The launcher's messages take the dialect's wording and read the server's log as the dialect reads it: an
    engine argument the stand-in does not know makes it exit at once, in one sentence naming the engine and the
    log's last lines."""
    out = tmp_path / "store"
    code = main(["score", "--data", "sample", "--limit", "1", "--model", f"implicit:{tiny_lm_dir}", "--engine",
                 "standin", "--engine-arg", "no-such-option=1", "--device", "cpu", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "The SGLang stand-in server for" in err[0] and "unrecognized arguments: --no-such-option 1" in err[0]
    (log,) = (out / "engine" / "logs").glob("standin-*.log")
    assert str(log) in err[0]


def _guide_section(title: str) -> str:
    text = (Path(__file__).resolve().parents[1] / "docs" / "contributing.md").read_text(encoding="utf-8")
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4}


def test_the_guides_engine_file_count_is_the_second_dialects():
    """docs/contributing.md says how many files a new engine is; the second dialect is that many: its module (which
    imports nothing of the serve wing but the contract) and the file of its record."""
    said = re.search(r"server engine is (\w+) files", _guide_section("A new engine"))
    assert said is not None
    tree = ast.parse(STANDIN_DIALECT.read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and str(node.module).startswith("prb_utils")}
    assert imported == {"prb_utils.models.serve.dialect"}
    files = {STANDIN_DIALECT, PACKAGE / "models" / "engines.py"}   # the module, and where its record goes
    assert NUMBERS[said.group(1)] == len(files)


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


def _names_a_kind_by_spelling(node: ast.AST, kinds: set[str]) -> bool:
    """A spec or a model built from a kind's name written out: ``ModelSpec("judge", ...)``, ``f"embedding:{x}"``,
    ``"embedding:" + x``."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
            "ModelSpec", "GivenSpec") and node.args:
        first = node.args[0]
        return isinstance(first, ast.Constant) and first.value in kinds
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value).partition(":")[0] in kinds and ":" in str(node.values[0].value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Constant):
        text = str(node.left.value)
        return ":" in text and text.partition(":")[0] in kinds
    return False


def _picks_a_kind_by_position(node: ast.AST) -> bool:
    """``kinds_of(...)[0]``: a kind chosen to stand for an architecture outside ``loader_kind``."""
    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", getattr(node.value.func, "attr", "")) == "kinds_of")


def test_no_code_builds_a_spec_from_a_kind_written_out():
    """A loader that needs "a causal LM" or "an encoder" asks the records (``spec_of(CAUSAL_LM, name)``,
    ``loader_kind(ENCODER)``), never writes a kind's name into a spec, an f-string or a concatenation, and never
    picks a kind by its position in ``kinds_of`` (one rule, ``loader_kind``, says which kind stands for it)."""
    kinds = set(MODEL_KINDS)
    found = [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}" for path, tree in _sources() for node in ast.walk(tree)
             if _names_a_kind_by_spelling(node, kinds)
             or (_picks_a_kind_by_position(node) and not str(path).endswith("models/kinds.py"))]
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
    from prb_utils.models.serve.client import RequestCache

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
