"""The notebook widgets of 00 and 01: the quiz leaves out the pairs a page explained, scores the models on
exactly the answered pairs, says so in one sentence when nothing was answered; the pair browser lists
every pair with links to cards, the category list follows the subset and the model narrows every filter."""

from __future__ import annotations

import json
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest

import prb_utils.notebook.widgets as widgets
from prb_utils.errors import PRBError
from prb_utils.notebook.pair_view import pair_anchor
from prb_utils.notebook.widgets import QuizItem, QuizSession, frame_html, quiz_comparison, quiz_items


def _data() -> pd.DataFrame:
    """Two subsets; S/a and S/b share their question; categories x, y in S and z in T."""
    post = [{"id": "p", "category": "x", "text": "cheap pans please"}]
    ids = ["a", "b", "c", "d", "e", "f"]
    return pd.DataFrame({
        "subset": ["S", "S", "S", "T", "T", "T"], "id": ids, "category": ["x", "x", "y", "z", "z", "z"],
        "question": ["Q1", "Q1", "Q2", "Q3", "Q4", "Q5"], "profile": [post] * 6,
        "rubric_aspects": [[{"aspect": "Cheap", "evidence": "e", "reason": "r"}]] * 6, "narrative": "N",
        "chosen": ["use a cheap pan", "use a cast-iron pan", "yes", "one", "red", "up"],
        "rejected": ["use a cast-iron pan", "use a cheap pan", "no", "two", "blue", "down"],
    })


def _results() -> pd.DataFrame:
    """m1 is wrong on S/b under none only; m2 is wrong on S/b, S/c and T/d under both conditions."""
    wrong = {("m1", "none"): {"b"}, ("m1", "top3"): set(), ("m2", "none"): {"b", "c", "d"},
             ("m2", "top3"): {"b", "c", "d"}}
    rows = []
    for (model, profile), bad in wrong.items():
        for subset, pid in zip(_data()["subset"], _data()["id"], strict=True):
            outcome = "wrong" if pid in bad else "correct"
            rows.append({"model": model, "profile": profile, "subset": subset, "id": pid, "outcome": outcome,
                         "score_chosen": 1.0 if outcome == "correct" else 0.0, "score_rejected": 0.5})
    return pd.DataFrame(rows)


def _texts(shown: list) -> list[str]:
    return [getattr(o, "data", "") or "" for o in shown]


@pytest.fixture
def shown(monkeypatch) -> list:
    """What the widgets display (instead of a frontend), with the itables bundle left out."""
    out: list = []
    monkeypatch.setattr(widgets, "_display", out.append)
    monkeypatch.setattr(widgets, "init_tables", lambda **_: None)
    yield out
    plt.close("all")


# ------------------------------------------------------------------------------------------ the quiz


def test_quiz_items_never_ask_the_avoided_pairs():
    data = _data()
    plain = quiz_items(data, 6, seed=0)
    assert plain[0].id == "a" and plain[0].twin.key == ("S", "b")  # the shared question first, its twin after it
    assert "b" not in [i.id for i in plain] and len(plain) == 5  # the twin is never asked (nor scored) again
    avoided = quiz_items(data, 6, seed=0, avoid=[("S", "a"), {"subset": "S", "id": "b"}])
    assert {i.id for i in avoided} == {"c", "d", "e", "f"}  # fewer pairs left: all of them, none avoided
    assert quiz_items(data, 3, seed=1, avoid=[("T", "nope")]) == quiz_items(data, 3, seed=1)


