"""The data layer: every source kind, every validation problem, --drop-invalid semantics."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from prb_utils.data import COLUMNS, data_fingerprint, load_benchmark, read_benchmark, subset_counts
from prb_utils.errors import DataError, PRBError


def make_record(i: int, **overrides) -> dict:
    record = {
        "id": f"r{i}",
        "question": f"How do I season cast iron number {i}?",
        "profile": [
            {"id": f"r{i}-p1", "category": "cooking", "text": "Cheap pans that last?"},
            {"id": f"r{i}-p2", "category": "travel", "text": "Hostels in Lisbon?"},
        ],
        "rubric_aspects": [{"aspect": "Budget", "evidence": "I am broke", "reason": "Student"}],
        "narrative": "I am broke and want cheap advice.",
        "category": "cooking",
        "chosen": f"Use a thin layer of cheap oil {i}.",
        "rejected": f"Buy a premium seasoning spray {i}.",
    }
    record.update(overrides)
    return {k: v for k, v in record.items() if v is not ...}


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_sample_loads_all_three_subsets_with_tidy_columns():
    frame = load_benchmark("sample")
    assert list(frame.columns[: len(COLUMNS)]) == COLUMNS
    assert set(frame["subset"]) == {"Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture"}
    assert frame.groupby("subset").size().min() >= 12
    assert frame["profile"].map(len).between(4, 10).all()
    assert frame["rubric_aspects"].map(len).between(2, 4).all()
    assert (frame["chosen"] != frame["rejected"]).all()
    assert frame["rubric_inferable"].isin([True, False]).all()


def test_limit_keeps_first_n_per_subset_and_counts_add_up():
    frame = load_benchmark("sample", limit=2)
    assert frame.groupby("subset").size().tolist() == [2, 2, 2]
    counts = subset_counts(frame)
    assert counts.iloc[-1].tolist() == ["total", 6]


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_each_local_file_kind_loads_the_same_rows(tmp_path: Path, suffix: str):
    records = [make_record(i) for i in range(3)]
    path = tmp_path / f"Cooking{suffix}"
    if suffix == ".jsonl":
        write_jsonl(path, records)
    elif suffix == ".json":
        path.write_text(json.dumps(records))
    else:
        pd.DataFrame(records).to_parquet(path)
    frame = load_benchmark(str(path))
    assert frame["subset"].unique().tolist() == ["Cooking"]
    assert frame["id"].tolist() == ["r0", "r1", "r2"]
    assert frame.loc[0, "profile"][0] == records[0]["profile"][0]
    assert frame.loc[0, "rubric_aspects"] == records[0]["rubric_aspects"]


def test_folder_of_mixed_files_gives_one_subset_per_file(tmp_path: Path):
    write_jsonl(tmp_path / "A.jsonl", [make_record(1)])
    (tmp_path / "B.json").write_text(json.dumps([make_record(2)]))
    pd.DataFrame([make_record(3)]).to_parquet(tmp_path / "C.parquet")
    (tmp_path / "notes.txt").write_text("ignored")
    frame = load_benchmark(str(tmp_path))
    assert frame[["subset", "id"]].values.tolist() == [["A", "r1"], ["B", "r2"], ["C", "r3"]]
    assert load_benchmark(str(tmp_path), subsets=["B"])["id"].tolist() == ["r2"]


def test_save_to_disk_folder_with_configs_as_keys(tmp_path: Path):
    import datasets

    dd = datasets.DatasetDict(
        {"Art": datasets.Dataset.from_list([make_record(1)]), "Law": datasets.Dataset.from_list([make_record(2)])}
    )
    dd.save_to_disk(str(tmp_path / "saved"))
    frame = load_benchmark(str(tmp_path / "saved"))
    assert frame[["subset", "id"]].values.tolist() == [["Art", "r1"], ["Law", "r2"]]


def _hub_layout(root: Path, configs: dict[str, list[dict]]) -> Path:
    lines = ["---", "configs:"]
    for name, records in configs.items():
        (root / name).mkdir(parents=True)
        write_jsonl(root / name / "test.jsonl", records)
        lines += [f"- config_name: {name}", "  data_files:", "  - split: test", f"    path: {name}/test.jsonl"]
    (root / "README.md").write_text("\n".join([*lines, "---", "# A PRB-format dataset", ""]))
    return root


def test_hub_code_path_through_a_local_dataset_repository(tmp_path: Path):
    root = _hub_layout(tmp_path / "repo", {"Art": [make_record(1), make_record(2)], "Law": [make_record(3)]})
    frame = load_benchmark(str(root))
    assert frame.groupby("subset").size().to_dict() == {"Art": 2, "Law": 1}
    only = load_benchmark(str(root), subsets=["Law"])
    assert only["id"].tolist() == ["r3"]
    with pytest.raises(PRBError, match="Unknown subset Nope"):
        load_benchmark(str(root), subsets=["Nope"])


def test_unreachable_hub_id_is_a_plain_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PRBError, match="Cannot load the dataset"):
        load_benchmark("nobody-here/not-a-dataset")


def test_missing_path_is_a_plain_error():
    with pytest.raises(PRBError, match="does not exist"):
        load_benchmark("./no/such/file.jsonl")


def test_optional_metadata_may_be_missing(tmp_path: Path):
    record = make_record(1, rubric_aspects=..., narrative=..., category=...,
                         profile=[{"text": "only text"}])
    frame = load_benchmark(str(write_jsonl(tmp_path / "x.jsonl", [record])))
    row = frame.iloc[0]
    assert row["rubric_aspects"] == [] and row["narrative"] == "" and row["category"] == ""
    assert row["profile"] == [{"id": "r1-p1", "category": "", "text": "only text"}]


BAD_CASES = {
    "truncated json": ('{"id": "r9", "question": "Cut', None, "not valid JSON"),
    "missing chosen": (make_record(9, chosen=...), "chosen", "missing"),
    "missing id": (make_record(9, id=...), "id", "missing"),
    "empty question": (make_record(9, question="  "), "question", "empty string"),
    "wrong type rejected": (make_record(9, rejected=3), "rejected", "expected a string, got int"),
    "profile as string": (make_record(9, profile="I like cheap things"), "profile", "expected a list of posts"),
    "aspects as dict": (make_record(9, rubric_aspects={"aspect": "x"}), "rubric_aspects", "expected a list"),
    "identical answers": (make_record(9, rejected="Use a thin layer of cheap oil 9."), "rejected", "identical"),
    "duplicate id": (make_record(0, question="Another question?"), "id", "duplicate id"),
    "not an object": ("[1, 2]", None, "expected a JSON object"),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_each_problem_is_one_line_naming_file_line_and_field(tmp_path: Path, case: str):
    bad, field, message = BAD_CASES[case]
    path = write_jsonl(tmp_path / "S.jsonl", [make_record(0), bad, make_record(1)])
    result = read_benchmark(str(path))
    assert len(result.problems) == 1
    line = str(result.problems[0])
    assert "\n" not in line and f"{path}:2" in line and message in line
    if field:
        assert f"field '{field}'" in line
    assert result.frame["id"].tolist() == ["r0", "r1"]
    with pytest.raises(DataError) as info:
        load_benchmark(str(path))
    assert info.value.problems == [line]
    kept = load_benchmark(str(path), drop_invalid=True)
    assert kept["id"].tolist() == ["r0", "r1"]
    assert len(kept.attrs["dropped"]) == 1


def test_invalid_utf8_and_empty_file(tmp_path: Path):
    path = tmp_path / "S.jsonl"
    path.write_bytes(json.dumps(make_record(0)).encode() + b"\n" + b'{"id": "\xff\xfe"}\n')
    result = read_benchmark(str(path))
    assert [str(p) for p in result.problems] == [f"{path}:2: not valid UTF-8 (byte 8)"]
    empty = tmp_path / "E.jsonl"
    empty.write_text("")
    assert "file is empty" in str(read_benchmark(str(empty)).problems[0])
    with pytest.raises(DataError, match="No valid records"):
        load_benchmark(str(empty), drop_invalid=True)


def test_several_problems_are_each_reported(tmp_path: Path):
    path = write_jsonl(tmp_path / "S.jsonl", [make_record(0, chosen=..., question=""), make_record(1)])
    problems = [str(p) for p in read_benchmark(str(path)).problems]
    assert len(problems) == 2
    assert any("field 'question'" in p for p in problems) and any("field 'chosen'" in p for p in problems)


def test_fingerprint_changes_with_visible_content_only():
    frame = load_benchmark("sample", limit=3)
    base = data_fingerprint(frame)
    edited = frame.copy()
    edited.loc[0, "chosen"] = edited.loc[0, "chosen"] + " Extra."
    assert data_fingerprint(edited) != base
    hidden = frame.copy()
    hidden.loc[0, "narrative"] = "changed narrative"
    assert data_fingerprint(hidden) == base
