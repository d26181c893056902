"""Embedding scoring of full profiles: prb against a plain transformers loop on the same pairs.

prb runs as a user runs it: :func:`prb_utils.score_benchmark` (what ``prb score`` calls) with
``embedding:minilm``, profile ``full``, a fresh store. The reference is the loop one writes the obvious way with
transformers: 16 pairs at a time in file order, the user turn (:func:`prb_utils.profile.rm_user_message`,
``full``) and each answer tokenized with truncation at the model's maximum (the user turn keeps its end, an
answer its start, as prb cuts them), mean pooling under the attention mask, cosine of the user turn with each
answer. Each method runs in a fresh process that times its model load and scoring (the data is loaded before
the clock starts); the methods alternate over ``--rounds`` rounds, their order rotating. The script prints each
run's seconds, the medians, the ratio reference / prb (above 1: prb is faster) and the largest score difference,
and stops with an error when the scores differ by more than ``TOLERANCE``.

The pairs come from the synthetic benchmark at its real size (``bench/synthetic_benchmark.py``: 45 posts of 380
words per user, about 17,600 tokens of profile per user turn, cut to MiniLM's 256), the first ``--pairs / 3``
of each subset, unless ``--data`` names other data.

    python bench/embedding_vs_reference.py                        # 120 pairs, 3 rounds
    python bench/embedding_vs_reference.py --pairs 300 --rounds 3
    python bench/embedding_vs_reference.py --prb /path/to/other/checkout   # adds that prb as "before"
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if "--prb" in sys.argv[:-1]:   # the prb to time: another checkout (e.g. the code before a change)
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--prb") + 1]).resolve()))
else:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROFILE = "full"
REFERENCE_BATCH = 16   # pairs per step of the reference loop
TOLERANCE = 1e-5       # largest score difference (float32 cosine) the methods may show


def reference_scores(records: list[dict[str, Any]], folder: str) -> dict[str, tuple[float, float]]:
    """The reference loop: ``{subset/id: (cosine with chosen, cosine with rejected)}``, loading the model."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from prb_utils.profile import rm_user_message

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    max_length = json.loads((Path(folder) / "sentence_bert_config.json").read_text())["max_seq_length"]

    def embed(texts: list[str], keep: str) -> Any:
        tokenizer.truncation_side = keep
        batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.inference_mode():
            states = model(**batch).last_hidden_state
        mask = batch["attention_mask"][:, :, None].to(states.dtype)
        return torch.nn.functional.normalize((states * mask).sum(1) / mask.sum(1), dim=-1)

    scores = {}
    for start in range(0, len(records), REFERENCE_BATCH):
        chunk = records[start:start + REFERENCE_BATCH]
        user = embed([rm_user_message(r, PROFILE) for r in chunk], "left")
        chosen, rejected = embed([r["chosen"] for r in chunk], "right"), embed([r["rejected"] for r in chunk], "right")
        for r, c, j in zip(chunk, (user * chosen).sum(1).tolist(), (user * rejected).sum(1).tolist(), strict=True):
            scores[f"{r['subset']}/{r['id']}"] = (c, j)
    return scores


def prb_scores(data: Any) -> dict[str, tuple[float, float]]:
    """prb's scores, as ``prb score --model embedding:minilm --profile full`` computes them (a fresh store)."""
    from prb_utils import score_benchmark

    with tempfile.TemporaryDirectory(prefix="prb-emb-") as out:
        rows = score_benchmark(data, ["embedding:minilm"], [PROFILE], out=out, progress=False)
    return {f"{r.subset}/{r.id}": (float(r.score_chosen), float(r.score_rejected)) for r in rows.itertuples()}


def worker(method: str, data_dir: str, limit: int, out: str) -> None:
    """One timed run of ``method`` (``reference`` or ``prb``) in this process; writes seconds and scores."""
    from prb_utils.data import load_benchmark
    from prb_utils.models.aliases import resolve_alias

    data = load_benchmark(data_dir, limit=limit)
    folder = str(resolve_alias("minilm", "embedding"))
    started, cpu = time.perf_counter(), time.process_time()
    scores = reference_scores(data.to_dict("records"), folder) if method == "reference" else prb_scores(data)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    Path(out).write_text(json.dumps({"seconds": seconds, "cpu": cpu, "scores": scores}))


def run_once(method: str, data_dir: str, limit: int, checkout: Path, work: Path) -> dict[str, Any]:
    """``method`` timed in a fresh process importing prb from ``checkout``."""
    out = work / f"{method}-{time.monotonic_ns()}.json"
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", method, "--data", data_dir,
               "--limit", str(limit), "--result", str(out), "--prb", str(checkout)]
    subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": str(checkout)})
    return json.loads(out.read_text())


def largest_difference(a: dict[str, list[float]], b: dict[str, list[float]]) -> float:
    """The largest absolute score difference between two runs' scores (inf when their pairs differ)."""
    if set(a) != set(b):
        return math.inf
    return max(abs(x - y) for k in a for x, y in zip(a[k], b[k], strict=True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=120, help="pairs to score (a third from each subset)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of every method")
    parser.add_argument("--data", default=None, help="benchmark to score (default: the synthetic one, full size)")
    parser.add_argument("--prb", default=None, help="another prb checkout to time as well, as 'before'")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.data, args.limit, args.result)
        return
    limit = max(1, math.ceil(args.pairs / 3))
    methods = {"reference": ROOT, "prb": ROOT, **({"before": Path(args.prb).resolve()} if args.prb else {})}
    with tempfile.TemporaryDirectory(prefix="prb-emb-bench-") as tmp:
        work = Path(tmp)
        data_dir = args.data
        if data_dir is None:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from synthetic_benchmark import SUBSETS, write_benchmark

            data_dir = str(write_benchmark(work / "data", scale=limit / min(SUBSETS.values())))
        times: dict[str, list[float]] = {m: [] for m in methods}
        found: dict[str, dict[str, Any]] = {}
        names = list(methods)
        for round_ in range(args.rounds):
            order = names[round_ % len(names):] + names[:round_ % len(names)]
            for method in order:
                result = run_once("reference" if method == "reference" else "prb", data_dir, limit,
                                  methods[method], work)
                times[method].append(result["seconds"])
                found[method] = result["scores"]
                print(f"round {round_ + 1} {method:9s} {result['seconds']:7.2f} s wall, {result['cpu']:7.2f} s CPU,"
                      f" load {os.getloadavg()[0]:.1f}", flush=True)
    report(times, found, len(found["reference"]))


def report(times: dict[str, list[float]], found: dict[str, dict[str, Any]], n_pairs: int) -> None:
    """Print the medians, the ratios against the reference and the score differences; fail on a difference."""
    medians = {m: statistics.median(t) for m, t in times.items()}
    print(f"\n{n_pairs} pairs, profile {PROFILE}, embedding:minilm, {os.cpu_count()} CPUs")
    for method, median in medians.items():
        rounds = [r / t for r, t in zip(times["reference"], times[method], strict=True)]
        print(f"{method:9s} median {median:7.2f} s; reference / {method}: {medians['reference'] / median:.2f}x "
              f"(median of the rounds' ratios {statistics.median(rounds):.2f}x)")
    for method in found:
        if method != "reference":
            diff = largest_difference(found["reference"], found[method])
            print(f"largest score difference, reference vs {method}: {diff:.2e}")
            if not diff <= TOLERANCE:
                raise SystemExit(f"{method} and the reference disagree by {diff:.2e} (> {TOLERANCE})")


if __name__ == "__main__":
    main()
