"""Time a fresh ``prb report`` (an empty store and report folder), and say where the time goes.

Each round runs ``python -m prb_utils report`` in a temporary folder, as ``make report`` does but without
progress bars, and prints the wall time; the CPU seconds of the run (user + system, its child processes
included) and that CPU time divided by the CPUs this process may use, which is the wall time the run cannot
beat on this machine however well its work is spread over the cores; the share of the machine's CPU time that
the hypervisor gave to others meanwhile (``steal``, from ``/proc/stat``; 0 on bare metal); and the load before
the round. Then the seconds of every scoring job (from its ``job.json``: whole seconds) and of the Best-of-N
steps (from ``bon/run.json``); the rest is start-up, model loads and the notebooks. For a job that runs a model,
the tokens its forward passes computed and the rate they ran at (2 x its parameters but the input embeddings
FLOPs per token) as a share of
the machine's float32 matrix-product rate measured before the rounds (``bench/gpu_throughput.py``'s ceiling on
this CPU): the seconds those jobs would need at the ceiling are what no scheduling can take off.

    python bench/report_time.py
    python bench/report_time.py --repeat 2
    python bench/report_time.py -- --bon-n 0          # arguments after -- go to prb report
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
from gpu_throughput import gemm_rate

from prb_utils.models.device import cpu_threads
from prb_utils.store import load_run_metadata


def cpu_times() -> tuple[float, float]:
    """(all CPU time, stolen CPU time) of the machine so far, in clock ticks (``/proc/stat``; zeros elsewhere)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return 0.0, 0.0
    steal = fields[7] if len(fields) > 7 else 0
    return float(sum(fields[:8])), float(steal)


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def matmul_parameters(n_parameters: float, model_source: Any) -> float:
    """The parameters a token's forward pass multiplies by: all but the input embedding table (a lookup), read
    from the model folder's ``config.json`` (``vocab_size`` x ``hidden_size``); all of them when there is none."""
    config = Path(str(model_source)) / "config.json"
    if not config.is_file():
        return n_parameters
    found = json.loads(config.read_text())
    return n_parameters - found.get("vocab_size", 0) * found.get("hidden_size", 0)


def job_seconds(results: Path) -> list[tuple[str, float, float]]:
    """(``model [profile]``, seconds from started to finished, FLOPs of its forward passes or 0) of every
    scoring job of a store, in run order; FLOPs are 2 x matrix parameters x tokens computed (model-free: 0)."""
    jobs = load_run_metadata(results).dropna(subset=["started", "finished"]).sort_values(["started", "model"])
    seconds = pd.to_datetime(jobs["finished"]) - pd.to_datetime(jobs["started"])
    labels = jobs["model"] + " [" + jobs["profile"] + "]"
    flops = [2.0 * matmul_parameters(row["n_parameters"], row["model_source"]) * row["tokens_computed"]
             if pd.notna(row.get("tokens_computed")) and pd.notna(row.get("n_parameters")) else 0.0
             for _, row in jobs.iterrows()]
    return list(zip(labels, seconds.dt.total_seconds(), flops, strict=True))


def one_round(data: str, extra: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="prb-report-time-") as tmp:
        results, reports = Path(tmp) / "results", Path(tmp) / "reports"
        command = [sys.executable, "-m", "prb_utils", "report", "--data", data, "--results", str(results),
                   "--out", str(reports), "--no-progress", *extra]
        env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1")}
        load = os.getloadavg()[0]
        cpu_before, (all_before, steal_before) = children_cpu_seconds(), cpu_times()
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        cpu = children_cpu_seconds() - cpu_before
        all_after, steal_after = cpu_times()
        if done.returncode != 0:
            sys.exit(f"prb report failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
        bon_files = [results / folder / "run.json" for folder in ("bon", "bon-report")]   # a prb bon run, or the report's own
        bon = next((json.loads(f.read_text()).get("timings_s", {}) for f in bon_files if f.exists()), {})
        ticks = all_after - all_before
        return {"wall": wall, "cpu": cpu, "load": load, "jobs": job_seconds(results), "bon": bon,
                "steal": 100 * (steal_after - steal_before) / ticks if ticks else 0.0}


def show(number: int, found: dict[str, Any], cores: int, ceiling: float) -> None:
    print(f"\nround {number}: load before {found['load']:.2f}")
    for label, seconds, flops in found["jobs"]:
        rate = f"  {flops / 1e9:8.0f} GFLOP, {100 * flops / seconds / ceiling:3.0f}% of the ceiling" \
            if flops and seconds else ""
        print(f"  {label:<38} {seconds:6.0f} s{rate}")
    for step, seconds in found["bon"].items():
        print(f"  {'Best-of-N ' + step:<38} {seconds:6.1f} s")
    accounted = sum(s for _, s, _ in found["jobs"]) + sum(found["bon"].values())
    print(f"  {'the rest (start-up, loads, notebooks)':<38} {found['wall'] - accounted:6.0f} s")
    model_jobs = [(s, f) for _, s, f in found["jobs"] if f]
    if model_jobs:
        print(f"  model jobs: {sum(s for s, _ in model_jobs):.0f} s for {sum(f for _, f in model_jobs) / 1e12:.2f} "
              f"TFLOP; at the ceiling {sum(f for _, f in model_jobs) / ceiling:.0f} s")
    print(f"  wall {found['wall']:.1f} s ({found['wall'] / 60:.2f} min); CPU {found['cpu']:.1f} s; "
          f"CPU / {cores} cores {found['cpu'] / cores:.1f} s; steal {found['steal']:.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="sample", help="benchmark source (default: sample)")
    parser.add_argument("--repeat", type=int, default=1, help="fresh reports to time, one after the other")
    parser.add_argument("extra", nargs="*", help="arguments for prb report (after --)")
    args = parser.parse_args()
    import torch

    cores = cpu_threads()
    ceiling = gemm_rate("cpu", torch.float32, n=2048)
    print(f"fresh prb report --data {args.data} {' '.join(args.extra)}".rstrip() + f" on {cores} CPUs; "
          f"ceiling: float32 matrix product {ceiling / 1e9:.0f} GFLOP/s on {torch.get_num_threads()} threads")
    rounds = [one_round(args.data, args.extra) for _ in range(args.repeat)]
    for number, found in enumerate(rounds, 1):
        show(number, found, cores, ceiling)
    if len(rounds) > 1:
        walls = sorted(r["wall"] for r in rounds)
        print(f"\nwall: {', '.join(f'{w:.1f}' for w in walls)} s (median {statistics.median(walls):.1f} s)")


if __name__ == "__main__":
    main()
