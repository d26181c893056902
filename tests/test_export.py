"""``prb export``: reward-bench's results layout and Every Eval Ever 0.3.0, checked against the store by
counting, and the Every Eval Ever files validated by that package's own validator (run in a Python >= 3.12
venv made once under the prb cache, ``$PRB_CACHE_DIR`` or ``~/.cache/prb``) and by the JSON schemas shipped
in its wheel."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from filelock import FileLock
from test_profile_curves import make_data
from test_scoring import FakeJudge, FakeModel

from prb_utils.cli import main
from prb_utils.export import export_results, model_identity, model_path
from prb_utils.scoring import score_benchmark
from prb_utils.store import load_results

EEE = "every-eval-ever==0.3.0"
SKYWORK = "classifier:Skywork/Skywork-Reward-V2-Llama-3.1-8B"


def cache_dir() -> Path:
    return Path(os.environ.get("PRB_CACHE_DIR") or Path.home() / ".cache" / "prb")


#: a reward model in a local folder (it need not exist: the fake model only carries the spec)
LOCAL_RM = f"classifier:{Path(tempfile.gettempdir()) / 'models' / 'my-rm'}"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "store"
    data = make_data()
    score_benchmark(data, ["length", "lexical"], ["none", "top2", "rubric"], out=out, progress=False)
    score_benchmark(data, [FakeModel(SKYWORK, nan_on=("Alpha/q0",)), FakeModel(LOCAL_RM)],
                    ["none"], out=out, progress=False)
    score_benchmark(data, [FakeJudge("judge:smollm2")], ["top2"], out=out, progress=False)
    score_benchmark(data, ["length"], ["top2+swap"], out=out, progress=False)
    return data, out, load_results(out)


def brute_accuracy(rows: pd.DataFrame) -> float:
    return float((rows["outcome"] == "correct").sum() / len(rows))


# ------------------------------------------------------------------------------------------ identities


def test_model_identities_and_paths():
    assert model_identity(SKYWORK) == ("Skywork/Skywork-Reward-V2-Llama-3.1-8B", "Skywork", "open_weights")
    assert model_identity("embedding:minilm")[0] == "sentence-transformers/all-MiniLM-L6-v2"
    local_id, developer, availability = model_identity(LOCAL_RM)
    assert local_id.startswith("my-rm-") and (developer, availability) == ("local", "unknown")
    assert model_path("judge:/abs/../x/model [bfloat16]") == "judge/model_bfloat16"
    assert model_path("lexical") == "lexical"


# ------------------------------------------------------------------------------------------ rewardbench


def test_rewardbench_layout_matches_the_store(store, tmp_path):
    _, out, rows = store
    files = export_results(out, tmp_path, format="rewardbench")
    assert len(files) == 2 * rows["job"].nunique()
    for job, group in rows.groupby("job"):
        condition, label = group["profile"].iloc[0], group["job_label"].iloc[0]
        base = tmp_path / condition / model_path(label)
        summary = json.loads(base.with_name(base.name + ".json").read_text())
        assert summary["model"] == label and summary["job"] == job and summary["num_prompts"] == len(group) == 8
        assert summary["accuracy"] == pytest.approx(brute_accuracy(group))
        assert summary["extra_results"] == pytest.approx(
            {s: brute_accuracy(g) for s, g in group.groupby("subset")})
        assert summary["oracle"] is (condition == "rubric")
        assert (summary["probe"], summary["base_profile"]) == (("swap", "top2") if condition == "top2+swap"
                                                                else (None, condition))
        lines = [json.loads(x) for x in base.with_name(base.name + "_outputs.jsonl").read_text().splitlines()]
        assert len(lines) == len(group)
        by_id = group.set_index("id")
        for line in lines:
            row = by_id.loc[line["id"]]
            assert line["results"] == int(row["outcome"] == "correct") and line["outcome"] == row["outcome"]
            assert line["oracle"] is (condition == "rubric") and line["subset"] == row["subset"]
            if pd.notna(row["score_chosen"]) and abs(row["score_chosen"]) != float("inf"):
                assert line["scores_chosen"] == pytest.approx(row["score_chosen"])
            else:
                assert line["scores_chosen"] is None and line["outcome"] == "invalid"
    assert (tmp_path / "none" / "classifier" / "my-rm.json").is_file()  # a local folder by its last name


# ------------------------------------------------------------------------------------------ every eval ever


def _python_312() -> str | None:
    """An interpreter >= 3.12 (every-eval-ever needs it): $PRB_EEE_PYTHON, python3.13/3.12 on PATH, pyenv's."""
    candidates = [os.environ.get("PRB_EEE_PYTHON"), shutil.which("python3.13"), shutil.which("python3.12"),
                  *sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.1[2-9]*/bin/python3")))]
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"],
                               capture_output=True)
        if probe.returncode == 0:
            return candidate
    return None


