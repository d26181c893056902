"""``prb ppo``: train the policy once per reward model with TRL's online RL trainer, then rubric-judge it.

Trainer: TRL's :class:`trl.GRPOTrainer`. TRL 1.16.0 ships no ``PPOTrainer`` any more (neither in ``trl`` nor
in ``trl.experimental``); its online RL trainers are ``GRPOTrainer`` and ``RLOOTrainer``, and both take
Python callables as ``reward_funcs``. GRPO is the one TRL develops first (resuming, logging, vLLM generation,
``beta`` = 0 needs no reference model), and its per-prompt group normalization (``scale_rewards="group"``)
makes the reward's scale irrelevant, which matters here: prb's RMs score on unrelated scales (a mean
log-probability, a cosine, a character count, a win probability). Like PPO it is an on-policy, clipped
policy-gradient method; unlike PPO it has no value head (the baseline is the mean reward of the prompt's
group of ``num_generations`` completions).

1. Questions are split deterministically (``seed``) into training and held-out questions
   (:func:`split_questions`; a question text never lands in both). The policy's prompt is
   :func:`prb_utils.downstream.policy.policy_prompt`: the question and the user's ``policy_posts`` most
   relevant profile posts (never the rubric nor the narrative), as a chat with the BoN system message.
2. Per RM, the reward of a completion is that RM's score through prb's own adapters
   (:func:`prb_utils.models.load_model` -> ``score_pairs``), with the RM seeing the question plus the profile
   condition ``rm_profile`` (as in ``prb score``). Pointwise kinds score (RM user message, completion)
   directly (two completions of one prompt per scored pair, each side scored on its own). A pairwise
   ``judge:`` compares each completion with the *next completion of the same prompt* in its GRPO group
   (cyclically, both A/B orders) and the reward is its mean win probability over the comparisons it is in
   (with two completions per prompt: P(win) and 1 - P(win)). An invalid score gives the completion no reward
   (``None`` to TRL: TRL 1.16 leaves it out of its group's mean and standard deviation and gives it no
   advantage, so it neither counts as 0 nor moves the others' baseline).
3. Each RM's run lives in ``<out>/ppo/runs/<rm>-<key>/``: TRL checkpoints (the last one kept, optimizer
   included), ``rewards.jsonl`` (one line per optimizer step: the step and its rewards) and ``run.json``. The
   key covers the RM (and its fingerprint), the policy, the split, the seed and every training option but
   the number of steps, so ``steps=1`` then ``steps=2`` trains one more step from the first run's
   checkpoint, an interrupted training resumes from its last checkpoint, and a finished RM is not trained
   again. The learning rate is constant, so a run extended step by step is the same recipe.
4. The trained policy (and once, the untrained one: row ``untrained``) answers each held-out question
   greedily; the rubric judge (default: ``prb bon``'s default judge) rates each answer's quality in [0, 1]
   (cached in ``<out>/ppo/judge/``). ``<out>/ppo/ppo.csv`` holds ``rm,subset,score,n,trainer`` (mean
   quality per subset over the answers the judge could rate, ``n`` of them; ``trainer`` is ``GRPO``), the format of
   :func:`prb_utils.downstream.reference_files.read_ppo_csv`; ``answers.parquet`` the judged answers.
5. ``<out>/ppo/.lock`` (:func:`prb_utils.store.folder_lock`) is held from the first file written to the last:
   a second ``prb ppo`` on the same results folder waits (one line on stderr), then reuses what the first
   trained, so no run is trained twice at once and no step is logged twice.

>>> frame = pd.DataFrame({"subset": ["A"] * 4, "id": ["1", "2", "3", "4"], "question": ["q1", "q2", "q2", "q3"]})
>>> train, held_out = split_questions(frame, eval_questions=1, seed=0)
>>> len(held_out), len(train), set(held_out["question"]) & set(train["question"])
(1, 3, set())
"""

from __future__ import annotations

import gc
import inspect
import json
import math
import os
import re
import sys
import time
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd
from safetensors import safe_open
from tqdm.auto import tqdm

from prb_utils.data import load_benchmark
from prb_utils.downstream.policy import (
    POLICY_SYSTEM,
    policy_generator,
    policy_placement,
    policy_prompt,
    policy_spec,
)
from prb_utils.downstream.reference_files import read_ppo_csv
from prb_utils.downstream.rubric_judge import (
    DEFAULT_JUDGE,
    NEEDED_JUDGEMENT_COLUMNS,
    check_judge,
    choose_quality_rule,
    judge_cache_key,
    judge_item,
    judge_placement,
    judgement_problem,
    load_judge,
    results_frame,
)
from prb_utils.errors import PRBError, set_aside
from prb_utils.models import MODEL_KINDS, ModelOptions, PairInput, load_model, parse_spec
from prb_utils.models.base import spec_of
from prb_utils.models.device import configure_threads, cpu_threads, free_cuda_memory, resolve_placement
from prb_utils.models.engines import IN_PROCESS
from prb_utils.models.fingerprint import model_fingerprint
from prb_utils.models.generation import check_causal_lm
from prb_utils.models.hf import load_pretrained, load_tokenizer, resolve_source
from prb_utils.models.kinds import CAUSAL_LM
from prb_utils.models.lm import busy_cpus_elsewhere, choose_threads
from prb_utils.models.quiet import quiet_transformers
from prb_utils.profile import parse_condition, rm_user_message
from prb_utils.schema import DEFAULT_CONDITION, DEFAULT_ZOO, stable_hash
from prb_utils.store import (
    folder_lock,
    read_json_cache,
    read_parquet_cache,
    rows_problem,
    write_parquet,
    write_text,
)

