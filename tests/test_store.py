"""The results store: job keys, atomic part files, newest-row-wins reads, compaction, locking, metadata."""

from __future__ import annotations

import re
import threading

import pandas as pd
import pytest
from filelock import Timeout

from prb_utils.errors import PRBError
from prb_utils.store import (
    RESULT_COLUMNS,
    JobStore,
    job_key,
    load_results,
    load_run_metadata,
    pair_hash,
    tidy_rows,
)

DESC = {"model": "length", "kind": "length", "profile": "none", "options": {}}


def rows(ids, *, job=None, score=1.0, model="length", profile="none", outcome="correct", failed=False):
    return pd.DataFrame(
        [
            {
                "model": model, "kind": model.split(":")[0], "profile": profile, "subset": "s", "category": "c",
                "id": str(i), "score_chosen": score, "score_rejected": 0.0, "outcome": outcome,
                "invalid_reason": None, "failed": failed, "pair_hash": f"h{i}", "job": job or job_key(DESC),
            }
            for i in ids
        ]
    )


def test_job_key_is_stable_and_depends_on_every_field():
    same = {"options": {}, "profile": "none", "kind": "length", "model": "length"}
    assert job_key(DESC) == job_key(same)
    assert len(job_key(DESC)) == 16
    assert job_key(DESC) != job_key({**DESC, "profile": "full"})
    assert job_key(DESC) != job_key({**DESC, "options": {"seed": 1}})


def test_pair_hash_changes_with_what_the_model_sees():
    base = pair_hash("s", "1", "q", "a", "b")
    assert base == pair_hash("s", "1", "q", "a", "b")
    assert len({base, pair_hash("s", "1", "q2", "a", "b"), pair_hash("s", "1", "q", "b", "a"),
                pair_hash("t", "1", "q", "a", "b")}) == 4


def test_tidy_rows_adds_missing_columns_with_stable_dtypes():
    frame = tidy_rows([{"model": "m", "id": "1", "score_chosen": "nan"}])
    assert list(frame.columns) == RESULT_COLUMNS
    assert frame["score_chosen"].dtype == "float64"
    assert frame["failed"].tolist() == [False]
    assert tidy_rows([]).columns.tolist() == RESULT_COLUMNS


def test_parts_are_numbered_and_newest_row_wins(tmp_path):
    store = JobStore(tmp_path, DESC)
    with store.writing():
        first = store.write_part(rows([1, 2], score=1.0))
        second = store.write_part(rows([2, 3], score=2.0))
    assert [p.name for p in store.parts()] == ["part-00001.parquet", "part-00002.parquet"]
    assert first.exists() and second.exists()
    got = store.read().set_index("id")["score_chosen"].to_dict()
    assert got == {"1": 1.0, "2": 2.0, "3": 2.0}


def test_a_ranks_part_files_carry_its_rank_sort_by_number_and_compact_into_one(tmp_path):
    store = JobStore(tmp_path, DESC)
    with store.writing():
        store.write_part(rows([1], score=0.5))
        store.write_part(rows([2], score=1.0), rank=0)
        store.write_part(rows([3], score=3.0), rank=1)
        store.write_part(rows([1], score=2.0), rank=0)   # a later part replaces the older row of pair 1
    assert [p.name for p in store.parts()] == ["part-00001.parquet", "part-00002-r0.parquet",
                                               "part-00003-r1.parquet", "part-00004-r0.parquet"]
    got = store.read().set_index("id")["score_chosen"].to_dict()
    assert got == {"1": 2.0, "2": 1.0, "3": 3.0}
    with store.writing():
        store.compact()
    assert [p.name for p in store.parts()] == ["part-00005.parquet"]
    assert store.read().set_index("id")["score_chosen"].to_dict() == got


def test_done_excludes_rows_whose_adapter_failed(tmp_path):
    store = JobStore(tmp_path, DESC)
    with store.writing():
        store.write_part(pd.concat([rows([1]), rows([2], outcome="invalid", failed=True)]))
    assert store.done() == {("s", "1"): "h1"}


