"""Load and validate Personalized RewardBench data into one tidy frame (one row per pair).

Sources: ``"sample"`` (the shipped sample), a hub id (every config, or chosen ones, via ``datasets``), or a
local ``.jsonl`` / ``.json`` / ``.parquet`` file, a folder of those, a ``save_to_disk`` folder, or a local
folder laid out like a hub dataset repository (a ``README.md`` whose YAML lists ``configs``) which goes
through exactly the hub code path.

>>> df = load_benchmark("sample", limit=2)
>>> sorted(df["subset"].unique())
['Art_and_Entertainment', 'Lifestyle_and_Personal_Development', 'Society_and_Culture']
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import yaml

from prb_utils.errors import DataError, PRBError
from prb_utils.resources import resource_dir
from prb_utils.schema import pair_key, stable_hash

SAMPLE_DIR = resource_dir("data") / "sample"  # the repository's data/, or the packaged copy
HUB_ID = "QiyaoMa/Personalized-RewardBench"
SPLIT = "test"
FILE_SUFFIXES = (".jsonl", ".json", ".parquet")
REQUIRED_TEXT_FIELDS = ("id", "question", "chosen", "rejected")
DATA_ATTR = "data"  #: the key of a loaded frame's ``attrs`` that holds its :func:`data_identity`
COLUMNS = ["subset", "id", "question", "profile", "rubric_aspects", "narrative", "category", "chosen", "rejected"]


@dataclass(frozen=True)
class RawRecord:
    """One record as read, with where it came from (for error messages)."""

    subset: str
    origin: str  # e.g. "data/x.jsonl:12" or "QiyaoMa/...[Society_and_Culture] record 3"
    record: Any


@dataclass(frozen=True)
class Problem:
    """One validation problem: where, which record, which field, what is wrong."""

    origin: str
    record_id: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        who = f" (id {self.record_id})" if self.record_id else ""
        what = f" field '{self.field}':" if self.field else ""
        return printable(f"{self.origin}{who}:{what} {self.message}")


def printable(text: str) -> str:
    """``text`` with lone surrogates replaced, so that it can always be printed or written as UTF-8."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _parse_json(text: str) -> tuple[Any, str | None]:
    """(value, None) or (None, why it is not JSON we can read): bad syntax, or nested too deeply."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
    except RecursionError:
        return None, "nested too deeply to be a PRB record"


# --------------------------------------------------------------------------------------------- reading


def _read_jsonl(path: Path, subset: str) -> Iterator[RawRecord | Problem]:
    raw = path.read_bytes()
    if not raw.strip():
        yield Problem(str(path), None, None, "file is empty")
        return
    for number, line in enumerate(raw.splitlines(), start=1):
        origin = f"{path}:{number}"
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            yield Problem(origin, None, None, f"not valid UTF-8 (byte {exc.start})")
            continue
        value, why = _parse_json(text)
        yield Problem(origin, None, None, why) if why else RawRecord(subset, origin, value)


def _read_json(path: Path, subset: str) -> Iterator[RawRecord | Problem]:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        yield Problem(str(path), None, None, f"not valid UTF-8 (byte {exc.start})")
        return
    content, why = _parse_json(text)
    if why:
        yield Problem(str(path), None, None, why)
        return
    if isinstance(content, dict) and isinstance(content.get("data"), list):
        content = content["data"]
    if not isinstance(content, list):
        yield Problem(str(path), None, None, "expected a JSON list of records")
        return
    if not content:
        yield Problem(str(path), None, None, "file holds no records")
    for index, record in enumerate(content):
        yield RawRecord(subset, f"{path} record {index}", record)


def _read_parquet(path: Path, subset: str) -> Iterator[RawRecord | Problem]:
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises several types for a broken file
        yield Problem(str(path), None, None, f"cannot be read as parquet ({exc})")
        return
    if not rows:
        yield Problem(str(path), None, None, "file holds no records")
    for index, record in enumerate(rows):
        yield RawRecord(subset, f"{path} record {index}", record)


_READERS = {".jsonl": _read_jsonl, ".json": _read_json, ".parquet": _read_parquet}


def _read_file(path: Path, subset: str | None = None) -> Iterator[RawRecord | Problem]:
    suffix = path.suffix.lower()
    if suffix not in _READERS:
        raise PRBError(f"{path} is not a .jsonl, .json or .parquet file.")
    yield from _READERS[suffix](path, subset or path.stem)


def _is_save_to_disk(folder: Path) -> bool:
    return (folder / "dataset_dict.json").exists() or (folder / "state.json").exists()


def _is_hub_layout(folder: Path) -> bool:
    readme = folder / "README.md"
    return readme.exists() and re.search(r"^configs:", readme.read_text(errors="replace"), re.M) is not None


def _records_from_dataset(dataset: Any, subset: str, origin: str) -> Iterator[RawRecord | Problem]:
    """Records of one ``datasets.Dataset`` (shared by the hub path and ``save_to_disk`` folders)."""
    if len(dataset) == 0:
        yield Problem(origin, None, None, "subset holds no records")
    for index, record in enumerate(dataset):
        yield RawRecord(subset, f"{origin} record {index}", record)


def _data_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in FILE_SUFFIXES and p.is_file())


def _read_save_to_disk(folder: Path) -> Iterator[RawRecord | Problem]:
    import datasets

    try:
        loaded = datasets.load_from_disk(str(folder))
    except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
        marker = "dataset_dict.json" if (folder / "dataset_dict.json").exists() else "state.json"
        raise PRBError(
            f"{folder} has a {marker} but is not a readable save_to_disk folder ({type(exc).__name__}); "
            f"remove the stray {marker} to read the data files beside it."
        ) from exc
    if isinstance(loaded, datasets.DatasetDict):
        if list(loaded.keys()) == [SPLIT]:
            yield from _records_from_dataset(loaded[SPLIT], folder.name, str(folder))
        else:
            for name, dataset in loaded.items():
                yield from _records_from_dataset(dataset, name, f"{folder}[{name}]")
    else:
        yield from _records_from_dataset(loaded, folder.name, str(folder))


def _read_hub(source: str, subsets: Sequence[str] | None) -> Iterator[RawRecord | Problem]:
    """Every config (or the chosen ones) of a hub dataset; a local folder in hub layout works the same way."""
    import datasets

    try:
        configs = datasets.get_dataset_config_names(source)
        chosen = _choose_subsets(configs, subsets, source)
        for config in chosen:
            dataset = datasets.load_dataset(source, config, split=SPLIT)
            yield from _records_from_dataset(dataset, config, f"{source}[{config}]")
    except PRBError:
        raise
    except yaml.YAMLError as exc:
        raise PRBError(f"The configs: block of {source}/README.md is not valid YAML ({exc.__class__.__name__}).") from exc
    except (ConnectionError, OSError, FileNotFoundError, ValueError) as exc:
        raise PRBError(
            f"Cannot load the dataset '{source}' ({type(exc).__name__}); it is neither a local path nor a "
            "reachable hub dataset (no network? use --data sample or a local file)."
        ) from exc


def _choose_subsets(available: Sequence[str], wanted: Sequence[str] | None, source: str) -> list[str]:
    if not wanted:
        return list(available)
    unknown = [s for s in wanted if s not in available]
    if unknown:
        raise PRBError(
            f"Unknown subset {', '.join(unknown)} in {source}; available: {', '.join(available) or 'none'}."
        )
    return list(wanted)


def _local_path(source: str) -> Path:
    if not source.strip():
        raise PRBError("The data source is empty; give 'sample', a hub id, or a local file or folder.")
    try:
        return Path(source).expanduser()
    except RuntimeError as exc:  # "~nosuchuser/..."
        raise PRBError(f"Cannot expand the home folder in {source} (no such user).") from exc


def _looks_local(source: str, path: Path) -> bool:
    """A path the user meant as local: it names a data file, or its parent folder exists."""
    return path.suffix.lower() in FILE_SUFFIXES or (path.parent != Path(".") and path.parent.is_dir())


def _iter_source(source: str, subsets: Sequence[str] | None) -> Iterator[RawRecord | Problem]:
    if source == "sample":
        source = str(SAMPLE_DIR)
    path = _local_path(source)
    if path.is_file():
        yield from _read_file(path)
    elif path.is_dir():
        if _is_save_to_disk(path):
            yield from _read_save_to_disk(path)
        elif _is_hub_layout(path):
            yield from _read_hub(str(path), subsets)
        else:
            yield from _read_folder(path, subsets)
    elif source.count("/") == 1 and not source.startswith((".", "/", "~")) and not _looks_local(source, path):
        yield from _read_hub(source, subsets)
    else:
        raise PRBError(f"{source} does not exist (expected 'sample', a hub id or a local file or folder).")


def _read_folder(path: Path, subsets: Sequence[str] | None) -> Iterator[RawRecord | Problem]:
    """A folder of data files, one subset per file stem (only the wanted subsets' files are read)."""
    files = _data_files(path)
    if not files:
        raise PRBError(f"{path} holds no .jsonl, .json or .parquet files.")
    stems: dict[str, Path] = {}
    for file in files:
        if file.stem in stems:
            raise PRBError(f"{stems[file.stem].name} and {file.name} in {path} both give subset '{file.stem}'; keep one.")
        stems[file.stem] = file
    for file in files:
        if not subsets or file.stem in subsets:
            yield from _read_file(file)


# ------------------------------------------------------------------------------------------ validation


def _check_posts(value: Any, raw: RawRecord, record_id: str | None) -> tuple[list[dict], list[Problem]]:
    if value is None:
        return [], []
    if not isinstance(value, list):
        return [], [Problem(raw.origin, record_id, "profile", f"expected a list of posts, got {type(value).__name__}")]
    posts, problems = [], []
    for index, post in enumerate(value):
        if not isinstance(post, dict) or not isinstance(post.get("text"), str):
            problems.append(Problem(raw.origin, record_id, f"profile[{index}]", "expected an object with a 'text' string"))
            continue
        posts.append(
            {
                "id": str(post.get("id") or f"{record_id}-p{index + 1}"),
                "category": str(post.get("category") or ""),
                "text": post["text"],
            }
        )
    return posts, problems


def _check_aspects(value: Any, raw: RawRecord, record_id: str | None) -> tuple[list[dict], list[Problem]]:
    if value is None:
        return [], []
    if not isinstance(value, list):
        return [], [Problem(raw.origin, record_id, "rubric_aspects", f"expected a list, got {type(value).__name__}")]
    aspects, problems = [], []
    for index, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("aspect"), str):
            problems.append(
                Problem(raw.origin, record_id, f"rubric_aspects[{index}]", "expected an object with an 'aspect' string")
            )
            continue
        aspects.append({k: str(item.get(k) or "") for k in ("aspect", "evidence", "reason")})
    return aspects, problems


