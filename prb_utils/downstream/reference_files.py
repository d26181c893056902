"""Readers for the files the benchmark's reference scripts write, into prb's tidy forms.

Reference layout (file names use the short subset names ``Art``, ``Lifestyle``, ``Society``):

- BoN (``BoN/data/``): ``{subset}_samples.jsonl`` (id, query, profile, sample_idx, aspects,
  generated_response), ``{subset}_scored.jsonl`` (the same + ``score``), ``{subset}_k{k}.jsonl`` (the best
  of the *first* k: id, query, output, aspects, score), ``{subset}_eval_k{k}.jsonl`` (id, query, answer,
  aspects, scores: the judge's 0/1/2 per aspect, average_score) and ``evaluation_summary.json``
  (``{subset: {k: {k, num_examples, mean_score, std_score, min_score, max_score}}}``).
- Pointwise / pairwise accuracy (``evaluation/results/``): ``{subset}_{model}_pointwise.txt`` and
  ``{subset}_{model}_pairwise.txt`` summaries.
- PPO (``PPO/result/``): ``{subset}_{tag}_evaluation.jsonl`` (as the eval files, answer = the trained
  policy's output) and ``{subset}_{tag}_evaluation.txt``; the tag names the RM the policy was trained with.

The reference judge's ``average_score`` is on the 0-2 scale; every reader adds ``quality`` =
average_score / 2, the [0, 1] scale of :mod:`prb_utils.downstream.rubric_judge`. The reference silently writes
score 0 for an unparseable judge answer; ``parse_suspect`` flags rows whose score list is empty, holds a
value outside {0, 1, 2}, or has a length different from the number of aspects (counted from the
comma-joined aspect string, so only a hint).

A malformed file raises :class:`~prb_utils.errors.PRBError` naming the file and the line.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from prb_utils.analysis.resampling import LEVEL
from prb_utils.errors import PRBError

SUBSET_LONG = {
    "Art": "Art_and_Entertainment",
    "Lifestyle": "Lifestyle_and_Personal_Development",
    "Society": "Society_and_Culture",
}

PathLike = str | os.PathLike


def subset_name(short: str) -> str:
    """The dataset config name of a reference file prefix (``Art`` -> ``Art_and_Entertainment``)."""
    return SUBSET_LONG.get(short, short)


def _iter_jsonl(path: PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    p = Path(path)
    if not p.is_file():
        raise PRBError(f"File {p} does not exist.")
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PRBError(f"{p}, line {lineno}: not valid JSON ({exc.msg}).") from None
            if not isinstance(record, dict):
                raise PRBError(f"{p}, line {lineno}: expected a JSON object.")
            yield lineno, record


def _get(record: Mapping[str, Any], field: str, kind: type | tuple[type, ...], path: PathLike, lineno: int) -> Any:
    if field not in record:
        raise PRBError(f"{path}, line {lineno}: field '{field}' is missing.")
    value = record[field]
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise PRBError(f"{path}, line {lineno}: field '{field}' must be a number.")
        return float(value)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise PRBError(f"{path}, line {lineno}: field '{field}' has the wrong type.")
    return value


def _str_id(record: Mapping[str, Any], path: PathLike, lineno: int) -> str:
    value = _get(record, "id", (str, int), path, lineno)
    return str(value)


def _subset_from_name(path: PathLike, pattern: str) -> re.Match[str]:
    name = Path(path).name
    match = re.fullmatch(pattern, name)
    if not match:
        raise PRBError(f"File name {name} does not follow the reference pattern {pattern}.")
    return match


def _iter_samples(path: PathLike) -> Iterator[tuple[int, Mapping[str, Any], str, int]]:
    """(line, record, id, sample_idx) of a per-sample BoN file; ``sample_idx`` falls back to the position
    of the record within its id (the reference's "first k" is the file order)."""
    seen: dict[str, int] = {}
    for lineno, rec in _iter_jsonl(path):
        qid = _str_id(rec, path, lineno)
        idx = int(_get(rec, "sample_idx", int, path, lineno)) if "sample_idx" in rec else seen.get(qid, 0)
        seen[qid] = idx + 1
        yield lineno, rec, qid, idx


def read_bon_samples(path: PathLike) -> pd.DataFrame:
    """``{subset}_samples.jsonl`` -> columns subset, id, sample_idx, question, profile, aspects, response."""
    subset = subset_name(_subset_from_name(path, r"(.+)_samples\.jsonl").group(1))
    rows = []
    for lineno, rec, qid, idx in _iter_samples(path):
        rows.append({
            "subset": subset, "id": qid, "sample_idx": idx,
            "question": _get(rec, "query", str, path, lineno),
            "profile": str(rec.get("profile", "")),
            "aspects": str(rec.get("aspects", "")),
            "response": _get(rec, "generated_response", str, path, lineno),
        })
    return pd.DataFrame(rows, columns=["subset", "id", "sample_idx", "question", "profile", "aspects", "response"])


def read_bon_scored(path: PathLike, *, model: str) -> pd.DataFrame:
    """``{subset}_scored.jsonl`` -> the RM half of the tidy BoN form.

    Columns model, subset, id, sample_idx, rm_score, question, aspects, response. The file does not name the
    RM, so ``model`` does. ``sample_idx`` falls back to the position within the id (the reference's "first
    k" is the file order).
    """
    subset = subset_name(_subset_from_name(path, r"(.+)_scored\.jsonl").group(1))
    rows = []
    for lineno, rec, qid, idx in _iter_samples(path):
        rows.append({
            "model": model, "subset": subset, "id": qid, "sample_idx": idx,
            "rm_score": _get(rec, "score", float, path, lineno),
            "question": _get(rec, "query", str, path, lineno),
            "aspects": str(rec.get("aspects", "")),
            "response": _get(rec, "generated_response", str, path, lineno),
        })
    cols = ["model", "subset", "id", "sample_idx", "rm_score", "question", "aspects", "response"]
    return pd.DataFrame(rows, columns=cols)


def read_bon_selected(path: PathLike) -> pd.DataFrame:
    """``{subset}_k{k}.jsonl`` -> columns subset, k, id, rm_score, question, aspects, response."""
    match = _subset_from_name(path, r"(.+)_k(\d+)\.jsonl")
    subset, k = subset_name(match.group(1)), int(match.group(2))
    rows = []
    for lineno, rec in _iter_jsonl(path):
        rows.append({
            "subset": subset, "k": k, "id": _str_id(rec, path, lineno),
            "rm_score": _get(rec, "score", float, path, lineno),
            "question": _get(rec, "query", str, path, lineno),
            "aspects": str(rec.get("aspects", "")),
            "response": _get(rec, "output", str, path, lineno),
        })
    return pd.DataFrame(rows, columns=["subset", "k", "id", "rm_score", "question", "aspects", "response"])


def _aspect_count(aspects: Any) -> int | None:
    if isinstance(aspects, list):
        return len(aspects)
    if isinstance(aspects, str) and aspects.strip():
        return len([a for a in aspects.split(", ") if a.strip()])
    return None


def _judge_rows(path: PathLike, answer_field: str) -> list[dict[str, Any]]:
    rows = []
    for lineno, rec in _iter_jsonl(path):
        scores = _get(rec, "scores", list, path, lineno)
        if any(isinstance(s, bool) or not isinstance(s, int | float) for s in scores):
            raise PRBError(f"{path}, line {lineno}: field 'scores' must be a list of numbers.")
        average = _get(rec, "average_score", float, path, lineno)
        aspects = rec.get("aspects", "")
        n_aspects = _aspect_count(aspects)
        suspect = (
            not scores
            or any(s not in (0, 1, 2) for s in scores)
            or (n_aspects is not None and len(scores) != n_aspects)
        )
        if isinstance(aspects, list):
            aspects = ", ".join(str(a.get("aspect", a)) if isinstance(a, dict) else str(a) for a in aspects)
        rows.append({
            "id": _str_id(rec, path, lineno),
            "question": str(rec.get("query", rec.get("question", ""))),
            "aspects": str(aspects),
            "response": _get(rec, answer_field, str, path, lineno),
            "scores": [float(s) for s in scores],
            "average_score": average,
            "quality": average / 2.0,
            "parse_suspect": bool(suspect),
        })
    return rows


JUDGE_COLUMNS = ["id", "question", "aspects", "response", "scores", "average_score", "quality", "parse_suspect"]


def read_bon_eval(path: PathLike) -> pd.DataFrame:
    """``{subset}_eval_k{k}.jsonl`` -> columns subset, k, id, question, aspects, response, scores,
    average_score (0-2), quality (0-1), parse_suspect."""
    match = _subset_from_name(path, r"(.+)_eval_k(\d+)\.jsonl")
    subset, k = subset_name(match.group(1)), int(match.group(2))
    df = pd.DataFrame(_judge_rows(path, "answer"), columns=JUDGE_COLUMNS)
    df.insert(0, "k", k)
    df.insert(0, "subset", subset)
    return df


def read_evaluation_summary(path: PathLike) -> pd.DataFrame:
    """``evaluation_summary.json`` -> columns subset, k, num_examples, mean_score, std_score, min_score,
    max_score (0-2 scale) and quality (= mean_score / 2)."""
    p = Path(path)
    if not p.is_file():
        raise PRBError(f"File {p} does not exist.")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PRBError(f"{p}, line {exc.lineno}: not valid JSON ({exc.msg}).") from None
    if not isinstance(data, dict):
        raise PRBError(f"{p}, line 1: expected an object of subsets.")
    rows = []
    fields = ("num_examples", "mean_score", "std_score", "min_score", "max_score")
    for subset, per_k in data.items():
        if not isinstance(per_k, dict):
            raise PRBError(f"{p}: subset {subset!r} must map k to a summary object.")
        for key, summary in per_k.items():
            if not isinstance(summary, dict) or any(f not in summary for f in fields):
                raise PRBError(f"{p}: subset {subset!r}, k {key}: expected fields {', '.join(fields)}.")
            try:
                k = int(summary.get("k", key))
                values = [float(summary[f]) for f in fields]
            except (TypeError, ValueError):
                raise PRBError(f"{p}: subset {subset!r}, k {key}: fields must be numbers.") from None
            rows.append({"subset": subset_name(subset), "k": k, **dict(zip(fields, values, strict=True))})
    df = pd.DataFrame(rows, columns=["subset", "k", *fields])
    df["num_examples"] = df["num_examples"].astype(int)
    df["quality"] = df["mean_score"] / 2.0
    return df.sort_values(["subset", "k"], ignore_index=True)


def read_bon_folder(folder: PathLike, *, model: str) -> dict[str, pd.DataFrame]:
    """Everything a reference BoN run left in ``folder`` (``BoN/data``), one tidy frame per kind.

    Keys: ``samples``, ``scored``, ``selected``, ``eval``, ``summary``; a kind with no file is an empty frame
    (``summary``: no ``evaluation_summary.json``). ``model`` names the RM the run used.
    """
    root = Path(folder)
    if not root.is_dir():
        raise PRBError(f"Folder {root} does not exist.")
    files = sorted(root.iterdir())

    def gather(pattern: str, reader) -> pd.DataFrame:
        parts = [reader(f) for f in files if re.fullmatch(pattern, f.name)]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    summary = root / "evaluation_summary.json"
    return {
        "samples": gather(r".+_samples\.jsonl", read_bon_samples),
        "scored": gather(r".+_scored\.jsonl", lambda f: read_bon_scored(f, model=model)),
        "selected": gather(r".+(?<!_eval)_k\d+\.jsonl", read_bon_selected),
        "eval": gather(r".+_eval_k\d+\.jsonl", read_bon_eval),
        "summary": read_evaluation_summary(summary) if summary.is_file() else pd.DataFrame(),
    }


def reference_curves(evals: pd.DataFrame, *, model: str, by: tuple[str, ...] = (), level: float = LEVEL) -> pd.DataFrame:
    """Curves in the form of :func:`prb_utils.downstream.bon.bon_curves` from the reference's eval files.

    One row per k (and ``by``): model, method ``first`` (the reference selects the best of the first k),
    n (questions), mean quality and a t interval over questions.
    """
    if evals.empty:
        raise PRBError("No reference eval rows to build curves from.")
    rows = []
    keys = [*by, "k"]
    for key, grp in evals.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        v = grp["quality"].to_numpy(dtype=float)
        mean = float(v.mean())
        if v.size > 1 and v.std(ddof=1) > 0:
            half = float(stats.t.ppf(0.5 + level / 2, v.size - 1)) * float(v.std(ddof=1)) / math.sqrt(v.size)
        else:
            half = float("nan") if v.size < 2 else 0.0
        rows.append((model, *key[:-1], "first", key[-1], v.size, mean, mean - half, mean + half))
    return pd.DataFrame(rows, columns=["model", *by, "method", "k", "n", "mean", "ci_low", "ci_high"])


# ---------------------------------------------------------------------------------------------- summaries

_NUM = r"(-?\d+(?:\.\d+)?)"


def _find(lines: list[str], pattern: str, path: PathLike, what: str) -> tuple[re.Match[str], int]:
    for lineno, line in enumerate(lines, 1):
        match = re.match(pattern, line.strip())
        if match:
            return match, lineno
    raise PRBError(f"{path}: no line with {what} found.")


def _text_lines(path: PathLike) -> list[str]:
    p = Path(path)
    if not p.is_file():
        raise PRBError(f"File {p} does not exist.")
    return p.read_text(encoding="utf-8").splitlines()


def read_pointwise_summary(path: PathLike) -> dict[str, Any]:
    """One ``*_pointwise.txt`` -> a dict (model, subset, mode, n, correct, wrong, ties, accuracy, ...)."""
    lines = _text_lines(path)
    model = _find(lines, r"Model:\s*(.+)$", path, "'Model:'")[0].group(1).strip()
    subset = _find(lines, r"Subset:\s*(.+)$", path, "'Subset:'")[0].group(1).strip()
    n = int(_find(lines, r"Comparisons:\s*(\d+)$", path, "'Comparisons:'")[0].group(1))
    win, lineno = _find(lines, rf"Chosen win rate:\s*{_NUM}%\s*\((\d+)/(\d+)\)", path, "'Chosen win rate:'")
    correct = int(win.group(2))
    if int(win.group(3)) != n:
        raise PRBError(f"{path}, line {lineno}: the win count's total differs from 'Comparisons'.")
    rest = _find(lines, r"Rejected wins:\s*(\d+)\s+Ties:\s*(\d+)", path, "'Rejected wins: ... Ties:'")[0]
    wrong, ties = int(rest.group(1)), int(rest.group(2))
    if correct + wrong + ties != n:
        raise PRBError(f"{path}, line {lineno}: chosen wins, rejected wins and ties do not add up to {n}.")

    def number(label: str) -> float:
        return float(_find(lines, rf"{re.escape(label)}\s*{_NUM}$", path, f"'{label}'")[0].group(1))

    return {
        "model": model, "subset": subset_name(subset), "mode": "pointwise", "n": n, "correct": correct,
        "wrong": wrong, "ties": ties, "accuracy": correct / n if n else float("nan"),
        "avg_chosen": number("Avg chosen score:"), "avg_rejected": number("Avg rejected score:"),
        "avg_diff": number("Avg diff (chosen - rejected):"),
    }


def read_pairwise_summary(path: PathLike) -> dict[str, Any]:
    """One ``*_pairwise.txt`` -> a dict (model, subset, mode, n, correct, accuracy, position accuracies,
    prediction counts, failed_parses; the reference counts a failed parse as "A")."""
    lines = _text_lines(path)
    model = _find(lines, r"Model:\s*(.+)$", path, "'Model:'")[0].group(1).strip()
    subset = _find(lines, r"Subset:\s*(.+)$", path, "'Subset:'")[0].group(1).strip()
    seed_m = [re.match(r"Seed:\s*(-?\d+)$", s.strip()) for s in lines]
    seed = next((int(m.group(1)) for m in seed_m if m), None)
    acc = _find(lines, rf"Overall Accuracy:\s*{_NUM}%\s*\((\d+)/(\d+)\)", path, "'Overall Accuracy:'")[0]
    correct, n = int(acc.group(2)), int(acc.group(3))
    pos_a = _find(lines, rf"Pos in A:\s*{_NUM}%\s*\((\d+) pairs\)", path, "'Pos in A:'")[0]
    pos_b = _find(lines, rf"Pos in B:\s*{_NUM}%\s*\((\d+) pairs\)", path, "'Pos in B:'")[0]
    pred_a = _find(lines, r"Predicted A:\s*(\d+)", path, "'Predicted A:'")[0]
    pred_b = _find(lines, r"Predicted B:\s*(\d+)", path, "'Predicted B:'")[0]
    failed = _find(lines, r"Failed parses:\s*(\d+)$", path, "'Failed parses:'")[0]
    return {
        "model": model, "subset": subset_name(subset), "mode": "pairwise", "n": n, "correct": correct,
        "wrong": n - correct, "ties": 0, "accuracy": correct / n if n else float("nan"), "seed": seed,
        "pos_in_a_accuracy": float(pos_a.group(1)) / 100, "pos_in_a_n": int(pos_a.group(2)),
        "pos_in_b_accuracy": float(pos_b.group(1)) / 100, "pos_in_b_n": int(pos_b.group(2)),
        "pred_a": int(pred_a.group(1)), "pred_b": int(pred_b.group(1)), "failed_parses": int(failed.group(1)),
    }


def read_accuracy_summaries(folder_or_files: PathLike | list[PathLike]) -> pd.DataFrame:
    """All ``*_pointwise.txt`` / ``*_pairwise.txt`` in a folder (or the given files), one row each.

    Columns model, subset, mode, n, correct, wrong, ties, accuracy, then the mode's own fields. The model
    is the file's ``Model:`` line (for pointwise files the folder name of the RM, for pairwise the full id).
    """
    if isinstance(folder_or_files, list):
        files = [Path(f) for f in folder_or_files]
    else:
        root = Path(folder_or_files)
        if not root.is_dir():
            raise PRBError(f"Folder {root} does not exist.")
        files = sorted(f for f in root.iterdir() if f.name.endswith(("_pointwise.txt", "_pairwise.txt")))
    rows = []
    for f in files:
        if f.name.endswith("_pointwise.txt"):
            rows.append(read_pointwise_summary(f))
        elif f.name.endswith("_pairwise.txt"):
            rows.append(read_pairwise_summary(f))
        else:
            raise PRBError(f"File {f} is neither a *_pointwise.txt nor a *_pairwise.txt summary.")
    base = ["model", "subset", "mode", "n", "correct", "wrong", "ties", "accuracy"]
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=base)
    return df[base + [c for c in df.columns if c not in base]]


