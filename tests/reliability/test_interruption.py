"""Interruption: ``prb score`` killed with SIGKILL at seeded random points, then resumed, ends with exactly
the rows of an uninterrupted run: no duplicates, no gaps, the same scores and outcomes.

The CLI runs in child processes (``rel_helpers.CliProcess``: ``prb_utils.cli.main`` with a slow fake
classifier from ``fake_cli.py``, in a forkserver child so that each start is cheap); the fake sleeps per
pair and logs each pair it scores, and its chunks are made small so that a run writes many part files.
Kill points are either "after N scored pairs plus a random delay" or "a random time after start" (data
loading, model loading, job metadata, compaction and the baseline jobs are all in range).
"""

from __future__ import annotations

import os
import random
import signal
import time

import pandas as pd
import pytest
from rel_helpers import CliProcess, table

from prb_utils.store import load_results, load_run_metadata

ARGS = ["score", "--data", "sample", "--limit", "3", "--model", "classifier:fake-slow", "--model", "length",
        "--profile", "none", "--profile", "top1", "--no-progress"]
N_FAKE = 2 * 9  # 3 pairs x 3 subsets x 2 profile conditions scored by the slow fake
N_ROWS = 2 * N_FAKE  # and the same for the length baseline
ENV = {"PRB_FAKE_DELAY": "0.02", "PRB_FAKE_CHUNK_SECONDS": "0.06"}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """The uninterrupted run: (store folder, per-item table, printed accuracy table)."""
    folder = tmp_path_factory.mktemp("clean")
    out = folder / "results"
    proc = CliProcess([*ARGS, "--out", str(out)], folder, "clean", **ENV)
    assert proc.wait() == 0, proc.stderr
    rows = table(load_results(out))
    assert len(rows) == N_ROWS and len(proc.scored()) == N_FAKE
    return out, rows, proc.stdout


def wait_for_progress(proc: CliProcess, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(proc.scored()) < n and proc.process.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)


def kill_at_random_point(proc: CliProcess, rng: random.Random, *, after_start: float, left: int = N_FAKE) -> str:
    """SIGKILL ``proc`` at a seeded random point (``left``: pairs the fake still has to score); returns a
    description of the point."""
    if rng.random() < 0.7 and left > 1:
        n = rng.randint(1, left - 1)
        extra = rng.uniform(0, 0.08)
        wait_for_progress(proc, n)
        time.sleep(extra)
        point = f"after {n} scored pairs + {extra:.3f}s"
    else:
        delay = rng.uniform(0, after_start)
        time.sleep(delay)
        point = f"{delay:.3f}s after start"
    proc.kill()
    code = proc.wait()
    assert code in (-9, 0), (point, code, proc.stderr)
    return point if code == -9 else f"{point} (the run had already finished)"


def check_partial_store(out, clean_rows: pd.DataFrame, point: str) -> pd.DataFrame:
    """After a kill the store reads cleanly, has no duplicate keys, and every kept row is a final row."""
    rows = table(load_results(out))
    load_run_metadata(out)
    assert not rows.duplicated(["model", "profile", "subset", "id"]).any(), point
    merged = rows.merge(clean_rows, on=["model", "profile", "subset", "id"], suffixes=("", "_clean"))
    assert len(merged) == len(rows), point
    for col in ("score_chosen", "score_rejected", "outcome", "pair_hash"):
        assert (merged[col] == merged[f"{col}_clean"]).all(), (point, col)
    return rows


