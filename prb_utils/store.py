"""The results store: per-item scores as parquet shards, one folder per job, safe to resume and share.

Layout under ``out`` (default ``results/``)::

    jobs/<job_key>/job.json            what the job is + run metadata (versions, dtype, device, ...)
    jobs/<job_key>/part-00001.parquet  per-item rows, one file per scored chunk (compacted when a job ends)
    jobs/<job_key>/part-00002-r1.parquet  a chunk scored by rank 1 of a ``torchrun`` world
    jobs/<job_key>/.lock               a ``filelock.FileLock``: one writer per job at a time

A *job* is one model spec (+ its fingerprint, :mod:`prb_utils.models.fingerprint`) x one profile
condition x the options that can change a score (resolved device type and dtype, seed, judge mode, retriever
for ``top{K}``) x the data it scored. ``job_key`` is a short sha256 of that description. The data enters it as
``data``: the digest of the data source (:func:`prb_utils.data.data_identity`: every valid record the source
gives for the chosen subsets, before ``--limit``), so two data files, an edited copy or another ``--subset``
selection never share a job, while ``--limit`` stays out of the key: each row carries ``pair_hash``, a hash of
exactly what the model saw for that pair (subset, id, category, RM user message, chosen, rejected), a pair counts
as done when the job holds a row with the same hash, and ``--limit 10`` then ``--limit 20`` scores only the 10
new pairs. ``job.json`` records the data (``data``: source name, digest, pair count, the last run's ``subsets``
and ``limit``). A frame built in code (or a loaded one whose rows were filtered or renamed since) carries no
source: its jobs are keyed without data, and an edited record there is scored again (the newer row replaces the
older one).

Older stores: a job written before the key held the data is read as it is, labelled ``data=unrecorded``, and
named by :func:`pooled` when its rows show it may hold two data sets; :func:`open_job` continues it in its own
folder when every row it holds is a pair of the data scored now.

Checks on every read: each row's ``job`` column must be the folder's job key (a part file copied from
another job raises PRBError naming it), a finished job must hold a row for every pair its ``job.json``
expects (``pairs``: ``{"subset/id": pair_hash}``), and an older job must not look pooled; :func:`load_results`
warns (``StoreShortfallWarning``, naming the job and the counts) or, with ``strict=True``, raises.

Labels: :func:`load_results` adds ``job_label``, the model spec plus, where several jobs share a model spec
under one profile condition, a bracketed list of what differs (``judge:smollm2 [generate]``,
``implicit:x [bfloat16]``, ``length [seed=1]``, ``length [data=other.jsonl]``). ``(job_label, profile)`` names exactly one job, so tables
that group by ``job_label`` never pool two jobs.

Concurrency and crashes: every file is written to a temporary name and moved into place with
``os.replace`` (readers never see half a file); part files are numbered under the job lock, so two
processes on the same job never double-write (the second waits, then finds the work done), and processes
on different jobs never touch the same files. Under ``torchrun`` the ranks of one run share a job: rank 0
holds its lock (another run still waits) and each rank names its part files with its rank (``-rN``), so ranks
writing at once never pick the same file; parts sort by number, then rank. A killed run loses at most the chunk it was scoring. A file
damaged from outside (a copy cut short, a sync tool, a full disk) raises ``PRBError`` naming it; nothing is
dropped or rescored silently.

Rows: ``RESULT_COLUMNS``. Judges carry both A/B orders in one row (``p_chosen_ab``, ``p_chosen_ba``,
``verdict_ab``, ``verdict_ba``; ``score_chosen`` is P(chosen wins) averaged over both orders); these
columns are empty for other kinds. ``failed`` marks rows whose adapter raised (``invalid_reason`` holds the
exception); such pairs are tried again by the next run.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd
import pyarrow as pa
from filelock import FileLock, Timeout

from prb_utils.data import DATA_ATTR
from prb_utils.errors import PRBError, set_aside
from prb_utils.profile import DEFAULT_RETRIEVER, parse_condition
from prb_utils.schema import (  # noqa: F401
    FLOAT_COLUMNS,
    OUTCOMES,
    RESULT_COLUMNS,
    canonical_json,
    canonical_spec,
    stable_hash,
)

STORE_VERSION = 1
JOBS_DIR = "jobs"
UNITS = ("question", "user")  #: the clusters a job records per pair (besides the pair itself)
JOB_FILE = "job.json"
PART_RE = re.compile(r"^part-(\d+)(?:-r(\d+))?\.parquet$")

def job_key(description: Mapping[str, Any]) -> str:
    """Short sha256 of a canonical job description.

    >>> job_key({"model": "length", "profile": "none"}) == job_key({"profile": "none", "model": "length"})
    True
    """
    return stable_hash({"store_version": STORE_VERSION, **description})


def pair_hash(subset: str, item_id: str, prompt: str, chosen: str, rejected: str, *, category: str = "") -> str:
    """Hash of exactly what a reward model sees for one pair, plus the pair's identity and category (an edited
    category makes the stored row stale too)."""
    return stable_hash([subset, item_id, category, prompt, chosen, rejected])


def now() -> str:
    """The current UTC time as ISO text (seconds)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def _file_mode() -> int:
    """The mode a new file gets under the current umask (``0o644`` under the usual ``022``)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _cannot_write(path: Path, exc: OSError) -> PRBError:
    return PRBError(f"Cannot write the store file {path} ({exc.strerror or exc}); every score written before is "
                    "kept: make room (or fix the folder's permissions) and run the same command again to resume.")


def atomic_write(path: Path, write: Callable[[BinaryIO], Any]) -> None:
    """Call ``write(fh)`` on a temporary file beside ``path``, fsync it, then move it into place: a reader never
    sees half a file, and a failed write (a full disk) leaves no file of its own and nothing in place touched.
    The file gets the umask's mode. The one atomic writer of prb (the store's, the report's); an ``OSError`` is
    raised as it came, for the caller to name the file in its own sentence.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "a.txt"
    >>> atomic_write(target, lambda fh: fh.write(b"text"))
    >>> target.read_text(), [p.name for p in target.parent.iterdir()]
    ('text', ['a.txt'])
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _file_mode())
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _atomic_write_bytes(path: Path, write: Any) -> None:
    """:func:`atomic_write` for a store file: a full disk or a refused write is a PRBError naming the file."""
    try:
        atomic_write(path, write)
    except OSError as exc:
        raise _cannot_write(path, exc) from None


