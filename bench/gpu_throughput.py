"""GPU scoring throughput against the machine's own ceiling, offline, in one command (about 12 minutes on an H200).

For each model shape (random weights of real shapes, so compute and memory are real; the SmolLM2 tokenizer
and chat template from the offline alias, so token counts are real; an 8,192-token context by default, so
``full``, whose profiles run to 25-35k tokens, is cut to fit, as for an 8k RM), on the full-size synthetic
benchmark (``bench/synthetic_benchmark.py``), for each kind (``classifier`` and ``judge``) and each profile
condition (``top3`` and ``full``):

- the machine's bf16 GEMM rate, measured in the same run (the ceiling every share below is of);
- ``prb score`` end to end, as a user runs it (a subprocess: data and model loading included), with the
  scoring seconds from the job's metadata and its calibration (the pass overhead, and the prompt cache's
  decision per prompt-length bucket, with the timings it came from);
- in one process, on the same pairs and the same loaded model: the plain forward pass in a loop (batches of
  8 to 32 x 2048 random tokens), the reference-style loop (file order, 8 pairs a batch, padded; as the
  benchmark's scripts score), prb, and prb without the prompt cache; for prb, the device's busy seconds
  (CUDA events around every forward pass; on a CPU the passes' own seconds) and their share of the wall time:
  what the device did, start-up and host work excluded;
- GPU utilisation sampled twice a second while ``prb score`` runs (``nvidia-smi``) and peak memory.

Rates are *effective*: the tokens of the pairs' whole sequences (chosen and rejected, or both judge orders,
unpadded) per second, and FLOP/s = 2 x parameters x those tokens plus attention's 2 x layers x hidden x
length^2 per sequence (what grows with length: about 1.5x the linear count at 35k tokens for the 8B shape),
so a method that computes less (the prompt cache) can pass the plain forward pass. Output:
``OUT/gpu_throughput.txt`` (the table), ``OUT/gpu_throughput.json`` and ``OUT/gpu_util.csv``.

    python bench/gpu_throughput.py --out gpu-bench                        # 3b and 8b
    python bench/gpu_throughput.py --shapes tiny --device cpu --dtype float32 --scale 0.01 --compare-pairs 8
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from score_throughput import naive_classifier, naive_judge  # noqa: E402
from synthetic_benchmark import write_benchmark  # noqa: E402

#: Llama shapes (the vocabulary is the SmolLM2 tokenizer's): Llama-3.2-3B, Llama-3.1-8B, and a tiny one to
#: check this script on a CPU.
SHAPES: dict[str, dict[str, Any]] = {
    "3b": dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28, num_attention_heads=24,
               num_key_value_heads=8, tie_word_embeddings=True),
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, tie_word_embeddings=False),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, tie_word_embeddings=False),
}
NAIVE_PAIRS_PER_BATCH = 8
NAIVE = {"classifier": naive_classifier, "judge": naive_judge}


def synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def gemm_rate(device: str, dtype: Any, *, n: int | None = None, repeat: int = 20) -> float:
    """FLOP/s of a square matrix product of size ``n`` (8192 on a GPU) in ``dtype``: the machine's ceiling."""
    import torch

    n = n or (8192 if device.startswith("cuda") else 1024)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    synchronize(device)
    start = time.perf_counter()
    for _ in range(repeat):
        a @ b
    synchronize(device)
    return 2 * n**3 * repeat / (time.perf_counter() - start)


