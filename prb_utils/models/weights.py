"""The weights a model loads, in bytes, and how long loading them took: ``prb plan``'s load time and a job's record.

A model's weights are its checkpoint files (``*.safetensors``, else ``*.bin``/``*.pt``: the files transformers
would read) in its folder, or in the hub's local cache for a hub id (never downloaded here). Loading time is
measured where a job loads its model (``load_s`` beside ``weights_bytes`` in the job's run metadata), so the read
rate a plan needs, ``weights_bytes / load_s``, comes from a run on the same machine.

>>> import tempfile
>>> folder = Path(tempfile.mkdtemp())
>>> _ = (folder / "model.safetensors").write_bytes(b"0" * 2048)
>>> weights_bytes(str(folder)), load_seconds(2048, 1e-6)
(2048, 2.048)
"""

from __future__ import annotations

import math
from pathlib import Path

#: Checkpoint files, in transformers' order of preference: the first pattern that finds files is what loads.
WEIGHT_PATTERNS = (("*.safetensors",), ("*.bin", "*.pt", "*.pth"))


def _folder(source: str) -> Path | None:
    """``source``'s folder: itself, or a hub id's snapshot in the local cache (None when it is not cached)."""
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(source, local_files_only=True))
    except Exception:  # not cached, not a repo id: no files to count
        return None


def weights_bytes(source: str) -> int | None:
    """The bytes of the checkpoint files a model at ``source`` (a folder or a cached hub id) loads; None where it
    has none here (a folder with only a tokenizer and ``config.json``, a hub id not in the cache)."""
    folder = _folder(source)
    if folder is None:
        return None
    for patterns in WEIGHT_PATTERNS:
        files = {f for pattern in patterns for f in folder.rglob(pattern) if f.is_file()}
        if files:
            return sum(f.stat().st_size for f in files)
    return None


def load_seconds(n_bytes: int | None, rate_gb_s: float | None) -> float:
    """Seconds to read ``n_bytes`` of weights at ``rate_gb_s`` GB/s (10^9 bytes); NaN without either.

    >>> load_seconds(3e9, 1.5), load_seconds(None, 1.5)
    (2.0, nan)
    """
    if not n_bytes or not rate_gb_s:
        return math.nan
    return n_bytes / (rate_gb_s * 1e9)