def write_parquet(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    """``frame`` as a parquet file at ``path``, written atomically (folders made as needed): the one atomic
    writer of every cache and result file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write_bytes(path, lambda fh: frame.to_parquet(fh, index=False))


def write_text(path: str | os.PathLike, text: str) -> None:
    """``text`` as a UTF-8 file at ``path``, written atomically (folders made as needed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write_bytes(path, lambda fh: fh.write(text.encode("utf-8")))


def tidy_rows(rows: pd.DataFrame | list[dict]) -> pd.DataFrame:
    """Rows in ``RESULT_COLUMNS`` order with stable dtypes (missing columns are added empty)."""
    frame = pd.DataFrame(rows) if not isinstance(rows, pd.DataFrame) else rows.copy()
    for column in RESULT_COLUMNS:
        if column not in frame.columns:
            frame[column] = None
    extra = [c for c in frame.columns if c not in RESULT_COLUMNS]
    frame = frame[RESULT_COLUMNS + extra]
    for column in FLOAT_COLUMNS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    frame["truncated"] = frame["truncated"].astype("boolean")
    frame["failed"] = frame["failed"].fillna(False).astype(bool)
    for column in ("model", "kind", "profile", "subset", "category", "id", "outcome", "pair_hash", "job"):
        frame[column] = frame[column].astype(object)
    for column in ("invalid_reason", "verdict_ab", "verdict_ba"):
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return frame.reset_index(drop=True)


class JobStore:
    """One job's folder: its description, run metadata and part files."""

    def __init__(self, out: str | os.PathLike, description: Mapping[str, Any], *, key: str | None = None) -> None:
        self.description = dict(description)
        self.key = key or job_key(self.description)
        self.dir = Path(out) / JOBS_DIR / self.key
        self.lock = FileLock(str(self.dir / ".lock"))

    # ------------------------------------------------------------------------------------ reading

    def parts(self) -> list[Path]:
        """Part files in write order."""
        return _parts(self.dir)

    def read(self) -> pd.DataFrame:
        """Every row of the job, the newest row per (subset, id)."""
        return _read_job(self.dir)

    def done(self) -> dict[tuple[str, str], str]:
        """``{(subset, id): pair_hash}`` of pairs with a final row (rows whose adapter raised are not final)."""
        rows = self.read()
        rows = rows[~rows["failed"]]
        return dict(zip(zip(rows["subset"], rows["id"], strict=True), rows["pair_hash"], strict=True))

    def metadata(self) -> dict[str, Any]:
        """The job's ``job.json`` (empty when the job was never written)."""
        return _read_job_json(self.dir / JOB_FILE)

    # ------------------------------------------------------------------------------------ writing

    @contextmanager
    def writing(self, *, on_wait: Any = None, wait: bool = True) -> Iterator[JobStore | None]:
        """Hold the job lock (waiting for another process if needed) and clean up leftovers of crashed runs.

        With ``wait=False`` a lock held by another process is not waited for: the context yields ``None``.
        """
        _make_folder(self.dir)
        try:
            self.lock.acquire(timeout=0)
            held = True
        except Timeout:
            held = False
        except OSError as exc:  # a read-only folder, say: only now, when something must be written
            raise PRBError(f"Cannot write to the results folder {self.dir.parent.parent}: job "
                           f"{self.key} ({self.description.get('model')} [{self.description.get('profile')}]) "
                           f"has pairs to score, and its lock file cannot be created ({exc.strerror or exc}).") from None
        if not held:
            if not wait:
                yield None
                return
            if on_wait is not None:
                on_wait(self)
            self.lock.acquire()
        try:
            for stale in self.dir.glob(".*.tmp"):
                stale.unlink(missing_ok=True)
            yield self
        finally:
            self.lock.release()

    def write_part(self, rows: pd.DataFrame, *, rank: int | None = None) -> Path:
        """Write rows as the next part file, atomically (call inside :meth:`writing`, or, as rank ``rank`` of
        a torchrun world, while rank 0 holds the lock: the file name then carries the rank)."""
        parts = self.parts()
        number = _part_number(parts[-1]) + 1 if parts else 1
        path = self.dir / (f"part-{number:05d}.parquet" if rank is None else f"part-{number:05d}-r{rank}.parquet")
        frame = tidy_rows(rows)
        _atomic_write_bytes(path, lambda fh: frame.to_parquet(fh, index=False))
        return path

    def write_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Replace ``job.json`` atomically (call inside :meth:`writing`)."""
        text = json.dumps(dict(metadata), indent=2, sort_keys=True, ensure_ascii=False, default=str)
        _atomic_write_bytes(self.dir / JOB_FILE, lambda fh: fh.write(text.encode("utf-8") + b"\n"))

    def compact(self) -> None:
        """Merge the part files into one (call inside :meth:`writing`); a crash midway leaves duplicates
        that readers drop, never a gap."""
        parts = self.parts()
        if len(parts) <= 1:
            return
        merged = self.write_part(self.read())
        for part in parts:
            if part != merged:
                part.unlink(missing_ok=True)


def open_job(out: str | os.PathLike, description: Mapping[str, Any],
             pairs: Callable[[], Mapping[str, str]]) -> JobStore:
    """The job of ``description`` in the store ``out``. A job written before prb keyed jobs by their data (its
    description less ``data``) is continued in its own folder, not scored again under a new key, when its record
    names this data, or when it names no data and every row it holds is a pair of ``pairs()`` (pair key -> pair
    hash: it scored this data and nothing else); a job that holds rows of other data is left as it is
    (:func:`load_results` names it) and this data gets a job of its own.

    >>> import tempfile
    >>> out, desc = tempfile.mkdtemp(), {"model": "length", "profile": "none", "data": "d1"}
    >>> open_job(out, desc, dict).key == job_key(desc)
    True
    """
    store = JobStore(out, description)
    if "data" not in description or store.dir.is_dir():
        return store
    older = JobStore(out, {name: value for name, value in description.items() if name != "data"})
    if not older.dir.is_dir():
        return store
    recorded = older.metadata().get("data")
    if isinstance(recorded, Mapping) and recorded.get("digest"):
        ours = recorded["digest"] == description["data"]
    else:
        rows, wanted = older.read(), pairs()
        keys = rows["subset"].astype(str) + "/" + rows["id"].astype(str)
        ours = not rows.empty and all(wanted.get(k) == h for k, h in zip(keys, rows["pair_hash"], strict=True))
    return JobStore(out, description, key=older.key) if ours else store


@contextmanager
def folder_lock(folder: str | os.PathLike, *, on_wait: Any = None) -> Iterator[Path]:
    """Hold ``folder/.lock`` (a ``filelock.FileLock``, as a job's lock: the OS releases it when its holder
    dies, so a killed run never blocks the next), waiting for another process that holds it; ``on_wait(path)``
    is called once before waiting. Yields the lock file's path.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp, folder_lock(Path(tmp) / "ppo") as path:
    ...     path.name
    '.lock'
    """
    folder = Path(folder)
    _make_folder(folder)
    path = folder / ".lock"
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if on_wait is not None:
            on_wait(path)
        lock.acquire()
    except OSError as exc:  # a read-only folder, say
        raise PRBError(f"Cannot create the lock file {path} ({exc.strerror or exc}); fix the folder's permissions "
                       "or give another results folder.") from None
    try:
        yield path
    finally:
        lock.release()


# ---------------------------------------------------------------------------------------- helpers


def _part_number(path: Path) -> int:
    match = PART_RE.match(path.name)
    return int(match.group(1)) if match else -1


def _part_order(path: Path) -> tuple[int, int]:
    """Where a part file sorts: by number, then rank (a file without a rank first).

    >>> sorted(["part-00002.parquet", "part-00001-r1.parquet", "part-00001-r0.parquet"],
    ...        key=lambda name: _part_order(Path(name)))
    ['part-00001-r0.parquet', 'part-00001-r1.parquet', 'part-00002.parquet']
    """
    match = PART_RE.match(path.name)
    if not match:
        return (-1, -1)
    return int(match.group(1)), int(match.group(2)) if match.group(2) is not None else -1


def _parts(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if PART_RE.match(p.name)), key=_part_order)


def _make_folder(folder: Path) -> None:
    """``mkdir -p folder``; PRBError naming the culprit when a file stands in the way or it cannot be made."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), folder)
        raise PRBError(f"Cannot use the results folder {folder}: {blocker} is a file, not a folder; "
                       "choose another results folder.") from None
    except OSError as exc:
        raise PRBError(f"Cannot create the results folder {folder} ({exc.strerror or exc}).") from None


def _damaged(path: Path, reason: str, remedy: str) -> PRBError:
    return PRBError(f"The store file {path} is damaged ({reason}); {remedy}.")


CACHE_REMEDY = "delete it and run the same command again to compute it anew"


def rows_problem(frame: pd.DataFrame, *, filled: Sequence[str] = (), unique: Sequence[str] = (),
                 text: Sequence[str] = ()) -> str | None:
    """Why the rows of a cache that has its columns cannot be used (a cell of a ``filled`` column empty, two rows
    with one ``unique`` key, a ``text`` cell that is not a string), or None when they can: the value check of
    :func:`read_parquet_cache`.

    >>> rows_problem(pd.DataFrame({"id": ["a", None]}), filled=["id"])
    '1 row with no id'
    >>> rows_problem(pd.DataFrame({"id": ["a", "a"], "i": [0, 0]}), unique=["id", "i"])
    '2 rows with one id, i (a, 0)'
    >>> rows_problem(pd.DataFrame({"response": ["ok", 3]}), text=["response"]) is None, rows_problem(
    ...     pd.DataFrame({"response": ["ok", b"x"]}), text=["response"])
    (False, '1 row whose response is not text')
    """
    for column in filled:
        empty = int(frame[column].isna().sum())
        if empty:
            return f"{empty} row{'s' if empty != 1 else ''} with no {column}"
    for column in text:
        other = int((~frame[column].map(lambda v: isinstance(v, str))).sum())
        if other:
            return f"{other} row{'s' if other != 1 else ''} whose {column} is not text"
    if unique:
        twice = frame[frame.duplicated(list(unique), keep=False)]
        if not twice.empty:
            first = twice.iloc[0]
            return (f"{len(twice)} rows with one {', '.join(unique)} "
                    f"({', '.join(str(first[c]) for c in unique)})")
    return None


def read_parquet_cache(path: str | os.PathLike, *, columns: Sequence[str] = (), recompute: bool = False,
                       check: Callable[[pd.DataFrame], str | None] | None = None) -> pd.DataFrame | None:
    """A cache or result file written by :func:`write_parquet` (None when there is none); a damaged one (cut
    short, not parquet, a folder where the file should be, without one of ``columns``, or values ``check``
    refuses: it returns why, e.g. :func:`rows_problem`) is a PRBError naming it and what to delete, or, with
    ``recompute`` (a cache the caller computes anew when it is None), set aside with one sentence
    (:func:`prb_utils.errors.set_aside`) and None."""
    path = Path(path)
    if not path.exists():
        return None
    reason = None
    if not path.is_file():   # pandas would read a folder as an (empty) dataset
        reason = "a folder where the file should be"
    else:
        try:
            frame = pd.read_parquet(path)
        except Exception as exc:   # pyarrow's errors for a cut or foreign file, IsADirectoryError, ...
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
        else:
            lacking = [c for c in columns if c not in frame.columns]
            reason = f"no column {', '.join(lacking)}" if lacking else (check(frame) if check else None)
            if reason is None:
                return frame
    if not recompute:
        raise _damaged(path, reason, CACHE_REMEDY)
    set_aside(path, reason)
    return None


def read_json_cache(path: str | os.PathLike) -> dict[str, Any]:
    """A JSON object written beside the caches (``run.json``, a trainer's state; {} when absent); a damaged
    one is a PRBError naming it and what to delete."""
    return _read_json(Path(path), remedy=CACHE_REMEDY)


JOB_REMEDY = "delete it (the scores are kept and the next score run of this job writes it again)"


def _read_json(path: Path, remedy: str = JOB_REMEDY) -> dict[str, Any]:
    """A job's ``job.json`` ({} when absent); PRBError naming the file when it is damaged."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as exc:
        raise _damaged(path, f"invalid JSON at line {exc.lineno}, column {exc.colno}", remedy) from None
    except UnicodeDecodeError:
        raise _damaged(path, "not UTF-8 text", remedy) from None
    except IsADirectoryError:
        raise _damaged(path, "a folder where the file should be", remedy) from None
    except OSError as exc:
        raise PRBError(f"Cannot read the store file {path} ({exc.strerror or exc}).") from None
    if not isinstance(value, dict):
        raise _damaged(path, "not a JSON object", remedy)
    return value


#: The fields of a ``job.json`` that prb reads as objects (``pairs``: pair key -> pair hash) or whole numbers.
JOB_OBJECT_FIELDS = ("pairs", "questions", "users", "options", "run", "data")
JOB_NUMBER_FIELDS = ("n_pairs",)


def _read_job_json(path: Path) -> dict[str, Any]:
    """A job's ``job.json`` (:func:`_read_json`), its fields of the types prb reads: PRBError naming the file and
    the field otherwise (a ``pairs`` that is a string, an ``n_pairs`` that is text).

    >>> import tempfile
    >>> bad = Path(tempfile.mkdtemp()) / "job.json"
    >>> _ = bad.write_text('{"pairs": "abc"}')
    >>> _read_job_json(bad)
    Traceback (most recent call last):
    ...
    prb_utils.errors.PRBError: The store file ... is damaged (its field 'pairs' is a string, not an object); ...
    """
    meta = _read_json(path)
    for name in JOB_OBJECT_FIELDS:
        value = meta.get(name)
        if value is not None and not isinstance(value, dict):
            raise _damaged(path, f"its field '{name}' is {_json_kind(value)}, not an object", JOB_REMEDY)
    pairs = meta.get("pairs") or {}
    if not all(isinstance(h, str) for h in pairs.values()):
        raise _damaged(path, "its field 'pairs' holds a pair hash that is not a string", JOB_REMEDY)
    for name in JOB_NUMBER_FIELDS:
        value = meta.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise _damaged(path, f"its field '{name}' is {_json_kind(value)}, not a whole number", JOB_REMEDY)
    return meta


def _json_kind(value: Any) -> str:
    """How a JSON value's type reads in a sentence.

    >>> _json_kind("x"), _json_kind([1]), _json_kind(True), _json_kind(1.5)
    ('a string', 'a list', 'true or false', 'a number')
    """
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int | float):
        return "a number"
    return "null" if value is None else "an object"


def _read_part(path: Path) -> pd.DataFrame:
    """One part file; PRBError naming it when it is damaged (FileNotFoundError passes through)."""
    remedy = "delete it to rescore those pairs"
    try:
        frame = pd.read_parquet(path)
    except FileNotFoundError:
        raise
    except (pa.ArrowException, ValueError):
        raise _damaged(path, "not a complete parquet file", remedy) from None
    except OSError as exc:
        raise PRBError(f"Cannot read the store file {path} ({exc.strerror or exc}).") from None
    if not {"subset", "id"} <= set(frame.columns):
        raise _damaged(path, "no subset and id columns", remedy)
    return frame


def _read_own_part(path: Path) -> pd.DataFrame:
    """A part file whose rows all belong to the job of its folder (PRBError naming the file otherwise)."""
    frame = _read_part(path)
    if "job" in frame.columns and len(frame):
        foreign = sorted(set(frame["job"].astype(str)) - {path.parent.name})
        if foreign:
            raise PRBError(f"The store file {path} holds rows of another job ({', '.join(foreign[:3])}), not of "
                           f"job {path.parent.name}; it was copied or moved there: remove it.")
    return frame


def _read_job(folder: Path) -> pd.DataFrame:
    """All rows of one job folder, newest row per (subset, id); tolerant of a concurrent compaction.

    A damaged part file (cut short by a copy, a sync tool or a full disk; the store itself never writes
    half a file) or one holding another job's rows raises PRBError naming it: nothing is dropped, replaced
    or rescored behind the user's back.
    """
    for _ in range(5):
        try:
            frames = [_read_own_part(part) for part in _parts(folder)]
            break
        except FileNotFoundError:  # a part was merged away between listing and reading; list again
            continue
    else:
        frames = [_read_own_part(part) for part in _parts(folder)]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return tidy_rows([])
    rows = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    rows = rows.drop_duplicates(["subset", "id"], keep="last")
    return tidy_rows(rows)


def _job_folders(out: str | os.PathLike) -> list[Path]:
    root = Path(out) / JOBS_DIR
    if not root.is_dir():
        return []
    folders = [p for p in root.iterdir() if p.is_dir()]
    return sorted(folders, key=lambda p: (str(_read_job_json(p / JOB_FILE).get("created") or ""), p.name))


class StoreShortfallWarning(UserWarning):
    """A finished job holds fewer rows than the pairs its ``job.json`` expects, or a job of an older prb may pool
    two data sets."""


def missing_pairs(expected: Mapping[str, str], rows: pd.DataFrame) -> list[str]:
    """The ``subset/id`` keys of ``expected`` (key -> pair hash) without a row of that hash. Keys are compared
    whole, never split, so a subset or id holding "/" is found like any other.

    >>> rows = pd.DataFrame({"subset": ["a/b"], "id": ["1"], "pair_hash": ["h"]})
    >>> missing_pairs({"a/b/1": "h", "a/b/2": "h"}, rows)
    ['a/b/2']
    """
    held = set(zip(rows["subset"].astype(str) + "/" + rows["id"].astype(str), rows["pair_hash"], strict=True))
    return [key for key, h in expected.items() if (key, h) not in held]


def shortfall(folder: Path, rows: pd.DataFrame, meta: Mapping[str, Any]) -> str | None:
    """A sentence naming the job and the counts when a finished job lacks rows of its expected pairs."""
    expected = meta.get("pairs") or {}
    if not meta.get("finished") or not expected:
        return None
    missing = missing_pairs(expected, rows)
    if not missing:
        return None
    return (f"Job {folder.name} ({meta.get('model')} [{meta.get('profile')}]) holds {len(expected) - len(missing)} "
            f"of its {len(expected)} pairs (missing e.g. {missing[0]}): part files are gone; rerun `prb score` "
            "for it to rescore them.")


def pooled(folder: Path, rows: pd.DataFrame, meta: Mapping[str, Any]) -> str | None:
    """A sentence naming a job written before prb recorded a job's data (no ``data`` record in its ``job.json``)
    that holds more rows than its last run scored, or rows of pairs its record does not list: such a job may pool
    more than one data set (two files scored into one ``--out`` by an older prb shared one job).

    >>> rows = pd.DataFrame({"subset": ["S"] * 3, "id": ["1", "2", "3"], "pair_hash": ["a", "b", "c"]})
    >>> pooled(Path("jobs/abc"), rows, {"model": "length", "profile": "none", "n_pairs": 1}).split(",")[0]
    'Job abc (length [none]) holds 3 rows but its last run scored 1 pairs'
    >>> pooled(Path("jobs/abc"), rows, {"n_pairs": 1, "data": {"source": "sample", "digest": "d"}}) is None
    True
    """
    if not meta or isinstance(meta.get("data"), Mapping) or rows.empty:
        return None
    listed = meta.get("pairs") or {}
    keys = rows["subset"].astype(str) + "/" + rows["id"].astype(str)
    unlisted = int((~keys.isin(list(listed))).sum()) if listed else 0
    scored = meta.get("n_pairs")
    more = isinstance(scored, int) and len(rows) > scored
    if not unlisted and not more:
        return None
    named = f"its last run scored {scored} pairs" if more else f"its record lists {len(listed)} of them"
    return (f"Job {folder.name} ({meta.get('model')} [{meta.get('profile')}]) holds {len(rows)} rows but {named}, "
            "and an older prb recorded no data set for it: it may pool more than one data set; score it again "
            "into a new --out to keep them apart.")


def load_results(out: str | os.PathLike = "results", *, strict: bool = False) -> pd.DataFrame:
    """Every per-item row in the store (``RESULT_COLUMNS`` + ``job_label`` + ``score_dtype``: the dtype the job
    scored in, + ``judge_mode``: a judge job's recorded mode, ``logprob`` or ``generate``; each None where the
    job recorded none), jobs in creation order.

    Rows are unique on (job, subset, id): the newest row wins. A finished job that lacks rows of pairs it
    expects (:func:`shortfall`), or a job of an older prb that may pool two data sets (:func:`pooled`), is
    reported: a :class:`StoreShortfallWarning` naming it and the counts, or a PRBError when ``strict``; the
    messages are also kept in ``frame.attrs["shortfalls"]``.
    """
    frames, metas, problems = [], {}, []
    for folder in _job_folders(out):
        rows, meta = _read_job(folder), _read_job_json(folder / JOB_FILE)
        problems += [p for p in (shortfall(folder, rows, meta), pooled(folder, rows, meta)) if p]
        metas[folder.name] = meta
        if not rows.empty:
            frames.append(rows)
    _report_shortfalls(problems, strict=strict)
    if not frames:
        rows = tidy_rows([]).assign(job_label=pd.Series(dtype=object))
    else:
        rows = tidy_rows(pd.concat(frames, ignore_index=True).drop_duplicates(["job", "subset", "id"], keep="last"))
        rows = add_job_labels(rows, metas)
    rows["score_dtype"] = rows["job"].map({job: (meta.get("options") or {}).get("dtype") for job, meta in metas.items()})
    rows["judge_mode"] = rows["job"].map({job: (meta.get("options") or {}).get("judge_mode") for job, meta in metas.items()})
    rows.attrs["shortfalls"] = problems
    return rows


def pair_units(out: str | os.PathLike = "results") -> pd.DataFrame:
    """``subset, id, question, user`` of every pair the store's jobs recorded (hashes of the question text and of
    the user: the record's ``user_id``, else its profile; :func:`prb_utils.data.user_key`, kept in each
    ``job.json``), for :func:`prb_utils.analysis.metrics.unit_labels`; jobs
    written before prb recorded them add nothing (their pairs are then their own units)."""
    keys: dict[str, dict[str, str]] = {}
    for folder in _job_folders(out):
        meta = _read_job_json(folder / JOB_FILE)
        for unit in UNITS:
            for pair, value in (meta.get(f"{unit}s") or {}).items():
                keys.setdefault(pair, {})[unit] = value
    rows = [(*pair.split("/", 1), *(units.get(u) for u in UNITS)) for pair, units in keys.items() if "/" in pair]
    return pd.DataFrame(rows, columns=["subset", "id", *UNITS])


def query_results(out: str | os.PathLike, *, models: Sequence[str] = (), profiles: Sequence[str] = (),
                  data: pd.DataFrame | None = None) -> pd.DataFrame:
    """The store's rows of these model specs and profile conditions (all when a list is empty), restricted to
    the pairs (``subset``, ``id``) of ``data`` when given: the one query behind every page, table and file of
    a report, so that no number pools rows of another data set. Jobs stay apart (``job``, ``job_label``);
    the labels tell apart the jobs the query returns (a job under a condition left out, such as another
    retriever's ``top2`` for page 04, does not rename the others). Where ``data`` carries its identity
    (:func:`prb_utils.data.load_benchmark`), a job of other data that shares its pair names (an edited copy
    of it) is left out whenever a job of the same model and condition scored this very data."""
    rows = load_results(out)
    if models and not rows.empty:
        rows = rows[rows["model"].isin([canonical_spec(m) for m in models])]
    if profiles and not rows.empty:
        rows = rows[rows["profile"].isin([parse_condition(p).name for p in profiles])]
        rows = add_job_labels(rows, out=out)
    if data is not None and not rows.empty:
        keys = pd.MultiIndex.from_frame(data[["subset", "id"]].astype(str))
        rows = rows[pd.MultiIndex.from_frame(rows[["subset", "id"]].astype(str)).isin(keys)]
        rows = _of_this_data(rows, out, (data.attrs.get(DATA_ATTR) or {}).get("digest"))
    return rows.reset_index(drop=True)


def _of_this_data(rows: pd.DataFrame, out: str | os.PathLike, digest: str | None) -> pd.DataFrame:
    """``rows`` less the jobs of other data (their recorded digest is not ``digest``) under a (model, profile)
    where a job recorded ``digest``, relabelled when any is left out."""
    if not digest or rows.empty:
        return rows
    root = Path(out) / JOBS_DIR
    jobs = rows[["job", "model", "profile"]].drop_duplicates("job")
    recorded = {job: data_fact(_read_job_json(root / str(job) / JOB_FILE))[1] for job in jobs["job"]}
    jobs = jobs.assign(ours=jobs["job"].map(recorded) == digest)
    covered = jobs.groupby(["model", "profile"], sort=False)["ours"].transform("any")
    other = set(jobs.loc[covered & ~jobs["ours"], "job"])
    return add_job_labels(rows[~rows["job"].isin(other)], out=out) if other else rows


def _report_shortfalls(problems: list[str], *, strict: bool) -> None:
    if problems and strict:
        raise PRBError(" ".join(problems))
    for problem in problems:
        warnings.warn(problem, StoreShortfallWarning, stacklevel=3)


# ---------------------------------------------------------------------------------------- job labels

#: Options shown bare in a label (their values say what they are); others are shown as ``name=value``.
BARE_OPTIONS = ("device", "dtype", "judge_mode", "retriever", "tokenization", "engine")


def _job_facts(meta: Mapping[str, Any]) -> dict[str, Any]:
    """What distinguishes one job of a model spec from another: its options, fingerprint and data."""
    facts = dict(meta.get("options") or {})
    if meta.get("fingerprint"):
        facts["fingerprint"] = meta["fingerprint"]
    facts["data"] = data_fact(meta)
    return facts


def data_fact(meta: Mapping[str, Any]) -> tuple[str, str | None]:
    """``(name, digest)`` of the data a job's ``job.json`` records: its source's name (``frame`` for a frame built
    in code, ``unrecorded`` for a job of an older prb) and digest.

    >>> data_fact({"data": {"source": "other.jsonl", "digest": "9f8e7d6c5b4a3210"}}), data_fact({})
    (('other.jsonl', '9f8e7d6c5b4a3210'), ('unrecorded', None))
    """
    record = meta.get("data")
    if not isinstance(record, Mapping):
        return ("unrecorded", None)
    return (str(record.get("source") or "frame"), record.get("digest"))


def _data_texts(facts: Mapping[str, tuple[str, str | None]]) -> dict[str, str]:
    """``{job: text}`` for the data facts of one model spec's jobs: the source's name, with the digest's first 8
    digits where one name stands for two data sets (an edited file)."""
    digests: dict[str, set[Any]] = {}
    for name, digest in facts.values():
        digests.setdefault(name, set()).add(digest)
    return {job: f"data={name}" + (f"@{digest[:8]}" if len(digests[name]) > 1 and digest else "")
            for job, (name, digest) in facts.items()}


def _fact_text(name: str, value: Any) -> str:
    return str(value) if name in BARE_OPTIONS and value is not None else f"{name}={value}"


def job_labels(jobs: pd.DataFrame, metas: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """``{job: label}`` for a frame with one row per job (``job``, ``model``, ``profile``).

    A fact (option or fingerprint) joins the labels of a model spec when two of its jobs under one
    profile condition differ in it; the same fact is then shown for every job of that spec, so labels match
    across profile conditions, except the default retriever (``bm25``: what ``top{K}`` means), which no label
    says (``lexical`` beside ``lexical [random]``). A label that would still name two jobs under one condition
    gets the job key.
    """
    labels: dict[str, str] = {}
    for model, group in jobs.groupby("model", sort=False, dropna=False):
        facts = {job: _job_facts(metas.get(job) or {}) for job in group["job"]}
        varying: list[str] = []
        for _, same in group.groupby("profile", sort=False, dropna=False):
            for name in sorted({n for job in same["job"] for n in facts[job]}):
                values = {repr(facts[job].get(name)) for job in same["job"]}
                if len(values) > 1 and name not in varying:
                    varying.append(name)
        data = _data_texts({job: facts[job]["data"] for job in group["job"]})
        for job in group["job"]:
            shown = [data[job] if n == "data" else _fact_text(n, facts[job][n]) for n in varying
                     if n in facts[job] and (n, facts[job][n]) != ("retriever", DEFAULT_RETRIEVER)]
            labels[job] = f"{model} [{', '.join(shown)}]" if shown else str(model)
    return _unique_labels(jobs, labels)


def _unique_labels(jobs: pd.DataFrame, labels: dict[str, str]) -> dict[str, str]:
    taken = jobs.assign(_label=jobs["job"].map(labels))
    clash = taken.duplicated(["_label", "profile"], keep=False)
    for job in taken.loc[clash, "job"]:
        labels[job] = f"{labels[job]} [job={job}]"
    return labels


def add_job_labels(rows: pd.DataFrame, metas: Mapping[str, Mapping[str, Any]] | None = None,
                   out: str | os.PathLike | None = None) -> pd.DataFrame:
    """``rows`` with a ``job_label`` column (see :func:`job_labels`); ``metas`` maps job keys to their
    ``job.json``, read from the store ``out`` when not given."""
    if metas is None:
        root = Path(out or "results") / JOBS_DIR
        metas = {job: _read_job_json(root / str(job) / JOB_FILE) for job in rows["job"].dropna().unique()}
    jobs = rows[["job", "model", "profile"]].drop_duplicates("job")
    return rows.assign(job_label=rows["job"].map(job_labels(jobs, metas)))


def load_run_metadata(out: str | os.PathLike = "results") -> pd.DataFrame:
    """One row per job: job, model, kind, profile, model fingerprint, options (``option_*``), its data (``data_*``:
    ``source``, ``digest``, ``pairs`` in the source, ``subsets``, ``limit``, :func:`prb_utils.data.data_identity`;
    the source ``unrecorded`` for a job of an older prb, ``frame`` for a frame built in code), the fingerprint of the pairs its last run scored (``data_fingerprint``),
    times, row count, and the run metadata of the last run that scored anything (versions, dtype, device, ...)."""
    records = []
    for folder in _job_folders(out):
        meta = _read_job_json(folder / JOB_FILE)
        if not meta:
            continue
        record: dict[str, Any] = {
            "job": meta.get("key", folder.name),
            "model": meta.get("model"),
            "kind": meta.get("kind"),
            "profile": meta.get("profile"),
            "fingerprint": meta.get("fingerprint"),
            "data_fingerprint": meta.get("data_fingerprint"),
            "n_pairs": meta.get("n_pairs"),
            "n_rows": len(_read_job(folder)),
            "created": meta.get("created"),
            "finished": meta.get("finished"),
        }
        for name, value in (meta.get("options") or {}).items():
            record[f"option_{name}"] = value
        data = meta.get("data") if isinstance(meta.get("data"), Mapping) else {}
        for name in DATA_FIELDS:
            record[f"data_{name}"] = data.get(name)
        record["data_source"] = data_fact(meta)[0]
        for name, value in (meta.get("run") or {}).items():
            if name == "spec" and value == record["model"] or record.get(name, object()) == value:
                continue  # the job already says it
            record[name if name not in record else f"run_{name}"] = value
        records.append(record)
    return pd.DataFrame(records)


DATA_FIELDS = ("source", "digest", "pairs", "subsets", "limit")  #: a job's data record, as ``data_*`` columns


def data_note(jobs: pd.DataFrame) -> str:
    """One line naming the data sets of the store's jobs (``jobs``: :func:`load_run_metadata`): each source with
    its digest, its pairs and filters, and how many jobs scored it with how many pairs.

    >>> jobs = pd.DataFrame({"data_source": ["sample", "sample", "other.jsonl"], "n_rows": [42, 42, 5],
    ...                      "data_digest": ["1a2b3c4d5e", "1a2b3c4d5e", "9f8e7d6c5b"], "data_pairs": [42, 42, 10],
    ...                      "data_subsets": [None, None, None], "data_limit": [None, None, 5]})
    >>> print(data_note(jobs))
    Data: sample [1a2b3c4d, 42 pairs]: 2 jobs of 42 pairs; other.jsonl [9f8e7d6c, 10 pairs, --limit 5]: 1 job of 5 pairs.
    """
    if jobs.empty:
        return ""
    parts = []
    for (name, digest), group in jobs.groupby([jobs["data_source"], jobs["data_digest"].fillna("")], sort=False):
        first = group.iloc[0]
        facts = [str(digest)[:8]] if digest else []
        if pd.notna(first.get("data_pairs")):
            facts.append(f"{int(first['data_pairs'])} pairs")
        if isinstance(first.get("data_subsets"), list) and first["data_subsets"]:
            facts.append(" ".join(f"--subset {s}" for s in first["data_subsets"]))
        if pd.notna(first.get("data_limit")):
            facts.append(f"--limit {int(first['data_limit'])}")
        if name == "unrecorded":
            facts.append("scored by an older prb, which kept no data identity")
        low, high = int(group["n_rows"].min()), int(group["n_rows"].max())
        held = f"{low} pairs" if low == high else f"{low}-{high} pairs"
        jobs_text = f"{len(group)} job{'s' if len(group) != 1 else ''} of {held}"
        parts.append(f"{name}{' [' + ', '.join(facts) + ']' if facts else ''}: {jobs_text}")
    return "Data: " + "; ".join(parts) + "."
