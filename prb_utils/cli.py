"""The ``prb`` command line: validate, models, plan, score, summarize, report, bon, ppo, export.

Exit codes: 0 success; 2 for anything the user can fix (one plain sentence on stderr, no traceback);
130 after Ctrl-C (scores already computed are kept; re-run the same command to resume).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd

from prb_utils.analysis.attribution import (
    ATTRIBUTION_RULE,
    attribution_summary,
    attribution_table,
    decisive_posts,
    is_drop,
    longest_profile,
)
from prb_utils.analysis.findings import summary_verdicts
from prb_utils.analysis.leaderboard import locked_jobs
from prb_utils.analysis.metrics import TIE_RULES, summarize, unit_columns
from prb_utils.analysis.probe_effects import (
    control_table,
    controlled,
    probe_effects,
    probe_notes,
    probe_table,
    reading_verdicts,
    verdict_table,
)
from prb_utils.analysis.uncertainty import PLAN_UNITS, ResamplingPlan
from prb_utils.data import load_benchmark, read_benchmark, record_digests, subset_counts
from prb_utils.distributed import check_same_run, one_process_advice, setup, world
from prb_utils.downstream.correlation import MIN_RMS
from prb_utils.downstream.report_bon import (
    REPORT_BON,
    REPORT_BON_FOLDER,
    reusable_run,
    size_line,
    too_few_to_rank,
)
from prb_utils.downstream.rubric_judge import DEFAULT_JUDGE, check_judge, judge_label
from prb_utils.errors import DataError, PRBError
from prb_utils.export import FORMATS, export_results
from prb_utils.models import MODEL_KINDS, EngineConfig, ModelOptions, list_models, parse_spec
from prb_utils.models.engines import ENGINES
from prb_utils.models.serve.launcher import stop_started
from prb_utils.notebook.markup import prb_command
from prb_utils.notebook.params import PARAMS_BY_NOTEBOOK
from prb_utils.notebook.stages import Stages
from prb_utils.plan import loading_frame, plan_frame, plan_text
from prb_utils.probes import ATTRIBUTION, DROP_MAX, PROBES, backend_spellings, default_probes, probe
from prb_utils.profile import parse_condition, parse_seed, probe_conditions
from prb_utils.retrieval import post_selectors
from prb_utils.schema import DEFAULT_CONDITION, DEFAULT_ZOO, NO_PROFILE
from prb_utils.scoring import score_benchmark
from prb_utils.store import (
    StoreShortfallWarning,
    data_note,
    load_results,
    load_run_metadata,
    pair_units,
)

DEFAULT_REPORT_PROFILES = (NO_PROFILE, DEFAULT_CONDITION)
EXACT_SAMPLING_HELP = ("Best-of-N: sample each question on its own, seeded by its id (one generate call, or one server "
                       "request at a time), so its answers never depend on the questions sampled before or beside it; "
                       "slower. Default: several questions sampled together (their answers cached apart)")


def _int_at_least(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'")
    return value


def _positive_int(text: str) -> int:
    return _int_at_least(text, 1, "a positive integer")


def _seed(text: str) -> int:
    """A ``--seed`` (:func:`prb_utils.profile.parse_seed`: digits, 0 to 4294967295): argparse's error otherwise."""
    try:
        return parse_seed(text)
    except PRBError as bad:
        raise argparse.ArgumentTypeError(str(bad)) from None


def _positive_float(text: str) -> float:
    """A finite number > 0 (a rate): argparse's error for anything else (nan, inf, 0, -1, words), one sentence
    for every number out of range."""
    return _finite_float(text, "above 0", lambda value: value > 0)


def _rate(text: str) -> tuple[str | None, float]:
    """``TOKENS_PER_S`` (every model) or ``SPEC=TOKENS_PER_S`` (one model) of ``prb plan --rate``.

    >>> _rate("34000"), _rate("classifier:x=1e4")
    ((None, 34000.0), ('classifier:x', 10000.0))
    """
    spec, _, number = text.rpartition("=")
    return (spec.strip() or None), _positive_float(number)


def _count(text: str) -> int:
    return _int_at_least(text, 0, "0 or a positive integer")


def _nonnegative_float(text: str) -> float:
    """A finite number >= 0 (a coefficient): argparse's error for anything else (nan, inf, -1, words)."""
    return _finite_float(text, "of 0 or more", lambda value: value >= 0)


