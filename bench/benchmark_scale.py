"""prb at the benchmark's real size: load + validate, BM25 retrieval, and scoring, with peak memory.

Generates the synthetic benchmark of ``bench/synthetic_benchmark.py`` (2,830 records, dozens of profile
posts per user, about 116 KB per record) unless ``--data`` names one, then times each stage in this process:

1. ``load_benchmark`` (read + validate every record),
2. BM25 retrieval of the ``top{K}`` posts for every record (the RM user message),
3. ``score_benchmark`` for each model under that condition into a fresh store (length, lexical and
   embedding:minilm by default), and a re-run that reads everything back from the store.

Prints one line per stage (seconds, records/s or pairs/s, peak resident memory so far).

    python bench/benchmark_scale.py                      # full size, about 10 minutes on 2 cores
    python bench/benchmark_scale.py --scale 0.1          # a tenth of the records
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic_benchmark import write_benchmark  # noqa: E402

from prb_utils.data import load_benchmark  # noqa: E402
from prb_utils.profile import rm_user_message  # noqa: E402
from prb_utils.scoring import score_benchmark  # noqa: E402


def peak_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stage(name: str, seconds: float, count: int, unit: str) -> None:
    print(f"{name:<34} {seconds:8.1f} s  {count / seconds:9.1f} {unit}/s  peak {peak_mb():7.0f} MB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="an existing benchmark folder (default: generate the synthetic one)")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the real record counts")
    parser.add_argument("--profile", default="top3", help="profile condition to retrieve and score")
    parser.add_argument("--model", action="append", help="model spec (repeatable)")
    args = parser.parse_args()
    models = args.model or ["length", "lexical", "embedding:minilm"]
    work = Path(tempfile.mkdtemp(prefix="prb-scale-"))
    if args.data:
        folder = Path(args.data)
    else:
        start = time.perf_counter()
        folder = write_benchmark(work / "data", scale=args.scale)
        size = sum(p.stat().st_size for p in folder.glob("*.jsonl"))
        print(f"generated {size / 1e6:.0f} MB in {time.perf_counter() - start:.1f} s into {folder}")
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}")

    start = time.perf_counter()
    data = load_benchmark(str(folder))
    stage(f"load + validate ({len(data)} records)", time.perf_counter() - start, len(data), "records")
    posts = data["profile"].map(len)
    print(f"  profile posts per record: median {posts.median():.0f}, max {posts.max()}")

    start = time.perf_counter()
    for record in data.to_dict("records"):
        rm_user_message(record, args.profile)
    stage(f"BM25 {args.profile} retrieval", time.perf_counter() - start, len(data), "records")

    store = work / "results"
    for spec in models:
        start = time.perf_counter()
        score_benchmark(data, [spec], [args.profile], out=store, progress=False)
        stage(f"score {spec} ({args.profile})", time.perf_counter() - start, len(data), "pairs")
    start = time.perf_counter()
    score_benchmark(data, models, [args.profile], out=store, progress=False)
    stage("re-run, all read from the store", time.perf_counter() - start, len(data) * len(models), "pairs")


if __name__ == "__main__":
    main()
