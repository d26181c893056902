"""``prb board``: submissions (``prb export --format every_eval_ever`` with provenance) from three tiny stores, checked
one by one and together, built into a static board whose every number is the findings layer's for the same rows,
that opens from disk in headless Chromium with no request and no console error, refuses or defuses tampered
submissions in one sentence, and keeps its view (sort, filter, condition, the two compared runs) in the link."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_report import _open_offline

from prb_utils.analysis.findings import compute_findings
from prb_utils.analysis.probe_effects import READING_VERDICTS, probe_effects, reading_verdicts
from prb_utils.analysis.uncertainty import ResamplingPlan
from prb_utils.board import build_board, check_submissions
from prb_utils.board.readings import NO_PROBES
from prb_utils.board.recompute import model_id
from prb_utils.cli import main
from prb_utils.data import load_benchmark
from prb_utils.errors import PRBError
from prb_utils.export import export_results
from prb_utils.formatting import format_interval
from prb_utils.scoring import score_benchmark
from prb_utils.store import load_results
from prb_utils.submission import find_submissions, read_submission

TEAMS = {"team-a": (["length", "lexical"], ["none", "top2"], None),
         "team-b": (["lexical"], ["none", "top2"], "random"),
         "team-c": (["length"], ["none"], None)}


@pytest.fixture(scope="module")
def teams(tmp_path_factory):
    """Three stores scored on four records per subset of the shipped sample, each exported as a submission."""
    root = tmp_path_factory.mktemp("board")
    data = load_benchmark("sample", limit=4)
    for name, (models, profiles, retriever) in TEAMS.items():
        score_benchmark(data, models, profiles, out=root / "stores" / name, retriever=retriever, progress=False)
        export_results(root / "stores" / name, root / name, format="every_eval_ever", data=data, data_source="sample")
    return root, data


@pytest.fixture(scope="module")
def board(teams):
    root, _ = teams
    return build_board([root / name for name in TEAMS], root / "site")


def _labelled_rows(root: Path) -> pd.DataFrame:
    """The three stores' rows, each job labelled as the board labels it: its store's label, and the store's name
    where another store holds the same label."""
    frames = {name: load_results(root / "stores" / name) for name in TEAMS}
    owners = pd.concat([f[["job_label"]].drop_duplicates().assign(team=n) for n, f in frames.items()])
    shared = set(owners["job_label"][owners["job_label"].duplicated()])
    return pd.concat([f.assign(model=[f"{lab} ({n})" if lab in shared else lab for lab in f["job_label"]])
                      for n, f in frames.items()], ignore_index=True)


def _copy(root: Path, name: str, tmp_path: Path) -> tuple[Path, Path, Path]:
    """A copy of one team's export, and its first aggregate and samples file."""
    target = tmp_path / name
    shutil.copytree(root / name, target)
    aggregate = sorted(target.rglob("*.json"))[0]
    return target, aggregate, aggregate.with_name(aggregate.stem + "_samples.jsonl")


def _reseal(aggregate: Path, samples: Path, lines: list[str]) -> None:
    """Write ``lines`` as the samples and make the aggregate agree (checksum, rows, pairs): a careful tamperer."""
    text = "\n".join(lines) + "\n"
    samples.write_text(text)
    log = json.loads(aggregate.read_text())
    log["detailed_evaluation_results"].update(checksum=hashlib.sha256(text.encode()).hexdigest(), total_rows=len(lines))
    log["source_metadata"]["additional_details"]["data_pairs"] = str(len(lines))
    aggregate.write_text(json.dumps(log))


# ------------------------------------------------------------------------------------------------ submissions


def test_a_submission_carries_its_provenance_and_unit_keys(teams):
    root, data = teams
    aggregate = sorted((root / "team-a").rglob("*.json"))[0]
    details = json.loads(aggregate.read_text())["source_metadata"]["additional_details"]
    job = details["job"]
    recorded = json.loads((root / "stores" / "team-a" / "jobs" / job / "job.json").read_text())
    assert details["data_digest"] == recorded["data"]["digest"] and details["data_fingerprint"] == recorded["data_fingerprint"]
    assert details["job_key"] == job and details["data_pairs"] == str(len(data)) == str(recorded["n_pairs"])
    assert details["prb_version"] == recorded["run"]["prb"] and details["engine"] == "hf"
    assert details["n_truncated"] == "0" and json.loads(details["resampling_plan"])["unit"] == "question"
    samples = [json.loads(line) for line in aggregate.with_name(aggregate.stem + "_samples.jsonl").read_text().splitlines()]
    for sample in samples:
        assert sample["metadata"]["unit_question"] == recorded["questions"][sample["sample_id"]]
        assert sample["metadata"]["unit_user"] == recorded["users"][sample["sample_id"]]


