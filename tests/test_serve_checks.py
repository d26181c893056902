"""The serve wing's checks fail closed (#50 items 2-3), against the stand-in OpenAI-compatible server served from a
thread of the test (tests/standin_server.py: numbers from the token ids alone, no model), so they run in seconds:
a retest sends requests of its own, a probe request that fails is retried and never lets two servers mix, and a
server's context, dtype and identity are recorded and compared before a job's rows are reused."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from standin_server import StandIn

from prb_utils.cli import main
from prb_utils.models.serve import client as client_module
from prb_utils.store import load_results


def _args(model: str, out: Path, *urls: str, extra: tuple[str, ...] = ()) -> list[str]:
    return ["score", "--data", "sample", "--limit", "1", "--model", f"implicit:{model}", "--engine", "vllm",
            *[a for url in urls for a in ("--engine-url", url)], "--out", str(out), "--no-progress", *extra]


def _runs(out: Path) -> dict[str, dict]:
    """Each job's run metadata, by its profile condition."""
    found = [json.loads(p.read_text()) for p in (out / "jobs").glob("*/job.json")]
    return {meta["profile"]: meta["run"] for meta in found}


def _one_sentence(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def servers():
    started: list[StandIn] = []

    def start(model: Path, **options) -> StandIn:
        started.append(StandIn(str(model), **options))
        return started[-1]

    yield start
    for server in started:
        server.close()


def test_a_retest_on_a_server_sends_its_own_requests_and_records_its_batch_share(servers, tmp_path, tiny_lm_dir,
                                                                                capsys):
    """#50 item 2. Before: the retest job sent 0 requests and read all of them from the request cache the base job
    had written, so its check held by construction, and its batch_share was not recorded."""
    server = servers(tiny_lm_dir)
    out = tmp_path / "store"
    args = _args(tiny_lm_dir, out, server.url, extra=("--profile", "none", "--profile", "none+retest",
                                                      "--engine-concurrency", "2"))
    assert main(args) == 0, capsys.readouterr().err
    runs = _runs(out)
    base, retest = runs["none"], runs["none+retest"]
    assert base["engine_requests_sent"] == retest["engine_requests_sent"] == 6   # 3 pairs, 2 answers each
    assert retest["engine_requests_cached"] == 0
    assert retest["batch_share"] == 0.5 and retest["engine_concurrency"] == 1 and base["engine_concurrency"] == 2
    prompts = Counter(json.dumps(body["prompt"]) for body in server.bodies)
    assert len(server.bodies) == 12 and set(prompts.values()) == {2}   # each prompt asked once by each job
    rows = load_results(out)
    assert len(rows) == 6 and not rows["failed"].any()


def test_a_probe_request_failing_once_is_retried_and_the_tilted_server_refused(servers, tmp_path, tiny_lm_dir,
                                                                              capsys):
    """#50 item 3. Before: one HTTP 503 on the request that compares the servers skipped the check, and the job
    mixed a good server and one whose log-probabilities are tilted under one key (exit 0)."""
    good, tilted = servers(tiny_lm_dir, fail=1), servers(tiny_lm_dir, tilt=1.5)
    out = tmp_path / "store"
    line = _one_sentence(capsys, _args(tiny_lm_dir, out, good.url, tilted.url))
    assert f"The servers at {good.url} and {tilted.url} answer the same request with other numbers" in line, line
    assert good.failed == 1 and not list(out.glob("jobs/*/part-*"))


def test_servers_that_cannot_be_compared_are_never_mixed(servers, tmp_path, tiny_lm_dir, capsys, monkeypatch):
    """#50 item 3. Before: a server whose probe request kept failing (here its first five requests: every attempt
    of the probe) was never compared, and the run went on sharing the job with it (exit 0)."""
    monkeypatch.setattr(client_module, "BACKOFF_S", 0.01, raising=False)   # the retries quick
    flaky = servers(tiny_lm_dir, fail=5)
    other = servers(tiny_lm_dir)
    out = tmp_path / "store"
    line = _one_sentence(capsys, _args(tiny_lm_dir, out, other.url, flaky.url))
    assert f"could not be compared: the request that checks they run the model alike failed at {flaky.url}" in line
    assert "give one --engine-url" in line and not list(out.glob("jobs/*/part-*"))


def test_the_dtype_recorded_is_the_one_the_server_reports(servers, tmp_path, tiny_lm_dir, capsys):
    """#50 item 3. Before: a server that reports bfloat16 (/server_info) was recorded as running the dtype asked
    for, and --dtype float32 was accepted against it."""
    server = servers(tiny_lm_dir, dtype="bfloat16")
    assert main(_args(tiny_lm_dir, tmp_path / "auto", server.url)) == 0, capsys.readouterr().err
    (run,) = _runs(tmp_path / "auto").values()
    assert run["dtype"] == run["engine_dtype"] == "bfloat16"
    assert run["engine_model_root"] == str(tiny_lm_dir) and run["engine_max_model_len"] == 2048
    line = _one_sentence(capsys, _args(tiny_lm_dir, tmp_path / "f32", server.url, extra=("--dtype", "float32")))
    assert f"The server at {server.url} runs the model in bfloat16" in line and "--dtype float32" in line, line


@pytest.mark.parametrize(("first", "then", "said"), [
    ({"max_model_len": 512}, {"max_model_len": 8192}, "max model length 512, but the server at {url} has 8192"),
    ({"dtype": "float32"}, {"dtype": "bfloat16"}, "dtype float32, but the server at {url} has bfloat16"),
])
def test_a_jobs_rows_are_not_reused_against_another_server(servers, tmp_path, tiny_lm_dir, capsys, first, then,
                                                           said):
    """#50 item 3. Before: rows cut to a 512-token server (or scored in float32) were read back as the job's against
    an 8,192-token (or bfloat16) server under the same key, exit 0."""
    out = tmp_path / "store"
    before = servers(tiny_lm_dir, **first)
    assert main(_args(tiny_lm_dir, out, before.url)) == 0, capsys.readouterr().err
    after = servers(tiny_lm_dir, **then)
    line = _one_sentence(capsys, _args(tiny_lm_dir, out, after.url))
    assert said.format(url=after.url) in line and "prb does not reuse its rows against another server" in line, line
    assert after.bodies == []   # nothing scored either
    assert main(_args(tiny_lm_dir, out, before.url)) == 0   # the server it came from reads it back
