"""The web pages' tests run on SQLite only: they exercise the pages, not the stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'relaybox.db'}"


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh browser profile for one test (service workers, storage and permissions included)."""
    opened = browser.new_context()
    try:
        yield opened
    finally:
        opened.close()