def _finite_float(text: str, allowed: str, ok: Callable[[float], bool]) -> float:
    """``text`` as a finite number that ``ok`` accepts; else argparse's error "'TEXT' is not a finite number
    ALLOWED" (or "is not a number")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and ok(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number {allowed}")
    return value


def _probe_name(text: str) -> str:
    """A probe of ``--probe``: one of :data:`prb_utils.probes.PROBES`, a backend retest (``retest-bfloat16``) or
    :data:`prb_utils.probes.ATTRIBUTION` (every drop probe of the base)."""
    if text.strip() == ATTRIBUTION:
        return ATTRIBUTION
    try:
        return probe(text.strip()).name
    except PRBError as bad:
        raise argparse.ArgumentTypeError(str(bad)) from None


def _folder_name(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("the folder name is empty; name a folder, e.g. results")
    return text


def _add_data_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument("--data", default=None if required else "sample", required=required,
                        help="'sample', a hub id, or a local .jsonl/.json/.parquet file or folder")
    parser.add_argument("--subset", action="append", default=None, help="only this subset (repeatable)")
    parser.add_argument("--limit", type=_positive_int, default=None, help="first N pairs of each subset")
    parser.add_argument("--drop-invalid", action="store_true", help="drop invalid records instead of refusing the data")


def _add_scoring_options(parser: argparse.ArgumentParser, *, default_models: Sequence[str] | None) -> None:
    parser.add_argument("--model", action="append", default=None, metavar="SPEC",
                        help="KIND:NAME, e.g. classifier:Skywork/Skywork-Reward-V2-Llama-3.1-8B (repeatable)"
                        + (f"; default: {' '.join(default_models)}" if default_models else ""))
    parser.add_argument("--profile", action="append", default=None, metavar="COND",
                        help="profile condition none|topK|full, a retriever after topK (top3:random:3), a probe after + "
                             "(top3+swap); repeatable")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--dtype", choices=("auto", "float32", "bfloat16"), default="auto")
    parser.add_argument("--batch-tokens", type=_positive_int, default=None, help="token budget per batch")
    parser.add_argument("--seed", type=_seed, default=0)
    parser.add_argument("--judge-mode", choices=("logprob", "generate"), default="logprob",
                        help="judge verdict from next-token probabilities (default) or generate+parse")
    parser.add_argument("--judge-template", default=None,
                        help="judge prompt: default, reference (the benchmark's own prompt) or a template file")
    parser.add_argument("--tokenization", choices=("auto", "reference"), default="auto",
                        help="special tokens after the chat template: auto (exactly once, default) or reference "
                             "(as the benchmark's reference scripts tokenize)")
    parser.add_argument("--allow-untrained-head", action="store_true",
                        help="score a checkpoint that lacks the kind's head (a random head) instead of refusing")
    parser.add_argument("--retriever", default=None, help="bm25 (default) or dense:NAME for topK profiles")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    _add_engine_options(parser)


def _add_engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=tuple(ENGINES), default="hf",
                        help="; ".join(f"{name}: {engine.help}" for name, engine in ENGINES.items())
                        + " (default: hf)")
    parser.add_argument("--engine-url", action="append", default=None, metavar="URL",
                        help="a running server of the --engine (e.g. http://host:8000); repeat it for several "
                             "servers of the same model, which share the requests; without it prb starts one itself")
    parser.add_argument("--engine-concurrency", type=_positive_int, default=None, metavar="N",
                        help="requests kept in flight per server (default: 16 per engine, or the engine's maximum "
                             "of sequences, e.g. vllm's max-num-seqs, times the server's data-parallel engines: its "
                             "data-parallel size, or as its metrics report)")
    parser.add_argument("--tensor-parallel-size", type=_positive_int, default=1, metavar="N",
                        help="GPUs per model replica for the server prb starts (default: 1)")
    parser.add_argument("--pipeline-parallel-size", type=_positive_int, default=1, metavar="N",
                        help="pipeline stages (nodes) for the server prb starts (default: 1)")
    parser.add_argument("--engine-arg", action="append", default=None, metavar="KEY=VALUE",
                        help="extra server option for the server prb starts (an option of the engine's own "
                             "command line, e.g. `vllm serve`'s max-model-len=4096; repeatable)")


def _engine_config(args: argparse.Namespace) -> EngineConfig:
    """The command line's engine, built once (PRBError, from :class:`EngineConfig`, for options without effect)."""
    return EngineConfig(args.engine, urls=tuple(args.engine_url or ()), tensor_parallel_size=args.tensor_parallel_size,
                        pipeline_parallel_size=args.pipeline_parallel_size, engine_args=tuple(args.engine_arg or ()),
                        concurrency=args.engine_concurrency)


def _model_options(args: argparse.Namespace) -> ModelOptions:
    """The command line's :class:`ModelOptions` (the fields this command has; the others keep their defaults),
    built once and passed whole."""
    given = {f.name: getattr(args, f.name) for f in fields(ModelOptions) if f.name != "engine" and hasattr(args, f.name)}
    return ModelOptions(**given, engine=_engine_config(args))


