"""The consent page in a real browser: Debian's Chromium driven by Playwright (never a downloaded
browser; the ``browser`` fixture is ``tests/browser.py``'s). The page shows a code; the virtual
phone confirms it; the page notices by itself, one scope is unticked, Allow lands on the client's
redirect with a code, and the code exchanges for a token with exactly the scopes left ticked. A
screenshot is kept in ``test-artifacts/``."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, ConsoleMessage, Route

from client import phone as virtual_phone
from tests.browser import ARTIFACTS
from tests.oauth.flow import ALL_SCOPES, ISSUER, REDIRECT_URI, Authorization, exchange, register_client


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'relaybox.db'}"  # the browser test runs on SQLite only


def test_a_person_approves_a_client_in_the_browser_with_the_virtual_phone(
    live_server: str, browser: Browser, tmp_path: Path
) -> None:
    phone_state = tmp_path / "phone.json"
    virtual_phone.register(phone_state, server=live_server, name="Pixel 9")
    with httpx.Client(base_url=live_server, timeout=10) as http:
        request = Authorization(register_client(http, client_name="Claude Desktop")["client_id"])
    landed: list[str] = []

    def client_callback(route: Route) -> None:
        landed.append(route.request.url)
        route.fulfill(status=200, content_type="text/plain", body="the client got its code")

    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda message: _note_problem(message, problems))
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.route(REDIRECT_URI + "**", client_callback)

    page.goto(live_server + request.url())
    assert page.locator("#client-name").inner_text() == "Claude Desktop"
    assert page.locator("#redirect-host").inner_text() == "127.0.0.1:3030"
    assert "loopback" in page.locator("#client-kind").inner_text()
    assert page.locator("#decide").is_hidden()
    code = page.locator("#code").inner_text().replace(" ", "")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "consent-page-code.png", full_page=True)

    assert virtual_phone.confirm_connector(phone_state, code) == "Claude Desktop"

    page.locator("#decide").wait_for(state="visible", timeout=10_000)
    assert page.locator("#waiting").is_hidden()
    assert "Pixel 9" in page.locator("#confirmed-by").inner_text()
    boxes = page.locator("input[name=scope]")
    assert boxes.count() == len(ALL_SCOPES)
    page.locator('input[value="files:send"]').uncheck()
    page.screenshot(path=ARTIFACTS / "consent-page.png", full_page=True)
    page.click("#allow")
    page.wait_for_url(REDIRECT_URI + "?**", timeout=10_000)

    assert len(landed) == 1
    params = {key: values[0] for key, values in parse_qs(urlsplit(landed[0]).query).items()}
    assert params["state"] == request.state
    assert params["iss"] == ISSUER
    with httpx.Client(base_url=live_server, timeout=10) as http:
        tokens = exchange(http, request, params["code"])
    assert tokens.status_code == 200, tokens.text
    assert tokens.json()["scope"].split() == [scope for scope in ALL_SCOPES if scope != "files:send"]
    assert problems == []


def test_the_allow_button_is_disabled_while_no_scope_is_ticked(
    live_server: str, browser: Browser, tmp_path: Path
) -> None:
    phone_state = tmp_path / "phone.json"
    virtual_phone.register(phone_state, server=live_server)
    with httpx.Client(base_url=live_server, timeout=10) as http:
        request = Authorization(register_client(http)["client_id"], scope="devices:read")
    page = browser.new_page()
    page.goto(live_server + request.url())
    virtual_phone.confirm_connector(phone_state, page.locator("#code").inner_text())
    page.locator("#decide").wait_for(state="visible", timeout=10_000)
    assert page.locator("#allow").is_enabled()
    page.locator('input[value="devices:read"]').uncheck()
    assert page.locator("#allow").is_disabled()


def _note_problem(message: ConsoleMessage, problems: list[str]) -> None:
    if message.type in ("error", "warning"):
        problems.append(message.text)
