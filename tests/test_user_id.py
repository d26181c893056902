"""The user unit from the data: a record's optional ``user_id`` names its user (else the profile's hash), in the
loaded frame, in the keys the store records when it scores, and in the analysis' unit labels."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from prb_utils.analysis.metrics import two_way_labels, unit_labels
from prb_utils.data import load_benchmark, read_benchmark, user_key
from prb_utils.scoring import unit_keys


def record(i: int, question: str, post: str, **extra) -> dict:
    return {"id": f"r{i}", "question": question, "profile": [{"text": post}], "chosen": f"yes {i}",
            "rejected": f"no {i}", **extra}


def write(tmp_path: Path, records: list[dict]) -> str:
    path = tmp_path / "bench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def test_user_id_is_optional_and_loads_as_text(tmp_path):
    frame = load_benchmark(write(tmp_path, [record(1, "Q1", "a", user_id="alice"), record(2, "Q2", "b", user_id=7),
                                            record(3, "Q3", "c")]))
    assert frame["user_id"].iloc[:2].tolist() == ["alice", "7"]
    assert pd.isna(frame["user_id"].iloc[2])
    assert "user_id" not in load_benchmark(write(tmp_path, [record(1, "Q1", "a")])).columns


@pytest.mark.parametrize("bad", [["alice"], "  ", True, 1.5])
def test_a_malformed_user_id_is_one_problem_naming_the_field(tmp_path, bad):
    result = read_benchmark(write(tmp_path, [record(1, "Q1", "a", user_id=bad), record(2, "Q2", "b")]))
    assert len(result.problems) == 1 and result.frame["id"].tolist() == ["r2"]
    problem = str(result.problems[0])
    assert "bench.jsonl:1" in problem and "(id r1)" in problem and "'user_id'" in problem and "\n" not in problem


def test_the_store_and_the_analysis_key_users_by_user_id_then_by_profile(tmp_path):
    frame = load_benchmark(write(tmp_path, [record(1, "Q1", "post a", user_id="alice"),
                                            record(2, "Q2", "post b", user_id="alice"),   # other profile, same user
                                            record(3, "Q1", "post a"),                     # no user_id: the profile
                                            record(4, "Q2", "post a")]))
    keys = unit_keys(frame.to_dict("records"))
    users = {pair: user for pair, (_, user) in keys.items()}
    assert users["bench/r1"] == users["bench/r2"] == user_key([], "alice")
    assert users["bench/r3"] == users["bench/r4"] == user_key([{"text": "post a"}]) != users["bench/r1"]
    labels = unit_labels(frame, frame, "user")
    assert labels.tolist() == [users[f"bench/r{i}"] for i in range(1, 5)]   # the analysis draws the same users
    question, user = two_way_labels(frame, frame)
    assert user.tolist() == labels.tolist()
    assert question[0] == question[2] != question[1] == question[3]
    cells = unit_labels(frame, frame, "question+user")
    assert cells.tolist() == (question + "+" + user).tolist() and cells.nunique() == 4