PPO_VERSION = 1
TRAINER = "GRPO"
#: The ``rm`` of the untrained policy's row in ``ppo.csv``.
BASELINE_RM = "untrained"
#: ``prb ppo``'s default RMs: the default zoo without ``judge:smollm2``, whose reward (a pairwise prompt in
#: both A/B orders per pair of completions) made a training step about twice as slow as the other RMs' on a
#: 2-core CPU (README, "PPO"); pass ``--model judge:smollm2`` to train with it too.
PPO_ZOO = tuple(spec for spec in DEFAULT_ZOO if spec != "judge:smollm2")


@dataclass
class PPORun:
    """What :func:`run_ppo` produced (also written under ``<out>/ppo``)."""

    table: pd.DataFrame
    answers: pd.DataFrame
    trained: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    judge: str = ""
    judge_proxy: bool = False
    diverged: dict[str, str] = field(default_factory=dict)   # RM spec -> why its policy is left out of the table


# ------------------------------------------------------------------------------------------ files




def default_judge() -> str:
    """The rubric judge ``prb bon`` uses by default (:data:`prb_utils.downstream.rubric_judge.DEFAULT_JUDGE`)."""

    return DEFAULT_JUDGE


# ------------------------------------------------------------------------------------------ 1. split


def split_questions(data: pd.DataFrame, *, eval_questions: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(training records, held-out records): ``eval_questions`` distinct question texts are held out.

    Subsets take turns (round robin), each subset's questions in a seeded hash order; the held-out frame
    has one record per held-out question (its first id), the training frame every record whose question is
    not held out. PRBError when nothing would be left to train on.
    """
    if eval_questions < 1:
        raise PRBError(f"eval_questions must be at least 1, got {eval_questions}.")
    frame = data.assign(subset=data["subset"].astype(str), id=data["id"].astype(str))
    order: dict[str, list[str]] = {}
    for subset, grp in frame.groupby("subset", sort=True):
        questions = sorted(set(grp["question"].astype(str)), key=lambda q: stable_hash([seed, subset, q]))
        order[str(subset)] = questions
    n_questions = len(set(frame["question"].astype(str)))
    if eval_questions >= n_questions:
        raise PRBError(f"--eval-questions {eval_questions} leaves no question to train on: the data has "
                       f"{n_questions} distinct questions.")
    held: list[tuple[str, str]] = []
    taken: set[str] = set()
    while len(held) < eval_questions:
        for subset, questions in order.items():
            while questions and questions[0] in taken:
                questions.pop(0)
            if questions and len(held) < eval_questions:
                taken.add(questions[0])
                held.append((subset, questions.pop(0)))
    wanted = pd.DataFrame(held, columns=["subset", "question"])
    held_out = (frame.merge(wanted, on=["subset", "question"]).sort_values(["subset", "id"])
                .drop_duplicates(["subset", "question"]).reset_index(drop=True))
    train = frame[~frame["question"].astype(str).isin(taken)].sort_values(["subset", "id"]).reset_index(drop=True)
    return train, held_out


# ------------------------------------------------------------------------------------------ 2. reward


def _text(completion: Any) -> str:
    """A TRL completion (a string, or conversational: a list of messages) as text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:
        return str(completion[-1].get("content", ""))
    return str(completion)


def comparison_pairs(n: int, *, pairwise: bool) -> list[tuple[int, int]]:
    """Which completions of one prompt are scored together.

    Pointwise RMs: 0-1, 2-3, ... (an odd last one with its predecessor). Pairwise judges: each with the
    next one, cyclically (two completions: one comparison).

    >>> comparison_pairs(3, pairwise=False), comparison_pairs(3, pairwise=True), comparison_pairs(2, pairwise=True)
    ([(0, 1), (2, 1)], [(0, 1), (1, 2), (2, 0)], [(0, 1)])
    """
    if n == 1:
        return [(0, 0)]
    if pairwise:
        return [(0, 1)] if n == 2 else [(i, (i + 1) % n) for i in range(n)]
    pairs = [(i, i + 1) for i in range(0, n - 1, 2)]
    if n % 2:
        pairs.append((n - 1, n - 2))
    return pairs


class RMReward:
    """A TRL reward function around a prb adapter: ``(prompts, completions, qid, rm_prompt) -> rewards``.

    Completions are grouped by ``qid`` (the prompt they answer); see the module docstring for how pointwise
    and pairwise RMs turn into one reward per completion. Every call appends one line to ``log`` (when
    given): the optimizer step, the rewards and how many were invalid.
    """

    def __init__(self, rm: Any, *, pairwise: bool, log: Path | None = None) -> None:
        self.rm = rm
        self.pairwise = pairwise
        self.log = log
        self.calls = 0
        self.__name__ = "prb_rm"  # TRL names the reward in its logs after this

    def scores(self, qids: Sequence[str], rm_prompts: Sequence[str], texts: Sequence[str]) -> list[float | None]:
        groups: dict[str, list[int]] = {}
        for i, qid in enumerate(qids):
            groups.setdefault(str(qid), []).append(i)
        inputs, sides = [], []
        for qid, members in groups.items():
            for a, b in comparison_pairs(len(members), pairwise=self.pairwise):
                i, j = members[a], members[b]
                inputs.append(PairInput(key=f"{qid}::{i}-{j}", prompt=str(rm_prompts[i]), chosen=texts[i],
                                        rejected=texts[j]))
                sides.append((i, j))
        collected: list[list[float]] = [[] for _ in texts]
        invalid = [False] * len(texts)
        for (i, j), score in zip(sides, self.rm.score_pairs(inputs), strict=True):
            values = (float(score.score_chosen), float(score.score_rejected))
            bad = bool(getattr(score, "invalid_reason", None)) or not all(math.isfinite(v) for v in values)
            for k, v in zip((i, j) if i != j else (i,), values, strict=False):
                if bad:
                    invalid[k] = True
                else:
                    collected[k].append(v)
        return [None if invalid[k] or not collected[k] else sum(collected[k]) / len(collected[k])
                for k in range(len(texts))]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], qid: Sequence[str],
                 rm_prompt: Sequence[str], trainer_state: Any = None, **_: Any) -> list[float | None]:
        rewards = self.scores(qid, rm_prompt, [_text(c) for c in completions])
        self.calls += 1
        if self.log is not None:
            step = int(getattr(trainer_state, "global_step", -1))
            line = {"step": step, "rewards": [r if r is not None else None for r in rewards],
                    "invalid": sum(r is None for r in rewards)}
            with self.log.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(line) + "\n")
        return rewards


