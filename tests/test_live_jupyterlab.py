"""Notebooks 00 and 01 in a live JupyterLab, driven as a person would in headless Chromium.

A small store is scored first (``length`` and ``lexical`` on the sample, profile conditions ``none`` and
``top3``); copies of the two notebooks, with their ``parameters`` cell pointing at that store and
``interactive = True``, are opened in a real JupyterLab server started from this environment. In each
notebook the test runs every cell from the Run menu, waits until every code cell has its execution count
and the kernel is idle, checks that the widgets rendered and that no cell failed (in the page and in the
saved notebook), then uses the widgets: in 00 it answers the first quiz pair, its twin (the unscored second
step) and the second pair, checking each picked button is marked and each next step appears only after the
guess, that section 5 ("you against the models") follows each answer and "Try again" with no cell run again,
that a marked button shows its whole label and widget tables pad their headers, and that the page shows no news
toast (the project's JupyterLab overrides) and logs no console error; in 01 it picks another pair in the pair
dropdown, waits for the shown pair to change and finds what each RM saw on its card, with no console error. Screenshots go under the test's tmp folder; with ``PRB_SCREENSHOTS=1`` they are also written to
``docs/00_workshop_live.png`` and ``docs/01_pair_inspection_live.png``. The server, the kernels and the
browser are started and stopped by their PIDs (see ``live_lab.py``), also when a check fails.

Slow (about a minute or two of kernel work per notebook on a 2-core machine); ``make test-fast`` leaves it out.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest
from live_lab import LiveBrowser, LiveLab

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = {"00": "00_workshop_personalization", "01": "01_pair_inspection"}
SCREENSHOTS = {"00": "00_workshop_live.png", "01": "01_pair_inspection_live.png"}
RUN_TIMEOUT_S = 420  # kernel start and every cell, on a busy 2-core machine
UI_TIMEOUT_MS = 60_000

# JavaScript: the text of an element without the text of its <select> options (a dropdown's option labels
# would otherwise hide whether the content shown below it changed).
TEXT_WITHOUT_SELECTS = """el => { const c = el.cloneNode(true); c.querySelectorAll('select').forEach(s => s.remove());
  return c.innerText; }"""
ERROR_OUTPUTS = """() => [...document.querySelectorAll('.jp-OutputArea-output')]
  .filter(o => o.innerText.includes('Traceback (most recent call last)')
               || (o.matches('[data-mime-type="application/vnd.jupyter.stderr"]')
                   && /^\\w*(Error|Exception)\\b.*:/m.test(o.innerText)))
  .map(o => o.innerText.slice(0, 800))"""


def set_parameters(source: str, values: dict[str, object]) -> str:
    """``source`` of a ``parameters`` cell with each name's value replaced by ``repr(value)``, keeping the
    annotation and the help comment; a name that the cell does not assign is an error."""
    lines = source.splitlines()
    for name, value in values.items():
        pattern = re.compile(rf"^({re.escape(name)}\s*(?::[^=]+)?=\s*)(.*?)(\s+#.*)?$")
        for i, line in enumerate(lines):
            match = pattern.match(line)
            if match:
                lines[i] = f"{match.group(1)}{value!r}{match.group(3) or ''}"
                break
        else:
            raise AssertionError(f"the parameters cell assigns no {name!r}:\n{source}")
    return "\n".join(lines) + "\n"


def prepare_notebook(name: str, folder: Path, values: dict[str, object]) -> int:
    """Copy ``notebooks/<name>.ipynb`` into ``folder`` with its parameters set; return its code-cell count."""
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{name}: expected one cell tagged 'parameters', found {len(cells)}"
    cells[0].source = set_parameters(cells[0].source, values)
    nbformat.write(nb, folder / f"{name}.ipynb")
    return sum(c.cell_type == "code" for c in nb.cells)


def wait_for(condition, timeout: float, what: str, interval: float = 0.5):
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` after ``timeout`` s."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


# ------------------------------------------------------------------ fixtures: store, lab, browser


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The store, the notebook copies and a running JupyterLab (stopped by PID at the end)."""
    from prb_utils.data import load_benchmark
    from prb_utils.scoring import score_benchmark

    tmp = tmp_path_factory.mktemp("live_lab")
    results = tmp / "results"
    scored = score_benchmark(load_benchmark("sample"), ["length", "lexical"], ["none", "top3"], out=results,
                             progress=False)
    assert len(scored) > 0 and set(scored["model"]) == {"length", "lexical"}
    root = tmp / "notebooks"
    root.mkdir()
    common = {"data": "sample", "results": str(results), "interactive": True}
    cells = {key: prepare_notebook(name, root, common) for key, name in NOTEBOOKS.items()}
    lab = LiveLab(root, tmp / "lab")
    try:
        status = lab.wait_ready()
        assert "started" in status, status
        yield {"lab": lab, "root": root, "tmp": tmp, "code_cells": cells}
    finally:
        lab.stop()
    assert lab.proc.returncode is not None