def _add_units_option(parser: argparse.ArgumentParser, *, saves: bool) -> None:
    """``--units``: the unit of the store's resampling plan (:class:`prb_utils.analysis.uncertainty.ResamplingPlan`);
    a scoring command keeps it in the store (``saves``), ``prb summarize`` uses it for one table."""
    parser.add_argument(
        "--units", choices=PLAN_UNITS, default=None,
        help="what every interval resamples and every paired test permutes: question (the default plan: the pairs "
             "of one question, its users and twins, move together; a bootstrap over questions and the clustered "
             "sign-flip test), user (one user's pairs move together), question+user (both crossed, where users "
             "recur across questions: the pigeonhole bootstrap and the two-way cluster-robust test) or pair (pairs "
             "as independent: Wilson and exact McNemar); " + ("kept in the store as its resampling plan (resampling.json), which every page, "
                                   "prb summarize and the exports then use" if saves else
                                   "default: the store's plan (resampling.json; whole questions without one)"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prb", description="Personalized RewardBench analysis.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check a benchmark source and count pairs per subset")
    p.add_argument("source", help="'sample', a hub id, or a local file or folder")
    p.add_argument("--subset", action="append", default=None)

    p = sub.add_parser("models", help="list model kinds and offline aliases, and which are available here")
    p.add_argument("--prepare", action="store_true",
                   help="first make the offline aliases ready to load (converts SmolLM2 once, about 30 s)")

    p = sub.add_parser("score", help="score reward models on a benchmark; results go to the store")
    _add_data_options(p, required=True)
    _add_scoring_options(p, default_models=None)
    p.add_argument("--out", type=_folder_name, default="results", help="store folder (default: results)")
    _add_units_option(p, saves=True)

    p = sub.add_parser("probe", help="is the RM reading this user? score the personalization probes and say",
                       description="Scores the base condition (--profile, default top3) and each probe of it "
                                   f"(condition BASE+PROBE: {', '.join(default_probes())}; see "
                                   "prb_utils.probes) like any job, then prints each probe against its base on the same "
                                   "pairs and, per model, whether it reads the user. --probe attribution leaves out "
                                   "each shown post in turn (drop1 .. dropK: K extra jobs for topK, one per post of "
                                   "the longest profile for full) and says which post each verdict hinges on.")
    _add_data_options(p, required=True)
    _add_scoring_options(p, default_models=None)
    p.add_argument("--probe", action="append", type=_probe_name, default=None, metavar="PROBE",
                   help=f"a probe to run (repeatable; default: {', '.join(default_probes())}); also the opt-in "
                        f"{', '.join(n for n in PROBES if n not in default_probes() and not PROBES[n].leaves_out)}, "
                        f"drop1 .. drop{DROP_MAX} or {ATTRIBUTION} (every drop probe of the base), and a backend "
                        f"retest, {backend_spellings()} (e.g. retest-bfloat16, retest-eager, retest-vllm), which "
                        "scores the same pairs with that option, a model loaded for its job alone")
    p.add_argument("--out", type=_folder_name, default="results", help="store folder (default: results)")
    _add_units_option(p, saves=True)

    _add_plan_parser(sub)

    p = sub.add_parser("summarize", help="accuracy with 95%% CIs from the store",
                       description="One row per group: n, correct, ties, invalid, accuracy, ci_low, ci_high "
                                   "(95%, under the store's resampling plan: whole questions by default; --units pair: Wilson). Groups always keep model and job_label (one row per job, "
                                   "never two jobs pooled) unless --pool is given.")
    p.add_argument("--results", type=_folder_name, default="results", help="store folder (default: results)")
    p.add_argument("--by", default="model,profile",
                   help="comma-separated grouping columns (model and job_label are added unless --pool)")
    p.add_argument("--pool", action="store_true",
                   help="group by --by only, pooling the jobs (and models) that share its levels")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="table (default), csv (one table) or json (one document: a list of rows); with "
                        "--compare, table and csv add the test columns to each row and json is "
                        "{\"summary\": [rows], \"comparisons\": [one row per test]}")
    p.add_argument("--compare", choices=("profile", "model"), default=None,
                   help="paired tests (Holm-adjusted; clustered by --units) of each level of this column against its "
                        "baseline (profile: none; model: the first job) within the other --by groups: columns "
                        "vs, n_pairs, diff, diff_ci_low, diff_ci_high, p_value, p_holm")
    p.add_argument("--half-credit", action="store_true",
                   help="count ties as half correct (not with --compare: the tests count strict correctness)")
    _add_units_option(p, saves=False)

    _add_report_parser(sub)
    _add_bon_parser(sub)

    _add_ppo_parser(sub)

    p = sub.add_parser("export", help="write the store in another tool's format (every_eval_ever, rewardbench, "
                                      "hub-eval-results)",
                       description="One export per scoring job; the oracle condition rubric is marked in every file.")
    p.add_argument("--format", required=True, metavar="FORMAT", help="every_eval_ever, rewardbench or hub-eval-results")
    p.add_argument("--results", type=_folder_name, default="results", help="store folder (default: results)")
    p.add_argument("--out", type=_folder_name, required=True, help="folder to write the export into")
    p.add_argument("--data", default=None, help="the benchmark the store was scored on ('sample', a hub id or a "
                                                "path): adds the texts to the per-item records")

    p = sub.add_parser("board", help="many submissions (prb export --format every_eval_ever) in one static, offline "
                                     "board that recomputes every number from their per-item rows",
                       description="Checks every submission (a bad one is refused in one sentence naming the file "
                                   "and the field), then writes DIR/index.html and DIR/board.json.")
    p.add_argument("submissions", nargs="+", metavar="SUBMISSION",
                   help="an Every Eval Ever .json that prb export wrote, or a folder holding such files")
    p.add_argument("--out", type=_folder_name, default=None, help="folder to write the board into")
    p.add_argument("--data", default=None, help="the benchmark the submissions name ('sample', a hub id or a path): "
                                                "check their data digest and pairs against it")
    p.add_argument("--report", type=_folder_name, default=None, metavar="DIR",
                   help="a folder `prb report` wrote: each card of a run of that report links to its sections of "
                        "the report's pages, and the report's index links to the board")
    p.add_argument("--check", action="store_true", help="check the submissions only; write nothing")
    return parser


def _add_report_parser(sub: argparse._SubParsersAction) -> None:
    """``prb report``: score what is missing, run every notebook, write the HTML pages."""
    p = sub.add_parser("report", help="score what is missing, run every notebook, write HTML reports")
    _add_data_options(p, required=False)
    _add_scoring_options(p, default_models=DEFAULT_ZOO)
    p.add_argument("--out", type=_folder_name, default="reports", help="report folder (default: reports)")
    p.add_argument("--results", type=_folder_name, default="results", help="store folder (default: results)")
    _add_units_option(p, saves=True)
    p.add_argument("--bon-n", type=_count, default=None, metavar="N",
                   help=f"Best-of-N in the report: answers sampled per question (default {REPORT_BON['n']}, and no run "
                        f"for fewer than {MIN_RMS} models: page 03 could not rank them; a number given runs it; 0 "
                        "skips the BoN run); `prb bon` runs it at any size")
    p.add_argument("--bon-limit", type=_positive_int, default=REPORT_BON["limit"], metavar="N",
                   help=f"Best-of-N in the report: first N questions of each subset (default {REPORT_BON['limit']})")
    p.add_argument("--bon-judge", default=DEFAULT_JUDGE, metavar="SPEC",
                   help=f"Best-of-N in the report: the rubric judge (default {DEFAULT_JUDGE}; see `prb bon --help`)")
    p.add_argument("--exact-sampling", action="store_true", help=EXACT_SAMPLING_HELP)
    p.add_argument("--rendered-inputs", action="store_true",
                   help="results.csv also gets the column rendered_input: the exact text each row's model saw "
                        "(chat template applied, a cut marked); each model's tokenizer is loaded, no weights")


def _add_plan_parser(sub: argparse._SubParsersAction) -> None:
    """``prb plan``: the options of ``prb score``, a rate per model and a load rate."""
    p = sub.add_parser("plan", help="before scoring: pairs, tokens, truncated pairs and device time per model and "
                                    "profile condition (tokenizers only, no weights)",
                       description="Takes the options of prb score. For each model x profile condition: the pairs, "
                                   "the tokens the forward passes compute (after prefix sharing on the prompt "
                                   "cache), the pairs longer than the model's context and an estimated device time "
                                   "(--rate); only tokenizers and config.json files are read.")
    _add_data_options(p, required=True)
    _add_scoring_options(p, default_models=None)
    p.add_argument("--rate", type=_rate, action="append", default=None, metavar="[SPEC=]TOKENS_PER_S",
                   help="tokens a forward pass computes per second on your device (bench/gpu_throughput.py prints "
                        "it as 'plain forward pass ... k tok/s'): for every model, or SPEC=RATE for one model "
                        "(repeatable; a model's own rate wins); without one the device time is n/a")
    p.add_argument("--load-rate", type=_positive_float, default=None, metavar="GB_PER_S",
                   help="the rate weights are read at on your machine, in GB/s (a job's run metadata records "
                        "weights_bytes and load_s: their ratio); without one the load time is n/a")


def _add_bon_parser(sub: argparse._SubParsersAction) -> None:
    """``prb bon``: the offline Best-of-N pipeline."""
    p = sub.add_parser("bon", help="Best-of-N: sample answers, score them with every RM, judge them, best-of-k curves",
                       description="The offline Best-of-N pipeline: the policy samples N answers per question, every "
                                   "RM scores them, a rubric judge rates them, and the exact best-of-k curves with "
                                   "95% CIs follow; everything is cached under RESULTS/bon, so a rerun reuses it.")
    _add_data_options(p, required=False)
    p.add_argument("--model", action="append", default=None, metavar="SPEC",
                   help=f"RM spec (repeatable); default: {' '.join(DEFAULT_ZOO)}")
    p.add_argument("--results", type=_folder_name, default="results",
                   help="store folder; the BoN files go to RESULTS/bon (default: results)")
    p.add_argument("--policy", default="smollm2", help="the model that samples the answers (default: smollm2)")
    p.add_argument("--n", type=_positive_int, default=8, help="answers sampled per question (default: 8)")
    p.add_argument("--judge", default=DEFAULT_JUDGE, help=f"rubric judge: llm:NAME (one 0/1/2 verdict per rubric aspect, "
                   f"prb's protocol after LaMP-QA), llm-all:NAME (prb's all-aspects prompt), llm-ref:NAME (the "
                   f"benchmark's reference judge, verbatim), llm-lampqa:NAME (LaMP-QA's evaluator, verbatim) or "
                   f"proxy (MiniLM similarity); "
                   f"default: {DEFAULT_JUDGE}")
    p.add_argument("--rm-profile", default=DEFAULT_CONDITION, metavar="COND",
                   help="profile condition of the RMs' input (default: top3)")
    p.add_argument("--quality-rule", choices=("auto", "argmax", "expected"), default="auto",
                   help="an llm: judge's answer quality from its most probable verdicts (argmax) or their "
                        "expected value (expected, the G-Eval practice); auto: argmax unless it rates every "
                        "answer alike (default: auto)")
    p.add_argument("--exact-sampling", action="store_true", help=EXACT_SAMPLING_HELP)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--dtype", choices=("auto", "float32", "bfloat16"), default="auto",
                   help="dtype of the policy, the RMs and an LLM judge (auto: bfloat16 on CUDA, float32 on CPU); "
                        "run.json records it")
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    _add_engine_options(p)


