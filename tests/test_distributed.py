"""Data-parallel scoring under ``torchrun`` (two CPU ranks, the gloo backend, real processes): the store ends
with exactly the rows of a one-process run, each pair scored once, another run holding a job keeps the ranks
waiting, and a killed rank's pairs are scored by the next run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from filelock import FileLock

from prb_utils.cli import main
from prb_utils.distributed import KILL_RANK_ENV, World, world
from prb_utils.store import JOB_FILE, JOBS_DIR, load_results

REPO = Path(__file__).resolve().parent.parent
SAMPLE = str(REPO / "data" / "sample")
N_SAMPLE = 42   # pairs in data/sample
COMPARED = ["model", "kind", "profile", "subset", "category", "id", "outcome", "invalid_reason", "truncated",
            "failed", "pair_hash", "job"]


def torchrun_command(out: Path, models: list[str], profiles: list[str]) -> list[str]:
    """``torchrun --standalone --nproc-per-node 2 -m prb_utils score ...`` on the sample, as a user runs it."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "-m", "prb_utils", "score", "--data", SAMPLE, "--out", str(out), "--device", "cpu"]
    return command + [a for m in models for a in ("--model", m)] + [a for p in profiles for a in ("--profile", p)]


def torchrun_env(**extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    return {**environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", **extra}


def torchrun(out: Path, models: list[str], profiles: list[str], *, env: dict[str, str] | None = None):
    return subprocess.run(torchrun_command(out, models, profiles), cwd=REPO, env=torchrun_env(**(env or {})),
                          capture_output=True, text=True, timeout=240)


def wait_until(condition, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def one_process(out: Path, models: list[str], profiles: list[str]) -> None:
    args = ["score", "--data", SAMPLE, "--out", str(out), "--device", "cpu", "--no-progress"]
    args += [a for m in models for a in ("--model", m)] + [a for p in profiles for a in ("--profile", p)]
    assert main(args) == 0


def comparable(out: Path) -> pd.DataFrame:
    rows = load_results(out, strict=True)
    return rows.sort_values(["job", "subset", "id"]).reset_index(drop=True)


def assert_same_rows(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert len(got) == len(want) and not got.duplicated(["job", "subset", "id"]).any()
    pd.testing.assert_frame_equal(got[COMPARED], want[COMPARED])
    for column in ("score_chosen", "score_rejected"):
        assert got[column].to_numpy() == pytest.approx(want[column].to_numpy(), rel=1e-5, abs=1e-6, nan_ok=True)


def job_metas(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / JOBS_DIR).glob(f"*/{JOB_FILE}"))]


def test_world_comes_from_torchruns_environment_and_shares_cover_every_pair_once():
    assert world({}) == World()
    keys = [f"s/{i}" for i in range(11)]
    shares = World(size=3).shares(keys)
    assert sorted(k for share in shares for k in share) == sorted(keys)
    assert [len(s) for s in shares] == [4, 4, 3]
    assert [World(rank=r, size=3).share(keys) for r in range(3)] == shares
    assert world({"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"}).share(keys) == keys[1::2]


def test_a_server_engine_under_torchrun_is_refused_in_one_sentence(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    code = main(["score", "--data", SAMPLE, "--limit", "1", "--model", "judge:smollm2", "--engine", "vllm",
                 "--engine-url", "http://127.0.0.1:9", "--out", str(tmp_path / "r"), "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "without torchrun" in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_two_ranks_store_exactly_the_rows_of_one_process(tmp_path, tiny_classifier_dir):
    models, profiles = ["length", f"classifier:{tiny_classifier_dir}"], ["none", "top1"]
    one_process(tmp_path / "one", models, profiles)
    first_job = next(m["key"] for m in job_metas(tmp_path / "one") if (m["model"], m["profile"]) == ("length", "none"))
    lock = FileLock(str(tmp_path / "two" / JOBS_DIR / first_job / ".lock"))   # another run holds the first job
    (tmp_path / "two" / JOBS_DIR / first_job).mkdir(parents=True)
    lock.acquire()
    err = tmp_path / "stderr.txt"
    with err.open("w") as err_file:
        process = subprocess.Popen(torchrun_command(tmp_path / "two", models, profiles), cwd=REPO,
                                   env=torchrun_env(), stdout=subprocess.PIPE, stderr=err_file, text=True)
        try:
            wait_until(lambda: "Waiting for another process" in err.read_text(), "the ranks to wait for the lock")
            assert not list((tmp_path / "two").glob("jobs/*/part-*"))   # no rank writes while the lock is taken
        finally:
            lock.release()
        stdout, _ = process.communicate(timeout=240)
    assert process.returncode == 0, err.read_text()[-3000:]
    assert err.read_text().count("Waiting for another process") == 1   # rank 0 alone waits, and says so
    assert_same_rows(comparable(tmp_path / "two"), comparable(tmp_path / "one"))
    assert stdout.count("accuracy") == 1   # the table is printed once, by rank 0
    metas = job_metas(tmp_path / "two")
    assert len(metas) == 4
    for meta in metas:
        run = meta["run"]
        assert meta["finished"] and run["world_size"] == 2 and run["n_scored"] == N_SAMPLE
        first, second = run["rank_pairs"]
        assert abs(len(first) - len(second)) <= 1 and not set(first) & set(second)
        assert sorted(first + second) == sorted(meta["pairs"])
    assert all("world_size" not in meta["run"] for meta in job_metas(tmp_path / "one"))


@pytest.mark.slow
def test_a_killed_rank_leaves_its_pairs_to_the_next_run_which_ends_with_the_one_process_rows(tmp_path):
    out = tmp_path / "two"
    killed = torchrun(out, ["length"], ["none"], env={KILL_RANK_ENV: "1"})
    assert killed.returncode != 0
    job = next((out / JOBS_DIR).iterdir())
    assert list(job.glob("part-*-r1.parquet"))   # rank 1 wrote its first part, then died
    assert not json.loads((job / JOB_FILE).read_text()).get("finished")
    kept = set(load_results(out)["subset"] + "/" + load_results(out)["id"])
    assert 0 < len(kept) < N_SAMPLE
    resumed = torchrun(out, ["length"], ["none"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    one_process(tmp_path / "one", ["length"], ["none"])
    assert_same_rows(comparable(out), comparable(tmp_path / "one"))
    (meta,) = job_metas(out)
    scored = [key for share in meta["run"]["rank_pairs"] for key in share]
    assert len(scored) == meta["run"]["n_scored"] == N_SAMPLE - len(kept)   # only the pairs the killed run left
    assert not set(scored) & kept
    assert [p.name for p in job.glob("part-*.parquet")] and not list(job.glob("part-*-r*.parquet"))