def _has_surrogate(value: Any) -> bool:
    """True when a text (or a key) holds a lone UTF-16 surrogate (valid JSON escape, not encodable text)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def check_record(raw: RawRecord) -> tuple[dict | None, list[Problem]]:
    """Normalize one raw record; return (row or None, problems)."""
    record = raw.record
    if not isinstance(record, dict):
        return None, [Problem(raw.origin, None, None, f"expected a JSON object, got {type(record).__name__}")]
    record_id = record.get("id")
    shown_id = str(record_id) if isinstance(record_id, (str, int)) and str(record_id).strip() else None
    if shown_id is not None:
        shown_id = printable(shown_id)
    problems: list[Problem] = []
    for field in REQUIRED_TEXT_FIELDS:
        value = record.get(field)
        if value is None:
            problems.append(Problem(raw.origin, shown_id, field, "missing"))
        elif not isinstance(value, str):
            problems.append(Problem(raw.origin, shown_id, field, f"expected a string, got {type(value).__name__}"))
        elif not value.strip():
            problems.append(Problem(raw.origin, shown_id, field, "empty string"))
    for field in ("narrative", "category", "subset"):
        value = record.get(field)
        if value is not None and not isinstance(value, str):
            problems.append(Problem(raw.origin, shown_id, field, f"expected a string, got {type(value).__name__}"))
    user_id = record.get("user_id")
    if user_id is not None and (isinstance(user_id, bool) or not isinstance(user_id, (str, int))
                                or not str(user_id).strip()):
        problems.append(Problem(raw.origin, shown_id, "user_id", "expected a non-empty string or an integer, got "
                                + (repr(user_id) if isinstance(user_id, str) else type(user_id).__name__)))
    posts, post_problems = _check_posts(record.get("profile"), raw, shown_id)
    aspects, aspect_problems = _check_aspects(record.get("rubric_aspects"), raw, shown_id)
    problems += post_problems + aspect_problems
    chosen, rejected = record.get("chosen"), record.get("rejected")
    problems += [
        Problem(raw.origin, shown_id, printable(field), "contains an unpaired surrogate (not valid Unicode text)")
        for field, value in record.items()
        if _has_surrogate(field) or _has_surrogate(value)
    ]
    if isinstance(chosen, str) and isinstance(rejected, str) and chosen.strip() and chosen.strip() == rejected.strip():
        problems.append(Problem(raw.origin, shown_id, "rejected", "identical to 'chosen'"))
    if problems:
        return None, problems
    row = {key: value for key, value in record.items() if key not in COLUMNS}
    row.update(
        subset=own_subset if isinstance(own_subset := record.get("subset"), str) and own_subset.strip() else raw.subset,
        id=str(record["id"]),
        question=record["question"],
        profile=posts,
        rubric_aspects=aspects,
        narrative=record.get("narrative") or "",
        category=record.get("category") or "",
        chosen=chosen,
        rejected=rejected,
    )
    if user_id is not None:
        row["user_id"] = str(user_id).strip()
    return row, []


@dataclass
class LoadResult:
    """Rows that passed validation, every problem found, and one entry (id or origin) per dropped record."""

    frame: pd.DataFrame
    problems: list[Problem]
    bad_records: list[str]


def read_benchmark(source: str, *, subsets: Sequence[str] | None = None, limit: int | None = None) -> LoadResult:
    """Read and validate a source without raising on bad records (see :func:`load_benchmark`)."""
    rows: list[dict] = []
    problems: list[Problem] = []
    bad: list[str] = []
    seen: dict[tuple[str, str], str] = {}
    named: dict[str, tuple[str, str]] = {}   # pair_key -> (subset, id): "x/y" + "z" and "x" + "y/z" are refused
    for item in _iter_source(source, subsets):
        if isinstance(item, Problem):
            problems.append(item)
            bad.append(item.origin)
            continue
        row, found = check_record(item)
        if subsets and (row["subset"] if row is not None else item.subset) not in subsets:
            continue
        if row is not None:
            key = (row["subset"], row["id"])
            other = named.get(pair_key(*key))
            if key in seen:
                found = [Problem(item.origin, row["id"], "id", f"duplicate id (first seen at {seen[key]})")]
                row = None
            elif other is not None:
                found = [Problem(item.origin, row["id"], "id", f"subset {key[0]!r} with this id names the same "
                                 f"pair ({pair_key(*key)}) as id {other[1]!r} of subset {other[0]!r} (first seen "
                                 f"at {seen[other]}); rename one of the two ids")]
                row = None
            else:
                seen[key] = item.origin
                named[pair_key(*key)] = key
        if found:
            problems += found
            bad.append(found[0].record_id or item.origin)
        elif row is not None:
            rows.append(row)
    if subsets:
        present = {row["subset"] for row in rows}
        for subset in subsets:
            if subset not in present and not problems:
                raise PRBError(f"No records of subset '{subset}' in {source}.")
    return LoadResult(first_pairs(_to_frame(rows), limit), problems, bad)


def first_pairs(frame: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    """The first ``limit`` pairs of each subset (``frame`` itself when ``limit`` is None): ``--limit``."""
    if limit is None:
        return frame
    return frame.groupby("subset", sort=False, group_keys=False).head(limit).reset_index(drop=True)


def _to_frame(rows: Iterable[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(list(rows))
    if frame.empty:
        return pd.DataFrame(columns=COLUMNS)
    extra = [c for c in frame.columns if c not in COLUMNS]
    return frame[COLUMNS + extra]


def load_benchmark(
    source: str,
    *,
    subsets: Sequence[str] | None = None,
    limit: int | None = None,
    drop_invalid: bool = False,
) -> pd.DataFrame:
    """Load a benchmark as one row per pair (columns ``COLUMNS`` plus any extra record fields).

    Raises :class:`DataError` (one line per problem in ``.problems``) when records are invalid, unless
    ``drop_invalid`` is true: then exactly those records are dropped and listed in ``frame.attrs["dropped"]``.
    ``limit`` keeps the first N pairs of each subset. ``frame.attrs["data"]`` is the data's identity
    (:func:`data_identity`, digested before ``limit``, plus ``keys``, the :func:`pair_keys_digest` of the pairs
    returned): what a job of :func:`prb_utils.scoring.score_benchmark` is keyed by while the frame holds exactly
    these pairs.
    """
    result = read_benchmark(source, subsets=subsets)
    lines = [str(p) for p in result.problems]
    if result.problems and not drop_invalid:
        raise DataError(f"{len(lines)} problem(s) in {source}; fix them or pass --drop-invalid.", lines)
    if result.frame.empty:
        raise DataError(f"No valid records in {source}.", lines)
    identity = data_identity(source, result.frame, subsets=subsets, limit=limit)
    frame = first_pairs(result.frame, limit)
    identity["keys"] = pair_keys_digest(frame)
    frame.attrs["dropped"] = result.bad_records
    frame.attrs["problems"] = lines
    frame.attrs["source"] = source
    frame.attrs[DATA_ATTR] = identity
    return frame


def subset_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Pairs per subset, plus a total row."""
    counts = frame.groupby("subset").size().rename("pairs").reset_index()
    total = pd.DataFrame([{"subset": "total", "pairs": int(counts["pairs"].sum())}])
    return pd.concat([counts, total], ignore_index=True)