# ------------------------------------------------------------------------------------------------- PPO

PPO_COLUMNS = ["rm", "subset", "score", "n", "trainer"]
DEFAULT_RL_TRAINER = "PPO"   # an outcome table that names no trainer: the paper's (and the reference scripts') PPO


def read_ppo_csv(path: PathLike) -> pd.DataFrame:
    """An RL outcome table ``rm,subset,score[,n[,trainer]]`` (header required) -> columns rm, subset, score, n,
    trainer.

    ``score`` is the downstream quality of the policy trained with ``rm`` on ``subset`` (any scale, higher
    is better); ``n`` (optional) the number of evaluated prompts, used as a weight when subsets are pooled;
    ``trainer`` (optional; ``prb ppo`` writes ``GRPO``) the RL algorithm that trained it: the pages name it,
    and a table without it is taken to be the paper's PPO.

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "ppo.csv"
    >>> _ = f.write_text("rm,subset,score\\nrm-a,Art,0.61\\n")
    >>> read_ppo_csv(f).to_dict("records")
    [{'rm': 'rm-a', 'subset': 'Art_and_Entertainment', 'score': 0.61, 'n': nan, 'trainer': 'PPO'}]
    """
    p = Path(path)
    if not p.is_file():
        raise PRBError(f"File {p} does not exist.")
    try:
        text = p.read_bytes().decode("utf-8")   # as is: csv reads the line ends itself
    except UnicodeDecodeError as exc:
        raise PRBError(f"{p} is not UTF-8 text (byte {exc.start}); expected a CSV table "
                       "rm,subset,score[,n[,trainer]].") from None
    with io.StringIO(text, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise PRBError(f"{p}, line 1: the file is empty; expected the header rm,subset,score[,n[,trainer]].")
        header = [h.strip() for h in header]
        if header not in (PPO_COLUMNS[:3], PPO_COLUMNS[:4], PPO_COLUMNS):
            raise PRBError(f"{p}, line 1: the header must be rm,subset,score, rm,subset,score,n or "
                           "rm,subset,score,n,trainer.")
        rows, seen = [], set()
        for row in reader:
            lineno = reader.line_num
            if not any(c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise PRBError(f"{p}, line {lineno}: expected {len(header)} fields, found {len(row)}.")
            rm, subset, score = (c.strip() for c in row[:3])
            if not rm:
                raise PRBError(f"{p}, line {lineno}: field 'rm' is empty.")
            try:
                value = float(score)
            except ValueError:
                raise PRBError(f"{p}, line {lineno}: field 'score' is not a number ({score!r}).") from None
            if not math.isfinite(value):
                raise PRBError(f"{p}, line {lineno}: field 'score' is not finite.")
            n = float("nan")
            if len(header) >= 4 and row[3].strip():
                try:
                    n = int(row[3])
                except ValueError:
                    raise PRBError(f"{p}, line {lineno}: field 'n' is not a whole number ({row[3]!r}).") from None
                if n <= 0:
                    raise PRBError(f"{p}, line {lineno}: field 'n' must be positive.")
            subset = subset_name(subset) if subset else "all"
            if (rm, subset) in seen:
                raise PRBError(f"{p}, line {lineno}: rm {rm!r} and subset {subset!r} appear twice.")
            seen.add((rm, subset))
            trainer = (row[4].strip() if len(header) == 5 else "") or DEFAULT_RL_TRAINER
            rows.append({"rm": rm, "subset": subset, "score": value, "n": n, "trainer": trainer})
    if not rows:
        raise PRBError(f"{p}: no data rows below the header.")
    return pd.DataFrame(rows, columns=PPO_COLUMNS)


def read_ppo_evaluation(path: PathLike, *, rm: str | None = None) -> pd.DataFrame:
    """``{subset}_{tag}_evaluation.jsonl`` -> per-prompt rows: rm, subset, id, question, aspects, response,
    scores, average_score, quality, parse_suspect. ``rm`` defaults to the file's tag."""
    match = _subset_from_name(path, r"([A-Za-z]+?)(?:_(.+))?_evaluation\.jsonl")
    subset, tag = subset_name(match.group(1)), match.group(2) or ""
    df = pd.DataFrame(_judge_rows(path, "answer"), columns=JUDGE_COLUMNS)
    df.insert(0, "subset", subset)
    df.insert(0, "rm", rm or tag or "policy")
    return df


def read_ppo_summary_txt(path: PathLike, *, rm: str | None = None) -> dict[str, Any]:
    """``{subset}_{tag}_evaluation.txt`` -> a dict rm, subset, score (mean quality, 0-1), n, judge."""
    lines = _text_lines(path)
    match = _subset_from_name(path, r"([A-Za-z]+?)(?:_(.+))?_evaluation\.txt")
    n = int(_find(lines, r"Total entries:\s*(\d+)$", path, "'Total entries:'")[0].group(1))
    mean = float(_find(lines, rf"Average score:\s*{_NUM}$", path, "'Average score:'")[0].group(1))
    subset_line = [re.match(r"subset:\s*(.+)$", s.strip()) for s in lines]
    subset = next((m.group(1) for m in subset_line if m), match.group(1))
    judge_line = [re.match(r"judge:\s*(.+)$", s.strip()) for s in lines]
    judge = next((m.group(1) for m in judge_line if m), None)
    return {"rm": rm or match.group(2) or "policy", "subset": subset_name(subset), "score": mean / 2.0,
            "n": n, "judge": judge}


def read_ppo_results(folder: PathLike, *, tags: Mapping[str, str] | None = None) -> pd.DataFrame:
    """PPO outcome per (RM, subset) from a reference ``PPO/result`` folder -> columns rm, subset, score, n.

    Uses the per-prompt ``*_evaluation.jsonl`` when present (score = mean quality on 0-1, n = prompts),
    else the ``*_evaluation.txt`` summary. ``tags`` maps a file tag to the RM's name.
    """
    root = Path(folder)
    if not root.is_dir():
        raise PRBError(f"Folder {root} does not exist.")
    tags = dict(tags or {})
    rows = []
    done = set()
    for f in sorted(root.glob("*_evaluation.jsonl")):
        df = read_ppo_evaluation(f)
        rm = tags.get(df["rm"].iloc[0], df["rm"].iloc[0]) if not df.empty else None
        if rm is None:
            continue
        rows.append({"rm": rm, "subset": df["subset"].iloc[0], "score": float(np.mean(df["quality"])),
                     "n": len(df)})
        done.add(f.with_suffix(".txt").name)
    for f in sorted(root.glob("*_evaluation.txt")):
        if f.name in done:
            continue
        rec = read_ppo_summary_txt(f)
        rows.append({"rm": tags.get(rec["rm"], rec["rm"]), "subset": rec["subset"], "score": rec["score"],
                     "n": rec["n"]})
    if not rows:
        raise PRBError(f"Folder {root} holds no *_evaluation.jsonl or *_evaluation.txt files.")
    return pd.DataFrame(rows, columns=PPO_COLUMNS)
