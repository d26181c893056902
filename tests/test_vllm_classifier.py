"""``classifier:`` through vLLM's pooling runner against a REAL vLLM server (``.venv-vllm``, ``make vllm``).

The classifier is SmolLM2 with a seeded one-logit score head, saved in code as a
``LlamaForSequenceClassification`` folder; both engines score the same sample pairs in float32. A proxy that
drops ``use_activation`` from the requests stands for a server that ignores it (the real server then applies
its sigmoid): prb must refuse its scores.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import spearmanr
from vllm_proxy import EAGER_ENGINE, CountingProxy

from prb_utils.cli import main
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.models import EngineConfig, ModelOptions
from prb_utils.models.aliases import smollm2_dir
from prb_utils.models.engines import dialect_of
from prb_utils.models.serve import adapters as served
from prb_utils.models.serve.launcher import LaunchOptions, Server
from prb_utils.scoring import score_benchmark

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = tmp_path_factory.mktemp("smollm2_cls")
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(str(smollm2_dir()), num_labels=1, dtype=torch.float32)
    with torch.no_grad():
        model.score.weight.normal_(0, 0.05)
    model.config.pad_token_id = model.config.pad_token_id or 2
    model.save_pretrained(str(folder))
    AutoTokenizer.from_pretrained(str(smollm2_dir())).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def classifier_server(classifier_dir):
    try:
        python = dialect_of("vllm").find_python()
    except PRBError as exc:
        pytest.fail(f"{exc} These tests need the vLLM environment: run `make vllm`.")
    server = Server(str(classifier_dir), str(classifier_dir),
                        LaunchOptions(dtype="float32", device="cpu", runner="pooling", engine=EAGER_ENGINE), python=python)
    server.start(progress=False)
    yield server
    server.stop()


def test_classifier_scores_match_hf(classifier_server, classifier_dir, tmp_path):
    data = load_benchmark("sample", limit=6)
    spec = f"classifier:{classifier_dir}"
    options = ModelOptions(device="cpu", dtype="float32")
    vllm = score_benchmark(data, [spec], ["none"], out=tmp_path, progress=False,
                           options=replace(options, engine=EngineConfig("vllm", urls=classifier_server.url)))
    hf = score_benchmark(data, [spec], ["none"], out=tmp_path, options=options, progress=False)
    assert list(vllm.columns) == list(hf.columns) and len(vllm) == len(hf) == len(data)
    h = np.concatenate([hf["score_chosen"], hf["score_rejected"]])
    v = np.concatenate([vllm["score_chosen"], vllm["score_rejected"]])
    assert spearmanr(h, v).statistic >= 0.99
    assert np.max(np.abs(h - v)) < 1e-3 * max(1.0, np.max(np.abs(h)))
    assert (hf["outcome"].to_numpy() == vllm["outcome"].to_numpy()).all()
    meta = next(json.loads(p.read_text()) for p in (tmp_path / "jobs").glob("*/job.json")
                if json.loads(p.read_text())["options"].get("engine") == "vllm")
    check = meta["run"]["engine_classifier_check"]
    assert check["method"] == "hf" and check["raw_logits"] and check["max_abs_difference"] < 1e-3
    assert check["use_activation_sent"] is False and check["n_inputs"] == 6


def _drop_use_activation(path: str, body: bytes) -> bytes:
    """A server that ignores ``use_activation`` (as one that predates it): the real server's default applies."""
    found = json.loads(body)
    found.pop("use_activation", None)
    return json.dumps(found).encode()


def _score(capsys, url: str, classifier_dir, tmp_path) -> tuple[int, str]:
    code = main(["score", "--data", "sample", "--limit", "1", "--model", f"classifier:{classifier_dir}",
                 "--engine", "vllm", "--engine-url", url, "--device", "cpu", "--dtype", "float32",
                 "--out", str(tmp_path / "store"), "--no-progress"])
    return code, capsys.readouterr().err.strip()


