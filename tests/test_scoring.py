"""Scoring through the store: outcomes, cache hits, resume after a kill, failing adapters, concurrent runs.

The fake reward models here follow the adapter protocol (``spec``, ``kind``, ``score_pairs``,
``run_metadata``); the subprocess tests import this module to get them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from prb_utils import scoring
from prb_utils.errors import PRBError
from prb_utils.models import ModelOptions
from prb_utils.store import load_results, load_run_metadata

REPO = Path(__file__).resolve().parent.parent
N_PAIRS = 12


# ------------------------------------------------------------------------------------------ fixtures


def make_data(n: int = N_PAIRS) -> pd.DataFrame:
    """A tiny benchmark frame in the loader's shape (two subsets)."""
    records = []
    for i in range(n):
        records.append({
            "subset": "Alpha" if i % 2 == 0 else "Beta",
            "id": f"q{i:02d}",
            "question": f"How do I cook dish number {i} at home?",
            "profile": [
                {"id": f"p{i}a", "category": "cooking", "text": f"Which pan for dish {i}?"},
                {"id": f"p{i}b", "category": "travel", "text": "Cheap flights to Rome?"},
            ],
            "rubric_aspects": [{"aspect": "SECRET-ASPECT", "evidence": "", "reason": ""}],
            "narrative": "SECRET-NARRATIVE",
            "category": "cooking",
            "chosen": f"Use a cast iron pan and low heat for dish {i}.",
            "rejected": f"Any pan works for dish {i}." + " really" * (i % 3),
        })
    return pd.DataFrame(records)


@dataclass(frozen=True)
class StandInPairInput:
    """Stand-in for ``prb_utils.models.PairInput`` while that module is missing."""

    key: str
    prompt: str
    chosen: str
    rejected: str


@dataclass
class StandInPairScore:
    score_chosen: float
    score_rejected: float
    invalid_reason: str | None = None
    extra: dict = field(default_factory=dict)


def install_stand_ins() -> None:
    """Use the real PairInput/PairScore when ``prb_utils.models`` exists, stand-ins otherwise."""
    global PairScore
    try:
        from prb_utils.models import PairScore as real
    except ImportError:
        scoring._pair_input = StandInPairInput
        PairScore = StandInPairScore
    else:
        PairScore = real


PairScore = StandInPairScore
install_stand_ins()


def text_score(prompt: str, response: str) -> float:
    """A deterministic pseudo-score of a (prompt, response) pair."""
    return int(hashlib.sha256(f"{prompt}|{response}".encode()).hexdigest()[:8], 16) / 16**8


class FakeModel:
    """Deterministic scores from text; records which keys it scored; optional per-pair delay."""

    kind = "classifier"

    def __init__(self, spec: str = "classifier:fake", *, delay: float = 0.0, raise_on: tuple = (),
                 nan_on: tuple = (), interrupt_after_calls: int | None = None, gate: str | None = None) -> None:
        self.spec = spec
        self.gate = Path(gate) if gate else None
        self.delay = delay
        self.raise_on = set(raise_on)
        self.nan_on = set(nan_on)
        self.interrupt_after_calls = interrupt_after_calls
        self.calls: list[list[str]] = []

    def score_pairs(self, pairs):
        if self.interrupt_after_calls is not None and len(self.calls) >= self.interrupt_after_calls:
            raise KeyboardInterrupt
        while self.gate is not None and self.calls and not self.gate.exists():  # after the first chunk
            time.sleep(0.02)
        self.calls.append([p.key for p in pairs])
        bad = [p.key for p in pairs if p.key in self.raise_on]
        if bad:
            raise ValueError(f"boom on {bad[0]}")
        time.sleep(self.delay * len(pairs))
        out = []
        for p in pairs:
            chosen, rejected = text_score(p.prompt, p.chosen), text_score(p.prompt, p.rejected)
            if p.key in self.nan_on:
                chosen = math.nan if p.key.endswith("0") else math.inf
            out.append(PairScore(chosen, rejected))
        return out

    def run_metadata(self):
        return {"dtype": "float32", "device": "cpu", "chat_template_hash": "none", "name": "fake"}

    @property
    def scored(self) -> list[str]:
        return [key for call in self.calls for key in call]


