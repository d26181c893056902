"""The profile-parroting probe (prb_utils.parrot, the ``parrot`` and ``parrot-control`` records of prb_utils.probes):
the transform changes only the rejected answer, with the user's own visible words (the control with as many of
another user's, at the same places), and the analysis tells an RM that rewards the user's words from one that
reacts to any inserted text (a length-only RM), on planted stores and through ``prb probe`` on the sample."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prb_utils.analysis.findings import control_sentences, page_sentences
from prb_utils.analysis.probe_effects import (
    control_table,
    probe_effects,
    probe_families,
    probe_notes,
)
from prb_utils.cli import main
from prb_utils.data import load_benchmark
from prb_utils.parrot import PARROT_PHRASES, PARROT_WORDS, answer_words, insert_phrases, parrot_plans
from prb_utils.probes import MIMICRY_RULE, PROBES, apply_probe, changed_records, default_probes
from prb_utils.profile import probe_conditions, rm_visible_fields, selected_posts
from prb_utils.store import load_results


def _added(before: str, after: str) -> Counter:
    """The words ``after`` has beyond ``before`` (asserting it lost none)."""
    old, new = Counter(answer_words(before)), Counter(answer_words(after))
    assert not old - new, "the transform removed words of the answer"
    return new - old


def _shown_words(record: dict, condition: str) -> set[str]:
    """The words of the posts the RM sees of ``record`` under ``condition``."""
    _, posts = rm_visible_fields(record)
    return {w for i in selected_posts(record, condition) for w in answer_words(posts[i][1])}


def test_parrot_rewrites_only_the_rejected_answer_with_the_users_visible_words():
    data = load_benchmark("sample")
    parroted, control = apply_probe(data, "parrot"), apply_probe(data, "parrot-control")
    for shown in (parroted, control):
        for column in ("subset", "id", "question", "chosen", "rubric_aspects", "narrative"):
            assert shown[column].tolist() == data[column].tolist()   # the chosen answer, question, answer key kept
        assert shown["profile"].tolist() == data["profile"].tolist()
    records = data.to_dict("records")
    n_inserted = PARROT_PHRASES * PARROT_WORDS
    for record, mine, theirs in zip(records, parroted["rejected"], control["rejected"], strict=True):
        added = _added(record["rejected"], mine)
        assert sum(added.values()) == n_inserted
        # only words of the post shown first (under top1, so under every topK of the default retriever and full)
        assert set(added) <= _shown_words(record, "top1") <= _shown_words(record, "top3")
        others = _added(record["rejected"], theirs)
        assert sum(others.values()) == n_inserted   # the control: as many words ...
        donors = [r for r in records if r["subset"] == record["subset"] and r["profile"] != record["profile"]
                  and set(others) <= _shown_words(r, "full")]
        assert donors   # ... all from one other user's posts of the same subset
    assert changed_records(data, "parrot") == changed_records(data, "parrot-control") == {
        (r["subset"], r["id"]) for r in records}


def test_parrot_and_its_control_insert_at_the_same_places_and_are_deterministic_for_a_seed():
    data = load_benchmark("sample")
    plans = parrot_plans(data)
    for answer, plan, mine, theirs in zip(data["rejected"], plans, apply_probe(data, "parrot")["rejected"],
                                          apply_probe(data, "parrot-control")["rejected"], strict=True):
        assert mine == insert_phrases(answer, plan.places, plan.own)
        assert theirs == insert_phrases(answer, plan.places, plan.other)
        assert [len(p.split()) for p in plan.own] == [len(p.split()) for p in plan.other] == [PARROT_WORDS] * 3
        # each control phrase is the donor's span closest in characters: a length-only RM sees about the same
        assert abs(sum(map(len, plan.own)) - sum(map(len, plan.other))) <= 0.5 * sum(map(len, plan.own))
    assert apply_probe(data, "parrot", seed=3).equals(apply_probe(data, "parrot", seed=3))
    assert apply_probe(data, "parrot-control", seed=3).equals(apply_probe(data, "parrot-control", seed=3))
    assert apply_probe(data, "parrot", seed=3)["rejected"].tolist() != apply_probe(data, "parrot")["rejected"].tolist()
    assert parrot_plans(data.iloc[::-1].reset_index(drop=True))[::-1] == plans   # per record, not per position


def test_a_record_with_no_words_or_no_other_user_is_left_as_it_is_by_both():
    data = pd.DataFrame({"subset": ["S", "S", "T"], "id": ["a", "b", "c"], "question": "Q?", "chosen": "Yes.",
                         "rejected": "No. Never.", "profile": [[{"text": "?!"}], [{"text": "tents in rain"}],
                                                               [{"text": "tents in rain"}]]})
    for name in ("parrot", "parrot-control"):
        assert apply_probe(data, name)["rejected"].tolist()[0] == "No. Never."   # its own post has no word
    # b's and c's users post the same words: the same profile, so no other user to control with
    assert changed_records(data, "parrot") == set() and PROBES["parrot"].unchanged.startswith("no rejected answer")
    assert not set(default_probes()) & {"parrot", "parrot-control"}   # opt-in: the report's time budget
    assert probe_conditions("top3", ["parrot", "parrot-control"]) == ["top3", "top3+parrot", "top3+parrot-control"]


N_QUESTIONS = 16


def planted_data() -> pd.DataFrame:
    """N_QUESTIONS questions, two users each (their posts differ)."""
    return pd.DataFrame([{"subset": "S", "id": f"q{q}-u{u}", "question": f"question {q}?", "chosen": f"good {q}.",
                          "rejected": f"bad {q}.", "profile": [{"text": f"user {u} posts about topic {q}"}]}
                         for q in range(N_QUESTIONS) for u in range(2)])


def _rows(model: str, profile: str, data: pd.DataFrame, margins: np.ndarray, kind: str = "classifier"
          ) -> pd.DataFrame:
    outcome = np.where(margins > 0, "correct", np.where(margins < 0, "wrong", "tie"))
    return pd.DataFrame({"model": model, "kind": kind, "profile": profile, "subset": data["subset"],
                         "id": data["id"], "score_chosen": margins, "score_rejected": 0.0, "outcome": outcome})


def planted_store() -> tuple[pd.DataFrame, pd.DataFrame]:
    """'mimic' (right on every pair) is turned wrong by the parroted rejected answer on 3 of 4 pairs, by the
    control on none; 'length' (the profile-blind kind) is turned wrong by both on the same half of the pairs (they
    add as many words); 'weak' flips 2 pairs more under parrot than under its control (too few to tell)."""
    data = planted_data()
    n = len(data)
    right = np.ones(n)
    mimic = np.where(np.arange(n) % 4 != 0, -1.0, 1.0)
    half = np.where(np.arange(n) % 2 == 0, -1.0, 1.0)
    weak = np.where(np.arange(n) < 2, -1.0, 1.0)
    frames = [_rows("mimic", "top3", data, right), _rows("mimic", "top3+parrot", data, mimic),
              _rows("mimic", "top3+parrot-control", data, right),
              *(_rows("length", cond, data, half if "+" in cond else right, "length")
                for cond in ("top3", "top3+parrot", "top3+parrot-control")),
              _rows("weak", "top3", data, right), _rows("weak", "top3+parrot", data, weak),
              _rows("weak", "top3+parrot-control", data, right)]
    return pd.concat(frames, ignore_index=True), data


def test_mimicry_is_told_from_the_same_change_any_user_words_make():
    rows, data = planted_store()
    effects = probe_effects(rows, data)
    parrot = effects[effects["probe"] == "parrot"].set_index("model")
    assert parrot.loc["mimic", "control_verdict"] == "rewards mimicry"
    assert parrot.loc["mimic", "flip_rate"] == 0.75 and parrot.loc["mimic", "control_flip_rate"] == 0.0
    assert parrot.loc["mimic", "beyond_control_low"] > 0 and parrot.loc["mimic", "beyond_control_p_holm"] < 0.05
    # a length-only RM reads the answers: it flips under both, as much, so it is tested and not caught
    assert parrot.loc["length", "no_verdict"] == "" and parrot.loc["length", "flip_rate"] == 0.5
    assert parrot.loc["length", "beyond_control"] == 0 and parrot.loc["length", "control_verdict"] == "no mimicry found"
    assert parrot.loc["length", "check"] == "pass"
    assert parrot.loc["weak", "control_verdict"] == "inconclusive" and parrot.loc["weak", "check"] == "fail"
    family = "top3+parrot against parrot-control: Holm over 3 tests"
    assert set(parrot["control_family"]) == {family}
    assert [f.label() for f in probe_families(effects)] == [family]
    raw, adjusted = parrot["beyond_control_p"], parrot["beyond_control_p_holm"]
    assert (adjusted >= raw).all() and adjusted.loc["mimic"] <= 3 * raw.loc["mimic"] + 1e-12
    assert np.isnan(parrot["p_holm"]).all()   # its accuracy change alone is no test
    notes = probe_notes(effects)
    assert any(MIMICRY_RULE.format(tolerance=0.1)[:60] in n for n in notes)
    shown = control_table(effects).set_index("model")
    assert shown.loc["mimic", "verdict"] == "rewards mimicry"
    assert shown.loc["mimic", "flips: probe / control [95% CI]"].startswith("0.750 [")
    said = {s["model"]: s for s in control_sentences(None, effects)}
    assert said["mimic"]["sentence"].startswith("mimic: parrot turns 0.750 of the pairs from right to wrong, "
                                                "parrot-control 0.000: +0.750 [")
    assert f"beyond the control, with {N_QUESTIONS} units and Holm over 3 models (p = " in said["mimic"]["sentence"]
    assert said["mimic"]["sentence"].endswith("rewards mimicry.") and said["mimic"]["n_units"] == N_QUESTIONS
    assert said["length"]["verdict"] == "no mimicry found" and said["length"]["beyond_control"] == 0
    # page 05's sentence per model says the parrot's verdict, not its check's pass/fail (a "fail" beside "rewards
    # mimicry" would read as a contradiction)
    opening = {s["model"]: s for s in page_sentences(None, "05", effects=effects)}
    assert opening["mimic"]["checks"]["parrot"] == "rewards mimicry" and "parrot rewards mimicry" in \
        opening["mimic"]["sentence"]
    assert opening["weak"]["checks"]["parrot"] == "inconclusive"
    assert opening["length"]["checks"]["parrot"] == "no mimicry found"


def test_a_parrot_without_its_control_or_its_user_gets_no_verdict():
    rows, data = planted_store()
    alone = probe_effects(rows[rows["profile"] != "top3+parrot-control"], data).set_index("model")
    assert alone.loc["mimic", "control_verdict"] == "n/a: parrot-control not scored (prb probe --probe parrot-control)"
    assert alone.loc["mimic", "check"] == alone.loc["mimic", "control_verdict"]
    assert probe_families(alone.reset_index()) == []
    none = rows.assign(profile=rows["profile"].str.replace("top3", "none"))
    verdicts = probe_effects(none, data).set_index(["model", "probe"])["control_verdict"]
    assert verdicts.loc[("mimic", "parrot")].startswith("n/a: the base condition none shows no profile")


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory) -> Path:
    """The folder of a store with the baselines probed by parrot and its control on the sample."""
    out = tmp_path_factory.mktemp("parrot") / "results"
    assert main(["probe", "--data", "sample", "--model", "lexical", "--model", "length", "--probe", "parrot",
                 "--probe", "parrot-control", "--out", str(out), "--no-progress"]) == 0
    return out


def test_prb_probe_catches_the_word_matcher_and_not_the_length_baseline(sample_store):
    """On the shipped sample the lexical baseline (the share of the user's words an answer uses) prefers the
    parroted rejected answer far more often than the control one; the length baseline, which reads the answers too,
    flips as often under both (they add as many words, of about as many characters)."""
    rows = load_results(sample_store)
    assert set(rows["profile"]) == {"top3", "top3+parrot", "top3+parrot-control"}
    effects = probe_effects(rows, load_benchmark("sample"))
    parrot = effects[effects["probe"] == "parrot"].set_index("model")
    assert parrot.loc["lexical", "control_verdict"] == "rewards mimicry"
    assert parrot.loc["lexical", "flip_rate"] > parrot.loc["lexical", "control_flip_rate"]
    assert parrot.loc["length", "control_verdict"] != "rewards mimicry"
    assert parrot.loc["length", "flip_rate"] > 0   # it does react to the longer rejected answer ...
    assert parrot.loc["length", "beyond_control_low"] <= 0   # ... as much as to the control's
    for model in ("lexical", "length"):   # the flips, recomputed from the stored outcomes
        wide = rows[rows["model"] == model].pivot_table(index=["subset", "id"], columns="profile", values="outcome",
                                                        aggfunc="first")
        flips = ((wide["top3"] == "correct") & (wide["top3+parrot"] == "wrong")).mean()
        assert parrot.loc[model, "flip_rate"] == pytest.approx(flips)


def test_page_05_shows_the_parrot_per_model_and_records_its_numbers(sample_store, tmp_path, monkeypatch):
    """Page 05 on a store holding the parrot and its control: the figure (one row per model, the probe's and the
    control's flip rates), one sentence per model as the findings layer words it, and the numbers recorded."""
    import json

    import matplotlib
    import nbformat
    import papermill

    from prb_utils.analysis import plots
    from prb_utils.notebook.markup import md_text
    from prb_utils.notebook.report import NUMBERS_ENV

    matplotlib.use("Agg")
    effects = probe_effects(load_results(sample_store), load_benchmark("sample"))
    ax = plots.control_flips(effects[effects["probe"] == "parrot"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["length", "lexical"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["parrot", "parrot-control"]
    (tmp_path / "results").symlink_to(sample_store, target_is_directory=True)
    monkeypatch.setenv(NUMBERS_ENV, str(tmp_path))
    monkeypatch.setenv("PRB_HEADLESS", "1")
    target = tmp_path / "05.ipynb"
    page = Path(__file__).resolve().parent.parent / "notebooks" / "05_reading_the_user.ipynb"
    papermill.execute_notebook(str(page), str(target), parameters={"results": "results"}, kernel_name="python3",
                               progress_bar=False, cwd=str(tmp_path))
    cells = nbformat.read(str(target), as_version=4).cells
    shown = "\n".join(str(o.get("data", {}).get("text/markdown", "")) for c in cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    recorded = json.loads((tmp_path / "05_reading_the_user.numbers.json").read_text())["numbers"]["mimicry"]
    assert {r["model"]: r["verdict"] for r in recorded}["lexical"] == "rewards mimicry"
    assert {r["model"]: r["verdict"] for r in recorded}["length"] == "no mimicry found"
    for item in recorded:
        assert md_text(item["sentence"]) in shown and item["sentence"].startswith(f"{item['model']}: parrot turns")
        assert f"with {item['n_units']} questions and Holm over 2 models" in item["sentence"]
