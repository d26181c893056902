"""How many intervals does one number have across a report? One, everywhere, is the promise.

Reads a report folder (``prb report --out``) and its store (``--results``) and collects every interval printed for
an accuracy or a lift, and every adjusted p of a lift or a comparison of two models, keyed by (model, profile
condition, statistic[, subset]), from every surface that shows one: the pages' ``*.numbers.json`` (01-05), the index
(its leaderboard), ``prb summarize --format json`` (with ``--compare profile`` and ``--compare model``) and the Every
Eval Ever export. Numbers are compared as printed (3 decimals). One machine-readable line at the end:

    .venv/bin/python bench/interval_census.py --report reports --results results
    numbers=... surfaces=... max_distinct=1 numbers_with_several=0
"""

from __future__ import annotations

import argparse
import contextlib
import html
import io
import json
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from prb_utils.cli import main as prb

#: Record keys that make a row another statistic than a model's accuracy in a condition (a breakdown's bins).
BREAKDOWNS = ("category", "aspects_bin", "theme", "inferability_bin", "rubric_inferable", "length_bin", "margin_bin",
              "statistic", "order", "probe", "retriever_b", "baseline", "reference", "level_a")
ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.S)
#: a leaderboard block of the index (one per condition) and its cells, named by their data-label
BLOCK = re.compile(r'<section class="prb-board-condition" data-condition="([^"]*)">(.*?)</section>', re.S)
LABELLED = re.compile(r'<td data-label="([^"]*)"[^>]*>(.*?)</td>', re.S)
INTERVAL = re.compile(r"^([-+]?\d\.\d{3}) \[([-+]?\d\.\d{3}), ([-+]?\d\.\d{3})\]$")


def printed(low: Any, high: Any) -> str | None:
    """An interval as the pages print it (3 decimals), None when undefined."""
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return None
    return f"[{float(low):+.3f}, {float(high):+.3f}]".replace("+", "")