def test_models_are_scored_on_exactly_the_answered_pairs():
    items = [QuizItem("S", "b", "A"), QuizItem("S", "c", "B"), QuizItem("T", "d", "A")]
    table = quiz_comparison(items, ["A", None, "B"], _results()).set_index(["who", "profile"])
    assert table.loc[("you", "what the RM sees"), ["n", "correct"]].tolist() == [2, 1]
    assert (table["n"] == 2).all()  # b and d only, for everyone
    assert table.loc[("m1", "none"), "correct"] == 1 and table.loc[("m1", "top3"), "correct"] == 2
    assert table.loc[("m2", "none"), "correct"] == 0
    every = quiz_comparison(items, ["A", None, "B"], _results(), pairs="all").set_index(["who", "profile"])
    assert every.loc[("m2", "none"), "n"] == 3 and every.loc[("you", "what the RM sees"), "n"] == 2
    nothing = quiz_comparison(items, [None, None, None], _results())
    assert nothing["who"].tolist() == ["you"] and nothing.loc[0, "n"] == 0
    with pytest.raises(PRBError, match="Unknown quiz pairs"):
        quiz_comparison(items, [], _results(), pairs="some")


def test_comparison_view_without_answers_is_one_sentence_and_no_you_row(shown):
    items = quiz_items(_data(), 3, seed=0)
    table = widgets.comparison_view(QuizSession(items, [None] * 3, _results()))
    assert "you" not in table["who"].tolist() and (table["n"] == 3).all()
    texts = _texts(shown)
    assert len(texts) == 1 and texts[0].count("<table") == 1  # one table, not two
    assert "No quiz answers were recorded in this run" in texts[0] and ">you<" not in texts[0]


def test_comparison_view_with_answers_says_the_models_count_the_same_pairs(shown):
    items = quiz_items(_data(), 3, seed=0)
    table = widgets.comparison_view(QuizSession(items, ["A", None, "B"], _results()))
    assert table.iloc[0]["who"] == "you" and (table["n"] == 2).all()
    assert "on the 2 quiz pairs you answered" in _texts(shown)[0]
    assert "exactly those 2 pairs" in _texts(shown)[0]
    empty = widgets.comparison_view(QuizSession(items, ["A"], pd.DataFrame()), how="prb score --data mine.jsonl")
    assert len(empty) == 1 and "No model scores for the quiz pairs in the store" in _texts(shown)[-1]
    assert "<code>prb score --data mine.jsonl</code>" in _texts(shown)[-1]   # the page's own command


def test_static_quiz_shows_the_key_and_no_comparison(shown):
    session = widgets.quiz(_data(), _results(), n=3, interactive=False)
    texts = _texts(shown)
    assert len(texts) == 3  # one per pair; the comparison is comparison_view's, once
    assert all("Answer key." in t and "No guess recorded" not in t for t in texts)
    assert all(t.count("<summary") == 1 + (i.twin is not None) and t.index("Show the answer") < t.index("Answer key.")
               for t, i in zip(texts, session.items, strict=True))
    assert session.answered == 0
    shown.clear()
    widgets.quiz(_data(), _results(), n=3, answers=["A"], interactive=False)
    texts = _texts(shown)
    assert "You picked A." in texts[0] and all("No guess recorded." in t for t in texts[1:])


def test_quiz_widgets_keep_a_running_score(monkeypatch, shown):
    import ipywidgets

    monkeypatch.setattr(widgets, "use_widgets", lambda interactive: interactive)
    session = widgets.quiz(_data(), _results(), n=2, interactive=True)
    box = shown[-1]
    buttons = [w for w in _walk(box) if isinstance(w, ipywidgets.Button)]
    progress = box.children[-1].children[0]
    assert "No guesses yet" in progress.value
    buttons[0].click()
    assert re.search(r"You so far: \d of 1 right", progress.value)
    assert session.answered == 1 and "<table" not in progress.value


def _step_buttons(box) -> list:
    """The A/B buttons of each step shown so far, step by step."""
    import ipywidgets

    stage = box.children[0]
    return [[w for w in _walk(step) if isinstance(w, ipywidgets.Button)] for step in stage.children]