@pytest.fixture(scope="session")
def eee_python() -> Path:
    """The python of a venv with every-eval-ever 0.3.0, created once (about a minute) and reused."""
    venv = cache_dir() / "venv-every-eval-ever-0.3.0"
    python = venv / "bin" / "python"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(venv) + ".lock"):
        if not python.exists():
            base = _python_312()
            if base is None:
                pytest.skip("every-eval-ever 0.3.0 needs Python >= 3.12 and none is installed here; "
                            "test_every_eval_ever_matches_the_wheel_schemas still validates the export")
            building = venv.with_name(venv.name + ".building")
            shutil.rmtree(building, ignore_errors=True)
            subprocess.run([base, "-m", "venv", str(building)], check=True)
            subprocess.run([str(building / "bin" / "python"), "-m", "pip", "install", "-q", EEE], check=True)
            building.rename(venv)  # the venv's scripts hold its old path; only `python -m` is used
    return python


@pytest.fixture(scope="session")
def eee_wheel() -> Path:
    """The every-eval-ever 0.3.0 wheel (pip download for Python 3.12 works from any Python)."""
    folder = cache_dir() / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / "every-eval-ever.lock")):
        found = sorted(folder.glob("every_eval_ever-0.3.0-*.whl"))
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", EEE, "--no-deps", "--only-binary=:all:",
                            "--python-version", "3.12", "-d", str(folder)], check=True)
            found = sorted(folder.glob("every_eval_ever-0.3.0-*.whl"))
    return found[0]


@pytest.fixture(scope="module")
def eee_export(store, tmp_path_factory):
    data, out, rows = store
    target = tmp_path_factory.mktemp("eee")
    files = export_results(out, target, format="every_eval_ever", data=data, data_source="sample")
    return target, files, rows


def test_every_eval_ever_passes_its_own_validator(eee_export, eee_python):
    target, files, _ = eee_export
    done = subprocess.run([str(eee_python), "-m", "every_eval_ever.validator.cli", "--format", "json",
                           *map(str, files)], capture_output=True, text=True, cwd=target)
    reports = json.loads(done.stdout)
    assert len(reports) == len(files)
    problems = [(r["file"], r["errors"], r["warnings"]) for r in reports if not r["valid"] or r["warnings"]]
    assert problems == [] and done.returncode == 0  # 0: clean, not even a warning

    # the same validator on a copy without the model's deployment facts: it must object (it really validates)
    aggregate = next(p for p in files if p.suffix == ".json")
    log = json.loads(aggregate.read_text())
    del log["model_info"]["additional_details"]["deployment_type"]
    broken = aggregate.with_name("00000000-0000-4000-8000-000000000000.json")
    broken.write_text(json.dumps(log))
    try:
        refused = subprocess.run([str(eee_python), "-m", "every_eval_ever.validator.cli", "--format", "json",
                                  str(broken)], capture_output=True, text=True, cwd=target)
    finally:
        broken.unlink()
    assert refused.returncode == 1 and not json.loads(refused.stdout)[0]["valid"]


