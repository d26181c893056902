"""Which Best-of-N run ``prb report`` shows on page 03, and whether it runs one of its own.

Page 03 ranks RMs by Best-of-N quality against their benchmark accuracy; a rank agreement needs at least
:data:`~prb_utils.downstream.correlation.MIN_RMS` RMs. The rules, as data the CLI only calls:

- a ``prb bon`` run in ``RESULTS/bon`` is shown when it covers the report's models, profile condition, answers and
  questions (the same records) and was judged by the report's judge (:func:`reusable_run`);
- otherwise the report runs its own small one, unless its models are too few to rank (:func:`too_few_to_rank`)
  and the user did not ask for a size: a run page 03 cannot rank is not worth its minutes;
- before its own run the report says its size (:func:`size_line`); prb has no measured rate for a Best-of-N run,
  so no time is estimated;
- page 03 shows a run only on the data it reads (:func:`made_on_other_data`): a run whose questions are not the
  page's, or differ from them, is named and left out, whether the report ran or skipped its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from prb_utils.downstream.correlation import MIN_RMS
from prb_utils.downstream.pipeline import question_digests
from prb_utils.downstream.rubric_judge import judge_identity
from prb_utils.errors import PRBError
from prb_utils.schema import canonical_spec
from prb_utils.store import read_json_cache

#: The report's own Best-of-N run, small enough for the report's few minutes on a CPU: answers per question and
#: questions per subset (``--bon-n``, ``--bon-limit``); ``prb bon`` runs the pipeline at any size.
REPORT_BON = {"n": 4, "limit": 1}

#: The folder (under the store) of the report's own run, apart from a ``prb bon`` run in ``bon/``.
REPORT_BON_FOLDER = "bon-report"


def too_few_to_rank(models: Sequence[str]) -> str:
    """Why page 03 could not rank ``models`` by Best-of-N ("" when it could: at least :data:`MIN_RMS` distinct
    model specs).

    >>> too_few_to_rank(["length", " Lexical "])
    '2 RMs (length, lexical); page 03 ranks RMs by Best-of-N only from 3'
    >>> too_few_to_rank(["length", "lexical", "embedding:minilm"])
    ''
    """
    specs = list(dict.fromkeys(canonical_spec(m) for m in models))
    if len(specs) >= MIN_RMS:
        return ""
    return f"{len(specs)} RM{'s' if len(specs) != 1 else ''} ({', '.join(specs)}); page 03 ranks RMs by Best-of-N " \
           f"only from {MIN_RMS}"


def size_line(n_questions: int, n_samples: int, judge: str, *, per_subset: int) -> str:
    """The one line said before the report's own run: its size (questions x answers, the RM scores and the judge's
    ratings it makes) and its judge.

    >>> size_line(3, 4, "proxy", per_subset=1)
    'Best-of-4 on 3 questions (1 per subset): 12 answers sampled, each scored by every RM and rated by the judge proxy'
    """
    return (f"Best-of-{n_samples} on {n_questions} questions ({per_subset} per subset): {n_questions * n_samples} "
            f"answers sampled, each scored by every RM and rated by the judge {judge}")


def reusable_run(folder: Path, data: pd.DataFrame, *, models: Sequence[str], rm_profile: str, judge: str,
                 n_samples: int, exact: bool) -> tuple[bool, str]:
    """Whether the ``prb bon`` run in ``folder`` can be shown for the report's ``data`` (the questions it would
    sample), ``models``, ``rm_profile``, ``judge``, answers per question and sampling mode, and the line to say
    about it ("" when there is no run to speak of). A damaged or older run (one that did not record its data and
    judge) is never shown; an exact run serves either sampling mode, a batched one the default only."""
    try:
        found = read_json_cache(folder / "run.json")
    except PRBError:   # a damaged run is not one to show: the report writes its own apart
        found = {}
    has_frame = (folder / "bon_frame.parquet").is_file()
    held = found.get("questions") if isinstance(found.get("questions"), dict) else {}
    other = [why for why, differs in (
        ("on other data", any(held.get(k) != v for k, v in question_digests(data).items())),
        (f"with another judge than {judge}", found.get("judge_identity") != judge_identity(judge)))
        if differs]
    if "questions" not in found or "judge_identity" not in found:
        other = ["by a prb that did not record its data and judge"]
    if found and other and has_frame:
        return False, f"Best-of-N: the run in {folder} was made {' and '.join(other)}; page 03 shows the report's own run"
    if (not other and set(models) <= set(found.get("models") or ()) and found.get("rm_profile") == rm_profile
            and (found.get("sampling", "exact") == "exact" or not exact)
            and int(found.get("n_samples") or 0) >= n_samples and int(found.get("n_questions") or 0) >= len(data)
            and has_frame):
        return True, (f"Best-of-N: page 03 shows the run in {folder} ({found['n_questions']} questions x "
                      f"{found['n_samples']} answers)")
    return False, ""


def made_on_other_data(run: dict, data: pd.DataFrame) -> str:
    """Why the Best-of-N run recorded in ``run`` (its ``run.json``) does not belong to ``data`` ("" when it does):
    none of the questions it sampled is among ``data``'s records, or some of them differ from them (the question,
    profile or rubric aspects it read: :func:`~prb_utils.downstream.pipeline.question_digests`). A run on a cut of
    ``data`` (fewer questions) or on a larger file that ``data`` is a cut of belongs to it. A run that did not record
    its questions (an older prb) cannot be checked: "" as well, and :func:`unchecked` says so.

    >>> from prb_utils.data import load_benchmark
    >>> data = load_benchmark("sample", limit=2)
    >>> run = {"questions": question_digests(data.head(1))}
    >>> made_on_other_data(run, data)
    ''
    >>> made_on_other_data(run, data.assign(question="Another question?"))
    'on other data: 1 of its 1 questions differ from the records here (question, profile or rubric aspects)'
    >>> made_on_other_data({"questions": {"other/1": "x"}}, data)
    'on other data: none of its 1 questions is among the records here'
    """
    held = run.get("questions") if isinstance(run.get("questions"), dict) else None
    if not held:
        return ""
    here = question_digests(data)
    shared = [key for key in held if key in here]
    if not shared:
        return f"on other data: none of its {len(held)} questions is among the records here"
    differ = sum(held[key] != here[key] for key in shared)
    if differ:
        return (f"on other data: {differ} of its {len(shared)} questions differ from the records here (question, "
                "profile or rubric aspects)")
    return ""


def unchecked(run: dict) -> str:
    """The sentence for a run that did not record its questions ("" for one that did).

    >>> unchecked({})
    'made by a prb that did not record its questions: prb cannot check that it was made on these records'
    """
    if isinstance(run.get("questions"), dict) and run["questions"]:
        return ""
    return "made by a prb that did not record its questions: prb cannot check that it was made on these records"
