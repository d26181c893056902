"""Shared fixtures: tiny random models saved as folders, and the report on the sample (each built once per
test session)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never reach the hub
import tiny_models


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory):
    """Folder of a tiny random LlamaForCausalLM with a chat template (specs judge:/implicit:<folder>)."""
    return tiny_models.build_causal_lm(tmp_path_factory.mktemp("tiny_lm"))


@pytest.fixture(scope="session")
def tiny_lm_no_template_dir(tmp_path_factory):
    """The tiny causal LM with a tokenizer that has no chat template (the prompts fallback)."""
    return tiny_models.build_causal_lm(tmp_path_factory.mktemp("tiny_lm_plain"), chat_template=False)


@pytest.fixture(scope="session")
def tiny_classifier_dir(tmp_path_factory):
    """Folder of a tiny random LlamaForSequenceClassification, one logit (spec classifier:<folder>)."""
    return tiny_models.build_sequence_classifier(tmp_path_factory.mktemp("tiny_cls"))


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    """Folder of a tiny random BertModel (specs embedding:/classifier:<folder>)."""
    return tiny_models.build_bert(tmp_path_factory.mktemp("tiny_bert"))


# ------------------------------------------------------------------ the report, built once per session

REPORT_MODELS = ["length", "lexical"]
REPORT_PROFILES = ["none", "top3"]
REPORT_PROBES = ["swap", "shuffle", "label-swap"]   # the probes of top3 the session's report shows on page 05
REPORT_PARAMETERS = {  # per-notebook parameters that keep the run short and reach every section
    "00_workshop_personalization": {"quiz_answers": ["A", "B", "A"]},
    "01_pair_inspection": {"max_pairs": 2},
    "03_downstream_correlation": {"n_boot": 200},
    "05_reading_the_user": {"profiles": ["top3", *(f"top3+{p}" for p in REPORT_PROBES)]},
}
#: The store's resampling plan of the session's report: 200 resamples keep it short, and every page, the index,
#: prb summarize and the export read it from the store (no page pins its own count).
REPORT_PLAN = {"unit": "question", "seed": 0, "n_boot": 200, "level": 0.95}
PPO_CSV = "rm,subset,score,n\nlength,Art,0.4,10\nlexical,Art,0.6,10\nlexical,Society,0.5,30\n"


@dataclass
class SampleReport:
    """Where the session's report lies: ``out`` (pages, executed notebooks, ``*.numbers.json``), the store
    ``results`` (with a BoN frame in ``results/bon``), the PPO CSV, and the error of a failed notebook."""

    root: Path
    out: Path
    results: Path
    ppo: Path
    error: str | None


def write_bon_frame(folder: Path) -> Path:
    """A small tidy BoN frame as the BoN pipeline writes it (two RMs, 4 questions x 8 samples)."""
    rng = np.random.default_rng(0)
    quality = {(q, i): float(rng.uniform()) for q in range(1, 5) for i in range(8)}  # one judgement per sample
    rows = [{"model": model, "subset": "Art_and_Entertainment", "id": f"art-00{q}", "sample_idx": i,
             "rm_score": float(rng.normal()), "quality": quality[q, i], "judge": "proxy:minilm",
             "judge_proxy": True}
            for model in REPORT_MODELS for q in range(1, 5) for i in range(8)]
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(folder / "bon_frame.parquet", index=False)
    return folder


@pytest.fixture(scope="session")
def sample_report(tmp_path_factory) -> SampleReport:
    """Every notebook executed once per session on the sample with the two baselines.

    The sample is copied as a folder of ``.jsonl`` files and both it and the store are given by relative
    paths from the working folder (the notebooks run in the report folder, so this also checks that the
    report hands them absolute paths). Scoring goes through ``prb score``. Tests that use this fixture are
    marked ``notebooks`` and ``slow`` (see :func:`pytest_collection_modifyitems`).
    """
    from prb_utils.cli import main
    from prb_utils.data import SAMPLE_DIR
    from prb_utils.errors import PRBError
    from prb_utils.notebook.report import build_report

    root = tmp_path_factory.mktemp("sample_report")
    shutil.copytree(SAMPLE_DIR, root / "bench")
    ppo = root / "ppo.csv"
    ppo.write_text(PPO_CSV, encoding="utf-8")
    parameters = {**REPORT_PARAMETERS, "03_downstream_correlation": {
        **REPORT_PARAMETERS["03_downstream_correlation"], "ppo": str(ppo)}}
    error = None
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        specs = [arg for model in REPORT_MODELS for arg in ("--model", model)]
        conditions = [arg for profile in REPORT_PROFILES for arg in ("--profile", profile)]
        assert main(["score", "--data", "bench", *specs, *conditions, "--out", "results", "--no-progress"]) == 0
        assert main(["probe", "--data", "bench", *specs, *(a for p in REPORT_PROBES for a in ("--probe", p)),
                     "--out", "results", "--no-progress"]) == 0   # page 05
        write_bon_frame(root / "results" / "bon")
        (root / "results" / "resampling.json").write_text(json.dumps(REPORT_PLAN))
        try:
            build_report(data="bench", results="results", out="reports", models=REPORT_MODELS,
                         profiles=REPORT_PROFILES, progress=False, parameters=parameters)
        except PRBError as exc:
            error = str(exc)
    return SampleReport(root, root / "reports", root / "results", ppo, error)


#: The test files whose tests take longest, run first when the suite runs on several workers (``make test``:
#: pytest-xdist, ``--dist loadgroup``), so no long file starts last and runs alone; measured with ``--durations``.
LONGEST_FIRST = ("tests/test_vllm_engine.py", "sample_report", "tests/test_vllm_classifier.py", "tests/test_docs.py",
                 "tests/test_report.py", "tests/test_wheel.py", "tests/test_board.py", "tests/test_any_data.py")
SAMPLE_REPORT_GROUP = "sample_report"


def worker_group(item: pytest.Item) -> str:
    """The worker group of a test under ``--dist loadgroup``: its file, so a file's module-scoped fixtures (a vLLM
    server, a scored store) are built once; every test of the session's report in one group, so it is built once."""
    if "sample_report" in getattr(item, "fixturenames", ()):
        return SAMPLE_REPORT_GROUP
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)   # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the session's report executes notebooks: mark it ``notebooks`` and ``slow``. Every test
    gets its worker group (:func:`worker_group`), and the longest groups go first (:data:`LONGEST_FIRST`)."""
    for item in items:
        if "sample_report" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.notebooks)
            item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.xdist_group(worker_group(item)))
    rank = {group: i for i, group in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(worker_group(item), len(rank)))   # stable: the rest keep their order


@pytest.hookimpl(optionalhook=True)   # a pytest-xdist hook, run by the controller
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    """Under ``--dist loadgroup`` pytest-xdist tells the controller a test's group by a suffix of its node id
    (``...::test@group``); with a pytest where that suffix does not stick (pytest 9.2, pytest-xdist issue #1386) it
    spreads a file's tests over the workers and every module fixture (a vLLM server, a scored store, the report) is
    built on each. Stop the run in one sentence rather than pay that silently."""
    if node.config.option.dist == "loadgroup" and ids and not any("@" in nodeid for nodeid in ids):
        pytest.exit(f"pytest-xdist cannot group the tests under --dist loadgroup with pytest {pytest.__version__} "
                    "(pytest-xdist issue #1386): install the pytest that constraints.txt pins.", returncode=4)