class FakeJudge(FakeModel):
    kind = "judge"

    def score_pairs(self, pairs):
        self.calls.append([p.key for p in pairs])
        out = []
        for p in pairs:
            ab, ba = text_score(p.prompt, p.chosen), text_score(p.prompt, p.rejected)
            out.append(PairScore((ab + ba) / 2, 1 - (ab + ba) / 2, extra={
                "p_chosen_ab": ab, "p_chosen_ba": ba, "verdict_ab": "chosen" if ab > 0.5 else "rejected",
                "verdict_ba": "chosen" if ba > 0.5 else "rejected", "truncated": p.key.endswith("1")}))
        return out


def keys(frame: pd.DataFrame) -> list[str]:
    """``subset/id`` of each row, the adapter's pair key."""
    return (frame["subset"] + "/" + frame["id"]).tolist()


def run(data, models, profiles=("none",), *, out, retriever=None, chunk_size=None, progress=False, **options):
    """score_benchmark with the model options given as keywords (``device="cpu"``, ``seed=1``, ...)."""
    return scoring.score_benchmark(data, models, list(profiles), out=out, options=ModelOptions(**options),
                                   retriever=retriever, chunk_size=chunk_size, progress=progress)


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["job", "subset", "id"]).reset_index(drop=True)


# ------------------------------------------------------------------------------------------ outcomes


@pytest.mark.parametrize(
    ("chosen", "rejected", "reason", "expected"),
    [
        (0.7, 0.2, None, ("correct", None)),
        (0.2, 0.7, None, ("wrong", None)),
        (0.5, 0.5, None, ("tie", None)),
        (math.nan, 0.5, None, ("invalid", "non-finite score")),
        (0.5, math.inf, None, ("invalid", "non-finite score")),
        (-math.inf, -math.inf, None, ("invalid", "non-finite score")),
        (0.9, 0.1, "unparseable verdict", ("invalid", "unparseable verdict")),
        (None, 0.1, None, ("invalid", "non-numeric score")),
    ],
)
def test_outcome(chosen, rejected, reason, expected):
    assert scoring.outcome(chosen, rejected, reason) == expected


def test_scores_every_pair_with_the_contract_columns(tmp_path):
    data = make_data()
    model = FakeModel()
    results = run(data, [model], ["none", "top1"], out=tmp_path, chunk_size=5)
    assert len(results) == 2 * N_PAIRS
    assert results[["profile", "subset", "id"]].values.tolist() == [
        [p, *key.split("/")] for p in ("none", "top1") for key in keys(data)
    ]
    assert set(results["model"]) == {"classifier:fake"} and set(results["kind"]) == {"classifier"}
    assert set(results["category"]) == {"cooking"}
    first = results.iloc[0]
    assert first["score_chosen"] == text_score(data["question"][0], data["chosen"][0])
    expected = (results["score_chosen"] > results["score_rejected"]).map({True: "correct", False: "wrong"})
    assert results["outcome"].tolist() == expected.tolist()
    assert results["job"].nunique() == 2
    assert results["p_chosen_ab"].isna().all() and results["verdict_ab"].isna().all()
    assert len(model.scored) == 2 * N_PAIRS


def test_rm_never_sees_rubric_or_narrative_and_profile_reaches_it(tmp_path):
    model = FakeModel()
    seen = []
    original = model.score_pairs
    model.score_pairs = lambda pairs: (seen.extend(pairs), original(pairs))[1]
    run(make_data(4), [model], ["none", "full"], out=tmp_path)
    text = " ".join(p.prompt + p.chosen + p.rejected for p in seen)
    assert "SECRET" not in text
    assert sum("Which pan for dish" in p.prompt for p in seen) == 4


def test_non_finite_scores_become_invalid(tmp_path):
    model = FakeModel(nan_on=("Alpha/q00", "Beta/q01"))
    results = run(make_data(), [model], out=tmp_path).set_index("id")
    assert results.loc[["q00", "q01"], "outcome"].tolist() == ["invalid", "invalid"]
    assert results.loc[["q00", "q01"], "invalid_reason"].tolist() == ["non-finite score"] * 2
    assert math.isnan(results.loc["q00", "score_chosen"]) and math.isinf(results.loc["q01", "score_chosen"])
    assert (results.drop(["q00", "q01"])["outcome"] != "invalid").all()
    assert not results["failed"].any()


def test_judge_orders_travel_in_columns(tmp_path):
    results = run(make_data(), [FakeJudge("judge:fake")], out=tmp_path)
    assert results["p_chosen_ab"].notna().all() and results["p_chosen_ba"].notna().all()
    assert set(results["verdict_ab"]) <= {"chosen", "rejected"}
    assert results["truncated"].sum() == sum(i.endswith("1") for i in results["id"])
    meta = load_run_metadata(tmp_path).iloc[0]
    assert meta["n_truncated"] == results["truncated"].sum()