def test_compact_merges_parts_without_losing_rows(tmp_path):
    store = JobStore(tmp_path, DESC)
    with store.writing():
        for i in range(4):
            store.write_part(rows([i, i + 1], score=float(i)))
        before = store.read()
        store.compact()
    assert len(store.parts()) == 1
    pd.testing.assert_frame_equal(store.read(), before)
    assert sorted(before["id"]) == ["0", "1", "2", "3", "4"]


def test_leftover_temp_files_are_ignored_and_cleaned(tmp_path):
    store = JobStore(tmp_path, DESC)
    with store.writing():
        store.write_part(rows([1]))
    stale = store.dir / ".part-00002.parquet.abc.tmp"
    stale.write_bytes(b"half a parquet file")
    assert len(store.read()) == 1
    with store.writing():
        pass
    assert not stale.exists()


def test_job_lock_excludes_a_second_writer(tmp_path):
    store = JobStore(tmp_path, DESC)
    other = JobStore(tmp_path, DESC)
    waited = []
    with store.writing():
        with pytest.raises(Timeout):
            other.lock.acquire(timeout=0.05)
        thread = threading.Thread(target=lambda: other.writing(on_wait=waited.append).__enter__())
        thread.start()
        thread.join(0.3)
        assert thread.is_alive() and waited == [other]
    thread.join(5)
    assert not thread.is_alive()
    other.lock.release()


def test_load_results_concatenates_jobs_and_drops_duplicates(tmp_path):
    a = JobStore(tmp_path, DESC)
    b = JobStore(tmp_path, {**DESC, "profile": "full"})
    with a.writing():
        a.write_metadata({"key": a.key, **a.description, "created": "2026-01-01T00:00:00+00:00"})
        a.write_part(rows([1, 2], job=a.key))
        a.write_part(rows([2], job=a.key, score=5.0))
    with b.writing():
        b.write_metadata({"key": b.key, **b.description, "created": "2026-01-02T00:00:00+00:00"})
        b.write_part(rows([1, 2], job=b.key, profile="full"))
    results = load_results(tmp_path)
    assert len(results) == 4
    assert results["job"].tolist() == [a.key, a.key, b.key, b.key]
    assert results.loc[(results["job"] == a.key) & (results["id"] == "2"), "score_chosen"].item() == 5.0
    assert not results.duplicated(["job", "subset", "id"]).any()


def test_load_results_of_an_empty_or_missing_store(tmp_path):
    assert load_results(tmp_path / "nothing").empty
    assert list(load_results(tmp_path).columns) == [*RESULT_COLUMNS, "job_label", "score_dtype", "judge_mode"]
    assert load_run_metadata(tmp_path).empty


def test_run_metadata_is_one_row_per_job(tmp_path):
    store = JobStore(tmp_path, {**DESC, "model": "judge:x", "kind": "judge", "options": {"seed": 3}})
    with store.writing():
        store.write_part(rows([1, 2, 3], job=store.key))
        store.write_metadata({
            "key": store.key, **store.description, "created": "2026-01-01T00:00:00+00:00", "finished": "later",
            "data_fingerprint": "abc", "n_pairs": 3,
            "run": {"torch": "2.13.0", "dtype": "float32", "device": "cpu", "chat_template_hash": "t1", "model": "x",
                    "spec": "judge:x", "kind": "judge"},
        })
    meta = load_run_metadata(tmp_path)
    assert len(meta) == 1
    row = meta.iloc[0]
    assert (row.job, row.model, row.kind, row.profile, row.n_rows) == (store.key, "judge:x", "judge", "none", 3)
    assert (row["option_seed"], row["torch"], row["dtype"], row["chat_template_hash"]) == (3, "2.13.0", "float32", "t1")
    assert row.run_model == "x"  # a run field that collides with a job field keeps both
    assert "run_kind" not in meta.columns and "spec" not in meta.columns  # ... unless it repeats the job


@pytest.mark.parametrize("damaged", ["part-00001.parquet", "job.json"])
def test_a_damaged_store_file_is_a_prberror_naming_it(tmp_path, damaged):
    store = JobStore(tmp_path, DESC)
    with store.writing():
        store.write_metadata({"key": store.key, **store.description, "created": "2026-01-01T00:00:00+00:00"})
        store.write_part(rows([1, 2], job=store.key))
    path = store.dir / damaged
    path.write_bytes(path.read_bytes()[:30])
    own = [store.read, store.done] if damaged.startswith("part") else [store.metadata]
    for reader in [lambda: load_results(tmp_path), lambda: load_run_metadata(tmp_path), *own]:
        with pytest.raises(PRBError, match=r"The store file .*" + re.escape(damaged) + r" is damaged") as caught:
            reader()
        assert "\n" not in str(caught.value)
    path.unlink()  # what the message says to do
    assert len(load_results(tmp_path)) == (0 if damaged.startswith("part") else 2)


