"""How accuracy and RM input size grow with the profile: profile-size curves, retrieval ablation, oracle gap.

:func:`profile_size_curve` gives one row per model (job series), retriever and profile condition: ``k`` (posts
asked for: ``none`` 0, ``top{K}`` K, ``full`` the mean number of posts of the pairs), ``posts_shown`` (mean
posts the RM really saw, ``min(K, posts)``), accuracy with a percentile bootstrap interval **clustered by
question** (the same question text appears for two users, so its pairs are resampled together), and the mean
size of the RM's user message (``input_size``) in ``input_unit``: ``tokens`` when a tokenizer is given,
``characters`` otherwise. The user message is rebuilt from the data exactly as scoring builds it (same
condition, same retriever); a row whose rebuilt input does not hash to the stored ``pair_hash`` is counted in
``frame.attrs["input_mismatches"]`` (the data changed since scoring).

The oracle condition ``rubric`` (the RM sees the rubric aspects) is kept as its own row with ``oracle`` True and
``k`` NaN, and :func:`profile_size_plot` draws it as a separate marked line, never as a point of the curve.

>>> import pandas as pd
>>> data = pd.DataFrame({"subset": "s", "id": ["1", "2"], "question": ["Q?", "Q?"], "category": "c",
...     "profile": [[{"category": "c", "text": "p1"}, {"category": "c", "text": "p2"}]] * 2,
...     "chosen": ["a", "b"], "rejected": ["c", "d"]})
>>> rows = pd.DataFrame({"model": "length", "profile": ["none", "none", "full", "full"], "subset": "s",
...     "id": ["1", "2", "1", "2"], "outcome": ["wrong", "correct", "correct", "correct"]})
>>> curve = profile_size_curve(rows, data, n_boot=200)
>>> curve[["model", "profile", "k", "n", "n_questions", "accuracy", "input_size", "input_unit"]]
    model profile    k  n  n_questions  accuracy  input_size  input_unit
0  length    none  0.0  2            1       0.5         2.0  characters
1  length    full  2.0  2            1       1.0        74.0  characters
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from prb_utils.analysis.breakdowns import position_locked
from prb_utils.analysis.leaderboard import RULES
from prb_utils.analysis.marks import ORACLE_MARK
from prb_utils.analysis.metrics import compare, interval_over_units, require_columns, unit_columns
from prb_utils.analysis.plots import model_palette
from prb_utils.analysis.resampling import LEVEL, SEED
from prb_utils.analysis.rm_inputs import job_retrievers, rm_inputs
from prb_utils.errors import PRBError
from prb_utils.formatting import PROPORTION, format_signed, format_value
from prb_utils.models.kinds import MODEL_KINDS
from prb_utils.profile import parse_condition
from prb_utils.schema import DEFAULT_CONDITION, is_oracle
from prb_utils.store import BARE_OPTIONS

RETRIEVER_OPTIONS = ("retriever", "retriever_fingerprint", "retriever_seed")
CURVE_COLUMNS = ["model", "retriever", "profile", "k", "oracle", "n", "n_questions", "correct", "ties", "invalid",
                 "accuracy", "ci_low", "ci_high", "posts_shown", "input_size", "input_unit"]


# ------------------------------------------------------------------------------------------- job facts
def _spec_column(results: pd.DataFrame) -> str:
    """The column with the model spec: ``model_spec`` (notebook rows, where ``model`` is the job label)."""
    return "model_spec" if "model_spec" in results.columns else "model"


def job_series(results: pd.DataFrame, run_metadata: pd.DataFrame | None = None) -> pd.Series:
    """A label per row naming the model's job series: one curve per label, across profile conditions and
    retrievers (jobs that differ in anything else, e.g. dtype or seed, get different labels).

    Without ``run_metadata`` the label is the model spec.

    >>> import pandas as pd
    >>> meta = pd.DataFrame({"job": ["a", "b", "c"], "model": "m", "fingerprint": "f", "option_dtype": ["float32",
    ...                      "float32", "bfloat16"], "option_retriever": [None, "bm25", None]})
    >>> rows = pd.DataFrame({"model": "m", "job": ["a", "b", "c"], "profile": ["none", "top3", "none"]})
    >>> job_series(rows, meta).tolist()
    ['m [float32]', 'm [float32]', 'm [bfloat16]']

    An option that is not a bare word is named (``seed=3``, never ``3.0``).
    """
    spec = results[_spec_column(results)].astype(str)
    if run_metadata is None or run_metadata.empty or "job" not in results.columns:
        return spec
    options = [c for c in run_metadata.columns if c.startswith("option_")
               and c.removeprefix("option_") not in RETRIEVER_OPTIONS]
    facts = run_metadata.set_index("job")[[c for c in ["fingerprint", *options] if c in run_metadata.columns]]
    keys = {job: tuple((name, row[name]) for name in facts.columns if pd.notna(row[name]))
            for job, row in facts.iterrows()}
    labels = {}
    for model, jobs in pd.DataFrame({"spec": spec, "job": results["job"]}).drop_duplicates("job").groupby("spec"):
        distinct = {keys.get(job, ()) for job in jobs["job"]}
        varying = sorted({name for key in distinct for name, _ in key
                          if len({dict(k).get(name) for k in distinct}) > 1})
        for job in jobs["job"]:
            shown = [_option_text(n, dict(keys.get(job, ())).get(n)) for n in varying if n != "fingerprint"]
            if "fingerprint" in varying:
                shown.append(f"fingerprint={dict(keys.get(job, ())).get('fingerprint')}")
            labels[job] = f"{model} [{', '.join(shown)}]" if shown else str(model)
    return results["job"].map(labels)


def _option_text(column: str, value: Any) -> str:
    """An ``option_*`` value as a label shows it: a bare word for the options named by value (dtype, device,
    ...), else ``name=value``; whole numbers without a decimal point (a pandas column turns 3 into 3.0)."""
    name = column.removeprefix("option_")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value) if name in BARE_OPTIONS else f"{name}={value}"


def curve_label(series: str, retriever: str | None) -> str:
    """A curve's legend label: the job series and, for a ``top{K}`` curve of another retriever than the
    benchmark's ``bm25``, that retriever (:func:`prb_utils.retrieval.retriever_label`), inside the brackets.

    >>> curve_label("length", "random, retriever_seed=3"), curve_label("m [float32]", "least"), curve_label("m", "bm25")
    ('length [random, retriever_seed=3]', 'm [float32, least]', 'm')
    """
    if not retriever or retriever == "bm25":
        return str(series)
    if str(series).endswith("]") and " [" in str(series):
        return f"{str(series)[:-1]}, {retriever}]"
    return f"{series} [{retriever}]"


# ------------------------------------------------------------------------------------------- RM inputs
# ------------------------------------------------------------------------------------------- the curve
def _nominal_k(condition: str, n_posts: pd.Series) -> float:
    cond = parse_condition(condition)
    if cond.oracle:
        return np.nan
    if cond.k is None:
        return float(n_posts.mean())
    return float(cond.k)


def profile_size_curve(
    results: pd.DataFrame,
    data: pd.DataFrame,
    *,
    run_metadata: pd.DataFrame | None = None,
    tokenizer: Any = None,
    units: str | None = None,
    n_boot: int | None = None,
    seed: int = SEED,
    level: float = LEVEL,
) -> pd.DataFrame:
    """Accuracy and mean RM-input size per model (job series), retriever and profile condition.

    Columns :data:`CURVE_COLUMNS`. ``model`` is :func:`job_series` (the spec, plus what differs between jobs
    of one spec); ``retriever`` is missing (NA) for ``none``, ``full`` and ``rubric`` (they belong to every
    retriever's curve). ``ci_low``/``ci_high``: percentile bootstrap at ``level`` over questions (clusters: every pair of a
    drawn question enters; fixed ``seed``), or over the column ``units`` of ``results`` when given (the store's
    resampling plan: :meth:`prb_utils.analysis.uncertainty.ResamplingPlan.attach`). ``rubric`` rows have ``oracle`` True and ``k`` NaN. Ties and
    invalids count as not correct. Rows sorted by model, retriever, oracle, k.
    """
    require_columns(results, ["profile", "subset", "id", "outcome", _spec_column(results)])
    rows = results.reset_index(drop=True)
    if rows.empty:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    retrievers = job_retrievers(rows, run_metadata)
    inputs = rm_inputs(rows, data, retrievers=retrievers, tokenizer=tokenizer)
    frame = pd.concat([rows[["profile", "outcome"]], inputs], axis=1).assign(
        model=job_series(rows, run_metadata).to_numpy(), retriever=retrievers.to_numpy())
    unit_rows = rows[unit_columns(units)] if units else frame[["question"]]   # aligned with frame's rows
    units = units or "question"
    frame["_key"] = frame["retriever"].fillna("")
    table = []
    for (model, key, condition), group in frame.groupby(["model", "_key", "profile"], sort=False):
        correct = group["outcome"].eq("correct").to_numpy(dtype=float)
        low, high = interval_over_units(correct, unit_rows.loc[group.index], units, n_boot=n_boot, seed=seed,
                                        level=level)
        table.append({
            "model": model, "retriever": key or None, "profile": condition, "k": _nominal_k(condition, group["n_posts"]),
            "oracle": is_oracle(condition), "n": len(group), "n_questions": group["question"].nunique(),
            "correct": int(correct.sum()), "ties": int(group["outcome"].eq("tie").sum()),
            "invalid": int(group["outcome"].eq("invalid").sum()), "accuracy": float(correct.mean()),
            "ci_low": low, "ci_high": high, "posts_shown": float(group["posts_shown"].mean()),
            "input_size": float(group["input_size"].mean()), "input_unit": inputs.attrs["input_unit"],
        })
    curve = pd.DataFrame(table, columns=CURVE_COLUMNS)
    order = curve.assign(_r=curve["retriever"].fillna(""), _k=curve["k"].fillna(np.inf))
    curve = curve.loc[order.sort_values(["model", "_r", "oracle", "_k"], kind="stable").index].reset_index(drop=True)
    curve.attrs["input_mismatches"] = int((inputs["input_matches"] == False).sum())  # noqa: E712 (NA-aware)
    return curve


def curve_points(curve: pd.DataFrame, *, retriever: str = "bm25") -> pd.DataFrame:
    """The points of one retriever's curve: ``none``, that retriever's ``top{K}`` rows and ``full``, by k
    (the oracle left out)."""
    keep = ~curve["oracle"].astype(bool) & (curve["retriever"].isna() | curve["retriever"].eq(retriever))
    return curve[keep].sort_values(["model", "k"], kind="stable").reset_index(drop=True)


def profile_size_plot(curve: pd.DataFrame, *, retriever: str = "bm25", ax: Any = None, title: str | None = None):
    """Accuracy against k per model (with its clustered interval), and the mean RM-input size on a twin
    axis (dashed, grey scale). The ``rubric`` oracle is a dotted horizontal line per model, labelled as an
    oracle, never joined to the curve. The legend sits under the axes, never over a curve. Returns the accuracy
    Axes (``ax.figure`` is the Figure).

    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import pandas as pd
    >>> curve = pd.DataFrame({"model": "m", "retriever": [None, None, None], "profile": ["none", "full", "rubric"],
    ...     "k": [0.0, 4.0, float("nan")], "oracle": [False, False, True], "accuracy": [0.5, 0.6, 0.9],
    ...     "ci_low": [0.4, 0.5, 0.8], "ci_high": [0.6, 0.7, 1.0], "input_size": [10.0, 50.0, 30.0],
    ...     "input_unit": "characters"})
    >>> ax = profile_size_plot(curve)
    >>> ax.right_ax.get_ylabel()
    'mean RM input (characters)'
    >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    import matplotlib.pyplot as plt


    require_columns(curve, ["model", "k", "oracle", "accuracy", "ci_low", "ci_high", "input_size", "input_unit"],
                    what="profile-size curve")
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.5))
    points = curve_points(curve, retriever=retriever)
    oracle = curve[curve["oracle"].astype(bool)]
    models = list(dict.fromkeys([*points["model"], *oracle["model"]]))
    colours = model_palette(models)  # one colour per model, as on every other figure
    right = ax.twinx()
    for model, group in points.groupby("model", sort=False):
        colour = colours[model]
        err = np.vstack([group["accuracy"] - group["ci_low"], group["ci_high"] - group["accuracy"]]).clip(min=0)
        ax.errorbar(group["k"], group["accuracy"], yerr=err, marker="o", capsize=3, color=colour,
                    label=curve_label(model, retriever))
        right.plot(group["k"], group["input_size"], linestyle="--", marker=".", color=colour, alpha=0.45)
    for _, row in oracle.iterrows():
        ax.axhline(row["accuracy"], linestyle=":", color=colours[row["model"]],
                   label=f"{row['model']}: {row['profile']} {ORACLE_MARK}")
    ax.axhline(0.5, color="grey", linewidth=0.8)
    unit = str(curve["input_unit"].iloc[0]) if len(curve) else "characters"
    ax.plot([], [], linestyle="--", color="grey", alpha=0.6, label=f"mean RM input ({unit}, right axis)")
    ticks = points.drop_duplicates("profile").sort_values("k")
    if len(ticks):
        ax.set_xticks(ticks["k"].to_numpy(), [f"{k:.3g}\n{c}" for k, c in zip(ticks["k"], ticks["profile"], strict=True)])
    ax.set_xlabel("profile posts shown to the RM (k; none = 0, full = all posts)")
    ax.set_ylabel("accuracy (95% CI, clustered by question)")
    right.set_ylabel(f"mean RM input ({unit})")
    right.grid(False)
    ax.set_ylim(0, 1)
    ax.set_title(title or f"Accuracy and RM input size by profile size ({retriever} top-k)")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)  # off the curves
    ax.right_ax = right
    return ax