# ------------------------------------------------------------------------------------------ cache


def test_rerun_reads_from_the_store_and_scores_nothing(tmp_path):
    data = make_data()
    first = run(data, [FakeModel()], ["none", "top1"], out=tmp_path)
    again = FakeModel()
    second = run(data, [again], ["none", "top1"], out=tmp_path)
    assert again.calls == []
    pd.testing.assert_frame_equal(first, second)


def model_folder(root: Path, weights: bytes = b"w" * 8) -> Path:
    """A local model folder (its files' names, sizes and times are its fingerprint; nothing loads it)."""
    folder = root / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "fake"}', encoding="utf-8")
    (folder / "model.safetensors").write_bytes(weights)
    return folder


def loads_recorded(monkeypatch) -> list:
    """Record each model load as (spec, dtype) and hand back a FakeModel (the scorer's loader seam)."""
    loads = []

    def fake_load(spec, options):
        loads.append((spec, options.dtype))
        return FakeModel(spec)

    monkeypatch.setattr(scoring, "_load_model", fake_load)
    return loads


def test_a_cached_model_is_never_loaded(tmp_path, monkeypatch):
    loads = loads_recorded(monkeypatch)
    spec = f"classifier:{model_folder(tmp_path)}"
    data = make_data()
    first = run(data, [spec], ["none", "full"], out=tmp_path / "r")
    assert loads == [(spec, "auto")]  # loaded once for both profile conditions
    second = run(data, [spec], ["none", "full"], out=tmp_path / "r", device="cpu", batch_tokens=512)
    assert loads == [(spec, "auto")]  # on this CPU machine auto is the cpu device; batch size changes no score
    pd.testing.assert_frame_equal(first, second)
    run(data, [spec], ["none"], out=tmp_path / "r", seed=1)
    assert len(loads) == 2  # the seed does
    assert len(load_run_metadata(tmp_path / "r")) == 3


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="auto resolves to the GPU here")
def test_dtype_auto_on_cpu_is_the_float32_job_and_bfloat16_is_another(tmp_path, monkeypatch):
    loads = loads_recorded(monkeypatch)
    spec, data = f"classifier:{model_folder(tmp_path)}", make_data(4)
    run(data, [spec], out=tmp_path / "r", dtype="float32")
    run(data, [spec], out=tmp_path / "r", dtype="auto", device="auto")
    assert len(loads) == 1  # auto on a CPU is float32: the same job, read from the store
    run(data, [spec], out=tmp_path / "r", dtype="bfloat16")
    assert len(loads) == 2
    meta = load_run_metadata(tmp_path / "r").sort_values("option_dtype")
    assert meta["option_dtype"].tolist() == ["bfloat16", "float32"]
    assert meta["option_device"].tolist() == ["cpu", "cpu"]
    length = scoring.job_options("length", "none", ModelOptions(device="auto", dtype="bfloat16"))
    assert "dtype" not in length and "device" not in length  # baselines run no model


def test_rebuilding_a_local_models_weights_in_place_rescores(tmp_path, monkeypatch):
    loads = loads_recorded(monkeypatch)
    folder = model_folder(tmp_path)
    spec, data = f"classifier:{folder}", make_data(4)
    run(data, [spec], out=tmp_path / "r")
    run(data, [spec], out=tmp_path / "r")
    assert len(loads) == 1
    model_folder(tmp_path, weights=b"retrained weights")
    run(data, [spec], out=tmp_path / "r")
    assert len(loads) == 2  # new weights: a new job
    meta = load_run_metadata(tmp_path / "r")
    assert len(meta) == 2 and meta["fingerprint"].str.startswith("folder:").all()
    assert meta["fingerprint"].nunique() == 2


def test_a_repeated_model_spec_is_scored_and_counted_once(tmp_path):
    results = run(make_data(4), ["length", "LENGTH", " length "], out=tmp_path)
    assert len(results) == 4 and set(results["model"]) == {"length"}


def test_a_judge_template_given_as_long_text_is_hashed_not_opened(tmp_path):
    text = "Question: {question}\nA: {response_a}\nB: {response_b}\n" + "Be careful. " * 2000
    assert scoring._template_id(text) == scoring._template_id(text)
    with pytest.raises(PRBError, match="neither a template name"):  # a name too long for the file system
        scoring._template_id("x" * 5000)
    path = tmp_path / "template.txt"
    path.write_text(text, encoding="utf-8")
    assert scoring._template_id(str(path)) == scoring._template_id(text)


