"""Shared fixtures: tiny random models saved as folders (built once per test session)."""

from __future__ import annotations

import os

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