def test_a_part_file_without_result_columns_is_damaged_too(tmp_path):
    store = JobStore(tmp_path, DESC)
    with store.writing():
        store.write_part(rows([1]))
    pd.DataFrame({"x": [1]}).to_parquet(store.dir / "part-00002.parquet")
    with pytest.raises(PRBError, match="part-00002.parquet is damaged"):
        store.read()


def test_a_file_where_the_store_needs_a_folder_is_a_prberror(tmp_path):
    (tmp_path / "jobs").write_text("someone else's file")
    store = JobStore(tmp_path, DESC)
    with pytest.raises(PRBError, match=r"jobs is a file, not a folder") as caught:
        with store.writing():
            pass
    assert str(tmp_path / "jobs") in str(caught.value)
    assert load_results(tmp_path).empty  # reading such a folder finds no jobs, without an error


def test_writing_without_waiting_yields_none_while_another_process_holds_the_job(tmp_path):
    store, other = JobStore(tmp_path, DESC), JobStore(tmp_path, DESC)
    stale = None
    with store.writing() as held:
        assert held is store
        stale = store.dir / ".part-00002.parquet.abc.tmp"
        stale.write_bytes(b"in flight")
        with other.writing(wait=False) as got:
            assert got is None
        assert stale.exists()  # the holder's temporary file is left alone
    with other.writing(wait=False) as got:
        assert got is other
    assert not stale.exists()


def test_pair_hash_includes_the_category():
    assert pair_hash("s", "1", "q", "a", "b", category="cooking") != pair_hash("s", "1", "q", "a", "b", category="law")


def test_a_part_file_of_another_job_is_a_prberror_naming_it(tmp_path):
    a = JobStore(tmp_path, DESC)
    b = JobStore(tmp_path, {**DESC, "profile": "full"})
    with a.writing():
        part = a.write_part(rows([1, 2], job=a.key))
    with b.writing():
        b.write_part(rows([1, 2], job=b.key, profile="full", score=3.0))
    (b.dir / "part-00009.parquet").write_bytes(part.read_bytes())
    with pytest.raises(PRBError, match=r"part-00009\.parquet.*another job"):
        b.read()
    with pytest.raises(PRBError, match="another job"):
        load_results(tmp_path)


def finished_job(out, desc, ids, **row_options):
    """A finished job of ``ids`` whose job.json expects exactly those pairs."""
    store = JobStore(out, desc)
    with store.writing():
        store.write_part(rows(ids, job=store.key, profile=desc["profile"], model=desc["model"], **row_options))
        store.write_metadata({**desc, "key": store.key, "created": "t", "finished": "t",
                              "pairs": {f"s/{i}": f"h{i}" for i in ids}})
    return store


def test_a_finished_job_whose_parts_are_gone_is_reported_never_dropped_silently(tmp_path):
    finished_job(tmp_path, DESC, [1, 2, 3])
    gone = finished_job(tmp_path, {**DESC, "profile": "full"}, [1, 2])
    for part in gone.parts():
        part.unlink()
    with pytest.warns(UserWarning, match=rf"Job {gone.key} \(length \[full\]\) holds 0 of its 2 pairs"):
        results = load_results(tmp_path)
    assert len(results) == 3 and len(results.attrs["shortfalls"]) == 1
    with pytest.raises(PRBError, match="holds 0 of its 2 pairs"):
        load_results(tmp_path, strict=True)


