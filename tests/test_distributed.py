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
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")   # what torchrun sets beside them
    code = main(["score", "--data", SAMPLE, "--limit", "1", "--model", "judge:smollm2", "--engine", "vllm",
                 "--engine-url", "http://127.0.0.1:9", "--out", str(tmp_path / "r"), "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "without torchrun" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(("torchrun", "advice"), [
    (False, "unset WORLD_SIZE, RANK and LOCAL_RANK, which torchrun did not set"),
    (True, "start it without torchrun"),
])
def test_the_one_process_advice_names_what_started_prb(tmp_path, monkeypatch, capsys, torchrun, advice):
    """Issue 50: WORLD_SIZE and RANK left in the environment (no torchrun) were told to "start it without
    torchrun"; the advice now follows what set them."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    if torchrun:
        monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")
    else:
        monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    code = main(["plan", "--data", SAMPLE, "--model", "length"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "prb plan runs as one process" in line and advice in line
    assert ("without torchrun" in line) == torchrun


@pytest.mark.parametrize(("env", "named", "never"), [
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "-1"}, "LOCAL_RANK=-1 must be 0 or more", "RANK=0"),
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "x"}, "LOCAL_RANK='x' must be a whole number", "RANK='0'"),
    ({"WORLD_SIZE": "2", "RANK": "x"}, "RANK='x' must be a whole number", "WORLD_SIZE='2'"),
    ({"WORLD_SIZE": "0", "RANK": "0"}, "WORLD_SIZE=0 must be 1 or more", "RANK=0 is"),
    ({"WORLD_SIZE": "2", "RANK": "2"}, "RANK=2 is not a rank of WORLD_SIZE=2, whose ranks are 0 to 1", "LOCAL_RANK"),
])
def test_a_bad_world_variable_is_named_itself(env, named, never):
    """Issue 50: a bad LOCAL_RANK was blamed on RANK; each variable is now named alone."""
    from prb_utils.errors import PRBError

    with pytest.raises(PRBError) as refused:
        world(env)
    message = str(refused.value)
    assert message.startswith(named) and never not in message.split("(")[0]
    assert "unset WORLD_SIZE, RANK and LOCAL_RANK" in message   # no torchrun set them here


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
    # each job counts its own pairs and tokens, every rank's (#35 item 5: before, rank 0's share, accumulated over
    # the model's earlier conditions)
    alone = {(m["model"], m["profile"]): m["run"] for m in job_metas(tmp_path / "one")}
    for meta in metas:
        if meta["model"] != "length":
            run, one = meta["run"], alone[(meta["model"], meta["profile"])]
            assert run["n_pairs_scored"] == one["n_pairs_scored"] == N_SAMPLE
            # every rank's tokens (rank 0's share alone is about half); batches differ, so a shared prefix may count
            # once more or less
            assert 0.9 * one["tokens_computed"] <= run["tokens_computed"] <= 1.1 * one["tokens_computed"]


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


# ------------------------------------------------------------------ rank problems are one sentence, never a hang

DRIVER = str(REPO / "tests" / "rank_driver.py")


def drive_ranks(tmp_path: Path, cases: list[dict], *, ranks: int = 2) -> list[list[dict]]:
    """Run ``cases`` (see ``tests/rank_driver.py``) in one launch of ``torchrun`` with ``ranks`` CPU ranks (gloo):
    every rank's results, by rank."""
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks), DRIVER,
               str(tmp_path / "cases.json"), str(tmp_path)]
    done = subprocess.run(command, cwd=REPO, env=torchrun_env(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(ranks)]


def one_sentence(result: dict) -> str:
    """The case's stderr, which must be exactly one ``prb:`` line (exit 2, no traceback)."""
    lines = result["err"].strip().splitlines()
    assert result["code"] == 2 and len(lines) == 1 and lines[0].startswith("prb: "), result
    return lines[0]


def test_each_command_supports_ranks_or_refuses_them_and_ranks_must_agree(tmp_path):
    """Items 8, 10, 11 of issue 35 in one launch of two real ranks: bon, report, plan, ppo refuse ranks; rank 0
    names a different --out, another model order, an extra model, an edited record; two records with one pair
    key are refused; agreeing ranks score."""
    score = ["score", "--data", SAMPLE, "--limit", "1", "--no-progress", "--model", "length"]
    lines = (REPO / "data" / "sample" / "Art_and_Entertainment.jsonl").read_text().splitlines()[:2]
    record = json.loads(lines[1])
    for rank, second in enumerate([lines[1], json.dumps({**record, "chosen": record["chosen"] + " Edited."})]):
        (tmp_path / f"data{rank}").mkdir()
        (tmp_path / f"data{rank}" / "Art_and_Entertainment.jsonl").write_text(f"{lines[0]}\n{second}\n")
    twins = [{**json.loads(lines[0]), "subset": "x/y", "id": "z"}, {**record, "subset": "x", "id": "y/z"}]
    (tmp_path / "twins.jsonl").write_text("\n".join(json.dumps(r) for r in twins) + "\n")
    out = str(tmp_path / "store")
    cases = [
        {"name": "bon", "argv": ["bon", "--results", out, "--n", "1", "--no-progress"]},
        {"name": "report", "argv": ["report", "--results", out, "--out", str(tmp_path / "rep"), "--no-progress"]},
        {"name": "plan", "argv": ["plan", "--data", SAMPLE, "--model", "length"]},
        {"name": "out", "argv": [*score, "--out", out + "{rank}"]},
        {"name": "order", "argv": {"0": [*score, "--model", "lexical", "--out", out],
                                   "1": [*score[:-2], "--model", "lexical", "--model", "length", "--out", out]}},
        {"name": "extra", "argv": {"0": [*score, "--out", out], "1": [*score, "--model", "lexical", "--out", out]}},
        {"name": "edited", "argv": ["score", "--data", str(tmp_path / "data{rank}" / "Art_and_Entertainment.jsonl"),
                                    "--model", "length", "--out", out, "--no-progress"]},
        {"name": "twins", "argv": ["score", "--data", str(tmp_path / "twins.jsonl"), "--model", "length",
                                   "--out", out, "--no-progress"]},
        {"name": "agree", "argv": [*score, "--out", out]},
        {"name": "ppo", "argv": ["ppo", "--results", out, "--steps", "1", "--no-progress"]},   # hung before
    ]
    by_rank = drive_ranks(tmp_path, cases)
    for results in by_rank:
        got = {r["name"]: r for r in results}
        assert list(got) == [c["name"] for c in cases]
        for command in ("bon", "report", "plan", "ppo"):
            assert f"prb {command} runs as one process" in one_sentence(got[command])
        assert "--out" in one_sentence(got["out"]) and f"'{out}1'" in one_sentence(got["out"])
        assert "--model 'length' --model 'lexical'" in one_sentence(got["order"])
        assert "--model 'lexical'" in one_sentence(got["extra"])
        assert "record 'art-002'" in one_sentence(got["edited"]) and "differs" in one_sentence(got["edited"])
        assert got["twins"]["code"] == 2 and "x/y/z" in got["twins"]["err"] and "Traceback" not in got["twins"]["err"]
        assert got["agree"]["code"] == 0, got["agree"]["err"]
    assert not (tmp_path / "rep").exists() and not (tmp_path / "store" / "bon").exists()
    assert not list(tmp_path.glob("store?"))   # the ranks with different --out wrote no store
    rows = load_results(out, strict=True)
    assert sorted(rows["model"].unique()) == ["length"] and len(rows) == 3   # only the agreeing run scored


def test_leftover_world_variables_without_torchrun_are_one_process_or_one_sentence(tmp_path):
    """Item 9 of issue 35: WORLD_SIZE=1 runs as one process; WORLD_SIZE=2 without torchrun's rendezvous
    variables, or with them but no peer, is one sentence (the latter after the stated join timeout)."""
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
    score = ["score", "--data", SAMPLE, "--limit", "1", "--model", "length", "--no-progress"]
    cases = [
        {"name": "one", "env": {"WORLD_SIZE": "1", "RANK": "0"}, "argv": [*score, "--out", str(tmp_path / "one")]},
        {"name": "no-master", "env": {"WORLD_SIZE": "2", "RANK": "0"}, "argv": [*score, "--out", str(tmp_path / "a")]},
        {"name": "no-peer", "env": {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "PRB_RANK_JOIN_TIMEOUT": "1"},
         "argv": [*score, "--out", str(tmp_path / "b")]},
    ]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    done = subprocess.run([sys.executable, DRIVER, str(tmp_path / "cases.json"), str(tmp_path)], cwd=REPO,
                          env=torchrun_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    got = {r["name"]: r for r in json.loads((tmp_path / "rank0.json").read_text())}
    assert got["one"]["code"] == 0, got["one"]["err"]
    assert len(load_results(tmp_path / "one")) == 3 and "world_size" not in job_metas(tmp_path / "one")[0]["run"]
    assert "MASTER_ADDR and MASTER_PORT are not" in one_sentence(got["no-master"])
    assert "waited 1 s" in one_sentence(got["no-peer"]) and "not every rank joined" in one_sentence(got["no-peer"])
    assert load_results(tmp_path / "b").empty
