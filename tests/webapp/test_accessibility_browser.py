"""Every page and every view of the web app checked by axe-core (vendored and pinned, injected by
the test) in real Chromium at a phone's size, light and dark: no serious or critical violation.
The phone's inbox is checked holding what it shows: a notification with tags and buttons, an image
attachment, a question, an urgent alert, a ring; its other views with their lists; the OAuth
consent page and its error page too."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from tests.e2e.web_phone import IDENTITY, PHONE_SCREEN, show_view
from tests.oauth.flow import Authorization, open_consent, register_client
from tests.webapp.accessibility import axe_violations, low_contrast, with_axe

SCHEMES = ["light", "dark"]


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x1d\x4e\xd8" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@pytest.fixture
def phone_screen(browser: Browser, request: pytest.FixtureRequest) -> Iterator[BrowserContext]:
    context = with_axe(browser.new_context(**PHONE_SCREEN, color_scheme=request.param))
    try:
        yield context
    finally:
        context.close()


def checked(page: Page) -> list[str]:
    return axe_violations(page) + [f"contrast: {failure}" for failure in low_contrast(page)]


@pytest.mark.parametrize("phone_screen", SCHEMES, indirect=True)
@pytest.mark.parametrize("path", ["/", "/docs", "/app/", "/app/no-such-page", "/oauth/authorize"])
def test_every_page_has_no_serious_violation(
    live_server: str, phone_screen: BrowserContext, path: str
) -> None:
    page = phone_screen.new_page()
    page.goto(live_server + path)
    page.wait_for_load_state("networkidle")
    if path == "/docs":
        page.locator(".operation").first.wait_for()
    assert checked(page) == []


@pytest.mark.parametrize("phone_screen", SCHEMES, indirect=True)
def test_the_consent_page_has_no_serious_violation(live_server: str, phone_screen: BrowserContext) -> None:
    with httpx.Client(base_url=live_server, timeout=10) as http:
        client = register_client(http, client_name="Desk Assistant")
        url = Authorization(client["client_id"]).url()  # the in-process server is the test issuer
        open_consent(http, url)  # the request is valid: the page shows a code
    page = phone_screen.new_page()
    page.goto(live_server + url)
    page.locator("#code").wait_for()
    assert checked(page) == []


@pytest.mark.parametrize("phone_screen", SCHEMES, indirect=True)
def test_every_view_of_the_phone_has_no_serious_violation(
    live_server: str, phone_screen: BrowserContext
) -> None:
    phone_screen.grant_permissions(["notifications"], origin=live_server)
    page = phone_screen.new_page()
    page.goto(f"{live_server}/app/")
    assert checked(page) == []  # set-up
    page.get_by_role("button", name="This is my phone").click()
    page.locator("#stream-state", has_text="connected").wait_for()
    assert checked(page) == []  # the empty inbox, its placeholder and banners

    show_view(page, "Tokens")
    page.get_by_label("May ring this phone (phone:control)").check()
    page.get_by_role("button", name="Create token").click()
    page.locator("#new-token").wait_for(state="visible")
    token = page.locator("#new-token-value").inner_text()
    auth = {"Authorization": f"Bearer {token}"}
    assert checked(page) == []
    phone_id, _ = page.evaluate(IDENTITY)
    with httpx.Client(base_url=live_server, timeout=10) as http:
        rich = {
            "title": "Deploy",
            "message": "**v2.4** is live",
            "markdown": True,
            "priority": "high",
            "tags": ["rocket", "prod"],
            "url": "https://ci.example/run/42",
            "actions": [{"label": "Open run", "url": "https://ci.example/run/42"}],
        }
        assert http.post("/v1/send", json=rich, headers=auth).status_code == 200
        fields = {"token": token, "user": "u" * 30, "title": "Door", "message": "Someone at the door"}
        picture = {"attachment": ("door.png", png(40, 30), "image/png")}
        assert http.post("/v1/messages.json", data=fields, files=picture).status_code == 200
        question = {"question": "Deploy now?", "choices": ["Ship it", "Wait"], "allow_text": True}
        assert http.post("/v1/interactions", json=question, headers=auth).status_code == 201
        urgent = {"title": "PagerDuty", "message": "prod is down", "priority": "urgent", "repeat": 60}
        assert http.post("/v1/send", json=urgent, headers=auth).status_code == 200
        assert http.post(f"/v1/devices/{phone_id}/ring", headers=auth).status_code == 202
    show_view(page, "Inbox")
    page.locator("li.kind-urgent .alert-status").wait_for()
    page.locator("li.kind-ring").wait_for()
    page.locator("img.attachment-image").wait_for()
    assert checked(page) == []  # the inbox holding every kind of entry
    page.get_by_role("button", name="Clear all").click()
    page.locator("#clear-dialog").wait_for()
    assert checked(page) == []  # the confirmation dialog
    page.keyboard.press("Escape")

    for view in ("Pair", "Assistants", "Settings"):
        show_view(page, view)
        assert checked(page) == [], view
    show_view(page, "Pair")
    page.get_by_label("Six-digit code shown on the computer or the assistant's page").fill("12")
    page.get_by_role("button", name="Confirm code").click()
    page.get_by_role("alert").filter(has_text="six digits").wait_for()
    assert checked(page) == []  # an error beside its field


@pytest.mark.parametrize("phone_screen", SCHEMES, indirect=True)
def test_the_computers_pairing_view_has_no_serious_violation(
    live_server: str, phone_screen: BrowserContext
) -> None:
    page = phone_screen.new_page()
    page.goto(f"{live_server}/app/")
    page.get_by_role("button", name="This is a computer").click()
    page.locator("#pair-code").wait_for()
    assert checked(page) == []


@pytest.mark.parametrize("phone_screen", ["light"], indirect=True)
def test_the_check_finds_what_it_looks_for(live_server: str, phone_screen: BrowserContext) -> None:
    page = phone_screen.new_page()
    page.goto(f"{live_server}/app/no-such-page")
    page.evaluate("() => { const b = document.createElement('button'); document.body.append(b); }")
    assert any(found.startswith("button-name (critical)") for found in axe_violations(page))
