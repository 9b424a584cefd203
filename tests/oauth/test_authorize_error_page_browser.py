"""The authorization endpoint opened by hand, in real Chromium (``tests/browser.py``): a person who
pastes ``/oauth/authorize`` into the address bar reads what the page is and what to do instead, on
a page that loads with no console error of its own (Chromium only notes the 400 status), no CSP
violation, no uncaught exception and no request beyond the page itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser

from tests.browser import ARTIFACTS, watched

STATUS_400 = "Failed to load resource: the server responded with a status of 400 (Bad Request)"


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'relaybox.db'}"  # the browser tests run on SQLite only


def test_the_authorization_endpoint_opened_by_hand_says_what_it_is(
    live_server: str, browser: Browser
) -> None:
    page = browser.new_page()
    watch = watched(page, live_server)
    response = page.goto(live_server + "/oauth/authorize")
    page.wait_for_load_state("networkidle")
    assert response is not None and response.status == 400
    assert page.locator("html").get_attribute("lang") == "en"
    assert page.get_by_role("heading", level=1).is_visible()
    text = page.locator("main").inner_text()
    assert (
        "This is the authorization endpoint an AI assistant's app opens to connect to relaybox; "
        "open it from the app, not by hand." in text
    )
    assert "Error code: unsupported_response_type" in text
    assert "None" not in text and "not supported by the server" not in text
    # Chromium reports the page's own 400 in the console; it is the only message there.
    assert watch.console_problems == [f"error: {STATUS_400}"]
    assert [problem for problem in watch.problems() if STATUS_400 not in problem] == []
    # The site's stylesheet and nothing else, from nowhere else; read at a phone's width.
    assert watch.requests == [live_server + "/oauth/authorize", live_server + "/static/site.css"]
    assert page.evaluate("getComputedStyle(document.body).fontFamily").startswith("system-ui")
    assert (
        page.locator('meta[name="viewport"]').get_attribute("content")
        == "width=device-width, initial-scale=1"
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "authorize-opened-by-hand.png", full_page=True)
