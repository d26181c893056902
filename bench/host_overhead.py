"""Host work per pair, and how close prb comes to a device it never makes wait, without a GPU.

On the full-size synthetic benchmark (``bench/synthetic_benchmark.py``: real record sizes) and a tiny random
Llama model with the SmolLM2 tokenizer (the offline alias, so token counts are real) and an 8,192-token
context (so ``full``, whose profiles run to 25-35k tokens, is cut to fit, as for an 8k classifier), for each
profile condition (``top3`` and ``full`` by default) and each CPU setting (pinned to ONE core, and on all the
cores this process may use, where ``prepare``'s thread competes with the device's for the interpreter):

1. the host milliseconds per pair of each stage, measured apart (pinned runs): retrieval with the RM-input
   text and its hash; tokenising and fitting; the batch plan; a chunk's run with a device of infinite speed
   (padding, head, rows); the store write;
2. ``host_ms_per_pair``: the whole ``score_benchmark`` of those pairs with that infinitely fast device,
   divided by the pairs: every piece of host work, retrieval and store included, with nothing to hide it;
3. a *simulated device*: the decoder's forward pass replaced by a wait of (tokens in the batch / rate)
   seconds that leaves the CPU free (``time.sleep``), at the forward-pass rates measured on an H200 in
   bfloat16 for the Llama-3.2-3B (72k tokens/s) and Llama-3.1-8B (34k tokens/s) shapes. The model is
   calibrated on that device first, as on a GPU (``DecoderRunner.calibrate``: the pass overhead, the prompt
   cache's decision for 1,024-token prompts), and every other length bucket is timed during the run, before
   its first batch, as ``prb score`` does (that time counts against the share). The device's bound is the time
   it is busy with the scoring's own passes (the padded tokens prb asks for, prompt cache included, at that
   rate); the share is that bound over the end-to-end wall time of ``score_benchmark``: 1.0 means the
   device never waited and nothing else cost time.

One machine-readable line per condition and CPU setting, at the end:
``profile=P cores=C host_ms_per_pair=X simulated_share_3b=Y simulated_share_8b=Z``.

    python bench/host_overhead.py                          # 200 pairs per subset, classifier, top3 and full
    python bench/host_overhead.py --profile full --cores 1 # one condition, pinned only
    python bench/host_overhead.py --limit 0 --kind judge   # every pair, the judge
    python bench/host_overhead.py --prb /path/to/other/checkout --skip-stages   # time another prb (before/after)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
if "--prb" in sys.argv[:-1]:   # the prb to time: another checkout (e.g. the code before a change)
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--prb") + 1]).resolve()))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
CONTEXT = 8192   # shorter than a full profile: full pairs are cut to fit

RATES = {"3b": 72_000.0, "8b": 34_000.0}   # forward-pass tokens/s on one H200, bf16 (README, performance)


class SimulatedDevice:
    """Stands in for a decoder (``base_model``): waits ``tokens / rate`` seconds without using the CPU and
    returns zero hidden states of the right shape, with a one-head, one-dimension KV cache so that the
    prompt-cache path runs as it does on a real model. ``rate=None``: a device of infinite speed."""

    def __init__(self, hidden_size: int, rate: float | None) -> None:
        self.hidden_size = hidden_size
        self.rate = rate
        self.busy_s = 0.0
        self.tokens = 0
        self.passes = 0

    def __call__(self, input_ids: Any, past_key_values: Any = None, use_cache: bool = False, **_: Any) -> Any:
        import torch
        from transformers import DynamicCache

        rows, width = input_ids.shape
        self.tokens += rows * width
        self.passes += 1
        if self.rate:
            seconds = rows * width / self.rate
            self.busy_s += seconds
            time.sleep(seconds)
        cache = None
        if use_cache:
            cache = past_key_values if past_key_values is not None else DynamicCache()
            zeros = torch.zeros(rows, 1, width, 1)
            cache.update(zeros, zeros, 0)
        return SimpleNamespace(last_hidden_state=torch.zeros(rows, width, self.hidden_size), past_key_values=cache)


def tiny_model(kind: str, folder: Path) -> Path:
    """A one-layer random Llama (hidden size 16) saved with the SmolLM2 tokenizer, as ``kind`` needs it."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification

    from prb_utils.models.aliases import resolve_alias

    target = folder / kind
    if (target / "config.json").is_file():
        return target
    tokenizer = AutoTokenizer.from_pretrained(str(resolve_alias("smollm2", "judge")))
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=CONTEXT,
                         pad_token_id=tokenizer.pad_token_id or 0, num_labels=1)
    model = LlamaForSequenceClassification(config) if kind == "classifier" else LlamaForCausalLM(config)
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    return target


