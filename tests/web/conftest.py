"""The console in a real browser: the API app served by uvicorn on the test database
(``tests.api.conftest.serve``), Debian's Chromium under Playwright, and a signed-in page per
person. Every request the browser makes is recorded, so a test can check that no page asks
anything of another site. Screenshots go to one folder of the session's temporary directory
(``screenshots``), to be looked at by whoever changes the pages.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page

# The fixtures of tests/api (the book, keys) and the ledger's.
from tests.api.conftest import (
    Api,
    api,  # noqa: F401  (a fixture, registered by import)
    serve,
)


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the console's screenshots are written to."""
    return tmp_path_factory.mktemp("console-screenshots")


@dataclass
class Console:
    """The console of a served Api: browser pages signed in as a person, and every URL any of
    them requested."""

    api: Api
    browser: Browser
    shots: Path
    requested: list[str] = field(default_factory=list)
    #: Requests the page's Content-Security-Policy refused: they never left the browser.
    refused: list[str] = field(default_factory=list)
    _contexts: list[BrowserContext] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The engine's base URL."""
        return str(self.api.http.base_url).rstrip("/")

    def page(self) -> Page:
        """A fresh browser page (its own cookies), its requests recorded."""
        context = self.browser.new_context()
        context.on("request", lambda request: self.requested.append(request.url))
        context.on("requestfailed", lambda request: self.refused.append(request.url)
                   if "csp" in (request.failure or "").lower() else None)
        self._contexts.append(context)
        page = context.new_page()
        # Generous: on a loaded 2-core machine a first page load has taken over 15 s.
        page.set_default_timeout(30_000)
        return page

    def sign_in(self, who: str, page: Page | None = None) -> Page:
        """A page signed in with ``who``'s key (a staff key: the console's search page)."""
        page = page or self.page()
        page.goto(f"{self.url}/console/login")
        page.fill("input[name=key]", self.api.keys[who])
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/console(\?.*)?$"))
        return page

    def shot(self, page: Page, name: str, *, full_page: bool = True) -> Path:
        """A screenshot ``name``.png in the screenshots folder (of the whole page unless
        ``full_page`` is false: the viewport only)."""
        path = self.shots / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        return path

    def external(self, *, refused_too: bool = True) -> list[str]:
        """Every recorded URL that is not the engine's own (a ``data:`` URL or a ``blob:`` of
        the engine's origin is); with ``refused_too=False``, not those the page's policy
        refused before they left the browser."""
        own = (self.url + "/", "blob:" + self.url + "/", "data:")
        return [u for u in self.requested if not (u.startswith(own) or u == self.url)
                and (refused_too or u not in self.refused)]

    def close(self) -> None:
        """Close every context opened."""
        for context in self._contexts:
            context.close()


@pytest.fixture
def console(api: Api, browser: Browser, screenshots: Path) -> Iterator[Console]:  # noqa: F811
    """The console of this test's API, in Chromium."""
    found = Console(api, browser, screenshots)
    try:
        yield found
    finally:
        found.close()


__all__ = ["Console", "serve"]
