"""A board submission: what ``prb export --format every_eval_ever`` writes for one job (an Every Eval Ever 0.3.0
aggregate JSON and its per-instance JSONL, with prb's provenance), read back and checked.

:func:`read_submission` refuses a bad submission with one sentence naming the file and the field
(:class:`prb_utils.errors.PRBError`): a field the board reads is missing or of the wrong type, a per-item line
contradicts itself (``evaluation.is_correct`` against ``metadata.outcome``), a pair appears twice, the rows do not
cover the pairs the job scored (``data_pairs`` in the provenance, or the pairs of ``--data``), the per-item file's
checksum differs from the one the aggregate records, or the data digest differs from the data given. A submitted
aggregate is only *read*: :attr:`Submission.submitted` keeps it so that the board can say where it disagrees
with the rows it recomputes.

>>> "metadata.outcome" in SAMPLE_FIELDS, "detailed_evaluation_results.checksum" in AGGREGATE_FIELDS
(True, True)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from prb_utils.data import data_fingerprint
from prb_utils.errors import PRBError
from prb_utils.export import EEE_SCHEMA_VERSION, UNIT_KEYS
from prb_utils.schema import OUTCOMES, pair_key, stable_hash

#: The fields of the aggregate JSON the board reads (dotted paths), each required.
AGGREGATE_FIELDS = ("schema_version", "evaluation_id", "model_info.name", "model_info.additional_details.prb_spec",
                    "model_info.additional_details.prb_kind", "source_metadata.additional_details.job",
                    "source_metadata.additional_details.profile",
                    "source_metadata.additional_details.data_fingerprint", "evaluation_results",
                    "detailed_evaluation_results.file_path", "detailed_evaluation_results.checksum",
                    "detailed_evaluation_results.total_rows")
#: The fields of each per-item line the board reads.
SAMPLE_FIELDS = ("sample_id", "evaluation.is_correct", "metadata.subset", "metadata.profile", "metadata.outcome",
                 "metadata.job")
_FLOATS = ("score_chosen", "score_rejected", "p_chosen_ab", "p_chosen_ba")
_TEXTS = ("category", "verdict_ab", "verdict_ba", "score_dtype", *UNIT_KEYS)


@dataclass(frozen=True)
class Submission:
    """One checked submission: the job's ``rows`` (prb's per-item columns), its provenance and what it claims."""

    path: Path  #: the aggregate JSON
    label: str  #: the job's label (``model_info.name``), as submitted: never trusted as markup
    spec: str
    kind: str
    condition: str
    job: str
    data: str  #: the data digest (``data_fingerprint``)
    provenance: dict[str, str]
    rows: pd.DataFrame
    texts: dict[str, dict[str, str]] = field(default_factory=dict)  #: ``subset/id`` -> question, chosen, rejected
    submitted: dict[str, float] = field(default_factory=dict)  #: ``overall`` or a subset -> the submitted accuracy
    source: str = ""  #: where it came from (the export folder or file named on the command line)


def _get(record: Mapping[str, Any], dotted: str) -> Any:
    value: Any = record
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _require(record: Mapping[str, Any], fields: Iterable[str], where: str) -> None:
    for name in fields:
        value = _get(record, name)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise PRBError(f"{where}: the field {name} is missing; export the job again with `prb export --format "
                           "every_eval_ever`.")


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _rows(text: str, where: str, log: Mapping[str, Any]) -> tuple[pd.DataFrame, dict[str, dict[str, str]]]:
    details = log["source_metadata"]["additional_details"]
    job, condition = str(details["job"]), str(details["profile"])
    rows, texts, seen = [], {}, set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        at = f"{where} line {number}"
        try:
            sample = json.loads(line)
        except ValueError:
            raise PRBError(f"{at} is not JSON.") from None
        if not isinstance(sample, Mapping):
            raise PRBError(f"{at} is not a JSON object.")
        _require(sample, SAMPLE_FIELDS, at)
        meta = sample["metadata"]
        outcome = str(meta["outcome"])
        if outcome not in OUTCOMES:
            raise PRBError(f"{at}: metadata.outcome {outcome!r} is not one of {', '.join(OUTCOMES)}.")
        if bool(sample["evaluation"]["is_correct"]) != (outcome == "correct"):
            raise PRBError(f"{at}: evaluation.is_correct contradicts metadata.outcome {outcome!r}.")
        if str(meta["job"]) != job or str(meta["profile"]) != condition:
            raise PRBError(f"{at}: metadata.job/profile name another job than the aggregate's "
                           f"source_metadata ({job}, {condition}).")
        subset, _, item = str(sample["sample_id"]).partition("/")
        if subset != str(meta["subset"]) or not item:
            raise PRBError(f"{at}: sample_id {sample['sample_id']!r} is not SUBSET/ID of metadata.subset.")
        key = pair_key(subset, item)
        if key in seen:
            raise PRBError(f"{at}: sample_id {key} appears twice (one line per pair).")
        seen.add(key)
        rows.append({"subset": subset, "id": item, "outcome": outcome,
                     **{c: _float(meta.get(c)) for c in _FLOATS}, **{c: meta.get(c) for c in _TEXTS}})
        given = sample.get("input") or {}
        choices = given.get("choices") or []
        if given.get("formatted") and len(choices) == 2:
            texts[key] = {"question": str(given.get("raw") or ""), "chosen": str(choices[0]),
                          "rejected": str(choices[1])}
    return pd.DataFrame(rows, columns=["subset", "id", "outcome", *_FLOATS, *_TEXTS]), texts


def _samples_file(path: Path, log: Mapping[str, Any]) -> Path:
    """The per-item file beside the aggregate (the datastore layout keeps them in one folder)."""
    return path.with_name(Path(str(log["detailed_evaluation_results"]["file_path"])).name)


def _submitted(log: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for number, result in enumerate(log.get("evaluation_results") or []):
        score = _get(result, "score_details.score")
        if isinstance(score, (int, float)):
            name = str(result.get("evaluation_name") or "")
            out["overall" if number == 0 else name.rsplit("/", 1)[-1]] = float(score)
    return out


def read_submission(path: str | os.PathLike, *, data: pd.DataFrame | None = None) -> Submission:
    """Read and check the submission whose aggregate JSON is ``path`` (its per-item file beside it); with
    ``data`` (the benchmark it names, loaded with the job's filters) also check the data digest and that the rows
    cover exactly its pairs. PRBError, one sentence naming the file and the field, for a bad submission."""
    path = Path(path)
    where = os.fspath(path)
    try:
        log = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PRBError(f"Cannot read the submission {where} ({exc.strerror or exc}).") from None
    except ValueError:
        raise PRBError(f"{where} is not JSON; a submission is the .json file `prb export --format every_eval_ever` "
                       "writes.") from None
    if not isinstance(log, Mapping):
        raise PRBError(f"{where} is not a JSON object.")
    _require(log, AGGREGATE_FIELDS, where)
    if log["schema_version"] != EEE_SCHEMA_VERSION:
        raise PRBError(f"{where}: schema_version is {log['schema_version']!r}; the board reads Every Eval Ever "
                       f"{EEE_SCHEMA_VERSION}.")
    details = log["source_metadata"]["additional_details"]
    samples = _samples_file(path, log)
    try:
        text = samples.read_text(encoding="utf-8")
    except OSError:
        raise PRBError(f"{where}: detailed_evaluation_results.file_path names {samples.name}, which is not beside "
                       "it.") from None
    rows, texts = _rows(text, os.fspath(samples), log)
    declared = details.get("data_pairs")
    if data is not None:
        check_data(rows, data, where, str(details["data_fingerprint"]))
    elif declared and str(declared).isdigit() and int(declared) != len(rows):
        raise PRBError(f"{where}: its per-item rows cover {len(rows)} pairs but source_metadata.additional_details."
                       f"data_pairs says the job scored {declared}: a pair is missing.")
    expected = log["detailed_evaluation_results"]
    if stable_hash(text, length=64) != str(expected["checksum"]):   # the export's sha256 of the file
        raise PRBError(f"{where}: detailed_evaluation_results.checksum does not match {samples.name} (the per-item "
                       "rows were changed after export).")
    model = log["model_info"]
    spec = str(model["additional_details"]["prb_spec"])
    rows = rows.assign(model=spec, kind=str(model["additional_details"]["prb_kind"]),
                       profile=str(details["profile"]), job=str(details["job"]))
    provenance = {k: str(v) for k, v in details.items()}
    provenance.update({f"model {k}": str(v) for k, v in (model.get("additional_details") or {}).items()})
    return Submission(path=path, label=str(model["name"]), spec=spec, kind=str(model["additional_details"]["prb_kind"]),
                      condition=str(details["profile"]), job=str(details["job"]),
                      data=str(details["data_fingerprint"]), provenance=provenance, rows=rows, texts=texts,
                      submitted=_submitted(log))


def check_data(rows: pd.DataFrame, data: pd.DataFrame, where: str, digest: str) -> None:
    """PRBError naming ``where`` unless ``rows`` cover exactly the pairs of ``data`` (the benchmark loaded with
    the job's filters) and ``digest`` is its :func:`prb_utils.data.data_fingerprint`."""
    wanted = {pair_key(str(s), str(i)) for s, i in zip(data["subset"], data["id"], strict=True)}
    held = {pair_key(str(s), str(i)) for s, i in zip(rows["subset"], rows["id"], strict=True)}
    if missing := sorted(wanted - held):
        raise PRBError(f"{where}: its per-item rows lack {len(missing)} pair(s) of the data (e.g. sample_id "
                       f"{missing[0]}).")
    if extra := sorted(held - wanted):
        raise PRBError(f"{where}: sample_id {extra[0]} is no pair of the data it names.")
    if data_fingerprint(data) != digest:
        raise PRBError(f"{where}: source_metadata.additional_details.data_fingerprint {digest} is not the digest "
                       "of the data given (another data set, or records edited since).")


def find_submissions(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """The aggregate JSON files of ``paths``: a file as given, a folder (an export) searched for ``*.json``
    files that are Every Eval Ever aggregates. PRBError for a path that does not exist or holds none."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            inside = sorted(p for p in path.rglob("*.json") if p.is_file() and _is_aggregate(p))
            if not inside:
                raise PRBError(f"{given} holds no submission (no Every Eval Ever .json file); run `prb export "
                               "--format every_eval_ever` into it.")
            found += inside
        else:
            raise PRBError(f"The submission {given} does not exist.")
    if not found:
        raise PRBError("Name at least one submission (a file or folder that `prb export --format every_eval_ever` "
                       "wrote).")
    return list(dict.fromkeys(found))


def _is_aggregate(path: Path) -> bool:
    try:
        head = path.read_text(encoding="utf-8")[:4096]
    except (OSError, UnicodeDecodeError):
        return False
    return '"detailed_evaluation_results"' in head or '"evaluation_id"' in head