def gpu_shaped(rm: Any) -> None:
    """Plan and batch as on a CUDA device: its token budget and forward-pass overhead, torch's threads left
    alone (the CPU thread check is for CPU scoring)."""
    from prb_utils.models.hf import DEFAULT_BATCH_TOKENS
    from prb_utils.models.lm import FORWARD_OVERHEAD, CostModel

    rm.batcher.budget = DEFAULT_BATCH_TOKENS["cuda"]
    rm.runner.cost = CostModel(FORWARD_OVERHEAD["cuda"])
    rm.runner.threads = None


def use_cores(setting: str, all_cpus: set[int]) -> str:
    """Pin this process to one core (``1``) or give it every core it may use (``all``), with torch's threads
    to match; returns a description."""
    import torch

    cpus = {min(all_cpus)} if setting == "1" else set(all_cpus)
    os.sched_setaffinity(0, cpus)
    torch.set_num_threads(len(cpus))
    return f"CPU core {min(cpus)} alone" if len(cpus) == 1 else f"all {len(cpus)} CPU cores"


def clear_bm25_cache() -> None:
    """Empty BM25's cache, so that retrieval is timed from cold: in ``prb_utils.bm25`` (in ``prb_utils.profile``
    before it moved; none in a prb before the cache)."""
    import importlib

    for name in ("prb_utils.bm25", "prb_utils.profile"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "_bm25_cached"):
            module._bm25_cached.cache_clear()
            return


def stages(rm: Any, frame: Any, profile: str, out: Path) -> dict[str, float]:
    """Host seconds of each stage for every pair of ``frame``, measured apart (in this order)."""
    import pandas as pd

    from prb_utils import scoring
    from prb_utils.retrieval import retriever_from_label
    from prb_utils.store import JobStore

    records = frame.to_dict("records")
    found: dict[str, float] = {}
    clear_bm25_cache()
    start = time.perf_counter()
    pairs = scoring._build_pairs(records, profile, retriever_from_label("bm25"))
    for pair in pairs:
        _ = pair.hash   # built lazily in a run: here at once, to be timed
    found["retrieval, RM input, hash"] = time.perf_counter() - start
    inputs = scoring._inputs(pairs)
    start = time.perf_counter()
    sequences = rm._sequences_many(inputs)
    found["tokenise and fit"] = time.perf_counter() - start
    start = time.perf_counter()
    plan = rm._plan([s[0] for s in sequences])
    found["batch plan"] = time.perf_counter() - start
    prepared = type(rm.prepare(inputs[:1]))(sequences, plan)
    real, rm.runner.decoder = rm.runner.decoder, SimulatedDevice(rm.model.config.hidden_size, None)
    try:
        start = time.perf_counter()
        scores = rm.run(prepared)
        found["run: padding, head, scores (infinitely fast device)"] = time.perf_counter() - start
    finally:
        rm.runner.decoder = real
    start = time.perf_counter()
    rows = [scoring._row(p, s, job="bench", spec=rm.spec, kind=rm.kind, profile=profile)
            for p, s in zip(pairs, scores, strict=True)]
    store = JobStore(out, {"model": "bench", "profile": profile})
    with store.writing():
        store.write_part(pd.DataFrame(rows))
    found["rows and store write"] = time.perf_counter() - start
    return found


def end_to_end(rm: Any, frame: Any, profile: str, rate: float | None, out: Path) -> dict[str, Any]:
    """``score_benchmark`` over ``frame`` on a fresh store, with the simulated device (calibrated on it first
    where it has a rate): wall seconds, the device's busy seconds for the scoring's passes, and counts."""
    from prb_utils.models.lm import FORWARD_OVERHEAD, CostModel
    from prb_utils.scoring import score_benchmark

    runner = rm.runner
    device = SimulatedDevice(rm.model.config.hidden_size, rate)
    real, runner.decoder = runner.decoder, device
    clear_bm25_cache()
    for name in ("cache_decisions", "bucket_calibrations"):   # (prb before per-bucket calibration has none)
        getattr(runner, name, {}).clear()
    runner.calibration, runner.kv_reuse = None, rm.kv_reuse
    if hasattr(runner, "calibrating"):
        runner.calibrating = False
    found: dict[str, Any] = {"calibration_s": 0.0}
    try:
        if rate:
            start = time.perf_counter()
            runner.calibrate()   # as at load on a GPU
            found["calibration_s"] = time.perf_counter() - start
        else:
            runner.cost = CostModel(FORWARD_OVERHEAD["cuda"])
        padded, passes = runner.tokens_padded, runner.forward_passes
        start = time.perf_counter()
        rows = score_benchmark(frame, [rm], [profile], out=out, progress=False)
        found["wall_s"] = time.perf_counter() - start
    finally:
        runner.decoder = real
    if len(rows) != len(frame):
        raise SystemExit(f"scored {len(rows)} rows for {len(frame)} pairs")
    found["tokens"] = runner.tokens_padded - padded
    found["passes"] = runner.forward_passes - passes
    found["bound_s"] = found["tokens"] / rate if rate else 0.0
    found["truncated"] = int(rows["truncated"].sum()) if "truncated" in rows else None
    found["calibration"] = runner.calibration_record() if hasattr(runner, "calibration_record") else \
        runner.calibration
    return found


