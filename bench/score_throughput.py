"""Scoring throughput: prb's adapters against a naive loop that does what the reference scoring does.

The naive loop takes the pairs in file order, 8 pairs at a time, pads every text of the batch to the longest,
truncates at the model's maximum (from the right, as a tokenizer does by default) and runs the whole model
(all positions' logits for causal LMs) with torch's default threads. prb's adapters sort by length, pack
batches by a cost model, run chosen and rejected on a shared prompt cache where it pays (decoders), use only
the CPU cores other processes leave free, and compute logits only where a score needs them. Everything runs
in this process on the same loaded model, in ``--repeat`` interleaved rounds (the order rotates); the script
prints the median wall and CPU seconds per method, the ratios, the machine's load, and the largest score
difference between the methods. ``--busy N`` starts N CPU-bound competitor processes (each stops by itself
after ``--busy-seconds``, and is stopped at the end) to time a shared machine; ``--legacy`` adds the
DecoderRunner from before the throughput fix (``bench/legacy_runner.py``) as "before".

    python bench/score_throughput.py --model classifier:minilm
    python bench/score_throughput.py --model classifier:~/.cache/prb/smollm2 --allow-untrained-head \\
        --profile top3 --legacy
    python bench/score_throughput.py --model implicit:smollm2 --profile top3 --busy 1
    python bench/score_throughput.py --model judge:smollm2 --pairs 48 --repeat 5
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

NAIVE_PAIRS_PER_BATCH = 8


def build_pairs(source: str, profile: str, limit: int | None) -> list[Any]:
    from prb_utils.data import load_benchmark
    from prb_utils.models import PairInput
    from prb_utils.profile import rm_user_message

    frame = load_benchmark(source, limit=limit, drop_invalid=True)
    return [PairInput(f"{r['subset']}/{r['id']}", rm_user_message(r, profile), r["chosen"], r["rejected"])
            for r in frame.to_dict("records")]


# ------------------------------------------------------------------------------------------ naive loops


def _tokenize(rm: Any, texts: Sequence[str], *, add_special: bool | None = None) -> Any:
    from prb_utils.models.prompts import has_chat_template

    tok = rm.tokenizer
    tok.padding_side = "right"
    tok.truncation_side = "right"
    special = (not has_chat_template(tok)) if add_special is None else add_special
    enc = tok(list(texts), padding=True, truncation=True, max_length=rm.max_length, add_special_tokens=special,
              return_tensors="pt")
    return {k: v.to(rm.model.device) for k, v in enc.items() if k in ("input_ids", "attention_mask")}


def naive_classifier(rm: Any, batch: Sequence[Any]) -> list[tuple[float, float]]:
    from prb_utils.models.classifier import head_score
    from prb_utils.models.prompts import render_chat

    texts = [render_chat(rm.tokenizer, p.prompt, p.chosen) for p in batch]
    texts += [render_chat(rm.tokenizer, p.prompt, p.rejected) for p in batch]
    values = head_score(rm.model(**_tokenize(rm, texts)).logits)
    n = len(batch)
    return [(values[i], values[n + i]) for i in range(n)]


def naive_implicit(rm: Any, batch: Sequence[Any]) -> list[tuple[float, float]]:
    import torch

    from prb_utils.models.hf import encode
    from prb_utils.models.prompts import render_chat

    texts, spans = [], []
    for side in ("chosen", "rejected"):
        for p in batch:
            response = getattr(p, side)
            prompt_text = render_chat(rm.tokenizer, p.prompt)
            ids, first = rm._response_ids(p.prompt, prompt_text, response)   # the same response tokens as prb
            start = len(encode(rm.tokenizer, prompt_text)) + first
            texts.append(render_chat(rm.tokenizer, p.prompt, response))
            spans.append((start, start + len(ids) - first))
    enc = _tokenize(rm, texts)
    logp = torch.log_softmax(rm.model(**enc).logits.float(), dim=-1)
    values = []
    for row, (start, end) in enumerate(spans):
        ids = enc["input_ids"][row]
        end = min(end, int(enc["attention_mask"][row].sum()))
        if end <= start:
            values.append(math.nan)
            continue
        picked = logp[row, start - 1 : end - 1].gather(-1, ids[start:end, None])
        values.append(float(picked.mean()))
    n = len(batch)
    return [(values[i], values[n + i]) for i in range(n)]


def naive_judge(rm: Any, batch: Sequence[Any]) -> list[tuple[float, float]]:
    import torch

    texts = [rm.prompt_text(p.prompt, p.chosen, p.rejected) for p in batch]
    texts += [rm.prompt_text(p.prompt, p.rejected, p.chosen) for p in batch]
    enc = _tokenize(rm, texts)
    logits = rm.model(**enc).logits.float()
    last = enc["attention_mask"].sum(-1) - 1
    logp = torch.log_softmax(logits[torch.arange(len(texts)), last], dim=-1)
    p_a = torch.sigmoid(torch.logsumexp(logp[:, rm.a_ids], -1) - torch.logsumexp(logp[:, rm.b_ids], -1)).tolist()
    n = len(batch)
    out = []
    for i in range(n):
        chosen = (p_a[i] + 1 - p_a[n + i]) / 2
        out.append((chosen, 1 - chosen))
    return out


def naive_embedding(rm: Any, batch: Sequence[Any]) -> list[tuple[float, float]]:
    import torch

    texts = [p.prompt for p in batch] + [p.chosen for p in batch] + [p.rejected for p in batch]
    enc = _tokenize(rm, texts, add_special=True)
    states = rm.model(**enc).last_hidden_state.float()
    mask = enc["attention_mask"][:, :, None].to(states.dtype)
    vec = (states * mask).sum(1) / mask.sum(1)
    n = len(batch)
    cos = torch.nn.functional.cosine_similarity
    return [(float(cos(vec[i], vec[n + i], dim=0)), float(cos(vec[i], vec[2 * n + i], dim=0))) for i in range(n)]


NAIVE: dict[str, Callable[[Any, Sequence[Any]], list[tuple[float, float]]]] = {
    "classifier": naive_classifier, "implicit": naive_implicit, "judge": naive_judge, "embedding": naive_embedding,
}


def run_naive(rm: Any, pairs: Sequence[Any]) -> list[tuple[float, float]]:
    import torch

    fn = NAIVE[rm.kind]
    out: list[tuple[float, float]] = []
    with torch.inference_mode():
        for start in range(0, len(pairs), NAIVE_PAIRS_PER_BATCH):
            out.extend(fn(rm, pairs[start : start + NAIVE_PAIRS_PER_BATCH]))
    return out


# ------------------------------------------------------------------------------------------ timing

COMPETITOR = "import sys, time\nend = time.time() + float(sys.argv[1])\nx = 0\nwhile time.time() < end:\n    x += 1\n"


def start_competitors(n: int, seconds: float) -> list[Any]:
    """``n`` CPU-bound processes (a Python busy loop each), each ending by itself after ``seconds``."""
    import subprocess

    return [subprocess.Popen([sys.executable, "-c", COMPETITOR, str(seconds)]) for _ in range(n)]


def stop_competitors(procs: Sequence[Any]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - still running after terminate
            proc.kill()


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def load_text() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f} (1/5 min) on {os.cpu_count()} CPUs"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="classifier:minilm", help="KIND:NAME (classifier, judge, implicit, embedding)")
    parser.add_argument("--data", default="sample")
    parser.add_argument("--profile", default="none", help="profile condition of the RM input (none, topK, full)")
    parser.add_argument("--pairs", type=int, default=24, help="pairs to score (taken across the subsets)")
    parser.add_argument("--limit", type=int, default=None, help="pairs per subset (default: enough for --pairs)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved timing rounds (medians are reported)")
    parser.add_argument("--busy", type=int, default=0, metavar="N", help="run N CPU-bound competitor processes")
    parser.add_argument("--busy-seconds", type=float, default=600.0, help="the competitors stop after this long")
    parser.add_argument("--legacy", action="store_true", help="also time the DecoderRunner from before the fix")
    parser.add_argument("--allow-untrained-head", action="store_true",
                        help="a causal LM as classifier: with a seeded random score head (speed only)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--batch-tokens", type=int, default=None)
    parser.add_argument("--no-kv-reuse", action="store_true", help="prb without the shared-prompt KV cache only")
    parser.add_argument("--skip-no-kv", action="store_true", help="do not also time prb without the KV cache")
    args = parser.parse_args(argv)

    from prb_utils.models import load_model

    limit = args.limit if args.limit is not None else max(1, math.ceil(args.pairs / 3))
    pairs = build_pairs(args.data, args.profile, limit)
    by_subset: dict[str, list[Any]] = {}
    for p in pairs:
        by_subset.setdefault(p.key.split("/")[0], []).append(p)
    interleaved = [p for row in zip(*by_subset.values(), strict=False) for p in row]
    pairs = (interleaved + [p for p in pairs if p not in interleaved])[: args.pairs]
    rm = load_model(args.model, device=args.device, dtype=args.dtype, batch_tokens=args.batch_tokens,
                    kv_reuse=not args.no_kv_reuse,
                    **({"allow_untrained_head": True} if args.allow_untrained_head else {}))
    if rm.kind not in NAIVE:
        raise SystemExit(f"no naive loop for kind {rm.kind}")
    meta = rm.run_metadata()
    runner = getattr(rm, "runner", None) if (rm.kind != "classifier" or getattr(rm, "decoder_head", False)) else None
    print(f"model {rm.spec}  device {meta['device']}  dtype {meta['dtype']}  threads {meta['torch_threads']}  "
          f"max_length {meta['max_length']}  batch_tokens {meta['batch_tokens']}  pairs {len(pairs)}  "
          f"profile {args.profile}  repeat {args.repeat}  busy {args.busy}")

    methods: list[tuple[str, Callable[[], list[tuple[float, float]]]]] = []

    def prb(kv: bool) -> Callable[[], list[tuple[float, float]]]:
        def go() -> list[tuple[float, float]]:
            if runner is not None:
                runner.kv_reuse = kv
            out = rm.score_pairs(pairs)
            if runner is not None:
                runner.kv_reuse = not args.no_kv_reuse
            return [(s.score_chosen, s.score_rejected) for s in out]
        return go

    methods.append(("naive", lambda: run_naive(rm, pairs)))
    methods.append(("prb", prb(not args.no_kv_reuse)))
    if runner is not None and not args.no_kv_reuse and not args.skip_no_kv:
        methods.append(("prb no-cache", prb(False)))
    if runner is not None and args.legacy:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from legacy_runner import LegacyDecoderRunner

        legacy = LegacyDecoderRunner(rm.model, pad_id=runner.pad_id, batcher=rm.batcher, kv_reuse=True)

        def legacy_run(kv: bool) -> Callable[[], list[tuple[float, float]]]:
            def go() -> list[tuple[float, float]]:
                import torch

                threads = torch.get_num_threads()
                legacy.kv_reuse = kv
                rm.runner = legacy
                try:
                    return [(s.score_chosen, s.score_rejected) for s in rm.score_pairs(pairs)]
                finally:
                    rm.runner = runner
                    torch.set_num_threads(threads)
            return go

        methods.append(("before: prb", legacy_run(True)))
        methods.append(("before: prb no-cache", legacy_run(False)))

    rm.score_pairs(pairs[:2])  # warm-up (first-call allocations)
    run_naive(rm, pairs[:2])
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # a timeout still stops the competitors
    competitors = start_competitors(args.busy, args.busy_seconds) if args.busy else []
    walls: dict[str, list[float]] = {name: [] for name, _ in methods}
    cpus: dict[str, list[float]] = {name: [] for name, _ in methods}
    scores: dict[str, list[tuple[float, float]]] = {}
    try:
        if competitors:
            time.sleep(1.0)
        from prb_utils.models.lm import busy_cpus_elsewhere

        busy = busy_cpus_elsewhere(0.5)
        print(f"before timing: {load_text()}; CPUs busy in other processes {busy if busy is None else round(busy, 2)}")
        for r in range(args.repeat):
            order = methods[r % len(methods):] + methods[: r % len(methods)]
            for name, fn in order:
                out, wall, cpu = timed(fn)
                walls[name].append(wall)
                cpus[name].append(cpu)
                scores.setdefault(name, out)
            print(f"round {r + 1}: " + "  ".join(f"{n} {walls[n][-1]:.1f}s" for n, _ in methods) + f"  ({load_text()})")
    finally:
        stop_competitors(competitors)
    print(f"after timing: {load_text()}")
    if runner is not None:
        print(f"prb threads used {runner.threads_used}  groups on the prompt cache {runner.reused_groups}  "
              f"forward passes {runner.forward_passes}")
    print(f"{'method':<22}{'median wall s':>14}{'median cpu s':>14}{'pairs/s':>9}   walls")
    for name, _ in methods:
        w, c = median(walls[name]), median(cpus[name])
        print(f"{name:<22}{w:>14.2f}{c:>14.2f}{len(pairs) / w:>9.2f}   " + " ".join(f"{x:.1f}" for x in walls[name]))

    def ratio(a: str, b: str) -> str:
        per_round = [x / y for x, y in zip(walls[a], walls[b], strict=True)]
        return (f"{median(walls[a]) / median(walls[b]):.2f}x (median of rounds' ratios {median(per_round):.2f}x, "
                f"cpu {median(cpus[a]) / median(cpus[b]):.2f}x)")

    print(f"speed-up prb / naive (wall): {ratio('naive', 'prb')}")
    if "prb no-cache" in walls:
        print(f"speed-up prb no-cache / naive (wall): {ratio('naive', 'prb no-cache')}")
        print(f"prompt-cache gain prb no-cache / prb (wall): {ratio('prb no-cache', 'prb')}")
    if "before: prb" in walls:
        print(f"before: speed-up prb / naive {ratio('naive', 'before: prb')}")
        print(f"before: prompt-cache gain {ratio('before: prb no-cache', 'before: prb')}")
        print(f"after vs before, prb: {ratio('before: prb', 'prb')}")
        if "prb no-cache" in walls:
            print(f"after vs before, prb no-cache: {ratio('before: prb no-cache', 'prb no-cache')}")

    def diff(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> float:
        found = [abs(x[i] - y[i]) for x, y in zip(a, b, strict=True) for i in (0, 1)]
        found = [d for d in found if not math.isnan(d)]
        return max(found) if found else float("nan")

    for name, _ in methods[1:]:
        print(f"largest |score difference| {name} vs naive: {diff(scores[name], scores['naive']):.3g}")
    if "prb no-cache" in scores:
        print(f"largest |score difference| prb vs prb no-cache: {diff(scores['prb'], scores['prb no-cache']):.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
