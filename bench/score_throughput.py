"""Scoring throughput: prb's adapters against a naive loop that does what the reference scoring does.

The naive loop takes the pairs in file order, 8 pairs at a time, pads every text of the batch to the longest,
truncates at the model's maximum (from the right, as a tokenizer does by default) and runs the whole model
(all positions' logits for causal LMs). prb's adapters sort by length, pack batches by a token budget, run
chosen and rejected on a shared prompt cache (decoders), and compute logits only where a score needs them.
Both run in this process on the same loaded model; the script prints pairs/s, tokens/s, the speed-up and the
largest score difference between the two.

    python bench/score_throughput.py --model classifier:minilm
    python bench/score_throughput.py --model implicit:smollm2 --profile top3
    python bench/score_throughput.py --model judge:smollm2 --no-kv-reuse     # prb without the prompt cache
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


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="classifier:minilm", help="KIND:NAME (classifier, judge, implicit, embedding)")
    parser.add_argument("--data", default="sample")
    parser.add_argument("--profile", default="none", help="profile condition of the RM input (none, topK, full)")
    parser.add_argument("--limit", type=int, default=None, help="pairs per subset")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--batch-tokens", type=int, default=None)
    parser.add_argument("--no-kv-reuse", action="store_true", help="prb without the shared-prompt KV cache")
    parser.add_argument("--skip-no-kv", action="store_true", help="do not also time prb without the KV cache")
    args = parser.parse_args(argv)

    from prb_utils.models import load_model

    pairs = build_pairs(args.data, args.profile, args.limit)
    rm = load_model(args.model, device=args.device, dtype=args.dtype, batch_tokens=args.batch_tokens,
                    kv_reuse=not args.no_kv_reuse)
    if rm.kind not in NAIVE:
        raise SystemExit(f"no naive loop for kind {rm.kind}")
    meta = rm.run_metadata()
    print(f"model {rm.spec}  device {meta['device']}  dtype {meta['dtype']}  threads {meta['torch_threads']}  "
          f"max_length {meta['max_length']}  batch_tokens {meta['batch_tokens']}  pairs {len(pairs)}  "
          f"profile {args.profile}")

    rm.score_pairs(pairs[:2])  # warm-up (first-call allocations)
    run_naive(rm, pairs[:2])

    ours, ours_wall, ours_cpu = timed(lambda: rm.score_pairs(pairs))
    naive, naive_wall, naive_cpu = timed(lambda: run_naive(rm, pairs))
    tokens = sum(int(s.extra.get("n_tokens", 0)) for s in ours)
    rows = [("naive (reference loop)", naive_wall, naive_cpu), (f"prb (kv_reuse={not args.no_kv_reuse})",
                                                                 ours_wall, ours_cpu)]
    no_kv = None
    if rm.kind in ("implicit", "judge") or getattr(rm, "decoder_head", False):
        if not args.no_kv_reuse and not args.skip_no_kv:
            rm.runner.kv_reuse = False
            no_kv, wall, cpu = timed(lambda: rm.score_pairs(pairs))
            rm.runner.kv_reuse = True
            rows.append(("prb (kv_reuse=False)", wall, cpu))

    print(f"{'method':<26}{'wall s':>9}{'cpu s':>9}{'pairs/s':>10}{'tokens/s':>11}")
    for name, wall, cpu in rows:
        print(f"{name:<26}{wall:>9.2f}{cpu:>9.2f}{len(pairs) / wall:>10.2f}{tokens / wall:>11.0f}")
    print(f"speed-up prb / naive: {naive_wall / ours_wall:.2f}x wall")
    if no_kv is not None:
        print(f"KV-cache gain: {rows[2][1] / ours_wall:.2f}x wall")

    def diff(a: Sequence[Any], b: Sequence[tuple[float, float]], keep: Sequence[bool]) -> float:
        found = [abs(x.score_chosen - y[0]) for x, y, k in zip(a, b, keep, strict=True) if k]
        found += [abs(x.score_rejected - y[1]) for x, y, k in zip(a, b, keep, strict=True) if k]
        found = [d for d in found if not math.isnan(d)]
        return max(found) if found else float("nan")

    everything = [True] * len(pairs)
    untruncated = [not s.extra.get("truncated") for s in ours]
    print(f"largest |score difference| prb vs naive: {diff(ours, naive, everything):.3g} "
          f"(untruncated pairs: {diff(ours, naive, untruncated):.3g}; truncated pairs: {len(pairs) - sum(untruncated)})")
    if no_kv is not None:
        print(f"largest |score difference| kv_reuse on vs off: "
              f"{diff(ours, [(s.score_chosen, s.score_rejected) for s in no_kv], everything):.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
