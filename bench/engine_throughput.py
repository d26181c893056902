"""HF engine against vLLM engine on the same pairs and model, in one run: agreement and throughput.

For ``judge:MODEL`` and ``implicit:MODEL`` under each profile condition (default: the shipped sample's 42
pairs under none, top3 and full, i.e. 126 distinct prompts x 2 A/B orders for the judge), both engines score
the same pairs in float32 (HF in this process, vLLM through its OpenAI-compatible server: ``--engine-url``,
or one started here from ``.venv-vllm``, whose start-up time is reported apart). Prints, per kind:

- judge: per-order verdict agreement, median and max |P(chosen) difference|;
- implicit, classifier: Spearman between the engines' scores, max |difference|, outcome agreement;
- pairs/s and prompt tokens/s of each engine (scoring only: model load and server start-up apart), and the
  vLLM/HF speed ratio.

    python bench/engine_throughput.py                      # the sample, smollm2, none top3 full
    python bench/engine_throughput.py --engine-url http://127.0.0.1:8000 --profile none
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from prb_utils.data import load_benchmark
from prb_utils.models import EngineConfig, ModelOptions, load_model
from prb_utils.models.base import PairInput
from prb_utils.retrieval import retriever_from_label
from prb_utils.scoring import _build_pairs, score_benchmark


def prompt_tokens(model, pairs) -> int:
    """Tokens the engine reads for these pairs (both sequences of each pair), from the adapter's own prompts."""
    total = 0
    for p in pairs:
        seqs = model._sequences(PairInput(p.key, p.prompt, p.chosen, p.rejected))[0]
        total += sum(len(s) for s in seqs)
    return total