def test_a_named_judge_template_is_keyed_by_its_wording(monkeypatch):
    from prb_utils.models import prompts

    assert scoring._template_id(None) == scoring._template_id("default")  # None is the default template
    assert scoring._template_id("reference") != scoring._template_id("default")
    before = scoring._template_id("reference")
    reworded = prompts.JudgeTemplate(prompts.REFERENCE_USER + " Be brief.", prompts.REFERENCE_SYSTEM, "reference")
    monkeypatch.setitem(prompts.JUDGE_TEMPLATES, "reference", reworded)
    assert scoring._template_id("reference") != before  # a new prb wording is a new job


def test_a_baseline_is_keyed_by_its_method_version(monkeypatch):
    from prb_utils.models import baselines, fingerprint

    assert fingerprint.model_fingerprint("lexical") == baselines.LexicalBaseline.method
    before = fingerprint.model_fingerprint("lexical")
    monkeypatch.setattr(baselines.LexicalBaseline, "method", "lexical:changed")
    assert fingerprint.model_fingerprint("lexical") != before


def test_an_edited_category_is_stale_and_rescored(tmp_path):
    data = make_data(4)
    run(data, ["length"], out=tmp_path)
    edited = data.assign(category=["law", "cooking", "cooking", "cooking"])
    results = run(edited, ["length"], out=tmp_path)
    assert results.set_index("id").loc["q00", "category"] == "law"
    assert load_results(tmp_path).set_index("id").loc["q00", "category"] == "law"


class PartEater(FakeModel):
    """Deletes the job's first part file while the job runs (a sync tool, a user's rm)."""

    def __init__(self, out: Path, **options) -> None:
        super().__init__(**options)
        self.out = out

    def score_pairs(self, pairs):
        if len(self.calls) == 2:
            first = sorted(Path(self.out, "jobs").glob("*/part-*.parquet"))[0]
            first.unlink()
        return super().score_pairs(pairs)


def test_a_part_file_gone_while_the_job_runs_fails_the_run_and_the_rerun_rescores(tmp_path):
    data, eater, again = make_data(), PartEater(tmp_path), FakeModel()
    eater.fingerprint = again.fingerprint = "fake weights v1"  # one model, one job
    with pytest.raises(PRBError, match=rf"holds {N_PAIRS - 4} of its {N_PAIRS} pairs"):
        run(data, [eater], out=tmp_path, chunk_size=4)
    assert not load_run_metadata(tmp_path)["finished"].iloc[0]  # never marked finished
    results = run(data, [again], out=tmp_path, chunk_size=4)
    assert len(results) == N_PAIRS and len(again.scored) == 4  # exactly the lost pairs, scored again


def test_more_pairs_later_scores_only_the_new_ones(tmp_path):
    data = make_data()
    run(data.iloc[:5], [FakeModel()], out=tmp_path)
    model = FakeModel()
    results = run(data, [model], out=tmp_path)
    assert sorted(model.scored) == sorted(keys(data.iloc[5:]))
    assert len(results) == N_PAIRS and len(load_results(tmp_path)) == N_PAIRS
    meta = load_run_metadata(tmp_path).iloc[0]
    assert (meta["n_scored"], meta["n_rows"], meta["n_pairs"], meta["name"]) == (N_PAIRS - 5, N_PAIRS, N_PAIRS, "fake")


def test_an_edited_record_is_scored_again_and_replaces_the_old_row(tmp_path):
    data = make_data()
    run(data, [FakeModel()], out=tmp_path)
    edited = data.copy()
    edited.loc[3, "chosen"] = "A completely different answer."
    model = FakeModel()
    results = run(edited, [model], out=tmp_path)
    assert model.scored == ["Beta/q03"]
    stored = load_results(tmp_path)
    assert len(stored) == N_PAIRS
    expected = text_score(data["question"][3], "A completely different answer.")
    assert stored.set_index("id").loc["q03", "score_chosen"] == expected
    assert results.set_index("id").loc["q03", "score_chosen"] == expected


# ------------------------------------------------------------------------------------------ failures


def test_an_unknown_spec_fails_before_anything_is_scored(tmp_path):
    model = FakeModel()
    with pytest.raises(PRBError, match="Unknown model kind"):
        run(make_data(), [model, "bogus:thing"], out=tmp_path)
    assert model.calls == [] and load_results(tmp_path).empty