@pytest.fixture(scope="module")
def browser(live):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = LiveBrowser(playwright, live["tmp"] / "chromium-profile")
        try:
            yield chromium.browser
        finally:
            chromium.stop()
        assert chromium.proc.returncode is not None


# ------------------------------------------------------------------ driving the notebook


def open_and_run(live, browser, key: str):
    """Open notebook ``key`` in a fresh page, run all cells from the Run menu, wait until it is done and
    check it rendered without errors. Returns the page."""
    lab, name = live["lab"], NOTEBOOKS[key]
    context = browser.new_context(viewport={"width": 1400, "height": 1600})
    page = context.new_page()
    page.set_default_timeout(UI_TIMEOUT_MS)
    live.setdefault("console", {})[key] = watch_console(page)
    page.goto(lab.url(f"lab/tree/{name}.ipynb?reset"), wait_until="domcontentloaded", timeout=120_000)
    page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=180_000)
    # the kernel of this notebook has started (generous: a cold kernel on a busy 2-core machine)
    wait_for(lambda: any(s["path"].endswith(f"{name}.ipynb") and s["kernel"]["execution_state"] == "idle"
                         for s in lab.api("sessions")), 180, f"the kernel of {name} to start")
    left = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if left.count():  # fold the file browser away, for the screenshots
        left.first.click()
    page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
    page.locator("#jp-MainMenu").get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()

    prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputArea-prompt")

    def all_done():
        errors = page.evaluate(ERROR_OUTPUTS)  # a failed cell stops Run All: say so at once
        assert not errors, f"{name}: error output in the page:\n" + "\n---\n".join(errors)
        texts = [t.strip() for t in prompts.all_inner_texts()]
        done = len(texts) == live["code_cells"][key] and all(re.fullmatch(r"\[\d+\]:", t) for t in texts)
        return done and lab.kernels_idle() and texts

    try:
        wait_for(all_done, RUN_TIMEOUT_S, f"every cell of {name} to run", interval=2)
    except AssertionError:
        page.screenshot(path=str(live["tmp"] / f"{key}_timeout.png"))
        raise
    errors = page.evaluate(ERROR_OUTPUTS)
    assert not errors, f"{name}: error output in the page:\n" + "\n---\n".join(errors)
    return page


