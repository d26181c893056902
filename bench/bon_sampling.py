"""Best-of-N sampling throughput: one question per ``generate`` call against questions batched together.

Both methods encode each question's prompt once and share its KV cache among its N sequences
(:meth:`prb_utils.models.generation.ChatGenerator.sample_batch`); the batched one also decodes the
sequences of ``--batch`` questions together. The policy, prompts (the pipeline's, with ``--posts`` profile
posts) and sampling options are the BoN pipeline's defaults; both methods run in this process on the same
loaded model, in ``--repeat`` interleaved rounds. Prints wall and CPU seconds, answers per second, the
ratio and the machine's load.

    python bench/bon_sampling.py --questions 16 --n 8 --max-new-tokens 80 --batch 8
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", default="smollm2")
    parser.add_argument("--data", default="sample")
    parser.add_argument("--questions", type=int, default=16, help="questions to sample (taken in data order)")
    parser.add_argument("--n", type=int, default=8, help="answers per question")
    parser.add_argument("--max-new-tokens", type=int, default=80)
    parser.add_argument("--posts", type=int, default=5, help="profile posts in the policy prompt")
    parser.add_argument("--batch", type=int, default=8, help="questions per generate call (batched method)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    from prb_utils.data import load_benchmark
    from prb_utils.downstream.pipeline import POLICY_SYSTEM, policy_prompt
    from prb_utils.models.generation import ChatGenerator

    records = load_benchmark(args.data).head(args.questions).to_dict("records")
    prompts = [policy_prompt(r, posts=args.posts) for r in records]
    gen = ChatGenerator(args.policy, device=args.device)
    lengths = [len(gen.tokenizer(gen.render(p, POLICY_SYSTEM))["input_ids"]) for p in prompts]
    print(f"policy {args.policy}  questions {len(prompts)}  n {args.n}  max_new_tokens {args.max_new_tokens}  "
          f"prompt tokens mean {statistics.mean(lengths):.0f} max {max(lengths)}  batch {args.batch}  "
          f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    options = dict(system=POLICY_SYSTEM, max_new_tokens=args.max_new_tokens, temperature=1.0, top_p=0.9)

    def per_question() -> None:
        for i, prompt in enumerate(prompts):
            gen.sample_batch([prompt], args.n, seed=i, **options)

    def batched() -> None:
        for start in range(0, len(prompts), args.batch):
            gen.sample_batch(prompts[start:start + args.batch], args.n, seed=start, **options)

    methods = {"one question per call": per_question, f"{args.batch} questions per call": batched}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in methods}
    for round_ in range(args.repeat):
        order = list(methods) if round_ % 2 == 0 else list(reversed(methods))
        for name in order:
            wall, cpu = time.perf_counter(), time.process_time()
            methods[name]()
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
            print(f"round {round_ + 1}: {name} {times[name][-1][0]:.1f}s (load {os.getloadavg()[0]:.2f})",
                  flush=True)
    answers = len(prompts) * args.n
    medians = {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
               for name, t in times.items()}
    print(f"{'method':28s} {'median wall s':>14s} {'median cpu s':>13s} {'answers/s':>10s}")
    for name, (wall, cpu) in medians.items():
        print(f"{name:28s} {wall:14.1f} {cpu:13.1f} {answers / wall:10.2f}")
    (single, _), (together, _) = medians.values()
    print(f"speed-up batched / one per call (wall): {single / together:.2f}x")


if __name__ == "__main__":
    main()