def run_engine(engine: EngineConfig, spec: str, data: pd.DataFrame, profiles: list[str], out: Path,
               device: str) -> tuple[pd.DataFrame, dict]:
    options = ModelOptions(device=device, dtype="float32", engine=engine)
    started = time.perf_counter()
    model = load_model(spec, options)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    rows = score_benchmark(data, [model], profiles, out=out / engine.name, options=options, progress=False)
    score_s = time.perf_counter() - started
    return rows, {"load_s": load_s, "score_s": score_s, "pairs": len(rows), "model": model}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="sample")
    parser.add_argument("--model", default="smollm2", help="an alias, folder or hub id served by vLLM")
    parser.add_argument("--profile", action="append", default=None, help="default: none top3 full")
    parser.add_argument("--kind", action="append", default=None,
                        help="judge, implicit and/or classifier (default: judge and implicit)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda, for both engines")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--engine-url", default=None, help="a running server (default: start one here)")
    parser.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="extra `vllm serve` option for the server started here, e.g. enforce-eager=true")
    parser.add_argument("--json", default=None, help="also write the numbers to this file")
    args = parser.parse_args(argv)
    profiles = args.profile or ["none", "top3", "full"]
    kinds = args.kind or ["judge", "implicit"]
    data = load_benchmark(args.data, limit=args.limit)
    find = retriever_from_label("bm25") if any(c.startswith("top") for c in profiles) else None
    pairs = [p for c in profiles for p in _build_pairs(data.to_dict("records"), c, find)]

    servers: dict[str, object] = {}

    def server_url(kind: str) -> str:
        if args.engine_url:
            return args.engine_url
        runner = "pooling" if kind == "classifier" else "generate"
        if runner not in servers:
            from prb_utils.models.aliases import ALIASES, resolve_alias
            from prb_utils.models.serve.launcher import LaunchOptions, Server

            source = str(resolve_alias(args.model, kind)) if args.model in ALIASES else args.model
            started = time.perf_counter()
            options = LaunchOptions(dtype="float32", device=args.device,
                                    engine=EngineConfig("vllm", engine_args=tuple(args.engine_arg)),
                                    runner="pooling" if kind == "classifier" else None)
            servers[runner] = Server(source, args.model, options).start(progress=False)
            print(f"vLLM server start-up ({runner}): {time.perf_counter() - started:.0f} s", flush=True)
        return servers[runner].url

    results = {"data": args.data, "model": args.model, "profiles": profiles, "n_pairs": len(data),
               "n_prompt_sets": len(pairs), "engine_args": args.engine_arg}
    try:
        with tempfile.TemporaryDirectory(prefix="prb-engines-") as tmp:
            for kind in kinds:
                spec = f"{kind}:{args.model}"
                url = server_url(kind)
                hf_rows, hf = run_engine(EngineConfig(), spec, data, profiles, Path(tmp), args.device)
                vl_rows, vl = run_engine(EngineConfig("vllm", urls=url, progress=False), spec, data, profiles,
                                         Path(tmp), args.device)
                tokens = prompt_tokens(vl["model"], pairs)
                key = ["profile", "subset", "id"]
                merged = hf_rows.merge(vl_rows, on=key, suffixes=("_hf", "_vllm"))
                numbers: dict = {"pairs": len(merged), "prompt_tokens": tokens}
                if kind == "judge":
                    same = np.concatenate([merged["verdict_ab_hf"] == merged["verdict_ab_vllm"],
                                           merged["verdict_ba_hf"] == merged["verdict_ba_vllm"]])
                    diff = np.abs(np.concatenate([merged["p_chosen_ab_hf"] - merged["p_chosen_ab_vllm"],
                                                  merged["p_chosen_ba_hf"] - merged["p_chosen_ba_vllm"]]))
                    numbers.update(orders=int(same.size), verdict_agreement=float(same.mean()),
                                   median_abs_p_diff=float(np.median(diff)), max_abs_p_diff=float(diff.max()))
                else:
                    h = np.concatenate([merged["score_chosen_hf"], merged["score_rejected_hf"]])
                    v = np.concatenate([merged["score_chosen_vllm"], merged["score_rejected_vllm"]])
                    numbers.update(spearman=float(spearmanr(h, v).statistic), max_abs_diff=float(np.abs(h - v).max()),
                                   outcome_agreement=float((merged["outcome_hf"] == merged["outcome_vllm"]).mean()))
                for name, m in (("hf", hf), ("vllm", vl)):
                    numbers[name] = {"load_s": round(m["load_s"], 1), "score_s": round(m["score_s"], 1),
                                     "pairs_per_s": m["pairs"] / m["score_s"], "tokens_per_s": tokens / m["score_s"]}
                numbers["vllm_over_hf_speed"] = hf["score_s"] / vl["score_s"]
                results[kind] = numbers
                _print(kind, spec, numbers)
    finally:
        for server in servers.values():
            server.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


def _print(kind: str, spec: str, n: dict) -> None:
    print(f"\n{spec}: {n['pairs']} pairs, {n['prompt_tokens']} prompt tokens")
    if kind == "judge":
        print(f"  verdict agreement {n['verdict_agreement']:.1%} of {n['orders']} orders; |P(chosen) diff| median "
              f"{n['median_abs_p_diff']:.2e}, max {n['max_abs_p_diff']:.2e}")
    else:
        print(f"  Spearman {n['spearman']:.5f}; max |score diff| {n['max_abs_diff']:.2e}; outcomes agree on "
              f"{n['outcome_agreement']:.1%} of pairs")
    for name in ("hf", "vllm"):
        e = n[name]
        print(f"  {name:5s} load {e['load_s']:6.1f} s  score {e['score_s']:7.1f} s  {e['pairs_per_s']:6.2f} pairs/s  "
              f"{e['tokens_per_s']:8.0f} tokens/s")
    print(f"  vLLM/HF speed ratio: {n['vllm_over_hf_speed']:.2f}x", flush=True)


if __name__ == "__main__":  # the engine spawns processes: keep the entry point guarded
    sys.exit(main())