def _add_ppo_parser(sub: argparse._SubParsersAction) -> None:
    from prb_utils.downstream.ppo import PPO_ZOO, TrainOptions, run_ppo_defaults

    bon_judge = sub.choices["bon"].get_default("judge")  # the same default rubric judge as prb bon
    train, run = TrainOptions(), run_ppo_defaults()
    p = sub.add_parser("ppo", help="online RL (TRL's GRPO): one policy trained per RM, then rubric-judged",
                       description="For each RM, train the policy with TRL's GRPOTrainer on the training questions "
                                   "with that RM's score as the reward, then answer the held-out questions and rate "
                                   "the answers with the rubric judge (the untrained policy too, row 'untrained'). "
                                   "Writes RESULTS/ppo/ppo.csv (rm,subset,score,n,trainer); runs are checkpointed under "
                                   "RESULTS/ppo/runs, so a rerun resumes and trains nothing twice.")
    _add_data_options(p, required=False)
    p.add_argument("--model", action="append", default=None, metavar="SPEC",
                   help=f"RM spec (repeatable); default: {' '.join(PPO_ZOO)}")
    p.add_argument("--policy", default=run["policy"], help=f"the chat model trained (default: {run['policy']})")
    p.add_argument("--steps", type=_positive_int, default=run["steps"],
                   help=f"GRPO optimizer steps per RM (default: {run['steps']})")
    p.add_argument("--judge", default=bon_judge,
                   help=f"rubric judge of the held-out answers, as for prb bon (default: {bon_judge})")
    p.add_argument("--results", type=_folder_name, default="results",
                   help="store folder; the PPO files go to RESULTS/ppo (default: results)")
    p.add_argument("--eval-questions", type=_positive_int, default=run["eval_questions"],
                   help=f"held-out questions the trained policies answer (default: {run['eval_questions']})")
    p.add_argument("--policy-posts", type=_count, default=train.policy_posts, metavar="K",
                   help=f"profile posts in the policy's prompt (default: {train.policy_posts})")
    p.add_argument("--rm-profile", default=train.rm_profile, metavar="COND",
                   help=f"profile condition of the RMs' input (default: {train.rm_profile})")
    p.add_argument("--num-generations", type=int, default=train.num_generations,
                   help=f"completions per prompt and step (default: {train.num_generations})")
    p.add_argument("--prompts-per-step", type=_positive_int, default=train.prompts_per_step,
                   help=f"prompts per step (default: {train.prompts_per_step})")
    p.add_argument("--max-new-tokens", type=_positive_int, default=train.max_new_tokens,
                   help=f"completion length in training and evaluation (default: {train.max_new_tokens})")
    p.add_argument("--kl-coef", type=_nonnegative_float, default=train.beta,
                   help=f"GRPO's KL penalty toward the untrained policy, TRL's beta (default: {train.beta:g}: none)")
    p.add_argument("--learning-rate", type=_positive_float, default=train.learning_rate,
                   help=f"constant learning rate (default: {train.learning_rate:g})")
    p.add_argument("--save-steps", type=_positive_int, default=run["save_steps"],
                   help=f"checkpoint every N steps (default: {run['save_steps']})")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--dtype", choices=("auto", "float32", "bfloat16"), default="auto",
                   help="dtype of the held-out answers, the RMs and an LLM judge; training keeps float32 weights "
                        "(bfloat16 mixed precision on CUDA unless float32); run.json records it")
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    _add_engine_options(p)


#: The data loads whose dropped records were listed in this command (a command that loads its data twice, as
#: ``prb probe`` and ``prb report`` do, lists them once); emptied by :func:`main`.
_DROPS_LISTED: set[tuple[Any, ...]] = set()


def _load(args: argparse.Namespace) -> pd.DataFrame:
    frame = load_benchmark(args.data, subsets=args.subset, limit=args.limit, drop_invalid=args.drop_invalid)
    dropped = frame.attrs.get("dropped") or []
    load = (args.data, tuple(args.subset or ()), args.limit)
    if dropped and load not in _DROPS_LISTED:
        _DROPS_LISTED.add(load)
        names = list(dict.fromkeys(dropped))
        shown = ", ".join(names[:10]) + (" …" if len(names) > 10 else "")
        print(f"Dropped {len(dropped)} invalid record(s): {shown}", file=sys.stderr)
        for line in frame.attrs.get("problems", []):
            print(f"  {line}", file=sys.stderr)
    return frame


def _check_writable(folder: str, *, writes: bool = True) -> None:
    """Create ``folder``; when ``writes``, refuse one that cannot be written. A store is only written when
    something is left to score, so a finished store on a read-only disk is read without complaint."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PRBError(f"Cannot create the output folder {folder} ({exc.strerror}).") from None
    if writes and not os.access(path, os.W_OK):
        raise PRBError(f"The output folder {folder} is not writable.")


def _warn_options_without_effect(args: argparse.Namespace, options: ModelOptions, models: Sequence[str],
                                 profiles: Sequence[str]) -> None:
    """One warning per option that changes nothing in this run (a retriever without a top{K} condition,
    judge options without a judge model, a server engine that serves none of the models)."""

    top_k = any(parse_condition(c).retrieves for c in profiles)  # none, full, rubric retrieve nothing
    kinds = [parse_spec(m).kind for m in models]
    judges = any(MODEL_KINDS[kind].judge_options for kind in kinds)
    unused = []
    if args.retriever is not None and not top_k:
        unused.append(("--retriever", "there is no top{K} profile condition (only top{K} retrieves posts)"))
    if options.judge_template is not None and not judges:
        unused.append(("--judge-template", "no --model is a judge: model"))
    if options.judge_mode != "logprob" and not judges:
        unused.append(("--judge-mode", "no --model is a judge: model"))
    engine = options.engine
    if not engine.in_process and not any(engine.remote(kind) for kind in kinds):
        unused.append((f"--engine {engine.name}",
                       f"no --model is of a kind the server runs ({', '.join(engine.engine.adapters)})"))
    for option, reason in unused:
        print(f"prb: warning: {option} has no effect: {reason}.", file=sys.stderr)


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as JSON-ready records (NaN as null)."""
    return json.loads(frame.to_json(orient="records"))


