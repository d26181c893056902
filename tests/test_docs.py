"""The documentation site builds offline with ``--strict``, opens from disk (``site/index.html``: its navigation
opens pages, its search works, in headless Chromium with the network blocked), its pages are reachable, and what
it says about the command line and the API follows the code: the CLI reference and the API reference are generated from the parser
and the curated API, and every ``prb`` command shown in the docs still parses."""

from __future__ import annotations

import argparse
import html
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml
from offline_browser import fresh, offline_page

import prb_utils
from prb_utils.analysis.findings import rules_markdown
from prb_utils.analysis.uncertainty import PLAN_UNITS
from prb_utils.cli import build_parser, main
from prb_utils.notebook.manual import INDEX_STATISTICS, MANUAL_DIR, STATISTICS_PAGE, manual_html, rule_anchor

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
GUIDES = ("tutorials", "how-to")


def _hook():
    spec = importlib.util.spec_from_file_location("prb_docs_hook", DOCS / "_hooks" / "prb_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav_files(nav) -> list[str]:
    found: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        found += _nav_files(value) if isinstance(value, list) else [value]
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                           "--site-dir", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    return out


def test_the_site_builds_strict_and_fetches_nothing_from_the_network(site):
    pages = list(site.rglob("*.html"))
    assert len(pages) > 20
    external = re.compile(r'<(?:link|script|img)\b[^>]*\b(?:href|src)="(?:https?:)?//', re.IGNORECASE)
    assert [p.relative_to(site) for p in pages if external.search(p.read_text(encoding="utf-8"))] == []
    assert not (site / "_readme_draft").exists() and not (site / "_readme_draft.html").exists()
    assert not (site / "_hooks").exists()


LINK = re.compile(r'<(?:a|link|script|img|source)\b[^>]*\b(?:href|src)="([^"]+)"', re.IGNORECASE)


def test_every_link_and_image_of_the_site_resolves_to_a_file_from_disk(site):
    """Opened from disk, a link to a folder shows a listing: every local link and image of every page (the 404
    page aside: a web server's, with links from the site's root) names a file that exists, and every anchor it
    names is on that page."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["use_directory_urls"] is False and "offline" in config["plugins"]
    checked, broken, ids = 0, [], {}
    for page in sorted(site.rglob("*.html")):
        if page.name == "404.html":
            continue
        for url in LINK.findall(page.read_text(encoding="utf-8")):
            parts = urlsplit(html.unescape(url))
            if parts.scheme or url.startswith(("//", "#")) or not parts.path:
                continue
            target = (page.parent / unquote(parts.path)).resolve()
            checked += 1
            if not target.is_file():
                broken.append(f"{page.relative_to(site)}: {url}")
            elif parts.fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = set(re.findall(r'\bid="([^"]+)"', target.read_text(encoding="utf-8")))
                if unquote(parts.fragment) not in ids[target]:
                    broken.append(f"{page.relative_to(site)}: {url} (no such anchor)")
    assert checked > 1000
    assert broken == []


NAV = "nav.md-nav--primary a.md-nav__link[href]:visible"   # what a reader can click in the navigation


def _nav_links(page) -> list[tuple[str, str]]:
    """The visible links of the primary navigation that open a page: (label, absolute URL)."""
    links = page.locator(NAV).evaluate_all("links => links.map(a => [a.textContent.trim(), a.getAttribute('href'), a.href])")
    return [(label, url) for label, href, url in links if not href.startswith("#")]


def _opened(page, facts: dict) -> dict:
    """What a reader sees of the page just loaded: its URL, title, first heading, and what went wrong."""
    heading = page.locator("article h1")
    return {"url": page.url, "title": page.title(), "h1": heading.first.inner_text() if heading.count() else "",
            "listing": page.locator("#parentDirLinkBox, #listing").count() > 0,
            **{key: list(facts[key]) for key in ("blocked", "requests", "console", "errors")}}


def test_the_site_opens_from_disk_its_nav_opens_pages_and_search_finds_shared_ranks(site):
    """From ``file://.../site/index.html`` in headless Chromium with the network blocked: each page link of the
    navigation, clicked in turn from the page before, opens that page (a file, its title and heading; not a
    folder's listing) with no request and no console error; and typing "shared rank" in the search box lists
    the section "Shared ranks", whose link opens it."""
    site_name = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["site_name"]
    with offline_page(width=1366) as (page, facts):
        page.goto((site / "index.html").as_uri(), wait_until="networkidle")
        links = _nav_links(page)
        assert len(links) >= 25, links
        visited = []
        for label, url in links:
            fresh(facts)
            shown = page.locator(NAV)
            shown.nth(shown.evaluate_all("links => links.map(a => a.href)").index(url)).click()
            page.wait_for_load_state("networkidle")
            seen = _opened(page, facts)
            visited.append(seen["url"])
            assert seen["url"] == url and url.endswith(".html"), (label, seen)
            assert not seen["listing"] and seen["h1"].strip() and seen["title"].endswith(site_name), (label, seen)
            assert seen["blocked"] == seen["requests"] == seen["console"] == seen["errors"] == [], (label, seen)
        assert len(set(visited)) == len(links)

        fresh(facts)
        page.locator("input.md-search__input").click()
        page.keyboard.type("shared rank")
        found = page.locator(".md-search-result__link", has_text="Shared ranks")
        found.first.wait_for(timeout=15_000)
        titles = page.locator(".md-search-result__item").all_inner_texts()
        assert any("Shared ranks" in title for title in titles), titles
        found.first.click()
        page.wait_for_load_state("networkidle")
        fragment = urlsplit(page.url).fragment
        assert fragment and page.locator(f"[id='{fragment}']").inner_text().startswith("Shared ranks"), page.url
        assert facts["blocked"] == facts["requests"] == facts["console"] == facts["errors"] == [], facts


def test_every_rule_has_the_anchor_the_reports_index_links_to(site):
    """The statistics page gives each rule of the generated list its anchor (the docs hook), and every statistic
    the report's index links (:data:`INDEX_STATISTICS`, under each resampling unit) lands on one of them."""
    page = (site / STATISTICS_PAGE).read_text(encoding="utf-8")
    names = re.findall(r"^- \*\*([^*]+)\*\*:", rules_markdown(), flags=re.MULTILINE)
    assert len(names) >= 12
    assert [name for name in names if f'<li id="{rule_anchor(name)}">' not in page] == []
    linked = {rule.format(unit=unit) for _, rule in INDEX_STATISTICS for unit in PLAN_UNITS}
    assert linked <= set(names), sorted(linked - set(names))


def test_the_reports_link_to_a_statistic_opens_its_rule_in_the_manual(site, tmp_path):
    """The index's manual line, for a report inside prb's source folder with the manual built there (here: a
    folder holding this build as ``site``), links each statistic; clicked from disk, "shared rank" opens the
    manual's rule for shared ranks."""
    (tmp_path / MANUAL_DIR).symlink_to(site, target_is_directory=True)
    index = tmp_path / "reports" / "index.html"
    index.parent.mkdir()
    index.write_text(f"<!DOCTYPE html><html><head><title>report</title><link rel='icon' href='data:,'></head><body>"
                     f"{manual_html(index.parent, root=tmp_path)}</body></html>", encoding="utf-8")
    with offline_page() as (page, facts):
        page.goto(index.as_uri(), wait_until="networkidle")
        page.get_by_role("link", name="shared rank", exact=True).click()
        page.wait_for_load_state("networkidle")
        assert page.url.endswith(f"{STATISTICS_PAGE}#{rule_anchor('rank')}"), page.url
        assert page.locator(f"#{rule_anchor('rank')}").inner_text().startswith("rank: shared rank")
        assert facts["blocked"] == facts["console"] == facts["errors"] == [], facts


def test_every_tutorial_and_how_to_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    hook = _hook()
    hook.on_config(config)   # the hook fills the notebooks' section, as mkdocs does when it builds
    nav = _nav_files(config["nav"])
    written = [page for page in nav if page not in hook.notebook_pages()]
    assert all((DOCS / page).is_file() for page in written), [p for p in written if not (DOCS / p).is_file()]
    assert set(hook.notebook_pages()) <= set(nav)
    pages = {str(p.relative_to(DOCS)) for folder in GUIDES for p in (DOCS / folder).glob("*.md")}
    assert len(pages) >= 12
    assert pages <= set(nav), sorted(pages - set(nav))


def test_every_subcommand_and_option_is_in_the_cli_reference(site):
    page = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    commands = _hook().subcommands(build_parser())
    assert {"validate", "models", "score", "probe", "plan", "summarize", "report", "bon", "ppo", "export"} <= set(commands)
    for name, (_, parser) in commands.items():
        assert f'id="prb-{name}"' in page, name
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"<code>{option}</code>" in page, (name, option)


def test_an_option_added_to_the_parser_appears_in_the_reference():
    hook = _hook()
    parser = build_parser()
    before = hook.render_cli(parser)
    assert "--brand-new-option" not in before
    hook.subcommands(parser)["score"][1].add_argument("--brand-new-option", metavar="X", help="a new option's help")
    after = hook.render_cli(parser)
    assert "| `--brand-new-option` | `X` |  | a new option's help |" in after
    assert after.count("## prb ") == before.count("## prb ")


def test_every_public_name_is_in_the_api_reference(site):
    page = (site / "reference" / "api.html").read_text(encoding="utf-8")
    missing = [name for name in prb_utils.__all__
               if f'id="{prb_utils._PUBLIC[name]}.{name}"' not in page]
    assert missing == []


def _code_blocks(text: str) -> list[str]:
    return re.findall(r"^ *```(?:bash|sh|console)\n(.*?)^ *```", text, flags=re.MULTILINE | re.DOTALL)


def _commands(block: str) -> list[list[str]]:
    joined = re.sub(r"\\\n\s*", " ", block)
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words = words[1:]
        commands.append(words)
    return [words for words in commands if words]


def _doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def test_every_prb_command_in_the_docs_parses_and_every_make_target_exists():
    parser = build_parser()
    targets = set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.MULTILINE))
    checked = 0
    for page in _doc_pages():
        for block in _code_blocks(page.read_text(encoding="utf-8")):
            for words in _commands(block):
                program = Path(words[0]).name
                if program == "prb":
                    args = words[1:]
                elif "prb_utils" in words and words[words.index("prb_utils") - 1] == "-m":
                    args = words[words.index("prb_utils") + 1:]
                elif program == "make":
                    assert set(words[1:]) <= targets, (page.name, words)
                    continue
                else:
                    continue
                try:
                    parser.parse_args(args)
                except SystemExit as error:
                    pytest.fail(f"{page.relative_to(ROOT)}: `{shlex.join(words)}` does not parse ({error})")
                checked += 1
    assert checked >= 20   # the scanner finds the commands (27 when the README became a landing page)