@pytest.mark.parametrize("hf_loadable", [True, False])
def test_a_server_that_applies_its_activation_is_refused(classifier_server, classifier_dir, tmp_path, capsys,
                                                        monkeypatch, hf_loadable):
    """Before: the sigmoid's values were stored as the model's scores, exit 0. With the HF engine loadable here,
    the scores are compared with it; otherwise (weights over the limit) the server's answers with and without
    the activation are compared."""
    if not hf_loadable:
        monkeypatch.setattr(served, "HF_CHECK_MAX_BYTES", 0)
    proxy = CountingProxy(classifier_server.url, edit_request=_drop_use_activation)
    try:
        code, err = _score(capsys, proxy.url, classifier_dir, tmp_path)
    finally:
        proxy.close()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("prb: ") and "does not return raw logits" in err, err
    assert ("HF engine" in err) == hf_loadable
    assert not list((tmp_path / "store").glob("jobs/*/part-*.parquet"))   # no score of it was stored


def test_without_the_hf_check_the_activation_probe_passes_a_raw_server(classifier_server, classifier_dir, tmp_path,
                                                                       capsys, monkeypatch):
    monkeypatch.setattr(served, "HF_CHECK_MAX_BYTES", 0)
    code, err = _score(capsys, classifier_server.url, classifier_dir, tmp_path)
    assert code == 0, err
    (job,) = (tmp_path / "store" / "jobs").glob("*/job.json")
    check = json.loads(job.read_text())["run"]["engine_classifier_check"]
    assert check["method"] == "activation" and check["use_activation_honoured"] and check["raw_logits"]
    assert "too large" in check["hf_check_skipped"]
    assert "saturates" not in err   # 6 raw logits: no ties at the extremes, no warning
    assert json.loads(job.read_text())["run"]["score_extreme_ties"] == 0.0


def test_the_server_logs_its_pooler_settings(classifier_server):
    """What prb records as ``engine_pooler_config`` for a server it starts."""
    found = classifier_server.logged_config("pooler_config")
    assert found is not None and found.startswith("PoolerConfig(") and "use_activation=" in found


@pytest.fixture(scope="module")
def saturating_dir(tmp_path_factory):
    """A two-class head so steep that the last class's softmax probability is exactly 1.0 on most inputs."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    folder = tmp_path_factory.mktemp("smollm2_saturating")
    tokenizer = AutoTokenizer.from_pretrained(str(smollm2_dir()))
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(str(smollm2_dir()), num_labels=2, dtype=torch.float32)
    model.config.pad_token_id = model.config.pad_token_id or 2
    with torch.no_grad():
        row = torch.randn(model.score.weight.shape[1]) * 10
        model.score.weight.copy_(torch.stack([-row, row]))
        logits = model(**tokenizer("Which answer is better?", return_tensors="pt")).logits[0]
        if logits[1] < logits[0]:
            model.score.weight.mul_(-1)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def test_a_saturating_classifier_is_flagged_in_one_line(saturating_dir, tmp_path, capsys):
    """Its scores tie at 1.0: a one-line warning and the share in the run metadata (before: nothing said)."""
    server = Server(str(saturating_dir), str(saturating_dir),
                        LaunchOptions(dtype="float32", device="cpu", runner="pooling", engine=EAGER_ENGINE),
                        python=dialect_of("vllm").find_python())
    server.start(progress=False)
    try:
        code = main(["score", "--data", "sample", "--limit", "4", "--model", f"classifier:{saturating_dir}",
                     "--engine", "vllm", "--engine-url", server.url, "--device", "cpu", "--dtype", "float32",
                     "--out", str(tmp_path / "store"), "--no-progress"])
    finally:
        server.stop()
    err = capsys.readouterr().err
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "saturates" in line]
    assert len(warnings) == 1 and warnings[0].startswith("prb: warning: "), err
    (job,) = (tmp_path / "store" / "jobs").glob("*/job.json")
    assert json.loads(job.read_text())["run"]["score_extreme_ties"] >= served.SATURATION_SHARE
