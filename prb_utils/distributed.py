"""Data-parallel scoring under ``torchrun``: the world from the environment, the process group, its barrier,
and each rank's share of a job's pairs.

``torchrun --nproc-per-node N -m prb_utils score ...`` starts N processes with ``WORLD_SIZE``, ``RANK`` and
``LOCAL_RANK`` set; :func:`setup` puts each rank on its own device (``cuda:LOCAL_RANK`` when CUDA is there,
else the CPU) and joins them into one process group on the ``gloo`` backend: the ranks only exchange pair keys
and meet at barriers (no tensor ever crosses), which gloo carries on CPUs and GPU machines alike, with no
communicator memory on the GPUs. Without those variables, or with ``WORLD_SIZE=1`` (a leftover of an earlier
launch), :func:`world` is the single process (rank 0 of 1) and nothing here touches torch.distributed.

Ranks that never meet are one sentence, not a wait: the ranks must all join within :data:`JOIN_TIMEOUT`
(``PRB_RANK_JOIN_TIMEOUT`` seconds overrides it); once joined, a rank waits for the others up to
:data:`WAIT_FOR_RANKS` (a slow share, a job lock held by another run). Before any work :func:`check_same_run`
has rank 0 compare every rank's arguments and data and name the first difference.

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
#: How long the ranks wait for one another to join the run (torchrun starts them together; a WORLD_SIZE and
#: RANK left in the environment without torchrun wait for ranks that never come).
JOIN_TIMEOUT = timedelta(minutes=5)
#: Seconds that replace :data:`JOIN_TIMEOUT` when set.
JOIN_TIMEOUT_ENV = "PRB_RANK_JOIN_TIMEOUT"
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
    given = {"WORLD_SIZE": env["WORLD_SIZE"], "RANK": env["RANK"], "LOCAL_RANK": env.get("LOCAL_RANK", env["RANK"])}
    numbers = {}
    for name, text in given.items():
        try:
            numbers[name] = int(text)
        except ValueError:
            raise PRBError(f"{name}={text!r} must be a whole number ({_who_set(env)}).") from None
    size, rank, local_rank = numbers["WORLD_SIZE"], numbers["RANK"], numbers["LOCAL_RANK"]
    if size < 1:
        raise PRBError(f"WORLD_SIZE={size} must be 1 or more ({_who_set(env)}).")
    if not 0 <= rank < size:
        raise PRBError(f"RANK={rank} is not a rank of WORLD_SIZE={size}, whose ranks are 0 to {size - 1} "
                       f"({_who_set(env)}).")
    if local_rank < 0:
        raise PRBError(f"LOCAL_RANK={local_rank} must be 0 or more ({_who_set(env)}).")
    if size == 1:   # one process, whoever set the variables
        return World()
    return World(rank=rank, size=size, local_rank=local_rank, distributed=True)


def by_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    """True when torchrun started this process (it sets ``TORCHELASTIC_RUN_ID``), False when ``WORLD_SIZE`` and
    ``RANK`` come from elsewhere (a leftover of an earlier launch, a script).

    >>> by_torchrun({"TORCHELASTIC_RUN_ID": "none", "WORLD_SIZE": "2"}), by_torchrun({"WORLD_SIZE": "2"})
    (True, False)
    """
    env = os.environ if environ is None else environ
    return "TORCHELASTIC_RUN_ID" in env


def one_process_advice(environ: Mapping[str, str] | None = None) -> str:
    """How to run prb as one process: without torchrun when torchrun started it, else by unsetting the
    variables left in the environment.

    >>> one_process_advice({"TORCHELASTIC_RUN_ID": "none"})
    'start it without torchrun'
    >>> one_process_advice({})
    'unset WORLD_SIZE, RANK and LOCAL_RANK, which torchrun did not set'
    """
    if by_torchrun(environ):
        return "start it without torchrun"
    return "unset WORLD_SIZE, RANK and LOCAL_RANK, which torchrun did not set"


def _who_set(env: Mapping[str, str]) -> str:
    if by_torchrun(env):
        return "torchrun sets them"
    return "torchrun did not set it; unset WORLD_SIZE, RANK and LOCAL_RANK to run prb as one process"


def join_timeout(environ: Mapping[str, str] | None = None) -> timedelta:
    """How long the ranks wait for one another to join: :data:`JOIN_TIMEOUT`, or ``PRB_RANK_JOIN_TIMEOUT``
    seconds.

    >>> join_timeout({JOIN_TIMEOUT_ENV: "2.5"}).total_seconds(), join_timeout({}) == JOIN_TIMEOUT
    (2.5, True)
    """
    env = os.environ if environ is None else environ
    text = env.get(JOIN_TIMEOUT_ENV, "").strip()
    if not text:
        return JOIN_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise PRBError(f"{JOIN_TIMEOUT_ENV}={text!r} must be a number of seconds above 0.")
    return timedelta(seconds=seconds)


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
        _join(current)
        atexit.register(_leave)
    return current


def _join(current: World) -> None:
    """Join the ``gloo`` process group within :func:`join_timeout` (PRBError naming the rank, the address and
    the wait when the others do not come, or when torchrun's rendezvous variables are missing), then give
    every later wait :data:`WAIT_FOR_RANKS`."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _set_pg_timeout

    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
    if missing:
        raise PRBError(f"WORLD_SIZE={current.size} and RANK={current.rank} are set but {' and '.join(missing)} "
                       f"{'is' if len(missing) == 1 else 'are'} not: start prb with torchrun, or unset WORLD_SIZE "
                       "and RANK to run it as one process.")
    timeout = join_timeout()
    try:
        dist.init_process_group("gloo", timeout=timeout)
        dist.barrier()   # every rank is here
    except Exception as exc:   # torch's rendezvous and gloo raise several types for a peer that never comes
        raise PRBError(f"Rank {current.rank} of WORLD_SIZE={current.size} waited {timeout.total_seconds():g} s at "
                       f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} and not every rank joined "
                       f"({type(exc).__name__}): start every rank with torchrun, or unset WORLD_SIZE and RANK to "
                       f"run as one process ({JOIN_TIMEOUT_ENV} sets the wait).") from None
    _set_pg_timeout(WAIT_FOR_RANKS)


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