def build_model(shape: str, folder: Path, device: str, dtype: Any, *, kind: str = "classifier",
                context: int = 8192) -> Path:
    """A Llama of ``shape`` with random weights (made on ``device``), saved with the SmolLM2 tokenizer: a
    LlamaForSequenceClassification for ``classifier``, a LlamaForCausalLM for ``judge``; ``context`` positions."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification

    from prb_utils.models.aliases import resolve_alias

    tokenizer = AutoTokenizer.from_pretrained(str(resolve_alias("smollm2", "judge")))
    config = LlamaConfig(vocab_size=len(tokenizer), max_position_embeddings=context, rope_theta=500000.0,
                         pad_token_id=tokenizer.pad_token_id or 0, num_labels=1, **SHAPES[shape])
    torch.manual_seed(0)
    with torch.device(device):
        model = (LlamaForSequenceClassification if kind == "classifier" else LlamaForCausalLM)(config).to(dtype)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return folder


def sequence_flops(params: int, config: Any, lengths: list[int]) -> float:
    """FLOPs of running sequences of these lengths whole: 2 x parameters per token, plus causal attention's
    2 x layers x hidden x length^2 per sequence (scores and weighted values, over half the square)."""
    return 2.0 * params * sum(lengths) + 2.0 * config.num_hidden_layers * config.hidden_size * sum(n * n for n in lengths)


class DeviceTimer:
    """Stands in for a runner's decoder and times every forward pass on the device: CUDA events around each
    (read once at the end, so timing adds no wait), or on a CPU the pass's own wall seconds."""

    def __init__(self, decoder: Any, device: str) -> None:
        self.decoder = decoder
        self.cuda = device.startswith("cuda")
        self.events: list[tuple[Any, Any]] = []
        self.cpu_s = 0.0
        self.passes = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch

        self.passes += 1
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = self.decoder(*args, **kwargs)
            end.record()
            self.events.append((start, end))
            return out
        began = time.perf_counter()
        out = self.decoder(*args, **kwargs)
        self.cpu_s += time.perf_counter() - began
        return out

    def busy_s(self) -> float:
        if not self.cuda:
            return self.cpu_s
        import torch

        torch.cuda.synchronize()
        return sum(a.elapsed_time(b) for a, b in self.events) / 1000

    def __getattr__(self, name: str) -> Any:
        return getattr(self.decoder, name)


class UtilisationSampler:
    """``nvidia-smi`` utilisation and memory twice a second into a CSV file (nothing where there is none)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> UtilisationSampler:
        if shutil.which("nvidia-smi"):
            self.fh = open(self.path, "a", encoding="utf-8")
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,utilization.gpu,memory.used",
                                          "--format=csv,noheader,nounits", "-lms", "500"], stdout=self.fh)
        return self

    def __exit__(self, *_: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.fh.close()


def utilisation_summary(path: Path, since: int) -> str:
    """Mean utilisation, and the share of samples at 0% and at 90% or more, from line ``since`` on."""
    if not path.is_file():
        return "no nvidia-smi: utilisation not sampled"
    values = []
    for line in path.read_text(encoding="utf-8").splitlines()[since:]:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[1].isdigit():
            values.append(int(parts[1]))
    if not values:
        return "no utilisation samples"
    idle = sum(v == 0 for v in values) / len(values)
    busy = sum(v >= 90 for v in values) / len(values)
    return (f"{len(values)} samples: mean {sum(values) / len(values):.0f}%, at 0% {100 * idle:.0f}% of the time, "
            f"at 90%+ {100 * busy:.0f}%")


def prb_score(data: str, spec: str, out: Path, device: str, dtype: str, limit: int | None,
              profile: str) -> tuple[float, dict[str, Any]]:
    """``prb score`` as a user runs it: wall seconds and the job's run metadata."""
    from prb_utils.store import load_run_metadata

    command = [sys.executable, "-m", "prb_utils", "score", "--data", data, "--model", spec,
               "--profile", profile, "--device", device, "--dtype", dtype, "--out", str(out), "--no-progress"]
    if limit:
        command += ["--limit", str(limit)]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    meta = load_run_metadata(out)
    return wall, meta.iloc[-1].to_dict() if len(meta) else {}


def scoring_seconds(meta: dict[str, Any]) -> float | None:
    from datetime import datetime

    try:
        started = datetime.fromisoformat(str(meta["started"]))
        finished = datetime.fromisoformat(str(meta["finished"]))
    except (KeyError, ValueError):
        return None
    return (finished - started).total_seconds()


def timed(fn: Any, device: str) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def plain_forward(model: Any, device: str, vocab: int, *, batches: tuple[int, ...] = (8, 16, 32),
                  length: int = 2048) -> float:
    """Tokens/s of the decoder's forward pass alone, on random ids, at the best of the batch sizes."""
    import torch

    best = 0.0
    for rows in batches:
        ids = torch.randint(0, vocab, (rows, length), device=device)
        with torch.inference_mode():
            model.base_model(input_ids=ids)
            seconds = min(timed(lambda ids=ids: model.base_model(input_ids=ids), device) for _ in range(3))
        best = max(best, rows * length / seconds)
    return best


