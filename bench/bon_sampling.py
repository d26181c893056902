"""Best-of-N sampling: the default (batched) mode against ``--exact-sampling``, in process and on a vLLM server.

On the same questions (the pipeline's prompts, with ``--posts`` profile posts, each seeded by
:func:`prb_utils.downstream.policy.question_seed`), each engine samples N answers per question twice, as
``prb bon`` does in each mode:

- exact: each question on its own (``sample_each``: in process one ``generate`` call per question; on the
  server one request at a time);
- batched (the default): the questions together (``sampling_groups`` + ``sample_together``: in process as
  many per ``generate`` call as the token budget takes; on the server every question's request in flight at
  once, up to the client's concurrency, each with its own question's seed).

Prints each mode's wall and CPU seconds (this process's CPU; the server's is not counted), answers per second,
the exact/batched ratio, and the share of answers that are bit-identical between the two modes. The vLLM
server is the one at ``--engine-url`` or one started here from ``.venv-vllm`` (its start-up and a warm-up
request are not timed; prefix caching off by default, so neither mode reads the other's prompts from the
cache). Modes run in ``--repeat`` interleaved rounds; the answers compared are those of the first round.

    python bench/bon_sampling.py --questions 8 --n 8 --max-new-tokens 80
    python bench/bon_sampling.py --engines hf            # in process only
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policy", default="smollm2")
    parser.add_argument("--data", default="sample")
    parser.add_argument("--questions", type=int, default=8, help="questions to sample (taken in data order)")
    parser.add_argument("--n", type=int, default=8, help="answers per question")
    parser.add_argument("--max-new-tokens", type=int, default=80)
    parser.add_argument("--posts", type=int, default=5, help="profile posts in the policy prompt")
    parser.add_argument("--batch-tokens", type=int, default=None, help="in process: the token budget per call")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--engines", default="hf,vllm", help="comma-separated: hf (in process), vllm (server)")
    parser.add_argument("--engine-url", default=None, help="a running vLLM server (else one is started here)")
    parser.add_argument("--prefix-caching", action="store_true", help="leave the started server's prefix cache on")
    parser.add_argument("--engine-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="a vllm serve option of the server started here (repeatable)")
    args = parser.parse_args()

    from prb_utils.data import load_benchmark
    from prb_utils.downstream.policy import POLICY_SYSTEM, SamplingOptions, policy_prompt, question_seed

    sampling = SamplingOptions(policy=args.policy, n_samples=args.n, max_new_tokens=args.max_new_tokens)
    records = load_benchmark(args.data).head(args.questions).to_dict("records")
    prompts = [policy_prompt(r, posts=args.posts) for r in records]
    seeds = [question_seed(0, str(r["subset"]), str(r["id"])) for r in records]
    how = {"system": POLICY_SYSTEM, "max_new_tokens": args.max_new_tokens, "temperature": sampling.temperature,
           "top_p": sampling.top_p}
    print(f"policy {args.policy}  questions {len(prompts)}  n {args.n}  max_new_tokens {args.max_new_tokens}  "
          f"temperature {sampling.temperature}  top_p {sampling.top_p}  load {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} CPUs", flush=True)
    summary = [_compare(engine.strip(), args, prompts, seeds, how) for engine in args.engines.split(",")
               if engine.strip()]
    print(f"\n{'engine':28s} {'exact s':>9s} {'batched s':>10s} {'ratio':>7s} {'identical':>10s}")
    for label, ex, ba, ratio, share in summary:
        print(f"{label:28s} {ex:9.1f} {ba:10.1f} {ratio:6.2f}x {share:10.0%}")


def _compare(engine: str, args: argparse.Namespace, prompts: list[str], seeds: list[int],
             how: dict) -> tuple[str, float, float, float, float]:
    """Both modes on one engine: their timings and answers printed; (label, exact s, batched s, ratio, share of
    bit-identical answers)."""
    from prb_utils.downstream.policy import POLICY_SYSTEM

    gen, label = _generator(engine, args)
    groups = gen.sampling_groups(prompts, system=POLICY_SYSTEM, max_new_tokens=args.max_new_tokens,
                                 batch_tokens=args.batch_tokens)
    lengths = [len(gen.tokenizer(gen.render(p, POLICY_SYSTEM), add_special_tokens=False)["input_ids"])
               for p in prompts]
    print(f"\n[{label}] prompt tokens mean {statistics.mean(lengths):.0f} max {max(lengths)}; batched groups "
          f"{[len(g) for g in groups]}", flush=True)

    def exact() -> list[list[str]]:
        return gen.sample_each(prompts, args.n, seeds=seeds, **how)

    def batched() -> list[list[str]]:
        found: dict[int, list[str]] = {}
        for group in groups:
            replies = gen.sample_together([prompts[i] for i in group], args.n, seeds=[seeds[i] for i in group],
                                          **how)
            found.update(zip(group, replies, strict=True))
        return [found[i] for i in range(len(prompts))]

    methods: dict[str, Callable[[], list[list[str]]]] = {"exact": exact, "batched": batched}
    times, answers = _timed(methods, args.repeat, label)
    same = [a == b for qa, qb in zip(answers["exact"], answers["batched"], strict=True)
            for a, b in zip(qa, qb, strict=True)]
    medians = {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
               for name, t in times.items()}
    total = len(prompts) * args.n
    print(f"{'mode':10s} {'median wall s':>14s} {'median cpu s':>13s} {'answers/s':>10s}")
    for name, (wall, cpu) in medians.items():
        print(f"{name:10s} {wall:14.1f} {cpu:13.1f} {total / wall:10.2f}")
    ratio = medians["exact"][0] / medians["batched"][0]
    share = sum(same) / len(same)
    print(f"[{label}] batched is {ratio:.2f}x faster than exact (wall); bit-identical answers between the "
          f"modes: {sum(same)}/{len(same)} ({share:.0%})", flush=True)
    _close(gen)
    return label, medians["exact"][0], medians["batched"][0], ratio, share


def _generator(engine: str, args: argparse.Namespace):
    """The policy's chat generator on ``engine`` and how the output names it (a vLLM server started here is
    warmed up by one request first)."""
    from prb_utils.models.engines import EngineConfig

    if engine == "hf":
        from prb_utils.models.generation import ChatGenerator

        return ChatGenerator(args.policy, device=args.device), f"in process ({args.device})"
    if engine != "vllm":
        raise SystemExit(f"unknown engine {engine!r}: use hf or vllm")
    from prb_utils.models.serve.connection import ServedChatGenerator

    extra = (*(() if args.prefix_caching or args.engine_url else ("no-enable-prefix-caching",)), *args.engine_arg)
    config = EngineConfig("vllm", urls=args.engine_url or (), engine_args=extra)
    started = time.perf_counter()
    gen = ServedChatGenerator(args.policy, engine=config, device=args.device, dtype="float32")
    ready = time.perf_counter() - started
    gen.generate(["Warm up."], max_new_tokens=4)
    client = gen.engine.client
    print(f"vLLM {gen.engine.version} at {gen.engine.url}: ready after {ready:.0f} s (not timed); concurrency "
          f"{client.concurrency} ({gen.engine.concurrency_source}); engine args {list(config.engine_args)}", flush=True)
    return gen, f"vLLM server {gen.engine.version}"


def _timed(methods: dict[str, Callable[[], list[list[str]]]], repeat: int,
           label: str) -> tuple[dict[str, list[tuple[float, float]]], dict[str, list[list[str]]]]:
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in methods}
    answers: dict[str, list[list[str]]] = {}
    for round_ in range(repeat):
        order = list(methods) if round_ % 2 == 0 else list(reversed(methods))
        for name in order:
            wall, cpu = time.perf_counter(), time.process_time()
            got = methods[name]()
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
            answers.setdefault(name, got)
            print(f"[{label}] round {round_ + 1}: {name} {times[name][-1][0]:.1f}s "
                  f"(load {os.getloadavg()[0]:.2f})", flush=True)
    return times, answers


def _close(gen) -> None:
    """Stop a vLLM server this script started (and free the in-process model)."""
    if getattr(gen, "engine", None) is not None and gen.engine.launched:
        from prb_utils.models.serve.launcher import stop_started

        stop_started()


if __name__ == "__main__":
    main()