def test_the_submissions_pass_the_check_against_their_data(teams, capsys):
    root, _ = teams
    checked = check_submissions([root / name for name in TEAMS], data_source="sample")
    assert len(checked) == 7   # 4 + 2 + 1 jobs
    assert main(["board", *(str(root / n) for n in TEAMS), "--check", "--data", "sample"]) == 0
    assert "7 submission(s) checked" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ the numbers


def test_every_board_number_is_the_findings_layers_for_the_same_rows(teams, board):
    """The report's way: compute_findings on the stores' rows with the benchmark records as units."""
    root, data = teams
    found = compute_findings(_labelled_rows(root), data, plan=ResamplingPlan(), calibrate=False)
    expected = found.board.assign(id=found.board["model"].map(model_id))
    shown = pd.DataFrame(board.numbers["board"])
    assert len(shown) == len(expected) == 7
    merged = expected.merge(shown, left_on=["id", "profile"], right_on=["id", "condition"], suffixes=("", "_b"))
    assert len(merged) == 7
    for r in merged.itertuples():
        assert (r.accuracy_b, r.ci_low_b, r.ci_high_b) == (r.accuracy, r.ci_low, r.ci_high)
        assert r.accuracy_text == format_interval(r.accuracy, r.ci_low, r.ci_high)
        assert r.rank_b == r.rank and r.chance_b == r.chance and r.lift_verdict_b == r.lift_verdict
    lifted = merged[merged["lift_verdict"] != ""]
    assert len(lifted) == 2 and (lifted["lift_b"] == lifted["lift"]).all()
    subsets = {(m["label"], c, s["subset"]): s["accuracy"] for i, m in board.numbers["models"].items()
               for c, entry in board.numbers["cards"][i]["conditions"].items() for s in entry["subsets"]}
    assert subsets == {(r.model, r.profile, r.subset): r.accuracy for r in found.subsets.itertuples()}
    assert board.notes == []   # nothing disagrees in honest submissions


def test_the_compare_p_value_is_prb_summarize_compares(teams, board, capsys):
    root, _ = teams
    assert main(["summarize", "--results", str(root / "stores" / "team-a"), "--compare", "model",
                 "--format", "json"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out)["comparisons"] if r["profile"] == "none"]
    (summarized,) = rows
    a, b = model_id(f"{summarized['level_a']} (team-a)"), model_id(f"{summarized['level_b']} (team-a)")
    compared = board.numbers["compare"].get(f"none|{a}|{b}") or board.numbers["compare"][f"none|{b}|{a}"]
    assert compared["p_value"] == summarized["p_value"] and compared["n_pairs"] == summarized["n_pairs"]
    assert abs(compared["diff"]) == pytest.approx(abs(summarized["diff"]))
    wide = _labelled_rows(root).query("profile == 'none' and model in ['length (team-a)', 'lexical (team-a)']") \
        .assign(right=lambda f: f["outcome"] == "correct").pivot_table(index=["subset", "id"], columns="model",
                                                                        values="right")
    flipped = {f"{s}/{i}" for (s, i), r in wide.iterrows() if r.iloc[0] != r.iloc[1]}
    assert {f["pair"] for f in compared["flips"]} == flipped and flipped
    assert all(board.numbers["pairs"][p]["question"] for p in flipped)   # each flipped pair with its text


# ------------------------------------------------------------------------------------------------ tampering


def test_an_aggregate_that_disagrees_with_its_rows_is_recomputed_and_noted(teams, board, tmp_path):
    root, _ = teams
    target, aggregate, _ = _copy(root, "team-c", tmp_path)
    log = json.loads(aggregate.read_text())
    log["evaluation_results"][0]["score_details"]["score"] = 0.99
    aggregate.write_text(json.dumps(log))
    built = build_board([root / "team-a", root / "team-b", target], tmp_path / "site")
    assert len(built.notes) == 1 and aggregate.name in built.notes[0] and "0.990" in built.notes[0]
    honest = {(r["id"], r["condition"]): r["accuracy"] for r in board.numbers["board"]}
    assert {(r["id"], r["condition"]): r["accuracy"] for r in built.numbers["board"]} == honest
    assert "0.990" not in json.dumps(built.numbers["board"])


@pytest.mark.parametrize("tamper", ["missing pair", "resealed missing pair", "other data digest", "duplicate pair",
                                    "edited row"])