# ----------------------------------------------------------------------------------- ablation, oracle gap
def retrieval_ablation(
    results: pd.DataFrame,
    *,
    run_metadata: pd.DataFrame | None = None,
    baseline: str = "bm25",
    units: str | None = None,
    n_boot: int | None = None,
    seed: int = SEED,
    level: float = LEVEL,
) -> pd.DataFrame:
    """Per model and ``top{K}`` condition, each other retriever (random, least, dense) against ``baseline`` on
    the same pairs (:func:`prb_utils.analysis.metrics.compare`: ``diff`` = other − baseline, paired bootstrap
    CI and test, clustered by the column ``units`` when given (the store's plan), Holm over the table). Empty when
    the store holds one retriever only.
    """
    rows = results.reset_index(drop=True)
    retrievers = job_retrievers(rows, run_metadata)
    top = rows.assign(retriever=retrievers, model=job_series(rows, run_metadata).to_numpy())[retrievers.notna()]
    if top.empty or top["retriever"].nunique() < 2:
        return pd.DataFrame()
    top = top.drop(columns=[c for c in ("model_spec", "job_label") if c in top.columns])
    table = compare(top, "retriever", baseline=baseline if baseline in set(top["retriever"]) else None,
                    by=["model", "profile"], units=units, n_boot=n_boot, seed=seed, level=level)
    return table.rename(columns={"level_a": "baseline", "level_b": "retriever"})


