"""Personalization probes: transforms of the benchmark records that ask whether a reward model reads *this* user.

A probe is a transform of the records an RM is shown, scored and stored like any job under the condition
``<condition>+<probe>`` (e.g. ``top3+swap``). Each probe is a record (:data:`PROBES`) with what it changes, what
a reward model should do under it, the traits the analysis reads and its own :class:`Check`:

- ``swap``: the RM sees another user's profile for the same pair: for a twin pair (the same question and answers,
  the other user, roles swapped: :func:`twin_pairs`) its twin user's, otherwise a seeded other user of the same
  subset (a record keeps its own profile when its subset has no other: :func:`changed_records` says which
  changed). An RM that reads the user loses accuracy; one that ignores the profile does not move. On a twin pair
  the swapped record is the twin's with the answers' roles exchanged, so its outcome is the twin's base outcome
  negated for any RM that scores answers given a profile (a flip restates the base outcomes, it is no test).
- ``shuffle``: the same posts in a seeded other order. An RM should be invariant.
- ``distract``: :data:`DISTRACTORS` posts of other users added to the profile (seeded). The accuracy drop measures
  how much irrelevant profile text moves the RM.
- ``untagged``: every post without its category, so the RM input shows ``- text`` where it showed
  ``- [category] text`` (:func:`prb_utils.profile.rm_user_message`). The categories are the site's community names,
  not the user's words: an RM that reads the user keeps its verdicts; the share it changes measures how much it
  leans on the site's label (on data whose category names the preference, that is reading the answer key).
- ``headerless`` and ``reversed`` (opt-in): the profile rendered otherwise, the records unchanged
  (:func:`prb_utils.profile.rm_user_message` reads :attr:`Probe.header` and :attr:`Probe.reverse_posts`):
  ``headerless`` shows the posts without the header line above them; ``reversed`` shows the same posts in reverse
  order, so a message too long for the model (cut from the left, the question always kept) loses the posts shown
  last under the base instead of those shown first. An RM that reads the user keeps its verdicts under both.
- ``label-swap``: chosen and rejected exchanged. Accuracy must be the base's share of wrong pairs (1 - accuracy -
  tie rate - invalid rate): a harness check (expected = observed, no test) that catches a broken metric. It holds by construction for every kind (a judge's two answer orders are the same two
  prompts exchanged), so it cannot catch a position-locked judge: :func:`prb_utils.analysis.breakdowns.
  position_locked` does.
- ``retest``: the same records in a seeded other order, scored in batches of half the token budget (so other
  batch sizes and other neighbours; on a server engine: half the requests in flight, and requests of its own, never
  a response the base job's requests left in the request cache): its check passes when no score changes beyond the
  dtype's resolution.
- ``parrot``: the rejected answer made to sound like the user: phrases of the user's own post inserted
  (:mod:`prb_utils.parrot`), the chosen answer untouched; ``parrot-control`` inserts the same number of words at the
  same places from another user's post. The parrot's flips (right under the base, wrong under it) beyond its
  control's say whether the RM rewards mimicry (:data:`MIMICRY_RULE`); a length-only RM sees the same change twice.
- ``drop1`` .. ``drop10``: the i-th of the posts the base condition shows is left out (for ``top3`` the
  i-th retrieved post, in the order shown; the other posts stay and no other post is retrieved in its place; for
  ``full`` the profile's i-th post). The records are unchanged: the selection leaves the post out
  (:func:`prb_utils.profile.selected_posts`, the one place that knows the condition), and a record showing fewer
  than i posts is shown as under its base. ``prb probe --probe attribution`` runs them all (:data:`ATTRIBUTION`):
  :mod:`prb_utils.analysis.attribution` reads which post each verdict hinges on.

A probe with :attr:`Probe.backends` (``retest``) also has *backend variants*, written ``NAME-VALUE``
(:func:`backend_variant`): ``retest-bfloat16`` (or another dtype), ``retest-eager`` (an attention
implementation), ``retest-vllm`` (an engine) score the same records, in the same order and batches, with that
model option instead of the run's (:data:`BACKEND_OPTIONS`), a model loaded for that job alone; its check judges
the scores at the resolution of the looser of the two dtypes.

Transforms see only what an RM may see plus the ids they need to pair users; the rubric and narrative are never
moved into a profile. This module loads no model (it reads the option names of :mod:`prb_utils.models.device` and
:mod:`prb_utils.models.engines`).

>>> data = pd.DataFrame({"subset": "S", "id": ["a", "b"], "question": "Q", "chosen": ["x", "y"],
...                      "rejected": ["y", "x"], "profile": [[{"text": "u1"}], [{"text": "u2"}]]})
>>> apply_probe(data, "swap")["profile"].tolist()
[[{'text': 'u2'}], [{'text': 'u1'}]]
>>> apply_probe(data, "label-swap")[["chosen", "rejected"]].values.tolist()
[['y', 'x'], ['x', 'y']]
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import pandas as pd

from prb_utils import parrot  # a module: it imports prb_utils.profile, which imports this registry
from prb_utils.errors import PRBError
from prb_utils.formatting import PROPORTION, SCORE
from prb_utils.schema import ATTENTIONS, DTYPE_NAMES, ENGINE_NAMES

DISTRACTORS = 3  # other users' posts the distract probe adds
PROBE_SEED = 0
#: The model options (:class:`~prb_utils.models.registry.ModelOptions` fields) a backend variant of a probe may
#: change, and the values each takes: ``retest-VALUE`` scores the job with ``option=VALUE``.
BACKEND_OPTIONS: dict[str, tuple[str, ...]] = {"dtype": DTYPE_NAMES, "attention": ATTENTIONS, "engine": ENGINE_NAMES}
DROP_MAX = 10  # the last shown post a drop probe can leave out (drop1 .. drop10)
DROP_PREFIX = "drop"
#: ``prb probe --probe attribution``: every drop probe of the base condition (one job per post it shows)
ATTRIBUTION = "attribution"


@dataclass(frozen=True)
class Measurement:
    """What the analysis measured of one probe job against its base, on the pairs both scored: what a
    :class:`Check` reads (:func:`prb_utils.analysis.probe_effects.probe_effects` fills it). An interval is
    ``(value, low, high)`` at the run's level over the plan's units; NaN where undefined."""

    accuracy_base: float
    accuracy_probe: float
    #: base minus probe accuracy, with the interval of the paired comparison
    drop: tuple[float, float, float]
    #: the share of pairs whose outcome differs, with its interval (Wilson where pairs are the units)
    verdicts_changed: tuple[float, float, float]
    #: the base's share of wrong pairs
    wrong_share: float
    #: the largest |change| of a score (NaN without scores, or for a probe that negates margins)
    max_score_change: float
    #: the dtype's resolution at the largest |score| (its machine epsilon times that score)
    resolution: float
    #: the run's invariance tolerance
    tolerance: float
    #: a probe with a control (:attr:`Probe.control`): its flips (right under the base, wrong under it) minus its
    #: control's on the pairs all three scored, with the interval over the plan's units
    beyond_control: tuple[float, float, float] = (math.nan, math.nan, math.nan)


#: How a check's statistic must stand to its bound: the whole interval at or below it, equal to it (a harness
#: check, to float noise), or the whole interval at or above it.
AT_MOST, EQUAL, AT_LEAST = "≤", "=", "≥"


@dataclass(frozen=True)
class Check:
    """A probe's check, as data: the statistic it reads from a :class:`Measurement` (``statistic``: value, low,
    high, the bounds NaN where it has no interval), the bound a pass allows (``bound``), how they must stand
    (``relation``, one of :data:`AT_MOST`, :data:`EQUAL`, :data:`AT_LEAST`), what it measures in the words of the
    tables (``measures``), the formatter's kind of its numbers (``sense``) and its rule, the sentence under the
    tables (``{tolerance}`` is filled in).

    >>> m = Measurement(0.7, 0.3, (0.4, 0.3, 0.5), (0.05, 0.0, 0.08), 0.3, 0.0, 1e-16, 0.1)
    >>> PROBES["shuffle"].check.judge(m), PROBES["label-swap"].check.judge(m)
    ((0.05, 0.0, 0.08, 0.1, True), (0.3, nan, nan, 0.3, True))
    """

    measures: str
    statistic: Callable[[Measurement], tuple[float, float, float]]
    bound: Callable[[Measurement], float]
    rule: str
    relation: str = AT_MOST
    sense: str = PROPORTION

    def judge(self, measured: Measurement) -> tuple[float, float, float, float, bool | None]:
        """``(value, low, high, bound, passed)``; ``passed`` None where the statistic or its bound is undefined."""
        value, low, high = (float(v) for v in self.statistic(measured))
        bound = float(self.bound(measured))
        if not (math.isfinite(value) and math.isfinite(bound)):
            return value, low, high, bound, None
        if self.relation == EQUAL:
            return value, low, high, bound, abs(value - bound) < 1e-12
        if self.relation == AT_LEAST:
            return value, low, high, bound, (low if math.isfinite(low) else value) >= bound - 1e-12
        return value, low, high, bound, (high if math.isfinite(high) else value) <= bound + 1e-12


def _point(value: float) -> tuple[float, float, float]:
    return value, math.nan, math.nan


@dataclass(frozen=True)
class Probe:
    """One probe: its name, what it changes, what a reward model should do, its transform of the records, and the
    traits the analysis reads (:mod:`prb_utils.analysis.probe_effects` names no probe)."""

    name: str
    changes: str
    expected: str
    transform: Callable[[pd.DataFrame, int], pd.DataFrame]
    #: the share of the model's batch budget (tokens a batch) the probe's job is scored with: below 1, the same
    #: pairs are batched with other sizes as well as other neighbours
    batch_share: float = 1.0
    #: its job sends requests of its own to a server engine: never a response another job's requests cached (the
    #: same pairs as the base condition's would otherwise be read back, and the probe would hold by construction)
    own_requests: bool = False
    #: it changes the profile an RM sees: the pairs it changed are counted, a model that cannot react (a
    #: profile-blind kind, a position-locked judge) gets no verdict, and where no profile changed no check either
    changes_profile: bool = False
    #: its accuracy change is tested (the clustered paired test, Holm within its family); False: a harness check
    tested: bool = True
    #: its scores are the base's with chosen and rejected exchanged, by construction: no score change to measure
    negates_margins: bool = False
    #: it pairs twin users: the twin split of the base outcomes is shown beside it
    uses_twins: bool = False
    #: the probe of the reading verdict (reads the user, reacts to any profile, ignores the profile)
    reading: bool = False
    #: an invariance probe: its wrong-made-right pairs are the null of "reacts to any profile"
    null: bool = False
    #: its check (None: its verdict is the reading verdict, or none)
    check: Check | None = None
    #: why no record changed, where none did
    unchanged: str = "no record's profile changed"
    #: the ``(subset, id)`` of the records it changes, where comparing its transform's output would be slow
    changed: Callable[[pd.DataFrame, int], set[tuple[str, str]]] | None = None
    #: its control probe: the same amount of change from another user; its flips (right under the base, wrong
    #: under the probe) beyond the control's are tested (the clustered paired test, Holm within its own family)
    control: str = ""
    #: with a control, the verdicts where its flips clearly exceed the control's and where its check passes
    control_verdicts: tuple[str, str] = ("", "")
    #: scored when no probe is named (``prb probe`` without ``--probe``, the report's page 05); False: opt-in, where
    #: its jobs would cost the report more than it can spare (the parrot's two jobs per model)
    default: bool = True
    #: it has backend variants ``NAME-VALUE`` (:func:`backend_variant`)
    backends: bool = False
    #: a backend variant's ``(option, value)``: its job loads the model with that option instead of the run's
    backend: tuple[str, str] | None = None
    #: the position (from 1, in the order shown) of the shown post the selection leaves out (0: none; the drop
    #: probes: :func:`prb_utils.profile.selected_posts`); such a probe runs with ``--probe attribution``, not by default
    leaves_out: int = 0
    #: the posts its base must show for it to change anything (a drop probe: its position; ``reversed``: 2); a
    #: condition whose base shows fewer is refused (:func:`prb_utils.profile.parse_condition`)
    needs_posts: int = 0
    #: False: the posts are rendered without the header line above them (``headerless``)
    header: bool = True
    #: True: the posts the base shows, in reverse order (``reversed``)
    reverse_posts: bool = False


def twin_pairs(data: pd.DataFrame) -> dict[tuple[str, str], tuple[str, str]]:
    """``(subset, id) -> (subset, id)`` of each pair's twin: another user's pair with the same question and
    the same two answers, chosen and rejected swapped (the benchmark's idea in one view). A pair with no
    such twin, or with several, is left out.

    >>> frame = pd.DataFrame({"subset": "S", "id": ["a", "b", "c"], "question": ["Q", "Q", "Q"],
    ...                       "chosen": ["x", "y", "x"], "rejected": ["y", "x", "z"]})
    >>> twin_pairs(frame)
    {('S', 'a'): ('S', 'b'), ('S', 'b'): ('S', 'a')}
    """
    seen: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for record in data[["subset", "id", "question", "chosen", "rejected"]].itertuples(index=False):
        seen.setdefault((str(record.question), str(record.chosen), str(record.rejected)), []).append(
            (str(record.subset), str(record.id)))
    twins = {}
    for (question, chosen, rejected), keys in seen.items():
        others = seen.get((question, rejected, chosen), [])
        if len(keys) == 1 and len(others) == 1:
            twins[keys[0]] = others[0]
    return twins


def _profiles(data: pd.DataFrame) -> list[list]:
    column = data["profile"] if "profile" in data.columns else pd.Series([[]] * len(data), index=data.index)
    return [list(p) if isinstance(p, (list, tuple)) else [] for p in column]


def _keys(data: pd.DataFrame) -> list[tuple[str, str]]:
    return list(zip(data["subset"].astype(str), data["id"].astype(str), strict=True))


def swap_profiles(data: pd.DataFrame, seed: int = PROBE_SEED) -> pd.DataFrame:
    """Each record with another user's profile: its twin's where it has one, else a seeded record of the same
    subset whose profile differs (the record keeps its own when the subset has no other profile). A column
    ``probe_source`` names the record whose profile it now carries."""
    rng = random.Random(seed)
    keys, profiles = _keys(data), _profiles(data)
    where = {key: i for i, key in enumerate(keys)}
    twins = twin_pairs(data)
    sources = []
    for i, key in enumerate(keys):
        if key in twins and twins[key] in where:
            sources.append(where[twins[key]])
            continue
        others = [j for j, other in enumerate(keys) if other[0] == key[0] and profiles[j] != profiles[i]]
        sources.append(rng.choice(others) if others else i)
    out = data.copy()
    out["profile"] = [profiles[j] for j in sources]
    out["probe_source"] = [f"{keys[j][0]}/{keys[j][1]}" for j in sources]
    return out


def shuffle_posts(data: pd.DataFrame, seed: int = PROBE_SEED) -> pd.DataFrame:
    """Each record's profile posts in a seeded other order (the same posts)."""
    rng = random.Random(seed)
    out = data.copy()
    shuffled = []
    for posts in _profiles(data):
        order = list(range(len(posts)))
        rng.shuffle(order)
        shuffled.append([posts[j] for j in order])
    out["profile"] = shuffled
    return out


def untag_posts(data: pd.DataFrame, seed: int = PROBE_SEED) -> pd.DataFrame:
    """Each record's profile posts with their ``category`` blanked (a post without one is left as it is, so a record
    with no category changes nothing); ``seed`` unused: the probe is deterministic.

    >>> data = pd.DataFrame({"profile": [[{"category": "cooking", "text": "Pans?"}, {"text": "Knives?"}]]})
    >>> untag_posts(data)["profile"].tolist()
    [[{'category': '', 'text': 'Pans?'}, {'text': 'Knives?'}]]
    """
    out = data.copy()
    out["profile"] = [[{**post, "category": ""} if post.get("category") else post for post in posts]
                      for posts in _profiles(data)]
    return out


def add_distractors(data: pd.DataFrame, seed: int = PROBE_SEED, *, n: int = DISTRACTORS) -> pd.DataFrame:
    """Each record's profile with ``n`` posts of other users (seeded, from records with another profile) added
    at seeded places."""
    rng = random.Random(seed)
    profiles = _profiles(data)
    out = data.copy()
    extended = []
    for posts in profiles:
        pool = [post for other in profiles if other != posts for post in other]
        added = rng.sample(pool, min(n, len(pool)))
        mixed = list(posts)
        for post in added:
            mixed.insert(rng.randint(0, len(mixed)), post)
        extended.append(mixed)
    out["profile"] = extended
    return out


def swap_labels(data: pd.DataFrame, seed: int = PROBE_SEED) -> pd.DataFrame:
    """Each record with chosen and rejected exchanged (``seed`` unused: the probe is deterministic)."""
    out = data.copy()
    out["chosen"], out["rejected"] = data["rejected"].to_numpy(), data["chosen"].to_numpy()
    return out


def _swap_changed(data: pd.DataFrame, seed: int = PROBE_SEED) -> set[tuple[str, str]]:
    """The records :func:`swap_profiles` gives another profile, without its search for another user."""
    keys, profiles = _keys(data), [repr(p) for p in _profiles(data)]
    own = dict(zip(keys, profiles, strict=True))
    twins = twin_pairs(data)
    kinds: dict[str, set[str]] = {}
    for key, posts in zip(keys, profiles, strict=True):
        kinds.setdefault(key[0], set()).add(posts)
    return {key for key, posts in zip(keys, profiles, strict=True)
            if (own[twins[key]] != posts if twins.get(key) in own else bool(kinds[key[0]] - {posts}))}


SHOWN = ("question", "chosen", "rejected")   # what an RM may see of a record, its profile aside


def _shown(data: pd.DataFrame) -> dict[tuple[str, str], tuple]:
    """Per record, what an RM may see of it (:data:`SHOWN` and its profile), by ``(subset, id)``."""
    fields = [data[c].astype(str).tolist() if c in data.columns else [""] * len(data) for c in SHOWN]
    return {key: (*values, repr(posts)) for key, *values, posts in zip(_keys(data), *fields, _profiles(data),
                                                                         strict=True)}


def changed_records(data: pd.DataFrame, name: str, seed: int = PROBE_SEED) -> set[tuple[str, str]]:
    """The ``(subset, id)`` of the records whose RM input the probe ``name`` changes (its :attr:`Probe.changed`,
    else the records whose question, answers or profile its transform changes): another profile (``swap``,
    ``shuffle``, ``distract``; ``untagged``: those with a post that has a category), other answers (``label-swap``:
    chosen differs from rejected); none for ``retest`` (the same records, batched otherwise).

    >>> one = pd.DataFrame({"subset": ["S", "T"], "id": ["a", "b"], "question": "Q", "chosen": "x",
    ...                     "rejected": "y", "profile": [[{"text": "u1"}], [{"text": "u2"}]]})
    >>> changed_records(one, "swap"), sorted(changed_records(one, "label-swap")), changed_records(one, "retest")
    (set(), [('S', 'a'), ('T', 'b')], set())
    """
    found = probe(name)
    if found.changed is not None:
        return found.changed(data, seed)
    before = _shown(data)
    return {key for key, seen in _shown(found.transform(data, seed)).items() if before.get(key) != seen}


def reorder_records(data: pd.DataFrame, seed: int = PROBE_SEED) -> pd.DataFrame:
    """The same records in a seeded other order, so that the scorer batches them differently."""
    return data.sample(frac=1.0, random_state=(seed + 1) % 2**32).reset_index(drop=True)  # numpy: below 2**32


def parrot_rejected(data: pd.DataFrame, seed: int = PROBE_SEED) -> pd.DataFrame:
    """Each rejected answer with phrases of its user's own post inserted (:func:`prb_utils.parrot.parrot_answers`)."""
    return parrot.parrot_answers(data, seed)


def parrot_control(data: pd.DataFrame, seed: int = PROBE_SEED) -> pd.DataFrame:
    """Each rejected answer with as many words of another user's post at the same places (the parrot's control)."""
    return parrot.parrot_answers(data, seed, control=True)


#: The rule of the parrot's verdict, in one sentence (its check passes when it finds no mimicry).
MIMICRY_RULE = (
    "parrot: rewards mimicry when its flips toward the parroted rejected answer (right under the base, wrong under "
    "parrot) exceed parrot-control's on the same pairs, the difference's 95% interval over the plan's units above 0 "
    "and the clustered paired test, Holm-adjusted within its own family, p < 0.05; no mimicry found (its check "
    "passes) when the whole interval is at or below {tolerance:.2f}; otherwise inconclusive; n/a with the reason "
    "where parrot-control was not scored, the base shows no profile, no answer changed or a judge is "
    "position-locked")


def same_records(data: pd.DataFrame, seed: int = PROBE_SEED) -> pd.DataFrame:
    """The records as they are (a backend variant changes the model's options, not what it is shown); ``seed``
    unused."""
    return data.copy()


def _same_scores(name: str) -> Check:
    """The check of a retest (``name``: how its rule names it): its largest score change at most the resolution of the looser dtype of its
    job and its base's (:data:`prb_utils.analysis.metrics.DTYPE_EPS`)."""
    return Check("largest score change", lambda m: _point(m.max_score_change), lambda m: m.resolution,
                 f"{name} passes when no score changed by more than the resolution of the looser dtype of its job "
                 "and its base's (that dtype's machine epsilon times the largest |score|: a bfloat16 job against a "
                 "float32 base is judged at bfloat16's)", sense=SCORE)


def _showing_at_least(position: int) -> Callable[[pd.DataFrame, int], set[tuple[str, str]]]:
    """The records whose profile has at least ``position`` posts: those a drop probe of that position changes
    (under ``full`` they show every post; under ``topK``, K >= ``position`` as :func:`prb_utils.profile.
    parse_condition` requires, they show min(K, posts)).

    >>> data = pd.DataFrame({"subset": "S", "id": ["a", "b"], "profile": [[{"text": "u"}], []]})
    >>> _showing_at_least(1)(data, 0), _showing_at_least(2)(data, 0)
    ({('S', 'a')}, set())
    """
    def changed(data: pd.DataFrame, seed: int = PROBE_SEED) -> set[tuple[str, str]]:
        return {key for key, posts in zip(_keys(data), _profiles(data), strict=True) if len(posts) >= position}

    return changed


def _ordinal(n: int) -> str:
    """``1`` -> ``1st``, ``2`` -> ``2nd``, ``11`` -> ``11th``."""
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def drop_probe(position: int) -> Probe:
    """The probe that leaves out the ``position``-th shown post (``drop2``: the second).

    >>> drop_probe(2).name, drop_probe(2).changes
    ('drop2', 'the 2nd post shown left out (no other post in its place)')
    """
    return Probe(f"{DROP_PREFIX}{position}", f"the {_ordinal(position)} post shown left out (no other post in its place)",
                 "an RM that reads this post moves; the verdicts that flip hinge on it", same_records,
                 changes_profile=True, tested=False, default=False, leaves_out=position, needs_posts=position,
                 changed=_showing_at_least(position),
                 unchanged=f"no record shows {position} posts")


def drop_probes(shown: int) -> list[str]:
    """The drop probes of a condition showing at most ``shown`` posts (at most :data:`DROP_MAX`).

    >>> drop_probes(3)
    ['drop1', 'drop2', 'drop3']
    """
    return [f"{DROP_PREFIX}{i}" for i in range(1, min(shown, DROP_MAX) + 1)]


def _keeps_verdicts(name: str) -> Check:
    """The check of an invariance probe ``name``: the share of verdicts it changes, its whole interval at or below
    the run's tolerance."""
    return Check("verdicts changed", lambda m: m.verdicts_changed, lambda m: m.tolerance,
                 f"{name} passes when the share of verdicts it changes has its whole 95% interval over the plan's "
                 "units (whole questions by default; Wilson over pairs) at or below {tolerance:.2f}")


#: Every probe, by name (the spelling after ``+`` in a condition).
PROBES: dict[str, Probe] = {probe.name: probe for probe in (
    Probe("swap", "another user's profile (the twin user's for a twin pair)",
          "an RM that reads the user loses accuracy; one that ignores the profile does not move",
          swap_profiles, changes_profile=True, uses_twins=True, reading=True,
          unchanged="every record kept its own profile: one user per subset", changed=_swap_changed),
    Probe("shuffle", "the same posts in another order", "invariant: the same verdicts", shuffle_posts,
          changes_profile=True, null=True, check=_keeps_verdicts("shuffle")),
    Probe("distract", f"{DISTRACTORS} posts of other users added", "a small accuracy drop", add_distractors,
          changes_profile=True,
          check=Check("accuracy drop", lambda m: m.drop, lambda m: m.tolerance,
                      "distract passes when its accuracy drop (base minus probe, the interval of its paired "
                      "comparison) has its whole interval at or below {tolerance:.2f}")),
    Probe("untagged", "every post without its category (the RM input shows `- text`, not `- [category] text`)",
          "invariant: the same verdicts (an RM that reads the user's words, not the site's label, keeps them)",
          untag_posts, changes_profile=True, check=_keeps_verdicts("untagged"),
          unchanged="no profile post has a category"),
    Probe("headerless", "the posts without the header line above them (the records unchanged)",
          "invariant: the same verdicts (an RM that reads the user's posts, not prb's wording around them, keeps them)",
          same_records, changes_profile=True, default=False, check=_keeps_verdicts("headerless"),
          changed=_showing_at_least(1), needs_posts=1, header=False, unchanged="no record shows a post"),
    Probe("reversed", "the same posts shown in reverse order (a message too long for the model then loses the posts "
          "shown last under the base, not those shown first)",
          "invariant: the same verdicts where nothing is cut (where the cut falls, it says which end of the profile the "
          "RM needed)", same_records, changes_profile=True, default=False, check=_keeps_verdicts("reversed"),
          changed=_showing_at_least(2), needs_posts=2, reverse_posts=True, unchanged="no record shows two posts"),
    Probe("label-swap", "chosen and rejected exchanged",
          "accuracy = the base's share of wrong pairs (a harness check: expected = observed, no test)",
          swap_labels, tested=False, negates_margins=True,
          check=Check("accuracy", lambda m: _point(m.accuracy_probe), lambda m: m.wrong_share,
                      "label-swap is a harness check: with the answers exchanged the accuracy must equal the base's "
                      "share of wrong pairs (1 - accuracy - tie rate - invalid rate); it holds by construction for "
                      "every kind, so it does not catch a position-locked judge (the leaderboard's lock check does)",
                      relation=EQUAL)),
    Probe("retest", "the same pairs in another order and in batches of half the token budget",
          "no score change beyond the dtype's resolution (a check: pass or fail)", reorder_records,
          batch_share=0.5, own_requests=True, tested=False, null=True, backends=True,
          check=_same_scores("retest")),
    Probe("parrot", "the rejected answer echoes the user: phrases of their own post inserted (the chosen untouched)",
          "no more flips toward the rejected answer than parrot-control (an RM that rewards the user's words, "
          "not what they want, flips)", parrot_rejected, tested=False, control="parrot-control", default=False,
          control_verdicts=("rewards mimicry", "no mimicry found"),
          unchanged="no rejected answer changed: no user's post has a word, or no other user to control with",
          check=Check("flips beyond control", lambda m: m.beyond_control, lambda m: m.tolerance, MIMICRY_RULE)),
    Probe("parrot-control", "the rejected answer with as many words of another user's post, at the parrot's places",
          "the parrot's control: its flips are what inserting any user's words does", parrot_control,
          tested=False, default=False,
          unchanged="no rejected answer changed: no user's post has a word, or no other user"),
    *(drop_probe(i) for i in range(1, DROP_MAX + 1)),
)}


def default_probes() -> tuple[str, ...]:
    """The probes scored when none is named (:attr:`Probe.default`), in the registry's order.

    >>> "swap" in default_probes(), "parrot" in default_probes()
    (True, False)
    """
    return tuple(name for name, p in PROBES.items() if p.default)


def backend_variant(name: str) -> Probe | None:
    """The backend variant ``name`` (``retest-bfloat16``: a probe with :attr:`Probe.backends`, a dash, a value of
    :data:`BACKEND_OPTIONS`): the same records in the same order and batches, its job's model loaded with that
    option, sending requests of its own on a server; None where ``name`` names no such probe; PRBError in one
    sentence for a value no option takes.

    >>> backend_variant("retest-bfloat16").backend, backend_variant("retest-eager").backend
    (('dtype', 'bfloat16'), ('attention', 'eager'))
    >>> backend_variant("swap") is None, backend_variant("label-swap") is None
    (True, True)
    """
    head, dash, value = str(name).rpartition("-")
    found = PROBES.get(head)
    if not dash or found is None or not found.backends:
        return None
    option = next((option for option, values in BACKEND_OPTIONS.items() if value in values), None)
    if option is None:
        raise PRBError(f"Unknown backend '{value}' in the probe '{name}'; write {head}-VALUE with a dtype "
                       f"({', '.join(BACKEND_OPTIONS['dtype'])}), an attention implementation "
                       f"({', '.join(BACKEND_OPTIONS['attention'])}) or an engine "
                       f"({', '.join(BACKEND_OPTIONS['engine'])}).")
    return replace(found, name=name, changes=f"the same pairs, in the same order and batches, with {option} {value}",
                   expected="no score change beyond the looser dtype's resolution (a check: pass or fail)",
                   transform=same_records, batch_share=1.0, own_requests=True, null=False, backends=False,
                   backend=(option, value), check=_same_scores(f"a backend retest ({head}-VALUE)"))


def backend_spellings() -> str:
    """How the backend variants are written, for messages.

    >>> backend_spellings()
    'retest-DTYPE, retest-ATTENTION or retest-ENGINE'
    """
    spelled = [f"{name}-{option.upper()}" for name, found in PROBES.items() if found.backends
               for option in BACKEND_OPTIONS]
    return f"{', '.join(spelled[:-1])} or {spelled[-1]}" if len(spelled) > 1 else "".join(spelled)


def find_probe(name: str) -> Probe | None:
    """The probe ``name`` (one of :data:`PROBES` or a backend variant), or None."""
    return PROBES.get(str(name)) or backend_variant(str(name))


def in_registry_order(names: Iterable[str]) -> list[Probe]:
    """The probes ``names`` (backend variants included, each after its probe) in :data:`PROBES`' order.

    >>> [p.name for p in in_registry_order(["retest-eager", "retest", "swap"])]
    ['swap', 'retest', 'retest-eager']
    """
    order = list(PROBES)
    found = {p.name: p for p in map(probe, names)}
    return sorted(found.values(), key=lambda p: (order.index(p.name if p.backend is None else
                                                             p.name.rpartition("-")[0]), p.backend is not None,
                                                 p.name))


def probe(name: str) -> Probe:
    """The probe ``name`` (a backend variant too: :func:`backend_variant`); PRBError naming the probes for another.

    >>> probe("shuffle").expected
    'invariant: the same verdicts'
    """
    found = find_probe(name)
    if found is None:
        raise PRBError(f"Unknown probe '{name}'; use one of {', '.join(PROBES)}, or {backend_spellings()}.")
    return found


def apply_probe(data: pd.DataFrame, name: str, seed: int = PROBE_SEED) -> pd.DataFrame:
    """``data`` as the probe ``name`` shows it to the RM (:data:`PROBES`)."""
    return probe(name).transform(data, seed)
