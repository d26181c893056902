"""``classifier:`` through vLLM's pooling runner against a REAL vLLM server (``.venv-vllm``, ``make vllm``).

The classifier is SmolLM2 with a seeded one-logit score head, saved in code as a
``LlamaForSequenceClassification`` folder; both engines score the same sample pairs in float32.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr
from vllm_proxy import EAGER

from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.models.aliases import smollm2_dir
from prb_utils.models.vllm_server import LaunchOptions, VLLMServer, find_python
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
        python = find_python()
    except PRBError as exc:
        pytest.fail(f"{exc} These tests need the vLLM environment: run `make vllm`.")
    server = VLLMServer(str(classifier_dir), str(classifier_dir),
                        LaunchOptions(dtype="float32", device="cpu", runner="pooling", engine_args=EAGER), python=python)
    server.start(progress=False)
    yield server
    server.stop()


def test_classifier_scores_match_hf(classifier_server, classifier_dir, tmp_path):
    data = load_benchmark("sample", limit=6)
    spec = f"classifier:{classifier_dir}"
    common = dict(out=tmp_path, device="cpu", dtype="float32", progress=False)
    vllm = score_benchmark(data, [spec], ["none"], engine="vllm", engine_url=classifier_server.url, **common)
    hf = score_benchmark(data, [spec], ["none"], **common)
    assert list(vllm.columns) == list(hf.columns) and len(vllm) == len(hf) == len(data)
    h = np.concatenate([hf["score_chosen"], hf["score_rejected"]])
    v = np.concatenate([vllm["score_chosen"], vllm["score_rejected"]])
    assert spearmanr(h, v).statistic >= 0.99
    assert np.max(np.abs(h - v)) < 1e-3 * max(1.0, np.max(np.abs(h)))
    assert (hf["outcome"].to_numpy() == vllm["outcome"].to_numpy()).all()