def test_job_labels_name_what_differs_and_are_unique_per_job(tmp_path):
    judge = {"model": "judge:x", "kind": "judge", "profile": "none"}
    opts = {"dtype": "float32", "seed": 0, "judge_mode": "logprob"}
    finished_job(tmp_path, {**judge, "options": opts}, [1])
    finished_job(tmp_path, {**judge, "options": {**opts, "judge_mode": "generate"}}, [1])
    finished_job(tmp_path, {**judge, "options": {**opts, "seed": 1}}, [1])
    finished_job(tmp_path, {**judge, "profile": "full", "options": opts}, [1])
    finished_job(tmp_path, DESC, [1])
    results = load_results(tmp_path)
    labels = results.groupby("job")["job_label"].first()
    assert sorted(set(labels)) == ["judge:x [generate, seed=0]", "judge:x [logprob, seed=0]",
                                   "judge:x [logprob, seed=1]", "length"]
    assert not results.drop_duplicates("job").duplicated(["job_label", "profile"]).any()
    full = results[results["profile"] == "full"]
    assert full["job_label"].tolist() == ["judge:x [logprob, seed=0]"]  # the same label under every condition
    assert set(results["model"]) == {"judge:x", "length"}  # the model column is unchanged


def test_a_label_never_names_the_default_retriever_only_another_one(tmp_path):
    """``top3`` means BM25's top 3: beside a random-retriever job the BM25 job is plain ``lexical`` (never
    ``lexical [bm25]``, which the pages printed for a baseline), the other says its retriever."""
    lexical = {"model": "lexical", "kind": "lexical", "profile": "top3"}
    finished_job(tmp_path, {**lexical, "options": {"retriever": "bm25"}}, [1])
    finished_job(tmp_path, {**lexical, "options": {"retriever": "random"}}, [1])
    finished_job(tmp_path, {**lexical, "profile": "none", "options": {}}, [1])
    labels = load_results(tmp_path).groupby(["profile", "job"])["job_label"].first()
    assert sorted(labels) == ["lexical", "lexical", "lexical [random]"]
    assert labels.loc["none"].tolist() == ["lexical"]


def test_notebook_tables_show_one_row_per_job_never_a_pool(tmp_path):
    from prb_utils.analysis.metrics import accuracy_table
    from prb_utils.notebook.params import NotebookParams

    judge = {"model": "judge:x", "kind": "judge", "profile": "none"}
    opts = {"dtype": "float32", "seed": 0, "judge_mode": "logprob"}
    finished_job(tmp_path, {**judge, "options": opts}, [1, 2])
    finished_job(tmp_path, {**judge, "options": {**opts, "judge_mode": "generate"}}, [1, 2], outcome="wrong")
    rows = NotebookParams(results=str(tmp_path)).load_results()
    table = accuracy_table(rows, by=["model", "profile"]).set_index("model")
    assert table["n"].tolist() == [2, 2]  # pooled, one row would count each pair twice (n=4)
    assert table.loc["judge:x [generate]", "accuracy"] == 0.0 and table.loc["judge:x [logprob]", "accuracy"] == 1.0
    assert set(rows["model_spec"]) == {"judge:x"}


def test_jobs_that_differ_only_in_their_fingerprint_get_distinct_labels(tmp_path):
    finished_job(tmp_path, {**DESC, "fingerprint": "folder:aaa"}, [1])
    finished_job(tmp_path, {**DESC, "fingerprint": "folder:bbb"}, [1])
    labels = sorted(load_results(tmp_path)["job_label"])
    assert labels == ["length [fingerprint=folder:aaa]", "length [fingerprint=folder:bbb]"]


def test_notebook_params_load_results_keeps_every_job_with_its_label(tmp_path):
    from prb_utils.notebook.params import AccuracyParams

    implicit = {"model": "implicit:x", "kind": "implicit", "profile": "none"}
    finished_job(tmp_path, {**implicit, "options": {"dtype": "float32"}}, [1, 2])
    finished_job(tmp_path, {**implicit, "options": {"dtype": "bfloat16"}}, [1, 2])
    rows = AccuracyParams(results=str(tmp_path), models=["implicit:x"]).load_results()
    assert len(rows) == 4 and rows["model_spec"].unique().tolist() == ["implicit:x"]
    assert sorted(rows["job_label"].unique()) == ["implicit:x [bfloat16]", "implicit:x [float32]"]
    assert (rows["model"] == rows["job_label"]).all()
    assert (rows["score_dtype"] == rows["job_label"].str.extract(r"\[(\w+)\]")[0]).all()  # each job's own dtype