def data_fingerprint(frame: pd.DataFrame) -> str:
    """A stable hash of what a reward model can see (and the pair identity), order-independent.

    >>> a = load_benchmark("sample", limit=3)
    >>> data_fingerprint(a) == data_fingerprint(a.iloc[::-1])
    True
    """
    return stable_hash("".join(sorted(record_digests(frame).values())))


def source_name(source: str) -> str:
    """How a data source is named in a job's record and label: ``sample`` or a hub id as given, a local file or
    folder by its name alone (no machine path).

    >>> source_name("sample"), source_name("QiyaoMa/Personalized-RewardBench"), source_name("exports/x/other.jsonl")
    ('sample', 'QiyaoMa/Personalized-RewardBench', 'other.jsonl')
    """
    if source == "sample":
        return source
    path = Path(source).expanduser()
    local = path.exists() or path.suffix.lower() in FILE_SUFFIXES or source.startswith(("/", ".", "~"))
    return path.name if local else source


def data_identity(source: str, frame: pd.DataFrame, *, subsets: Sequence[str] | None = None,
                  limit: int | None = None) -> dict[str, Any]:
    """What data a job scores: ``source`` (:func:`source_name`), ``digest`` (:func:`data_fingerprint` of every
    valid record the source gave for ``subsets``, *before* ``limit``), ``pairs`` (how many), and the filters
    ``subsets`` and ``limit``. The digest is part of a job's key; the filters are only recorded: ``--limit 10``
    then ``--limit 20`` of one source is one job (the pair hashes tell the pairs apart), while another file, an
    edited record or another ``--subset`` selection is another data set, hence another job.

    >>> full = load_benchmark("sample")
    >>> a = data_identity("sample", full, limit=1)
    >>> a["digest"] == data_identity("sample", full, limit=5)["digest"], a["pairs"], a["limit"]
    (True, 42, 1)
    """
    return {"source": source_name(source), "digest": data_fingerprint(frame), "pairs": len(frame),
            "subsets": sorted(subsets) if subsets else None, "limit": limit}


