"""The data a job scored is part of its key: two data files never share a job, a larger ``--limit`` of one source
extends its job, an older store's jobs are read (a clean one continued, a pooled one named), and ``prb summarize``
says which data each job covers. The ``length`` baseline needs no model weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from prb_utils.cli import main
from prb_utils.data import SAMPLE_DIR, load_benchmark
from prb_utils.store import (
    JOB_FILE,
    JOBS_DIR,
    StoreShortfallWarning,
    job_key,
    load_results,
    load_run_metadata,
    query_results,
    write_parquet,
)

SCORE = ["score", "--model", "length", "--profile", "none", "--no-progress"]


def other_file(folder: Path, n: int = 10, *, suffix: str = " Indeed.") -> Path:
    """``n`` records of the shipped sample under new ids, their chosen answers changed: another data file."""
    lines = (SAMPLE_DIR / "Art_and_Entertainment.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    records = [{**json.loads(line), "id": f"other-{i}"} for i, line in enumerate(lines)]
    for record in records:
        record["chosen"] += suffix
    path = folder / "other.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def score(out: Path, data: str, *options: str) -> None:
    assert main([*SCORE, "--data", data, "--out", str(out), *options]) == 0


def jobs(out: Path) -> list[Path]:
    return sorted(p for p in (out / JOBS_DIR).iterdir() if p.is_dir())


def summarize(out: Path, capsys, *options: str) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["summarize", "--results", str(out), *options]) == 0
    got = capsys.readouterr()
    return got.out, got.err


def as_older_prb(out: Path, folders: list[Path], *, n_pairs: int) -> Path:
    """Merge job folders into the one job an older prb (no data in the key) wrote for them: its key without
    ``data``, its rows' ``job`` column, a ``job.json`` with no data record and the last run's pair count."""
    meta = json.loads((folders[0] / JOB_FILE).read_text())
    description = {name: meta[name] for name in ("model", "kind", "profile", "options", "fingerprint")}
    key = job_key(description)
    rows = pd.concat([pd.read_parquet(part) for f in folders for part in sorted(f.glob("part-*.parquet"))])
    pairs = {k: v for f in folders for k, v in json.loads((f / JOB_FILE).read_text())["pairs"].items()}
    for folder in folders:
        shutil.rmtree(folder)
    folder = out / JOBS_DIR / key
    write_parquet(rows.assign(job=key), folder / "part-00001.parquet")
    old = {**description, "key": key, "created": meta["created"], "finished": meta["finished"], "pairs": pairs,
           "n_pairs": n_pairs, "run": meta["run"]}
    (folder / JOB_FILE).write_text(json.dumps(old))
    return folder


def test_two_data_files_scored_into_one_out_are_two_jobs_labelled_by_their_data(tmp_path, capsys):
    out = tmp_path / "S"
    score(out, "sample")
    score(out, str(other_file(tmp_path)), "--limit", "5")
    assert len(jobs(out)) == 2
    rows = load_results(out)
    assert rows.groupby("job_label").size().to_dict() == {"length [data=other.jsonl]": 5, "length [data=sample]": 42}
    table, err = summarize(out, capsys)
    assert "length [data=other.jsonl]" in table and "length [data=sample]" in table and "warning" not in err
    data_line = table.strip().splitlines()[-1]
    assert data_line.startswith("Data: sample [") and "42 pairs]: 1 job of 42 pairs" in data_line
    assert "other.jsonl [" in data_line and "10 pairs, --limit 5]: 1 job of 5 pairs." in data_line
    meta = load_run_metadata(out).set_index("data_source")
    assert meta.loc["other.jsonl", ["data_pairs", "data_limit", "n_rows"]].tolist() == [10, 5, 5]


def test_a_larger_limit_of_the_same_file_extends_its_job_and_scores_only_the_new_pairs(tmp_path):
    out, path = tmp_path / "S", str(other_file(tmp_path))
    score(out, path, "--limit", "5")
    first = load_run_metadata(out)
    score(out, path, "--limit", "10")
    meta = load_run_metadata(out)
    assert len(jobs(out)) == 1 and meta["job"].tolist() == first["job"].tolist()
    assert (meta["n_scored"].iloc[0], meta["n_rows"].iloc[0], meta["data_limit"].iloc[0]) == (5, 10, 10)


def test_an_edited_file_is_another_data_set_and_its_label_shows_the_digest(tmp_path):
    out = tmp_path / "S"
    score(out, str(other_file(tmp_path)))
    score(out, str(other_file(tmp_path, suffix=" Truly.")))
    labels = sorted(load_results(out)["job_label"].unique())
    assert len(jobs(out)) == 2 and len(labels) == 2
    assert all(label.startswith("length [data=other.jsonl@") for label in labels)


def test_an_older_pooled_job_is_named_in_one_sentence_by_summarize(tmp_path, capsys):
    out = tmp_path / "S"
    score(out, "sample")
    score(out, str(other_file(tmp_path)), "--limit", "5")
    pooled = as_older_prb(out, jobs(out), n_pairs=5)
    table, err = summarize(out, capsys)
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and warnings[0].count(". ") == 0
    assert f"Job {pooled.name} (length [none]) holds 47 rows but its last run scored 5 pairs" in warnings[0]
    assert "may pool more than one data set" in warnings[0] and "new --out" in warnings[0]
    assert "Data: unrecorded [scored by an older prb, which kept no data identity]: 1 job of 47 pairs." in table
    # scoring the sample again does not continue the pooled job: the sample gets a job of its own
    score(out, "sample")
    assert len(jobs(out)) == 2 and pooled.is_dir()
    with pytest.warns(StoreShortfallWarning, match="may pool more than one data set"):
        assert len(load_results(out).query("job == @pooled.name")) == 47


def test_an_older_clean_job_is_continued_not_scored_again(tmp_path):
    out = tmp_path / "S"
    score(out, "sample", "--limit", "2")
    older = as_older_prb(out, jobs(out), n_pairs=6)
    score(out, "sample", "--limit", "4")   # its 6 pairs are the sample's: the job goes on, 6 more pairs
    assert jobs(out) == [older]
    meta = load_run_metadata(out).iloc[0]
    assert (meta["n_scored"], meta["n_rows"], meta["data_source"], meta["data_limit"]) == (6, 12, "sample", 4)
    score(out, "sample", "--limit", "4")   # now recorded as the sample's job: read, nothing scored
    assert jobs(out) == [older] and load_run_metadata(out).iloc[0]["n_rows"] == 12


def test_the_score_table_after_a_second_file_names_the_data(tmp_path, capsys):
    out = tmp_path / "S"
    score(out, "sample", "--limit", "1")
    capsys.readouterr()
    score(out, str(other_file(tmp_path)), "--limit", "1")
    assert "length [data=other.jsonl]" in capsys.readouterr().out


def test_a_report_query_of_an_edited_copy_keeps_the_job_of_that_copy(tmp_path):
    copy = tmp_path / "edited"
    shutil.copytree(SAMPLE_DIR, copy)
    first = copy / "Art_and_Entertainment.jsonl"
    lines = first.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    first.write_text("\n".join([json.dumps({**record, "chosen": record["chosen"] + " Indeed."}), *lines[1:]]) + "\n",
                     encoding="utf-8")
    out = tmp_path / "S"
    score(out, "sample", "--limit", "2")
    score(out, str(copy), "--limit", "2")
    assert len(jobs(out)) == 2   # same pair names, other data: two jobs
    ours = query_results(out, data=load_benchmark("sample", limit=2))
    edited = query_results(out, data=load_benchmark(str(copy), limit=2))
    for rows in (ours, edited):
        assert len(rows) == 6 and rows["job"].nunique() == 1 and set(rows["job_label"]) == {"length"}
    assert ours["job"].iloc[0] != edited["job"].iloc[0]
    unnamed = pd.DataFrame(load_benchmark("sample", limit=2).to_dict("records"))   # a frame with no identity
    assert query_results(out, data=unnamed)["job"].nunique() == 2


def test_a_loaded_frame_with_renamed_pairs_no_longer_claims_its_source(tmp_path):
    from prb_utils.scoring import score_benchmark

    ours = load_benchmark("sample", limit=2)
    renamed = ours.assign(id="x-" + ours["id"])   # pandas keeps attrs["data"]: it must not key the sample's job
    for data in (ours, renamed, ours.iloc[:3]):
        score_benchmark(data, ["length"], ["none"], out=tmp_path, progress=False)
    assert len(jobs(tmp_path)) == 2
    labels = load_results(tmp_path).groupby("job_label").size().to_dict()
    assert labels == {"length [data=sample]": 6, "length [data=frame]": 9}