def _print_frame(frame: pd.DataFrame, fmt: str = "table") -> None:
    if fmt == "csv":
        print(frame.to_csv(index=False), end="")
    elif fmt == "json":
        print(frame.to_json(orient="records", indent=2))
    else:
        print(frame.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        failed = int(frame["failed"].sum()) if "failed" in frame.columns else 0
        if failed:
            print(f"{failed} failed pair(s) (the model or its server raised) are left out of n and of the accuracy; "
                  "running the same prb score again scores them.")


def cmd_validate(args: argparse.Namespace) -> int:
    result = read_benchmark(args.source, subsets=args.subset)
    if result.problems:
        for problem in result.problems:
            print(problem, file=sys.stderr)
        print(f"{len(result.problems)} problem(s) in {args.source}.", file=sys.stderr)
        return 2
    if result.frame.empty:
        print(f"No records in {args.source}.", file=sys.stderr)
        return 2
    _print_frame(subset_counts(result.frame))
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    if args.prepare:
        from prb_utils.models.aliases import prepare_aliases

        for name, path in prepare_aliases().items():
            print(f"{name}: ready in {path}")
    _print_frame(list_models())
    return 0


def _score(args: argparse.Namespace, options: ModelOptions, models: Sequence[str], profiles: Sequence[str], out: str,
           *, also: Sequence[tuple[Sequence[str], Sequence[str]]] = (), stage: Any = None) -> pd.DataFrame:
    """Score ``models`` under ``profiles`` (then each ``(models, profiles)`` of ``also``) on the data of
    ``args`` into the store ``out``; the rows of the first set. ``stage``: a progress bar over jobs, moved as
    each model's jobs finish (the models are then scored one at a time)."""

    for condition in profiles:
        parse_condition(condition)
    _warn_options_without_effect(args, options, models, profiles)
    frame = _load(args)
    if world().distributed and options.engine.in_process:   # (a server engine refuses ranks in score_benchmark)
        # rank 0 compares every rank's command line and data before any work; the data by its records, not its
        # path (a node may keep it elsewhere)
        check_same_run(setup(), {k: v for k, v in vars(args).items() if k != "data"}, record_digests(frame))
    _check_writable(out, writes=False)
    _keep_plan(args, out)
    runs = []
    for run_models, run_profiles in [(models, profiles), *also]:
        parts = []
        for some in [[m] for m in run_models] if stage is not None else [run_models]:
            parts.append(score_benchmark(frame, some, run_profiles, out=out, options=options,
                                         retriever=args.retriever, progress=not args.no_progress))
            if stage is not None:
                stage.update(len(some) * len(run_profiles))
        runs.append(parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True))
    truncated = sum(int(r["truncated"].fillna(False).astype(bool).sum()) for r in runs if "truncated" in r.columns)
    if truncated and world().is_main:   # under torchrun, rank 0 alone speaks
        print(f"Note: {truncated} scored pair(s) exceeded a model's context and were truncated (the user "
              "message is cut from the left, responses are kept); counts per job are in the run metadata.",
              file=sys.stderr)
    return runs[0]


def cmd_score(args: argparse.Namespace) -> int:
    if not args.model:
        raise PRBError("Give at least one --model KIND:NAME (see `prb models`).")
    results = _score(args, _model_options(args), args.model, args.profile or ["none"], args.out)
    if results.empty:
        raise PRBError("No pairs were scored.")
    if world().is_main:   # under torchrun, rank 0 alone prints the table
        labels = results["job"].map(_store_job_labels(args.out))   # as prb summarize labels them
        plan = _store_plan(args.out)   # its intervals too: the store's one plan
        rows, _ = _with_units(results.assign(job_label=labels), args.out, plan)
        table, notes = _with_verdicts(rows, ("model", "job_label", "profile"), plan)
        _print_frame(table)
        print(f"\n{plan.rule()}.")
        for note in notes:
            print(note)
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    """``prb probe``: the base condition and its probes scored like ``prb score``, then what they found."""
    if not args.model:
        raise PRBError("Give at least one --model KIND:NAME (see `prb models`).")
    if args.profile and len(args.profile) > 1:
        raise PRBError("prb probe takes one --profile (the base condition the probes transform, default top3).")
    most_posts = longest_profile(_load(args)) if ATTRIBUTION in (args.probe or ()) else 0
    conditions = probe_conditions((args.profile or [DEFAULT_CONDITION])[0], args.probe, most_posts=most_posts)
    results = _score(args, _model_options(args), args.model, conditions, args.out)
    if world().is_main:
        data = _load(args)
        with warnings.catch_warnings():   # the store's rows of these jobs carry their labels and score dtypes
            warnings.simplefilter("ignore", StoreShortfallWarning)
            stored = load_results(args.out)
        rows = stored[stored["job"].isin(set(results["job"]))]
        plan = _store_plan(args.out)   # the store's one plan: page 05 resamples the same units
        effects = probe_effects(rows.assign(model=rows["job_label"]), data, **plan.options())
        effects = effects[~is_drop(effects)]   # the drop jobs: read by the attribution table below, as on page 05
        if not effects.empty:
            _print_frame(probe_table(effects))
        if not controlled(effects).empty:
            print()
            _print_frame(control_table(effects))
        verdicts = reading_verdicts(effects)
        if not verdicts.empty:
            print()
            _print_frame(verdict_table(verdicts))
        print("\n" + "\n".join([*(probe_notes(effects) if not effects.empty else []), f"{plan.rule()}."]))
        base = parse_condition(conditions[0])
        picks = post_selectors([base], args.retriever, args.seed)[base.spelling]   # the posts the base job showed
        _print_attribution(rows.assign(model=rows["job_label"]), data, plan, picks)
    return 0


def _print_attribution(rows: pd.DataFrame, data: pd.DataFrame, plan: Any, retriever: Any = None) -> None:
    """The attribution table of the drop jobs among ``rows`` (:mod:`prb_utils.analysis.attribution`; ``retriever``:
    the base job's post selector), with its rule; nothing where ``rows`` holds no drop job."""
    summary = attribution_summary(rows, data, retriever=retriever, **plan.options())
    if summary.empty:
        return
    print()
    _print_frame(attribution_table(summary, decisive_posts(rows, data, retriever=retriever)))
    print(f"\nAttribution: {ATTRIBUTION_RULE}.")