def test_quiz_widgets_ask_one_pair_at_a_time_mark_the_guess_and_show_the_twin_unscored(monkeypatch, shown):
    monkeypatch.setattr(widgets, "use_widgets", lambda interactive: interactive)
    session = widgets.quiz(_data(), _results(), n=3, interactive=True)
    box = shown[-1]
    first, second = session.items[0], session.items[1]
    assert first.key == ("S", "a") and first.twin.key == ("S", "b")
    assert [len(b) for b in _step_buttons(box)] == [2]  # only the first pair, until a guess
    wrong = "B" if first.chosen_side == "A" else "A"
    _step_buttons(box)[0]["AB".index(wrong)].click()
    picked, other = _step_buttons(box)[0]["AB".index(wrong)], _step_buttons(box)[0]["AB".index(first.chosen_side)]
    assert picked.button_style == "danger" and picked.icon == "times" and picked.description.endswith("wrong")
    assert other.button_style == "" and picked.disabled and other.disabled
    steps = box.children[0].children
    assert len(steps) == 2 and widgets.TWIN_QUESTION in steps[1].children[0].value  # the twin, a second step
    assert "not scored" in steps[1].children[0].value
    _step_buttons(box)[1]["AB".index(first.twin.chosen_side)].click()
    twin_pick = _step_buttons(box)[1]["AB".index(first.twin.chosen_side)]
    assert twin_pick.button_style == "success" and twin_pick.icon == "check"
    assert "Your answer stayed the same for both users" in box.children[0].children[1].children[2].value
    assert session.answers == [wrong, None, None] and session.twin_answers == [first.twin.chosen_side, None, None]
    assert session.answered == 1 and session.comparison().iloc[0]["n"] == 1  # the twin is not scored
    assert len(box.children[0].children) == 3 and f"{second.subset}/{second.id}" in \
        box.children[0].children[2].children[0].value  # the next pair, only now
    again = [w for w in _walk(box) if getattr(w, "description", "") == "Try again"]
    again[0].click()
    assert session.answers == [None, None, None] and len(box.children[0].children) == 1
    assert "No guesses yet" in box.children[-1].children[0].value


def test_static_quiz_shows_each_twin_once_as_an_unscored_step_with_its_key_folded(shown):
    session = widgets.quiz(_data(), _results(), n=3, answers=["B"], interactive=False)
    texts = _texts(shown)
    assert len(texts) == 3 and session.items[0].twin is not None
    assert texts[0].count(widgets.TWIN_QUESTION) == 1 and widgets.TWIN_QUESTION not in texts[1] + texts[2]
    assert texts[0].count('<details class="prb-answer">') == 2  # the pair's key and the twin's, both folded
    assert sum(t.count("What the RM sees") for t in texts) == 3  # the scored pairs only


# ------------------------------------------------------------------------------------ the pair browser


def test_static_browser_lists_every_pair_and_links_each_to_a_card(shown):
    found = widgets.pair_browser(_data(), _results(), interactive=False, max_pairs=2)
    assert len(found) == 6
    texts = _texts(shown)
    listing, cards = texts[0], texts[1:]
    assert len(cards) == 6
    for subset, pid in zip(found["subset"], found["id"], strict=True):
        assert f'href="#{pair_anchor(subset, pid)}"' in listing
        assert sum(f'id="{pair_anchor(subset, pid)}"' in card for card in cards) == 1
    assert sum('class="prb-pair"' in c for c in cards) == 2  # max_pairs in full, the others short
    assert sum('class="prb-pair-brief"' in c for c in cards) == 4
    assert "the first 2 cards in full, the other 4 collapsed" in listing


def test_static_browser_defaults_show_every_card_and_pair_id_first(shown):
    widgets.pair_browser(_data(), _results(), interactive=False, pair_id="d")
    cards = _texts(shown)[1:]
    assert len(cards) == 6 and all('class="prb-pair"' in c for c in cards)
    assert 'id="pair-T-d"' in cards[0]
    shown.clear()
    found = widgets.pair_browser(_data(), _results(), interactive=False, mode="all", model="m1")
    assert found["id"].tolist() == ["b"]  # the "wrong model" narrows the "all" filter too
    assert len(_texts(shown)) == 2 and 'href="#pair-S-b"' in _texts(shown)[0]
    with pytest.raises(PRBError, match="not among"):
        widgets.pair_browser(_data(), _results(), interactive=False, mode="wrong", pair_id="a")


