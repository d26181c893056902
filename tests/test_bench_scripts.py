"""The GPU benches of bench/ run end to end on a CPU at tiny sizes, so that they do not rot between GPU runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from synthetic_benchmark import write_benchmark  # noqa: E402


@pytest.mark.slow
def test_host_overhead_prints_its_machine_readable_lines(tmp_path):
    data = write_benchmark(tmp_path / "synthetic", scale=0.004)
    out = subprocess.run([sys.executable, str(REPO / "bench" / "host_overhead.py"), "--data", str(data),
                          "--limit", "1", "--profile", "top3,full", "--cores", "1,all"],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    last = [dict(field.split("=", 1) for field in line.split()) for line in out.strip().splitlines()[-4:]]
    assert [(line["profile"], line["cores"]) for line in last] == [("top3", "1"), ("full", "1"), ("top3", "all"),
                                                                    ("full", "all")]
    for line in last:
        assert float(line["host_ms_per_pair"]) > 0
        assert 0 < float(line["simulated_share_3b"]) <= 1 and 0 < float(line["simulated_share_8b"]) <= 1
    assert "tokenise and fit" in out   # the stages, measured on one core
    assert "3 pairs" in out and "calibrated in" in out
    assert "3 pairs cut to the 8192-token context" in out   # full profiles are longer than the context


@pytest.mark.slow
def test_gpu_throughput_runs_its_tiny_shape_on_a_cpu(tmp_path):
    subprocess.run([sys.executable, str(REPO / "bench" / "gpu_throughput.py"), "--shapes", "tiny", "--device", "cpu",
                    "--dtype", "float32", "--scale", "0.004", "--compare-pairs", "3", "--rounds", "1", "--limit", "1",
                    "--full-limit", "1", "--context", "1024", "--out", str(tmp_path / "out")],
                   capture_output=True, text=True, check=True, cwd=REPO)
    results = json.loads((tmp_path / "out" / "gpu_throughput.json").read_text())
    tiny = results["shapes"]["tiny"]
    assert results["gemm_flops"] > 0 and tiny["forward_tokens_per_s"] > 0
    assert sorted(tiny["runs"]) == ["classifier/full", "classifier/top3", "judge/full", "judge/top3"]
    for run in tiny["runs"].values():
        assert run["pairs"] == 3 and run["tokens"] > 0
        assert set(run["compare_s"]) == {"reference loop", "prb", "prb no cache"}
        assert 0 < run["device_busy_s"]["prb"] <= run["compare_s"]["prb"]
    assert tiny["runs"]["classifier/full"]["tokens"] <= 3 * 2 * 1024   # cut to the context
    text = (tmp_path / "out" / "gpu_throughput.txt").read_text()
    assert "GEMM ceiling" in text and "prb score, command" in text and "device busy" in text


def test_verdict_size_simulates_the_unclustered_test_over_rejecting_and_the_clustered_one_not():
    """A small run of bench/verdict_size.py: at ICC 0.7 the pairs-as-independent McNemar test rejects a true
    null far more often than 5%, and the clustered test does not (300 benchmarks: a loose band, not a timing)."""
    out = subprocess.run([sys.executable, str(REPO / "bench" / "verdict_size.py"), "--sims", "300", "--icc", "0.7"],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    line = dict(field.split("=") for field in out.strip().splitlines()[-1].split())
    assert line["icc"] == "0.7"
    assert float(line["size_unclustered"]) > 0.25
    assert float(line["size_clustered"]) < 0.09
    assert 0 <= float(line["power_clustered"]) <= float(line["power_unclustered"]) <= 1


def test_verdict_size_recurring_users_prints_both_tests_and_the_two_way_keeps_its_size():
    """A small run of the recurring-users scenario (users' pairs spread over the questions): one machine-readable
    line per ICC with the size and power of the test by question and of the two-way test (300 benchmarks: a
    loose band on the two-way size, not a timing)."""
    out = subprocess.run([sys.executable, str(REPO / "bench" / "verdict_size.py"), "--questions", "20", "--users",
                          "20", "--pairs-per-user", "6", "--sims", "300", "--icc", "0.0", "0.7"],
                         capture_output=True, text=True, check=True, cwd=REPO).stdout
    header, *lines = out.strip().splitlines()
    assert "users=20" in header and "pairs_per_user=6" in header
    rows = [dict(field.split("=") for field in line.split()) for line in lines]
    assert [row["icc"] for row in rows] == ["0.0", "0.7"]
    for row in rows:
        assert set(row) == {"icc", "users", "size_clustered", "size_two_way", "power_clustered", "power_two_way"}
        assert float(row["size_two_way"]) < 0.09
        assert 0 < float(row["power_two_way"]) <= 1 and 0 < float(row["power_clustered"]) <= 1
