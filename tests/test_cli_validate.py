"""`prb validate`: per-subset counts on good data, one line per problem and exit 2 on bad data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from prb_utils.cli import main


def test_validate_sample_prints_counts(capsys):
    assert main(["validate", "sample"]) == 0
    out = capsys.readouterr().out
    for subset in ("Art_and_Entertainment", "Lifestyle_and_Personal_Development", "Society_and_Culture", "total"):
        assert subset in out


def _bad_file(tmp_path: Path) -> Path:
    good = {"id": "a", "question": "Q?", "chosen": "x", "rejected": "y"}
    lines = [
        json.dumps(good),
        '{"id": "b", "question": "trunc',
        json.dumps({"id": "c", "question": "Q?", "rejected": "y"}),
        json.dumps(dict(good, chosen="z")),
        json.dumps({"id": "d", "question": "Q?", "chosen": "same", "rejected": "same"}),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_validate_bad_file_exits_2_with_one_line_per_problem(tmp_path: Path, capsys):
    path = _bad_file(tmp_path)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"4 problem(s) in {path}."
    assert f"{path}:2: not valid JSON" in err[0]
    assert f"{path}:3 (id c): field 'chosen': missing" == err[1]
    assert "(id a): field 'id': duplicate id" in err[2]
    assert f"{path}:5 (id d): field 'rejected': identical to 'chosen'" == err[3]


def test_cli_user_errors_have_no_traceback(tmp_path: Path):
    cases = [
        ["validate", str(_bad_file(tmp_path))],
        ["validate", str(tmp_path / "missing.jsonl")],
        ["score", "--data", "sample", "--model", "length", "--profile", "top0", "--out", str(tmp_path / "r")],
    ]
    for args in cases:
        proc = subprocess.run([sys.executable, "-m", "prb_utils", *args], capture_output=True, text=True)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stderr.strip()
