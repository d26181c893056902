"""Decoder forward passes with a shared prompt: the prompt runs once, its KV cache serves every continuation.

A *group* is a few token sequences (chosen and rejected, or the two judge orders) that start with the same
tokens. With ``kv_reuse`` the longest common prefix of a group runs once, its cache serves each sequence of
the group, and only the continuations run after it (positions continuing the prefix). Without it, every
sequence runs whole. Both give the same hidden states up to floating-point rounding.

What makes the cache pay (measured with ``bench/score_throughput.py``):

- no attention mask where padding cannot matter. Every batch is right-padded, and a causal decoder's state at
  a real position never sees a pad that comes after it, so whole sequences and prefixes run without a mask:
  SDPA takes its ``is_causal`` kernel instead of a materialised 4-D mask. Only a continuation batch over
  prefixes of different lengths needs a (2-D padding) mask, for the pads inside the cache;
- no copies of the prompt cache where a batch holds one group: its batch-1 cache serves the group's
  sequences through ``expand`` (a view), or, when the continuations differ in length by more than a pass
  costs, one continuation after the other (no padding, no mask); a batch of several groups repeats it;
- a cost model (:class:`CostModel`) that packs batches and decides, group by group, whether reuse pays: a
  forward pass costs its padded tokens plus a fixed overhead counted in tokens (small on a CPU, where compute
  is linear in tokens, large on a GPU, where a small batch is latency-bound). Reuse costs two passes and saves
  the prefix ``k - 1`` times; groups merge into a batch only when the padding added costs less than the pass
  saved;
- on a GPU, a calibration per prompt-length bucket (:func:`length_bucket`): whether the cache pays is timed on
  batches shaped like the bucket's own (``none``, ``top3`` and a cut ``full`` differ: the cache computes
  0.8, 0.55 and 0.5 of the whole tokens), before the bucket's first batch, and kept in the run metadata;
- no wait for the device inside a chunk: inputs go to the GPU from pinned memory without blocking, and the
  heads' results stay on the device until every batch of the call is launched, then come back in one copy;
- threads (:func:`choose_threads`): on a CPU shared with other busy processes, torch's intra-op threads stall
  on every barrier waiting for a thread the OS has descheduled (many short parallel regions suffer most, which
  is exactly the two-pass cached path), so the runner uses only the cores that are free.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from prb_utils.models.batching import BudgetBatcher, pad_right
from prb_utils.models.device import cpu_threads


@dataclass(frozen=True, eq=False)
class Group:
    """Sequences sharing a prefix; ``need_from[j]`` = first position whose final hidden state is wanted.

    Token ids may be any integer sequences (tuples, lists, numpy arrays). The prefix that can run once
    (:attr:`shared`) and the longest sequence are computed once per group, on first use.
    """

    seqs: tuple[Sequence[int], ...]
    need_from: tuple[int, ...]

    @cached_property
    def shared(self) -> int:
        """Prefix length that can run once: common tokens, leaving every sequence at least one token of its
        own and keeping every wanted position at or after the prefix's last token."""
        if len(self.seqs) < 2:
            return 0
        n = min(common_prefix(self.seqs), min(len(s) for s in self.seqs) - 1, min(self.need_from) + 1)
        return max(0, n)

    @cached_property
    def longest(self) -> int:
        return max(len(s) for s in self.seqs)

    @cached_property
    def longest_continuation(self) -> int:
        return max(len(s) for s in self.seqs) - self.shared


def common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    """Number of leading tokens all sequences share (vectorised: one comparison of arrays per sequence).

    >>> common_prefix([(1, 2, 3, 4), (1, 2, 5), (1, 2, 3)])
    2
    """

    n = min(len(s) for s in seqs)
    if n == 0 or len(seqs) < 2:
        return n
    first = np.asarray(seqs[0][:n])
    differs = np.zeros(n, dtype=bool)
    for s in seqs[1:]:
        differs |= np.asarray(s[:n]) != first
    found = np.flatnonzero(differs)
    return int(found[0]) if found.size else n


def shared_length(group: Group) -> int:
    """:attr:`Group.shared` (computed once per group)."""
    return group.shared


