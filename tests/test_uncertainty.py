"""The store's one resampling plan: kept in the store, read by every surface, the same unit keys from the benchmark
and from the store, and each unit's interval method (pairs: Wilson; two-way: the pigeonhole bootstrap)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from prb_utils.analysis.metrics import wilson_ci
from prb_utils.analysis.resampling import TWO_WAY_UNIT, two_way_bootstrap_ci, two_way_paired_test
from prb_utils.analysis.uncertainty import PLAN_FILE, ResamplingPlan
from prb_utils.cli import main
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.store import load_results, pair_units


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan") / "results"
    assert main(["score", "--data", "sample", "--model", "length", "--model", "lexical", "--profile", "none",
                 "--profile", "top3", "--out", str(out), "--no-progress"]) == 0
    return out


def test_a_plan_is_kept_in_its_store_and_read_back(tmp_path):
    assert ResamplingPlan.of_store(tmp_path) == ResamplingPlan()   # no file: the default plan
    plan = ResamplingPlan(unit="user", n_boot=300, seed=4)
    plan.save(tmp_path)
    assert ResamplingPlan.of_store(tmp_path) == plan
    (tmp_path / PLAN_FILE).write_text("{not json")
    with pytest.raises(PRBError, match=PLAN_FILE):
        ResamplingPlan.of_store(tmp_path)
    with pytest.raises(PRBError, match="Unknown resampling unit"):
        ResamplingPlan(unit="school")


@pytest.mark.parametrize("unit", ["question", "user", TWO_WAY_UNIT])
def test_the_benchmark_and_the_store_give_the_same_unit_keys(store, unit):
    """A page attaches units from the benchmark records, a command from the keys the store recorded: the labels
    are equal pair by pair, so the same seed draws the same clusters on both."""
    rows = load_results(store)
    plan = ResamplingPlan(unit=unit)
    from_data = plan.attach(rows, load_benchmark("sample"))
    from_store = plan.attach(rows, pair_units(store), keys=True)
    assert from_data[unit].tolist() == from_store[unit].tolist()
    assert not from_data[unit].str.contains("/").any()   # every pair found its unit (no pair-as-unit fallback)
    if unit == "question":   # the sample asks questions for several users: real clusters
        assert from_data[unit].nunique() < len(from_data.drop_duplicates(["subset", "id"]))


def test_pairs_as_units_give_wilson_everywhere(store, capsys):
    """`prb score --units pair` keeps the plan in the store; `prb summarize` then prints Wilson's interval and says
    so, and the default plan's bootstrap interval differs from it."""
    capsys.readouterr()
    assert main(["summarize", "--results", str(store), "--format", "json"]) == 0
    bootstrap = pd.DataFrame(json.loads(capsys.readouterr().out))
    assert main(["score", "--data", "sample", "--model", "length", "--profile", "none", "--out", str(store),
                 "--units", "pair", "--no-progress"]) == 0
    assert ResamplingPlan.of_store(store).unit == "pair"
    capsys.readouterr()
    assert main(["summarize", "--results", str(store), "--format", "json"]) == 0
    wilson = pd.DataFrame(json.loads(capsys.readouterr().out))
    low, high = wilson_ci(wilson["correct"].to_numpy(), wilson["n"].to_numpy())
    assert np.allclose(wilson["ci_low"], low) and np.allclose(wilson["ci_high"], high)
    assert not np.allclose(bootstrap["ci_low"], wilson["ci_low"])
    assert main(["summarize", "--results", str(store)]) == 0
    assert "Intervals (95%): Wilson over pairs" in capsys.readouterr().out
    ResamplingPlan().save(store)


def test_the_two_way_plan_uses_the_pigeonhole_interval_and_the_two_way_test(store):
    plan = ResamplingPlan(unit=TWO_WAY_UNIT, n_boot=300)
    rows = plan.attach(load_results(store), pair_units(store), keys=True)
    table = plan.accuracy(rows).set_index(["model", "profile"])
    one = rows[(rows["model"] == "lexical") & (rows["profile"] == "top3")]
    expected = two_way_bootstrap_ci(one["outcome"].eq("correct").to_numpy(float), one["question"], one["user"],
                                    n_boot=300)
    assert table.loc[("lexical", "top3"), ["ci_low", "ci_high"]].tolist() == pytest.approx(list(expected))
    test = plan.compare(rows, "profile", baseline="none").set_index("model").loc["lexical"]
    wide = rows[rows["model"] == "lexical"].pivot_table(index=["subset", "id", "question", "user"],
                                                         columns="profile", values="outcome", aggfunc="first")
    cells = wide.index.to_frame(index=False)
    p = two_way_paired_test(wide["none"].eq("correct").to_numpy(int), wide["top3"].eq("correct").to_numpy(int),
                            cells["question"], cells["user"])
    assert test["p_value"] == pytest.approx(p)
    assert "pigeonhole bootstrap" in plan.rule()