def pair_keys_digest(frame: pd.DataFrame) -> str:
    """A hash of which pairs (``subset/id``) ``frame`` holds, order-independent: a loaded frame's identity holds
    only while its rows are the pairs it was loaded with (pandas keeps ``attrs`` through any edit).

    >>> a = load_benchmark("sample", limit=2)
    >>> pair_keys_digest(a) == pair_keys_digest(a.iloc[::-1]), pair_keys_digest(a) == pair_keys_digest(a.iloc[1:])
    (True, False)
    """
    return stable_hash(sorted(pair_key(str(s), str(i)) for s, i in zip(frame["subset"], frame["id"], strict=True)))


def record_digests(frame: pd.DataFrame) -> dict[tuple[str, str], str]:
    """``{(subset, id): digest}`` of what a reward model can see in each record (the parts of
    :func:`data_fingerprint`): ranks of one run compare them to find an edited record.

    >>> a = load_benchmark("sample", limit=1)
    >>> b = a.assign(chosen=a["chosen"] + "!")
    >>> [k for k, v in record_digests(a).items() if record_digests(b)[k] != v][:1]
    [('Art_and_Entertainment', 'art-001')]
    """
    keys = ["subset", "id", "question", "profile", "chosen", "rejected"]
    return {(str(row["subset"]), str(row["id"])): stable_hash([row[k] for k in keys], length=64)
            for row in frame[keys].to_dict("records")}


def user_key(profile: Any, user_id: Any = None) -> str:
    """The key of a pair's user, the unit "user" of clustered intervals and tests: the hash of the record's
    ``user_id`` when it carries one (a non-empty string: the same ``user_id`` in any subset or file is one user,
    whatever profile each record shows), else the hash of the profile (its posts' texts, in order). A question
    asked by two users has two user keys; one user's pairs share one.

    >>> user_key([{"text": "a"}]) == user_key([{"text": "a", "id": "x"}]) != user_key([{"text": "b"}])
    True
    >>> user_key([{"text": "a"}], "u7") == user_key([{"text": "b"}], "u7") != user_key([{"text": "a"}])
    True
    """
    if isinstance(user_id, str) and user_id.strip():
        return stable_hash({"user_id": user_id.strip()})
    posts = profile if isinstance(profile, (list, tuple)) else []
    return stable_hash([str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in posts])