def read_reward_log(run_dir: str | os.PathLike) -> pd.DataFrame:
    """``rewards.jsonl`` of a run -> one row per optimizer step: step, mean reward, n, invalid."""
    path = Path(run_dir) / "rewards.jsonl"
    rows = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                valid = [r for r in rec["rewards"] if r is not None]
                rows.append({"step": rec["step"], "reward": sum(valid) / len(valid) if valid else math.nan,
                             "n": len(rec["rewards"]), "invalid": rec["invalid"]})
    return pd.DataFrame(rows, columns=["step", "reward", "n", "invalid"])


def _trim_reward_log(run_dir: Path, before_step: int) -> None:
    """Keep only the log lines of steps a checkpoint holds (an interrupted step is run again)."""
    path = run_dir / "rewards.jsonl"
    if not path.is_file():
        return
    keep = [ln for ln in path.read_text(encoding="utf-8").splitlines()
            if ln.strip() and json.loads(ln)["step"] < before_step]
    write_text(path, "".join(f"{ln}\n" for ln in keep))


# ------------------------------------------------------------------------------------------ 3. training


@dataclass(frozen=True)
class TrainOptions:
    """The options of one GRPO run that go into its key (all but the number of steps)."""

    num_generations: int = 2
    prompts_per_step: int = 2
    learning_rate: float = 1e-5
    beta: float = 0.0
    max_new_tokens: int = 48
    temperature: float = 1.0
    top_p: float = 0.9
    policy_posts: int = 5
    rm_profile: str = DEFAULT_CONDITION


def last_checkpoint(run_dir: str | os.PathLike) -> tuple[Path | None, int]:
    """(newest ``checkpoint-N`` folder, its global step), or (None, 0)."""
    best: tuple[Path | None, int] = (None, 0)
    folder = Path(run_dir)
    if not folder.is_dir():
        return best
    for path in sorted(folder.glob("checkpoint-*")):
        state = path / "trainer_state.json"
        if path.is_dir() and state.is_file() and (path / "config.json").is_file():
            problem = checkpoint_problem(path)
            if problem is not None:   # training it again is safe: set aside (a name the trainer never rotates away)
                set_aside(path, problem, "training resumes from an earlier checkpoint, or from the start",
                          name=f"damaged-{path.name}")
                continue
            step = int(read_json_cache(state).get("global_step", 0) or 0)
            if step >= best[1]:
                best = (path, step)
    return best


def checkpoint_problem(path: Path) -> str | None:
    """What is wrong with a checkpoint folder whose files were cut short (a copy or a disk that filled up), or
    None: its trainer state must be JSON, its ``*.safetensors`` whole, its torch files (``optimizer.pt``, ...)
    whole zip archives."""
    try:
        json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return "trainer_state.json is not JSON"
    for file in sorted(path.iterdir()):
        try:
            if file.suffix == ".safetensors":
                with safe_open(str(file), framework="pt"):
                    pass
            elif file.suffix in (".pt", ".pth", ".bin"):
                with zipfile.ZipFile(file):
                    pass
        except Exception as exc:   # safetensors' and zipfile's errors for a cut file
            return f"{file.name} is cut short or damaged ({type(exc).__name__})"
    return None


def _policy_source(policy: str) -> str:
    return resolve_source(spec_of(CAUSAL_LM, policy))


def _load_policy(policy: str) -> tuple[Any, Any]:
    """The policy model (float32 master weights) and its left-padding tokenizer; PRBError without a chat
    template (the prompts are chats)."""
    from transformers import AutoModelForCausalLM


    spec = spec_of(CAUSAL_LM, policy)
    source = _policy_source(policy)
    tokenizer = load_tokenizer(spec, source)
    if not getattr(tokenizer, "chat_template", None):
        raise PRBError(f"The policy '{policy}' has no chat template; PPO needs a chat (instruct) model.")
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = load_pretrained(spec, source, AutoModelForCausalLM.from_pretrained, dtype="float32")
    return model, tokenizer


