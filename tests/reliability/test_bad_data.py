"""Bad data end to end through the CLI: one line per problem and exit 2, or an exact drop with a count.

The data layer's unit tests (tests/test_data.py) check each problem message; here every fault goes through
``prb validate`` / ``prb score`` as a user meets it, in a real process where a traceback could show.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from rel_helpers import assert_user_error, prb, record, run_main, write_lines

from prb_utils.store import load_results

# line number -> (record id or None, field or None, message fragment); line 1, 11 and 14 are good records.
FAULTS = {
    2: (None, None, "not valid JSON"),                       # truncated line
    3: (None, None, "not valid JSON"),                       # not JSON at all
    4: (None, None, "not valid UTF-8"),                      # invalid UTF-8 bytes
    5: ("r5", "profile", "expected a list of posts, got str"),
    6: ("r6", "rubric_aspects", "expected a list, got dict"),
    7: ("r7", "chosen", "empty string"),
    8: ("r8", "question", "expected a string, got int"),
    9: ("r0", "id", "duplicate id"),
    10: ("r10", "rejected", "identical to 'chosen'"),
    12: (None, None, "expected a JSON object, got list"),
    13: ("r13", "rejected", "missing"),
}
GOOD_IDS = ["r0", "r1", "r2"]


def every_fault(path: Path) -> Path:
    """One .jsonl file holding each record-level fault once, between good records."""
    return write_lines(path, [
        record(0),
        json.dumps(record(2))[:40],
        "this is not json",
        b'{"id": "r4", "question": "caf\xe9?"}',
        record(5, profile="I like cheap things"),
        record(6, rubric_aspects={"aspect": "Budget"}),
        record(7, chosen=""),
        record(8, question=8),
        record(0, question="The same id again?"),
        record(10, rejected=record(10)["chosen"]),
        record(1),
        "[1, 2]",
        record(13, rejected=...),
        record(2),
    ])


def check_problem_lines(lines: list[str], path: Path) -> None:
    """Exactly one line per fault, each naming the file and line, the record id and the field."""
    assert len(lines) == len(FAULTS), lines
    for line, (number, (rid, field, message)) in zip(lines, FAULTS.items(), strict=True):
        assert line.strip().startswith(f"{path}:{number}"), line
        assert message in line, line
        if rid:
            assert f"(id {rid})" in line, line
        if field:
            assert f"field '{field}'" in line, line


def test_every_record_fault_in_one_file_validate_refuse_and_drop(tmp_path, capsys):
    path = every_fault(tmp_path / "Cooking.jsonl")
    out = tmp_path / "results"

    validate = prb("validate", str(path))
    err = assert_user_error(validate.returncode, validate.stderr, lines=len(FAULTS) + 1)
    check_problem_lines(err[:-1], path)
    assert err[-1] == f"{len(FAULTS)} problem(s) in {path}."

    code, _, err = run_main(capsys, "score", "--data", str(path), "--model", "length", "--out", str(out),
                            "--no-progress")
    err = assert_user_error(code, err, lines=len(FAULTS) + 1)
    check_problem_lines(err[:-1], path)
    assert "--drop-invalid" in err[-1]
    assert load_results(out).empty

    code, stdout, err = run_main(capsys, "score", "--data", str(path), "--model", "length", "--out", str(out),
                                 "--no-progress", "--drop-invalid")
    assert code == 0, err
    err = [line for line in err.splitlines() if line.strip()]
    assert err[0].startswith(f"Dropped {len(FAULTS)} invalid record(s):"), err
    check_problem_lines(err[1:], path)
    rows = load_results(out)
    assert sorted(rows["id"]) == GOOD_IDS
    assert re.search(r"length\s+none\s+3\b", stdout), stdout


def test_drop_count_counts_records_not_distinct_ids(tmp_path, capsys):
    """Two bad records with the same id (and a duplicated id seen three times) are three dropped records."""
    path = write_lines(tmp_path / "S.jsonl", [
        record(0), record(0, question="Dup once?"), record(0, question="Dup twice?"),
        record(5, chosen=""), record(5, chosen="", question="Another bad r5?"), record(1),
    ])
    code, _, err = run_main(capsys, "score", "--data", str(path), "--model", "length", "--drop-invalid",
                            "--out", str(tmp_path / "r"), "--no-progress")
    assert code == 0, err
    head = err.strip().splitlines()[0]
    assert head.startswith("Dropped 4 invalid record(s):"), head
    assert sorted(load_results(tmp_path / "r")["id"]) == ["r0", "r1"]


def _truncated_parquet(path: Path) -> Path:
    pd.DataFrame([record(1), record(2)]).to_parquet(path)
    path.write_bytes(path.read_bytes()[:-40])
    return path


FILE_FAULTS = {
    "empty jsonl": (lambda p: (p / "S.jsonl").write_text(""), "S.jsonl", "file is empty"),
    "blank lines only": (lambda p: (p / "S.jsonl").write_text("\n \n\n"), "S.jsonl", "file is empty"),
    "empty json list": (lambda p: (p / "S.json").write_text("[]"), "S.json", "file holds no records"),
    "json object not list": (lambda p: (p / "S.json").write_text('{"id": "a"}'), "S.json", "expected a JSON list"),
    "json invalid utf-8": (lambda p: (p / "S.json").write_bytes(b'[{"id": "\xff"}]'), "S.json", "not valid UTF-8"),
    "json truncated": (lambda p: (p / "S.json").write_text(json.dumps([record(1)])[:-5]), "S.json", "not valid JSON"),
    "truncated parquet": (lambda p: _truncated_parquet(p / "S.parquet"), "S.parquet", "cannot be read as parquet"),
}


@pytest.mark.parametrize("case", list(FILE_FAULTS))
def test_broken_files_are_one_line_and_exit_2(tmp_path, capsys, case):
    make, name, message = FILE_FAULTS[case]
    make(tmp_path)
    source = next(p for p in tmp_path.iterdir() if p.is_file())
    code, out, err = run_main(capsys, "validate", str(source))
    lines = assert_user_error(code, err, lines=2)
    assert f"{tmp_path / name}" in lines[0] and message in lines[0], lines
    assert out == ""
    # alone in the source there is nothing left to score, even with --drop-invalid
    code, _, err = run_main(capsys, "score", "--data", str(source), "--model", "length", "--drop-invalid",
                            "--out", str(tmp_path / "r"), "--no-progress")
    assert_user_error(code, err)
    assert "No valid records" in err.strip().splitlines()[-1]


def mixed_folder(root: Path) -> Path:
    root.mkdir()
    write_lines(root / "A.jsonl", [record(1), record(2)])
    (root / "B.json").write_text(json.dumps([record(3)]))
    pd.DataFrame([record(4), record(5)]).to_parquet(root / "C.parquet")
    write_lines(root / "D.jsonl", [record(6), '{"id": "r7", "question": "cut', record(8)])
    (root / "E.jsonl").write_text("")
    (root / "notes.txt").write_text("not data")
    (root / "README.md").write_text("# my data\n")
    return root


def test_folder_of_mixed_formats_reports_exactly_its_broken_files_and_drops_only_them(tmp_path, capsys):
    root = mixed_folder(tmp_path / "data")
    code, _, err = run_main(capsys, "validate", str(root))
    lines = assert_user_error(code, err, lines=3)
    assert lines[0].startswith(f"{root / 'D.jsonl'}:2: not valid JSON"), lines
    assert lines[1] == f"{root / 'E.jsonl'}: file is empty"
    assert lines[2] == f"2 problem(s) in {root}."

    out = tmp_path / "r"
    code, stdout, err = run_main(capsys, "score", "--data", str(root), "--model", "lexical", "--drop-invalid",
                                 "--out", str(out), "--no-progress")
    assert code == 0, err
    assert err.splitlines()[0].startswith("Dropped 2 invalid record(s)")
    rows = load_results(out)
    assert sorted(zip(rows["subset"], rows["id"], strict=True)) == [
        ("A", "r1"), ("A", "r2"), ("B", "r3"), ("C", "r4"), ("C", "r5"), ("D", "r6"), ("D", "r8")]
    assert re.search(r"lexical\s+none\s+7\b", stdout), stdout


def test_empty_or_unknown_subset_is_one_sentence(tmp_path, capsys):
    root = mixed_folder(tmp_path / "data")
    code, _, err = run_main(capsys, "score", "--data", str(root), "--subset", "E", "--model", "length",
                            "--drop-invalid", "--out", str(tmp_path / "r"), "--no-progress")
    assert_user_error(code, err)
    assert "No valid records" in err.strip().splitlines()[-1]
    for source in (str(root), "sample"):
        code, _, err = run_main(capsys, "score", "--data", source, "--subset", "Nope", "--model", "length",
                                "--out", str(tmp_path / "r"), "--no-progress")
        assert_user_error(code, err, lines=1)
        assert "Nope" in err


def test_lone_surrogate_in_a_text_is_a_problem_not_a_crash(tmp_path):
    """A JSON-escaped half of an emoji (valid JSON, not encodable text) is common in scraped data."""
    path = write_lines(tmp_path / "S.jsonl", [
        record(1), '{"id": "r2", "question": "Q?", "chosen": "Great \\ud83d", "rejected": "Fine."}'])
    proc = prb("validate", str(path))
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = assert_user_error(proc.returncode, proc.stderr, lines=2)
    assert f"{path}:2 (id r2): field 'chosen'" in lines[0], lines


@pytest.mark.parametrize("damage", ["truncated part file", "truncated job.json"])
def test_a_damaged_store_file_is_named_not_a_traceback(tmp_path, capsys, damage):
    """The store never writes half a file (atomic moves), but a copy, a sync tool or a full disk can."""
    out = tmp_path / "results"
    code, _, err = run_main(capsys, "score", "--data", "sample", "--limit", "2", "--model", "length",
                            "--out", str(out), "--no-progress")
    assert code == 0, err
    job = next((out / "jobs").iterdir())
    target = next(job.glob("part-*.parquet")) if damage == "truncated part file" else job / "job.json"
    target.write_bytes(target.read_bytes()[:30])
    code, _, err = run_main(capsys, "summarize", "--results", str(out))
    lines = assert_user_error(code, err, lines=1)
    assert target.name in lines[0], lines


@pytest.mark.parametrize(("field", "value", "said"), [
    ("pairs", "abc", "its field 'pairs' is a string, not an object"),
    ("pairs", ["S/1"], "its field 'pairs' is a list, not an object"),
    ("pairs", {"S/1": 3}, "holds a pair hash that is not a string"),
    ("data", "sample", "its field 'data' is a string, not an object"),
    ("n_pairs", "3", "its field 'n_pairs' is a string, not a whole number"),
])
@pytest.mark.parametrize("command", ["summarize", "score"])
def test_a_job_json_field_of_the_wrong_type_is_named_not_a_traceback(tmp_path, capsys, field, value, said, command):
    """Issue 50: a ``job.json`` whose ``pairs`` is a string gave a traceback (``AttributeError``)."""
    out = tmp_path / "results"
    score = ["score", "--data", "sample", "--limit", "2", "--model", "length", "--out", str(out), "--no-progress"]
    assert run_main(capsys, *score)[0] == 0
    target = next((out / "jobs").iterdir()) / "job.json"
    target.write_text(json.dumps({**json.loads(target.read_text()), field: value}))
    code, _, err = run_main(capsys, *(["summarize", "--results", str(out)] if command == "summarize" else score))
    (line,) = assert_user_error(code, err, lines=1)
    assert str(target) in line and said in line and "delete it" in line


def test_a_utf8_bom_is_read_not_refused(tmp_path, capsys):
    (tmp_path / "S.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps(record(1)).encode() + b"\n")
    (tmp_path / "T.json").write_bytes(b"\xef\xbb\xbf" + json.dumps([record(2)]).encode())
    code, out, err = run_main(capsys, "validate", str(tmp_path))
    assert code == 0, err
    assert re.search(r"S\s+1", out) and re.search(r"T\s+1", out), out


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_deeply_nested_json_is_one_record_problem_and_drop_keeps_the_rest(tmp_path, capsys):
    path = write_lines(tmp_path / "S.jsonl", [record(1), '{"id": "r2", "question": ' + _deep(100_000) + "}", record(3)])
    proc = prb("validate", str(path))
    lines = assert_user_error(proc.returncode, proc.stderr, lines=2)
    assert lines[0].startswith(f"{path}:2: nested too deeply"), lines
    code, _, err = run_main(capsys, "score", "--data", str(path), "--model", "length", "--drop-invalid",
                            "--out", str(tmp_path / "r"), "--no-progress")
    assert code == 0, err
    assert sorted(load_results(tmp_path / "r")["id"]) == ["r1", "r3"]
    whole = tmp_path / "W.json"
    whole.write_text("[" + _deep(100_000) + "]")
    proc = prb("validate", str(whole))
    assert "nested too deeply" in assert_user_error(proc.returncode, proc.stderr, lines=2)[0]


def test_a_lone_surrogate_in_a_field_name_is_a_problem_and_dropped(tmp_path, capsys):
    path = write_lines(tmp_path / "S.jsonl", [record(1), json.dumps(record(2))[:-1] + ', "note\\ud83d": "x"}'])
    proc = prb("validate", str(path))
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = assert_user_error(proc.returncode, proc.stderr, lines=2)
    assert f"{path}:2 (id r2): field 'note?'" in lines[0], lines
    code, _, err = run_main(capsys, "score", "--data", str(path), "--model", "length", "--drop-invalid",
                            "--out", str(tmp_path / "r"), "--no-progress")
    assert code == 0, err
    assert list(load_results(tmp_path / "r")["id"]) == ["r1"]


@pytest.mark.parametrize("marker", ["state.json", "dataset_dict.json"])
def test_a_stray_save_to_disk_marker_is_one_sentence(tmp_path, capsys, marker):
    write_lines(tmp_path / "S.jsonl", [record(1)])
    (tmp_path / marker).write_text("{}")
    code, _, err = run_main(capsys, "validate", str(tmp_path))
    line = assert_user_error(code, err, lines=1)[0]
    assert marker in line and str(tmp_path) in line


def test_invalid_yaml_in_a_hub_layout_readme_is_one_sentence(tmp_path, capsys):
    write_lines(tmp_path / "S.jsonl", [record(1)])
    (tmp_path / "README.md").write_text("---\nconfigs:\n  - config_name: [unclosed\n---\n")
    code, _, err = run_main(capsys, "validate", str(tmp_path))
    line = assert_user_error(code, err, lines=1)[0]
    assert "README.md" in line and "YAML" in line


@pytest.mark.parametrize("source, fragment", [
    ("", "empty"),
    ("~nosuchuser_prb/x.jsonl", "no such user"),
    ("real/prefeval.jsonl", "does not exist"),
])
def test_unusable_source_names_are_one_sentence(tmp_path, capsys, monkeypatch, source, fragment):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir()
    code, _, err = run_main(capsys, "validate", source)
    assert fragment in assert_user_error(code, err, lines=1)[0]


def test_subset_selection_reads_only_that_subset_and_matches_exactly(tmp_path, capsys):
    write_lines(tmp_path / "a.jsonl", [record(1)])
    write_lines(tmp_path / "ab.jsonl", [record(2), "broken"])
    code, out, err = run_main(capsys, "score", "--data", str(tmp_path), "--subset", "a", "--model", "length",
                              "--out", str(tmp_path / "r"), "--no-progress")
    assert code == 0, err
    assert list(load_results(tmp_path / "r")["subset"]) == ["a"]


def test_two_files_giving_one_subset_are_refused(tmp_path, capsys):
    write_lines(tmp_path / "a.jsonl", [record(1)])
    (tmp_path / "a.json").write_text(json.dumps([record(2)]))
    code, _, err = run_main(capsys, "validate", str(tmp_path))
    line = assert_user_error(code, err, lines=1)[0]
    assert "a.json" in line and "a.jsonl" in line


def test_a_per_record_subset_field_is_used(tmp_path, capsys):
    write_lines(tmp_path / "all.jsonl", [record(1, subset="Art"), record(2, subset="Law"), record(3)])
    code, out, err = run_main(capsys, "validate", str(tmp_path / "all.jsonl"))
    assert code == 0, err
    assert re.search(r"Art\s+1", out) and re.search(r"Law\s+1", out) and re.search(r"all\s+1", out), out


def test_a_command_that_loads_its_data_twice_lists_the_dropped_records_once(tmp_path, capsys):
    """Issue 50: ``prb probe --drop-invalid`` loads the data to score and again to read the probes, and printed
    "Dropped 1 invalid record(s)" (and its problems) twice."""
    path = write_lines(tmp_path / "S.jsonl", [record(1), record(2), record(3, chosen="")])
    code, _, err = run_main(capsys, "probe", "--data", str(path), "--model", "length", "--drop-invalid",
                            "--probe", "shuffle", "--out", str(tmp_path / "r"), "--no-progress")
    assert code == 0, err
    assert err.count("Dropped 1 invalid record(s): r3") == 1, err