def oracle_gap(
    results: pd.DataFrame,
    *,
    run_metadata: pd.DataFrame | None = None,
    reference: str = "full",
    oracle: str = "rubric",
    units: str | None = None,
    n_boot: int | None = None,
    seed: int = SEED,
    level: float = LEVEL,
) -> pd.DataFrame:
    """Per model, accuracy under the oracle ``rubric`` minus accuracy under ``reference`` (``full``) on the same
    pairs (``model`` is :func:`job_series`, so the ``rubric`` job, whose key carries a retriever option, meets
    the ``full`` job of the same model): columns ``model, reference, oracle, n_pairs, accuracy_reference, accuracy_oracle, gap, ci_low,
    ci_high, p_value, p_holm, is_oracle`` (always True: the row is a diagnostic, not a benchmark result). The
    interval and test are clustered by the column ``units`` when given (the store's plan).

    A large gap says the RM can apply the preference once told it but cannot infer it from the posts; a small
    gap with low accuracy says it cannot apply it either. Empty when either condition is missing.

    >>> import pandas as pd
    >>> rows = pd.DataFrame({"model": "m", "profile": ["full"] * 2 + ["rubric"] * 2, "subset": "s",
    ...                      "id": ["1", "2"] * 2, "outcome": ["wrong", "correct", "correct", "correct"]})
    >>> oracle_gap(rows, n_boot=100)[["model", "n_pairs", "accuracy_reference", "accuracy_oracle", "gap"]]
      model  n_pairs  accuracy_reference  accuracy_oracle  gap
    0     m        2                 0.5              1.0  0.5
    """
    if not is_oracle(oracle):
        raise PRBError(f"{oracle!r} is not an oracle profile condition.")
    rows = results[results["profile"].astype(str).isin([reference, oracle])]
    if rows.empty or rows["profile"].nunique() < 2:
        return pd.DataFrame()
    rows = rows.assign(model=job_series(rows, run_metadata).to_numpy())
    rows = rows.drop(columns=[c for c in ("job_label", "model_spec") if c in rows.columns])
    table = compare(rows, "profile", baseline=reference, by=["model"], units=units, n_boot=n_boot, seed=seed,
                    level=level)
    table = table.rename(columns={"level_a": "reference", "level_b": "oracle", "accuracy_a": "accuracy_reference",
                                  "accuracy_b": "accuracy_oracle", "diff": "gap"})
    table["is_oracle"] = True
    return table[["model", "reference", "oracle", "n_pairs", "accuracy_reference", "accuracy_oracle", "gap",
                  "ci_low", "ci_high", "p_value", "p_holm", "is_oracle"]]