def _chat(record: Mapping[str, Any], posts: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": POLICY_SYSTEM}, {"role": "user", "content": policy_prompt(record, posts=posts)}]


def _train_rows(train: pd.DataFrame, training: TrainOptions) -> list[dict[str, Any]]:
    return [{"prompt": _chat(r, training.policy_posts), "qid": f"{r['subset']}/{r['id']}",
             "rm_prompt": rm_user_message(r, training.rm_profile)} for r in train.to_dict("records")]


def train_policy(spec: str, train: pd.DataFrame, run_dir: str | os.PathLike, *, policy: str = "smollm2",
                 steps: int = 4, training: TrainOptions | None = None, options: ModelOptions | None = None,
                 save_steps: int = 10, progress: bool = True) -> dict[str, Any]:
    """Train ``policy`` for ``steps`` GRPO steps with ``spec``'s score as the reward, in ``run_dir``.

    ``options``: the device and seed of the training, and the RM's (its engine scores the rewards of the
    kinds it serves); the policy trains in this process either way.

    Resumes from the run's last checkpoint (training only the missing steps; none when it has ``steps``).
    Returns ``{"steps_before", "steps", "checkpoint", "seconds"}``; PRBError when the run already holds more
    steps than asked.
    """
    import torch
    from transformers import ProgressCallback
    from transformers.trainer_callback import PrinterCallback

    training, options = training or TrainOptions(), options or ModelOptions()
    seed, device = options.seed, options.device
    run_dir = Path(run_dir)
    checkpoint, done = last_checkpoint(run_dir)
    if done > steps:
        raise PRBError(f"The PPO run for {spec} in {run_dir} already trained {done} steps, more than the "
                       f"{steps} asked; ask for --steps {done} or use another --results folder.")
    if done == steps and checkpoint is not None:
        return {"steps_before": done, "steps": done, "checkpoint": str(checkpoint), "seconds": 0.0}
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer


    placement = resolve_placement(device)
    cpu = placement.device == "cpu"
    if cpu:
        configure_threads()
    start = time.time()
    run_dir.mkdir(parents=True, exist_ok=True)
    _trim_reward_log(run_dir, done)
    model, tokenizer = _load_policy(policy)
    rm = load_model(spec, options)
    reward = RMReward(rm, pairwise=MODEL_KINDS[parse_spec(spec).kind].pairwise, log=run_dir / "rewards.jsonl")
    dataset = Dataset.from_list(_train_rows(train, training))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        config = GRPOConfig(
            output_dir=str(run_dir), max_steps=int(steps), seed=int(seed), data_seed=int(seed),
            per_device_train_batch_size=training.prompts_per_step * training.num_generations,
            num_generations=training.num_generations, max_completion_length=training.max_new_tokens,
            temperature=training.temperature, top_p=training.top_p, learning_rate=training.learning_rate,
            lr_scheduler_type="constant", warmup_steps=0, beta=training.beta, gradient_checkpointing=False,
            use_cpu=cpu, bf16=bool(not cpu and placement.device.startswith("cuda") and options.dtype != "float32"
                                   and torch.cuda.is_bf16_supported()),
            save_strategy="steps", save_steps=int(save_steps), save_total_limit=1, logging_steps=1,
            report_to="none", disable_tqdm=not progress, remove_unused_columns=False,
        )
        trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=dataset,
                              processing_class=tokenizer)
        if cpu:
            trainer.add_callback(_thread_callback())
        trainer.remove_callback(PrinterCallback)  # the per-step metrics go to rewards.jsonl and trainer_state
        if progress:
            trainer.remove_callback(ProgressCallback)
            trainer.add_callback(_quiet_progress())

        diverged = None
        try:
            with quiet_transformers():  # no "writing model shards" bar per checkpoint
                trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
        except RuntimeError as exc:   # sampling from non-finite probabilities: the policy diverged
            diverged = nonfinite_failure(exc, trainer.state.global_step)
            if diverged is None:
                raise
    checkpoint, after = last_checkpoint(run_dir)
    del trainer, model, rm, reward
    _free()
    info = {"steps_before": done, "steps": after, "checkpoint": str(checkpoint) if checkpoint is not None else None,
            "seconds": time.time() - start}
    return {**info, "diverged": diverged} if diverged else info


def nonfinite_failure(exc: BaseException, steps_done: int) -> str | None:
    """Why training stopped, when ``exc`` is torch's refusal of non-finite numbers (sampling from a policy whose
    probabilities became ``inf`` or ``nan``, as a learning rate of 1e30 makes them), else None (another error).

    >>> nonfinite_failure(RuntimeError("probability tensor contains either `inf`, `nan` or element < 0"), 1)
    'its probabilities were no longer finite in GRPO step 2'
    >>> nonfinite_failure(RuntimeError("CUDA out of memory"), 1) is None
    True
    """
    if not re.search(r"\b(inf|nan)\b", str(exc), re.IGNORECASE):
        return None
    return f"its probabilities were no longer finite in GRPO step {steps_done + 1}"


def _quiet_progress() -> Any:
    """TRL's training bar without the metrics dict it prints after every step."""
    from transformers import ProgressCallback

    class QuietProgress(ProgressCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            return None

    return QuietProgress()


def _match_threads() -> None:
    """On a CPU: torch threads = the cores other processes leave free (as prb's scoring does); more threads
    than free cores make every parallel region wait for one that is not running."""
    import torch


    threads = choose_threads(cpu_threads(), busy_cpus_elsewhere(0.1))
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)


