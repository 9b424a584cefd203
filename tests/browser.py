"""Real Chromium for the page tests: Debian's ``/usr/bin/chromium`` driven by Playwright's sync API
(never a downloaded browser). Without it the tests skip, or fail with RELAYBOX_REQUIRE_SERVICES=1.

``browser`` is one Chromium for a test (``chromium`` launches others, such as a persistent
profile); ``watched(page, origin)`` records what a page did
that a test asserts never happens: console errors and warnings, uncaught exceptions, Content
Security Policy violations, and requests to any other origin (every request is recorded).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, BrowserType, ConsoleMessage, Page, Request, sync_playwright

from tests.services import unavailable

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"

# Runs before any page script, outside the page's CSP: collects the violations the page reports.
RECORD_CSP_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(`${event.violatedDirective} blocked ${event.blockedURI || "inline"}`);
});
"""


@pytest.fixture
def chromium() -> Iterator[BrowserType]:
    """Playwright's Chromium type; launch it with ``CHROMIUM`` and ``CHROMIUM_ARGS``. Per test: the
    sync API keeps an event loop running while it is open, which the async tests cannot share."""
    if not CHROMIUM.exists():
        unavailable("Chromium", FileNotFoundError(f"{CHROMIUM} is missing (apt-get install chromium)"))
    with sync_playwright() as playwright:
        yield playwright.chromium


@pytest.fixture
def browser(chromium: BrowserType) -> Iterator[Browser]:
    launched = chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    try:
        yield launched
    finally:
        launched.close()


@dataclass
class Watch:
    """What one page did: every request, and every problem a clean page never shows."""

    page: Page
    origin: str
    requests: list[str] = field(default_factory=list)
    console_problems: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)

    def csp_violations(self) -> list[str]:
        found: list[str] = self.page.evaluate("() => window.__cspViolations || []")
        return found

    def foreign_requests(self) -> list[str]:
        """Requests to another origin (a ``blob:`` URL the page made itself is of its own origin)."""
        return [url for url in self.requests if _origin(url.removeprefix("blob:")) != self.origin]

    def problems(self) -> list[str]:
        """Everything that should be empty after a clean load."""
        return [
            *self.console_problems,
            *self.page_errors,
            *(f"failed: {url}" for url in self.failed_requests),
            *(f"CSP: {violation}" for violation in self.csp_violations()),
            *(f"other origin: {url}" for url in self.foreign_requests()),
        ]


def watched(page: Page, origin: str) -> Watch:
    watch = Watch(page, origin)
    page.add_init_script(RECORD_CSP_VIOLATIONS)
    page.on("console", lambda message: _note_console(message, watch.console_problems))
    page.on("pageerror", lambda error: watch.page_errors.append(str(error)))
    page.on("request", lambda request: watch.requests.append(request.url))
    page.on("requestfailed", lambda request: watch.failed_requests.append(_failure(request)))
    return watch


def _note_console(message: ConsoleMessage, problems: list[str]) -> None:
    if message.type in ("error", "warning"):
        problems.append(f"{message.type}: {message.text}")


def _failure(request: Request) -> str:
    return f"{request.url} ({request.failure})"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