# ------------------------------------------------------------------------------------ profile-blind models
def reads_profile(results: pd.DataFrame) -> pd.Series:
    """Per row: does its model's kind read the profile (:attr:`prb_utils.models.kinds.ModelKind.reads_profile`)?
    A kind outside :data:`~prb_utils.models.kinds.MODEL_KINDS` counts as reading it.

    >>> reads_profile(pd.DataFrame({"kind": ["length", "lexical", "custom"]})).tolist()
    [False, True, True]
    """
    require_columns(results, ["kind"])
    return results["kind"].map(lambda k: MODEL_KINDS[k].reads_profile if k in MODEL_KINDS else True).astype(bool)


def split_profile_blind(results: pd.DataFrame, run_metadata: pd.DataFrame | None = None,
                        ) -> tuple[pd.DataFrame, list[str]]:
    """The rows of the models that read the profile, and the names (:func:`job_series`, as the curve names
    them) of those that never do: a ``length`` baseline scores the same under every condition, so its lift is
    0 by construction and an ablation or an oracle gap of it says nothing.

    >>> rows = pd.DataFrame({"model": ["length", "lexical"], "kind": ["length", "lexical"], "profile": "none"})
    >>> kept, blind = split_profile_blind(rows)
    >>> kept["model"].tolist(), blind
    (['lexical'], ['length'])
    """
    reads = reads_profile(results)
    blind = sorted(set(job_series(results[~reads], run_metadata).astype(str))) if (~reads).any() else []
    return results[reads], blind


