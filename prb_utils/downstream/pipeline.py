"""The offline Best-of-N mini pipeline: sample, score with every RM, judge, curves and figures.

1. The policy (default the offline ``smollm2``) writes ``n_samples`` answers per benchmark question, seeing
   the question and the user's ``policy_posts`` most relevant profile posts (never the rubric or the
   narrative; :mod:`prb_utils.downstream.policy`). By default several questions are sampled together
   (:data:`~prb_utils.downstream.policy.SAMPLING_MODES`: ``batched``); ``exact`` samples each question on its
   own, seeded by its id (:func:`~prb_utils.downstream.policy.question_seed`), so its answers never
   depend on the questions sampled before or beside it. Answers are cached per question in
   ``<out>/bon/samples/``, the two modes apart.
2. Every RM scores every answer through :func:`prb_utils.scoring.score_benchmark` (its own store in
   ``<out>/bon/store``, so a re-run scores nothing again), seeing the question plus the profile condition
   ``rm_profile``. Pointwise RMs score answers two at a time (samples 2j and 2j+1 as one pair, each side
   scored on its own). A pairwise judge needs an opponent: with ``judge_design="pairs"`` (default, the
   cheapest) answers 2j and 2j+1 are compared (both A/B orders) and each answer's score is its win
   probability against its partner; ``"cycle"`` compares i with i+1 mod N (twice the judge calls) and
   averages each answer's two win probabilities. Either way the pointwise score only approximates a
   judge's preference among a whole k-subset.
3. The rubric judge (default ``llm:smollm2``: prb's per-aspect protocol, one 0/1/2 verdict per rubric aspect
   after LaMP-QA's design with prb's own prompt, by the offline SmolLM2, a weak judge; ``llm-ref:`` and
   ``llm-lampqa:`` are the benchmark's and LaMP-QA's judges verbatim; ``proxy`` = MiniLM similarity, circular
   with ``embedding:minilm``: :data:`~prb_utils.downstream.rubric_judge.RUBRIC_JUDGES`) rates each answer's
   quality in [0, 1]; cached in ``<out>/bon/judge/`` per judge and prompt.
4. Exact best-of-k curves (and the reference "first k") per RM with CIs over questions go to
   ``<out>/bon/curves.csv``; the tidy BoN frame to ``<out>/bon/bon_frame.parquet``; figures to
   ``<out>/bon/figures/``. When the main store ``<out>`` holds PRB accuracies of the same RMs, the
   benchmark-vs-BoN figures and ``<out>/bon/agreement.csv`` are added.

"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from prb_utils.analysis.metrics import accuracy_table
from prb_utils.analysis.resampling import LEVEL
from prb_utils.data import load_benchmark
from prb_utils.downstream.bon import bon_curves, bon_metrics
from prb_utils.downstream.correlation import no_ranking, rank_agreement_ci
from prb_utils.downstream.plots import bon_curve_plot, coefficient_bars, rank_rank, scatter_fit
from prb_utils.downstream.policy import (
    POLICY_SYSTEM,
    SamplingOptions,
    policy_generator,
    policy_placement,
    policy_prompt,
    policy_spec,
    question_seed,
)
from prb_utils.downstream.rubric_judge import (
    DEFAULT_JUDGE,
    NEEDED_JUDGEMENT_COLUMNS,
    UNUSABLE_VERDICT,
    check_judge,
    choose_quality_rule,
    judge_cache_key,
    judge_identity,
    judge_item,
    judge_label,
    judge_placement,
    judgement_problem,
    load_judge,
    results_frame,
    runs_a_model,
)
from prb_utils.errors import PRBError
from prb_utils.models import MODEL_KINDS, ModelOptions, parse_spec
from prb_utils.models.fingerprint import model_fingerprint
from prb_utils.models.generation import check_causal_lm
from prb_utils.profile import parse_condition
from prb_utils.schema import DEFAULT_CONDITION, DEFAULT_ZOO, pair_key, stable_hash
from prb_utils.scoring import score_benchmark
from prb_utils.store import load_results, load_run_metadata, read_parquet_cache, rows_problem, write_parquet

#: The columns a cached sample file must have to be read (one without them is set aside and sampled anew).
SAMPLE_COLUMNS = ("subset", "id", "sample_idx", "response", "prompt_hash", "policy")
PIPELINE_VERSION = 3  # 2: questions sampled in batches; 3: each question on its own, seeded by its id
#: Answers the rubric judge rates per call on a server engine: their requests are in flight together (the
#: client keeps its concurrency's worth on the server), and the verdict cache is written after each call.
SERVER_JUDGE_CHUNK = 256

@dataclass
class BonRun:
    """What :func:`run_bon_pipeline` produced (frames are also written under ``<out>/bon``)."""

    samples: pd.DataFrame
    frame: pd.DataFrame
    curves: pd.DataFrame
    agreement: pd.DataFrame | None
    figures: list[Path]
    timings: dict[str, float] = field(default_factory=dict)
    judge: str = ""
    judge_proxy: bool = False


# ------------------------------------------------------------------------------------------ 1. sampling


def sample_answers(data: pd.DataFrame, *, out: str | os.PathLike, sampling: SamplingOptions | None = None,
                   options: ModelOptions | None = None, progress: bool = True) -> pd.DataFrame:
    """``sampling.n_samples`` answers per record (columns subset, id, sample_idx, response, prompt_hash,
    policy), cached; the policy runs on ``options.engine`` (device ``options.device``, seeded by
    ``options.seed``).

    By default (``sampling.exact`` False) several questions are sampled together
    (:meth:`~prb_utils.models.generation.ChatGeneration.sample_together`: in process the questions of one
    token-budget group in one ``generate`` call, seeded by their seeds together; on a vLLM server one request
    per question seeded by :func:`question_seed`, many in flight). With ``sampling.exact`` each question is
    sampled on its own (:meth:`~prb_utils.models.generation.ChatGeneration.sample_each`: in process one
    ``sample_batch`` call per question, one prefill whose KV cache its ``n_samples`` sequences share; on a vLLM
    server one request at a time), seeded by :func:`question_seed`, so its answers depend only on its prompt,
    the policy, ``n_samples``, the sampling options and the seed: never on which questions ran before or
    beside it (a padded batch of questions is not bit-stable, and its random stream is shared).

    Cached per question, keyed by (policy, its fingerprint, device type and dtype, sampling options, the mode,
    a server engine's name) in ``<out>/bon/samples/<key>.parquet`` after every group, so a killed run resumes
    and a later, larger run samples only the questions it lacks; a question is sampled again only when its
    prompt changed. The two modes never share a cache file (the exact mode keeps the key answers had before
    the batched mode existed).
    """

    sampling, options = sampling or SamplingOptions(), options or ModelOptions()
    policy, n_samples, seed = sampling.policy, sampling.n_samples, options.seed
    key = {"policy": policy, "n": n_samples, "seed": seed, "max_new_tokens": sampling.max_new_tokens,
           "temperature": sampling.temperature, "top_p": sampling.top_p, "posts": sampling.policy_posts,
           "v": PIPELINE_VERSION}
    if not options.engine.in_process:
        key["engine"] = options.engine.name
    if not sampling.exact:
        key["sampling"] = sampling.mode
    # the policy's weights, device type and dtype too: new weights in the same folder sample anew
    key.update(policy_fp=model_fingerprint(policy_spec(policy)), **policy_placement(options))
    path = Path(out) / "bon" / "samples" / f"{stable_hash(key)}.parquet"
    cached = read_parquet_cache(path, columns=SAMPLE_COLUMNS, recompute=True,   # damaged: set aside, sampled anew
                                check=lambda frame: samples_problem(frame, n_samples))
    have = {} if cached is None else {(s, i): h for (s, i), h in
                                      cached.groupby(["subset", "id"])["prompt_hash"].first().items()}
    parts = [] if cached is None else [cached]
    todo = []
    for record in data.to_dict("records"):
        prompt = policy_prompt(record, posts=sampling.policy_posts)
        key = (str(record["subset"]), str(record["id"]))
        if have.get(key) != stable_hash(prompt):
            todo.append((key, prompt))
    if todo:
        generator = policy_generator(policy, options, out=out, progress=progress)
        prompts = [prompt for _, prompt in todo]
        seeds = [question_seed(seed, subset, qid) for (subset, qid), _ in todo]
        how = {"system": POLICY_SYSTEM, "max_new_tokens": sampling.max_new_tokens,
               "temperature": sampling.temperature, "top_p": sampling.top_p}
        if sampling.exact:
            step = sampling.batch_questions
            groups = [list(range(start, min(start + step, len(todo)))) for start in range(0, len(todo), step)]
        else:
            groups = generator.sampling_groups(prompts, system=POLICY_SYSTEM, max_new_tokens=sampling.max_new_tokens,
                                               batch_tokens=options.batch_tokens)
        bar = tqdm(total=len(todo), unit="questions", desc=f"sampling {n_samples} answers per question "
                   f"({sampling.mode}, {len(groups)} call{'s' if len(groups) != 1 else ''})", disable=not progress,
                   file=sys.stderr, dynamic_ncols=True,
                   bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total} questions [{elapsed}<{remaining}]")
        finished = 0
        for group in groups:
            batch = [todo[i] for i in group]
            if sampling.exact:
                answers = []
                for i in group:   # one question at a time, each its own call: the bar moves per question
                    answers += generator.sample_each([prompts[i]], n_samples, seeds=[seeds[i]], **how)
                    bar.update(1)
            else:   # the bar moves per decoding step in process (a group is one generate call), else per group
                tick = len(group) / max(1, sampling.max_new_tokens)
                answers = generator.sample_together([prompts[i] for i in group], n_samples,
                                                    seeds=[seeds[i] for i in group],
                                                    on_step=lambda tick=tick: bar.update(tick), **how)
            new = pd.concat([pd.DataFrame({"subset": subset, "id": qid, "sample_idx": range(n_samples),
                                           "response": replies, "prompt_hash": stable_hash(prompt),
                                           "policy": policy})
                             for ((subset, qid), prompt), replies in zip(batch, answers, strict=True)],
                            ignore_index=True)
            done = set(zip(new["subset"], new["id"], strict=True))
            parts = [p[[k not in done for k in zip(p["subset"], p["id"], strict=True)]] for p in parts] + [new]
            write_parquet(pd.concat(parts, ignore_index=True), path)  # after each group: resumable
            finished += len(group)
            bar.n = finished   # whole questions done, whatever the steps said
            bar.refresh()
        bar.close()
    samples = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    keys = pd.DataFrame({"subset": data["subset"].astype(str), "id": data["id"].astype(str)})
    return keys.merge(samples, on=["subset", "id"], how="inner").sort_values(
        ["subset", "id", "sample_idx"], ignore_index=True)


def samples_problem(frame: pd.DataFrame, n_samples: int) -> str | None:
    """Why the rows of a sample cache (:data:`SAMPLE_COLUMNS`) of ``n_samples`` answers per question cannot be
    used, or None: an empty cell, a response that is not text, an answer number outside 0 .. n-1 or given twice,
    a question without its ``n_samples`` answers. A cache so damaged is set aside and sampled anew.

    >>> rows = pd.DataFrame({"subset": "S", "id": "q", "sample_idx": [0, 1], "response": ["a", "b"],
    ...                      "prompt_hash": "h", "policy": "p"})
    >>> samples_problem(rows, 2) is None, samples_problem(rows.head(1), 2)
    (True, 'question S/q has 1 of its 2 answers')
    >>> samples_problem(pd.concat([rows, rows.head(1)]), 2)
    '2 rows with one subset, id, sample_idx (S, q, 0)'
    """
    found = rows_problem(frame, filled=SAMPLE_COLUMNS, text=("response",), unique=("subset", "id", "sample_idx"))
    if found:
        return found
    index = pd.to_numeric(frame["sample_idx"], errors="coerce")
    if not index.between(0, n_samples - 1).all() or not (index == index.round()).all():
        return f"an answer number outside 0 to {n_samples - 1}"
    counts = frame.groupby(["subset", "id"]).size()
    short = counts[counts != n_samples]
    if not short.empty:
        (subset, qid), have = short.index[0], int(short.iloc[0])
        return f"question {subset}/{qid} has {have} of its {n_samples} answers"
    return None


# ------------------------------------------------------------------------------------------ 2. RM scores


def _pairs_for(kind: str, n: int, judge_design: str = "pairs") -> list[tuple[int, int]]:
    if n == 1:
        return [(0, 0)]
    pairwise = MODEL_KINDS[kind].pairwise
    if pairwise and judge_design == "cycle":
        return [(0, 1)] if n == 2 else [(i, (i + 1) % n) for i in range(n)]
    if pairwise and judge_design != "pairs":
        raise PRBError(f"judge_design must be 'pairs' or 'cycle', got {judge_design!r}.")
    pairs = [(i, i + 1) for i in range(0, n - 1, 2)]
    if n % 2:
        pairs.append((n - 1, n - 2))
    return pairs


def _pseudo_benchmark(data: pd.DataFrame, samples: pd.DataFrame, kind: str, judge_design: str) -> pd.DataFrame:
    rows = []
    by_q = {k: g.sort_values("sample_idx")["response"].tolist() for k, g in samples.groupby(["subset", "id"])}
    for record in data.to_dict("records"):
        answers = by_q.get((str(record["subset"]), str(record["id"])))
        if not answers:
            continue
        for i, j in _pairs_for(kind, len(answers), judge_design):
            rows.append({"subset": str(record["subset"]), "id": f"{record['id']}::bon::{i}-{j}",
                         "question": record["question"], "profile": record.get("profile") or [],
                         "category": record.get("category") or "", "chosen": answers[i], "rejected": answers[j],
                         "_qid": str(record["id"]), "_i": i, "_j": j})
    return pd.DataFrame(rows)


def score_samples(data: pd.DataFrame, samples: pd.DataFrame, *, out: str | os.PathLike,
                  models: Sequence[str] = DEFAULT_ZOO, rm_profile: str = DEFAULT_CONDITION, judge_design: str = "pairs",
                  options: ModelOptions | None = None, progress: bool = True) -> pd.DataFrame:
    """Every answer scored by every RM: columns model, kind, subset, id, sample_idx, rm_score (NaN = invalid).

    ``options`` go to :func:`prb_utils.scoring.score_benchmark` (the kinds its engine does not serve run in
    this process)."""

    store = Path(out) / "bon" / "store"
    frames = []
    for spec in models:
        kind = parse_spec(spec).kind
        pseudo = _pseudo_benchmark(data, samples, kind, judge_design)
        if pseudo.empty:
            continue
        rows = score_benchmark(pseudo.drop(columns=["_qid", "_i", "_j"]), [spec], [rm_profile], out=store,
                               options=options, progress=progress)
        merged = pseudo[["subset", "id", "_qid", "_i", "_j"]].merge(
            rows[["subset", "id", "model", "kind", "score_chosen", "score_rejected", "outcome"]],
            on=["subset", "id"], how="inner")
        bad = merged["outcome"] == "invalid"
        merged.loc[bad, ["score_chosen", "score_rejected"]] = math.nan
        long = pd.concat([
            merged.rename(columns={"_i": "sample_idx", "score_chosen": "rm_score"}),
            merged[merged["_i"] != merged["_j"]].rename(columns={"_j": "sample_idx", "score_rejected": "rm_score"}),
        ])
        per = (long.groupby(["model", "kind", "subset", "_qid", "sample_idx"], as_index=False)["rm_score"]
               .agg(lambda s: s.mean() if s.notna().all() else math.nan))
        frames.append(per.rename(columns={"_qid": "id"}))
    if not frames:
        raise PRBError("No answers to score.")
    return pd.concat(frames, ignore_index=True)


# ------------------------------------------------------------------------------------------ 3. judge


def judge_samples(data: pd.DataFrame, samples: pd.DataFrame, *, out: str | os.PathLike, judge: Any = DEFAULT_JUDGE,
                  chunk: int | None = None, progress: bool = True, options: ModelOptions | None = None) -> pd.DataFrame:
    """Rubric quality per answer: columns subset, id, sample_idx, quality, failed, attempts, judge,
    judge_proxy; cached in ``<out>/bon/judge/<judge>.parquet`` by answer and rubric.

    ``judge``: a spec for :func:`prb_utils.downstream.rubric_judge.load_judge` or a judge object (``name``, ``proxy``,
    ``judge(items)``). Answers are judged ``chunk`` at a time (default 32 in process; on a server engine
    :data:`SERVER_JUDGE_CHUNK`, every request of a chunk in flight together up to the client's concurrency) and
    the cache is written after each chunk, so an interrupted run keeps what it judged. An LLM judge runs on ``options.engine`` with ``options.device`` (the
    proxy stays in this process); its verdicts are cached per engine."""

    options = options or ModelOptions()
    judge_id = judge_id_of(judge)
    key = judge_cache_key(judge, options)
    path = Path(out) / "bon" / "judge" / f"{stable_hash(key)}.parquet"
    cached = read_parquet_cache(path, columns=NEEDED_JUDGEMENT_COLUMNS, recompute=True,   # damaged: judged anew
                                check=judgement_problem)
    aspects = {(str(r["subset"]), str(r["id"])): r for r in data.to_dict("records")}
    rows = []
    for s in samples.to_dict("records"):
        record = aspects[(s["subset"], s["id"])]
        item = judge_item(record, s["response"])
        rows.append({**{k: s[k] for k in ("subset", "id", "sample_idx")}, "key": item.key, "item": item})
    wanted = pd.DataFrame(rows)
    # failures are kept too: a re-run reuses them, except those of an unusable server response (judged again)
    unusable = None if cached is None else cached["failed"] & cached["error"].fillna("").astype(str).str.startswith(
        UNUSABLE_VERDICT)
    known = set() if cached is None else set(cached.loc[~unusable, "key"])
    todo = [r["item"] for r in rows if r["key"] not in known and r["item"].aspects]
    todo = list({i.key: i for i in todo}.values())
    if chunk is None:
        chunk = 32 if options.engine.in_process or not runs_a_model(judge) else SERVER_JUDGE_CHUNK
    if chunk < 1:
        raise PRBError(f"chunk must be at least 1, got {chunk}.")
    if todo:
        engine = options.engine.for_run(out, progress=progress)
        rater = load_judge(judge, replace(options, engine=engine)) if isinstance(judge, str) else judge
        bar = tqdm(total=len(todo), unit="answers", desc=f"judging with {judge_id}", disable=not progress,
                   file=sys.stderr, dynamic_ncols=True)
        for start in range(0, len(todo), chunk):
            judged = results_frame(rater.judge(todo[start:start + chunk]))
            keep = cached[~cached["key"].isin(judged["key"])] if cached is not None else None
            cached = pd.concat([keep, judged], ignore_index=True) if keep is not None else judged
            write_parquet(cached, path)   # after each chunk: an interrupted run resumes
            bar.update(len(judged))
        bar.close()
    if cached is None:
        raise PRBError("No answers have rubric aspects to judge.")
    out_frame = wanted.drop(columns=["item"]).merge(
        cached.drop_duplicates("key", keep="last"), on="key", how="left")
    if "quality_expected" not in out_frame.columns:   # a judge object of an older kind
        out_frame["quality_expected"] = np.nan
    return out_frame[["subset", "id", "sample_idx", "quality", "quality_expected", "failed", "attempts", "judge",
                      "judge_proxy"]]


# ------------------------------------------------------------------------------------------ 4. all of it


def _stage(progress: bool, text: str) -> None:
    """Name a step on stderr as it starts (when ``progress``), above any progress bar."""
    if progress:
        tqdm.write(text, file=sys.stderr)


def judge_id_of(judge: Any) -> str:
    """How a judge (a spec or a judge object) is named in messages.

    >>> judge_id_of("proxy")
    'proxy'
    """
    return judge if isinstance(judge, str) else str(judge.name)


def _default_ks(n: int) -> list[int]:
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    return ks


def _prb_accuracy(out: str | os.PathLike, models: Sequence[str], profile: str) -> pd.Series | None:
    """PRB accuracy per model under ``profile``, each from ONE job: the one scored as the BoN pipeline scores
    (BM25 retrieval for ``top{K}``), the newest where several remain (say, two dtypes): two jobs of one model
    are never pooled (a ``--retriever random`` ablation beside the BM25 job would blend into its number)."""
    try:
        results = load_results(out)
        meta = load_run_metadata(out)
    except Exception:  # no main store (yet): the agreement figures are optional
        return None
    if results is None or results.empty:
        return None
    results = results[results["model"].isin(models) & (results["profile"] == profile)]
    jobs = meta[meta["job"].isin(set(results["job"]))]
    if "option_retriever" in jobs.columns:
        jobs = jobs[jobs["option_retriever"].isna() | (jobs["option_retriever"] == "bm25")]
    newest = jobs.sort_values("created").groupby("model")["job"].last()
    results = results[results["job"].isin(set(newest))]
    if results["model"].nunique() < 3:
        return None
    table = accuracy_table(results, by=("model",))
    return table.set_index("model")["accuracy"]


def run_bon_pipeline(
    data: str | pd.DataFrame = "sample",
    *,
    out: str | os.PathLike = "results",
    models: Sequence[str] = DEFAULT_ZOO,
    rm_profile: str = DEFAULT_CONDITION,
    judge: Any = DEFAULT_JUDGE,
    judge_design: str = "pairs",
    sampling: SamplingOptions | None = None,
    options: ModelOptions | None = None,
    ks: Sequence[int] | None = None,
    level: float = LEVEL,
    n_boot: int | None = None,
    limit: int | None = None,
    quality_rule: str = "auto",
    figures: bool = True,
    progress: bool = True,
    folder: str = "bon",
) -> BonRun:
    """Run the whole mini pipeline (see the module docstring); a re-run reuses every cached step.

    ``sampling`` (:class:`SamplingOptions`): the policy and how it answers. ``options``
    (:class:`~prb_utils.models.ModelOptions`): the device, the seed (of the sampling, the RMs and the bootstrap)
    and the engine: on a server engine (``vllm``) the policy, the LLM RMs and the LLM judge run on its servers
    (the ones at its ``urls``, or one per model started here, shared by every step and stopped at the end of
    the process).

    ``folder``: where under ``out`` the run's files go (``bon``; ``prb report`` writes its own small run to
    ``bon-report`` so that it never replaces a ``prb bon`` run); the caches of samples, scores and verdicts
    stay in ``out/bon`` and are shared.

    ``quality_rule``: how the per-aspect judge's verdicts become an answer's quality
    (:data:`~prb_utils.downstream.rubric_judge.QUALITY_RULES`): ``auto`` (default) keeps the most probable
    verdicts unless they rate every answer alike, where the expected verdicts are used; the frame's
    ``quality_rule`` column and ``run.json`` say which (and ``quality_argmax`` keeps the other reading).

    ``data``: a source for :func:`prb_utils.data.load_benchmark` (default the shipped sample) or a loaded
    frame. ``judge``: a rubric judge spec (:data:`~prb_utils.downstream.rubric_judge.RUBRIC_JUDGES`: ``llm:``,
    ``llm-all:``, ``llm-ref:``, ``llm-lampqa:`` or ``proxy``, MiniLM similarity, labelled as a proxy). ``ks`` defaults to
    the powers of two up to ``n_samples``. ``level`` and ``n_boot`` set the bootstrap intervals (over
    questions for the curves, over RMs for the agreement).
    """

    sampling, options = sampling or SamplingOptions(), options or ModelOptions()
    seed = options.seed
    timings: dict[str, float] = {}
    _check_pipeline(rm_profile, judge, sampling, options, models, quality_rule)
    if isinstance(data, str):
        data = load_benchmark(data, limit=limit, drop_invalid=True)
    elif limit is not None:
        data = data.head(limit)
    if data.empty:
        raise PRBError("The benchmark data is empty.")
    root = Path(out) / folder

    samples, scores, quality = _sample_score_judge(data, out=out, models=models, rm_profile=rm_profile, judge=judge,
                                                   judge_design=judge_design, sampling=sampling, options=options,
                                                   timings=timings, progress=progress)
    frame, rule = _bon_frame(samples, scores, quality, quality_rule)
    write_parquet(frame, root / "bon_frame.parquet")
    ks = list(ks) if ks is not None else _default_ks(sampling.n_samples)
    curves = bon_curves(frame, ks, level=level, n_boot=n_boot, seed=seed)
    judge_name = str(quality["judge"].dropna().iloc[0]) if quality["judge"].notna().any() else str(judge)
    proxy = bool(quality["judge_proxy"].fillna(False).any())
    curves["judge"] = judge_name
    curves["judge_proxy"] = proxy
    root.mkdir(parents=True, exist_ok=True)
    curves.to_csv(root / "curves.csv", index=False)

    accuracy = _prb_accuracy(out, models, rm_profile)
    metrics = bon_metrics(curves.drop(columns=["judge", "judge_proxy"]))
    agreement = _bon_agreement(accuracy, metrics, f"bon@{max(ks)}", level=level, n_boot=n_boot, seed=seed,
                               judge_name=judge_name, proxy=proxy)
    if agreement is not None:
        agreement.to_csv(root / "agreement.csv", index=False)

    paths: list[Path] = []
    if figures:
        gains = bon_curves(frame, ks, level=level, n_boot=n_boot, seed=seed, gain=True, methods=["exact"])
        paths = _figures(curves, gains, metrics, accuracy, agreement, root / "figures", judge_name, proxy, max(ks))
    meta = {"policy": sampling.policy, "n_samples": sampling.n_samples, "models": list(models),
            "rm_profile": rm_profile, "judge_design": judge_design,
            "judge": judge_name, "judge_proxy": proxy, "seed": seed, "max_new_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature, "top_p": sampling.top_p, "policy_posts": sampling.policy_posts,
            "ks": ks, "quality_rule": rule, "sampling": sampling.mode, **options.engine.metadata(),
            "n_questions": int(samples.groupby(["subset", "id"]).ngroups), "timings_s": timings,
            "judge_identity": judge_identity(judge), "questions": question_digests(data),
            "policy_dtype": policy_placement(options)["dtype"], "judge_placement": judge_placement(judge, options)}
    (root / "run.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return BonRun(samples, frame, curves, agreement, paths, timings, judge_name, proxy)


def _sample_score_judge(data: pd.DataFrame, *, out: str | os.PathLike, models: Sequence[str], rm_profile: str,
                        judge: Any, judge_design: str, sampling: SamplingOptions, options: ModelOptions,
                        timings: dict[str, float], progress: bool) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The pipeline's three cached steps (sample, score with every RM, judge), each timed into ``timings``."""
    t = time.time()
    _stage(progress, f"Best-of-N 1/3: sampling {sampling.n_samples} answers for each of {len(data)} questions "
                     f"({sampling.mode} sampling)")
    samples = sample_answers(data, out=out, sampling=sampling, options=options, progress=progress)
    timings["sample"] = time.time() - t
    t = time.time()
    _stage(progress, f"Best-of-N 2/3: scoring {len(samples)} answers with {len(models)} RM(s)")
    scores = score_samples(data, samples, out=out, models=models, rm_profile=rm_profile,
                           judge_design=judge_design, options=options, progress=progress)
    timings["score"] = time.time() - t
    t = time.time()
    _stage(progress, f"Best-of-N 3/3: judging {len(samples)} answers with {judge_id_of(judge)}")
    quality = judge_samples(data, samples, out=out, judge=judge, progress=progress, options=options)
    timings["judge"] = time.time() - t
    return samples, scores, quality


def _check_pipeline(rm_profile: str, judge: Any, sampling: SamplingOptions, options: ModelOptions,
                    models: Sequence[str], quality_rule: str) -> None:
    """What :func:`run_bon_pipeline` refuses before any work, each in one sentence."""
    if parse_condition(rm_profile).oracle:
        raise PRBError(f"The RM profile '{rm_profile}' shows the answer key (the rubric); a Best-of-N RM may not "
                       "see it.")
    check_judge(judge, options)   # a judge that cannot be used fails here, before any sampling
    check_causal_lm(sampling.policy, option="--policy")
    choose_quality_rule(pd.DataFrame({"quality": [0.0]}), quality_rule)   # an unknown rule fails before any work
    for spec in models:
        parse_spec(spec)  # an unknown RM spec fails before any sampling


def _bon_frame(samples: pd.DataFrame, scores: pd.DataFrame, quality: pd.DataFrame,
               quality_rule: str) -> tuple[pd.DataFrame, str]:
    """One row per (RM, question, sample): its score, its judged quality read by one rule, and the answer; and
    that rule."""
    frame = scores.merge(quality, on=["subset", "id", "sample_idx"], how="left")
    frame = frame.merge(samples[["subset", "id", "sample_idx", "response"]], on=["subset", "id", "sample_idx"])
    rule = choose_quality_rule(frame, quality_rule)
    if rule == "expected":
        frame = frame.assign(quality_argmax=frame["quality"], quality=frame["quality_expected"])
    frame["quality_rule"] = rule
    return frame, rule


def _bon_agreement(accuracy: pd.Series | None, metrics: pd.DataFrame, column: str, *, level: float,
                   n_boot: int | None, seed: int, judge_name: str, proxy: bool) -> pd.DataFrame | None:
    """The rank agreement of PRB accuracy with ``column`` of ``metrics`` over the RMs of both (None below 3)."""
    if accuracy is None:
        return None
    joined = pd.concat([accuracy.rename("prb"), metrics], axis=1, join="inner").dropna()
    if len(joined) < 3:
        return None
    agreement = rank_agreement_ci(joined["prb"], joined[column], level=level, n_boot=n_boot, seed=seed)
    agreement.insert(0, "downstream", column)
    agreement["judge"] = judge_name
    agreement["judge_proxy"] = proxy
    # a flat side has no ranking: the file says so, its numbers are empty, and no figure is drawn
    agreement["note"] = no_ranking(joined["prb"], joined[column], benchmark="PRB accuracy", downstream=column)
    return agreement


def question_digests(data: pd.DataFrame) -> dict[str, str]:
    """``{subset/id: digest}`` of what a Best-of-N run reads of each record (its question, profile and rubric
    aspects); ``run.json`` keeps them, so that ``prb report`` shows a ``prb bon`` run only on the data it asks for.

    >>> a = load_benchmark("sample", limit=1)
    >>> question_digests(a) == question_digests(a.assign(question=a["question"] + "?"))
    False
    """
    keys = [k for k in ("question", "profile", "rubric_aspects") if k in data.columns]
    return {pair_key(str(row["subset"]), str(row["id"])): stable_hash([row[k] for k in keys])
            for row in data[["subset", "id", *keys]].to_dict("records")}


def _figures(curves: pd.DataFrame, gains: pd.DataFrame | None, metrics: pd.DataFrame, accuracy: pd.Series | None,
             agreement: pd.DataFrame | None, folder: Path, judge_name: str, proxy: bool, kmax: int) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt


    folder.mkdir(parents=True, exist_ok=True)
    label = judge_label(judge_name, proxy)
    paths = []

    def save(ax, name: str) -> None:
        path = folder / name
        ax.figure.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(ax.figure)
        paths.append(path)

    save(bon_curve_plot(curves, method="exact", judge_label=label,
                        title="Best-of-k quality, exact over all k-subsets (95% CI)"), "bon_curves_exact.png")
    save(bon_curve_plot(curves, method="first", judge_label=label,
                        title="Best of the first k (reference rule, 95% CI)"), "bon_curves_first.png")
    if gains is not None:
        save(bon_curve_plot(gains, method="exact", judge_label=label, ylabel="gain over one random answer",
                            title="Best-of-k gain over a random answer (paired by question, 95% CI)"),
             "bon_gain_exact.png")
    if accuracy is not None and agreement is not None and not agreement["note"].notna().any():
        y = metrics[f"bon@{kmax}"]
        ylab = f"best-of-{kmax} quality\n[{label}]"
        save(scatter_fit(accuracy, y, xlabel="PRB accuracy", ylabel=ylab), "prb_vs_bon_scatter.png")
        save(rank_rank(accuracy, y, xlabel="rank by PRB accuracy", ylabel=f"rank by best-of-{kmax}"),
             "prb_vs_bon_rank_rank.png")
        save(coefficient_bars(agreement, title=f"PRB accuracy vs best-of-{kmax} ({'proxy judge' if proxy else judge_name})"),
             "prb_vs_bon_agreement.png")
    return paths
