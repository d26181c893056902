"""Data-parallel scoring under ``torchrun``: the world from the environment, the process group, its barrier,
and each rank's share of a job's pairs.

``torchrun --nproc-per-node N -m prb_utils score ...`` starts N processes with ``WORLD_SIZE``, ``RANK`` and
``LOCAL_RANK`` set; :func:`setup` puts each rank on its own device (``cuda:LOCAL_RANK`` when CUDA is there,
else the CPU) and joins them into one process group on the ``gloo`` backend: the ranks only exchange pair keys
and meet at barriers (no tensor ever crosses), which gloo carries on CPUs and GPU machines alike, with no
communicator memory on the GPUs. Without those variables :func:`world` is the single process (rank 0 of 1) and
nothing here touches torch.distributed.

>>> World(rank=1, size=2, local_rank=1).share(["a", "b", "c"])
['b']
"""

from __future__ import annotations

import atexit
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from prb_utils.errors import PRBError

Item = TypeVar("Item")

#: How long a rank waits for the others (the slowest share, a job lock held by another run, a model loading)
#: before torch.distributed gives up.
WAIT_FOR_RANKS = timedelta(hours=24)
#: Test hook: the rank named here kills itself (SIGKILL) right after its first part file is in the store.
KILL_RANK_ENV = "PRB_TEST_KILL_RANK"


@dataclass(frozen=True)
class World:
    """This process's place among the processes of one run: ``rank`` of ``size``, ``local_rank`` on its
    machine; ``distributed`` is False for a plain single process.

    >>> World().is_main, World(rank=1, size=2, local_rank=1, distributed=True).is_main
    (True, False)
    """

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    distributed: bool = False

    @property
    def is_main(self) -> bool:
        """True on rank 0: the rank that holds job locks, finishes jobs, shows progress and prints."""
        return self.rank == 0

    def share(self, items: Sequence[Item]) -> list[Item]:
        """This rank's items: round-robin over ``items`` in their order, a pure function of (items, size,
        rank), so the shares are disjoint, cover every item and differ in length by at most one.

        >>> [World(rank=r, size=3).share(list(range(7))) for r in range(3)]
        [[0, 3, 6], [1, 4], [2, 5]]
        """
        return list(items[self.rank :: self.size])

    def shares(self, items: Sequence[Item]) -> list[list[Item]]:
        """Every rank's share, indexed by rank.

        >>> World(size=2).shares(["a", "b", "c"])
        [['a', 'c'], ['b']]
        """
        return [list(items[rank :: self.size]) for rank in range(self.size)]


def world(environ: Mapping[str, str] | None = None) -> World:
    """The world ``torchrun`` describes in the environment (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``), else
    the single process.

    >>> world({}), world({"WORLD_SIZE": "4", "RANK": "2", "LOCAL_RANK": "0"})
    (World(rank=0, size=1, local_rank=0, distributed=False), World(rank=2, size=4, local_rank=0, distributed=True))
    """
    env = os.environ if environ is None else environ
    if "WORLD_SIZE" not in env or "RANK" not in env:
        return World()
    try:
        size, rank = int(env["WORLD_SIZE"]), int(env["RANK"])
        local_rank = int(env.get("LOCAL_RANK", rank))
    except ValueError:
        raise PRBError(f"WORLD_SIZE={env['WORLD_SIZE']!r}, RANK={env['RANK']!r} and LOCAL_RANK="
                       f"{env.get('LOCAL_RANK')!r} must be whole numbers (torchrun sets them).") from None
    if not (size >= 1 and 0 <= rank < size and local_rank >= 0):
        raise PRBError(f"RANK={rank} is not a rank of WORLD_SIZE={size} (torchrun sets them).")
    return World(rank=rank, size=size, local_rank=local_rank, distributed=True)


def cuda_device(current: World) -> str:
    """This rank's GPU, ``cuda:LOCAL_RANK`` (PRBError when the machine has fewer GPUs than ranks)."""
    import torch

    count = torch.cuda.device_count()
    if current.local_rank >= count:
        raise PRBError(f"Rank {current.rank} (LOCAL_RANK={current.local_rank}) has no GPU of its own: this "
                       f"machine has {count}; give torchrun --nproc-per-node {count} or fewer.")
    return f"cuda:{current.local_rank}"


def setup() -> World:
    """The world of this process; under ``torchrun``, this rank's GPU made current (``cuda:LOCAL_RANK``, when
    CUDA is there) and the ``gloo`` process group joined (once per process, left at exit)."""
    current = world()
    if not current.distributed:
        return current
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(cuda_device(current))
        dist.init_process_group("gloo", timeout=WAIT_FOR_RANKS)
        atexit.register(_leave)
    return current


def _leave() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def barrier(current: World) -> None:
    """Wait until every rank is here (nothing for a single process)."""
    if not current.distributed:
        return
    import torch.distributed as dist

    dist.barrier()


def broadcast(current: World, value: Any) -> Any:
    """Rank 0's ``value`` on every rank (a picklable object; returned as is for a single process)."""
    if not current.distributed:
        return value
    import torch.distributed as dist

    box = [value if current.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def kill_point(current: World) -> None:
    """Test hook (``PRB_TEST_KILL_RANK=N``): rank N of a torchrun world dies here at once, as a killed process
    does; called after a rank's first part file is written."""
    if current.distributed and os.environ.get(KILL_RANK_ENV, "").strip() == str(current.rank):
        os.kill(os.getpid(), signal.SIGKILL)
