"""Leave-one-post-out attribution: which of the posts an RM is shown does each verdict hinge on?

A base job (``top3``) and its drop jobs (``top3+drop1`` .. ``top3+drop3``: :func:`prb_utils.probes.drop_probe`, the
i-th shown post left out and no other in its place) score the same pairs. Per pair and shown post,
:func:`post_effects` gives the margin change and whether the outcome flipped when that post was left out;
:func:`decisive_posts` says per pair whether its verdict hinges on exactly one post (the *decisive* post) and,
where a rubric aspect's evidence text is found in a shown post, whether the decisive post is that evidence post;
:func:`attribution_summary` summarises each model under :data:`ATTRIBUTION_RULE`, with intervals over the plan's
units (whole questions by default; Wilson where pairs are the units), and :func:`decisive_positions` counts where
the decisive posts stand (the figure of page 05).

A position is the post's place among those shown, in the order shown (the profile's order: the benchmark gives
posts no dates, so it is not known to be recency); a relevance rank is its rank by BM25+ relevance to the question
among those shown (1 = the most relevant: the order in which ``top{K}`` retrieves them by default).

>>> data = pd.DataFrame({"subset": "S", "id": ["a"], "question": "Q",
...                      "profile": [[{"text": "p1"}, {"text": "p2"}]]})
>>> rows = pd.DataFrame({"model": "m", "kind": "classifier", "subset": "S", "id": "a",
...                      "profile": ["full", "full+drop1", "full+drop2"], "outcome": ["correct", "correct", "wrong"],
...                      "score_chosen": [1.0, 1.0, 0.0], "score_rejected": 0.5})
>>> decisive_posts(rows, data)[["model", "shown", "flips", "decisive"]].values.tolist()
[['m', 2, 1, 2]]
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from prb_utils.analysis.metrics import (
    interval_over_units,
    require_columns,
    two_way_labels,
    unit_labels,
    wilson_ci,
)
from prb_utils.analysis.probe_effects import no_verdict_reason, split_probe
from prb_utils.analysis.resampling import LEVEL, SEED, TWO_WAY_UNIT
from prb_utils.bm25 import bm25_scores
from prb_utils.formatting import MISSING, format_interval, format_value
from prb_utils.probes import ATTRIBUTION, DROP_MAX, DROP_PREFIX, PROBES
from prb_utils.profile import (
    Retriever,
    parse_condition,
    probe_conditions,
    rm_visible_fields,
    selected_posts,
)

ATTRIBUTION_RULE = (
    "a verdict hinges on one post when, leaving out each post it was shown in turn (the others stay, no other post "
    "takes its place), exactly one leaving-out changes its outcome (correct, wrong or tie): that post is decisive; "
    "the share of verdicts that hinge on one post is over the pairs scored under the base and every drop of a post "
    "they show, with its 95% interval over the plan's units (whole questions by default; Wilson over pairs); the "
    "decisive post is the evidence post when a rubric aspect's evidence text is found in it (case and spacing "
    "aside); n/a with the reason for a model that cannot react (a profile-blind kind, a position-locked judge) or "
    "where no drop changed an RM input")
NO_EVIDENCE = "n/a: no rubric aspect's evidence quote is found in a post these pairs show"
DROP_EFFECT_COLUMNS = ["model", "base", "subset", "id", "position", "margin_change", "flipped"]
DECISIVE_COLUMNS = ["model", "base", "subset", "id", "shown", "flips", "decisive", "decisive_rank", "evidence",
                    "decisive_is_evidence"]
SUMMARY_COLUMNS = ["model", "base", "n_pairs", "n_units", "hinges", "hinges_low", "hinges_high", "none_flip",
                   "several_flip", "mean_abs_margin_change", "evidence_pairs", "on_evidence", "on_evidence_low",
                   "on_evidence_high", "no_verdict", "evidence_note"]
_SPACE = re.compile(r"\s+")


def _drop_position(condition: str) -> tuple[str, int]:
    """``(base, position)`` of a condition: ``top3+drop2`` -> ``("top3", 2)``; 0 for any other condition.

    >>> _drop_position("top3+drop2"), _drop_position("top3+swap"), _drop_position("top3")
    (('top3', 2), ('top3', 0), ('top3', 0))
    """
    base, name = split_probe(condition)
    spec = PROBES.get(name) if name else None
    return base, (spec.leaves_out if spec is not None else 0)


def _margins(rows: pd.DataFrame) -> pd.Series:
    cols = [pd.to_numeric(rows[c], errors="coerce") if c in rows.columns else pd.Series(np.nan, index=rows.index)
            for c in ("score_chosen", "score_rejected")]
    return cols[0] - cols[1]


def is_drop(effects: pd.DataFrame) -> pd.Series:
    """Per row of :func:`prb_utils.analysis.probe_effects.probe_effects`: True for a drop probe (read here, not
    in the probe tables).

    >>> is_drop(pd.DataFrame({"probe": ["swap", "drop2"]})).tolist()
    [False, True]
    """
    return effects["probe"].map(lambda name: bool(PROBES[name].leaves_out) if name in PROBES else False).astype(bool)


def longest_profile(data: pd.DataFrame) -> int:
    """The most posts a record of ``data`` has: how many drop jobs ``full`` takes.

    >>> longest_profile(pd.DataFrame({"profile": [[{"text": "a"}], None, []]}))
    1
    """
    column = data["profile"] if "profile" in data.columns else []
    return max((len(p) for p in column if isinstance(p, (list, tuple))), default=0)


def attribution_jobs(base: str, data: pd.DataFrame) -> list[str]:
    """The conditions ``prb probe --probe attribution`` scores: ``base`` and one drop job per post it shows (K for
    ``topK``; for ``full`` the longest profile of ``data``, at most :data:`prb_utils.probes.DROP_MAX`).

    >>> attribution_jobs("top2", pd.DataFrame({"profile": [[]]}))
    ['top2', 'top2+drop1', 'top2+drop2']
    """
    return probe_conditions(base, [ATTRIBUTION], most_posts=longest_profile(data))


def shown_count(record: dict, base: str) -> int:
    """How many posts ``base`` shows of ``record``'s profile (all for ``full``, min(K, posts) for ``topK``, 0 for
    ``none``): whichever retriever picks them.

    >>> shown_count({"profile": [{"text": "a"}, {"text": "b"}]}, "top1"), shown_count({"profile": []}, "full")
    (1, 0)
    """
    posts = record.get("profile")
    n = len(posts) if isinstance(posts, (list, tuple)) else 0
    k = parse_condition(base).k
    return n if k is None else min(k, n)


def post_effects(results: pd.DataFrame) -> pd.DataFrame:
    """One row per model, base, pair and drop job that scored it (columns :data:`DROP_EFFECT_COLUMNS`): ``position``
    (the post left out, from 1), ``margin_change`` (the margin, chosen minus rejected score, with the post left out
    minus the base's; NaN without scores) and ``flipped`` (the outcome differs from the base's)."""
    require_columns(results, ["model", "profile", "subset", "id", "outcome"])
    frame = results.assign(profile=results["profile"].astype(str), subset=results["subset"].astype(str),
                           id=results["id"].astype(str), _margin=_margins(results))
    split = frame["profile"].map(_drop_position)
    frame = frame.assign(base=split.map(lambda bp: bp[0]), position=split.map(lambda bp: bp[1]))
    keys = ["model", "base", "subset", "id"]
    base_rows = frame[frame["profile"] == frame["base"]].drop_duplicates(keys)
    drops = frame[frame["position"] > 0].drop_duplicates([*keys, "position"])
    both = drops.merge(base_rows[[*keys, "outcome", "_margin"]], on=keys, suffixes=("", "_base"))
    out = both.assign(margin_change=both["_margin"] - both["_margin_base"],
                      flipped=both["outcome"].astype(str) != both["outcome_base"].astype(str))
    return out[DROP_EFFECT_COLUMNS].sort_values(keys + ["position"]).reset_index(drop=True)


def _normal(text: str) -> str:
    return _SPACE.sub(" ", str(text)).strip().lower()


def relevance_ranks(record: dict, base: str, *, retriever: Retriever | None = None) -> list[int]:
    """Per post ``base`` shows (in the order shown), its rank by BM25+ relevance to the question among those shown
    (1 = the most relevant; ties in the order shown), whichever retriever picked them.

    >>> relevance_ranks({"question": "cheap pans", "profile": [{"text": "boots"}, {"text": "cheap pans"}]}, "full")
    [2, 1]
    """
    question, posts = rm_visible_fields(record)
    shown = selected_posts(record, base, retriever=retriever)
    scores = bm25_scores(question, [text for _, text in posts])
    order = sorted(range(len(shown)), key=lambda n: (-scores[shown[n]], n))
    ranks = [0] * len(shown)
    for rank, n in enumerate(order, 1):
        ranks[n] = rank
    return ranks


def evidence_positions(record: dict, base: str, *, retriever: Retriever | None = None) -> list[int]:
    """The positions (from 1, among the posts ``base`` shows) of the posts in which a rubric aspect's evidence text
    is found (case and spacing aside); ``retriever``: the job's post selector (BM25 when None).

    >>> record = {"question": "Q", "profile": [{"text": "I hate  JARGON, really"}, {"text": "hi"}],
    ...           "rubric_aspects": [{"aspect": "plain", "evidence": "hate jargon"}]}
    >>> evidence_positions(record, "full")
    [1]
    """
    quotes = [_normal(a.get("evidence") or "") for a in (record.get("rubric_aspects") or [])]
    quotes = [q for q in quotes if q]
    if not quotes:
        return []
    posts = record.get("profile") or []
    shown = selected_posts(record, base, retriever=retriever)
    return [i + 1 for i, j in enumerate(shown) if any(q in _normal(posts[j].get("text") or "") for q in quotes)]


def decisive_posts(results: pd.DataFrame, data: pd.DataFrame, *, retriever: Retriever | None = None
                   ) -> pd.DataFrame:
    """One row per model, base and pair scored under the base and under the drop of every post it shows (columns
    :data:`DECISIVE_COLUMNS`): ``shown`` posts, ``flips`` (how many leavings-out changed the outcome), ``decisive``
    (the position of the one post the verdict hinges on, 0 where none or several flip), ``decisive_rank`` (its
    :func:`relevance_ranks`, 0 where none is decisive), ``evidence`` (the positions
    of evidence posts, :func:`evidence_positions`) and ``decisive_is_evidence`` (NaN where no evidence post is shown
    or no post is decisive). A pair showing no post, or more than :data:`prb_utils.probes.DROP_MAX`, is left out."""
    effects = post_effects(results)
    records = {(str(r["subset"]), str(r["id"])): r for r in data.to_dict("records")}
    rows = []
    for (model, base, subset, pair_id), group in effects.groupby(["model", "base", "subset", "id"], sort=True):
        record = records.get((subset, pair_id))
        if record is None:
            continue
        shown = shown_count(record, base)
        flipped = dict(zip(group["position"], group["flipped"], strict=True))
        if not 0 < shown <= DROP_MAX or any(i not in flipped for i in range(1, shown + 1)):
            continue
        flips = [i for i in range(1, shown + 1) if flipped[i]]
        decisive = flips[0] if len(flips) == 1 else 0
        evidence = evidence_positions(record, base, retriever=retriever)
        rank = relevance_ranks(record, base, retriever=retriever)[decisive - 1] if decisive else 0
        rows.append({"model": model, "base": base, "subset": subset, "id": pair_id, "shown": shown,
                     "flips": len(flips), "decisive": decisive, "decisive_rank": rank, "evidence": evidence,
                     "decisive_is_evidence": (float(decisive in evidence) if evidence and decisive else np.nan)})
    return pd.DataFrame(rows, columns=DECISIVE_COLUMNS)


def _share(values: np.ndarray, cells: pd.DataFrame, units: str | None, *, n_boot: int | None, seed: int,
           level: float) -> tuple[float, float, float]:
    """The mean of 0/1 ``values`` with its interval: over ``units`` of ``cells``, Wilson where pairs are the units."""
    if not len(values):
        return np.nan, np.nan, np.nan
    if units is None or units == "pair":
        low, high = wilson_ci(int(values.sum()), len(values), level=level)
    else:
        low, high = interval_over_units(values, cells, units, n_boot=n_boot, seed=seed, level=level)
    return float(values.mean()), float(low), float(high)


def _cells(pairs: pd.DataFrame, data: pd.DataFrame, units: str | None) -> tuple[pd.DataFrame, str | None]:
    """The unit of each of ``pairs`` (one row per pair) and the column(s) to resample: the question and the user
    for the two-way unit, else one column (None: pairs, Wilson)."""
    if units is None or units == "pair":
        return pd.DataFrame(index=range(len(pairs))), None
    if units == TWO_WAY_UNIT:
        question, user = two_way_labels(pairs, data)
        return pd.DataFrame({"question": question.to_numpy(), "user": user.to_numpy()}), TWO_WAY_UNIT
    return pd.DataFrame({"_unit": unit_labels(pairs, data, units).to_numpy()}), "_unit"


def attribution_summary(results: pd.DataFrame, data: pd.DataFrame, *, units: str | None = "question",
                        n_boot: int | None = None, seed: int = SEED, level: float = LEVEL,
                        retriever: Retriever | None = None) -> pd.DataFrame:
    """Per model and base with drop jobs (columns :data:`SUMMARY_COLUMNS`), under :data:`ATTRIBUTION_RULE`: the
    pairs attributed and their units, ``hinges`` (the share of verdicts that hinge on exactly one post, with its
    interval), ``none_flip`` and ``several_flip`` (the shares where no post, or several, flip it), the mean |margin
    change| of a leaving-out, and among the hinged verdicts with an evidence post shown (``evidence_pairs``) the
    share decided by it (``on_evidence``, with its interval; ``evidence_note`` says why it is n/a). A model that
    cannot react has ``no_verdict`` (the reason: :func:`prb_utils.analysis.probe_effects.no_verdict_reason`) and no
    numbers. ``retriever``: the base job's post selector (BM25+ when None, what ``top{K}`` means by default): the
    positions do not depend on it, the evidence posts and relevance ranks do."""
    require_columns(results, ["model", "profile", "subset", "id", "outcome"])
    frame = results.assign(profile=results["profile"].astype(str))
    split = frame["profile"].map(_drop_position)
    frame = frame.assign(_base=split.map(lambda bp: bp[0]), _position=split.map(lambda bp: bp[1]))
    decided = decisive_posts(frame, data, retriever=retriever)
    effects = post_effects(frame)
    records = {(str(r["subset"]), str(r["id"])): r for r in data.to_dict("records")}
    rows = []
    for (model, base), group in frame.groupby(["model", "_base"], sort=True):
        if base not in set(group["profile"]) or not (group["_position"] > 0).any():
            continue
        mine = decided[(decided["model"] == model) & (decided["base"] == base)]
        pairs = set(zip(group["subset"].astype(str), group["id"].astype(str), strict=True))
        changed = float(sum(shown_count(records[k], base) > 0 for k in pairs if k in records))
        first = f"{DROP_PREFIX}{int(group.loc[group['_position'] > 0, '_position'].min())}"
        reason = no_verdict_reason(group, base, first, changed)
        row = {"model": model, "base": base, "n_pairs": len(mine), "no_verdict": reason, "evidence_note": ""}
        if reason or mine.empty:
            row["no_verdict"] = reason or (f"n/a: no pair was scored under the base and every drop of its posts (a "
                                           f"pair showing more than {DROP_MAX} posts has no drop of the rest)")
            rows.append(row)
            continue
        cells, unit = _cells(mine, data, units)
        hinges = (mine["flips"] == 1).to_numpy(dtype=float)
        share = _share(hinges, cells, unit, n_boot=n_boot, seed=seed, level=level)
        mag = effects[(effects["model"] == model) & (effects["base"] == base)]["margin_change"].abs().dropna()
        row.update(n_units=int(cells.drop_duplicates().shape[0]) if unit else len(mine), hinges=share[0],
                   hinges_low=share[1], hinges_high=share[2], none_flip=float((mine["flips"] == 0).mean()), several_flip=float((mine["flips"] > 1).mean()),
                   mean_abs_margin_change=float(mag.mean()) if len(mag) else np.nan)
        known = mine["decisive_is_evidence"].notna().to_numpy()
        row["evidence_pairs"] = int(known.sum())
        if known.any():
            on = _share(mine.loc[known, "decisive_is_evidence"].to_numpy(dtype=float),
                        cells[known].reset_index(drop=True), unit, n_boot=n_boot, seed=seed, level=level)
            row.update(on_evidence=on[0], on_evidence_low=on[1], on_evidence_high=on[2])
        elif not any(len(e) for e in mine["evidence"]):
            row["evidence_note"] = NO_EVIDENCE
        else:
            row["evidence_note"] = "n/a: no verdict with an evidence post shown hinges on one post"
        rows.append(row)
    out = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    for column in ("no_verdict", "evidence_note"):
        out[column] = out[column].fillna("").astype(object)
    for column in ("n_pairs", "n_units", "evidence_pairs"):
        out[column] = out[column].astype("Int64")
    return out


PAIR_DROP_COLUMNS = ["model", "left out", "margin", "verdict", "changed"]


def pair_drops(results: pd.DataFrame, record: dict, base: str, *, width: int = 60) -> pd.DataFrame:
    """One pair, post by post (the workshop's view; columns :data:`PAIR_DROP_COLUMNS`): per model with drop jobs
    of ``base`` for it, its verdict under ``base`` (left out: nothing), then with each post it shows left out (the
    post's position and its first ``width`` characters), the margin (chosen minus rejected score), the verdict and
    whether it changed from the base's (the posts a topK base shows are BM25+'s, as top{K} means by default).

    >>> record = {"subset": "S", "id": "a", "question": "Q", "profile": [{"text": "p1"}, {"text": "p2"}]}
    >>> rows = pd.DataFrame({"model": "m", "subset": "S", "id": "a", "profile": ["full", "full+drop1", "full+drop2"],
    ...                      "outcome": ["correct", "correct", "wrong"], "score_chosen": [1.0, 1.0, 0.0],
    ...                      "score_rejected": 0.5})
    >>> pair_drops(rows, record, "full")[["left out", "verdict", "changed"]].values.tolist()
    [['nothing', 'correct', ''], ['post 1: p1', 'correct', 'no'], ['post 2: p2', 'wrong', 'yes']]
    """
    mine = results[(results["subset"].astype(str) == str(record["subset"]))
                   & (results["id"].astype(str) == str(record["id"]))]
    mine = mine.assign(profile=mine["profile"].astype(str), _margin=_margins(mine))
    split = mine["profile"].map(_drop_position)
    mine = mine.assign(_base=split.map(lambda bp: bp[0]), _position=split.map(lambda bp: bp[1]))
    mine = mine[mine["_base"] == base]
    posts = record.get("profile") or []
    shown = selected_posts(record, base)
    rows = []
    for model, group in mine.groupby("model", sort=True):
        at_base = group[group["_position"] == 0]
        if at_base.empty or not (group["_position"] > 0).any():
            continue
        verdict = str(at_base["outcome"].iloc[0])
        rows.append({"model": model, "left out": "nothing", "margin": float(at_base["_margin"].iloc[0]),
                     "verdict": verdict, "changed": ""})
        for r in group[group["_position"] > 0].sort_values("_position").to_dict("records"):
            at = int(r["_position"])
            text = str(posts[shown[at - 1]].get("text") or "") if at <= len(shown) else ""
            cut = text if len(text) <= width else text[:width - 1] + "…"
            rows.append({"model": model, "left out": f"post {at}: {cut}", "margin": float(r["_margin"]),
                         "verdict": str(r["outcome"]), "changed": "yes" if str(r["outcome"]) != verdict else "no"})
    return pd.DataFrame(rows, columns=PAIR_DROP_COLUMNS)


POSITION_COLUMNS = ["model", "base", "position", "pairs", "share", "rank_pairs", "rank_share"]


def decisive_positions(decided: pd.DataFrame) -> pd.DataFrame:
    """Per model, base and position (1 up to the most posts shown, zeros included): how many hinged verdicts the
    post shown there decides (``pairs``) and their share of the model's hinged verdicts (``share``); the same by
    the decisive post's relevance rank (``rank_pairs``, ``rank_share``: :func:`relevance_ranks`).

    >>> decided = pd.DataFrame({"model": "m", "base": "top3", "shown": 3, "decisive": [2, 2, 0, 1],
    ...                         "decisive_rank": [1, 1, 0, 3]})
    >>> decisive_positions(decided)[["position", "pairs", "rank_pairs"]].values.tolist()
    [[1, 1, 2], [2, 2, 0], [3, 0, 1]]
    """
    rows = []
    for (model, base), group in decided.groupby(["model", "base"], sort=True):
        hinged = group[group["decisive"] > 0]
        for position in range(1, int(group["shown"].max()) + 1):
            n, ranked = int((hinged["decisive"] == position).sum()), int((hinged["decisive_rank"] == position).sum())
            rows.append({"model": model, "base": base, "position": position, "pairs": n,
                         "share": n / len(hinged) if len(hinged) else np.nan, "rank_pairs": ranked,
                         "rank_share": ranked / len(hinged) if len(hinged) else np.nan})
    return pd.DataFrame(rows, columns=POSITION_COLUMNS)


ATTRIBUTION_TABLE_COLUMNS = ["model", "verdicts hinging on one post [95% CI]", "no post flips it",
                             "several posts flip it", "decisive post by position", "decisive post by relevance rank",
                             "decided by the evidence post",
                             "mean |margin change|", "pairs"]


def attribution_table(summary: pd.DataFrame, decided: pd.DataFrame) -> pd.DataFrame:
    """:func:`attribution_summary` as ``prb probe`` and page 05 show it: readable headers, text cells, "n/a" with
    its reason where a number is undefined."""
    positions = decisive_positions(decided)
    rows = []
    for r in summary.to_dict("records"):
        mine = positions[(positions["model"] == r["model"]) & (positions["base"] == r["base"])]
        if r["no_verdict"]:
            rows.append({"model": r["model"], "verdicts hinging on one post [95% CI]": r["no_verdict"],
                         **{c: MISSING for c in ATTRIBUTION_TABLE_COLUMNS[2:-1]},
                         "pairs": format_value(r["n_pairs"], sense="count")})
            continue
        evidence = (format_interval(r["on_evidence"], r["on_evidence_low"], r["on_evidence_high"])
                    + f" of {r['evidence_pairs']}" if pd.notna(r.get("on_evidence")) else r["evidence_note"])
        rows.append({
            "model": r["model"],
            "verdicts hinging on one post [95% CI]": format_interval(r["hinges"], r["hinges_low"], r["hinges_high"]),
            "no post flips it": format_value(r["none_flip"], sense="proportion"),
            "several posts flip it": format_value(r["several_flip"], sense="proportion"),
            "decisive post by position": " / ".join(f"{p}: {n}" for p, n in zip(mine["position"], mine["pairs"],
                                                                                  strict=True)) or MISSING,
            "decisive post by relevance rank": " / ".join(
                f"{p}: {n}" for p, n in zip(mine["position"], mine["rank_pairs"], strict=True)) or MISSING,
            "decided by the evidence post": evidence,
            "mean |margin change|": (MISSING if pd.isna(r["mean_abs_margin_change"])
                                     else f"{r['mean_abs_margin_change']:.3g}"),
            "pairs": format_value(r["n_pairs"], sense="count")})
    return pd.DataFrame(rows, columns=ATTRIBUTION_TABLE_COLUMNS)