def resume_and_compare(out, folder, clean, before: pd.DataFrame, name: str) -> None:
    _, clean_rows, clean_stdout = clean
    proc = CliProcess([*ARGS, "--out", str(out)], folder, name, **ENV)
    assert proc.wait() == 0, proc.stderr
    final = table(load_results(out))
    assert not final.duplicated(["model", "profile", "subset", "id"]).any()
    pd.testing.assert_frame_equal(final, clean_rows)
    assert proc.stdout == clean_stdout
    # the resumed run scored only what the store lacked, never a kept row again
    assert not set(proc.scored()) & set(before["pair_hash"])
    assert (load_run_metadata(out)["n_rows"] == N_ROWS // 4).all()


@pytest.mark.parametrize("seed", range(5))
def test_sigkill_at_a_random_point_then_resume_equals_the_uninterrupted_run(tmp_path, clean, seed):
    rng = random.Random(seed)
    out = tmp_path / "results"
    proc = CliProcess([*ARGS, "--out", str(out)], tmp_path, "killed", **ENV)
    point = kill_at_random_point(proc, rng, after_start=1.0)
    before = check_partial_store(out, clean[1], point)
    resume_and_compare(out, tmp_path, clean, before, "resumed")


def test_killed_again_and_again_while_resuming(tmp_path, clean):
    """Three kills in a row, each during the resume of the previous one, then one full resume."""
    rng = random.Random(1234)
    out = tmp_path / "results"
    kills = []
    before = table(load_results(out))
    for attempt in range(3):
        left = N_FAKE - int((before["model"] == "classifier:fake-slow").sum())
        proc = CliProcess([*ARGS, "--out", str(out)], tmp_path, f"attempt{attempt}", **ENV)
        kills.append(kill_at_random_point(proc, rng, after_start=0.5, left=left))
        before = check_partial_store(out, clean[1], kills[-1])
    resume_and_compare(out, tmp_path, clean, before, "final")


def wait_until_blocked(proc: CliProcess, timeout: float = 60) -> None:
    """Wait for the fake to block (``PRB_FAKE_BLOCK_AFTER``): the process is then mid-job, whatever the
    machine's speed."""
    marker = proc.log.with_name(proc.log.name + ".blocked")
    deadline = time.monotonic() + timeout
    while not marker.exists() and proc.process.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert marker.exists(), f"the fake never blocked: {proc.stderr}"


def test_ctrl_c_exits_130_with_one_line_keeps_scores_and_resumes(tmp_path, clean):
    """SIGINT (Ctrl-C) to the running CLI: exit 130, one plain line, no traceback; the resume completes.
    The fake blocks after 4 scored pairs (and is never released), so the signal always lands mid-job."""
    out = tmp_path / "results"
    proc = CliProcess([*ARGS, "--out", str(out)], tmp_path, "ctrl_c", PRB_FAKE_BLOCK_AFTER="4", **ENV)
    wait_until_blocked(proc)
    assert len(proc.scored()) == 4
    os.kill(proc.process.pid, signal.SIGINT)
    assert proc.wait() == 130, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "prb: interrupted; scores already computed are saved, run the same command again to resume."]
    before = check_partial_store(out, clean[1], "ctrl-c")
    assert 0 < len(before) < N_ROWS
    resume_and_compare(out, tmp_path, clean, before, "resumed")


def test_killed_after_the_last_part_the_resume_still_finishes_the_job_metadata(tmp_path, clean):
    """Kill in the window between a job's last part file and its final metadata (during compaction): the
    rows are complete, so a resume scores nothing, but the job must still end as finished with its
    truncation and failure counts taken from the rows (otherwise truncations go uncounted), and the
    temporary file of an interrupted write must not stay behind."""
    out = tmp_path / "results"
    proc = CliProcess([*ARGS, "--out", str(out)], tmp_path, "killed", PRB_FAKE_COMPACT_PAUSE="30", **ENV)
    marker = proc.log.with_name(proc.log.name + ".compacting")
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    assert len(proc.scored()) == N_FAKE // 2  # the first job (fake, none) is fully scored
    # a kill a moment later, inside the write of the merged part, also leaves its temporary file
    job = next(p.parent for p in out.glob("jobs/*/job.json") if "fake-slow" in p.read_text())
    (job / ".part-00099.parquet.abc123.tmp").write_bytes(b"PAR1 half a file")
    resume_and_compare(out, tmp_path, clean, check_partial_store(out, clean[1], "compaction"), "resumed")
    assert not list(out.glob("jobs/*/.*.tmp"))
    meta = load_run_metadata(out)
    rows = load_results(out)
    truncated = rows.groupby("job")["truncated"].sum().astype(int)
    assert meta["finished"].notna().all(), meta[["model", "profile", "finished"]]
    assert meta.set_index("job")["n_truncated"].astype(int).to_dict() == truncated.to_dict()


def test_a_part_file_deleted_while_the_job_runs_fails_the_run_and_the_rerun_restores_it(tmp_path, clean):
    """Before: the run exited 0, printed fewer pairs and marked the job finished, and summarize hid it."""
    clean_out, clean_rows, _ = clean
    out = tmp_path / "results"
    proc = CliProcess([*ARGS, "--out", str(out)], tmp_path, "eaten", **ENV)
    wait_for_progress(proc, 3)
    deadline = time.monotonic() + 30
    while not list(out.glob("jobs/*/part-00001.parquet")) and time.monotonic() < deadline:
        time.sleep(0.005)
    next(out.glob("jobs/*/part-00001.parquet")).unlink()
    assert proc.wait() == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "a part file disappeared while it ran" in proc.stderr
    assert load_run_metadata(out)["finished"].isna().any()  # the eaten job is not marked finished
    again = CliProcess([*ARGS, "--out", str(out)], tmp_path, "again", **ENV)
    assert again.wait() == 0, again.stderr
    pd.testing.assert_frame_equal(table(load_results(out)), clean_rows)