def cmd_plan(args: argparse.Namespace) -> int:
    """``prb plan``: the options of ``prb score``, checked as it checks them; one table, no weights loaded."""
    if not args.model:
        raise PRBError("Give at least one --model KIND:NAME (see `prb models`).")
    profiles = args.profile or ["none"]
    for condition in profiles:
        parse_condition(condition)
    options = _model_options(args)
    _warn_options_without_effect(args, options, args.model, profiles)
    rates = dict(args.rate or ())
    named = {parse_spec(m).canonical for m in args.model}
    unknown = [spec for spec in rates if spec is not None and parse_spec(spec).canonical not in named]
    if unknown:
        raise PRBError(f"--rate {unknown[0]}=...: {unknown[0]} is not one of the --model specs planned "
                       f"({', '.join(sorted(named))}).")
    rates = {(parse_spec(k).canonical if k else None): v for k, v in rates.items()}
    table = plan_frame(_load(args), args.model, profiles, options=options, retriever=args.retriever, rate=rates)
    for line in table.attrs["warnings"]:
        print(f"prb: warning: {line}", file=sys.stderr)
    print(plan_text(table, loading_frame(args.model, load_rate=args.load_rate)))
    return 0


def summary_groups(by: Sequence[str], compare: str | None, *, pool: bool) -> tuple[list[str], str | None]:
    """The grouping columns and the compared column of ``prb summarize``: model and job_label are kept
    (one row per job) unless ``pool``; comparing models then compares jobs (``job_label``).

    >>> summary_groups(["subset", "profile"], None, pool=False)
    (['model', 'job_label', 'subset', 'profile'], None)
    >>> summary_groups(["model", "profile"], "model", pool=False)
    (['job_label', 'profile'], 'job_label')
    """
    by = list(dict.fromkeys(by))
    if pool:
        return by, compare
    if compare == "model":
        return ["job_label", *[c for c in by if c not in ("model", "job_label")]], "job_label"
    return ["model", "job_label", *[c for c in by if c not in ("model", "job_label")]], compare


def _load_store(folder: str) -> pd.DataFrame:
    """The store's rows; a job missing rows is named on stderr (never dropped silently)."""

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreShortfallWarning)
        results = load_results(folder)
    for problem in results.attrs.get("shortfalls", []):
        print(f"prb: warning: {problem}", file=sys.stderr)
    return results


def _store_job_labels(folder: str) -> dict[str, str]:
    """``{job: job_label}`` of every job in the store, as ``prb summarize`` labels them: a job's label depends on
    the other jobs of its model, so the jobs one ``prb score`` wrote are labelled against the whole store."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreShortfallWarning)
        stored = load_results(folder)
    return dict(zip(stored["job"], stored["job_label"], strict=True))


def cmd_summarize(args: argparse.Namespace) -> int:
    results = _load_store(args.results)
    if results.empty:
        raise PRBError(f"No results in {args.results}; run `prb score` first.")
    asked = [c.strip() for c in args.by.split(",") if c.strip()]
    unknown = [c for c in asked if c not in results.columns]
    if unknown:
        raise PRBError(f"Unknown --by column {', '.join(unknown)}; available: {', '.join(results.columns)}.")
    by, column = summary_groups(asked, args.compare, pool=args.pool)
    if column and results[column].nunique(dropna=True) < 2:
        levels = ", ".join(map(str, results[column].dropna().unique())) or "none"
        print(f"prb: note: --compare {args.compare} has nothing to compare: the store holds one level of "
              f"{column} ({levels}); score another {args.compare} to test against it.", file=sys.stderr)
        column = None
    plan = _store_plan(args.results, args.units)
    results, note = _with_units(results, args.results, plan)
    members, left_out = verdict_members(results, column)
    table, notes = _with_verdicts(results, by, plan, compare=column, half_credit=args.half_credit, members=members)
    if note:
        print(note, file=sys.stderr)
    if args.format == "json":
        summary = _records(_with_verdicts(results, by, plan, half_credit=args.half_credit)[0])
        if not column:
            print(json.dumps(summary, indent=2))
            return 0
        within = [c for c in by if c != column]
        tested = results if members is None else results[members]
        comparisons = plan.compare(tested, column, baseline=_baseline(results, column), by=within)
        held = table[table["p_value"].notna()][[*within, column, "p_holm"]].rename(columns={column: "level_b"})
        comparisons = comparisons.drop(columns="p_holm").merge(held.astype({"level_b": str}), how="left",
                                                               on=[*within, "level_b"])   # the table's families
        print(json.dumps({"summary": summary, "comparisons": _records(comparisons)}, indent=2))
        return 0
    if args.format == "table" and args.pool:
        print(f"Pooled over every job that shares the levels of {', '.join(by) or 'the whole store'}.")
    _print_frame(table, args.format)
    if args.format == "table":
        print(f"\nTies: {TIE_RULES[bool(args.half_credit)]}.")
        print(f"{plan.rule()}.")
        for line in notes:
            print(line)
        if column:
            print(family_note(column, left_out))
        if data := data_note(load_run_metadata(args.results)):   # which data each job scored
            print(data)
    return 0


def _with_verdicts(results: pd.DataFrame, by: Sequence[str], plan: ResamplingPlan, *, compare: str | None = None,
                   half_credit: bool = False, members: pd.Series | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The summary table of ``results`` with the findings' verdicts (against chance, n/a for a position-locked
    judge) and the notes to print under it (:func:`~prb_utils.analysis.findings.summary_verdicts`), so the
    command line says what the pages say of the same rows."""
    table = summarize(results, by, compare=compare, half_credit=half_credit, members=members, **plan.options())
    other = None
    if table["ties"].fillna(0).gt(0).any():   # the same rows under the other tie rule: do ties decide a verdict?
        grouped = [*by, *([compare] if compare and compare not in by else [])]
        other = summarize(results, grouped, half_credit=not half_credit, **plan.options())
    return summary_verdicts(table, results, other=other, half_credit=half_credit)


