"""Model faults through ``prb score``: NaN/inf scores and an adapter that raises on some pairs become
``invalid`` rows with the reason, the rest of the run goes on, and both tables show the count; a model that
breaks for good keeps every score computed before; inputs beyond the context are truncated and counted.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import tiny_models
from rel_helpers import CliProcess, record, run_main, table, write_lines

from prb_utils.store import load_results, load_run_metadata

ARGS = ["score", "--data", "sample", "--limit", "4", "--no-progress"]


def test_nan_inf_and_raising_pairs_are_invalid_with_reason_and_counted(tmp_path, capsys):
    out = tmp_path / "results"
    proc = CliProcess([*ARGS, "--model", "classifier:fake-nan", "--model", "classifier:fake-faulty",
                       "--model", "length", "--out", str(out)], tmp_path, "faults", PRB_FAKE_DELAY="0")
    assert proc.wait() == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    rows = load_results(out).set_index(["model", "id"])
    assert len(rows) == 3 * 12

    nan = rows.loc["classifier:fake-nan"]
    bad = nan.index.str.endswith(("1", "2"))
    assert (nan.loc[bad, "outcome"] == "invalid").all() and (nan.loc[bad, "invalid_reason"] == "non-finite score").all()
    assert nan.loc[~bad, "outcome"].isin(["correct", "wrong", "tie"]).all()

    faulty = rows.loc["classifier:fake-faulty"]
    bad = faulty.index.str.endswith("3")
    assert (faulty.loc[bad, "outcome"] == "invalid").all()
    assert faulty.loc[bad, "invalid_reason"].str.match(r"ValueError: cannot score \w+/\w+-003$").all()
    assert faulty.loc[~bad, "outcome"].isin(["correct", "wrong", "tie"]).all()
    assert faulty.loc[~bad, "score_chosen"].notna().all()
    assert (rows.loc["length", "outcome"] != "invalid").all()  # the models after the faulty one still ran

    # the printed accuracy table and `prb summarize` both show the invalid counts, and the failed pairs apart (not
    # counted in n: a failed pair is never a wrong one; #35 item 4), saying that a rerun scores them
    # n, correct, ties, tie_rate, near_ties, invalid, failed
    assert re.search(r"classifier:fake-nan\s+none\s+12\s+\d+\s+\d+\s+[\d.]+\s+\d+\s+6\s+0\s", proc.stdout), proc.stdout
    assert re.search(r"classifier:fake-faulty\s+none\s+9\s+\d+\s+\d+\s+[\d.]+\s+\d+\s+0\s+3\s", proc.stdout), proc.stdout
    assert "3 failed pair(s)" in proc.stdout and "again scores them" in proc.stdout
    code, stdout, err = run_main(capsys, "summarize", "--results", str(out), "--by", "model", "--format", "json")
    assert code == 0, err
    counts = {r["model"]: (r["invalid"], r["failed"]) for r in json.loads(stdout)}
    assert counts == {"classifier:fake-nan": (6, 0), "classifier:fake-faulty": (0, 3), "length": (0, 0)}
    meta = load_run_metadata(out).set_index("model")
    assert meta.loc["classifier:fake-faulty", "n_failed"] == 3


def test_a_model_that_breaks_midway_keeps_every_score_computed_before(tmp_path):
    """Every call fails after the second (a lost device): the run stops with an error, the scores computed
    before are in the store (pairs that failed, if kept, are marked failed with the reason), and the next
    run scores only the rest."""
    out = tmp_path / "results"
    env = {"PRB_FAKE_DELAY": "0", "PRB_FAKE_CHUNK_SECONDS": "0.001"}
    broken = CliProcess([*ARGS, "--model", "classifier:fake-breaks", "--out", str(out)], tmp_path, "broken",
                        PRB_FAKE_GOOD_CALLS="2", **env)
    assert broken.wait() not in (0, 2), broken.stderr  # not a user mistake, not a success either
    assert "device lost" in broken.stderr
    stored = load_results(out)
    failed = stored[stored["failed"]]
    assert (failed["outcome"] == "invalid").all() and failed["invalid_reason"].str.contains("device lost").all()
    kept = table(stored[~stored["failed"]])
    assert len(kept) == 4 and (kept["outcome"] != "invalid").all()  # two chunks of two pairs
    fixed = CliProcess([*ARGS, "--model", "classifier:fake-breaks", "--out", str(out)], tmp_path, "fixed",
                       PRB_FAKE_GOOD_CALLS="1000", **env)
    assert fixed.wait() == 0, fixed.stderr
    final = table(load_results(out))
    assert len(final) == 12 and not final.duplicated(["subset", "id"]).any()
    assert (final["outcome"] != "invalid").all()  # the failed pairs were tried again
    pd.testing.assert_frame_equal(final.merge(kept[["subset", "id"]])[kept.columns], kept)


@pytest.fixture(scope="module")
def nan_lm_dir(tmp_path_factory):
    return tiny_models.build_causal_lm(tmp_path_factory.mktemp("nan_lm"), nan=True)


@pytest.mark.parametrize("kind", ["implicit", "judge"])
def test_a_real_model_with_nan_weights_gives_invalid_rows_not_numbers(tmp_path, capsys, nan_lm_dir, kind):
    out = tmp_path / "results"
    code, stdout, err = run_main(capsys, "score", "--data", "sample", "--limit", "1", "--model",
                                 f"{kind}:{nan_lm_dir}", "--out", str(out), "--no-progress", "--device", "cpu")
    assert code == 0, err
    rows = load_results(out)
    assert len(rows) == 3 and (rows["outcome"] == "invalid").all(), rows[["outcome", "invalid_reason"]]
    assert rows["invalid_reason"].str.len().gt(0).all()
    assert re.search(rf"{kind}:\S+\s+none\s+3\s+0\s+0\s+[\d.]+\s+0\s+3\s", stdout), stdout   # 3 invalid


def test_texts_beyond_the_context_are_truncated_and_counted(tmp_path, capsys, tiny_classifier_dir):
    """The tiny classifier takes 256 tokens: a 2,000-word answer and a 2,000-word profile post do not fit."""
    long_text = " ".join(["cook cheap pan eggs"] * 500)
    path = write_lines(tmp_path / "Long.jsonl", [
        record(1, chosen=long_text),
        record(2, profile=[{"id": "p", "category": "cooking", "text": long_text}]),
        record(3),
    ])
    out = tmp_path / "results"
    code, _, err = run_main(capsys, "score", "--data", str(path), "--model", f"classifier:{tiny_classifier_dir}",
                            "--profile", "none", "--profile", "full", "--out", str(out), "--no-progress",
                            "--device", "cpu")
    assert code == 0, err
    rows = load_results(out).set_index(["profile", "id"])
    assert rows["truncated"].to_dict() == {("none", "r1"): True, ("none", "r2"): False, ("none", "r3"): False,
                                           ("full", "r1"): True, ("full", "r2"): True, ("full", "r3"): False}
    assert (rows["outcome"] != "invalid").all() and rows["score_chosen"].notna().all()
    meta = load_run_metadata(out).set_index("profile")
    assert meta["n_truncated"].astype(int).to_dict() == {"none": 1, "full": 2}
    assert "Note: 3 scored pair(s) exceeded a model's context and were truncated" in err
