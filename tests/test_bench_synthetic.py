"""The synthetic benchmark of bench/ has the real shape: three subsets in proportion, long profiles, valid."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from synthetic_benchmark import POSTS_PER_USER, SUBSETS, write_benchmark  # noqa: E402

from prb_utils.data import load_benchmark  # noqa: E402


def test_synthetic_benchmark_validates_with_the_real_subsets_and_profile_sizes(tmp_path):
    folder = write_benchmark(tmp_path, scale=0.004)
    data = load_benchmark(str(folder))
    counts = data.groupby("subset").size().to_dict()
    assert counts == {name: round(n * 0.004) for name, n in SUBSETS.items()}
    assert set(data["profile"].map(len)) == {POSTS_PER_USER}
    first = (folder / "Art_and_Entertainment.jsonl").read_text(encoding="utf-8").splitlines()[0]
    assert 90_000 < len(first.encode()) < 150_000  # the real records run to about 116 KB
    assert json.loads(first)["id"] == data.iloc[0]["id"]


def test_the_same_seed_gives_the_same_benchmark(tmp_path):
    a = write_benchmark(tmp_path / "a", scale=0.002, posts=2, post_words=5, seed=3)
    b = write_benchmark(tmp_path / "b", scale=0.002, posts=2, post_words=5, seed=3)
    c = write_benchmark(tmp_path / "c", scale=0.002, posts=2, post_words=5, seed=4)
    read = lambda folder: [p.read_text() for p in sorted(folder.glob("*.jsonl"))]  # noqa: E731
    assert read(a) == read(b) != read(c)