def test_a_tampered_submission_is_refused_in_one_sentence(teams, tmp_path, capsys, tamper):
    root, _ = teams
    target, aggregate, samples = _copy(root, "team-c", tmp_path)
    lines = samples.read_text().splitlines()
    expected = {"missing pair": "data_pairs", "resealed missing pair": "lack 1 pair(s)",
                "other data digest": "data_fingerprint", "duplicate pair": "appears twice",
                "edited row": "evaluation.is_correct contradicts"}[tamper]
    if tamper == "missing pair":
        samples.write_text("\n".join(lines[1:]) + "\n")
    elif tamper == "resealed missing pair":
        _reseal(aggregate, samples, lines[1:])
    elif tamper == "other data digest":
        log = json.loads(aggregate.read_text())
        log["source_metadata"]["additional_details"]["data_fingerprint"] = "0" * 16
        aggregate.write_text(json.dumps(log))
    elif tamper == "duplicate pair":
        _reseal(aggregate, samples, [*lines, lines[0]])
    else:
        first = json.loads(lines[0])
        first["evaluation"]["is_correct"] = not first["evaluation"]["is_correct"]
        _reseal(aggregate, samples, [json.dumps(first), *lines[1:]])
    with pytest.raises(PRBError, match=re.escape(expected)):
        build_board([root / "team-a", target], tmp_path / "site")
    capsys.readouterr()
    assert main(["board", str(root / "team-a"), str(target), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err and "Traceback" not in err
    assert str(target) in err   # the sentence names the file
    assert not (tmp_path / "site" / "index.html").exists()


def test_the_check_against_data_names_the_missing_pair(teams, tmp_path, capsys):
    root, _ = teams
    target, aggregate, samples = _copy(root, "team-c", tmp_path)
    lines = samples.read_text().splitlines()
    _reseal(aggregate, samples, lines[1:])
    assert main(["board", str(target), "--check", "--data", "sample"]) == 2
    err = capsys.readouterr().err
    assert f"sample_id {json.loads(lines[0])['sample_id']}" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------------ in a browser


def test_the_board_opens_offline_and_a_name_with_html_stays_text(teams, tmp_path):
    root, _ = teams
    target, aggregate, _ = _copy(root, "team-c", tmp_path)
    log = json.loads(aggregate.read_text())
    evil = 'length<img src=x onerror="document.title=1"></script><b>'
    log["model_info"]["name"] = evil
    aggregate.write_text(json.dumps(log))
    built = build_board([root / "team-a", root / "team-b", target], tmp_path / "site")
    evil_id = model_id(evil)

    def probe(page):
        return {"cells": page.eval_on_selector_all("#leaderboard tbody tr", "rows => rows.map(r => "
                                                   "[r.dataset.model, r.cells[4].textContent])"),
                "names": page.eval_on_selector_all(f'[data-model="{evil_id}"] a', "a => a.map(x => x.textContent)"),
                "injected": page.evaluate("document.querySelectorAll('img, b').length"),
                "items": page.inner_text('[data-items="tracking"]')}

    facts = _open_offline([built.page], probe=probe)["index.html"]
    assert facts["blocked"] == [] and facts["requests"] == [] and facts["console"] == [] and facts["errors"] == []
    assert facts["title"] == "Personalized RewardBench board"
    probe_facts = facts["probe"]
    assert probe_facts["injected"] == 0 and probe_facts["names"] == [evil]
    assert probe_facts["items"] == f"Pairs that do not track accuracy: {built.numbers['items']['none']['tracking']}."
    assert probe_facts["items"].startswith("Pairs that do not track accuracy: n/a: 4 RMs")
    shown = {(r["id"], r["accuracy_text"]) for r in built.numbers["board"] if r["condition"] == "none"}
    assert set(map(tuple, probe_facts["cells"])) == shown and len(shown) == 4


def test_a_deep_link_restores_sort_filter_and_comparison_after_a_reload(board):
    a, b = model_id("length (team-a)"), model_id("lexical (team-a)")

    def probe(page):
        page.select_option("#condition", "top2")
        page.fill("#filter", "team-a")
        page.click('a[data-sort="accuracy"]')
        page.click('a[data-sort="accuracy"]')   # twice: descending
        page.select_option("#run-a", a)
        page.select_option("#run-b", b)
        link = page.evaluate("location.hash")
        before = page.inner_text("#compare-sentence")
        page.goto(board.page.as_uri() + link)
        page.reload()
        return {"link": link, "before": before,
                "after": page.inner_text("#compare-sentence"), "filter": page.input_value("#filter"),
                "condition": page.input_value("#condition"),
                "runs": [page.input_value("#run-a"), page.input_value("#run-b")],
                "order": page.eval_on_selector_all("#leaderboard tbody tr", "r => r.map(x => x.dataset.model)"),
                "flips": page.eval_on_selector_all("#flips details", "d => d.length")}

    facts = _open_offline([board.page], probe=probe)["index.html"]
    assert facts["console"] == [] and facts["errors"] == [] and facts["blocked"] == []
    seen = facts["probe"]
    assert "sort=accuracy" in seen["link"] and "dir=desc" in seen["link"] and "q=team-a" in seen["link"]
    assert (seen["filter"], seen["condition"], seen["runs"]) == ("team-a", "top2", [a, b])
    rows = [r for r in board.numbers["board"] if r["condition"] == "top2"
            and "team-a" in board.numbers["models"][r["id"]]["label"]]
    assert seen["order"] == [r["id"] for r in sorted(rows, key=lambda r: (-r["accuracy"],
                                                                         board.numbers["models"][r["id"]]["label"]))]
    compared = board.numbers["compare"].get(f"top2|{a}|{b}") or board.numbers["compare"][f"top2|{b}|{a}"]
    assert seen["after"] == seen["before"] and f"p = {compared['p_text']}" in seen["after"]
    assert seen["flips"] == len(compared["flips"])


# ------------------------------------------------------------------------------------------------ probe readings


@pytest.fixture(scope="module")
def probed(teams):
    """A store probed with swap and shuffle over top3 (the two fast baselines, on team-a's pairs), exported, and a
    board of it with team-c (no probes)."""
    root, data = teams
    store = root / "stores" / "probed"
    score_benchmark(data, ["length", "lexical"], ["top3", "top3+swap", "top3+shuffle"], out=store, progress=False)
    export_results(store, root / "probed", format="every_eval_ever", data=data, data_source="sample")
    return store, build_board([root / "probed", root / "team-c"], root / "probed-site")


def test_a_card_reads_the_probes_as_page_05_does_and_an_unprobed_card_says_how(teams, probed, tmp_path, capsys):
    root, data = teams
    store, built = probed
    assert main(["board", str(root / "probed"), "--check", "--data", "sample"]) == 0   # probe rows pass the check
    capsys.readouterr()
    rows = load_results(store)
    effects = probe_effects(rows.assign(model=[f"{m} (probed)" if m == "length" else m for m in rows["job_label"]]),
                            data, **ResamplingPlan().options())
    expected = reading_verdicts(effects).set_index("model")
    cards = {built.numbers["models"][i]["label"]: c["probes"] for i, c in built.numbers["cards"].items()}
    assert set(cards) == {"length (probed)", "lexical", "length (team-c)"}
    for label in ("length (probed)", "lexical"):
        (reading,) = cards[label]["readings"]
        want = expected.loc[label]
        assert reading["base"] == "top3" and reading["verdict"] == want["verdict"] and cards[label]["missing"] == ""
        assert reading["sensitivity"] == want["sensitivity"]
        assert (reading["sensitivity_low"], reading["sensitivity_high"]) == (want["sensitivity_low"],
                                                                             want["sensitivity_high"])
        assert reading["sensitivity_text"] == format_interval(want["sensitivity"], want["sensitivity_low"],
                                                              want["sensitivity_high"])
        (check,) = reading["checks"]
        assert check["probe"] == "shuffle"
        assert check["check"] == effects.set_index(["model", "probe"]).loc[(label, "shuffle"), "check"]
    assert cards["length (probed)"]["readings"][0]["verdict"].startswith("n/a: profile-blind")
    assert expected.loc["lexical", "verdict"] in READING_VERDICTS and expected.loc["lexical", "p_holm"] >= 0
    unprobed = cards["length (team-c)"]
    assert unprobed["readings"] == [] and unprobed["missing"].startswith(NO_PROBES)
    command = re.search(r"`(prb probe [^`]+)`", unprobed["missing"]).group(1)
    assert command == "prb probe --data sample --model length --profile top3 --limit 4 --out results"
    assert main([*shlex.split(command)[1:-1], str(tmp_path / "store"), "--probe", "swap", "--no-progress"]) == 0
    capsys.readouterr()
    assert set(load_results(tmp_path / "store")["profile"]) == {"top3", "top3+swap"}   # the command adds them
    assert any(rule.startswith("Family top3+swap: Holm over 1 test of lexical") for rule in built.numbers["rules"])

    ids = {built.numbers["models"][i]["label"]: i for i in built.numbers["cards"]}
    facts = _open_offline([built.page], probe=lambda page: {
        label: page.inner_text(f'[data-probes="{ids[label]}"]') for label in ("lexical", "length (team-c)")})
    assert facts["index.html"]["console"] == [] and facts["index.html"]["errors"] == []
    shown = facts["index.html"]["probe"]
    lexical = cards["lexical"]["readings"][0]
    assert f"Reading the user (probes of top3): {lexical['verdict']}; " in shown["lexical"]
    assert f"{lexical['sensitivity_text']}, p (Holm) {lexical['p_text']}." in shown["lexical"]
    assert "shuffle" in shown["lexical"] and lexical["checks"][0]["check"] in shown["lexical"]
    assert unprobed["missing"] in shown["length (team-c)"]


def test_a_probe_job_exported_from_the_command_line_keeps_its_rows_and_texts(probed, tmp_path, capsys):
    """`prb export --data sample` loads the whole sample; a store scored with --limit 4 drew its swap partners among
    the records it loaded, so the export redraws them among the same records: no pair called edited, every text."""
    store, _ = probed
    assert main(["export", "--format", "every_eval_ever", "--results", str(store), "--out", str(tmp_path),
                 "--data", "sample"]) == 0
    assert "differ from --data" not in capsys.readouterr().err
    found = {s.condition: s for s in map(read_submission, find_submissions([tmp_path]))}
    assert set(found) == {"top3", "top3+swap", "top3+shuffle"}
    for s in found.values():
        assert len(s.rows) == 12 and set(s.texts) == {f"{r.subset}/{r.id}" for r in s.rows.itertuples()}


# ------------------------------------------------------------------------------------------------ hub files


def test_hub_eval_results_files_hold_the_stores_accuracy(teams, tmp_path, capsys):
    import yaml

    root, _ = teams
    store = root / "stores" / "team-a"
    assert main(["export", "--format", "hub-eval-results", "--results", str(store), "--out", str(tmp_path)]) == 0
    assert "not on the hub benchmark" in capsys.readouterr().err
    rows = load_results(store)
    files = sorted(tmp_path.rglob("*.yaml"))
    assert len(files) == rows["job"].nunique() == 4
    for path in files:
        (entry,) = yaml.safe_load(path.read_text())
        job = entry["notes"].rsplit("job ", 1)[1]
        group = rows[rows["job"] == job]
        assert path.parent.name == ".eval_results" and path.stem.endswith(group["profile"].iloc[0])
        assert entry["dataset"]["id"] == "QiyaoMa/Personalized-RewardBench"
        assert entry["value"] == round(100 * (group["outcome"] == "correct").mean(), 2)
        assert f"{len(group)} pairs of" in entry["notes"]


# ------------------------------------------------------------------------------------------------ item analysis


def test_item_analysis_lists_what_its_rules_say_and_is_na_below_its_counts():
    from prb_utils.board.items import ITEM_MIN_RMS, MAX_CORRELATION, item_analysis

    rng = np.random.default_rng(3)
    skill = {f"rm{k}": 0.3 + 0.1 * k for k in range(6)}   # six RMs of rising accuracy
    pairs = [f"p{i:02d}" for i in range(40)]
    right = {(m, p): int(rng.random() < s) for m, s in skill.items() for p in pairs}
    for m in skill:   # p00: the better half gets it wrong, the worse half right (an item that does not track)
        right[(m, "p00")] = int(skill[m] < 0.6)
    rows = pd.DataFrame([{"model": m, "profile": "none", "subset": "s", "id": p,
                          "outcome": "correct" if right[(m, p)] else "wrong"} for m, p in right])
    strong = ["rm4", "rm5"]
    board_frame = pd.DataFrame({"model": list(skill), "profile": "none", "locked": False,
                                "chance": ["above chance" if m in strong else "" for m in skill]})
    found = item_analysis(rows, board_frame)["none"]
    assert {f["pair"] for f in found["mislabel"]} == {f"s/{p}" for p in pairs
                                                      if all(right[(m, p)] == 0 for m in strong)}
    accuracy = {m: np.mean([right[(m, p)] for p in pairs]) for m in skill}
    expected = set()
    for p in pairs:
        outcome = np.array([right[(m, p)] for m in skill], dtype=float)
        rest = np.array([(accuracy[m] * len(pairs) - right[(m, p)]) / (len(pairs) - 1) for m in skill])
        if outcome.std() and rest.std() and np.corrcoef(outcome, rest)[0, 1] <= MAX_CORRELATION:
            expected.add(f"s/{p}")
    assert {f["pair"] for f in found["tracking"]} == expected and "s/p00" in expected

    few = item_analysis(rows[rows["model"].isin(list(skill)[:ITEM_MIN_RMS - 1])], board_frame.iloc[:ITEM_MIN_RMS - 1])["none"]
    assert few["tracking"].startswith("n/a: 4 RMs") and few["mislabel"].startswith("n/a: 0 RM(s) above chance")


# ------------------------------------------------------------------------------------------------ probes with the data


def _readings(built) -> dict[str, list[dict]]:
    return {built.numbers["models"][i]["label"]: c["probes"]["readings"] for i, c in built.numbers["cards"].items()}


def test_with_the_data_a_card_shows_the_twin_split_and_without_it_says_why_not(teams, probed):
    """--data: the readings are page 05's (probe_effects of the rows and the benchmark records): the twin split and
    the pairs whose input the swap changed; without it, one sentence says why neither is shown."""
    from prb_utils.board.readings import NO_DATA

    root, data = teams
    store, without = probed
    built = build_board([root / "probed", root / "team-c"], root / "probed-site-data", data_source="sample")
    rows = load_results(store)
    effects = probe_effects(rows.assign(model=[f"{m} (probed)" if m == "length" else m for m in rows["job_label"]]),
                            data, **ResamplingPlan().options())
    swap = effects[effects["probe"] == "swap"].set_index("model")
    for label, (reading,) in ((k, v) for k, v in _readings(built).items() if v):
        r = swap.loc[label]
        assert r["twin_sets"] == 3 and r["both_right"] + r["both_wrong"] + r["one_right"] == 3   # 6 twins at --limit 4
        assert reading["twins"] == (f"Twin sets (both right / both wrong / one right): {r['both_right']} / "
                                    f"{r['both_wrong']} / {r['one_right']} of {r['twin_sets']}.")
        assert reading["changed"] == f"The swap probe changed the RM input of {len(data)} of {len(data)} pairs."
        assert reading["no_data"] == "" and reading["verdict"] == reading_verdicts(effects).set_index("model").loc[
            label, "verdict"]
    for reading in (r for rs in _readings(without).values() for r in rs):
        assert reading["no_data"] == NO_DATA and reading["twins"] == reading["changed"] == ""

    ids = {m["label"]: i for i, m in built.numbers["models"].items()}
    texts = [_open_offline([b.page], probe=lambda page: page.inner_text(f'[data-probes="{ids["lexical"]}"]'))
             ["index.html"] for b in (built, without)]
    assert all(t["console"] == [] and t["errors"] == [] for t in texts)
    lexical = _readings(built)["lexical"][0]
    assert lexical["twins"] in texts[0]["probe"] and lexical["changed"] in texts[0]["probe"]
    assert NO_DATA not in texts[0]["probe"] and NO_DATA in texts[1]["probe"] and "Twin sets" not in texts[1]["probe"]


def test_with_the_data_a_swap_that_changed_no_input_says_so(tmp_path):
    """--limit 1: one user per subset, so the swap hands every record its own profile. With --data the card says
    the probe changed no RM input (page 05's NO_CHANGE); without it the same rows would read as an RM that
    ignores the profile, so the card says why it cannot tell."""
    from prb_utils.analysis.probe_effects import NO_CHANGE
    from prb_utils.board.readings import NO_DATA

    data = load_benchmark("sample", limit=1)
    score_benchmark(data, ["lexical"], ["top3", "top3+swap"], out=tmp_path / "store", progress=False)
    export_results(tmp_path / "store", tmp_path / "lonely", format="every_eval_ever", data=data, data_source="sample")
    known = build_board([tmp_path / "lonely"], tmp_path / "site", data_source="sample")
    blind = build_board([tmp_path / "lonely"], tmp_path / "site-blind")
    ((reading,),) = _readings(known).values()
    assert reading["verdict"].startswith(NO_CHANGE) and "one user per subset" in reading["verdict"]
    assert reading["changed"] == f"The swap probe changed the RM input of 0 of {len(data)} pairs."
    assert reading["twins"] == "No twin sets among these pairs."
    ((unknown,),) = _readings(blind).values()
    assert not unknown["verdict"].startswith("n/a") and unknown["no_data"] == NO_DATA

    shown = _open_offline([known.page], probe=lambda page: page.inner_text(".probes"))["index.html"]
    assert shown["console"] == [] and reading["verdict"] in shown["probe"]


# ------------------------------------------------------------------------------------------------ board and report


def _resolves(href: str, start: Path) -> bool:
    """Whether the relative link ``href`` from a page in ``start`` reaches a file, and (with a fragment that
    names an id) an element with that id in it."""
    from urllib.parse import unquote

    path, _, fragment = href.partition("#")
    target = (start / unquote(path)).resolve()
    if not target.is_file():
        return False
    return not fragment.startswith("model-") or f'id="{fragment}"' in target.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def linked(teams, probed):
    """A report of the probed store (pages 01 and 05), and a board of it and team-c built with --report."""
    from prb_utils.notebook.report import build_report

    root, _ = teams
    store, _ = probed
    report = root / "report"
    build_report(data="sample", results=str(store), out=str(report), models=[], profiles=[], progress=False,
                 notebooks=["01_pair_inspection", "05_reading_the_user"], limit=4)
    assert main(["board", str(root / "probed"), str(root / "team-c"), "--out", str(root / "linked-site"),
                 "--report", str(report)]) == 0
    return report, root / "linked-site"


def test_board_cards_and_the_report_index_link_into_each_other(linked, capsys):
    report, site = linked
    numbers = json.loads((site / "board.json").read_text())
    cards = numbers["report"]["cards"]
    labels = {numbers["models"][i]["label"]: i for i in numbers["models"]}
    assert set(cards) == {labels["length (probed)"], labels["lexical"]}   # team-c's run is not the report's
    for links in cards.values():
        assert [link["what"] for link in links] == ["pairs", "probes"]
        assert all(_resolves(link["href"], site) for link in links)
    assert _resolves(numbers["report"]["index"], site)

    index = (report / "index.html").read_text()
    hrefs = re.findall(r'<p class="board-link".*?</p>', index, re.DOTALL)
    assert len(hrefs) == 1
    links = re.findall(r'href="([^"]+)"', hrefs[0])
    assert links[0] == "../linked-site/index.html" and _resolves(links[0], report)
    assert sorted(link.split("#card=")[1] for link in links[1:]) == sorted(cards)

    def follow(page):   # from the report's index, the board link of lexical's card, then its report link back
        page.click(f'#board-link a[href$="#card={labels["lexical"]}"]')
        page.wait_for_selector(f'[data-report="{labels["lexical"]}"] a')
        back = page.get_attribute(f'[data-report="{labels["lexical"]}"] a', "href")
        landed = page.url
        page.click(f'[data-report="{labels["lexical"]}"] a')
        page.wait_for_url("**/01_pair_inspection.html#model-lexical")
        page.wait_for_load_state()
        return {"landed": landed, "back": back, "url": page.url,
                "section": page.evaluate("document.getElementById('model-lexical') !== null")}

    facts = _open_offline([report / "index.html"], probe=follow)["index.html"]
    assert facts["console"] == [] and facts["errors"] == [] and facts["requests"] == []
    seen = facts["probe"]
    assert seen["landed"].endswith(f"linked-site/index.html#card={labels['lexical']}")
    assert seen["url"].endswith("01_pair_inspection.html#model-lexical") and seen["section"]

    # built again (now of the probed store alone: its length run is plain "length"), the paragraph is replaced
    assert main(["board", str(report.parent / "probed"), "--out", str(site), "--report", str(report)]) == 0
    capsys.readouterr()
    again = (report / "index.html").read_text()
    assert again.count('class="board-link"') == 1 and f"#card={model_id('length')}\"" in again
    assert f"#card={labels['length (probed)']}" not in again


def test_a_report_folder_that_is_no_report_is_refused(teams, tmp_path, capsys):
    root, _ = teams
    assert main(["board", str(root / "team-c"), "--out", str(tmp_path / "site"), "--report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no index.html" in err and str(tmp_path) in err
    assert not (tmp_path / "site").exists()


# ------------------------------------------------------------------------------------------------ attribution, parrot, retests


@pytest.fixture(scope="module")
def attributed(tmp_path_factory, tiny_lm_dir):
    """Two pairs of each subset probed with every drop of top3's posts, the parrot and its control (lexical and
    length), and a bfloat16 retest of a tiny float32 LM, all from the command line; exported with the data and
    boarded with and without it."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("attributed")
    store, out = root / "store", root / "export"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(["probe", "--data", "sample", "--limit", "2", "--model", "lexical", "--model", "length",
                     "--probe", "attribution", "--probe", "parrot", "--probe", "parrot-control", "--out", str(store),
                     "--no-progress"]) == 0
        assert main(["probe", "--data", "sample", "--limit", "2", "--model", f"implicit:{tiny_lm_dir}", "--probe",
                     "retest-bfloat16", "--device", "cpu", "--dtype", "float32", "--out", str(store),
                     "--no-progress"]) == 0
        assert main(["export", "--format", "every_eval_ever", "--results", str(store), "--out", str(out),
                     "--data", "sample"]) == 0
    assert "differ from --data" not in err.getvalue()
    with_data = build_board([out], root / "site-data", data_source="sample")
    return store, with_data, build_board([out], root / "site")


def test_a_card_carries_page_05s_mimicry_attribution_and_retest_readings(attributed):
    """The mimicry verdict, the attribution and the retest's check of each card are page 05's functions on the
    same rows and records (control_table of controlled, attribution_summary/table, decisive_positions, probe_table),
    and no drop job shows as a probe check."""
    from prb_utils.analysis.attribution import (
        ATTRIBUTION_RULE,
        attribution_summary,
        attribution_table,
        decisive_positions,
        decisive_posts,
        is_drop,
    )
    from prb_utils.analysis.probe_effects import check_rule, control_table, controlled, probe_table
    from prb_utils.board.readings import NO_ATTRIBUTION_DATA

    store, built, without = attributed
    data = load_benchmark("sample", limit=2)
    rows = load_results(store)
    rows = rows.assign(model=rows["job_label"])
    plan = ResamplingPlan()
    effects = probe_effects(rows, data, **plan.options())
    summary = attribution_summary(rows, data, **plan.options()).set_index(["model", "base"])
    decided = decisive_posts(rows, data)
    table = attribution_table(summary.reset_index(), decided).set_index("model")
    positions = decisive_positions(decided)
    cards = _readings(built)
    retested = next(label for label in cards if label not in ("lexical", "length"))
    assert set(cards) == {"lexical", "length", retested}
    for label in ("lexical", "length"):
        (reading,) = cards[label]
        assert reading["base"] == "top3" and not any(c["probe"].startswith("drop") for c in reading["checks"])
        assert is_drop(effects[effects["model"] == label]).sum() == 3   # top3: three drop jobs, read elsewhere
        mine = effects[(effects["model"] == label) & ~is_drop(effects)]
        assert reading["checks"] == [{"probe": r["probe"], "check": r["check"], "measured": r["measured [95% CI]"],
                                      "allowed": r["allowed"]} for r in probe_table(mine).to_dict("records")]
        (mimicry,) = reading["mimicry"]
        want, shown = controlled(mine).iloc[0], control_table(mine).iloc[0]
        assert mimicry["probe"] == "parrot" and mimicry["control"] == "parrot-control"
        assert mimicry["verdict"] == want["control_verdict"] == shown["verdict"] and reading["mimicry_missing"] == ""
        for key in ("flip_rate", "control_flip_rate", "beyond_control", "beyond_control_low", "beyond_control_high",
                    "beyond_control_p_holm"):
            assert mimicry[key] == want[key]
        assert (mimicry["flips_text"], mimicry["beyond_text"], mimicry["p_text"]) == (
            shown["flips: probe / control [95% CI]"], shown["beyond control [95% CI]"], shown["p (Holm)"])
        assert mimicry["rule"] == check_rule(["parrot"])
        attribution, r = reading["attribution"], summary.loc[(label, "top3")]
        assert attribution["missing"] == "" and attribution["no_verdict"] == r["no_verdict"]
        assert attribution["n_pairs"] == r["n_pairs"] == len(data)
        assert attribution["hinges_text"] == table.loc[label, "verdicts hinging on one post [95% CI]"]
        assert attribution["positions_text"] == table.loc[label, "decisive post by position"]
    lexical = cards["lexical"][0]["attribution"]
    r = summary.loc[("lexical", "top3")]
    assert r["no_verdict"] == "" and 0 <= r["hinges_low"] <= r["hinges"] <= r["hinges_high"] <= 1
    assert (lexical["hinges"], lexical["hinges_low"], lexical["hinges_high"]) == (r["hinges"], r["hinges_low"],
                                                                                  r["hinges_high"])
    assert lexical["n_units"] == r["n_units"] and lexical["none_flip"] == r["none_flip"]
    mine = positions[positions["model"] == "lexical"]
    assert lexical["positions"] == [{"position": p, "pairs": n, "share": s} for p, n, s in
                                    zip(mine["position"], mine["pairs"], mine["share"], strict=True)]
    assert [p["position"] for p in lexical["positions"]] == [1, 2, 3]
    assert cards["length"][0]["attribution"]["no_verdict"].startswith("n/a: profile-blind")
    assert cards["length"][0]["attribution"]["positions"] == []
    assert f"Attribution: {ATTRIBUTION_RULE}." in built.numbers["rules"]

    (retest,) = cards[retested]
    (check,) = retest["checks"]
    want = probe_table(effects[effects["model"] == retested]).iloc[0]
    assert check == {"probe": "retest-bfloat16", "check": want["check"], "measured": want["measured [95% CI]"],
                     "allowed": want["allowed"]} and check["check"] in ("pass", "fail")
    assert retest["mimicry"] == [] and retest["mimicry_missing"].startswith("No parrot probe of top3 was submitted")
    assert "--probe parrot --probe parrot-control" in retest["mimicry_missing"]
    assert retest["attribution"]["missing"].startswith("No post of top3 was left out for this run")
    assert "--probe attribution" in retest["attribution"]["missing"]

    plain = _readings(without)
    assert plain["lexical"][0]["attribution"] == {"missing": NO_ATTRIBUTION_DATA}
    assert plain["lexical"][0]["mimicry"][0]["verdict"] == cards["lexical"][0]["mimicry"][0]["verdict"]

    ids = {m["label"]: i for i, m in built.numbers["models"].items()}
    facts = _open_offline([built.page], probe=lambda page: page.inner_text(f'[data-probes="{ids["lexical"]}"]'))
    page = facts["index.html"]
    assert page["console"] == [] and page["errors"] == []
    assert lexical["hinges_text"] in page["probe"] and lexical["positions_text"] in page["probe"]
    assert cards["lexical"][0]["mimicry"][0]["beyond_text"] in page["probe"] and "drop1" not in page["probe"]


def test_a_card_without_parrot_or_drop_jobs_says_so_in_one_sentence(probed):
    """The swap-and-shuffle store has no parrot and no drop job: each reading says so, with the command."""
    _, built = probed
    for readings in _readings(built).values():
        for reading in readings:
            assert reading["mimicry"] == [] and "--probe parrot --probe parrot-control" in reading["mimicry_missing"]
            assert reading["attribution"]["missing"].startswith("No post of top3 was left out for this run")