def verdict_members(results: pd.DataFrame, column: str | None) -> tuple[pd.Series | None, list[str]]:
    """The rows that take part in ``prb summarize --compare``'s paired tests, as the findings' families take them
    (a model that can get no verdict is no member: a position-locked judge job; for profiles, a kind that never
    reads the profile and a judge locked under ``none``), and the left-out jobs named with their reason."""
    if column is None:
        return None, []
    jobs = results.assign(model=results["job_label"])
    locked = set(locked_jobs(jobs))
    pairs = list(zip(jobs["model"], jobs["profile"], strict=True))
    keep = pd.Series([pair not in locked for pair in pairs], index=results.index, dtype=bool)
    left_out = [f"{m} under {p} (position-locked)" for m, p in sorted(locked)]
    if column == "profile":
        blind = results["kind"].map(lambda k: k in MODEL_KINDS and not MODEL_KINDS[k].reads_profile).astype(bool)
        whole = {m for m, p in locked if p == NO_PROFILE}
        keep &= ~blind & ~jobs["model"].isin(whole)
        left_out += [f"{m} (never reads the profile)" for m in sorted(set(jobs.loc[blind, "model"]))]
    return keep, left_out


def family_note(column: str, left_out: Sequence[str]) -> str:
    """The sentence under ``prb summarize --compare``: which family each adjusted p belongs to.

    >>> family_note("profile", ["length (never reads the profile)"])
    'Families: p_holm is Holm-adjusted within each condition over the lifts of the jobs that can get a verdict, as every page adjusts them; not members: length (never reads the profile).'
    """
    what = ("within each condition over the lifts of the jobs that can get a verdict" if column == "profile" else
            "within each condition over every pair of its jobs (the family of its ranks)")
    tail = f"; not members: {', '.join(left_out)}" if left_out else ""
    return f"Families: p_holm is Holm-adjusted {what}, as every page adjusts them{tail}."


def _store_plan(store: str, unit: str | None = None) -> ResamplingPlan:
    """The resampling plan of the store ``store`` (:meth:`ResamplingPlan.of_store`), with the ``--units`` the user
    gave for this command."""
    return ResamplingPlan.of_store(store).with_overrides(unit=unit)


def _keep_plan(args: argparse.Namespace, store: str) -> None:
    """A scoring command's ``--units``: kept in the store as its resampling plan (every later page and command
    reads it); nothing without ``--units``."""
    if getattr(args, "units", None) and world().is_main:
        _check_writable(store, writes=False)
        _store_plan(store, args.units).save(store)


def _with_units(results: pd.DataFrame, store: str, plan: ResamplingPlan) -> tuple[pd.DataFrame, str]:
    """``results`` with the cluster column of ``plan`` (``question`` or ``user``: the keys the store's jobs
    recorded, :func:`prb_utils.store.pair_units`, the same keys a page computes from the benchmark), and a note for
    stderr when a pair's unit was not recorded (a job scored by an older prb: that pair is its own unit)."""
    if plan.units is None:
        return results, ""
    units = pair_units(store)
    units = units[units[unit_columns(plan.units)].notna().all(axis=1)]
    known = set(zip(units["subset"].astype(str), units["id"].astype(str), strict=True))
    missing = sum((s, i) not in known for s, i in zip(results["subset"].astype(str), results["id"].astype(str),
                                                       strict=True))
    note = (f"prb: note: {missing} of {len(results)} rows come from jobs that did not record their {plan.unit} "
            "(scored by an older prb): each of those pairs is its own unit; score them again to cluster them."
            if missing else "")
    return plan.attach(results, units, keys=True), note


def _baseline(results: pd.DataFrame, column: str) -> str:
    """The level :func:`prb_utils.analysis.metrics.summarize` tests the others against."""
    levels = sorted(results[column].dropna().astype(str).unique())
    return NO_PROFILE if column == "profile" and NO_PROFILE in levels else levels[0]


def cmd_report(args: argparse.Namespace) -> int:
    from prb_utils.notebook.report import build_report, check_out_folder

    models = args.model or list(DEFAULT_ZOO)
    profiles = args.profile or list(DEFAULT_REPORT_PROFILES)
    check_out_folder(args.out)  # before scoring: never overwrite the source notebooks
    options = _model_options(args)
    args.bon_n = _report_bon_size(args, models)
    if args.bon_n > 0:
        check_judge(args.bon_judge, options)   # a judge that cannot be used fails before scoring
    needs = {name: page.report_needs(models, profiles, asked_profiles=bool(args.profile), retriever=args.retriever)
             for name, page in PARAMS_BY_NOTEBOOK.items()}   # each page says which jobs it needs and how it runs
    extra = [jobs for need in needs.values() for jobs in need.jobs]
    jobs = len(models) * len(profiles) + sum(len(j.models) * len(j.profiles) for j in extra)
    stages = Stages(progress=not args.no_progress)
    with stages.stage(f"scoring {jobs} jobs (models x profile conditions)", total=jobs, unit="job") as bar:
        _score(args, options, models, profiles, args.results, stage=bar,
               also=[(j.models, j.profiles) for j in extra if j.retriever is None])
        for j in (j for j in extra if j.retriever is not None):
            _score(argparse.Namespace(**{**vars(args), "retriever": j.retriever}), options, j.models, j.profiles,
                   args.results, stage=bar)
    pages: dict[str, dict[str, Any]] = {name: dict(need.parameters) for name, need in needs.items() if need.parameters}
    if args.bon_n > 0:
        plain = [p for p in profiles if not parse_condition(p).oracle] or ["none"]   # never the rubric oracle
        with stages.stage("Best-of-N (sampling, scoring, judging)", kind="bon"):
            bon_dir = _report_bon(args, options, models,
                                  rm_profile=DEFAULT_CONDITION if DEFAULT_CONDITION in plain else plain[-1])
        pages["03_downstream_correlation"] = {"bon_dir": str(bon_dir.resolve())}
    _check_writable(args.out)
    index = build_report(data=args.data, results=args.results, out=args.out, models=models, profiles=profiles,
                         progress=not args.no_progress, parameters=pages or None, subsets=args.subset or (),
                         limit=args.limit, stages=stages, rendered_inputs=args.rendered_inputs)
    print(f"Report written to {index}")
    return 0


def _report_bon_size(args: argparse.Namespace, models: Sequence[str]) -> int:
    """The answers per question of the report's own Best-of-N run: ``--bon-n`` when given, else the default, or 0
    (with one line on stderr naming why and the ``prb bon`` command) when page 03 could not rank ``models``."""
    if args.bon_n is not None:
        return int(args.bon_n)
    why = too_few_to_rank(models)
    if not why:
        return REPORT_BON["n"]
    print(f"Best-of-N: not run by the report: {why} (--bon-n N runs it anyway; at any size: "
          f"{prb_command('bon', data=args.data, models=models, store=args.results)})", file=sys.stderr)
    return 0