# Fixed cost of one forward pass, in tokens of compute. Not only Python and kernel launches: small batches use
# the cores worse (a few hundred rows per GEMM, many short parallel regions), so on a 2-core CPU eight groups
# in one batch ran SmolLM2-135M 15-25% faster than the same groups one by one (bench/score_throughput.py);
# 256 lets groups of similar length share a batch up to the token budget. A GPU runs a small batch in about
# the time of a few thousand tokens.
FORWARD_OVERHEAD = {"cpu": 256, "cuda": 2048, "mps": 512}


@dataclass(frozen=True)
class CostModel:
    """Cost of a batch of groups in tokens: padded tokens plus ``overhead`` per forward pass.

    >>> g = Group(((1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 7, 8)), (5, 5))
    >>> cm = CostModel(overhead=2)
    >>> cm.cost([g], reuse=False), cm.cost([g], reuse=True), cm.reuse_pays(g)
    (14, 12, True)
    """

    overhead: int = FORWARD_OVERHEAD["cpu"]

    def padded(self, groups: Sequence[Group], *, reuse: bool) -> int:
        """Padded tokens of the batch: every sequence to the longest, or (``reuse``) the prefixes to the
        longest prefix plus every continuation to the longest continuation."""
        if not groups:
            return 0
        rows = sum(len(g.seqs) for g in groups)
        if not reuse:
            return rows * max(g.longest for g in groups)
        return len(groups) * max(g.shared for g in groups) + rows * max(g.longest_continuation for g in groups)

    def split_continuations(self, group: Group) -> bool:
        """Whether a group alone in a batch runs its continuations one by one on its batch-1 cache (no
        padding, no mask) rather than padded together: when their padding costs more than the extra passes."""
        n = shared_length(group)
        conts = [len(s) - n for s in group.seqs]
        return len(conts) * max(conts) - sum(conts) > (len(conts) - 1) * self.overhead

    def cost(self, groups: Sequence[Group], *, reuse: bool) -> int:
        if reuse and len(groups) == 1 and self.split_continuations(groups[0]):
            g = groups[0]
            n = shared_length(g)
            return n + sum(len(s) - n for s in g.seqs) + self.overhead * (1 + len(g.seqs))
        return self.padded(groups, reuse=reuse) + self.overhead * (2 if reuse else 1)

    def reuse_pays(self, group: Group, *, budget: int | None = None) -> bool:
        """Whether running the shared prefix once (two passes) costs less than running the group whole.

        With ``budget``, the passes' overhead is shared by the groups a batch of that budget would hold
        (the group's whole cost divides the budget), which is what makes reuse pay on a GPU.
        """
        if shared_length(group) < 1:
            return False
        whole = self.padded([group], reuse=False)
        per_batch = max(1, budget // max(1, whole)) if budget else 1
        if per_batch == 1:
            return self.cost([group], reuse=True) < self.cost([group], reuse=False)
        return self.padded([group], reuse=True) + 2 * self.overhead / per_batch < whole + self.overhead / per_batch

    def batch_reuse(self, groups: Sequence[Group]) -> bool:
        """Whether a batch runs on the prompt cache: every group shares a prefix and the batch costs less so."""
        if not groups or len({len(g.seqs) for g in groups}) != 1 or any(shared_length(g) < 1 for g in groups):
            return False
        return self.cost(groups, reuse=True) < self.cost(groups, reuse=False)

    def plan(self, groups: Sequence[Group], indices: Sequence[int], *, budget: int,
             kv_reuse: bool | Callable[[Group], bool] = True) -> list[list[int]]:
        """Batches of ``indices`` (into ``groups``): each batch is all-reuse or all-whole, stays within
        ``budget`` padded tokens (a group over it runs alone) and takes a group only when that costs no more
        than running the group in a batch of its own. A reuse batch holds groups of one size (the prompt
        cache is repeated the same number of times for each), e.g. answers with 2 and with 3 rubric aspects
        go to different batches. Longest first. ``kv_reuse`` may decide group by group (a callable: the
        runner's calibrated decision for the group's length bucket)."""
        allowed = kv_reuse if callable(kv_reuse) else (lambda _g: bool(kv_reuse))
        reuse = {i: allowed(groups[i]) and self.reuse_pays(groups[i], budget=budget) for i in indices}
        batches: list[list[int]] = []
        for mode in (True, False):
            chosen = [i for i in indices if reuse[i] == mode]

            def key(i: int, mode: bool = mode) -> tuple[int, ...]:
                g = groups[i]
                if mode:
                    n = shared_length(g)
                    return (len(g.seqs), -n, -max(len(s) - n for s in g.seqs), i)
                return (-g.longest, i)

            current: list[Group] = []
            members: list[int] = []
            for i in sorted(chosen, key=key):
                g = groups[i]
                if current:
                    merged = [*current, g]
                    one_size = not mode or len(g.seqs) == len(current[0].seqs)
                    fits = self.padded(merged, reuse=mode) <= budget
                    cheaper = self.cost(merged, reuse=mode) <= self.cost(current, reuse=mode) + self.cost([g], reuse=mode)
                    if one_size and fits and cheaper:
                        current.append(g)
                        members.append(i)
                        continue
                    batches.append(members)
                current, members = [g], [i]
            if members:
                batches.append(members)
        batches.sort(key=lambda b: -self.padded([groups[i] for i in b], reuse=reuse[b[0]]))
        return batches


# The pair shape the GPU calibration times: a top3 RM input of the benchmark is about 1,200 tokens of prompt and
# two answers of about 130 tokens (bench/host_overhead.py prints the real counts).
CALIBRATION_PROMPT = 1024
CALIBRATION_ANSWER = 128
PROMPT_CACHE_MARGIN = 0.95   # the prompt cache is kept where it takes at most 95% of the whole run's time
SMALLEST_BUCKET = 512   # prompt lengths up to this share one calibration; then one per power of two
#: A bucket whose cache time, predicted from the load's calibration, is under this share of the margin is not
#: timed again (its decision is clear; timing a budget-full batch twice each way costs a 3B model about 0.7 s).
CLEAR_MARGIN = 0.8


def length_bucket(group: Group) -> int:
    """The prompt-length bucket whose calibration decides the prompt cache for ``group``: the power of two at
    or above its shared prefix (at least :data:`SMALLEST_BUCKET`). ``none``, ``top3`` and ``full`` inputs fall
    in different buckets, so each condition's decision comes from batches shaped like its own.

    >>> length_bucket(Group(((1,) * 700 + (2,), (1,) * 700 + (3,)), (700, 700)))
    1024
    """
    n = max(1, group.shared)
    return max(SMALLEST_BUCKET, 1 << (n - 1).bit_length())


def to_device(tensor: Any, device: Any) -> Any:
    """``tensor`` on ``device``; to a GPU from pinned memory without blocking, so the host goes on launching
    while the copy waits its turn in the stream (a copy from pageable memory waits for the GPU first)."""
    if str(device).startswith("cuda"):
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def calibrated(*, whole_s: float, reuse_s: float, small_s: float, tokens: int,
               small_tokens: int) -> tuple[int, bool]:
    """``(overhead in tokens, prompt cache pays)`` from the calibration's timings: the batch run whole gives
    the rate, the small pass's time at that rate less its own tokens is the fixed cost of a pass; the cache
    pays when its run takes at most :data:`PROMPT_CACHE_MARGIN` of the whole run's time.

    >>> calibrated(whole_s=0.2, reuse_s=0.12, small_s=0.01, tokens=16000, small_tokens=64)
    (736, True)
    >>> calibrated(whole_s=0.2, reuse_s=0.2, small_s=0.0001, tokens=16000, small_tokens=64)
    (0, False)
    """
    rate = tokens / whole_s
    return max(0, round(small_s * rate - small_tokens)), reuse_s <= PROMPT_CACHE_MARGIN * whole_s


@dataclass
class Planned:
    """Groups with their batch plan, made by :meth:`DecoderRunner.prepare` for one token budget."""

    groups: list[Group]
    budget: int
    batches: list[list[int]]
    kv_reuse: bool = True
    decisions: dict[int, bool] | None = None   # the calibrated buckets' prompt-cache decisions it was planned with


# ------------------------------------------------------------------------------------------ threads


def _cpu_jiffies(cpus: set[int] | None) -> int | None:
    """Busy clock ticks (everything but idle and iowait) of the given CPUs, from /proc/stat."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    total = 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        if cpus is not None and int(name[3:]) not in cpus:
            continue
        f = [int(x) for x in rest.split()]
        total += sum(f[:8]) - f[3] - f[4]
    return total


def _self_jiffies() -> int | None:
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            fields = fh.read().rpartition(")")[2].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])   # utime + stime, all threads


def busy_cpus_elsewhere(window: float = 0.2) -> float | None:
    """CPUs (of those this process may use) kept busy by other processes over ``window`` seconds, or None
    where /proc is not available."""
    try:
        cpus: set[int] | None = set(os.sched_getaffinity(0))
    except AttributeError:
        cpus = None
    a, s = _cpu_jiffies(cpus), _self_jiffies()
    if a is None or s is None:
        return None
    start = time.perf_counter()
    time.sleep(window)
    b, t = _cpu_jiffies(cpus), _self_jiffies()
    elapsed = time.perf_counter() - start
    if b is None or t is None:
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return max(0.0, ((b - a) - (t - s)) / hz / elapsed)


def choose_threads(n_cpus: int, busy_elsewhere: float | None) -> int:
    """Intra-op threads for ``n_cpus`` CPUs of which ``busy_elsewhere`` are used by other processes: the free
    ones (rounded, at least one). More threads than free cores make every parallel region wait for a thread
    that is not running.

    >>> choose_threads(2, 0.0), choose_threads(2, 1.0), choose_threads(8, 2.6), choose_threads(2, None)
    (2, 1, 5, 2)
    """
    if busy_elsewhere is None:
        return max(1, n_cpus)
    return max(1, min(n_cpus, int(n_cpus - busy_elsewhere + 0.5)))


class DecoderRunner:
    """Final hidden states of decoder sequences, batched by a token budget, with prompt-cache reuse.

    ``threads``: ``"auto"`` (on a CPU: the cores not busy elsewhere, checked at most every
    ``THREAD_CHECK_S`` seconds), an int, or None to leave torch's setting alone.
    """

    THREAD_CHECK_S = 10.0

    def __init__(self, model: Any, *, pad_id: int, batcher: BudgetBatcher, kv_reuse: bool = True,
                 cost: CostModel | None = None, threads: int | str | None = "auto",
                 calibrate: bool | None = None) -> None:
        self.model = model
        self.decoder = model.base_model
        self.pad_id = int(pad_id)
        self.batcher = batcher
        self.kv_reuse = kv_reuse
        device = str(getattr(model, "device", "cpu")).split(":")[0]
        self.device_type = device
        self.cost = cost or CostModel(FORWARD_OVERHEAD.get(device, FORWARD_OVERHEAD["cpu"]))
        self.threads = threads
        self.threads_used: int | None = None
        self._threads_checked = -float("inf")
        self.tokens_computed = 0
        self.tokens_padded = 0
        self.reused_groups = 0
        self.forward_passes = 0
        params = inspect.signature(self.decoder.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self.calibration: dict[str, Any] | None = None
        self.cache_decisions: dict[int, bool] = {}   # length bucket -> the prompt cache pays (calibrated)
        self.bucket_calibrations: dict[int, dict[str, Any]] = {}
        self.calibrating = False   # after calibrate(): each new length bucket is timed before its first batch
        if calibrate if calibrate is not None else (device == "cuda" and cost is None):
            self.calibrate()

    def calibrate(self, *, prompt: int = CALIBRATION_PROMPT, answer: int = CALIBRATION_ANSWER,
                  small: int = 64, repeat: int = 2) -> dict[str, Any]:
        """Measure, on this model and device, the fixed cost of a forward pass and whether the prompt cache
        pays, and set the cost model from them. Done at load on a GPU, where a small pass is latency-bound and
        a constant cannot say how much (a CPU keeps the measured constants of :data:`FORWARD_OVERHEAD`).

        Three timings on random token ids: a budget-full batch of pairs shaped like the benchmark's (``prompt``
        tokens shared by two answers of ``answer`` tokens) run whole and on the prompt cache, and one pass of
        ``small`` tokens. See :func:`calibrated` for what is made of them; ``self.calibration`` keeps it all.
        The prompt cache's decision holds for that prompt's length bucket (:func:`length_bucket`); from now on
        every other bucket is timed the same way, with its own batches' shape, before its first batch
        (:meth:`calibrate_bucket`)."""
        found = self._time_shape(prompt, answer, 2, repeat)
        one = self._seconds(lambda: self._full([Group(((1,) * small,), (small - 1,))]), repeat)
        overhead, pays = calibrated(whole_s=found["whole_s"], reuse_s=found["prompt_cache_s"], small_s=one,
                                    tokens=found["tokens"], small_tokens=small)
        self.cost = CostModel(overhead)
        bucket = max(SMALLEST_BUCKET, 1 << (prompt - 1).bit_length())
        self.cache_decisions[bucket] = pays
        self.calibrating = True
        self.calibration = {"forward_overhead_tokens": overhead, "prompt_cache_pays": pays,
                            "whole_s": found["whole_s"], "prompt_cache_s": found["prompt_cache_s"],
                            "small_pass_s": one, "groups": found["groups"], "prompt_tokens": prompt,
                            "answer_tokens": answer, "bucket": bucket}
        self.bucket_calibrations[bucket] = {k: self.calibration[k] for k in (
            "prompt_cache_pays", "whole_s", "prompt_cache_s", "groups", "prompt_tokens", "answer_tokens")}
        return self.calibration

    def calibrate_bucket(self, bucket: int, groups: Sequence[Group], *, repeat: int = 1) -> bool:
        """Time whole against the prompt cache for ``bucket`` on random ids shaped like ``groups`` (their median
        prompt and continuation, their size), as many groups as a batch holds; record and return whether the
        cache pays (at most :data:`PROMPT_CACHE_MARGIN` of the whole run's time). The model is warm by now
        (calibrated at load), so each variant runs twice, not three times: a ``full`` bucket's batch is long."""
        prompts = sorted(g.shared for g in groups)
        answers = sorted(g.longest_continuation for g in groups)
        sizes = sorted(len(g.seqs) for g in groups)
        prompt, answer = max(1, prompts[len(prompts) // 2]), max(1, answers[len(answers) // 2])
        found = self._time_shape(prompt, answer, max(2, sizes[len(sizes) // 2]), repeat)
        pays = found["prompt_cache_s"] <= PROMPT_CACHE_MARGIN * found["whole_s"]
        self.cache_decisions[bucket] = pays
        self.bucket_calibrations[bucket] = {"prompt_cache_pays": pays, "whole_s": found["whole_s"],
                                            "prompt_cache_s": found["prompt_cache_s"], "groups": found["groups"],
                                            "prompt_tokens": prompt, "answer_tokens": answer,
                                            "sequences_per_group": found["k"]}
        return pays

    def _seconds(self, run: Callable[[], Any], repeat: int) -> float:
        import torch

        best = float("inf")
        counters = (self.tokens_computed, self.tokens_padded, self.reused_groups, self.forward_passes)
        with torch.inference_mode():
            for _ in range(repeat + 1):   # the first run warms up
                self._synchronize()
                start = time.perf_counter()
                run()
                self._synchronize()
                best = min(best, time.perf_counter() - start)
        self.tokens_computed, self.tokens_padded, self.reused_groups, self.forward_passes = counters
        return best

    def _time_shape(self, prompt: int, answer: int, k: int, repeat: int) -> dict[str, Any]:
        """Best seconds of a budget-full batch of groups (``prompt`` shared tokens, ``k`` answers of ``answer``
        tokens; random ids) run whole and on the prompt cache (timing runs are not counted as scoring)."""
        import torch

        vocab = int(getattr(self.model.config, "vocab_size", 0) or 1000)
        rng = torch.Generator().manual_seed(0)
        length = prompt + answer
        n_groups = max(1, self.batcher.budget // (k * length))
        groups = []
        for _ in range(n_groups):
            head = torch.randint(0, vocab, (prompt,), generator=rng).tolist()
            seqs = tuple(head + torch.randint(0, vocab, (answer,), generator=rng).tolist() for _ in range(k))
            groups.append(Group(seqs, (length - 1,) * k))
        whole = self._seconds(lambda: self._full(groups), repeat)
        reuse = self._seconds(lambda: self._with_prefix(groups, [g.shared for g in groups], k), repeat)
        return {"whole_s": whole, "prompt_cache_s": reuse, "groups": n_groups, "k": k, "tokens": k * n_groups * length}

    def calibration_record(self) -> dict[str, Any] | None:
        """What the calibration measured, for the run metadata: the load's timings and each length bucket's
        prompt-cache decision with its timings (``buckets``, by bucket); None where nothing was timed."""
        if self.calibration is None:
            return None
        return {**self.calibration, "buckets": {str(b): dict(v) for b, v in sorted(self.bucket_calibrations.items())}}

    def _reuse_for(self, group: Group) -> bool:
        """Whether ``group`` may run on the prompt cache: ``kv_reuse`` and its bucket's calibrated decision (a
        bucket not timed yet: allowed, the cost model decides)."""
        return self.kv_reuse and self.cache_decisions.get(length_bucket(group), True)

    def _decide_buckets(self, groups: Sequence[Group]) -> None:
        """Calibrate the length buckets of ``groups`` not timed yet (only once :meth:`calibrate` ran)."""
        if not (self.calibrating and self.kv_reuse):
            return
        todo: dict[int, list[Group]] = {}
        for g in groups:
            bucket = length_bucket(g)
            if bucket not in self.cache_decisions and len(g.seqs) > 1:
                todo.setdefault(bucket, []).append(g)
        for bucket, members in todo.items():
            if not self._clear_from_load(bucket, members):
                self.calibrate_bucket(bucket, members)

    def _clear_from_load(self, bucket: int, groups: Sequence[Group]) -> bool:
        """Decide ``bucket`` for the cache without timing it where the load's calibration already makes it
        clear: the cache's time at load, scaled by the bucket's share of whole tokens against the load shape's,
        stays under :data:`CLEAR_MARGIN` of the whole run's (``top3`` and a cut ``full`` compute about half the
        tokens on the cache, as the load's shape does; ``none``, at 0.8, is timed). Records the reason."""
        load = self.calibration
        if not load or not load.get("prompt_cache_pays"):
            return False
        share = sum(g.shared + sum(len(s) - g.shared for s in g.seqs) for g in groups) / \
            sum(sum(map(len, g.seqs)) for g in groups)
        prompt, answer = load["prompt_tokens"], load["answer_tokens"]
        load_share = (prompt + 2 * answer) / (2 * (prompt + answer))
        predicted = load["prompt_cache_s"] / load["whole_s"] * share / load_share
        if predicted > CLEAR_MARGIN * PROMPT_CACHE_MARGIN:
            return False
        self.cache_decisions[bucket] = True
        self.bucket_calibrations[bucket] = {"prompt_cache_pays": True, "decided_from": "load calibration",
                                            "token_share": round(share, 3), "predicted_time_share": round(predicted, 3)}
        return True

    def _synchronize(self) -> None:
        if self.device_type == "cuda":
            import torch

            torch.cuda.synchronize()

    def _thread_count(self) -> int | None:
        if self.threads is None or self.device_type != "cpu":
            return None
        if isinstance(self.threads, int):
            return self.threads
        now = time.monotonic()
        if self.threads_used is None or now - self._threads_checked > self.THREAD_CHECK_S:
            self.threads_used = choose_threads(cpu_threads(), busy_cpus_elsewhere(0.1))
            self._threads_checked = now
        return self.threads_used

    def prepare(self, groups: Sequence[Group]) -> Planned:
        """The batch plan of ``groups`` (host work only: shared prefixes, costs, packing), made ahead so that
        it can run while the device computes the previous chunk."""
        groups = list(groups)
        budget = self.batcher.budget
        return Planned(groups, budget, self._plan(groups, range(len(groups)), budget), self.kv_reuse,
                       dict(self.cache_decisions))

    def _plan(self, groups: Sequence[Group], indices: Sequence[int], budget: int) -> list[list[int]]:
        return self.cost.plan(groups, indices, budget=budget, kv_reuse=self._reuse_for)

    def hidden(self, groups: Sequence[Group] | Planned,
               reduce: Callable[[Group, list[Any]], Any] | None = None, *, gather: bool = False) -> list[Any]:
        """For each group, a list with one tensor [len - need_from, hidden] of final hidden states per sequence,
        or ``reduce(group, that list)`` computed inside the batch (so only small results stay in memory and an
        out-of-memory error in the head is recovered like one in the body). ``gather``: ``reduce`` returns a
        tensor of one shape for every group, left on the device until every batch is launched, then copied to
        the host in one piece (one wait for the device per call, not one per group) as a list of floats per
        group. ``groups`` may come planned (:meth:`prepare`); a plan made for another budget, cache setting or
        calibration is made again."""
        import torch

        planned = groups if isinstance(groups, Planned) else None
        groups = planned.groups if planned is not None else list(groups)
        self._decide_buckets(groups)
        batches = None
        if planned is not None and planned.budget == self.batcher.budget and planned.kv_reuse == self.kv_reuse \
                and planned.decisions == self.cache_decisions:
            batches = planned.batches

        def plan(indices: Sequence[int], budget: int) -> list[list[int]]:
            return self._plan(groups, indices, budget)

        def run(batch: list[Group]) -> list[Any]:
            threads = self._thread_count()   # re-checked every THREAD_CHECK_S: the load on the machine changes
            if threads is not None and threads != torch.get_num_threads():
                torch.set_num_threads(threads)
            states = self._batch(batch)
            if reduce is None:
                return states
            with torch.inference_mode():
                return [reduce(g, per) for g, per in zip(batch, states, strict=True)]

        before = torch.get_num_threads()
        try:
            found = self.batcher.map(run, groups, [g.longest * len(g.seqs) for g in groups], plan=plan,
                                     batches=batches)
        finally:
            if torch.get_num_threads() != before:
                torch.set_num_threads(before)
        if gather and found:
            return torch.stack(found).cpu().tolist()
        return found

    # ------------------------------------------------------------------ one batch

    def _batch(self, groups: list[Group]) -> list[list[Any]]:
        import torch

        with torch.inference_mode():
            if not all(map(self._reuse_for, groups)) or not self.cost.batch_reuse(groups):
                return self._full(groups)
            return self._with_prefix(groups, [shared_length(g) for g in groups], len(groups[0].seqs))

    def _forward(self, **kwargs: Any) -> Any:
        self.forward_passes += 1
        return self.decoder(**kwargs)

    def _full(self, groups: list[Group]) -> list[list[Any]]:
        seqs = [s for g in groups for s in g.seqs]
        ids, mask = pad_right(seqs, self.pad_id)
        self.tokens_computed += int(mask.sum())
        self.tokens_padded += ids.numel()
        # right padding: no real position attends a pad (causal), so no mask -> SDPA's causal kernel
        states = self._forward(input_ids=to_device(ids, self.model.device), use_cache=False).last_hidden_state
        result, row = [], 0
        for g in groups:
            per = []
            for s, start in zip(g.seqs, g.need_from, strict=True):
                per.append(states[row, start : len(s)])
                row += 1
            result.append(per)
        return result

    def _with_prefix(self, groups: list[Group], shared: list[int], k: int) -> list[list[Any]]:
        import torch

        device = self.model.device
        ids, mask = pad_right([g.seqs[0][:n] for g, n in zip(groups, shared, strict=True)], self.pad_id)
        width = ids.shape[1]
        out = self._forward(input_ids=to_device(ids, device), use_cache=True)   # right-padded: no mask needed
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        rows_idx = to_device(torch.tensor([n - 1 for n in shared]), out.last_hidden_state.device)
        last = out.last_hidden_state[torch.arange(len(groups), device=rows_idx.device), rows_idx]
        layers = getattr(cache, "layers", None)
        if len(groups) == 1 and self.cost.split_continuations(groups[0]) and _plain(layers):
            return [self._one_by_one(groups[0], shared[0], cache, last[0])]
        _broadcast_cache(cache, k, len(groups))

        conts = [(s[n:], n) for g, n in zip(groups, shared, strict=True) for s in g.seqs]
        c_ids, c_mask = pad_right([c for c, _ in conts], self.pad_id)
        c_width = c_ids.shape[1]
        c_pos = torch.tensor([n for _, n in conts])[:, None] + torch.arange(c_width)[None, :]
        kwargs: dict[str, Any] = {}
        if min(shared) != width:   # pads inside the cache: mask them (pads after the continuations are harmless)
            full_mask = torch.cat([mask.repeat_interleave(k, dim=0),
                                   torch.ones((len(conts), c_width), dtype=torch.long)], dim=1)
            kwargs["attention_mask"] = to_device(full_mask, device)
        self.tokens_computed += int(mask.sum()) + int(c_mask.sum())
        self.tokens_padded += ids.numel() + c_ids.numel()
        out2 = self._forward(input_ids=to_device(c_ids, device), position_ids=to_device(c_pos, device), use_cache=True,
                             **{self._cache_arg: cache}, **kwargs)
        self.reused_groups += len(groups)
        states = out2.last_hidden_state
        result, row = [], 0
        for gi, (g, n) in enumerate(zip(groups, shared, strict=True)):
            per = []
            for s, start in zip(g.seqs, g.need_from, strict=True):
                # positions n-1 (the prefix's last token) .. len(s)-1
                rows = torch.cat([last[gi : gi + 1], states[row, : len(s) - n]], dim=0)
                per.append(rows[start - (n - 1) :])
                row += 1
            result.append(per)
        return result


    def _one_by_one(self, group: Group, n: int, cache: Any, last: Any) -> list[Any]:
        """Each continuation alone on the group's batch-1 prompt cache: no padding, no padding mask."""
        import torch

        device = self.model.device
        layers = cache.layers
        prompt = [(layer.keys, layer.values) for layer in layers]
        per = []
        for s, start in zip(group.seqs, group.need_from, strict=True):
            for layer, (keys, values) in zip(layers, prompt, strict=True):   # back to the prompt alone
                layer.keys, layer.values = keys, values
            cont = to_device(torch.tensor([s[n:]], dtype=torch.long), device)
            pos = torch.arange(n, len(s), device=device)[None]
            self.tokens_computed += cont.shape[1]
            self.tokens_padded += cont.shape[1]
            states = self._forward(input_ids=cont, position_ids=pos, use_cache=True,
                                   **{self._cache_arg: cache}).last_hidden_state[0]
            rows = torch.cat([last[None], states], dim=0)   # positions n-1 .. len(s)-1
            per.append(rows[start - (n - 1):])
        self.tokens_computed += n
        self.tokens_padded += n
        self.reused_groups += 1
        return per

def _plain(layers: Any) -> bool:
    return bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers)


def _broadcast_cache(cache: Any, k: int, batch: int) -> None:
    """Give every group's ``k`` sequences the group's prompt cache: views (``expand``) for a batch of one
    group in a plain dynamic cache, else the cache's own ``batch_repeat_interleave`` (a copy)."""
    layers = getattr(cache, "layers", None)
    if batch == 1 and _plain(layers):
        for layer in layers:
            if getattr(layer, "keys", None) is not None and layer.keys.numel():
                layer.keys = layer.keys.expand(k, *layer.keys.shape[1:])
                layer.values = layer.values.expand(k, *layer.values.shape[1:])
        return
    cache.batch_repeat_interleave(k)


def lm_logits(model: Any, hidden: Any) -> Any:
    """Vocabulary logits (float32) from final hidden states, with the model's logit scaling or soft-capping."""
    head = model.get_output_embeddings()
    logits = head(hidden.to(head.weight.dtype)).float()
    config = model.config
    scale = getattr(config, "logit_scale", None)
    if isinstance(scale, (int, float)) and scale not in (0, 1):
        logits = logits * scale
    cap = getattr(config, "final_logit_softcapping", None)
    if isinstance(cap, (int, float)) and cap:
        logits = (logits / cap).tanh() * cap
    return logits


def token_logprobs(model: Any, hidden: Any, targets: Sequence[int], *, chunk: int = 512) -> Any:
    """Log-probabilities of ``targets[i]`` under the distribution predicted by ``hidden[i]`` (float32)."""
    import torch

    out = []
    target = to_device(torch.tensor(list(targets), dtype=torch.long), hidden.device)
    for start in range(0, hidden.shape[0], chunk):
        logp = torch.log_softmax(lm_logits(model, hidden[start : start + chunk]), dim=-1)
        out.append(logp.gather(-1, target[start : start + chunk, None].to(logp.device))[:, 0])
    return torch.cat(out) if out else torch.zeros(0)