def measure(rm: Any, frame: Any, profile: str, cores: str, work: Path, *, stages_too: bool) -> dict[str, float]:
    if stages_too:
        found = stages(rm, frame, profile, work / f"stages-{profile}-{cores}")
        print(f"{'stage (measured apart)':<55}{'ms per pair':>12}")
        for name, seconds in found.items():
            print(f"{name:<55}{1000 * seconds / len(frame):>12.2f}")
        print(f"{'sum of the stages':<55}{1000 * sum(found.values()) / len(frame):>12.2f}")
    host = end_to_end(rm, frame, profile, None, work / f"host-{profile}-{cores}")
    host_ms = 1000 * host["wall_s"] / len(frame)
    print(f"score_benchmark with an infinitely fast device: {host['wall_s']:.2f} s, {host_ms:.2f} ms per pair; "
          f"{host['tokens'] / len(frame):.0f} tokens computed per pair (padding included) in {host['passes']} "
          f"forward passes; {host['truncated']} pairs cut to the {CONTEXT}-token context")
    line = {"host_ms_per_pair": host_ms}
    for name, rate in RATES.items():
        sim = end_to_end(rm, frame, profile, rate, work / f"sim-{name}-{profile}-{cores}")
        line[f"simulated_share_{name}"] = sim["bound_s"] / sim["wall_s"]
        calibration = sim["calibration"] or {}
        buckets = calibration.get("buckets") or {}
        decided = ", ".join(f"{b}: {'cache' if v['prompt_cache_pays'] else 'whole'} " + (
            f"({v['prompt_cache_s'] / v['whole_s']:.2f})" if "whole_s" in v else
            f"(clear from the load's: {v.get('predicted_time_share')})") for b, v in buckets.items()) or \
            f"cache pays: {calibration.get('prompt_cache_pays')}"
        print(f"simulated {name} device ({rate / 1000:.0f}k tokens/s): calibrated in {sim['calibration_s']:.2f} s "
              f"(overhead {calibration.get('forward_overhead_tokens')} tokens; prompt-length buckets {decided}); "
              f"bound {sim['bound_s']:.2f} s ({len(frame) / sim['bound_s']:.2f} pairs/s), end to end "
              f"{sim['wall_s']:.2f} s ({len(frame) / sim['wall_s']:.2f} pairs/s): "
              f"{100 * line[f'simulated_share_{name}']:.1f}% of the bound")
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="a synthetic benchmark folder (default: written here, full size)")
    parser.add_argument("--limit", type=int, default=200, help="pairs per subset (0: every pair)")
    parser.add_argument("--profile", default="top3,full", help="comma-separated profile conditions")
    parser.add_argument("--cores", default="1,all", help="comma-separated: 1 (pinned to one core), all")
    parser.add_argument("--kind", default="classifier", choices=["classifier", "judge", "implicit"])
    parser.add_argument("--no-kv-reuse", action="store_true", help="without the shared-prompt cache")
    parser.add_argument("--skip-stages", action="store_true",
                        help="only the end-to-end runs (e.g. to time a prb from before the stages had their API)")
    parser.add_argument("--prb", default=None, help="the prb checkout to time (default: this one)")
    args = parser.parse_args(argv)

    import prb_utils
    from prb_utils.data import load_benchmark
    from prb_utils.models import load_model

    all_cpus = set(os.sched_getaffinity(0))
    lines = []
    with tempfile.TemporaryDirectory(prefix="prb-host-") as tmp:
        work = Path(tmp)
        data = args.data
        if data is None:
            from synthetic_benchmark import write_benchmark

            data = str(write_benchmark(work / "synthetic"))
        frame = load_benchmark(data, limit=args.limit or None)
        folder = tiny_model(args.kind, work / "models")
        for cores in [c.strip() for c in args.cores.split(",") if c.strip()]:
            where = use_cores(cores, all_cpus)
            rm = load_model(f"{args.kind}:{folder}", device="cpu",
                            **({"kv_reuse": False} if args.no_kv_reuse else {}))
            gpu_shaped(rm)
            for profile in [p.strip() for p in args.profile.split(",") if p.strip()]:
                print(f"\n{len(frame)} pairs of {data} ({profile}), {args.kind} with the SmolLM2 tokenizer and a "
                      f"{CONTEXT}-token context, on {where}, batched as on CUDA; prompt cache "
                      f"{'off' if args.no_kv_reuse else 'on'}; prb from {Path(prb_utils.__file__).parent.parent}")
                found = measure(rm, frame, profile, cores, work, stages_too=not args.skip_stages and cores == "1")
                counts = getattr(rm, "fit_counts", None)
                if counts:
                    print(f"fitting so far (pairs): {counts}")
                lines.append(f"profile={profile} cores={cores} " + " ".join(
                    f"{k}={v:.3f}" if k != "host_ms_per_pair" else f"{k}={v:.2f}" for k, v in found.items()))
    print()
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