def _report_bon(args: argparse.Namespace, options: ModelOptions, models: Sequence[str], *, rm_profile: str) -> Path:
    """The Best-of-N run page 03 shows: a ``prb bon`` run in ``RESULTS/bon`` that can be shown
    (:func:`prb_utils.downstream.report_bon.reusable_run`), or else the report's own small run (``--bon-n``,
    ``--bon-limit``, ``--bon-judge``) written apart, to ``RESULTS/bon-report``, so that it never replaces a larger
    run; its size is said first."""
    from prb_utils.downstream.pipeline import run_bon_pipeline
    from prb_utils.downstream.policy import SamplingOptions

    data = _load(args).groupby("subset", sort=False).head(args.bon_limit)
    full = Path(args.results) / "bon"
    shown, note = reusable_run(full, data, models=models, rm_profile=rm_profile, judge=args.bon_judge,
                               n_samples=args.bon_n, exact=args.exact_sampling)
    if note:
        print(note, file=sys.stderr)
    if shown:
        return full
    print(size_line(len(data), args.bon_n, args.bon_judge, per_subset=args.bon_limit), file=sys.stderr)
    run_bon_pipeline(data, out=args.results, models=models, rm_profile=rm_profile, judge=args.bon_judge,
                     sampling=SamplingOptions(n_samples=args.bon_n, exact=args.exact_sampling), options=options,
                     figures=False, progress=not args.no_progress, folder=REPORT_BON_FOLDER)
    return Path(args.results) / REPORT_BON_FOLDER


def cmd_export(args: argparse.Namespace) -> int:
    if args.format not in FORMATS:
        raise PRBError(f"Unknown export format '{args.format}'; use one of {', '.join(FORMATS)}.")
    data = None
    if args.data is not None:
        data = load_benchmark(args.data, drop_invalid=True)
    notes: list[str] = []
    files = export_results(args.results, args.out, format=args.format, data=data, data_source=args.data,
                           notes=notes)
    for note in notes:
        print(f"prb: {note}", file=sys.stderr)
    print(f"Wrote {len(files)} file(s) in the {args.format} format to {args.out}")
    return 0


def cmd_board(args: argparse.Namespace) -> int:
    from prb_utils.board import build_board, check_submissions

    if args.out is None and not args.check:
        raise PRBError("Name the folder to write the board into with --out DIR (or give --check to check only).")
    if args.check:
        checked = check_submissions(args.submissions, data_source=args.data)
        print(f"{len(checked)} submission(s) checked: each can go on one board.")
        return 0
    built = build_board(args.submissions, args.out, data_source=args.data, report=args.report)
    for note in built.notes:
        print(f"prb: note: {note}", file=sys.stderr)
    print(f"Wrote the board of {len(built.numbers['models'])} run(s) to {built.page}")
    return 0


def cmd_bon(args: argparse.Namespace) -> int:
    from prb_utils.downstream.pipeline import run_bon_pipeline
    from prb_utils.downstream.policy import SamplingOptions

    parse_condition(args.rm_profile)
    options = _model_options(args)
    data = _load(args)
    _check_writable(args.results)
    run = run_bon_pipeline(data, out=args.results, models=args.model or list(DEFAULT_ZOO), rm_profile=args.rm_profile,
                           judge=args.judge, sampling=SamplingOptions(policy=args.policy, n_samples=args.n,
                                                                      exact=args.exact_sampling),
                           options=options, progress=not args.no_progress, quality_rule=args.quality_rule)
    table = run.curves[run.curves["method"] == "exact"].pivot_table(index="model", columns="k", values="mean")
    rule = str(run.frame["quality_rule"].iloc[0])
    print(f"Expected best-of-k rubric quality ({judge_label(run.judge, run.judge_proxy)}; quality rule {rule}):")
    print(table.round(3).to_string())
    print("Timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in run.timings.items()))
    print(f"Files in {Path(args.results) / 'bon'}; figures: {', '.join(p.name for p in run.figures)}")
    return 0


def cmd_ppo(args: argparse.Namespace) -> int:
    from prb_utils.downstream.ppo import PPO_ZOO, TRAINER, TrainOptions, run_ppo

    parse_condition(args.rm_profile)
    training = TrainOptions(num_generations=args.num_generations, prompts_per_step=args.prompts_per_step,
                            learning_rate=args.learning_rate, max_new_tokens=args.max_new_tokens,
                            policy_posts=args.policy_posts, rm_profile=args.rm_profile, beta=args.kl_coef)
    options = _model_options(args)
    data = _load(args)
    _check_writable(args.results)
    run = run_ppo(data, out=args.results, policy=args.policy, models=args.model or list(PPO_ZOO), steps=args.steps,
                  judge=args.judge, eval_questions=args.eval_questions, training=training, options=options,
                  save_steps=args.save_steps, progress=not args.no_progress)
    for spec, reason in run.diverged.items():
        print(f"prb: warning: the policy trained on {spec} {reason}; it is left out of the RL table.", file=sys.stderr)
    print(f"Held-out rubric quality after {args.steps} GRPO steps per RM ({judge_label(run.judge, run.judge_proxy)}):")
    print(run.table.pivot_table(index="rm", columns="subset", values="score").round(3).to_string())
    print(f"Trained now: {', '.join(run.trained) or 'nothing (all runs were finished)'}; "
          "timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in run.timings.items()))
    print(f"RL table (trained with TRL's {TRAINER}, not PPO): {Path(args.results) / 'ppo' / 'ppo.csv'}")
    return 0


COMMANDS = {"validate": cmd_validate, "models": cmd_models, "plan": cmd_plan, "score": cmd_score, "probe": cmd_probe,
            "summarize": cmd_summarize, "report": cmd_report, "bon": cmd_bon, "ppo": cmd_ppo, "export": cmd_export,
            "board": cmd_board}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    args = build_parser().parse_args(argv)
    _DROPS_LISTED.clear()
    try:
        return _run_command(args)
    finally:
        stop_started()   # never leave a server prb started behind


#: The commands that split their work over torchrun's ranks; the others refuse ranks in one sentence.
RANKED_COMMANDS = ("score",)


def _run_command(args: argparse.Namespace) -> int:
    try:
        if args.command not in RANKED_COMMANDS and world().distributed:
            raise PRBError(f"prb {args.command} runs as one process: {one_process_advice()} (only prb "
                           f"{' and prb '.join(RANKED_COMMANDS)} splits its work over torchrun's ranks).")
        return COMMANDS[args.command](args)
    except DataError as exc:
        for line in exc.problems:
            print(line, file=sys.stderr)
        print(f"prb: {exc}", file=sys.stderr)
        return 2
    except PRBError as exc:
        print(f"prb: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("prb: interrupted; scores already computed are saved, run the same command again to resume.",
              file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