def gather(current: World, value: Any) -> list[Any]:
    """Every rank's ``value`` (a picklable object), in rank order, on every rank; ``[value]`` for a single
    process."""
    if not current.distributed:
        return [value]
    import torch.distributed as dist

    box: list[Any] = [None] * current.size
    dist.all_gather_object(box, value)
    return box


def kill_point(current: World) -> None:
    """Test hook (``PRB_TEST_KILL_RANK=N``): rank N of a torchrun world dies here at once, as a killed process
    does; called after a rank's first part file is written."""
    if current.distributed and os.environ.get(KILL_RANK_ENV, "").strip() == str(current.rank):
        os.kill(os.getpid(), signal.SIGKILL)


def check_same_run(current: World, arguments: Mapping[str, Any], records: Mapping[tuple[str, str], str]) -> None:
    """Rank 0's check before any work: every rank was given the same ``arguments`` (the parsed command line,
    options in their order) and the same data (``records``: a digest per ``(subset, id)``); PRBError on every
    rank, naming the first difference, when one differs. Nothing for a single process."""
    if not current.distributed:
        return
    import torch.distributed as dist

    facts = (dict(arguments), dict(records))
    gathered: list[Any] | None = [None] * current.size if current.is_main else None
    dist.gather_object(facts, gathered, dst=0)
    problem = broadcast(current, run_difference(gathered) if gathered is not None else None)
    if problem:
        raise PRBError(problem)


def run_difference(gathered: Sequence[tuple[Mapping[str, Any], Mapping[tuple[str, str], str]]]) -> str | None:
    """The first difference between rank 0's ``(arguments, records)`` and another rank's, in one sentence.

    >>> run_difference([({"out": "a"}, {}), ({"out": "b"}, {})])
    "Rank 1 was given --out 'b' where rank 0 has --out 'a': every rank must run the same command on the same data."
    >>> run_difference([({}, {("S", "1"): "h"}), ({}, {("S", "1"): "x"})])
    "Rank 1's record '1' of subset 'S' differs from rank 0's: every rank must run the same command on the same data."
    """
    same = "every rank must run the same command on the same data."
    base_args, base_records = gathered[0]
    for rank, (args, records) in enumerate(gathered[1:], start=1):
        for name in list(dict.fromkeys([*base_args, *args])):
            if base_args.get(name) != args.get(name):
                return (f"Rank {rank} was given {_option_text(name, args.get(name))} where rank 0 has "
                        f"{_option_text(name, base_args.get(name))}: {same}")
        if records == base_records:
            continue
        for key, digest in records.items():
            if key not in base_records:
                return f"Rank {rank}'s data holds {_record_text(key)}, which rank 0's lacks: {same}"
            if base_records[key] != digest:
                return f"Rank {rank}'s {_record_text(key)} differs from rank 0's: {same}"
        key = next(k for k in base_records if k not in records)
        return f"Rank {rank}'s data lacks {_record_text(key)}, which rank 0's holds: {same}"
    return None


def _option_text(name: str, value: Any) -> str:
    flag = "--" + name.replace("_", "-")
    if value is None or value is False:
        return f"no {flag}"
    if value is True:
        return flag
    if isinstance(value, (list, tuple)):
        return " ".join(f"{flag} {item!r}" for item in value) or f"no {flag}"
    return f"{flag} {value!r}"


def _record_text(key: tuple[str, str]) -> str:
    return f"record {key[1]!r} of subset {key[0]!r}"