def _records(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for inner in value.values():
            yield from _records(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _records(inner)


def _labelled(model: Any, retriever: Any) -> Any:
    """A model's name with its retriever where it is not the default (``lexical [random]``), as ``prb summarize``
    labels a second retriever's job of the same spec, so two jobs never share a key."""
    if isinstance(model, str) and isinstance(retriever, str) and retriever not in ("", "bm25") and "[" not in model:
        return f"{model} [{retriever}]"
    return model


def _p_values(record: dict[str, Any], surface: str) -> Iterator[dict[str, Any]]:
    """The adjusted p of a lift (``lift`` with ``p_holm``, or a ``--compare profile`` row) or of a comparison of two
    models (``level_a``/``level_b`` of ``--compare model`` or of page 02's rank families)."""
    p = record.get("p_holm")
    if p is None or pd.isna(p) or not isinstance(record.get("profile", record.get("level_b")), str):
        return
    if "lift" in record or ("level_b" in record and record.get("level_a") == "none"):   # a lift
        model = record.get("job_label") or record.get("model")
        condition = record.get("profile") if "lift" in record else record["level_b"]
        yield {"model": model, "profile": condition, "subset": "", "surface": surface, "statistic": "lift p_holm",
               "interval": f"{float(p):.3f}"}
    elif "level_a" in record and "profile" in record and "subset" not in record:   # two models, one condition
        pair = " vs ".join(sorted([str(record["level_a"]), str(record["level_b"])]))
        yield {"model": pair, "profile": record["profile"], "subset": "", "surface": surface,
               "statistic": "comparison p_holm", "interval": f"{float(p):.3f}"}


def _from_record(record: dict[str, Any], surface: str, profile: str | None) -> Iterator[dict[str, Any]]:
    yield from _p_values(record, surface)
    model = _labelled(record.get("job_label") or record.get("model"), record.get("retriever"))
    condition = record.get("profile") or profile
    if not isinstance(model, str) or not isinstance(condition, str) or any(k in record for k in BREAKDOWNS):
        return
    subset = record.get("subset") if isinstance(record.get("subset"), str) else ""
    key = {"model": model, "profile": condition, "subset": subset, "surface": surface}
    if "accuracy" in record and "ci_low" in record and "lift" not in record:
        shown = printed(record["ci_low"], record["ci_high"])
        if shown:
            yield {**key, "statistic": "accuracy", "interval": shown}
    if "lift" in record:
        low, high = (record.get("lift_low"), record.get("lift_high")) if "lift_low" in record else (
            record.get("ci_low"), record.get("ci_high"))
        shown = printed(low, high)
        if shown:
            yield {**key, "statistic": "lift", "interval": shown}
        if "lift_low" in record and "ci_low" in record:
            shown = printed(record["ci_low"], record["ci_high"])
            if shown:
                yield {**key, "statistic": "accuracy", "interval": shown}


def from_pages(report: Path) -> list[dict[str, Any]]:
    """Every accuracy and lift interval of the pages' ``numbers.json`` files."""
    rows = []
    for path in sorted(report.glob("*.numbers.json")):
        content = json.loads(path.read_text(encoding="utf-8"))
        params = content.get("params", {})
        profile = params.get("benchmark_profile")   # page 03's accuracies are of this condition
        for record in _records(content.get("numbers", {})):
            rows.extend(_from_record(record, path.name.split(".")[0], profile))
    return rows


def from_index(report: Path) -> list[dict[str, Any]]:
    """The index's leaderboard (one block per condition, ``data-condition``): model, accuracy [CI] and lift [CI] per
    row, read by each cell's ``data-label``."""
    text = (report / "index.html").read_text(encoding="utf-8")
    rows = []
    for condition, block in BLOCK.findall(text):
        for row in ROW.findall(block):
            cells = {label: html.unescape(re.sub(r"<[^>]+>", "", body)).strip() for label, body in LABELLED.findall(row)}
            if "model" not in cells:
                continue
            key = {"model": _row_model(row), "profile": html.unescape(condition), "subset": "", "surface": "index"}
            lift = next((v for k, v in cells.items() if k.startswith("lift over")), "")
            for statistic, cell in (("accuracy", cells.get("accuracy", "")), ("lift", lift)):
                found = INTERVAL.match(cell)
                if found:
                    rows.append({**key, "statistic": statistic, "interval": printed(found[2], found[3])})
    return rows


def _row_model(row: str) -> str:
    """The model's name of a leaderboard row: its model cell's text before the links to its sections."""
    cell = next(body for label, body in LABELLED.findall(row) if label == "model")
    return html.unescape(re.sub(r"<[^>]+>", "", cell.split('<span class="links">', 1)[0])).strip()


def _quiet(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = prb(argv)
    if code:
        raise SystemExit(f"prb {' '.join(argv)} exited {code}")
    return out.getvalue()


def from_summarize(results: Path) -> list[dict[str, Any]]:
    """``prb summarize --format json`` (by model and profile, and by subset)."""
    rows = []
    for by in ("model,profile", "model,profile,subset"):
        for record in json.loads(_quiet(["summarize", "--results", str(results), "--by", by, "--format", "json"])):
            rows.extend(_from_record(record, "prb summarize", None))
    for compared in ("profile", "model"):
        document = json.loads(_quiet(["summarize", "--results", str(results), "--compare", compared,
                                      "--format", "json"]))
        for record in document["comparisons"]:
            rows.extend(_p_values(record, "prb summarize"))
    return rows


def from_export(results: Path) -> list[dict[str, Any]]:
    """The Every Eval Ever export: each job's overall and per-subset accuracy interval (named by the model's
    name in the file: a store with several jobs of one spec under one condition is not told apart here)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        _quiet(["export", "--format", "every_eval_ever", "--results", str(results), "--out", tmp])
        for path in Path(tmp).rglob("*.json"):
            content = json.loads(path.read_text(encoding="utf-8"))
            for result in content.get("evaluation_results", []):
                details = result["metric_config"].get("additional_details", {})
                facts = content["model_info"]["additional_details"]
                label = _labelled(facts.get("prb_spec") or content["model_info"]["name"], facts.get("option_retriever"))
                condition = details.get("profile") or result["evaluation_name"].split("/")[1].split(" ")[0]
                bounds = result["score_details"]["uncertainty"]["confidence_interval"]
                subset = result["evaluation_name"].split("/")[2] if result["evaluation_name"].count("/") > 1 else ""
                rows.append({"model": label, "profile": condition, "subset": subset, "surface": "export",
                             "statistic": "accuracy", "interval": printed(bounds["lower"], bounds["upper"])})
    return rows


def census(report: Path, results: Path) -> pd.DataFrame:
    """One row per (model, profile, statistic, subset, surface) interval found."""
    rows = [*from_pages(report), *from_index(report), *from_summarize(results), *from_export(results)]
    frame = pd.DataFrame(rows, columns=["model", "profile", "subset", "statistic", "surface", "interval"])
    return frame.drop_duplicates().reset_index(drop=True)


def distinct(frame: pd.DataFrame) -> pd.DataFrame:
    """Per number (model, profile, statistic, subset): its surfaces and how many distinct intervals they print."""
    return (frame.groupby(["model", "profile", "statistic", "subset"])
            .agg(surfaces=("surface", lambda s: ", ".join(sorted(set(s)))), distinct=("interval", "nunique"),
                 intervals=("interval", lambda s: " ".join(sorted(set(s)))))
            .reset_index())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", default="reports", help="the report folder (prb report --out)")
    parser.add_argument("--results", default="results", help="its store (prb report --results)")
    args = parser.parse_args(argv)
    frame = census(Path(args.report), Path(args.results))
    table = distinct(frame)
    several = table[table["distinct"] > 1]
    with pd.option_context("display.width", 200, "display.max_colwidth", 80, "display.max_rows", 500):
        print(table.to_string(index=False))
    print(f"numbers={len(table)} surfaces={frame['surface'].nunique()} max_distinct={int(table['distinct'].max())} "
          f"numbers_with_several={len(several)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