def _thread_callback() -> Any:
    """A callback re-matching the threads to the free cores before every step (the load changes)."""
    from transformers import TrainerCallback

    class MatchThreads(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            _match_threads()

    return MatchThreads()


def _free() -> None:
    gc.collect()
    free_cuda_memory()


# ------------------------------------------------------------------------------------------ 4. evaluation


#: The columns of :func:`generate_answers` (a cached answer file without one is set aside and answered anew).
ANSWER_COLUMNS = ("subset", "id", "response", "prompt_hash")


def generate_answers(model: str, held_out: pd.DataFrame, *, posts: int, max_new_tokens: int,
                     options: ModelOptions | None = None) -> pd.DataFrame:
    """Greedy answers of ``model`` (alias, hub id or checkpoint folder) to the held-out questions, in this process
    on ``options``' device and dtype (:func:`~prb_utils.downstream.policy.policy_generator`)."""

    generator = policy_generator(model, replace(options or ModelOptions(), engine=IN_PROCESS))
    if generator.placement.device == "cpu":
        _match_threads()
    records = held_out.to_dict("records")
    prompts = [policy_prompt(r, posts=posts) for r in records]
    replies = generator.generate(prompts, system=POLICY_SYSTEM, max_new_tokens=max_new_tokens, temperature=0.0)
    del generator
    _free()
    return pd.DataFrame({"subset": [str(r["subset"]) for r in records], "id": [str(r["id"]) for r in records],
                         "response": [r[0] for r in replies], "prompt_hash": [stable_hash(p) for p in prompts]})


def nonfinite_weights(checkpoint: str | os.PathLike) -> str | None:
    """Why a checkpoint's weights are degenerate (a NaN or infinite value, named with its tensor), or None;
    read one tensor at a time from its ``*.safetensors`` files."""
    import torch

    for path in sorted(Path(checkpoint).glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as weights:
            for name in weights.keys():
                tensor = weights.get_tensor(name)
                if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                    return f"non-finite weights ({name})"
    return None


def degenerate_answers(answers: pd.DataFrame) -> str | None:
    """Why a policy's held-out answers are degenerate (every one empty), or None.

    >>> degenerate_answers(pd.DataFrame({"response": ["", "  "]})), degenerate_answers(pd.DataFrame({"response": ["", "a"]}))
    ('every held-out answer is empty', None)
    """
    if answers.empty or answers["response"].fillna("").astype(str).str.strip().astype(bool).any():
        return None
    return "every held-out answer is empty"


def _cached_answers(path: Path, model: str, held_out: pd.DataFrame, *, posts: int, max_new_tokens: int,
                    options: ModelOptions) -> pd.DataFrame:
    cached = read_parquet_cache(path, columns=ANSWER_COLUMNS, recompute=True,   # damaged: answered anew
                                check=lambda frame: rows_problem(frame, filled=ANSWER_COLUMNS, text=("response",),
                                                                 unique=("subset", "id")))
    if cached is not None and len(cached) == len(held_out):
        return cached
    answers = generate_answers(model, held_out, posts=posts, max_new_tokens=max_new_tokens, options=options)
    write_parquet(answers, path)
    return answers


def judge_answers(answers: pd.DataFrame, held_out: pd.DataFrame, *, cache: Path, judge: Any,
                  progress: bool = True, options: ModelOptions | None = None) -> pd.DataFrame:
    """Rubric quality of each answer (columns of ``answers`` + quality, failed, judge, judge_proxy), cached
    by (question, answer, aspects) in ``cache``; the judge is loaded only when something is new (an LLM judge
    on ``options``' engine, device and dtype: what its cache is keyed by)."""

    records = {(str(r["subset"]), str(r["id"])): r for r in held_out.to_dict("records")}
    keys, items = [], {}
    for row in answers.to_dict("records"):
        record = records[(row["subset"], row["id"])]
        item = judge_item(record, str(row["response"]))
        keys.append(item.key)
        if item.aspects:
            items[item.key] = item
    cached = read_parquet_cache(cache, columns=NEEDED_JUDGEMENT_COLUMNS, recompute=True,   # damaged: judged anew
                                check=judgement_problem)
    known = set() if cached is None else set(cached["key"])
    todo = [item for key, item in items.items() if key not in known]
    if todo:
        if progress:
            print(f"judging {len(todo)} held-out answers with {judge}", file=sys.stderr)
        rater = load_judge(judge, options) if isinstance(judge, str) else judge
        judged = results_frame(rater.judge(todo))
        cached = judged if cached is None else pd.concat([cached, judged], ignore_index=True)
        write_parquet(cached, cache)
    if cached is None:
        raise PRBError("No held-out question has rubric aspects to judge.")
    if "quality_expected" not in cached.columns:   # a judge object of an older kind
        cached = cached.assign(quality_expected=float("nan"))
    rated = cached.drop_duplicates("key", keep="last")[["key", "quality", "quality_expected", "failed", "judge",
                                                        "judge_proxy"]]
    return answers.assign(key=keys).merge(rated, on="key", how="left")


def ppo_table(judged: pd.DataFrame) -> pd.DataFrame:
    """``rm,subset,score,n,trainer``: mean quality per (rm, subset) over the answers the judge rated (``n``),
    and the trainer that made the policy (:data:`TRAINER`, never called PPO).

    >>> rows = pd.DataFrame({"rm": ["a", "a", "a"], "subset": ["S", "S", "S"], "quality": [0.2, 0.4, float("nan")]})
    >>> ppo_table(rows).to_dict("records")
    [{'rm': 'a', 'subset': 'S', 'score': 0.3, 'n': 2, 'trainer': 'GRPO'}]
    """
    rated = judged[judged["quality"].notna()]
    table = (rated.groupby(["rm", "subset"], sort=False)["quality"].agg(["mean", "size"]).reset_index()
             .rename(columns={"mean": "score", "size": "n"}))
    table["score"] = table["score"].round(12)
    table["trainer"] = TRAINER
    return table[["rm", "subset", "score", "n", "trainer"]]


# ------------------------------------------------------------------------------------------ 5. all of it


def run_ppo_defaults() -> dict[str, Any]:
    """The keyword defaults of :func:`run_ppo` (the CLI shows and uses the same).

    >>> run_ppo_defaults()["steps"]
    4
    """

    return {name: p.default for name, p in inspect.signature(run_ppo).parameters.items()
            if p.default is not inspect.Parameter.empty}


def run_dir_for(out: str | os.PathLike, spec: str, key: str) -> Path:
    """``<out>/ppo/runs/<readable spec>-<key>``."""

    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_")[-60:] or "rm"
    return Path(out) / "ppo" / "runs" / f"{slug}-{key}"


def run_ppo(
    data: str | pd.DataFrame = "sample",
    *,
    out: str | os.PathLike = "results",
    policy: str = "smollm2",
    models: Sequence[str] = PPO_ZOO,
    steps: int = 4,
    judge: Any = None,
    eval_questions: int = 6,
    training: TrainOptions | None = None,
    options: ModelOptions | None = None,
    save_steps: int = 10,
    eval_max_new_tokens: int | None = None,
    progress: bool = True,
) -> PPORun:
    """Train one policy per RM in ``models``, judge each on the held-out questions, write ``ppo.csv``.

    ``judge``: a spec for :func:`prb_utils.downstream.rubric_judge.load_judge` (``None``: :func:`default_judge`)
    or a judge object. ``training``: the GRPO settings (:class:`TrainOptions`). ``options``
    (:class:`~prb_utils.models.ModelOptions`): the device and seed, and the engine that scores the rewards of
    the RMs and runs the LLM judge (as for :func:`prb_utils.downstream.pipeline.run_bon_pipeline`); the scores
    do not depend on the engine, so the run keys do not either. ``eval_max_new_tokens`` defaults to the
    training ``max_new_tokens``. See the module docstring for the layout under ``<out>/ppo``.
    """

    training, options = training or TrainOptions(), options or ModelOptions()
    judge = default_judge() if judge is None else judge
    _check_run(steps, save_steps, training)
    check_judge(judge, options)   # a judge that cannot be used fails here, before any training
    check_causal_lm(policy, option="--policy")
    specs = list(dict.fromkeys(parse_spec(s).canonical for s in models))
    if not specs:
        raise PRBError("No reward model given.")
    if isinstance(data, str):
        data = load_benchmark(data, drop_invalid=True)
    if data.empty:
        raise PRBError("The benchmark data is empty.")
    train, held_out = split_questions(data, eval_questions=eval_questions, seed=options.seed)
    root = Path(out) / "ppo"
    with folder_lock(root, on_wait=_say_waiting):   # one prb ppo per results folder at a time
        plan = _RunPlan.of(policy, train, held_out, training, options,
                           max_new=int(eval_max_new_tokens or training.max_new_tokens))
        timings: dict[str, float] = {}
        t = time.time()
        answers = [_baseline_answers(root, plan)]
        timings["baseline"] = time.time() - t

        trained: list[str] = []
        diverged: dict[str, str] = {}
        t = time.time()
        bar = tqdm(specs, unit="RM", desc="PPO: one policy per RM", disable=not progress, file=sys.stderr,
                   dynamic_ncols=True)
        for spec in bar:
            bar.set_postfix_str(spec)
            newly, given, problem = _train_and_answer(spec, plan, answers[0], out=out, steps=steps,
                                                      save_steps=save_steps, progress=progress)
            if newly:
                trained.append(spec)
            if problem is not None:
                diverged[spec] = problem
            else:
                answers.append(given)
        bar.close()
        timings["train"] = time.time() - t
        table, judged, judge_name, proxy = _judge_and_write(root, plan, answers, judge, steps=steps, specs=specs,
                                                            diverged=diverged, timings=timings, progress=progress)
        return PPORun(table, judged, trained, timings, judge_name, proxy, diverged)


def _check_run(steps: int, save_steps: int, training: TrainOptions) -> None:
    """The settings :func:`run_ppo` refuses, each in one sentence."""
    if steps < 1:
        raise PRBError(f"steps must be at least 1, got {steps}.")
    if save_steps < 1:
        raise PRBError(f"save_steps must be at least 1, got {save_steps}.")
    if training.num_generations < 2:
        raise PRBError(f"GRPO needs at least 2 completions per prompt, got num_generations={training.num_generations}.")
    if training.prompts_per_step < 1 or training.max_new_tokens < 1 or training.policy_posts < 0:
        raise PRBError("prompts_per_step and max_new_tokens must be at least 1 and policy_posts at least 0.")
    if parse_condition(training.rm_profile).oracle:
        raise PRBError(f"The RM profile '{training.rm_profile}' shows the answer key; a reward may not see it.")


@dataclass(frozen=True)
class _RunPlan:
    """What every step of one :func:`run_ppo` shares: the policy and its fingerprint, the training and held-out
    questions and their ids, the settings, the answers' length and the dtype asked for (keyed only when asked)."""

    policy: str
    policy_fp: str
    train: pd.DataFrame
    held_out: pd.DataFrame
    split_id: str
    eval_id: str
    training: TrainOptions
    options: ModelOptions
    max_new: int
    asked: dict[str, Any]

    @classmethod
    def of(cls, policy: str, train: pd.DataFrame, held_out: pd.DataFrame, training: TrainOptions,
           options: ModelOptions, *, max_new: int) -> _RunPlan:
        split_id = stable_hash([[str(s), str(i)] for s, i in zip(train["subset"], train["id"], strict=True)]
                               + [stable_hash(_train_rows(train, training))])
        eval_id = stable_hash([[r["subset"], r["id"], r["question"]] for r in held_out.to_dict("records")])
        # a dtype asked for is keyed (auto keeps the key answers had before --dtype reached the policy)
        asked = {} if options.dtype == "auto" else {"dtype": policy_placement(options)["dtype"]}
        return cls(policy, model_fingerprint(policy_spec(policy)), train, held_out, split_id, eval_id, training,
                   options, max_new, asked)

    def answers(self, path: Path, model: str) -> pd.DataFrame:
        """The held-out answers of ``model`` (the policy or a checkpoint), cached at ``path``."""
        return _cached_answers(path, model, self.held_out, posts=self.training.policy_posts,
                               max_new_tokens=self.max_new, options=self.options)


def _baseline_answers(root: Path, plan: _RunPlan) -> pd.DataFrame:
    """The untrained policy's held-out answers (the ``baseline`` rows)."""
    key = stable_hash({"v": PPO_VERSION, "policy": plan.policy, "fp": plan.policy_fp, "eval": plan.eval_id,
                       "posts": plan.training.policy_posts, "max_new_tokens": plan.max_new, **plan.asked})
    return plan.answers(root / "baseline" / f"{key}.parquet", plan.policy).assign(rm=BASELINE_RM, steps=0)


def _train_and_answer(spec: str, plan: _RunPlan, baseline: pd.DataFrame, *, out: str | os.PathLike, steps: int,
                      save_steps: int, progress: bool) -> tuple[bool, pd.DataFrame | None, str | None]:
    """Train (or resume) the policy of the RM ``spec`` and answer the held-out questions with it; writes its
    ``run.json``. Returns whether it trained now, its answers, and why it diverged (None when it did not)."""
    seed, training = plan.options.seed, plan.training
    key = stable_hash({"v": PPO_VERSION, "trainer": TRAINER, "rm": spec, "rm_fp": model_fingerprint(spec),
                       "policy": plan.policy, "policy_fp": plan.policy_fp, "split": plan.split_id, "seed": int(seed),
                       "options": training.__dict__})
    run_dir = run_dir_for(out, spec, key)
    info = train_policy(spec, plan.train, run_dir, policy=plan.policy, steps=steps, training=training,
                        options=plan.options, save_steps=save_steps, progress=progress)
    meta = {"rm": spec, "key": key, "trainer": TRAINER, "policy": plan.policy, "policy_fingerprint": plan.policy_fp,
            "seed": int(seed), "options": training.__dict__, "steps": info["steps"],
            "checkpoint": Path(info["checkpoint"]).name if info["checkpoint"] else None,
            "train_questions": int(plan.train["question"].nunique()),
            "versions": _versions()}
    problem = info.get("diverged") or (nonfinite_weights(info["checkpoint"]) if info["checkpoint"] else None)
    given = None
    if problem is None:
        dtype_part = f"-{plan.asked['dtype']}" if plan.asked else ""
        given = plan.answers(run_dir / f"answers-{plan.eval_id}-{plan.max_new}-step{info['steps']}{dtype_part}.parquet",
                             info["checkpoint"])
        # empty answers are a divergence only where the untrained policy wrote some: a policy that
        # writes nothing from the start (a tiny random model) has not diverged by training
        problem = None if degenerate_answers(baseline) else degenerate_answers(given)
    diverged = None
    if problem is not None:   # a diverged policy is no result: left out of the table, with the reason
        diverged = (f"diverged after {info['steps']} GRPO step(s) at learning rate {training.learning_rate:g}: "
                    f"{problem}")
        meta["diverged"] = diverged
    write_text(run_dir / "run.json", json.dumps(meta, indent=1))
    newly = info["steps_before"] < info["steps"]
    return newly, None if diverged else given.assign(rm=spec, steps=info["steps"]), diverged


def _judge_and_write(root: Path, plan: _RunPlan, answers: list[pd.DataFrame], judge: Any, *, steps: int,
                     specs: list[str], diverged: dict[str, str], timings: dict[str, float],
                     progress: bool) -> tuple[pd.DataFrame, pd.DataFrame, str, bool]:
    """Judge every policy's answers, read their quality by one rule, and write ``ppo.csv`` (merged with an earlier
    run of the same setting, diverged RMs left out), ``answers.parquet`` and ``run.json``. Returns the table, the
    judged answers, the judge's name and whether it is a proxy."""
    options, training = plan.options, plan.training
    t = time.time()
    judge_id = judge if isinstance(judge, str) else str(judge.name)
    cache = root / "judge" / f"{stable_hash(judge_cache_key(judge, options))}.parquet"
    judged = judge_answers(pd.concat(answers, ignore_index=True), plan.held_out, cache=cache, judge=judge,
                           progress=progress, options=options)
    timings["judge"] = time.time() - t
    rule = choose_quality_rule(judged)   # a judge that rates every answer alike is read by its expected verdicts
    if rule == "expected":
        judged = judged.assign(quality_argmax=judged["quality"], quality=judged["quality_expected"])
    judged["quality_rule"] = rule
    table = ppo_table(judged)
    judge_name = str(judged["judge"].dropna().iloc[0]) if judged["judge"].notna().any() else str(judge_id)
    proxy = bool(judged["judge_proxy"].fillna(False).astype(bool).any())
    setting = {"policy": plan.policy, "policy_fingerprint": plan.policy_fp, "judge": judge_name, "eval": plan.eval_id,
               "steps": int(steps), "seed": int(options.seed), "options": training.__dict__,
               "max_new_tokens": plan.max_new}
    placement = {"policy_dtype": policy_placement(options)["dtype"], "judge_placement": judge_placement(judge, options)}
    table = _merge_previous(root, table, setting, rule=rule)
    table = table[~table["rm"].isin(set(diverged))].reset_index(drop=True)   # an older row of it too
    write_text(root / "ppo.csv", table.to_csv(index=False))
    write_parquet(_with_earlier_answers(root / "answers.parquet", judged, keep=set(table["rm"])),
                  root / "answers.parquet")
    write_text(root / "run.json", json.dumps({**setting, **placement, "judge_proxy": proxy, "trainer": TRAINER,
                                              "quality_rule": rule,
                                              "models": specs, "diverged": diverged, "timings_s": timings},
                                             indent=1))
    return table, judged, judge_name, proxy


def _say_waiting(lock: Path) -> None:
    print(f"prb: waiting for another prb ppo on the results folder {lock.parent.parent} to finish (it holds "
          f"{lock}); this run then reuses what it trained.", file=sys.stderr, flush=True)


def _merge_previous(root: Path, table: pd.DataFrame, setting: dict[str, Any], *, rule: str) -> pd.DataFrame:
    """Keep the rows of RMs an earlier run of the same setting wrote and this one did not train, when that run
    read its answers' quality by the same ``rule`` (argmax or expected verdicts); rows read by another rule are
    left out (one table, one reading), with a warning naming them."""

    previous_meta = root / "run.json"
    if not (previous_meta.is_file() and (root / "ppo.csv").is_file()):
        return table
    meta = read_json_cache(previous_meta)
    if {k: meta.get(k) for k in setting} != json.loads(json.dumps(setting)):
        return table
    if meta.get("quality_rule", rule) != rule:   # one table, one reading: the earlier answers read again by this rule
        reread = _read_again(root / "answers.parquet", rule, leave_out=set(table["rm"]))
        if reread is None:
            print(f"prb: warning: {root / 'ppo.csv'} holds rows read by the {meta.get('quality_rule')} quality rule "
                  f"and their answers are gone; this run reads by the {rule} rule, so only its own RMs are in the "
                  "table (run prb ppo with the others again to add them).", file=sys.stderr)
            return table
        return pd.concat([table, reread], ignore_index=True) if not reread.empty else table
    try:
        previous = read_ppo_csv(root / "ppo.csv")
    except PRBError:   # the runs it came from are kept: set it aside; this run's table replaces it
        set_aside(root / "ppo.csv", "not a readable RL table",
                  "this run's table replaces it (run prb ppo with its other --model again to add their rows)")
        return table
    kept = previous[~previous["rm"].isin(set(table["rm"]))]
    kept = kept.assign(n=kept["n"].astype("Int64"), trainer=TRAINER)   # this setting's rows: the same trainer
    return pd.concat([table, kept], ignore_index=True) if not kept.empty else table


def _with_earlier_answers(path: Path, judged: pd.DataFrame, *, keep: set[str]) -> pd.DataFrame:
    """This run's judged answers and, of the RMs the table keeps from earlier runs, their judged answers from
    ``path``: the answers behind every row of the table."""
    earlier = read_parquet_cache(path, recompute=True)
    if earlier is None or "rm" not in earlier.columns:
        return judged
    earlier = earlier[earlier["rm"].isin(keep - set(judged["rm"]))]
    return pd.concat([judged, earlier], ignore_index=True) if not earlier.empty else judged


def _read_again(path: Path, rule: str, *, leave_out: set[str]) -> pd.DataFrame | None:
    """The RL rows of the judged answers in ``path`` (an earlier run's ``answers.parquet``) of the RMs not in
    ``leave_out``, read by ``rule`` (``argmax``: each answer's most probable verdicts, ``expected``: its expected
    verdicts); None when the file or a column the rule needs is missing."""
    answers = read_parquet_cache(path, recompute=True)   # damaged: set aside, the rows cannot be read again
    if answers is None or "rm" not in answers.columns:
        return None
    answers = answers[~answers["rm"].isin(leave_out)]
    column = "quality_expected" if rule == "expected" else ("quality_argmax" if "quality_argmax" in answers.columns
                                                            else "quality")
    if column not in answers.columns or (column == "quality" and answers.get("quality_rule", pd.Series()).eq(
            "expected").any()):
        return None
    return ppo_table(answers.assign(quality=answers[column]))


def _versions() -> dict[str, str]:
    out = {}
    for name in ("prb", "trl", "transformers", "torch", "accelerate"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = ""
    return out