def test_the_readme_is_a_landing_page_whose_links_resolve():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert "make report" in text and "make test" in text and "3.11" in text
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert any(link.endswith(".png") for link in links)
    assert [link for link in links if "://" not in link and not (ROOT / link).exists()] == []


def _missing_tests(row: str) -> list[str]:
    """The ``tests/...py[::name]`` a table row names that do not exist."""
    missing = []
    for path, names in re.findall(r"`(tests/[\w/]+\.py)((?:::\w+)?)`", row):
        file = ROOT / path
        if not file.is_file():
            missing.append(path)
        elif names and f"def {names[2:]}" not in file.read_text(encoding="utf-8"):
            missing.append(path + names)
    return missing


def _table_rows(page: Path, header: str) -> list[str]:
    return [line for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("| ")
            and not line.startswith(header) and not set(line) <= set("|- ")]


def test_every_row_of_the_reliability_page_names_a_test_that_exists():
    """The reliability table is the site's (the README links to it): each row names the tests that prove it, and
    every test it names exists, so a renamed test breaks the build, not the reader."""
    rows = _table_rows(DOCS / "explanation" / "reliability.md", "| fault")
    assert len(rows) >= 60
    assert [m for row in rows for m in _missing_tests(row)] == []


def test_every_statistic_names_its_formula_and_a_test_that_exists():
    """The reference table of statistics: a row per statistic with its formula, rule, reference and at least one
    test, and every test it names exists."""
    rows = _table_rows(DOCS / "reference" / "statistics.md", "| statistic")
    assert len(rows) >= 20
    assert [row.split("|")[1] for row in rows if "`tests/" not in row.split("|")[-2]] == []   # each has a test
    assert [m for row in rows for m in _missing_tests(row)] == []


