"""The personalization probes: the record transforms (prb_utils.probes) and what they found
(prb_utils.analysis.probe_effects), on planted stores whose expected behaviour is known."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from prb_utils.analysis.probe_effects import probe_effects, reading_verdicts, split_probe
from prb_utils.cli import main
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.models.batching import BudgetBatcher
from prb_utils.probes import PROBES, apply_probe, twin_pairs
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
    with pytest.raises(PRBError, match="Unknown probe"):
        apply_probe(data, "nope")
    assert set(PROBES) == {"swap", "shuffle", "distract", "label-swap", "retest"}


def _rows(model: str, profile: str, data: pd.DataFrame, margins: np.ndarray) -> pd.DataFrame:
    outcome = np.where(margins > 0, "correct", np.where(margins < 0, "wrong", "tie"))
    return pd.DataFrame({"model": model, "kind": "classifier", "profile": profile, "subset": data["subset"],
                         "id": data["id"], "score_chosen": margins, "score_rejected": 0.0, "outcome": outcome})


def planted_store() -> tuple[pd.DataFrame, pd.DataFrame]:
    """'length' prefers the longer answer whatever the profile; 'reader' prefers what the profile it is shown
    asks for (so with the twin's profile it flips); both also scored with the answers exchanged."""
    data = twin_data()
    longer = np.where(data["chosen"].str.len() > data["rejected"].str.len(), 1.0, -1.0)
    frames = [_rows("length", "top3", data, longer), _rows("length", "top3+swap", data, longer),
              _rows("length", "top3+label-swap", data, -longer),
              _rows("reader", "top3", data, np.ones(len(data))), _rows("reader", "top3+swap", data, -np.ones(len(data))),
              _rows("reader", "top3+label-swap", data, -np.ones(len(data)))]
    return pd.concat(frames, ignore_index=True), data


def test_the_probes_tell_a_reader_of_the_user_from_a_length_follower():
    rows, data = planted_store()
    effects = probe_effects(rows, data, n_boot=200).set_index(["model", "probe"])
    verdicts = reading_verdicts(effects.reset_index(), models=["length", "reader", "other"]).set_index("model")
    assert verdicts.loc["length", "verdict"] == "ignores the profile"
    assert verdicts.loc["length", "sensitivity"] == 0 and verdicts.loc["length", "twin_flips"] == 0
    assert verdicts.loc["reader", "verdict"] == "reads the user"
    assert verdicts.loc["reader", "sensitivity"] == 1 and verdicts.loc["reader", "twin_flips"] == len(data)
    assert verdicts.loc["other", "verdict"].startswith("n/a")
    for model in ("length", "reader"):   # the harness check: 1 - accuracy - tie rate - invalid rate
        assert effects.loc[(model, "label-swap"), "check"] == "holds"
    assert effects.loc[("reader", "swap"), "max_score_change"] == 2


def test_a_broken_label_swap_is_caught():
    rows, data = planted_store()
    broken = rows.copy()
    broken.loc[(broken["model"] == "length") & (broken["profile"] == "top3+label-swap"), "outcome"] = "correct"
    effects = probe_effects(broken, data, n_boot=100).set_index(["model", "probe"])
    assert effects.loc[("length", "label-swap"), "check"].startswith("differs")


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
    assert "ignores the profile" in printed and "Rule: reads the user" in printed
    rows = load_results(out)
    assert sorted(set(rows["profile"])) == sorted(["top3", *(f"top3+{p}" for p in PROBES)])
    effects = probe_effects(rows, load_benchmark("sample"), n_boot=200).set_index(["model", "probe"])
    for name in ("swap", "shuffle", "distract", "retest"):
        assert effects.loc[("length", name), "verdicts_kept"] == 1.0
    assert effects.loc[("lexical", "swap"), "verdicts_kept"] < 1.0
    assert effects.loc[("lexical", "retest"), "verdicts_kept"] == 1.0
    assert effects.loc[("lexical", "retest"), "max_score_change"] == 0.0
    for model in ("length", "lexical"):
        assert effects.loc[(model, "label-swap"), "check"] == "holds"
    assert main(["probe", "--data", "sample", "--model", "length", "--profile", "rubric", "--out", str(out)]) == 2
    assert "a probe transforms none, full or topK" in capsys.readouterr().err


def test_retest_on_the_hf_engine_in_float32_changes_no_verdict(tmp_path, tiny_lm_dir, capsys):

    out = tmp_path / "results"
    assert main(["probe", "--data", "sample", "--limit", "3", "--model", f"implicit:{tiny_lm_dir}", "--probe", "retest",
                 "--dtype", "float32", "--device", "cpu", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    effects = probe_effects(load_results(out), None, units=None, n_boot=100).iloc[0]
    assert effects["probe"] == "retest" and effects["n_pairs"] == 9
    assert effects["verdicts_kept"] == 1.0 and effects["max_score_change"] < 1e-5
    runs = {m["profile"]: m["run"] for m in (json.loads(p.read_text()) for p in out.glob("jobs/*/job.json"))}
    assert runs["top3+retest"]["batch_share"] == 0.5 and "batch_share" not in runs["top3"]


def test_retest_scores_in_half_the_batch_budget_and_gives_it_back():

    model = type("Model", (), {"batcher": BudgetBatcher(4096)})()
    with _batch_share(model, parse_condition("top3+retest")) as share:
        assert share == 0.5 and model.batcher.budget == 2048
    assert model.batcher.budget == 4096
    with _batch_share(model, parse_condition("top3+shuffle")) as share:
        assert share == 1.0 and model.batcher.budget == 4096