def test_chunks_grow_or_shrink_toward_a_few_seconds():
    target = scoring.TARGET_CHUNK_SECONDS
    assert scoring._next_chunk_size(16, target, 16) == 16  # on target: keep
    assert scoring._next_chunk_size(16, target / 2, 16) == 32
    assert scoring._next_chunk_size(16, target / 100, 16) == 16 * scoring.CHUNK_GROWTH  # fast: grow, bounded
    assert scoring._next_chunk_size(64, target * 1000, 64) == scoring.MIN_CHUNK  # slow: shrink to the floor
    assert scoring._next_chunk_size(1024, 0.001, 1024) == scoring.MAX_CHUNK
    assert scoring._next_chunk_size(64, target * 1000, 64, floor=16) == 16  # a model's own floor


def test_a_model_that_fills_a_batch_with_more_pairs_keeps_its_chunks_that_large():
    """An embedding RM's chunks hold at least the pairs whose cut RM inputs fill one batch (4096 // 256 = 16);
    other models keep the default floor."""
    from types import SimpleNamespace

    from prb_utils.models.embedding import EmbeddingRM

    rm = SimpleNamespace(batch_tokens=4096, max_length=256)
    assert EmbeddingRM.min_chunk.fget(rm) == 16
    assert scoring._min_chunk(SimpleNamespace(min_chunk=16)) == 16
    assert scoring._min_chunk(object()) == scoring._min_chunk(None) == scoring.MIN_CHUNK


def test_an_adapter_error_marks_only_the_failing_pair_invalid(tmp_path):
    data = make_data()
    model = FakeModel(raise_on=("Alpha/q04",))
    results = run(data, [model], out=tmp_path, chunk_size=4).set_index("id")
    bad = results.loc["q04"]
    assert (bad["outcome"], bad["invalid_reason"], bool(bad["failed"])) == ("invalid", "ValueError: boom on Alpha/q04", True)
    good = results.drop("q04")
    assert (good["outcome"] != "invalid").all() and good["score_chosen"].notna().all()
    assert model.calls[1] == ["Alpha/q04", "Beta/q05", "Alpha/q06", "Beta/q07"]  # the chunk, then pair by pair
    assert model.calls[2:6] == [["Alpha/q04"], ["Beta/q05"], ["Alpha/q06"], ["Beta/q07"]]
    # the next run tries only the failed pair again
    fixed = FakeModel()
    again = run(data, [fixed], out=tmp_path).set_index("id")
    assert fixed.scored == ["Alpha/q04"]
    assert again.loc["q04", "outcome"] in {"correct", "wrong"} and not again["failed"].any()


def test_failed_rows_are_kept_when_a_failure_streak_stops_the_run(tmp_path):
    data = make_data()
    model = FakeModel(raise_on=tuple(keys(data.iloc[2:])))
    with pytest.raises(ValueError, match="boom"):
        run(data, [model], out=tmp_path, chunk_size=3)
    stored = load_results(tmp_path).set_index("id")
    # chunks [0-2] (one failure) and [3-5], [6-8] (all failing): the streak reaches 1 + 3 + 3 = 7 < 8 ...
    # ... so chunk [9-11] runs too and the 8th consecutive failure stops the run after writing it
    assert len(stored) == N_PAIRS
    assert stored["failed"].tolist() == [False, False] + [True] * (N_PAIRS - 2)
    fixed = FakeModel()
    run(data, [fixed], out=tmp_path, chunk_size=3)
    assert sorted(fixed.scored) == sorted(keys(data.iloc[2:]))


def test_a_model_that_breaks_stops_before_scoring_everything(tmp_path):
    data = make_data(30)
    model = FakeModel(raise_on=tuple(keys(data.iloc[4:])))
    with pytest.raises(ValueError, match="boom"):
        run(data, [model], out=tmp_path, chunk_size=4)
    stored = load_results(tmp_path)
    assert len(stored) == 4 + scoring.ABORT_AFTER_FAILURES
    assert (~stored["failed"]).sum() == 4


