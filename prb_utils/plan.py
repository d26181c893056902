"""What a scoring run will cost, before any model is loaded (``prb plan``).

For each model x profile condition of the data: the pairs, the tokens the scorer's forward passes take (after
prefix sharing: the prefix a pair's sequences share runs once on the decoder's prompt cache), the pairs whose
input exceeds the model's context (the scorer cuts their user message from the left), and an estimated device
time from a rate in tokens computed per second. Only tokenizers and ``config.json`` files are read
(:mod:`prb_utils.models.token_counts`): the RM inputs are built as the scorer builds them, then tokenized by
the adapters' own code. ``length`` and ``lexical`` run no model: their pairs are counted, their tokens are n/a.

The rate is the one a forward pass reaches on your device, in tokens computed per second: the "plain forward
pass ... k tok/s" line of ``bench/gpu_throughput.py`` (or ``tokens_computed`` over the scoring seconds of a job
scored before, from its run metadata). Device time grows faster than tokens where inputs are long: each
token also attends every key before it, so the estimate weighs the tokens by the keys they attend, against the
2,048-token pass the rate is measured on (:func:`~prb_utils.models.token_counts.equivalent_tokens`, from the
model's layers, width and body parameters; about 1.5x a flat count at 35k tokens for an 8B model). The
estimate leaves out host work.

Loading is counted once per model (:func:`loading_frame`): its checkpoint files here, read at a rate in GB/s
(``--load-rate``: a job's run metadata records ``weights_bytes`` and ``load_s``, whose ratio is the rate on the
machine that scored it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from prb_utils.models.base import PairInput, parse_spec
from prb_utils.models.hf import TRAINED_LENGTH, resolve_source
from prb_utils.models.kinds import MODEL_KINDS
from prb_utils.models.registry import ModelOptions
from prb_utils.models.token_counts import PairTokens, TokenCounting, equivalent_tokens, token_counter
from prb_utils.models.weights import load_seconds, weights_bytes
from prb_utils.profile import condition_records, parse_condition, rm_user_message
from prb_utils.retrieval import post_selectors

PLAN_COLUMNS = ["model", "kind", "profile", "pairs", "input_tokens", "tokens", "sharing", "truncated", "longest",
                "context", "device_s"]
COUNT_CHUNK = 256   # pairs tokenized per call: memory stays small at the benchmark's full size
NO_RATE = ("device time: n/a, no rate given: pass --rate TOKENS_PER_S, the tokens a forward pass computes per "
           "second on your device (bench/gpu_throughput.py prints it as 'plain forward pass ... k tok/s').")
NO_MODEL = "tokens and device time: n/a for {names}: they run no model."
NO_LOAD_RATE = ("load time: n/a, no load rate given: pass --load-rate GB_PER_S, the rate weights are read at on "
                "your machine (a job's run metadata records weights_bytes and load_s).")


def plan_frame(
    data: pd.DataFrame,
    models: Sequence[str],
    profiles: Sequence[str],
    *,
    options: ModelOptions | None = None,
    retriever: str | None = None,
    rate: float | Mapping[str | None, float] | None = None,
) -> pd.DataFrame:
    """One row per model x profile condition: ``pairs``; ``input_tokens`` (every sequence whole, after
    truncation) and ``tokens`` (what the forward passes compute, after prefix sharing: ``sharing`` says
    whether the prompt cache applies); ``truncated`` pairs; ``longest`` sequence before truncation and the
    model's ``context``; ``device_s`` = the tokens weighed by the keys they attend / ``rate`` (NaN without a
    rate): one rate for every model, or ``{spec: rate}`` per model with ``None`` as the key of every other model's
    rate. ``options``: the scoring run's
    (its ``judge_mode``, ``judge_template`` and ``tokenization`` shape the inputs, its ``seed`` a random
    retriever's draw). Token columns are NA for the
    baselines. ``frame.attrs["warnings"]`` holds one sentence per job whose inputs exceed the model's context
    or the length its positions were trained at. PRBError for an unknown spec or condition, or a model
    folder, tokenizer or config that cannot be read.

    >>> from prb_utils.data import load_benchmark
    >>> plan_frame(load_benchmark("sample", limit=2), ["length"], ["none", "top3"])[["model", "profile", "pairs"]]
        model profile  pairs
    0  length    none      6
    1  length    top3      6
    """
    options = options or ModelOptions()
    records = data.to_dict("records")
    conditions = list({c.spelling: c for c in map(parse_condition, profiles)}.values())
    specs = list(dict.fromkeys(parse_spec(m).canonical for m in models))   # an unknown spec fails before any work
    selectors = post_selectors(conditions, retriever, options.seed)
    counters = {spec: token_counter(spec, options) for spec in specs}   # a bad folder fails first
    rows: list[dict[str, Any]] = []
    warnings: list[tuple[int, str]] = []
    order = {spec: i for i, spec in enumerate(specs)}
    for written in conditions:   # one condition's RM inputs at a time: `full` is large at the benchmark's size
        condition, find_posts = written.spelling, selectors[written.spelling]
        pairs = [PairInput(f"{r['subset']}/{r['id']}", rm_user_message(r, written.name, retriever=find_posts),
                           r["chosen"], r["rejected"])
                 for r in condition_records(data, written.name, seed=options.seed, records=records)]
        for spec, counter in counters.items():
            row: dict[str, Any] = {"model": spec, "kind": parse_spec(spec).kind, "profile": condition,
                                   "pairs": len(pairs), "truncated": 0}
            if counter is not None:
                counts = [c for start in range(0, len(pairs), COUNT_CHUNK)
                          for c in counter.count(pairs[start:start + COUNT_CHUNK])]
                row.update(_token_columns(counter, counts, _model_rate(rate, spec)))
                warnings.extend((order[spec], line) for line in _warnings(spec, condition, counter, counts))
            rows.append(row)
    rows.sort(key=lambda row: order[row["model"]])   # model by model, conditions in the order given (stable)
    frame = pd.DataFrame(rows, columns=PLAN_COLUMNS)
    for column in ("input_tokens", "tokens", "truncated", "longest", "context"):
        frame[column] = frame[column].astype("Int64")
    frame["device_s"] = frame["device_s"].astype(float)
    frame.attrs["warnings"] = [line for _, line in sorted(warnings, key=lambda w: w[0])]
    return frame


def loading_frame(models: Sequence[str], *, load_rate: float | None = None) -> pd.DataFrame:
    """One row per model with weights: ``weights_gb``, its checkpoint files here (NaN where there are none: a
    folder with only a tokenizer and ``config.json``, a hub id not in the local cache), and ``load_s``, their read
    time at ``load_rate`` GB/s (NaN without a rate or files). The model-free baselines load nothing: no row.

    >>> loading_frame(["length", "lexical"]).empty
    True
    """
    rows = []
    for spec in dict.fromkeys(parse_spec(m).canonical for m in models):
        parsed = parse_spec(spec)
        if not MODEL_KINDS[parsed.kind].weights:
            continue
        n_bytes = weights_bytes(resolve_source(parsed))
        rows.append({"model": spec, "weights_gb": n_bytes / 1e9 if n_bytes else math.nan,
                     "load_s": load_seconds(n_bytes, load_rate)})
    return pd.DataFrame(rows, columns=["model", "weights_gb", "load_s"]).astype({"weights_gb": float, "load_s": float})


def _model_rate(rate: float | Mapping[str | None, float] | None, spec: str) -> float | None:
    """The rate of ``spec``: its own in a mapping (else the mapping's ``None`` entry), or the one rate given.

    >>> _model_rate({"judge:x": 5.0, None: 9.0}, "judge:x"), _model_rate({"judge:x": 5.0}, "judge:y"), _model_rate(7.0, "a")
    (5.0, None, 7.0)
    """
    if isinstance(rate, Mapping):
        return rate.get(spec, rate.get(None))
    return rate


def _token_columns(counter: TokenCounting, counts: Sequence[PairTokens], rate: float | None) -> dict[str, Any]:
    tokens = sum(c.computed for c in counts)
    cost = equivalent_tokens(tokens, sum(c.attended for c in counts), counter.attention)
    return {"input_tokens": sum(c.input_tokens for c in counts), "tokens": tokens, "sharing": counter.sharing,
            "truncated": sum(c.truncated for c in counts), "longest": max((c.longest for c in counts), default=0),
            "context": counter.context, "device_s": cost / rate if rate else math.nan}


def _warnings(spec: str, condition: str, counter: TokenCounting, counts: Sequence[PairTokens]) -> list[str]:
    """One sentence when inputs exceed the model's context, one when they exceed its RoPE training length."""
    found = []
    longest = max((c.longest for c in counts), default=0)
    truncated = sum(c.truncated for c in counts)
    declared = counter.declared
    if truncated:
        over = [f"{name} {value}" for name, value in declared.items() if name != TRAINED_LENGTH and value < longest]
        if counter.context < counter.max_length:   # a generating judge keeps room for its answer
            over.append(f"less {counter.max_length - counter.context} tokens kept for the generated answer")
        found.append(f"{spec} [{condition}]: {truncated} of {len(counts)} pairs exceed the model's context of "
                     f"{counter.context} tokens ({', '.join(over)}; longest "
                     f"input {longest} tokens): scoring cuts their user message from the left.")
    trained = declared.get(TRAINED_LENGTH)
    beyond = sum(min(c.longest, counter.context) > trained for c in counts) if trained else 0
    if beyond:
        found.append(f"{spec} [{condition}]: {beyond} of {len(counts)} pairs are longer than the {trained} tokens "
                     f"the model's positions were trained at ({TRAINED_LENGTH}): they are scored on RoPE-scaled "
                     "positions.")
    return found


def format_duration(seconds: float) -> str:
    """A device time for people: seconds, minutes or hours; ``n/a`` for NaN.

    >>> format_duration(0.14), format_duration(42.4), format_duration(754), format_duration(4 * 3600 + 90)
    ('0.1 s', '42 s', '12.6 min', '4.0 h')
    >>> format_duration(float("nan"))
    'n/a'
    """
    if not math.isfinite(seconds):
        return "n/a"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def plan_text(frame: pd.DataFrame, loading: pd.DataFrame | None = None) -> str:
    """The plan as ``prb plan`` prints it: the table (n/a where a value is undefined), then one line per n/a
    and the total device time when there is a rate; with ``loading`` (:func:`loading_frame`), one line per model's
    weights and load time, and the load time in the total."""
    shown = frame.drop(columns=["kind"]).astype(object)
    shown["device_time"] = [format_duration(s) for s in frame["device_s"]]
    shown = shown.drop(columns=["device_s"]).where(frame.drop(columns=["kind"]).notna().reindex(
        columns=shown.columns, fill_value=True), "n/a")
    lines = [shown.to_string(index=False)]
    baselines = frame.loc[frame["tokens"].isna(), "model"].unique()
    if len(baselines):
        lines.append(NO_MODEL.format(names=", ".join(baselines)))
    rated = frame["device_s"].notna()
    if not rated.any() and frame["tokens"].notna().any():
        lines.append(NO_RATE)
    loading = loading if loading is not None else pd.DataFrame(columns=["model", "weights_gb", "load_s"])
    for row in loading.itertuples(index=False):
        weights = "n/a (no checkpoint files here)" if math.isnan(row.weights_gb) else f"{row.weights_gb:.2f} GB"
        lines.append(f"model loading, {row.model}: weights {weights}, load time {format_duration(row.load_s)}")
    if len(loading) and loading["load_s"].isna().all() and loading["weights_gb"].notna().any():
        lines.append(NO_LOAD_RATE)
    if rated.any():
        loads = loading["load_s"].dropna()
        total = float(frame.loc[rated, "device_s"].sum()) + float(loads.sum())
        how = (f", plus loading {len(loads)} model{'s' if len(loads) != 1 else ''} at --load-rate; host work not "
               "included" if len(loads) else "; model loading and host work not included")
        lines.append(f"device time, all jobs: {format_duration(total)} (tokens weighed by the keys they attend / "
                     f"rate{how}).")
    return "\n".join(lines)