def compare(rm: Any, pairs: list[Any], device: str, rounds: int) -> dict[str, Any]:
    """Median seconds of the reference-style loop, prb and prb without the prompt cache on ``pairs``, and
    the device's median busy seconds in the prb runs (:class:`DeviceTimer`)."""
    import torch

    naive = NAIVE[rm.kind]

    def reference() -> None:
        with torch.inference_mode():
            for start in range(0, len(pairs), NAIVE_PAIRS_PER_BATCH):
                naive(rm, pairs[start: start + NAIVE_PAIRS_PER_BATCH])

    def prb(cache: bool) -> Any:
        def go() -> None:
            rm.runner.kv_reuse = cache
            rm.score_pairs(pairs)
        return go

    methods = {"reference loop": reference, "prb": prb(True), "prb no cache": prb(False)}
    rm.score_pairs(pairs[:2])
    seconds: dict[str, list[float]] = {name: [] for name in methods}
    busy: dict[str, list[float]] = {"prb": [], "prb no cache": []}
    real = rm.runner.decoder
    try:
        for r in range(rounds):
            for name in list(methods)[r % 3:] + list(methods)[: r % 3]:
                timer = DeviceTimer(real, device)
                rm.runner.decoder = timer
                seconds[name].append(timed(methods[name], device))
                if name in busy:
                    busy[name].append(timer.busy_s())
    finally:
        rm.runner.decoder = real
        rm.runner.kv_reuse = rm.kv_reuse
    middle = {name: sorted(values)[len(values) // 2] for name, values in seconds.items()}
    return {"seconds": middle, "busy_s": {name: sorted(v)[len(v) // 2] for name, v in busy.items()}}


def calibration_text(calibration: Any) -> str:
    if isinstance(calibration, str):
        try:
            calibration = json.loads(calibration)
        except ValueError:
            return calibration
    if not isinstance(calibration, dict) or not calibration:
        return "none (a CPU keeps its constants)"
    buckets = calibration.get("buckets") or {}
    decided = "; ".join(f"{b}-token prompts: {'cache' if v['prompt_cache_pays'] else 'whole'} " + (
        f"({v['prompt_cache_s']:.3f} s cached / {v['whole_s']:.3f} s whole, {v['groups']} groups of "
        f"{v['prompt_tokens']}+{v['answer_tokens']})" if "whole_s" in v else
        f"(clear from the load's timing: {v.get('token_share')} of the tokens, predicted "
        f"{v.get('predicted_time_share')} of the time)") for b, v in buckets.items())
    return f"pass overhead {calibration.get('forward_overhead_tokens')} tokens; {decided}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu-bench", help="folder for the text files")
    parser.add_argument("--shapes", default="3b,8b", help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--kinds", default="classifier,judge", help="comma-separated, of classifier, judge")
    parser.add_argument("--data", default=None, help="a synthetic benchmark folder (default: written here)")
    parser.add_argument("--scale", type=float, default=1.0, help="size of the written benchmark")
    parser.add_argument("--profile", default="top3,full", help="comma-separated profile conditions")
    parser.add_argument("--context", type=int, default=8192, help="the models' context (full is cut to it)")
    parser.add_argument("--limit", default="0,200", help="prb score's --limit per shape (0: every pair), top3")
    parser.add_argument("--full-limit", type=int, default=50, help="prb score's --limit for the other conditions")
    parser.add_argument("--compare-pairs", type=int, default=128, help="pairs for the in-process comparison")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--work", default=None, help="folder for the models and stores (default: a temporary one)")
    args = parser.parse_args(argv)

    import torch

    from prb_utils.data import load_benchmark
    from prb_utils.models import PairInput, load_model
    from prb_utils.profile import rm_user_message

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    profiles = [p.strip() for p in args.profile.split(",") if p.strip()]
    limits = [int(x) for x in args.limit.split(",")]
    dtype = getattr(torch, args.dtype)
    work = Path(args.work or tempfile.mkdtemp(prefix="prb-gpu-"))
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    say(f"device {device_name}; torch {torch.__version__}; dtype {args.dtype}; context {args.context}")
    ceiling = gemm_rate(args.device, dtype)
    say(f"GEMM ceiling: {ceiling / 1e12:.1f} TFLOP/s ({args.dtype}, measured now)")
    data = args.data or str(write_benchmark(work / "synthetic", scale=args.scale))
    frame = load_benchmark(data)
    ordered = frame.groupby("subset", sort=False).head(math.ceil(args.compare_pairs / 3))
    say(f"data {data}: {len(frame)} pairs; in-process comparison on {min(len(ordered), args.compare_pairs)} of them")
    results: dict[str, Any] = {"device": device_name, "gemm_flops": ceiling, "context": args.context, "shapes": {}}
    util_path = out / "gpu_util.csv"

    for k, shape in enumerate(shapes):
        found: dict[str, Any] = {"runs": {}}
        results["shapes"][shape] = found
        for kind in kinds:
            folder = build_model(shape, work / f"model-{shape}-{kind}", args.device, dtype, kind=kind,
                                 context=args.context)
            rm = load_model(f"{kind}:{folder}", device=args.device, dtype=args.dtype)
            params = sum(p.numel() for p in rm.model.parameters())
            config = rm.model.config
            say(f"\n{shape} {kind}: {params / 1e9:.2f}B parameters; calibration at load: "
                f"{calibration_text(rm.runner.calibration_record())}")
            found["parameters"] = params
            if "forward_tokens_per_s" not in found:
                forward = plain_forward(rm.model, args.device, config.vocab_size)
                found["forward_tokens_per_s"] = forward
                flops = sequence_flops(params, config, [2048]) / 2048 * forward
                say(f"  plain forward pass (2048 tokens)      {forward / 1000:8.1f}k tok/s {flops / 1e12:7.1f} TFLOP/s "
                    f"{100 * flops / ceiling:5.1f}%")

            def rate(lengths: list[int], seconds: float, params: int = params, config: Any = config) -> str:
                flops = sequence_flops(params, config, lengths) / seconds
                return (f"{sum(lengths) / seconds / 1000:8.1f}k tok/s {flops / 1e12:7.1f} TFLOP/s "
                        f"{100 * flops / ceiling:5.1f}%")

            for profile in profiles:
                limit = (limits[min(k, len(limits) - 1)] if profile == "top3" else args.full_limit) or None
                since = len(util_path.read_text(encoding="utf-8").splitlines()) if util_path.is_file() else 0
                with UtilisationSampler(util_path):
                    wall, meta = prb_score(data, f"{kind}:{folder}", work / f"store-{shape}-{kind}-{profile}",
                                           args.device, args.dtype, limit, profile)
                scored_pairs = frame if limit is None else frame.groupby("subset", sort=False).head(limit)
                per_pair = [PairInput("k", rm_user_message(r, profile), r["chosen"], r["rejected"])
                            for r in scored_pairs.to_dict("records")]
                lengths = [len(s) for seqs, _ in rm._sequences_many(per_pair) for s in seqs]
                n_scored = int(meta.get("n_pairs_scored") or meta.get("n_pairs") or 0)
                scoring = scoring_seconds(meta)
                say(f"  [{profile}] {len(per_pair)} pairs, {sum(lengths) / len(per_pair):.0f} tokens per pair; prb "
                    f"computed {int(meta.get('tokens_computed') or 0) / max(1, n_scored):.0f}")
                say(f"    prb score, command   {wall:7.1f} s  {rate(lengths, wall)}")
                if scoring:
                    say(f"    prb score, scoring   {scoring:7.1f} s  {rate(lengths, scoring)}")
                say(f"    calibration in the job: {calibration_text(meta.get('calibration'))}")
                say(f"    GPU while prb score ran: {utilisation_summary(util_path, since)}")
                pairs = [PairInput(f"{r['subset']}/{r['id']}", rm_user_message(r, profile), r["chosen"],
                                   r["rejected"]) for r in ordered.to_dict("records")][: args.compare_pairs]
                if args.device.startswith("cuda"):
                    torch.cuda.reset_peak_memory_stats()
                compared = compare(rm, pairs, args.device, args.rounds)
                seconds, busy = compared["seconds"], compared["busy_s"]
                compared_lengths = [len(s) for seqs, _ in rm._sequences_many(pairs) for s in seqs]
                for name, value in seconds.items():
                    extra = ""
                    if name in busy:
                        extra = f"  device busy {busy[name]:6.2f} s ({100 * busy[name] / value:5.1f}% of the wall)"
                    say(f"    {name:<15}{value:7.2f} s  {rate(compared_lengths, value)}{extra}")
                say(f"    prb / reference loop {seconds['reference loop'] / seconds['prb']:.2f}x; prompt cache (prb / "
                    f"prb no cache) {seconds['prb no cache'] / seconds['prb']:.2f}x")
                peak = torch.cuda.max_memory_allocated() / 2**30 if args.device.startswith("cuda") else float("nan")
                say(f"    peak GPU memory in the comparison: {peak:.1f} GiB")
                found["runs"][f"{kind}/{profile}"] = {
                    "pairs": len(per_pair), "tokens": sum(lengths), "command_s": wall, "scoring_s": scoring,
                    "compare_pairs": len(pairs), "compare_tokens": sum(compared_lengths), "compare_s": seconds,
                    "device_busy_s": busy, "peak_gib": peak, "tokens_computed": meta.get("tokens_computed"),
                    "calibration": meta.get("calibration")}
            del rm
            shutil.rmtree(folder, ignore_errors=True)
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()

    (out / "gpu_throughput.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "gpu_throughput.json").write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