def test_browser_widgets_narrow_categories_and_honour_the_model_in_every_filter(monkeypatch, shown):
    monkeypatch.setattr(widgets, "use_widgets", lambda interactive: interactive)
    box = widgets.pair_browser(_data(), _results(), interactive=True)
    (subset_w, category_w), (mode_w, model_w) = box.children[0].children, box.children[1].children
    count = box.children[2]
    assert "<b>6</b> of 6" in count.value and mode_w.value == "all"
    model_w.value = "m2"  # filter "all": the model still narrows
    assert "<b>3</b> of 6" in count.value
    model_w.value = "m1"
    assert "<b>1</b> of 6" in count.value
    model_w.value = ""
    assert [v for _, v in category_w.options] == ["", "x", "y", "z"]
    category_w.value = "z"
    subset_w.value = "S"  # z is not a category of S: the list narrows and the choice resets
    assert [v for _, v in category_w.options] == ["", "x", "y"] and category_w.value == ""
    assert "<b>3</b> of 6" in count.value
    category_w.value = "y"
    subset_w.value = ""
    assert category_w.value == "y" and "<b>1</b> of 6" in count.value  # still valid: kept
    assert any("prb-pair-list" in t for t in _texts(shown))  # the searchable list of every pair


def test_frame_html_formats_each_column_by_its_meaning():
    frame = pd.DataFrame({"margin": [12.0, 0.000012, -0.5], "accuracy": [0.5, 1.0, float("nan")]})
    html = frame_html(frame, max_rows=None)
    assert re.findall(r"<td>([^<]*)</td>", html) == ["12", "0.500", "&lt; 0.001", "1.000", "-0.500", "—"]
    assert "more rows" in frame_html(frame, max_rows=2) and "more rows" not in frame_html(frame, max_rows=None)


