"""Debian's Chromium under Playwright (FIELD-NOTES.md, "Browsers"): the one way the tests open
pages. A missing Chromium fails the test (``make browser`` installs it): a page that was never
seen rendered is not tested."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from playwright.sync_api import Browser, sync_playwright


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium, closed on exit."""
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("chromium is not on PATH: run `make browser` (on Debian: apt-get install "
                    "-y chromium); pages must be tested in a real browser", pytrace=False)
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()