def oracle_board(curve: pd.DataFrame, results: pd.DataFrame | None = None, *,
                 run_metadata: pd.DataFrame | None = None, retriever: str = "bm25") -> pd.DataFrame:
    """The accuracies :func:`prb_utils.analysis.findings.oracle_gaps` judges the oracle by, from ``curve``: per
    model, the benchmark points of ``retriever``'s curve (``none``, its ``top{K}``, ``full``) and the oracle
    point, with ``locked`` True where ``results`` (the rows behind the curve) show a position-locked judge (its
    accuracy measures the answer order, so it is no benchmark condition to beat). Columns model, profile,
    oracle, accuracy, locked.

    >>> curve = pd.DataFrame({"model": "lexical", "retriever": [None, "random", None, None],
    ...                       "profile": ["none", "top3", "full", "rubric"], "k": [0.0, 3.0, 4.0, float("nan")],
    ...                       "oracle": [False, False, False, True], "accuracy": [0.429, 0.7, 0.667, 0.619]})
    >>> oracle_board(curve)["profile"].tolist()  # the random retriever's top3 is an ablation, not a condition
    ['none', 'full', 'rubric']
    """
    columns = ["model", "profile", "oracle", "accuracy", "locked"]
    if curve.empty:
        return pd.DataFrame(columns=columns)
    board = pd.concat([curve_points(curve, retriever=retriever), curve[curve["oracle"].astype(bool)]],
                      ignore_index=True)
    board = board.assign(oracle=board["oracle"].astype(bool), locked=False)
    if results is not None and len(results) and {"verdict_ab", "verdict_ba"} <= set(results.columns):
        rows = results.reset_index(drop=True)
        own = job_retrievers(rows, run_metadata).fillna(retriever).eq(retriever).to_numpy()
        locks = position_locked(rows.assign(model=job_series(rows, run_metadata).to_numpy())[own])
        locked = {(r.model, r.profile) for r in locks.itertuples() if r.locked} if not locks.empty else set()
        board["locked"] = [(m, c) in locked for m, c in zip(board["model"], board["profile"], strict=True)]
    return board[columns].reset_index(drop=True)