def test_the_statistics_page_states_every_rule_as_the_code_words_it():
    """The rules list of the statistics reference is the findings layer's records, word for word
    (:func:`prb_utils.analysis.findings.rules_markdown`): a rule changed in the code without the page fails here."""
    from prb_utils.analysis.findings import RULES_END, RULES_START, rules_markdown

    text = (DOCS / "reference" / "statistics.md").read_text(encoding="utf-8")
    assert RULES_START in text and RULES_END in text
    stated = text.split(RULES_START, 1)[1].split(RULES_END, 1)[0].strip()
    assert stated == rules_markdown(), "regenerate the list: the rules in the code changed"
    for stale in ("equal accuracies share", "2.5% and 97.5% quantiles of a model's rank", "Holm over every lift"):
        assert stale not in text


#: A code block the suite does not run says why in the line above it: ``<!-- not run: REASON -->`` (hidden on the
#: site); every other ``bash`` and ``python`` block of the docs and the README runs below, in order.
BLOCK = re.compile(r"(?:<!-- not run: (?P<why>[^>]+?) -->[ \t]*\n)?^ *```(?P<lang>bash|python)\n(?P<code>.*?)^ *```",
                   flags=re.MULTILINE | re.DOTALL)
FIRST = DOCS / "tutorials" / "first-score.md"   # its store is the one the other pages' commands read


