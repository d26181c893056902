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
                          "--limit", "3"], capture_output=True, text=True, check=True, cwd=REPO).stdout
    last = dict(line.split("=", 1) for line in out.strip().splitlines()[-3:])
    assert sorted(last) == ["host_ms_per_pair", "simulated_share_3b", "simulated_share_8b"]
    assert float(last["host_ms_per_pair"]) > 0
    assert 0 < float(last["simulated_share_3b"]) <= 1 and 0 < float(last["simulated_share_8b"]) <= 1
    assert "tokenise and fit" in out and "9 pairs" in out


@pytest.mark.slow
def test_gpu_throughput_runs_its_tiny_shape_on_a_cpu(tmp_path):
    subprocess.run([sys.executable, str(REPO / "bench" / "gpu_throughput.py"), "--shapes", "tiny", "--device", "cpu",
                    "--dtype", "float32", "--scale", "0.004", "--compare-pairs", "3", "--rounds", "1", "--limit", "1",
                    "--out", str(tmp_path / "out")], capture_output=True, text=True, check=True, cwd=REPO)
    results = json.loads((tmp_path / "out" / "gpu_throughput.json").read_text())
    tiny = results["shapes"]["tiny"]
    assert results["gemm_flops"] > 0 and tiny["forward_tokens_per_s"] > 0
    assert tiny["pairs"] == 3 and tiny["tokens"] > 0 and set(tiny["compare_s"]) == {"reference loop", "prb",
                                                                                       "prb no cache"}
    text = (tmp_path / "out" / "gpu_throughput.txt").read_text()
    assert "GEMM ceiling" in text and "prb score, command" in text


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
