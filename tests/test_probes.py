"""The personalization probes: the record transforms (prb_utils.probes) and what they found
(prb_utils.analysis.probe_effects), on planted stores whose expected behaviour is known."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from prb_utils.analysis.probe_effects import (
    probe_effects,
    probe_families,
    probe_notes,
    probe_table,
    reading_verdicts,
    split_probe,
)
from prb_utils.cli import main
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.models.batching import BudgetBatcher
from prb_utils.probes import DROP_MAX, PROBES, apply_probe, changed_records, default_probes, twin_pairs
from prb_utils.profile import parse_condition
from prb_utils.scoring import _batch_share
from prb_utils.store import load_results

N_QUESTIONS = 12


def twin_data() -> pd.DataFrame:
    """N_QUESTIONS questions, each asked by two users who want opposite answers (twin pairs)."""
    rows = []
    for q in range(N_QUESTIONS):
        for user, (chosen, rejected) in enumerate(((f"long answer {q} " * 3, f"short {q}"),
                                                   (f"short {q}", f"long answer {q} " * 3))):
            rows.append({"subset": "S", "id": f"q{q}-u{user}", "question": f"question {q}?", "chosen": chosen,
                         "rejected": rejected, "category": "c",
                         "profile": [{"text": f"user {user} of question {q} likes {'long' if user == 0 else 'short'}"}]})
    return pd.DataFrame(rows)


def test_every_probe_transforms_only_what_it_says():
    data = twin_data()
    swapped = apply_probe(data, "swap")
    twins = twin_pairs(data)
    assert len(twins) == len(data)
    for row in swapped.itertuples():
        twin = twins[(row.subset, row.id)]
        assert row.probe_source == f"{twin[0]}/{twin[1]}"
    assert (swapped[["question", "chosen", "rejected"]].values == data[["question", "chosen", "rejected"]].values).all()
    shuffled = apply_probe(data.assign(profile=[[{"text": "a"}, {"text": "b"}, {"text": "c"}]] * len(data)), "shuffle")
    assert all(sorted(p["text"] for p in posts) == ["a", "b", "c"] for posts in shuffled["profile"])
    distracted = apply_probe(data, "distract")
    assert all(len(d) == len(p) + 3 and all(post in d for post in p)
               for d, p in zip(distracted["profile"], data["profile"], strict=True))
    flipped = apply_probe(data, "label-swap")
    assert (flipped["chosen"] == data["rejected"]).all() and (flipped["rejected"] == data["chosen"]).all()
    again = apply_probe(data, "retest")
    assert sorted(again["id"]) == sorted(data["id"]) and list(again["id"]) != list(data["id"])
    assert apply_probe(data, "swap", seed=1)["profile"].tolist() == swapped["profile"].tolist()   # twins: no chance
    assert sorted(apply_probe(data, "retest", seed=2**32 - 1)["id"]) == sorted(data["id"])   # the largest --seed
    with pytest.raises(PRBError, match="Unknown probe"):
        apply_probe(data, "nope")
    tagged = data.assign(profile=[[{"category": "c", "text": "a"}, {"text": "b"}]] * len(data))
    untagged = apply_probe(tagged, "untagged")
    assert untagged["profile"].tolist() == [[{"category": "", "text": "a"}, {"text": "b"}]] * len(data)
    assert tagged["profile"].tolist()[0][0]["category"] == "c"   # the transform copies, the records stay tagged
    assert set(default_probes()) == {"swap", "shuffle", "distract", "untagged", "label-swap", "retest"}
    assert set(PROBES) - set(default_probes()) == {"parrot", "parrot-control", "headerless", "reversed",   # opt-in
                                                   *(f"drop{i}" for i in range(1, DROP_MAX + 1))}


def _rows(model: str, profile: str, data: pd.DataFrame, margins: np.ndarray, kind: str = "classifier",
          **extra) -> pd.DataFrame:
    outcome = np.where(margins > 0, "correct", np.where(margins < 0, "wrong", "tie"))
    return pd.DataFrame({"model": model, "kind": kind, "profile": profile, "subset": data["subset"],
                         "id": data["id"], "score_chosen": margins, "score_rejected": 0.0, "outcome": outcome,
                         **extra})


def planted_store() -> tuple[pd.DataFrame, pd.DataFrame]:
    """'length' (the profile-blind kind) prefers the longer answer whatever the profile; 'reader' prefers what the
    profile it is shown asks for (so with the twin's profile it flips); both also scored with the answers
    exchanged."""
    data = twin_data()
    longer = np.where(data["chosen"].str.len() > data["rejected"].str.len(), 1.0, -1.0)
    frames = [_rows("length", "top3", data, longer, "length"), _rows("length", "top3+swap", data, longer, "length"),
              _rows("length", "top3+label-swap", data, -longer, "length"),
              _rows("reader", "top3", data, np.ones(len(data))), _rows("reader", "top3+swap", data, -np.ones(len(data))),
              _rows("reader", "top3+label-swap", data, -np.ones(len(data)))]
    return pd.concat(frames, ignore_index=True), data


def test_the_probes_tell_a_reader_of_the_user_from_a_profile_blind_baseline():
    rows, data = planted_store()
    effects = probe_effects(rows, data).set_index(["model", "probe"])
    verdicts = reading_verdicts(effects.reset_index(), models=["length", "reader", "other"]).set_index("model")
    assert verdicts.loc["length", "verdict"].startswith("n/a: profile-blind")   # no verdict, not "ignores"
    assert verdicts.loc["length", "sensitivity"] == 0 and np.isnan(verdicts.loc["length", "p_holm"])
    assert verdicts.loc["reader", "verdict"] == "reads the user"
    assert verdicts.loc["reader", "sensitivity"] == 1 and verdicts.loc["reader", "family"] == "top3+swap: Holm over 1 test"
    assert (verdicts.loc["reader", "both_right"], verdicts.loc["reader", "twin_sets"]) == (N_QUESTIONS, N_QUESTIONS)
    assert verdicts.loc["length", "one_right"] == N_QUESTIONS   # a profile-blind RM gets one twin of each set right
    assert verdicts.loc["other", "verdict"].startswith("n/a")
    assert effects.loc[("reader", "swap"), "max_score_change"] == 2
    assert effects.loc[("reader", "swap"), "inputs_changed"] == len(data)


def drop_store(n_drop: int, *, others: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """'weak' loses both pairs of ``n_drop`` of the questions with another user's profile and keeps the rest;
    with ``others``, 'steady' (a profile reader whose verdicts and scores do not move) is scored too."""
    data = twin_data()
    question = data["id"].str.split("-").str[0].str[1:].astype(int)
    swapped = np.where(question < n_drop, -1.0, 1.0)
    frames = [_rows("weak", "top3", data, np.ones(len(data))), _rows("weak", "top3+swap", data, swapped),
              _rows("weak", "top3+shuffle", data, np.ones(len(data)))]
    if others:
        frames += [_rows("steady", "top3", data, np.ones(len(data))),
                   _rows("steady", "top3+swap", data, np.ones(len(data)))]
    return pd.concat(frames, ignore_index=True), data


def test_a_drop_that_does_not_clear_holm_is_inconclusive_not_a_reaction():
    # 6 of 12 questions drop: the exact sign-flip p is 2/64 = 0.031 alone, 0.0625 Holm-adjusted over two models
    rows, data = drop_store(6)
    effects = probe_effects(rows, data)
    weak = reading_verdicts(effects).set_index("model").loc["weak"]
    assert weak["sensitivity_low"] > 0                         # the interval clears 0 ...
    assert weak["p_holm"] == pytest.approx(2 * 2 / 64)         # ... the family's test does not
    assert weak["verdict"] == "inconclusive"
    assert weak["null_probe"] == "shuffle" and weak["reaction_p_holm"] >= 0.05
    assert weak["family"] == "top3+swap: Holm over 2 tests"
    alone = reading_verdicts(probe_effects(*drop_store(6, others=False))).set_index("model").loc["weak"]
    assert alone["p_holm"] == pytest.approx(2 / 64) and alone["verdict"] == "reads the user"
    steady = reading_verdicts(effects).set_index("model").loc["steady"]
    assert steady["verdict"] == "ignores the profile"


def test_profile_blind_and_locked_models_are_no_members_of_the_family():
    rows, data = drop_store(6)
    before = probe_effects(rows, data).set_index(["model", "probe"])
    longer = np.where(data["chosen"].str.len() > data["rejected"].str.len(), 1.0, -1.0)
    locked = {"verdict_ab": "chosen", "verdict_ba": "rejected"}   # always answers "A"
    more = pd.concat([rows, _rows("length", "top3", data, longer, "length"),
                      _rows("length", "top3+swap", data, -longer, "length"),
                      _rows("judge:x", "top3", data, np.ones(len(data)), "judge", **locked),
                      _rows("judge:x", "top3+swap", data, np.ones(len(data)), "judge", **locked)], ignore_index=True)
    after = probe_effects(more, data).set_index(["model", "probe"])
    assert after.loc[("weak", "swap"), "p_holm"] == before.loc[("weak", "swap"), "p_holm"]
    assert after.loc[("weak", "swap"), "family"] == "top3+swap: Holm over 2 tests"
    assert after.loc[("length", "swap"), "no_verdict"].startswith("n/a: profile-blind")
    assert after.loc[("judge:x", "swap"), "no_verdict"].startswith("n/a: position-locked")
    assert np.isnan(after.loc[("length", "swap"), "p_holm"]) and after.loc[("length", "swap"), "family"] == ""
    families = {f.name: f for f in probe_families(after.reset_index())}
    assert families["top3+swap"].members == ("steady", "weak")
    assert {m for m, _ in families["top3+swap"].left_out} == {"length", "judge:x"}
    shown = probe_table(after.reset_index())
    assert set(shown.loc[shown["p (Holm)"] != "—", "model"]) == {"steady", "weak"}   # a p only for members ...
    assert "Family top3+swap: Holm over 2 tests of steady, weak; not members: " in " ".join(
        probe_notes(after.reset_index()))                                             # ... named under the table


def test_an_anti_reader_is_told_apart_from_a_reader_and_twin_flips_are_not_evidence():
    """An anti-reader (it prefers what the user does *not* want) flips every twin under swap, as a perfect reader
    does: the flip restates the base outcomes. The swap's accuracy change and the twin split tell them apart."""
    data = twin_data()
    ones = np.ones(len(data))
    rows = pd.concat([_rows("reader", "top3", data, ones), _rows("reader", "top3+swap", data, -ones),
                      _rows("anti", "top3", data, -ones), _rows("anti", "top3+swap", data, ones)], ignore_index=True)
    effects = probe_effects(rows, data)
    verdicts = reading_verdicts(effects).set_index("model")
    assert verdicts.loc["reader", "verdict"] == "reads the user"
    assert verdicts.loc["anti", "verdict"] == "reacts to any profile"    # the other user's profile makes it right
    assert verdicts.loc["reader", "change_rate"] == verdicts.loc["anti", "change_rate"] == 1.0   # the same flips
    assert (verdicts.loc["reader", "both_right"], verdicts.loc["reader", "both_wrong"]) == (N_QUESTIONS, 0)
    assert (verdicts.loc["anti", "both_right"], verdicts.loc["anti", "both_wrong"]) == (0, N_QUESTIONS)
    assert not {"twin_flips", "twin_pairs"} & (set(effects.columns) | set(verdicts.columns))


def test_label_swap_is_a_harness_check_with_no_test():
    rows, data = planted_store()
    effects = probe_effects(rows, data).set_index(["model", "probe"])
    for model in ("length", "reader"):   # expected: the base's share of wrong pairs
        row = effects.loc[(model, "label-swap")]
        assert row["check"] == "pass" and row["bound"] == row["accuracy_probe"] == row["check_value"]
        assert np.isnan(row[["p_value", "p_holm", "ci_low", "ci_high"]].astype(float)).all()
    shown = probe_table(effects.reset_index()).set_index(["model", "probe"])
    assert shown.loc[("reader", "label-swap"), "p (Holm)"] == "—"
    assert shown.loc[("reader", "label-swap"), "measured [95% CI]"] == "accuracy 0.000"
    assert shown.loc[("reader", "label-swap"), "allowed"] == "= 0.000"
    broken = rows.copy()
    broken.loc[(broken["model"] == "length") & (broken["profile"] == "top3+label-swap"), "outcome"] = "correct"
    assert probe_effects(broken, data).set_index(["model", "probe"]).loc[("length", "label-swap"), "check"] == "fail"


def test_retest_fails_its_check_past_the_dtypes_resolution():
    data = twin_data()
    base = np.linspace(1.0, 4.0, len(data))
    within = base + 4.0 * 2.0 ** -24          # below float32's epsilon (2^-23) times the largest |score| (4)
    beyond = base + 1e-4
    rows = pd.concat([_rows(m, "top3", data, base, score_dtype="float32") for m in ("a", "b")]
                     + [_rows("a", "top3+retest", data, within, score_dtype="float32"),
                        _rows("b", "top3+retest", data, beyond, score_dtype="float32")], ignore_index=True)
    effects = probe_effects(rows, data).set_index("model")
    assert effects.loc["a", "threshold"] == pytest.approx(4.0 * 2.0 ** -23)
    assert effects.loc["a", "check"] == "pass" and effects.loc["b", "check"] == "fail"
    assert effects.loc["b", "verdicts_kept"] == 1.0      # every verdict stays, and the check still fails
    assert np.isnan(effects.loc["b", "p_value"])
    assert probe_table(effects.reset_index()).set_index("model").loc["b", "check"] == "fail"



def test_a_check_without_an_expected_value_shows_a_dash_never_nan():
    """A harness check whose expected value is undefined (no pair in common with the base, a score with no
    resolution) shows the one missing mark of prb_utils.formatting in prb probe's table, not NaN nor "accuracy —"."""
    from prb_utils.formatting import MISSING

    rows, data = planted_store()
    rows = pd.concat([rows, _rows("reader", "top3+retest", data, np.ones(len(data)))], ignore_index=True)
    effects = probe_effects(rows, data)
    checks = effects[effects["probe"].isin(["label-swap", "retest"])].copy()
    assert set(checks["probe"]) == {"label-swap", "retest"}
    checks["bound"], checks["threshold"] = np.nan, np.nan
    shown = probe_table(checks)
    assert (shown["allowed"] == MISSING).all()
    assert not shown.astype(str).apply(lambda c: c.str.contains("nan", case=False)).any().any()

def test_a_swap_that_changed_no_input_is_not_applicable():
    data = twin_data()
    lonely = data[data["id"].str.endswith("u0")]
    lonely = lonely.assign(subset=[f"S{i}" for i in range(len(lonely))])   # one user per subset (like --limit 1)
    assert changed_records(lonely, "swap") == set()
    assert apply_probe(lonely, "swap")["profile"].tolist() == lonely["profile"].tolist()
    assert changed_records(data, "swap") == {k for k in zip(data["subset"], data["id"], strict=True)}
    ones = np.ones(len(data))
    rows = pd.concat([_rows("reader", "top3", lonely, ones[:len(lonely)]),
                      _rows("reader", "top3+swap", lonely, ones[:len(lonely)])])
    verdict = reading_verdicts(probe_effects(rows, lonely)).iloc[0]
    assert verdict["verdict"] == "n/a: the probe changed no RM input (every record kept its own profile: one user " \
                                 "per subset)"
    rows = pd.concat([_rows("reader", "none", data, ones), _rows("reader", "none+swap", data, ones)])
    verdict = reading_verdicts(probe_effects(rows, data)).iloc[0]
    assert verdict["verdict"].startswith("n/a: the probe changed no RM input (the base condition none")
    assert reading_verdicts(probe_effects(rows, None, units=None)).iloc[0]["verdict"].startswith("n/a")


def test_split_probe_reads_the_condition_label():
    assert split_probe("top3+swap") == ("top3", "swap") and split_probe("none") == ("none", None)


def test_prb_probe_scores_each_probe_as_a_job_and_says_what_it_found(tmp_path, capsys):
    """Through the command line on the sample: the length baseline never reads the profile (swap, shuffle and
    distract move no verdict), the lexical baseline reads the profile's words (swap moves its verdicts),
    label-swap gives 1 - accuracy - tie rate for both, and retest changes nothing."""

    out = tmp_path / "results"
    assert main(["probe", "--data", "sample", "--model", "length", "--model", "lexical", "--out", str(out),
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "n/a: profile-blind" in printed and "Rule: reads the user" in printed
    assert "p (Holm)" in printed and "Family top3+swap: Holm over 1 test of lexical; not members: length (n/a: profile-blind" in printed
    assert "verdicts changed" in printed and "≤ 0.100" in printed and "Checks: shuffle passes when" in printed
    rows = load_results(out)
    assert sorted(set(rows["profile"])) == sorted(["top3", *(f"top3+{p}" for p in default_probes())])
    effects = probe_effects(rows, load_benchmark("sample")).set_index(["model", "probe"])
    for name in ("swap", "shuffle", "distract", "untagged", "retest"):
        assert effects.loc[("length", name), "verdicts_kept"] == 1.0
    assert effects.loc[("lexical", "untagged"), "verdicts_kept"] == 1.0   # it reads the user's words, never a tag
    assert effects.loc[("lexical", "untagged"), "inputs_changed"] > 0
    assert effects.loc[("lexical", "swap"), "verdicts_kept"] < 1.0
    assert effects.loc[("lexical", "retest"), "verdicts_kept"] == 1.0
    assert effects.loc[("lexical", "retest"), "max_score_change"] == 0.0
    assert effects.loc[("lexical", "retest"), "check"] == "pass"
    for model in ("length", "lexical"):
        assert effects.loc[(model, "label-swap"), "check"] == "pass"
    assert main(["probe", "--data", "sample", "--model", "length", "--profile", "rubric", "--out", str(out)]) == 2
    assert "a probe transforms none, full or topK" in capsys.readouterr().err


def test_retest_on_the_hf_engine_in_float32_changes_no_verdict(tmp_path, tiny_lm_dir, capsys):

    out = tmp_path / "results"
    assert main(["probe", "--data", "sample", "--limit", "3", "--model", f"implicit:{tiny_lm_dir}", "--probe", "retest",
                 "--dtype", "float32", "--device", "cpu", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    effects = probe_effects(load_results(out), None, units=None).iloc[0]
    assert effects["probe"] == "retest" and effects["n_pairs"] == 9
    assert effects["verdicts_kept"] == 1.0 and effects["max_score_change"] < 1e-5
    assert effects["check"] == "pass" and effects["threshold"] > 0   # float32's epsilon times the largest |score|
    runs = {m["profile"]: m["run"] for m in (json.loads(p.read_text()) for p in out.glob("jobs/*/job.json"))}
    assert runs["top3+retest"]["batch_share"] == 0.5 and "batch_share" not in runs["top3"]


def test_retest_scores_in_half_the_batch_budget_and_gives_it_back():

    model = type("Model", (), {"batcher": BudgetBatcher(4096)})()
    with _batch_share(model, parse_condition("top3+retest")) as share:
        assert share == 0.5 and model.batcher.budget == 2048
    assert model.batcher.budget == 4096
    with _batch_share(model, parse_condition("top3+shuffle")) as share:
        assert share == 1.0 and model.batcher.budget == 4096


def test_swap_partners_depend_on_the_records_loaded_and_page_05_says_so():
    """A record without a twin gets a seeded other user of its subset among the records loaded, so another
    selection gives another partner; page 05 says that its partners and verdicts depend on what was loaded."""
    from prb_utils.notebook.report import NOTEBOOK_DIR

    rows = [{"subset": "S", "id": f"r{i}", "question": f"q{i}?", "chosen": f"a{i}", "rejected": f"b{i}",
             "profile": [{"text": f"user {i}"}]} for i in range(6)]
    data = pd.DataFrame(rows)
    partners = {n: apply_probe(data.head(n), "swap").set_index("id")["probe_source"]["r0"] for n in (2, 3, 4, 5, 6)}
    assert partners[2] == "S/r1"   # the one other user loaded
    assert set(partners.values()) != {"S/r1"}   # with more records loaded, another partner
    page = json.loads((NOTEBOOK_DIR / "05_reading_the_user.ipynb").read_text(encoding="utf-8"))
    text = " ".join("".join(c["source"]) for c in page["cells"] if c["cell_type"] == "markdown").replace("\n", " ")
    assert "A swap partner is drawn among the records loaded when the probe was scored" in text
    assert "can give other verdicts" in text


def test_shuffle_and_distract_pass_or_fail_against_the_tolerance_on_clustered_intervals():
    """An RM whose verdicts do not move under shuffle passes (interval [0, 0]); one whose shuffle changes both pairs
    of 6 of 12 questions fails (the whole interval is past 0.10, by the clustered bootstrap drawn here by hand); a
    distract that costs half the accuracy fails, one that costs nothing passes; a probe of `none` is n/a."""
    from prb_utils.analysis.probe_effects import INVARIANCE_TOLERANCE
    from prb_utils.analysis.resampling import bootstrap_ci

    data = twin_data()
    data = data.assign(profile=[[{"text": f"{i} post {k}"} for k in range(4)] for i in data["id"]])   # to shuffle
    ones = np.ones(len(data))
    question = data["id"].str.split("-").str[0]
    half = np.where(question.str[1:].astype(int) < 6, -1.0, 1.0)
    rows = pd.concat([_rows("steady", "top3", data, ones), _rows("steady", "top3+shuffle", data, ones),
                      _rows("steady", "top3+distract", data, ones),
                      _rows("moved", "top3", data, ones), _rows("moved", "top3+shuffle", data, half),
                      _rows("moved", "top3+distract", data, half),
                      _rows("steady", "none", data, ones), _rows("steady", "none+shuffle", data, ones)],
                     ignore_index=True)
    effects = probe_effects(rows, data, n_boot=500).set_index(["model", "base", "probe"])
    steady, moved = effects.loc[("steady", "top3", "shuffle")], effects.loc[("moved", "top3", "shuffle")]
    assert (steady["check_value"], steady["check_low"], steady["check_high"], steady["check"]) == (0, 0, 0, "pass")
    assert moved["check_value"] == 0.5 and moved["tolerance"] == INVARIANCE_TOLERANCE
    changed = (half != 1).astype(float)
    assert (moved["check_low"], moved["check_high"]) == pytest.approx(
        bootstrap_ci(changed, units=question.to_numpy(), n_boot=500, seed=0))
    assert moved["check_low"] > INVARIANCE_TOLERANCE and moved["check"] == "fail"
    assert effects.loc[("moved", "top3", "distract"), "check_value"] == 0.5
    assert effects.loc[("moved", "top3", "distract"), "check"] == "fail"
    assert effects.loc[("steady", "top3", "distract"), "check"] == "pass"
    assert effects.loc[("steady", "none", "shuffle"), "check"].startswith("n/a: the probe changed no RM input")
    lenient = probe_effects(rows, data, n_boot=500, tolerance=1.0).set_index(["model", "base", "probe"])
    assert lenient.loc[("moved", "top3", "shuffle"), "check"] == "pass"   # the tolerance is the rule's one number
    shown = probe_table(effects.reset_index()).set_index(["model", "probe"])
    assert shown.loc[("moved", "shuffle"), "measured [95% CI]"].startswith("verdicts changed 0.500 [")
    assert shown.loc[("moved", "shuffle"), "allowed"] == "≤ 0.100"
    assert set(shown.columns) >= {"check", "allowed"} and len(shown.columns) <= 9   # narrow enough for A4
    pairs = probe_effects(rows, data, units=None).set_index(["model", "base", "probe"])   # pairs as units: Wilson
    from prb_utils.analysis.metrics import wilson_ci
    assert (pairs.loc[("moved", "top3", "shuffle"), "check_low"],
            pairs.loc[("moved", "top3", "shuffle"), "check_high"]) == pytest.approx(wilson_ci(12, 24))


def test_page_05_says_one_sentence_per_probed_model_with_a_check_per_probe():
    """The findings layer's sentences for page 05: one per model, its swap change with the interval, the units and
    the Holm family behind its verdict, and the check of every other probe."""
    from prb_utils.analysis.findings import compute_findings, page_sentences

    rows, data = drop_store(6)
    rows = pd.concat([rows, _rows("weak", "none", data, -np.ones(len(data)))], ignore_index=True)
    effects = probe_effects(rows[rows["profile"] != "none"], data)
    found = compute_findings(rows[rows["profile"].isin(["none", "top3"])], data, calibrate=False)
    said = {s["model"]: s for s in page_sentences(found, "05", effects=effects)}
    assert set(said) == set(effects["model"]) == {"steady", "weak"}
    weak = said["weak"]
    swap = effects.set_index(["model", "probe"]).loc[("weak", "swap")]
    assert weak["diff"] == swap["diff"] and weak["p_holm"] == swap["p_holm"] and weak["n_units"] == N_QUESTIONS
    assert weak["verdict"] == reading_verdicts(effects).set_index("model").loc["weak", "verdict"]
    assert weak["sentence"].startswith("weak: with another user's posts its accuracy falls from 1.000 to 0.500 "
                                       "(with no profile: 0.000): -0.500 [")
    assert f"with {N_QUESTIONS} questions and Holm over 2 models (p = 0.063), inconclusive." in weak["sentence"]
    check = effects.set_index(["model", "probe"]).loc[("weak", "shuffle"), "check"]   # one post each: nothing moved
    assert weak["checks"] == {"shuffle": check} and weak["sentence"].endswith(f"Checks: shuffle {check}.")
    assert said["steady"]["checks"] == {} and said["steady"]["verdict"] == "ignores the profile"
    assert page_sentences(found, "05", effects=effects.iloc[:0])[0]["sentence"].startswith("No model is probed")


def _first_post(data: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Each record with its profile's first post only (``seed`` unused)."""
    return data.assign(profile=[list(posts)[:1] for posts in data["profile"]])


def test_a_new_probe_with_its_own_check_touches_no_analysis_file(tmp_path, capsys, monkeypatch):
    """The contributor guide's claim: a new probe is one record in PROBES, with its transform, its traits and a
    check of its own (here "first-post": each profile cut to its first post, held to keeping at least half of the
    verdicts, the whole interval at or above 1/2, a relation no built-in probe uses). Registered for this test
    only, it is scored with the baselines by prb probe on sample records and judged by the findings layer and
    page 05's helpers, none of which names a probe."""
    import ast
    from pathlib import Path

    import prb_utils.analysis
    from prb_utils.analysis.findings import page_sentences
    from prb_utils.analysis.probe_effects import probe_expectations
    from prb_utils.probes import AT_LEAST, Check, Measurement, Probe

    def verdicts_kept(measured: Measurement) -> tuple[float, float, float]:   # its own statistic
        value, low, high = measured.verdicts_changed
        return 1.0 - value, 1.0 - high, 1.0 - low

    kept = Check("verdicts kept", verdicts_kept, lambda m: 0.5, "first-post passes when the share of verdicts it "
                 "keeps has its whole interval at or above one half", relation=AT_LEAST)
    monkeypatch.setitem(PROBES, "first-post", Probe("first-post", "the profile's first post only",
                                                    "most verdicts kept", _first_post, changes_profile=True,
                                                    check=kept))
    out = tmp_path / "results"
    assert main(["probe", "--data", "sample", "--limit", "8", "--model", "length", "--model", "lexical",
                 "--probe", "first-post", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "verdicts kept" in printed and "Checks: first-post passes when" in printed
    rows = load_results(out)
    assert set(rows["profile"]) == {"top3", "top3+first-post"}
    effects = probe_effects(rows, load_benchmark("sample", limit=8))
    mine = effects.set_index("model")
    for model in ("length", "lexical"):   # the check, recomputed here from the stored outcomes
        wide = rows[rows["model"] == model].pivot_table(index=["subset", "id"], columns="profile", values="outcome",
                                                        aggfunc="first")
        share = float((wide["top3"] == wide["top3+first-post"]).mean())
        row = mine.loc[model]
        assert row["check_value"] == pytest.approx(share) and row["bound"] == 0.5
        assert row["check_low"] <= share <= row["check_high"]
        assert row["check"] == ("pass" if row["check_low"] >= 0.5 else "fail")
        assert row["inputs_changed"] > 0
    assert mine.loc["length", "check_value"] == 1.0 and mine.loc["length", "no_verdict"].startswith("n/a: profile-blind")
    assert mine.loc["lexical", "family"].startswith("top3+first-post: Holm over 1 test")   # tested: its own family
    said = {s["model"]: s for s in page_sentences(None, "05", effects=effects)}
    assert {m: s["checks"] for m, s in said.items()} == {m: {"first-post": mine.loc[m, "check"]} for m in mine.index}
    shown = probe_table(effects).set_index("model")
    assert shown.loc["length", "measured [95% CI]"].startswith("verdicts kept 1.000")
    assert shown.loc["lexical", "allowed"] == "≥ 0.500"
    assert "first-post" in set(probe_expectations()["probe"])
    notes = probe_notes(effects)
    assert notes[0].startswith("Checks: first-post passes when") and not any(n.startswith("Rule:") for n in notes)
    names = set(PROBES)   # and no module of the analysis names a probe in its code (docstrings aside)
    for path in Path(prb_utils.analysis.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))
                and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        named = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) not in docs} & names
        assert not named, f"{path.name} names the probes {sorted(named)}"


#: Planted data whose post categories name the preference: per question two users with the same posts and
#: opposite wants, each post's category a word of the chosen answer only (the rejected answer is the other user's).
LABELLED = [("What should I cook for dinner tonight?", "Any ideas for a quick weeknight meal?",
             ("vegan", "A vegan lentil curry, fully vegan."), ("steak", "A seared steak, a classic steak dinner.")),
            ("Where should we stay on our trip?", "How do I plan a weekend away?",
             ("camping", "Go camping: pitch a tent at a camping site."), ("hotel", "Book a hotel: a central hotel.")),
            ("How should I get to work?", "What is a good commute?",
             ("cycling", "Try cycling: cycling is quick."), ("driving", "Keep driving: driving is comfortable.")),
            ("What should I read next?", "Any book tips for the holidays?",
             ("poetry", "A poetry collection: modern poetry."),
             ("thrillers", "Thrillers: a fast-paced thrillers list."))]


def labelled_records() -> list[dict]:
    """Two records per question of :data:`LABELLED` (twins: the same question, posts and answers, roles swapped)."""
    records = []
    for q, (question, post, *wants) in enumerate(LABELLED):
        for user, ((label, chosen), (_, rejected)) in enumerate((wants, wants[::-1])):
            posts = [{"id": f"q{q}u{user}p{k}", "category": label, "text": f"{post} ({k})"} for k in range(2)]
            records.append({"id": f"q{q}-u{user}", "question": question, "chosen": chosen, "rejected": rejected,
                            "profile": posts, "user_id": f"u{user}"})
    return records


def test_untagged_shows_how_much_an_rm_leans_on_category_labels_that_name_the_preference(tmp_path, capsys):
    """On planted data where each post's category is a word of the chosen answer only, an RM that reads the whole
    RM input (embedding:minilm) is right more often with the tags than under +untagged (without them the twins'
    inputs are the same text, so it picks the same answer for both: one right); lexical reads the user's words,
    never a tag, and keeps every verdict. The untagged job's stored input is the rendering without any
    ``[category]``, and the check says which RM leans on the labels."""
    from prb_utils.models.base import PairInput
    from prb_utils.models.rendered import rendered_input
    from prb_utils.profile import condition_records, rm_user_message
    from prb_utils.store import pair_hash

    path = tmp_path / "labelled.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in labelled_records()), encoding="utf-8")
    out = tmp_path / "results"
    assert main(["score", "--data", str(path), "--model", "embedding:minilm", "--model", "lexical", "--profile",
                 "full", "--profile", "full+untagged", "--device", "cpu", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    rows = load_results(out)
    correct = (rows.assign(right=rows["outcome"] == "correct")
               .pivot_table(index="model", columns="profile", values="right", aggfunc="sum"))
    assert correct.loc["embedding:minilm", "full"] > correct.loc["embedding:minilm", "full+untagged"]
    assert correct.loc["embedding:minilm", "full+untagged"] == len(LABELLED)   # one of each twin: it reads no user
    data = load_benchmark(str(path))
    effects = probe_effects(rows, data).set_index(["model", "probe"])
    assert effects.loc[("lexical", "untagged"), "verdicts_kept"] == 1.0
    assert effects.loc[("lexical", "untagged"), "check"] == "pass"
    assert effects.loc[("embedding:minilm", "untagged"), "check"] == "fail"
    assert effects.loc[("embedding:minilm", "untagged"), "inputs_changed"] == len(data)
    tagged = {(r["subset"], r["id"]): r for r in condition_records(data, "full")}
    shown = {(r["subset"], r["id"]): r for r in condition_records(data, "full+untagged")}
    stored = rows[rows["profile"] == "full+untagged"]
    assert len(stored) == 2 * len(data)
    for row in stored.itertuples():
        record = shown[(row.subset, row.id)]
        message = rm_user_message(record, "full+untagged")   # the stored hash is of the input the RM was given
        assert row.pair_hash == pair_hash(row.subset, row.id, message, record["chosen"], record["rejected"])
        seen = rendered_input(row.model, PairInput(row.id, message, record["chosen"], record["rejected"]))
        label = tagged[(row.subset, row.id)]["profile"][0]["category"]
        assert "[" not in seen.as_text() and label not in seen.texts[0].text
        assert f"- [{label}] " in rm_user_message(tagged[(row.subset, row.id)], "full")


def test_untagged_changes_nothing_on_records_without_categories():
    """Records whose posts carry no category (or an empty one): the probe changes no record and its check is n/a,
    as any probe that changed no RM input."""
    data = twin_data()
    data.loc[0, "profile"] = [{"category": "", "text": "an empty category"}]
    assert changed_records(data, "untagged") == set()
    assert apply_probe(data, "untagged")["profile"].tolist() == data["profile"].tolist()
    ones = np.ones(len(data))
    rows = pd.concat([_rows("reader", "top3", data, ones), _rows("reader", "top3+untagged", data, -ones)])
    effect = probe_effects(rows, data).iloc[0]
    assert effect["inputs_changed"] == 0
    assert effect["check"] == "n/a: the probe changed no RM input (no profile post has a category)"


def test_the_data_formats_page_shows_the_user_turn_the_code_renders_with_and_without_tags():
    """The record and the two user turns in docs/reference/data-formats.md are what rm_user_message renders."""
    import re
    from pathlib import Path

    from prb_utils.profile import condition_records, rm_user_message

    page = (Path(__file__).parents[1] / "docs" / "reference" / "data-formats.md").read_text(encoding="utf-8")
    blocks = dict(re.findall(r"<!-- rendered: (\S+) -->\n```\w+\n(.*?)\n```", page, flags=re.DOTALL))
    assert set(blocks) == {"record", "full", "full+untagged", "full+headerless", "full+reversed"}
    record = json.loads(blocks["record"])
    assert blocks["full"] == rm_user_message(record, "full")
    untagged = condition_records(pd.DataFrame([{**record, "subset": "S"}]), "full+untagged")[0]
    assert blocks["full+untagged"] == rm_user_message(untagged, "full+untagged")
    assert "- [photo] " in blocks["full"] and "[" not in blocks["full+untagged"]
    for condition in ("full+headerless", "full+reversed"):
        assert blocks[condition] == rm_user_message(record, condition) != blocks["full"]


# ------------------------------------------------------------------ backend retests (retest-DTYPE/-ATTENTION/-ENGINE)


def _jobs(out) -> dict[str, dict]:
    """``{profile: job.json}`` of a store's jobs."""
    return {m["profile"]: m for m in (json.loads(p.read_text()) for p in out.glob("jobs/*/job.json"))}


def _largest_change(rows: pd.DataFrame, base: str, cond: str) -> float:
    wide = rows.pivot_table(index=["subset", "id"], columns="profile", values=["score_chosen", "score_rejected"])
    return float(max((wide[(c, cond)] - wide[(c, base)]).abs().max() for c in ("score_chosen", "score_rejected")))


def test_a_bfloat16_retest_of_a_float32_job_is_judged_at_bfloat16s_resolution(tmp_path, tiny_lm_dir, capsys):
    """The retest-bfloat16 job loads the model again in bfloat16 (its own job key and run record), its scores
    move past float32's resolution, and its check reads bfloat16's: the looser dtype of the two jobs."""
    out = tmp_path / "results"
    assert main(["probe", "--data", "sample", "--limit", "3", "--model", f"implicit:{tiny_lm_dir}", "--probe",
                 "retest-bfloat16", "--device", "cpu", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "a backend retest (retest-VALUE) passes when no score changed by more than the resolution of the " \
           "looser dtype" in printed
    jobs = _jobs(out)
    base, retest = jobs["top3"], jobs["top3+retest-bfloat16"]
    assert base["options"]["dtype"] == base["run"]["dtype"] == "float32" and "backend" not in base["options"]
    assert retest["options"]["dtype"] == retest["run"]["dtype"] == "bfloat16"
    assert retest["options"]["backend"] == "dtype=bfloat16" and retest["run"]["backend"] == {"dtype": "bfloat16"}
    assert retest["key"] != base["key"]
    rows = load_results(out)
    largest = float(rows[["score_chosen", "score_rejected"]].abs().max().max())
    change = _largest_change(rows, "top3", "top3+retest-bfloat16")
    assert change > 2.0 ** -23 * largest   # bfloat16 scores, not float32's again
    effects = probe_effects(rows, None, units=None).iloc[0]
    assert effects["probe"] == "retest-bfloat16" and effects["n_pairs"] == 9
    assert effects["max_score_change"] == pytest.approx(change)
    assert effects["threshold"] == pytest.approx(2.0 ** -7 * largest)
    assert effects["check"] == ("pass" if change <= 2.0 ** -7 * largest else "fail")
    flips = int((rows[rows["profile"] == "top3"].set_index(["subset", "id"])["outcome"]
                 != rows[rows["profile"] == "top3+retest-bfloat16"].set_index(["subset", "id"])["outcome"]).sum())
    shown = probe_table(pd.DataFrame([effects])).iloc[0]
    assert shown["measured [95% CI]"].endswith(f"; {flips} of 9 verdicts flipped") and shown["check"] == effects["check"]


def test_an_eager_retest_of_an_sdpa_job_is_its_own_job_judged_at_float32s_resolution(tmp_path, tiny_lm_dir, capsys):
    """Eager attention against SDPA, both float32: its own job and record, no verdict moved, the scores within
    float arithmetic's reach (the two kernels sum in another order) and the check read at float32's resolution;
    whether a difference of a few ulps passes it is the machine's, so the test asserts the rule, not the outcome."""
    out = tmp_path / "results"
    assert main(["probe", "--data", "sample", "--limit", "3", "--model", f"implicit:{tiny_lm_dir}", "--probe",
                 "retest-eager", "--device", "cpu", "--dtype", "float32", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    jobs = _jobs(out)
    assert jobs["top3"]["run"]["attn_implementation"] == "sdpa" and "attention" not in jobs["top3"]["options"]
    assert jobs["top3+retest-eager"]["run"]["attn_implementation"] == "eager"
    assert jobs["top3+retest-eager"]["options"]["attention"] == "eager"
    rows = load_results(out)
    effects = probe_effects(rows, None, units=None).iloc[0]
    largest = float(rows[["score_chosen", "score_rejected"]].abs().max().max())
    assert effects["probe"] == "retest-eager" and effects["verdicts_kept"] == 1.0
    assert effects["threshold"] == pytest.approx(2.0 ** -23 * largest)
    assert effects["max_score_change"] < 1e-4 * largest   # the same model: only the kernels' rounding differs
    assert effects["check"] == ("pass" if effects["max_score_change"] <= effects["threshold"] else "fail")


@pytest.mark.parametrize(("model", "options", "probe_name", "said"), [
    ("length", (), "retest-bfloat16", "length is a model-free baseline, with no dtype to retest"),
    ("implicit:TINY", ("--dtype", "float32"), "retest-float32", "the base job already runs in float32"),
    ("implicit:TINY", ("--engine", "vllm", "--engine-url", "http://127.0.0.1:9"), "retest-eager",
     "on the vllm engine the server picks"),
    ("implicit:TINY", ("--engine", "vllm", "--engine-url", "http://127.0.0.1:9"), "retest-bfloat16",
     "runs implicit:"),
    ("embedding:minilm", (), "retest-vllm", "embedding runs in this process on every engine"),
    ("implicit:TINY", (), "retest-hf", "the base job already runs on the hf engine"),
])
def test_a_backend_retest_that_cannot_apply_is_one_sentence(tmp_path, tiny_lm_dir, capsys, model, options,
                                                            probe_name, said):
    code = main(["probe", "--data", "sample", "--limit", "1", "--model", model.replace("TINY", str(tiny_lm_dir)),
                 "--probe", probe_name, "--device", "cpu", *options, "--out", str(tmp_path / "r"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and said in err and "Traceback" not in err, err
    assert not (tmp_path / "r" / "jobs").exists() or not list((tmp_path / "r" / "jobs").glob("*/part-*"))


def test_an_unknown_backend_is_refused_naming_the_values():
    with pytest.raises(PRBError, match=r"Unknown backend 'fp8'.*float32, bfloat16, float16.*sdpa, eager.*hf, vllm"):
        parse_condition("top3+retest-fp8")
    assert parse_condition("top3+retest-eager").probe == "retest-eager"


def test_the_backend_names_a_retest_takes_are_the_ones_the_models_load_with():
    """The registry names the backends from the schema (it sits below the model code); they are exactly the
    dtypes the placement maps to and the engines the engine seam registers."""
    from prb_utils.models.device import DTYPES
    from prb_utils.models.engines import ENGINES
    from prb_utils.probes import BACKEND_OPTIONS

    assert set(BACKEND_OPTIONS["dtype"]) == set(DTYPES.values())
    assert BACKEND_OPTIONS["engine"] == tuple(ENGINES)


# ------------------------------------------------------------------ rendering options: headerless, reversed

FILLER = " ".join(f"I also wonder about topic number {i} and what people think of it in general." for i in range(40))
WANTS = [("What should I cook for dinner tonight?", "I only ever eat vegan food.",
          "A vegan lentil curry, fully vegan.", "A seared steak, a classic steak dinner."),
         ("Where should we stay on our trip?", "I love sleeping in a tent under the stars.",
          "Go camping: pitch a tent at a camping site.", "Book a hotel: a central hotel."),
         ("How should I get to work?", "I ride my bicycle everywhere.",
          "Try cycling: cycling is quick.", "Keep driving: driving is comfortable.")]


def cut_records() -> list[dict]:
    """Twins per question of :data:`WANTS`: the post that says what the user wants is shown first, then two long
    posts both users share, too long for MiniLM's context, so the cut from the left removes the telling post."""
    records = []
    for q, (question, telling, one, other) in enumerate(WANTS):
        for user, (chosen, rejected, post) in enumerate([(one, other, telling), (other, one, "I like many things.")]):
            posts = [{"id": f"q{q}u{user}p0", "text": post},
                     *({"id": f"q{q}u{user}p{k}", "text": f"{FILLER} ({k})"} for k in (1, 2))]
            records.append({"id": f"q{q}-u{user}", "question": question, "chosen": chosen, "rejected": rejected,
                            "profile": posts, "user_id": f"u{user}"})
    return records


def test_headerless_and_reversed_render_the_same_posts_otherwise_and_are_refused_where_they_change_nothing():
    from prb_utils.profile import PROFILE_HEADER, parse_condition, rm_user_message, selected_posts, user_text

    record = {"question": "Q?", "profile": [{"category": "c", "text": "first"}, {"text": "second"}]}
    base, bare, turned = (rm_user_message(record, c) for c in ("full", "full+headerless", "full+reversed"))
    assert base == f"{PROFILE_HEADER}\n- [c] first\n- second\n\nQuestion: Q?"
    assert bare == "- [c] first\n- second\n\nQuestion: Q?"
    assert turned == f"{PROFILE_HEADER}\n- second\n- [c] first\n\nQuestion: Q?"
    assert user_text(bare) == user_text(base) == "first\nsecond\nQ?"   # lexical reads the same words
    assert selected_posts(record, "top2+reversed") == [1, 0] and rm_user_message(record, "none") == "Q?"
    data = pd.DataFrame({"subset": "S", "id": ["a", "b"], "question": "Q", "chosen": "x", "rejected": "y",
                         "profile": [record["profile"], record["profile"][:1]]})
    assert changed_records(data, "headerless") == {("S", "a"), ("S", "b")}
    assert changed_records(data, "reversed") == {("S", "a")}   # one post reads the same either way
    assert apply_probe(data, "reversed")["profile"].tolist() == data["profile"].tolist()   # the records unchanged
    for refused, why in (("top1+reversed", "at least 2 posts are shown, but top1 shows at most 1"),
                         ("none+headerless", "at least 1 post is shown, but none shows no post")):
        with pytest.raises(PRBError, match=why):
            parse_condition(refused)
    assert parse_condition("top2+reversed").probe == "reversed"


def test_reversed_says_which_end_of_a_cut_profile_an_rm_needed(tmp_path, capsys):
    """Planted: each user's telling post is shown first and two long shared posts after it, so MiniLM's input is
    cut from the left and the telling post is lost (the twins then read the same text and get one answer: one
    right per question). Under +reversed the telling post is shown last, the cut removes a shared post instead,
    and MiniLM reads what the user wants; the probe's check fails (the verdicts hinge on the cut)."""
    from prb_utils.models.base import PairInput
    from prb_utils.models.rendered import rendered_input
    from prb_utils.profile import rm_user_message

    path = tmp_path / "cut.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in cut_records()), encoding="utf-8")
    data = load_benchmark(str(path))
    first = data.iloc[0]
    for condition, kept in (("full", False), ("full+reversed", True)):
        seen = rendered_input("embedding:minilm", PairInput("a", rm_user_message(first, condition), first["chosen"],
                                                            first["rejected"]))
        shown = seen.texts[0]
        assert shown.truncated and ("vegan food" in shown.text[shown.cut_at:]) is kept, condition
    out = tmp_path / "results"
    assert main(["score", "--data", str(path), "--model", "embedding:minilm", "--profile", "full", "--profile",
                 "full+reversed", "--device", "cpu", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    rows = load_results(out)
    right = rows.assign(right=rows["outcome"] == "correct").groupby("profile")["right"].sum()
    assert right["full"] == len(WANTS) and right["full+reversed"] > len(WANTS)
    effect = probe_effects(rows, data).set_index("probe").loc["reversed"]
    assert effect["inputs_changed"] == len(data) and effect["check"] == "fail"