def oracle_sentences(gaps: pd.DataFrame) -> list[str]:
    """Each model's oracle verdict (a row of :func:`prb_utils.analysis.findings.oracle_gaps`) in one sentence
    with its numbers: an upper bound only where the verdict says so.

    >>> gaps = pd.DataFrame({"model": ["lexical", "m"], "oracle_condition": "rubric", "oracle_accuracy": [0.619, 0.8],
    ...                      "best_condition": "full", "best_accuracy": [0.667, 0.7], "gap": [-0.048, 0.1],
    ...                      "verdict": ["not an upper bound", "upper bound"]})
    >>> for sentence in oracle_sentences(gaps):
    ...     print(sentence)
    lexical: the oracle (rubric, 0.619) is not an upper bound: it is below its best benchmark condition, full (0.667), a gap of -0.048.
    m: the oracle (rubric, 0.800) is an upper bound: at least its best benchmark condition, full (0.700), a gap of +0.100.
    """
    bound, not_bound, blind = RULES["oracle"].verdicts
    out = []
    for row in gaps.itertuples():
        oracle = f"the oracle ({row.oracle_condition}, {format_value(row.oracle_accuracy, sense=PROPORTION)})"
        best = f"{row.best_condition} ({format_value(row.best_accuracy, sense=PROPORTION)})"
        if row.verdict == blind:
            out.append(f"{row.model}: {blind}, so it has no oracle gap.")
        elif row.verdict == not_bound:
            out.append(f"{row.model}: {oracle} is {not_bound}: it is below its best benchmark condition, {best}, a gap of "
                       f"{format_signed(row.gap)}.")
        else:
            out.append(f"{row.model}: {oracle} is an {bound}: at least its best benchmark condition, {best}, a gap "
                       f"of {format_signed(row.gap)}.")
    return out


def missing_sections(results: pd.DataFrame, run_metadata: pd.DataFrame | None = None, *,
                     command: Callable[..., str] | None = None) -> Mapping[str, str]:
    """What the store lacks for each section of the diagnostics notebook, as ``{section: command}``: the
    command that fills it (empty when the section has something to show). ``command(verb, models=, profile=)``
    writes a command on the page's own data and store (a page passes
    :meth:`~prb_utils.notebook.params.NotebookParams.command`); without it the command names no data."""
    command = command or _bare_command
    conditions = set(results["profile"].astype(str)) if len(results) else set()
    retrievers: set[str] = set()
    if len(results):
        try:
            retrievers = {r for r in job_retrievers(results, run_metadata) if r}
        except PRBError:
            retrievers = set()
    top = sorted((c for c in conditions if parse_condition(c).retrieves and not parse_condition(c).probe),
                 key=lambda c: parse_condition(c).k) or [DEFAULT_CONDITION]
    need: dict[str, str] = {}
    if len(conditions - {"rubric"}) < 2:
        need["curve"] = command("score", models=["length"], profile=["none", "top3", "full"])
    if len(retrievers) < 2:
        need["ablation"] = command("score", models=["length"], profile=top[0]) + \
            " --retriever random (and --retriever least)"
    shows_every_post = any(parse_condition(c).k is None and not parse_condition(c).probe for c in conditions)
    if not (shows_every_post and any(is_oracle(c) for c in conditions)):
        need["oracle"] = command("score", models=["length"], profile=["full", "rubric"])
    return need


def _bare_command(verb: str, *, models: Sequence[str] = (), profile: str | Sequence[str] = ()) -> str:
    """``prb VERB`` with ``models`` and the condition(s) ``profile``, on no named data (:func:`missing_sections`).

    >>> _bare_command("score", models=["length"], profile="top3")
    'prb score --model length --profile top3'
    """
    profiles = [profile] if isinstance(profile, str) else list(profile)
    return " ".join(["prb", verb, *(f"--model {m}" for m in models), *(f"--profile {p}" for p in profiles)])

