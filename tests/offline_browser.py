"""A headless Chromium page that opens files from disk with the network blocked, for the tests that load the
report (``test_report.py``) and the documentation site (``test_docs.py``) as a reader would.

Playwright (the dev extras) drives the system's ``/usr/bin/chromium`` (no browser download); every request
that is not a local file is aborted and recorded, and the page's console errors and page errors are
collected, so a test can assert that a page reached nothing and reported nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--host-resolver-rules=MAP * ~NOTFOUND"]
LOCAL_SCHEMES = ("file:", "data:", "about:", "blob:")


def fresh(facts: dict[str, Any]) -> dict[str, Any]:
    """Empty the lists of :func:`offline_page`'s ``facts`` (before the next page is loaded)."""
    facts.update(blocked=[], requests=[], console=[], errors=[])
    return facts


@contextmanager
def offline_page(*, width: int = 1280, height: int = 900, color_scheme: str = "light") -> Iterator[tuple[Any, dict]]:
    """A Playwright page in headless Chromium (viewport ``width`` x ``height``, preferred ``color_scheme``),
    and the facts it collects: ``blocked`` (requests that tried to leave, aborted), ``requests`` (every
    non-local request or websocket), ``console`` (console errors) and ``errors`` (page errors)."""
    from playwright.sync_api import sync_playwright

    facts = fresh({})
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            context = browser.new_context(viewport={"width": width, "height": height}, service_workers="block",
                                          color_scheme=color_scheme)

            def route(route) -> None:
                if route.request.url.startswith("file:"):
                    route.continue_()
                else:
                    facts["blocked"].append(route.request.url)
                    route.abort()

            context.route("**/*", route)
            page = context.new_page()
            page.on("request", lambda r: None if r.url.startswith(LOCAL_SCHEMES) else facts["requests"].append(r.url))
            page.on("websocket", lambda ws: facts["requests"].append(ws.url))
            page.on("console", lambda m: m.type == "error" and facts["console"].append(m.text))
            page.on("pageerror", lambda e: facts["errors"].append(str(e)))
            yield page, facts
        finally:
            browser.close()