def _runnable_pages() -> list[Path]:
    return [FIRST, *[p for p in _doc_pages() if p != FIRST], README]


def test_every_code_block_in_the_docs_runs_or_says_why_not(tmp_path, monkeypatch, capsys):
    """Every ``bash`` and ``python`` block of the docs and the README runs here, offline, on the shipped sample and
    the offline models, in one working folder (``prb`` commands through the command line's own entry point, Python
    blocks as written), or carries the reason it cannot (a GPU, the hub, a server, hours, or a make target this
    suite runs otherwise) in the line above it."""
    monkeypatch.chdir(tmp_path)
    sample = sorted((ROOT / "data" / "sample").glob("*.jsonl"))[0]
    (tmp_path / "pairs.jsonl").write_text("".join(sample.read_text(encoding="utf-8").splitlines(True)[:3]),
                                          encoding="utf-8")   # the own-data page's file: three records
    ran, skipped = [], []
    for page in _runnable_pages():
        namespace = {"__name__": "docs_example"}   # a page's Python blocks run in one session, as a reader's
        for found in BLOCK.finditer(page.read_text(encoding="utf-8")):
            where = f"{page.relative_to(ROOT)}: {found['code'].strip().splitlines()[0]}"
            if found["why"]:
                skipped.append(where)
                continue
            if found["lang"] == "python":
                exec(compile(found["code"], where, "exec"), namespace)   # noqa: S102
            else:
                for words in _commands(found["code"]):
                    assert Path(words[0]).name == "prb", f"{where}: `{shlex.join(words)}` is not a prb command"
                    code = main(words[1:])
                    assert code == 0, f"{where}: `{shlex.join(words)}` exited {code}: {capsys.readouterr().err[-800:]}"
            ran.append(where)
            capsys.readouterr()
    assert len(ran) >= 12 and skipped, (ran, skipped)   # the scanner finds both (13 run, 27 not, when written)


def test_every_notebook_is_a_page_of_the_site_as_committed(site):
    """The site renders each notebook of ``notebooks/`` from the committed file (the docs hook, nbconvert): its
    title and its parameters cell are on its page, so a notebook edited is a page edited."""
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        page = site / "notebooks" / f"{notebook.stem}.html"
        assert page.is_file(), notebook.name
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        title = "".join(cells[0]["source"]).splitlines()[0].lstrip("# ").strip()
        parameters = next("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
        first_name = parameters.split(":", 1)[0].strip()
        text = page.read_text(encoding="utf-8")
        assert html.escape(title, quote=False) in text and f">{first_name}<" in text, notebook.name


def test_a_new_notebook_gets_its_page_and_nav_entry_from_the_hook(tmp_path, monkeypatch):
    """A new page is its notebook and its class: the hook lists every notebook of `notebooks/` in the nav (titled by
    its parameters class, else by its file name) and generates its docs page; mkdocs.yml and docs/ type none."""
    import shutil

    hook = _hook()
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        shutil.copy(path, tmp_path / path.name)
    shutil.copy(ROOT / "notebooks" / "02_accuracy_breakdown.ipynb", tmp_path / "06_a_new_page.ipynb")
    monkeypatch.setattr(hook, "NOTEBOOKS", tmp_path)
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    hook.on_config(config)
    nav = _nav_files(config["nav"])
    assert "notebooks/06_a_new_page.md" in nav and "notebooks/05_reading_the_user.md" in nav
    titles = hook.notebook_pages()
    assert titles["notebooks/05_reading_the_user.md"] == "05 Is it reading the user?"
    assert titles["notebooks/06_a_new_page.md"] == "06 06_a_new_page"
    assert "<!-- prb:notebook 06_a_new_page -->" in hook.NOTEBOOK_PAGE.format(name="06_a_new_page")
    assert not (DOCS / "notebooks").exists() or not list((DOCS / "notebooks").glob("*.md"))