def _walk(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from _walk(child)


def test_pair_inspection_defaults_keep_every_sample_pair():
    from prb_utils.notebook.params import PairInspectionParams

    params = PairInspectionParams()
    assert params.filter == "all" and params.category == "" and params.wrong_model == ""
    assert params.max_pairs >= 42  # every card of the sample in full
    assert PairInspectionParams(max_pairs=0).max_pairs == 0  # 0: every card in full
    with pytest.raises(PRBError, match="'max_pairs' must be at least 0"):
        PairInspectionParams(max_pairs=-1)


def test_the_quiz_comparison_flags_a_position_locked_judge():
    from prb_utils.notebook.widgets import locked_judges_html

    judge = pd.DataFrame({"model": "judge:x", "profile": "none", "kind": "judge",
                          "verdict_ab": ["chosen"] * 4, "verdict_ba": ["rejected"] * 4})
    fair = judge.assign(model="judge:y", verdict_ba=["chosen"] * 4)
    text = locked_judges_html(pd.concat([judge, fair], ignore_index=True))
    assert text.count("<p") == 1 and "judge:x" in text and "judge:y" not in text
    assert locked_judges_html(fair) == "" and locked_judges_html(None) == ""
    assert locked_judges_html(pd.DataFrame({"model": ["length"], "profile": ["none"]})) == ""


def test_frame_html_says_each_meaning_one_way():
    """Proportions and scores with 3 decimals (float noise as 0; a score from 10 up with 4 significant digits),
    counts and lengths whole, p-values with their floor, other numbers at most 4 significant digits and never
    e-notation inside [1e-3, 1e3), missing as a dash."""
    frame = pd.DataFrame({"share": [0.5, 0.0123, -1.85e-17], "margin": [12.5, -0.2081588767313895, 448.0],
                          "p_holm": [0.5, 0.00002, 1.0], "n": [1, 2, 3], "length_chosen": [448.0, 12.0, float("nan")],
                          "temperature": [1.5, float("inf"), 0.25]})
    cells = re.findall(r"<td>([^<]*)</td>", frame_html(frame, max_rows=None))
    assert cells[0::6] == ["0.500", "0.012", "0.000"]
    assert cells[1::6] == ["12.5", "-0.208", "448"]   # a margin: one precision for the column
    assert cells[2::6] == ["0.500", "&lt; 0.001", "1.000"]
    assert cells[3::6] == ["1", "2", "3"]
    assert cells[4::6] == ["448", "12", "—"]
    assert cells[5::6] == ["1.5", "infinite", "0.25"]


def test_browser_widgets_search_and_step_through_the_matching_pairs(monkeypatch, shown):
    monkeypatch.setattr(widgets, "use_widgets", lambda interactive: interactive)
    box = widgets.pair_browser(_data(), _results(), interactive=True)
    count, pair_w = box.children[2], box.children[3]
    search_w, previous_w, next_w = box.children[4].children
    first = pair_w.value
    next_w.click()
    assert pair_w.value == [v for _, v in pair_w.options][1]
    previous_w.click()
    previous_w.click()   # wraps around to the last
    assert pair_w.value == [v for _, v in pair_w.options][-1] and pair_w.value != first
    target = _data().iloc[2]
    search_w.value = str(target["question"])[:12].upper()   # case does not matter
    assert f"\t{target['id']}" in pair_w.value and "<b>" in count.value
    search_w.value = "no pair has these words"
    assert pair_w.options == () and "<b>0</b> of 6" in count.value
    for child in (*box.children[0].children, *box.children[1].children, search_w):
        assert child.style.description_width == "initial"


# ------------------------------------------------------------------------------------------ the live workshop


def test_section_5_follows_each_answer_and_try_again(monkeypatch, shown):
    """With widgets the comparison is drawn in an output widget that the quiz's running score redraws: after an
    answer it counts that answer, after "Try again" it is back to no answers; no cell is run again."""
    import ipywidgets

    monkeypatch.setattr(widgets, "use_widgets", lambda interactive: interactive)
    session = widgets.quiz(_data(), _results(), n=3, interactive=True)
    box = shown[-1]
    table = widgets.comparison_view(session)
    assert isinstance(shown[-1], ipywidgets.Output) and "you" not in set(table["who"])
    assert "No quiz answers were recorded" in _texts(shown)[-2]

    def drawn() -> str:   # the latest comparison drawn (the figure, when there is one, comes after it)
        return next(t for t in reversed(_texts(shown)) if "quiz" in t)

    first = session.items[0]
    _step_buttons(box)[0]["AB".index(first.chosen_side)].click()
    assert "You and the reward models on the 1 quiz pairs you answered" in drawn()
    _step_buttons(box)[1][0].click()   # the twin step: not scored, the comparison stays
    assert "on the 1 quiz pairs you answered" in drawn()
    _step_buttons(box)[2][0].click()   # the second pair
    assert "on the 2 quiz pairs you answered" in drawn()
    again = next(w for w in _walk(box) if getattr(w, "description", "") == "Try again")
    again.click()
    assert "No quiz answers were recorded" in drawn()
    widgets.comparison_view(session)   # the cell run again: only the newest view follows
    before = len(shown)
    _step_buttons(box)[0][0].click()
    assert sum("quiz pairs you answered" in t for t in _texts(shown)[before:]) == 1


def test_quiz_buttons_keep_their_whole_label(monkeypatch, shown):
    monkeypatch.setattr(widgets, "use_widgets", lambda interactive: interactive)
    widgets.quiz(_data(), _results(), n=2, interactive=True)
    buttons = _step_buttons(shown[-1])[0]
    assert [b.layout.width for b in buttons] == ["auto", "auto"]   # "Response A: wrong", not "Response A: wr..."


def test_widget_tables_pad_their_headers():
    from prb_utils.notebook.pair_view import VIEW_STYLE, view

    rule = re.search(r"\.prb-view td, \.prb-view th \{([^}]*)\}", VIEW_STYLE)
    assert rule and re.search(r"padding:\s*\d+px \d+px", rule.group(1))
    assert view("<table></table>").startswith(VIEW_STYLE)


def test_the_table_bundle_comes_before_the_script_that_awaits_it(monkeypatch):
    """itables' own order (the dark-class script first) logs a TypeError in JupyterLab on every open."""
    out: list = []
    monkeypatch.setattr(widgets, "_display", out.append)
    widgets.init_tables()
    texts = [str(getattr(o, "data", "")) for o in out]
    awaits = [widgets.AWAITS_BUNDLE in t for t in texts]
    assert awaits.count(True) == 1 and awaits.index(True) > 0
    bundle = next(i for i, t in enumerate(texts) if "injectModule" in t)
    assert bundle < awaits.index(True)


def test_jupyterlab_news_toast_is_off_in_the_projects_settings():
    """prb ships JupyterLab overrides: installed into <environment>/share/jupyter/lab/settings, where the lab
    of the docs (`.venv/bin/jupyter lab notebooks/`) and of the live test reads them."""
    import json
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    shipped = "prb_utils/notebook/lab_settings/overrides.json"
    settings = json.loads((root / shipped).read_text(encoding="utf-8"))
    assert settings["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["tool"]["setuptools"]["data-files"]["share/jupyter/lab/settings"] == [shipped]


def test_the_live_workshop_shows_the_conditions_its_report_page_showed(tmp_path):
    """00 declares no conditions of its own, so a live run on a store shows what its report page showed (a
    default of its own, ["none", "top3", "full"], showed `full` rows live that the static page did not)."""
    import ast
    import json as _json
    from pathlib import Path

    from prb_utils.notebook.params import WorkshopParams, write_report_view
    from prb_utils.scoring import score_benchmark

    nb = _json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "00_workshop_personalization.ipynb")
                     .read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    values = {t.target.id: ast.literal_eval(t.value) for t in ast.parse("".join(cell["source"])).body}
    assert values["profiles"] == [] and values["models"] == []
    data = _data().assign(subset="S", id=[f"p{i}" for i in range(6)])
    score_benchmark(data, ["length"], ["none", "top3", "full"], out=tmp_path, progress=False)
    write_report_view(tmp_path, {"00_workshop_personalization": {"models": ["length"], "profiles": ["none", "top3"]}})
    live = WorkshopParams(results=str(tmp_path), profiles=values["profiles"], models=values["models"])
    assert set(live.load_results()["profile"]) == {"none", "top3"}
def test_a_tables_row_numbers_are_no_column_and_it_carries_a_csv_button():
    """A filtered frame (row numbers 1, 3) shows its columns only, never an ``index`` column; a named index stays a
    column; each table carries its CSV button, named after its caption."""
    from prb_utils.notebook.widgets import table_html

    frame = pd.DataFrame({"model": ["a", "b", "c", "d"], "accuracy": [0.5, 0.6, 0.7, 0.8]})
    page = table_html(frame[frame["accuracy"] > 0.55].iloc[::2], caption="Accuracy: per model")
    assert re.findall(r"<th>([^<]*)</th>", page.replace('\\"', '"')) == ["model", "accuracy"]
    buttons = json.loads(re.search(r'"buttons": (\[.*?\]),\n', page).group(1))
    assert buttons[0]["extend"] == "csvHtml5" and buttons[0]["filename"] == "Accuracy_per_model"
    named = table_html(frame.set_index("model"))
    assert re.findall(r"<th>([^<]*)</th>", named.replace('\\"', '"')) == ["model", "accuracy"]
