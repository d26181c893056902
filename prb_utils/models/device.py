"""Device, dtype and CPU-thread choice for the model adapters.

``auto`` picks CUDA when present (bfloat16 where the GPU supports it, else float16) and the CPU otherwise
(float32). Several GPUs with ``device="auto"`` spread a model over them (``device_map="auto"``), except under
``torchrun``, where each rank runs its own copy on ``cuda:LOCAL_RANK`` (:mod:`prb_utils.distributed`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from prb_utils.distributed import cuda_device, world
from prb_utils.errors import PRBError
from prb_utils.schema import ATTENTIONS

DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
          "float16": "float16", "fp16": "float16"}


@dataclass(frozen=True)
class Placement:
    """Where a model runs: ``device`` for inputs, ``device_map`` for ``from_pretrained``, torch ``dtype``."""

    device: str
    dtype: Any
    device_map: Any
    attn_implementation: str | None


def cpu_threads() -> int:
    """Threads torch should use: ``OMP_NUM_THREADS`` when set, else the CPUs this process may run on."""
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def configure_threads() -> int:
    """Set torch's intra-op threads to :func:`cpu_threads` (never more than the CPUs we may use)."""
    import torch

    n = cpu_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


def resolve_placement(device: str = "auto", dtype: str = "auto", attention: str = ATTENTIONS[0]) -> Placement:
    """Turn the user's ``device``, ``dtype`` and ``attention`` options into a :class:`Placement`.

    >>> p = resolve_placement("cpu", "auto")
    >>> p.device, str(p.dtype)
    ('cpu', 'torch.float32')
    """
    import torch

    device = (device or "auto").strip().lower()
    cuda = torch.cuda.is_available()
    current = world()
    device_map: Any = None
    if device == "auto":
        device = "cuda" if cuda else "cpu"
        if cuda and torch.cuda.device_count() > 1 and not current.distributed:
            device_map = "auto"
    elif device.startswith("cuda"):
        if not cuda:
            raise PRBError(f"Device '{device}' was asked for but no CUDA GPU is available here; use --device cpu.")
    elif device not in ("cpu", "mps"):
        raise PRBError(f"Unknown device '{device}'; use auto, cpu or cuda.")
    if device == "cuda" and current.distributed:
        device = cuda_device(current)   # under torchrun each rank has a GPU of its own
    if device_map is None:
        device_map = device

    name = (dtype or "auto").strip().lower()
    if name == "auto":
        if device.startswith("cuda"):
            name = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
        else:
            name = "float32"
    elif name not in DTYPES:
        raise PRBError(f"Unknown dtype '{dtype}'; use auto, float32, bfloat16 or float16.")
    torch_dtype = getattr(torch, DTYPES.get(name, name))
    if attention not in ATTENTIONS:
        raise PRBError(f"Unknown attention implementation '{attention}'; use {' or '.join(ATTENTIONS)}.")
    return Placement(device=device, dtype=torch_dtype, device_map=device_map, attn_implementation=attention)


def is_oom(exc: BaseException) -> bool:
    """True for a CUDA out-of-memory error (the only kind the batcher recovers from)."""
    import torch

    return isinstance(exc, torch.cuda.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "CUDA out of memory" in str(exc)
    )


def free_cuda_memory() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