def test_a_complete_job_killed_before_its_final_metadata_is_finished_without_loading_the_model(tmp_path,
                                                                                              monkeypatch):
    """Killed during compaction (after the last part, before ``finished``): the resume scores nothing and
    loads nothing, but cleans the temporary file, compacts, recounts truncations from the rows, finishes."""
    data = make_data()
    real_compact = scoring.JobStore.compact

    def killed(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(scoring.JobStore, "compact", killed)
    monkeypatch.setattr(scoring, "_fingerprint", lambda spec: "fake judge v1")  # the spec "judge:fake" names it
    judge = FakeJudge("judge:fake")
    judge.fingerprint = "fake judge v1"
    with pytest.raises(KeyboardInterrupt):
        run(data, [judge], out=tmp_path, chunk_size=4)
    monkeypatch.setattr(scoring.JobStore, "compact", real_compact)
    job = next((tmp_path / "jobs").iterdir())
    (job / ".part-00099.parquet.abc.tmp").write_bytes(b"half a file")
    (before,) = load_run_metadata(tmp_path).to_dict("records")
    assert before["finished"] is None and "n_truncated" not in before and before["n_rows"] == N_PAIRS

    monkeypatch.setattr(scoring, "_load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    rows = run(data, ["judge:fake"], out=tmp_path)
    assert len(rows) == N_PAIRS
    (after,) = load_run_metadata(tmp_path).to_dict("records")
    assert after["finished"] and after["n_truncated"] == int(rows["truncated"].sum()) > 0
    assert after["n_failed"] == 0 and after["dtype"] == "float32"  # the scoring run's metadata is kept
    assert not list(job.glob(".*.tmp")) and len(list(job.glob("part-*.parquet"))) == 1

    (job / "job.json").unlink()  # a damaged job.json deleted as its message says: written again
    run(data, ["judge:fake"], out=tmp_path)
    (again,) = load_run_metadata(tmp_path).to_dict("records")
    assert again["finished"] and again["n_truncated"] == after["n_truncated"] and again["n_rows"] == N_PAIRS


def test_ctrl_c_keeps_finished_chunks_and_the_rerun_completes(tmp_path):
    data = make_data()
    with pytest.raises(KeyboardInterrupt):
        run(data, [FakeModel(interrupt_after_calls=2)], out=tmp_path / "a", chunk_size=3)
    assert len(load_results(tmp_path / "a")) == 6
    resumed = FakeModel()
    run(data, [resumed], out=tmp_path / "a", chunk_size=3)
    assert len(resumed.scored) == N_PAIRS - 6
    run(data, [FakeModel()], out=tmp_path / "b", chunk_size=3)
    pd.testing.assert_frame_equal(comparable(load_results(tmp_path / "a")), comparable(load_results(tmp_path / "b")))


def test_progress_bar_reports_pairs_per_second(tmp_path, capsys):
    run(make_data(4), [FakeModel()], out=tmp_path, progress=True)
    assert "pairs/s" in capsys.readouterr().err
    run(make_data(4), [FakeModel()], out=tmp_path, progress=True)
    assert "classifier:fake [none]: 4 pairs read from the store" in capsys.readouterr().err
    run(make_data(4), [FakeModel()], out=tmp_path / "quiet", progress=False)
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------------------------------ processes

SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
import test_scoring as t
from prb_utils.scoring import score_benchmark
out, profiles, delay, gate = sys.argv[1], sys.argv[2].split(","), float(sys.argv[3]), sys.argv[4]
model = t.FakeModel(delay=delay, gate=gate or None)
score_benchmark(t.make_data(), [model], profiles, out=out, progress=True, chunk_size=2)
print(json.dumps(model.scored))
"""


def start(tmp_path: Path, out: Path, profiles: str, *, delay: float = 0.0, gate: Path | None = None):
    """Run the scoring script in a new process; its stderr goes to a file that the test can poll."""
    script = tmp_path / "score.py"
    script.write_text(SCRIPT.format(tests=str(Path(__file__).parent)))
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    err = tmp_path / f"stderr-{time.monotonic_ns()}.txt"
    process = subprocess.Popen([sys.executable, str(script), str(out), profiles, str(delay), str(gate or "")],
                               cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=err.open("w"), text=True)
    process.err_path = err
    return process


def finish(process: subprocess.Popen) -> list[str]:
    stdout, _ = process.communicate(timeout=120)
    assert process.returncode == 0, process.err_path.read_text()
    return json.loads(stdout.strip().splitlines()[-1])


def wait_until(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def n_parts(folder: Path) -> int:
    return len(list(folder.glob("jobs/*/part-*.parquet")))


def test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path):
    killed = tmp_path / "killed"
    process = start(tmp_path, killed, "none", delay=0.2)
    wait_until(lambda: n_parts(killed) >= 2, "two part files")
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    kept = load_results(killed)
    assert 4 <= len(kept) < N_PAIRS
    resumed = FakeModel()
    run(make_data(), [resumed], out=killed, chunk_size=2)
    assert sorted(resumed.scored + keys(kept)) == sorted(keys(make_data()))
    run(make_data(), [FakeModel()], out=tmp_path / "clean", chunk_size=2)
    resumed_rows, clean_rows = comparable(load_results(killed)), comparable(load_results(tmp_path / "clean"))
    assert len(resumed_rows) == N_PAIRS and not resumed_rows.duplicated(["subset", "id"]).any()
    pd.testing.assert_frame_equal(resumed_rows, clean_rows)
    assert not list(killed.glob("jobs/*/.*.tmp"))


def test_two_processes_on_the_same_job_score_each_pair_once(tmp_path):
    out, gate = tmp_path / "store", tmp_path / "gate"
    first = start(tmp_path, out, "none", gate=gate)  # holds the job after its first chunk until the gate opens
    wait_until(lambda: n_parts(out) >= 1, "the first chunk")
    second = start(tmp_path, out, "none")
    wait_until(lambda: "Waiting for another process" in second.err_path.read_text(), "the second to wait")
    gate.touch()
    first_scored, second_scored = finish(first), finish(second)
    assert sorted(first_scored) == sorted(keys(make_data()))
    assert second_scored == []  # it waited for the lock, then found every pair done
    rows = load_results(out)
    assert len(rows) == N_PAIRS and not rows.duplicated(["subset", "id"]).any()
    assert rows["score_chosen"].notna().all()


def test_two_processes_on_different_jobs_of_one_store(tmp_path):
    out, gate = tmp_path / "store", tmp_path / "gate"
    first = start(tmp_path, out, "none", gate=gate)
    wait_until(lambda: n_parts(out) >= 1, "the first chunk")
    second = start(tmp_path, out, "full")
    assert len(finish(second)) == N_PAIRS  # finishes while the first still holds its own job
    assert first.poll() is None
    gate.touch()
    assert len(finish(first)) == N_PAIRS
    rows = load_results(out)
    assert rows.groupby("profile").size().to_dict() == {"full": N_PAIRS, "none": N_PAIRS}
    meta = load_run_metadata(out)
    assert len(meta) == 2 and meta["finished"].notna().all()


# ------------------------------------------------------------------------------------------ real baselines


def test_real_baselines_through_load_model(tmp_path):
    data = make_data()
    first = run(data, ["length", "lexical"], ["none", "top1"], out=tmp_path)
    assert len(first) == 4 * N_PAIRS
    assert set(first["kind"]) == {"length", "lexical"}
    length = first[(first["model"] == "length") & (first["profile"] == "none")]
    longer = data["chosen"].str.len() > data["rejected"].str.len()
    assert (length["outcome"] == "correct").tolist() == longer.tolist()
    second = run(data, ["length", "lexical"], ["none", "top1"], out=tmp_path)
    pd.testing.assert_frame_equal(first, second)


def test_random_retrieval_follows_the_seed_and_only_top_k_carries_a_retriever():
    top = scoring.job_options("length", "top2", ModelOptions(seed=1), retriever="random")
    assert top["retriever"] == "random" and top["retriever_seed"] == 1
    assert scoring.job_options("length", "top2", ModelOptions(seed=2), retriever="random") != top
    assert "retriever_seed" not in scoring.job_options("length", "top2", ModelOptions(seed=0), retriever="random")
    assert "retriever_seed" not in scoring.job_options("length", "top2", ModelOptions(seed=1), retriever="bm25")
    for condition in ("none", "full", "rubric"):
        assert "retriever" not in scoring.job_options("length", condition, retriever="random")
    posts = [f"post number {i}" for i in range(12)]
    from prb_utils.retrieval import retriever_from_label, retriever_label

    def picker(seed):
        return retriever_from_label(retriever_label("random", seed))

    picks = {seed: picker(seed)("question", posts, 3) for seed in (1, 2, 1)}
    assert picks[1] == picker(1)("question", posts, 3) and picks[1] != picks[2]


# ------------------------------------------------------------------------------------------ host work ahead


class SplitModel(FakeModel):
    """A fake with the adapters' two halves: ``prepare`` (host) and ``run`` (device). ``run`` of the first
    chunk waits until the second chunk is prepared, which happens only if preparing runs ahead."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        import threading

        self.second_prepared = threading.Event()
        self.prepared_in: list[str] = []
        self.waited: list[bool] = []

    def prepare(self, pairs):
        import threading

        self.prepared_in.append(threading.current_thread().name)
        if len(self.prepared_in) == 2:
            self.second_prepared.set()
        return list(pairs)

    def run(self, pairs):
        if not self.waited:
            self.waited.append(self.second_prepared.wait(timeout=60))   # a guard against a hang, never a timing
        return self.score_pairs(pairs)


def test_the_next_chunk_is_prepared_in_another_thread_while_this_one_runs(tmp_path):
    data = make_data()
    model = SplitModel()
    results = run(data, [model], ["top1"], out=tmp_path, chunk_size=3)
    assert model.waited == [True]   # chunk 2 was prepared while chunk 1 ran
    assert len(model.prepared_in) == N_PAIRS // 3
    assert all(name.startswith("prb-prepare") for name in model.prepared_in)
    plain = run(data, [FakeModel()], ["top1"], out=tmp_path / "plain", chunk_size=5)
    assert results.drop(columns="job").equals(plain.drop(columns="job"))   # the same rows as scored whole


def test_a_fresh_job_builds_its_rm_inputs_beside_the_device_not_before_it(tmp_path, monkeypatch):
    """Retrieval (top{K}) for pairs without a stored row runs in the preparing thread, chunk by chunk."""
    import threading

    built_in: list[str] = []
    real = scoring._user_message

    def recording(*args, **kwargs):
        built_in.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(scoring, "_user_message", recording)
    run(make_data(), [SplitModel()], ["top1"], out=tmp_path, chunk_size=4)
    assert len(built_in) == N_PAIRS and all(name.startswith("prb-prepare") for name in built_in)
    built_in.clear()
    run(make_data(), [SplitModel()], ["top1"], out=tmp_path, chunk_size=4)   # stored: built once, to check hashes
    assert len(built_in) == N_PAIRS and set(built_in) == {threading.main_thread().name}


def test_a_subset_named_with_a_slash_scores_and_finishes_like_any_other(tmp_path):
    """Pair keys are compared whole: a subset "Art/Film" never looks like a part file that disappeared."""
    data = make_data().assign(subset=lambda d: d["subset"].map({"Alpha": "Art/Film", "Beta": "Beta"}))
    first = run(data, [FakeModel()], ["none"], out=tmp_path, chunk_size=5)
    again = run(data, [FakeModel()], ["none"], out=tmp_path)
    assert len(first) == N_PAIRS and first.drop(columns="job").equals(again.drop(columns="job"))
    assert load_run_metadata(tmp_path)["finished"].notna().all()


def test_every_adapter_with_two_halves_scores_its_chunks_whole(tmp_path, tiny_bert_dir, tiny_classifier_dir):
    """The scorer calls prepare then run for each chunk; no adapter falls back to one pair at a time."""
    from prb_utils.models import load_model

    for spec in (f"embedding:{tiny_bert_dir}", f"classifier:{tiny_classifier_dir}"):
        model = load_model(spec, device="cpu")
        sizes = []
        real = model.run
        model.run = lambda prepared, real=real, sizes=sizes: sizes.append(len(prepared.sequences if hasattr(prepared, "sequences")
                                                                 else prepared)) or real(prepared)
        run(make_data(), [model], ["top1"], out=tmp_path / spec.split(":")[0], chunk_size=4)
        assert sizes == [4, 4, 4], spec


def test_each_job_counts_its_own_pairs_and_tokens_not_its_models_earlier_conditions(tmp_path, tiny_lm_dir, capsys):
    """#35 item 5. Before: the adapter's counters ran on over the model's conditions, so the second job of
    `prb score --profile none --profile top1` recorded 84 pairs scored on the 42-pair sample."""
    from prb_utils.cli import main

    def runs(out: Path, *profiles: str) -> dict[str, dict]:
        args = ["score", "--data", "sample", "--model", f"implicit:{tiny_lm_dir}", "--device", "cpu", "--out", str(out),
                "--no-progress", *[a for p in profiles for a in ("--profile", p)]]
        assert main(args) == 0, capsys.readouterr().err
        metas = [json.loads(p.read_text()) for p in out.glob("jobs/*/job.json")]
        return {m["profile"]: m["run"] for m in metas}

    both, alone = runs(tmp_path / "both", "none", "top1"), runs(tmp_path / "alone", "top1")
    assert [both[c]["n_pairs_scored"] for c in ("none", "top1")] == [42, 42]
    assert both["top1"]["tokens_computed"] == alone["top1"]["tokens_computed"] > 0
    assert both["none"]["tokens_computed"] < both["top1"]["tokens_computed"]   # top1 shows a post: more tokens
