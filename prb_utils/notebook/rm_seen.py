"""What each scored job's model saw for a pair: its exact rendered input, rebuilt from the store's record of the job.

A job's input is rebuilt as its scorer built it: the user message from the record under the job's condition
and retriever (:func:`prb_utils.profile.rm_user_message`, the posts picked by
:func:`prb_utils.retrieval.retriever_from_label`), checked against the row's ``pair_hash`` (a record edited since
it was scored is said, not shown), then rendered by the model's own ``input_texts`` with the options the job
ran with (:func:`prb_utils.models.rendered.rendered_input`: chat template, judge template and mode,
tokenization, truncation to the model's context). Where that cannot be done the reason is given instead: a judge
template read from a file (the store keeps its hash, not its text), a probe condition (its records are
transformed over the whole data), a model that cannot be read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import pandas as pd

from prb_utils.errors import PRBError
from prb_utils.models.base import PairInput
from prb_utils.models.prompts import JUDGE_TEMPLATES
from prb_utils.models.registry import ModelOptions
from prb_utils.models.rendered import RenderedInput, rendered_input
from prb_utils.profile import parse_condition, rm_user_message
from prb_utils.retrieval import retriever_from_label, retriever_label
from prb_utils.store import load_run_metadata, pair_hash

#: The column :func:`rendered_column` adds to a per-item table.
RENDERED_COLUMN = "rendered_input"


def _given(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and value != value)


def job_options(job: Mapping[str, Any]) -> ModelOptions | str:
    """The options that shaped a job's inputs (judge mode and template, tokenization), from its row of
    :func:`prb_utils.store.load_run_metadata`; a sentence saying why they cannot be rebuilt otherwise.

    >>> job_options({"option_judge_mode": "generate", "judge_template": "reference"}).judge_template
    'reference'
    >>> job_options({"judge_template": "file"})
    'its judge template came from a file or a text the store keeps only a hash of'
    """
    template = job.get("judge_template")
    if _given(template) and template not in JUDGE_TEMPLATES:
        return "its judge template came from a file or a text the store keeps only a hash of"
    values = {"judge_mode": job.get("option_judge_mode"), "judge_template": template,
              "tokenization": job.get("option_tokenization")}
    return ModelOptions(**{k: v for k, v in values.items() if _given(v)})


@lru_cache(maxsize=8)
def _posts(label: str | None) -> Any:
    return retriever_from_label(label)


def job_message(record: Mapping[str, Any], job: Mapping[str, Any]) -> str | None:
    """The user message the job's model was given for ``record`` (None for a probe condition, whose records
    are transformed over the whole data)."""
    condition = parse_condition(str(job["profile"]))
    if condition.probe is not None:
        return None
    label = retriever_label(job.get("option_retriever") or "bm25", job.get("option_retriever_seed")) \
        if condition.retrieves else None
    return rm_user_message(record, condition, retriever=_posts(label))


def seen_input(record: Mapping[str, Any], row: Mapping[str, Any], job: Mapping[str, Any]) -> RenderedInput | str:
    """What the job of ``row`` (one stored per-item row of ``record``) saw, or why it cannot be shown."""
    message = job_message(record, job)
    if message is None:
        return "a probe condition's input is built from the whole data (see page 05)"
    stored = row.get("pair_hash")
    now = pair_hash(str(record.get("subset", "")), str(record["id"]), message, str(record["chosen"]),
                    str(record["rejected"]), category=str(record.get("category") or ""))
    if isinstance(stored, str) and stored != now:
        return "the record changed after it was scored, so its input then cannot be rebuilt"
    options = job_options(job)
    if isinstance(options, str):
        return options
    pair = PairInput(f"{record.get('subset', '')}/{record['id']}", message, str(record["chosen"]),
                     str(record["rejected"]))
    try:
        return rendered_input(str(job["model"]), pair, options)
    except PRBError as exc:
        return f"its model cannot be read here ({exc})"


def store_jobs(results: Any) -> pd.DataFrame:
    """The store's jobs (:func:`prb_utils.store.load_run_metadata`) indexed by job key."""
    jobs = load_run_metadata(results)
    return jobs.set_index("job", drop=False) if not jobs.empty else jobs


def seen_inputs(record: Mapping[str, Any], results: pd.DataFrame, jobs: pd.DataFrame, *,
                condition: str) -> list[tuple[str, RenderedInput | str]]:
    """``(model, what it saw or why not)`` for every job of ``results`` (rows with ``job``) that scored
    ``record`` under ``condition``, in model order."""
    if results is None or results.empty or jobs is None or jobs.empty or "job" not in results.columns:
        return []
    mine = results[(results["subset"].astype(str) == str(record.get("subset", "")))
                   & (results["id"].astype(str) == str(record["id"])) & (results["profile"] == condition)]
    out = []
    for row in mine.sort_values("model").to_dict("records"):
        if row["job"] in jobs.index:
            out.append((str(row["model"]), seen_input(record, row, jobs.loc[row["job"]].to_dict())))
    return out


def rendered_column(rows: pd.DataFrame, data: pd.DataFrame, jobs: pd.DataFrame) -> list[str]:
    """Per row of ``rows`` (per-item rows with ``job``), what its model saw as one text
    (:meth:`~prb_utils.models.rendered.RenderedInput.as_text`, cuts marked
    :data:`~prb_utils.models.rendered.CUT_MARK`), or
    ``n/a: <why>``."""
    records = {(str(r["subset"]), str(r["id"])): r for r in data.to_dict("records")}
    out = []
    for row in rows.to_dict("records"):
        record = records.get((str(row["subset"]), str(row["id"])))
        job = jobs.loc[row["job"]].to_dict() if row.get("job") in jobs.index else None
        seen = seen_input(record, row, job) if record is not None and job is not None else \
            "its record or job is not in this data and store"
        out.append(seen.as_text() if isinstance(seen, RenderedInput) else f"n/a: {seen}")
    return out
