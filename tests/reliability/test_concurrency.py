"""Concurrency: two ``prb score`` processes on one store at the same time, on the same jobs and on
different jobs (in opposite orders), while a third reader keeps reading the store.

How the store makes this safe (``prb_utils.store``): one folder per job with its own part files (per-job
shards) and a file lock per job (``filelock``) held while a process scores that job; a waiting process
re-checks what is missing once it holds the lock. So every pair is scored exactly once in total, and the
final table equals the table of one uninterrupted run.
"""

from __future__ import annotations

import time

import pandas as pd
import pytest
from rel_helpers import CliProcess, table

from prb_utils.store import load_results, load_run_metadata

BASE = ["score", "--data", "sample", "--limit", "3", "--model", "classifier:fake-slow", "--no-progress"]
ENV = {"PRB_FAKE_DELAY": "0.03", "PRB_FAKE_CHUNK_SECONDS": "0.1"}
N_PAIRS = 9  # 3 pairs x 3 subsets, per profile condition


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clean")
    out = folder / "results"
    proc = CliProcess([*BASE, "--profile", "none", "--profile", "top1", "--out", str(out)], folder, "clean", **ENV)
    assert proc.wait() == 0, proc.stderr
    return table(load_results(out))


def read_while_running(out, procs: list[CliProcess], clean_rows: pd.DataFrame) -> int:
    """Read the store over and over while the writers run; every read is consistent. Returns the reads."""
    reads = 0
    while any(p.process.is_alive() for p in procs):
        rows = table(load_results(out))
        load_run_metadata(out)
        assert not rows.duplicated(["model", "profile", "subset", "id"]).any()
        merged = rows.merge(clean_rows, on=["model", "profile", "subset", "id"], suffixes=("", "_clean"))
        assert len(merged) == len(rows)
        assert (merged["score_chosen"] == merged["score_chosen_clean"]).all()
        reads += 1
        time.sleep(0.02)
    return reads


def run_two(tmp_path, clean_rows, first: list[str], second: list[str]) -> tuple[CliProcess, CliProcess]:
    out = tmp_path / "results"
    a = CliProcess([*BASE, *first, "--out", str(out)], tmp_path, "a", **ENV)
    b = CliProcess([*BASE, *second, "--out", str(out)], tmp_path, "b", **ENV)
    reads = read_while_running(out, [a, b], clean_rows)
    assert a.wait() == 0, a.stderr
    assert b.wait() == 0, b.stderr
    assert reads >= 1
    scored = a.scored() + b.scored()
    assert len(scored) == len(set(scored)) == 2 * N_PAIRS, (len(a.scored()), len(b.scored()))
    final = table(load_results(out))
    pd.testing.assert_frame_equal(final, clean_rows)
    assert set(final["pair_hash"]) == set(scored)
    assert (load_run_metadata(out)["n_rows"] == N_PAIRS).all()
    return a, b


def test_two_processes_on_the_same_jobs_score_each_pair_once(tmp_path, clean):
    profiles = ["--profile", "none", "--profile", "top1"]
    a, b = run_two(tmp_path, clean, profiles, profiles)
    assert a.stdout == b.stdout  # both print the same accuracy table


def test_two_processes_on_different_jobs_in_opposite_orders(tmp_path, clean):
    run_two(tmp_path, clean, ["--profile", "none", "--profile", "top1"], ["--profile", "top1", "--profile", "none"])


def test_a_process_killed_while_holding_the_lock_does_not_block_the_other(tmp_path, clean):
    """The lock dies with its holder (an OS file lock): the waiting process takes over and finishes."""
    out = tmp_path / "results"
    profiles = ["--profile", "none", "--profile", "top1"]
    a = CliProcess([*BASE, *profiles, "--out", str(out)], tmp_path, "a", PRB_FAKE_BLOCK_AFTER="2", **ENV)
    blocked = a.log.with_name(a.log.name + ".blocked")  # a holds its job's lock and waits there until killed
    deadline = time.monotonic() + 60
    while not blocked.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    with_progress = [arg for arg in BASE if arg != "--no-progress"]
    b = CliProcess([*with_progress, *profiles, "--out", str(out)], tmp_path, "b", **ENV)
    while "Waiting for another process" not in b.stderr and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "Waiting for another process" in b.stderr  # b waits for the lock that a holds
    a.kill()
    assert a.wait() == -9
    assert b.wait() == 0, b.stderr
    pd.testing.assert_frame_equal(table(load_results(out)), clean)
    assert set(a.scored()) | set(b.scored()) == set(clean["pair_hash"])