def test_every_eval_ever_matches_the_wheel_schemas(eee_export, eee_wheel):
    import jsonschema

    target, files, _ = eee_export
    with zipfile.ZipFile(eee_wheel) as wheel:
        aggregate = json.loads(wheel.read("every_eval_ever/schemas/eval.schema.json"))
        instance = json.loads(wheel.read("every_eval_ever/schemas/instance_level_eval.schema.json"))
    checked = 0
    for path in files:
        if path.suffix == ".json":
            jsonschema.Draft7Validator(aggregate).validate(json.loads(path.read_text()))
            companion = json.loads(path.read_text())["detailed_evaluation_results"]["file_path"]
            assert (target / companion).is_file()
        else:
            for line in path.read_text().splitlines():
                jsonschema.Draft7Validator(instance).validate(json.loads(line))
        checked += 1
    assert checked == len(files) == 2 * 10  # 10 jobs, an aggregate and its samples each


def test_every_eval_ever_numbers_and_oracle_marks(eee_export):
    target, files, rows = eee_export
    seen = set()
    for path in (p for p in files if p.suffix == ".json"):
        log = json.loads(path.read_text())
        job = log["source_metadata"]["additional_details"]["job"]
        group = rows[rows["job"] == job]
        condition = group["profile"].iloc[0]
        seen.add(job)
        overall, *subsets = log["evaluation_results"]
        assert overall["score_details"]["score"] == pytest.approx(brute_accuracy(group))
        assert overall["score_details"]["details"]["n"] == "8"
        assert {r["evaluation_name"].rsplit("/", 1)[1]: r["score_details"]["score"] for r in subsets} == \
            pytest.approx({s: brute_accuracy(g) for s, g in group.groupby("subset")})
        ci = overall["score_details"]["uncertainty"]["confidence_interval"]
        assert ci["lower"] <= overall["score_details"]["score"] <= ci["upper"]
        oracle = "true" if condition == "rubric" else "false"
        assert overall["metric_config"]["additional_details"]["oracle"] == oracle
        assert log["source_metadata"]["additional_details"]["oracle"] == oracle
        assert log["source_metadata"]["additional_details"].get("probe") == ("swap" if "+" in condition else None)
        assert ("(oracle)" in overall["evaluation_name"]) is (condition == "rubric")
        detail = log["detailed_evaluation_results"]
        text = (target / detail["file_path"]).read_text()
        assert detail["checksum"] == hashlib.sha256(text.encode()).hexdigest()
        samples = [json.loads(x) for x in text.splitlines()]
        assert len(samples) == len(group)
        assert all(s["metadata"]["oracle"] == oracle for s in samples)
        assert sum(s["evaluation"]["is_correct"] for s in samples) == (group["outcome"] == "correct").sum()
        if condition == "rubric":
            assert all("This user expects an answer that:" in s["input"]["formatted"] for s in samples)
        if log["model_info"]["name"] == SKYWORK:
            invalid = [s for s in samples if s["metadata"]["outcome"] == "invalid"]
            assert len(invalid) == 1 and invalid[0]["error"] == "non-finite score"
        if log["model_info"]["name"] == "judge:smollm2":
            assert log["model_info"]["id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
            assert all("verdict_ab" in s["metadata"] for s in samples)
    assert seen == set(rows["job"])


# ------------------------------------------------------------------------------------------ the command line


def test_cli_export_writes_and_refuses_in_one_sentence(store, tmp_path, capsys):
    _, out, rows = store
    assert main(["export", "--format", "rewardbench", "--results", str(out), "--out", str(tmp_path / "rb")]) == 0
    assert len(list((tmp_path / "rb").rglob("*.json"))) == rows["job"].nunique()
    assert "Wrote" in capsys.readouterr().out

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    cases = {
        "No results in": ["--format", "rewardbench", "--results", str(tmp_path / "empty"), "--out", str(tmp_path)],
        "Unknown export format 'csv'": ["--format", "csv", "--results", str(out), "--out", str(tmp_path)],
        "Cannot create the output folder": ["--format", "every_eval_ever", "--results", str(out),
                                            "--out", str(blocker / "sub")],
    }
    for message, args in cases.items():
        assert main(["export", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (blocker.parent / "sub").exists()


def test_two_models_whose_folders_end_alike_never_share_an_export_file(tmp_path):
    """a/enc, b/enc and a non-ASCII folder all become embedding/enc: each job still gets its own files, and the
    files returned are the files on disk."""
    import pandas as pd

    from prb_utils.export import export_rewardbench

    labels = ["embedding:/x/a/enc", "embedding:/y/b/enc", "embedding:/z/模型 ü enc"]
    rows = pd.DataFrame([{"job": f"job{i}", "job_label": label, "model": label, "profile": "none", "kind": "embedding",
                          "subset": "s", "id": f"q{k}", "category": "", "score_chosen": 1.0, "score_rejected": 0.0,
                          "outcome": "correct", "invalid_reason": None}
                         for i, label in enumerate(labels) for k in range(2)])
    written = export_rewardbench(rows, {}, tmp_path)
    on_disk = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert len(written) == len(set(written)) == len(on_disk) == 2 * len(labels)
    assert sorted(written) == on_disk


def test_every_eval_ever_files_local_models_whose_folders_end_alike_apart(tmp_path, capsys):
    """#35 item 7. Before: $M/a/enc, $M/b/enc and a folder with spaces and non-ASCII were all the model id "enc",
    filed in one datastore folder; each local folder is now its own id and folder (the same folder, one id)."""
    specs = [f"classifier:{tmp_path / 'm' / 'a' / 'enc'}", f"classifier:{tmp_path / 'm' / 'b' / 'enc'}",
             f"classifier:{tmp_path / 'm' / '模型 ü' / 'enc'}"]
    score_benchmark(make_data(), [FakeModel(spec) for spec in specs], ["none"], out=tmp_path / "store", progress=False)
    out = tmp_path / "eee"
    assert main(["export", "--format", "every_eval_ever", "--results", str(tmp_path / "store"), "--out", str(out)]) == 0, \
        capsys.readouterr().err
    logs = [json.loads(p.read_text()) for p in out.glob("data/*/*/*/*.json")]
    assert sorted(log["model_info"]["additional_details"]["prb_spec"] for log in logs) == sorted(specs)
    ids = {log["model_info"]["id"] for log in logs}
    folders = {p.parent for p in out.glob("data/*/*/*/*.json")}
    assert len(ids) == len(folders) == 3 and all(i.startswith("enc-") for i in ids)
    assert model_identity(specs[0] + "/") == model_identity(specs[0])


def test_export_data_never_attaches_an_edited_records_texts_to_old_scores(tmp_path, capsys):
    import json

    from prb_utils.cli import main
    from prb_utils.data import load_benchmark

    data = load_benchmark("sample", limit=2)
    results, out = tmp_path / "results", tmp_path / "eee"
    original = tmp_path / "original.jsonl"
    original.write_text("\n".join(json.dumps(r) for r in json.loads(data.to_json(orient="records"))) + "\n")
    assert main(["score", "--data", str(original), "--model", "length", "--profile", "none", "--out", str(results),
                 "--no-progress"]) == 0
    records = json.loads(data.to_json(orient="records"))
    records[0]["chosen"] += " An edit made after scoring."
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    capsys.readouterr()
    assert main(["export", "--format", "every_eval_ever", "--results", str(results), "--out", str(out),
                 "--data", str(edited)]) == 0
    err = capsys.readouterr().err
    assert f"1 scored pair(s) differ from --data (edited since they were scored, e.g. {records[0]['subset']}/" in err
    lines = [json.loads(line) for f in out.rglob("*_samples.jsonl") for line in f.read_text().splitlines()]
    texts = {line["input"]["formatted"] is None for line in lines}
    assert len(lines) == len(records) and texts == {True, False}   # the edited pair has no texts, the rest do
    other = tmp_path / "other.jsonl"
    other.write_text("\n".join(json.dumps({**r, "id": "x" + str(r["id"])}) for r in records) + "\n")
    assert main(["export", "--format", "every_eval_ever", "--results", str(results), "--out", str(tmp_path / "o2"),
                 "--data", str(other)]) == 0
    assert "No scored pair is in --data" in capsys.readouterr().err


def test_export_reads_a_damaged_store_as_one_line_and_never_exports_true_as_a_time(tmp_path, capsys):
    import json

    from prb_utils.cli import main
    from prb_utils.data import load_benchmark
    from prb_utils.scoring import score_benchmark

    results = tmp_path / "results"
    score_benchmark(load_benchmark("sample", limit=2), ["length"], ["none"], out=results, progress=False)
    (job,) = (results / "jobs").iterdir()
    meta = json.loads((job / "job.json").read_text())
    meta["finished"] = True   # a hand-edited job.json: not a time
    meta["pairs"]["extra/pair"] = "0" * 16   # and a pair it no longer holds: a shortfall
    (job / "job.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert main(["export", "--format", "every_eval_ever", "--results", str(results), "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "holds 6 of its 7 pairs" in err and "Warning" not in err
    (aggregate,) = [f for f in (tmp_path / "o").rglob("*.json")]
    stamp = json.loads(aggregate.read_text()).get("evaluation_timestamp")
    assert stamp != "True" and stamp == meta["updated"]


@pytest.mark.parametrize("fmt", ["rewardbench", "every_eval_ever"])
def test_an_export_into_an_older_exports_folder_lists_what_it_wrote_and_names_what_it_left(tmp_path, capsys, fmt):
    """The second export writes manifest.txt (the files it wrote, nothing else) and one line naming the older
    files it left in place; none is removed."""
    from prb_utils.cli import main
    from prb_utils.data import load_benchmark
    from prb_utils.scoring import score_benchmark

    data = load_benchmark("sample", limit=1)
    score_benchmark(data, ["length", "lexical"], ["none"], out=tmp_path / "both", progress=False)
    score_benchmark(data, ["length"], ["none"], out=tmp_path / "one", progress=False)
    out = tmp_path / "export"
    assert main(["export", "--format", fmt, "--results", str(tmp_path / "both"), "--out", str(out)]) == 0
    first = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} - {"manifest.txt"}
    capsys.readouterr()
    assert main(["export", "--format", fmt, "--results", str(tmp_path / "one"), "--out", str(out)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    listed = (out / "manifest.txt").read_text().splitlines()
    assert listed[0].startswith(f"# prb export --format {fmt} --results {tmp_path / 'one'}")
    wrote = set(listed[1:])
    assert wrote < first and all((out / name).is_file() for name in first)   # nothing removed
    older = sorted(first - wrote)
    assert older and all("lexical" in name or "prb/lexical" in (out / name).read_text() for name in older)
    assert err == [f"prb: {len(older)} older file(s) in {out} were not written by this export and are left in place "
                   f"(e.g. {older[0]}); manifest.txt lists the {len(wrote)} file(s) this export wrote."]


def test_a_results_path_with_a_line_break_keeps_the_manifest_one_entry_per_line(tmp_path):
    """Issue 35 item 15: a ``--results`` folder whose name holds a newline is written quoted and escaped on the
    manifest's comment line (before: verbatim, so its second half read as a file the export wrote)."""
    from prb_utils.cli import main
    from prb_utils.data import load_benchmark
    from prb_utils.scoring import score_benchmark

    store = tmp_path / "res\nults"
    score_benchmark(load_benchmark("sample", limit=1), ["length"], ["none"], out=store, progress=False)
    out = tmp_path / "export"
    assert main(["export", "--format", "rewardbench", "--results", str(store), "--out", str(out)]) == 0
    lines = (out / "manifest.txt").read_text().splitlines()
    assert lines[0].startswith("# prb export --format rewardbench --results ")
    assert json.dumps(str(store)) in lines[0]
    assert lines[1:] and all((out / name).is_file() for name in lines[1:])


def test_export_data_reads_probe_rows_as_the_probe_showed_them(tmp_path, capsys):
    """A probe job's rows (another user's profile, swapped answers) are checked against the records as the probe
    built them, so an untouched data file calls none of them edited and their texts are the ones the RM read."""
    from prb_utils.data import load_benchmark

    data = tmp_path / "data.jsonl"
    records = json.loads(load_benchmark("sample", limit=6).to_json(orient="records"))
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    results, out = tmp_path / "results", tmp_path / "eee"
    assert main(["probe", "--data", str(data), "--model", "lexical", "--probe", "swap", "--probe", "label-swap",
                 "--out", str(results), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["export", "--format", "every_eval_ever", "--results", str(results), "--out", str(out),
                 "--data", str(data)]) == 0
    assert "edited since" not in capsys.readouterr().err
    lines = [json.loads(line) for f in out.rglob("*_samples.jsonl") for line in f.read_text().splitlines()]
    assert lines and all(line["input"]["formatted"] is not None for line in lines)
    rejected = {f"{r['subset']}/{r['id']}": r["rejected"] for r in records}
    label_swap = [line for line in lines if line["metadata"]["profile"].endswith("+label-swap")]
    assert label_swap and all(line["input"]["reference"] == [rejected[line["sample_id"]]] for line in label_swap)


def test_drop_parrot_and_backend_retest_jobs_export_like_other_probes_and_validate(tmp_path, tiny_lm_dir, capsys):
    """Each drop, parrot and backend-retest job is its own submission naming its condition, base and probe (a
    retest also the option it changed); with --data, a drop job's RM input is the base's minus that post and the
    parrot's rejected answer is the changed one, none called edited; every file passes the board's check."""
    from prb_utils.board import check_submissions
    from prb_utils.data import load_benchmark
    from prb_utils.submission import find_submissions, read_submission

    results, out = tmp_path / "results", tmp_path / "eee"
    assert main(["probe", "--data", "sample", "--limit", "2", "--model", "lexical", "--probe", "attribution",
                 "--probe", "parrot", "--probe", "parrot-control", "--out", str(results), "--no-progress"]) == 0
    assert main(["probe", "--data", "sample", "--limit", "2", "--model", f"implicit:{tiny_lm_dir}", "--probe",
                 "retest-bfloat16", "--device", "cpu", "--dtype", "float32", "--out", str(results),
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["export", "--format", "every_eval_ever", "--results", str(results), "--out", str(out),
                 "--data", "sample"]) == 0
    assert "differ from --data" not in capsys.readouterr().err
    logs = {}
    for aggregate in out.rglob("*.json"):
        log = json.loads(aggregate.read_text())
        details = log["source_metadata"]["additional_details"]
        samples = [json.loads(line) for line in aggregate.with_name(aggregate.stem + "_samples.jsonl").read_text()
                   .splitlines()]
        logs[(log["model_info"]["name"], details["profile"])] = (details, {s["sample_id"]: s for s in samples})
    lexical = {profile: v for (name, profile), v in logs.items() if name == "lexical"}
    assert set(lexical) == {"top3", "top3+drop1", "top3+drop2", "top3+drop3", "top3+parrot", "top3+parrot-control"}
    for profile, (details, samples) in lexical.items():
        assert details["base_profile"] == "top3" and details.get("probe", "") == profile.partition("+")[2]
        assert "backend_option" not in details and all(s["input"]["formatted"] for s in samples.values())
    records = {f"{r['subset']}/{r['id']}": r for r in load_benchmark("sample", limit=2).to_dict("records")}
    base = lexical["top3"][1]
    for position in (1, 2, 3):
        for key, sample in lexical[f"top3+drop{position}"][1].items():
            shown = base[key]["input"]["formatted"].splitlines()
            posts = [n for n, line in enumerate(shown) if line.startswith("- ")]
            assert len(posts) == 3   # top3 shows three posts of every sample record
            assert sample["input"]["formatted"].splitlines() == shown[:posts[position - 1]] + shown[posts[position - 1] + 1:]
    for profile in ("top3+parrot", "top3+parrot-control"):
        for key, sample in lexical[profile][1].items():
            chosen, rejected = sample["input"]["choices"]
            assert chosen == records[key]["chosen"] and rejected != records[key]["rejected"]
            assert sample["input"]["formatted"] == base[key]["input"]["formatted"]
    ((details, samples),) = [v for (name, profile), v in logs.items() if profile == "top3+retest-bfloat16"]
    assert (details["probe"], details["backend_option"], details["backend_value"]) == ("retest-bfloat16", "dtype",
                                                                                       "bfloat16")
    assert details["dtype"] == "bfloat16" and len(samples) == len(records)
    found = [read_submission(p) for p in find_submissions([out])]
    assert len(found) == len(logs) == 8 and all(len(s.rows) == len(records) for s in found)
    assert len(check_submissions([out], data_source="sample")) == 8   # six of lexical, two of the LM