def watch_console(page) -> list[str]:
    """The page's console errors and uncaught exceptions, collected from now on."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    return errors


def saved_outputs(live, page, key: str) -> list[dict]:
    """Save the notebook from the File menu and return the outputs of its code cells as the server has them."""
    lab, name = live["lab"], NOTEBOOKS[key]
    path = live["root"] / f"{name}.ipynb"
    before = path.stat().st_mtime_ns
    page.locator("#jp-MainMenu").get_by_role("menuitem", name="File", exact=True).click()
    page.locator('.lm-Menu-item[data-command="docmanager:save"]').first.click()
    wait_for(lambda: path.stat().st_mtime_ns != before, 60, f"{name} to be saved")
    model = lab.api(f"contents/{name}.ipynb?content=1")
    cells = nbformat.from_dict(model["content"]).cells
    return [o for c in cells if c.cell_type == "code" for o in c.get("outputs", [])]


def check_saved(live, page, key: str) -> None:
    outputs = saved_outputs(live, page, key)
    failed = [o for o in outputs if o.get("output_type") == "error"]
    assert not failed, f"{NOTEBOOKS[key]}: cells failed: " + "; ".join(f"{o['ename']}: {o['evalue']}" for o in failed)
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert views, f"{NOTEBOOKS[key]}: no widget output was saved"


def screenshot(live, page, key: str, target) -> None:
    """Screenshot with ``target`` scrolled to the top of the view: under tmp always, and to docs/ when
    PRB_SCREENSHOTS is set."""
    target.evaluate("""el => { el.scrollIntoView({block: 'start'});
      const scroller = el.closest('.jp-WindowedPanel-outer'); if (scroller) scroller.scrollBy(0, -24); }""")
    page.wait_for_timeout(300)  # let the scroll settle before the picture (not a check)
    page.screenshot(path=str(live["tmp"] / SCREENSHOTS[key]))
    if os.environ.get("PRB_SCREENSHOTS"):
        shutil.copyfile(live["tmp"] / SCREENSHOTS[key], ROOT / "docs" / SCREENSHOTS[key])


def widget_cell(page, selector: str):
    """The output area of the first code cell whose output holds ``selector``."""
    cell = page.locator(".jp-Notebook .jp-CodeCell").filter(has=page.locator(f".jp-OutputArea {selector}")).first
    cell.wait_for(timeout=UI_TIMEOUT_MS)
    return cell.locator(".jp-OutputArea").first


# ------------------------------------------------------------------ the tests


def _shows(area, text: str):
    """A condition for :func:`wait_for`: the area's text once it holds ``text``."""
    return lambda: (shown := area.inner_text()) and text in shown and shown


def _guess(area, side: str) -> str:
    """Click the one enabled "Response <side>" button of the quiz, wait until it is marked right or wrong, and
    return its mark (``success`` or ``danger``)."""
    open_buttons = area.locator("button.widget-button:not([disabled])").filter(has_text=re.compile(rf"Response {side}$"))
    assert open_buttons.count() == 1, f"expected one open 'Response {side}' button, saw {open_buttons.count()}"
    handle = open_buttons.first.element_handle()
    open_buttons.first.click()
    mark = wait_for(lambda: next((m for m in ("success", "danger") if f"mod-{m}" in (handle.get_attribute("class") or "")),
                                 None), 60, f"the picked 'Response {side}' button to be marked right or wrong")
    assert handle.is_disabled()
    label = handle.inner_text().strip()
    assert label.startswith(f"Response {side}: ") and handle.evaluate("b => b.scrollWidth <= b.clientWidth"), \
        f"the marked button's label is cut: {label!r}"   # "Response A: wr..." before
    return mark


def section_5(page):
    """The output area of section 5's cell (the comparison with the models)."""
    cell = page.locator(".jp-Notebook .jp-CodeCell").filter(has_text="widgets.comparison_view(session").first
    return cell.locator(".jp-OutputArea").first


