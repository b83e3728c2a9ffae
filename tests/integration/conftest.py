"""Fixtures of the integration tests that drive a real browser."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import need

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def sync_playwright():
    """Playwright's sync entry point, for Debian's Chromium (executable_path=CHROMIUM, args=CHROMIUM_ARGS);
    skips with the reason when either is absent, unless AFP_REQUIRE_SERVICES=1."""
    if not CHROMIUM.exists():
        need("Chromium", f"{CHROMIUM} not found (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need("Playwright", "the Python package playwright is not installed (pip install -e '.[dev]')")
    return sync_playwright
