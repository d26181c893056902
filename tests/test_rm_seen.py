"""What each RM saw, on page 01's pair card and in the per-item CSV (prb_utils.notebook.rm_seen): a real store
scored with a tiny judge and the lexical baseline, each card's texts equal the model's own rendering of the
pair, a cut is marked, and an input that cannot be rebuilt says why."""

from __future__ import annotations

import html

import pytest

from prb_utils.data import load_benchmark
from prb_utils.models.base import PairInput
from prb_utils.models.registry import ModelOptions, load_model
from prb_utils.models.rendered import CUT_MARK, render_pair
from prb_utils.notebook.pair_view import pair_html
from prb_utils.notebook.rm_seen import job_options, rendered_column, seen_inputs, store_jobs
from prb_utils.profile import rm_user_message
from prb_utils.scoring import score_benchmark
from prb_utils.store import query_results


@pytest.fixture(scope="module")
def store(tmp_path_factory, tiny_lm_dir):
    data = load_benchmark("sample", limit=1)
    out = tmp_path_factory.mktemp("seen") / "results"
    spec = f"judge:{tiny_lm_dir}"
    score_benchmark(data, ["lexical", spec], ["none", "top3"], out=out, options=ModelOptions(device="cpu"),
                    progress=False)
    rows = query_results(out, data=data)
    return {"data": data, "rows": rows.assign(model=rows["job_label"]), "jobs": store_jobs(out), "spec": spec,
            "out": str(out)}


def test_the_card_shows_each_models_own_rendering_of_the_pair(store):
    record = store["data"].iloc[0].to_dict()
    seen = dict(seen_inputs(record, store["rows"], store["jobs"], condition="top3"))
    assert set(seen) == {"lexical", store["spec"]}
    judge = load_model(store["spec"], ModelOptions(device="cpu"))
    pair = PairInput("k", rm_user_message(record, "top3"), record["chosen"], record["rejected"])
    assert seen[store["spec"]] == render_pair(judge, pair)   # the scorer's texts, token counts and cuts
    card = pair_html(record, store["rows"], condition="top3", jobs=store["jobs"])
    assert "What each RM saw" in card and "the user&#x27;s words" in card
    shown = seen[store["spec"]].texts[0]
    assert shown.truncated   # the tiny judge's 256 tokens cannot hold the top3 input
    assert html.escape(shown.text[shown.cut_at:], quote=True) in card and html.escape(CUT_MARK) in card
    assert "What each RM saw" not in pair_html(record, store["rows"], condition="top3")   # only when asked


def test_an_edited_record_or_a_file_template_is_not_shown_as_seen(store):
    record = {**store["data"].iloc[0].to_dict(), "chosen": "an answer edited after scoring"}
    seen = dict(seen_inputs(record, store["rows"], store["jobs"], condition="none"))
    assert seen["lexical"] == "the record changed after it was scored, so its input then cannot be rebuilt"
    assert job_options({"judge_template": "file"}).startswith("its judge template came from a file")


def test_the_csv_column_holds_every_rows_input_or_why_not(store):
    rows = store["rows"]
    column = rendered_column(rows, store["data"], store["jobs"])
    assert len(column) == len(rows) and all(column)
    for row, text in zip(rows.to_dict("records"), column, strict=True):
        assert text.startswith("### "), text[:80]
        if row["kind"] == "judge":
            assert "### order AB (chosen as A)" in text and "### order BA (chosen as B)" in text
    assert rendered_column(rows, store["data"].iloc[0:0], store["jobs"])[0].startswith("n/a: ")


def test_results_csv_holds_the_rendered_inputs_only_on_request(store, tmp_path):
    import pandas as pd

    from prb_utils.notebook.report import write_results_csv

    data = store["data"]
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    plain = pd.read_csv(write_results_csv(tmp_path / "a", store["out"], [], [], data[["subset", "id", "question"]]))
    shown = pd.read_csv(write_results_csv(tmp_path / "b", store["out"], [], [], data[["subset", "id", "question"]],
                                          records=data))
    assert "rendered_input" not in plain.columns and len(shown) == len(plain) > 0
    judge = shown[shown["kind"] == "judge"]["rendered_input"]
    assert judge.str.contains("### order AB (chosen as A)", regex=False).all()


def test_prb_report_asks_for_the_rendered_inputs_by_a_flag():
    from prb_utils.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["report", "--rendered-inputs"]).rendered_inputs is True
    assert parser.parse_args(["report"]).rendered_inputs is False