def test_workshop_quiz_in_live_jupyterlab(live, browser):
    """One quiz pair at a time: a guess marks the picked button and reveals the key; the first pair's twin comes
    as an unscored second step; the next pair appears only after the guess, and so on for two pairs."""
    from prb_utils.notebook.widgets import TWIN_QUESTION

    page = open_and_run(live, browser, "00")
    try:
        assert page.locator(".jp-OutputArea .jupyter-widgets").count() > 0, "no widget rendered"
        area = widget_cell(page, ".widget-button")
        text = area.inner_text()
        assert "Pair 1:" in text and "Pair 2:" not in text and TWIN_QUESTION not in text  # one pair only
        assert area.locator("button").filter(has_text=re.compile(r"Response [AB]$")).count() == 2
        versus = section_5(page)
        assert "No quiz answers were recorded" in versus.inner_text()
        marks = [_guess(area, "A")]
        text = wait_for(_shows(area, TWIN_QUESTION), 60, "the twin step")
        assert "The user wanted Response" in text and "Pair 2:" not in text  # the next pair waits for the twin
        wait_for(_shows(versus, "on the 1 quiz pairs you answered"), 60, "section 5 to follow the first answer")
        header = area.locator(".prb-view th").first   # the revealed scores table, inside a widget
        assert header.evaluate("th => parseFloat(getComputedStyle(th).paddingLeft)") >= 4, "unpadded headers"
        _guess(area, "B")
        text = wait_for(_shows(area, "Pair 2:"), 60, "the second pair")
        assert "Pair 3:" not in text
        marks.append(_guess(area, "A"))
        text = wait_for(_shows(area, "Pair 3:"), 60, "the third pair")
        assert re.search(r"You so far: \d of 2 right", text), text[-400:]  # the twin is not scored
        assert f"You so far: {marks.count('success')} of 2 right" in text
        shown = wait_for(_shows(versus, "on the 2 quiz pairs you answered"), 60, "section 5 after the second pair")
        assert re.search(rf"you\s+what the RM sees\s+2\s+{marks.count('success')}\b", shown), shown[:600]
        check_saved(live, page, "00")
        screenshot(live, page, "00", area.locator(".jupyter-widgets").first)
        area.locator("button").filter(has_text="Try again").first.click()
        wait_for(_shows(versus, "No quiz answers were recorded"), 60, "section 5 to start over after Try again")
        assert "on the 2 quiz pairs" not in versus.inner_text()
        assert page.locator(".Toastify__toast").count() == 0, page.locator(".Toastify__toast").all_inner_texts()
        errors = live["console"]["00"]
        assert not errors, "console errors in the live workshop:\n" + "\n".join(errors[:10])
    finally:
        page.context.close()


def test_pair_browser_in_live_jupyterlab(live, browser):
    page = open_and_run(live, browser, "01")
    try:
        assert page.locator(".jp-OutputArea .jupyter-widgets").count() > 0, "no widget rendered"
        area = widget_cell(page, ".widget-dropdown select")
        selects = area.locator(".widget-dropdown select")
        counts = [s.locator("option").count() for s in selects.all()]
        assert counts and max(counts) >= 2, f"no dropdown with a choice to make (options: {counts})"
        pair = selects.nth(counts.index(max(counts)))  # the pair list is the longest one
        values = pair.locator("option").evaluate_all("os => os.map(o => o.value)")
        current = pair.input_value()
        other = next(v for v in values if v != current)
        before = area.evaluate(TEXT_WITHOUT_SELECTS)
        assert len(before.strip()) > 100, f"the pair browser shows almost nothing: {before!r}"
        pair.select_option(other)
        # the output is cleared before the new card is drawn: wait for the new card itself, not for any change
        after = wait_for(lambda: (t := area.evaluate(TEXT_WITHOUT_SELECTS)) != before and "What each RM saw" in t
                         and t, 60, "the shown pair to change after picking another one, its card drawn")
        assert pair.input_value() == other
        assert len(after.strip()) > 100, f"after the change the browser shows almost nothing: {after!r}"
        assert "What each RM saw" in after   # the card shows each model's exact input (folded)
        errors = live["console"]["01"]
        assert not errors, "console errors in the live pair browser:\n" + "\n".join(errors[:10])
        check_saved(live, page, "01")
        screenshot(live, page, "01", area.locator(".widget-dropdown").first)  # the browser's controls on top
    finally:
        page.context.close()
