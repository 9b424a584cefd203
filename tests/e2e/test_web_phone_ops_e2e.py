"""The web phone's operations, in real Chromium against a real ``relaybox serve``: a question answered
by tapping its button returns the caller's long poll; an AI assistant's consent code is confirmed
on the page; a reminder fires as a notification at its time; a ring rings; a file an assistant
sends (the mcp SDK's client, ``send_file``) is opened with the browser's key and offered as a
download with its content intact."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import Browser, Page

from tests.browser import watched
from tests.connector.sdk_oauth import ApprovingBrowser, MemoryStorage, oauth_provider
from tests.e2e.conftest import RelayboxServer
from tests.e2e.test_oauth_disconnect_e2e import open_consent_page
from tests.e2e.web_phone import (
    IDENTITY,
    SHOWN,
    become_the_phone,
    create_token,
    enter_code,
    eventually,
    show_view,
)
from tests.reliability.instances import free_port

pytestmark = pytest.mark.e2e

SERVER_ENV = {
    "RELAYBOX_REMINDER_MIN_LEAD_S": "2",
    "RELAYBOX_RING_DURATION_S": "2",
}


def answer_a_question(page: Page, http: httpx.Client, auth: dict[str, str]) -> dict[str, object]:
    """Ask, long-poll for the answer in a thread, tap "Ship it" on the page; the poll's answer."""
    asked = http.post(
        "/v1/interactions", json={"question": "Deploy now?", "choices": ["Ship it", "Wait"]}, headers=auth
    )
    assert asked.status_code in (200, 201), asked.text
    interaction_id = asked.json()["id"]
    polled: list[httpx.Response] = []
    poll = threading.Thread(
        target=lambda: polled.append(
            http.get(f"/v1/interactions/{interaction_id}", params={"wait": 20}, headers=auth)
        )
    )
    poll.start()
    page.locator("#pinned li.kind-question", has_text="Deploy now?").get_by_role(
        "button", name="Ship it"
    ).click()
    page.locator("#inbox li.kind-question", has_text="Answered: Ship it.").wait_for()
    poll.join(25)
    assert polled, "the long poll did not return"
    return dict(polled[0].json())


async def assistant_sends_file(url: str, phone_token: str, phone_key: str) -> None:
    """An AI assistant (the mcp SDK's client) connects, its consent confirmed by the phone's
    credential, and drops a file into the phone's downloads with ``send_file``."""

    async def confirm(code: str) -> str:
        body = {"code": code, "public_key": phone_key, "intent": "connector"}
        async with httpx2.AsyncClient(base_url=url) as http:
            answer = await http.post(
                "/v1/pair/confirm", json=body, headers={"Authorization": f"Bearer {phone_token}"}
            )
        assert answer.status_code == 200, answer.text
        return answer.text

    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as person:
        provider = oauth_provider(url, MemoryStorage(), ApprovingBrowser(url, person, confirm))
        async with (
            httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30, read=60)) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
        ):
            filed = await client.call_tool(
                "send_file", {"filename": "notes.txt", "content": "hello from a script\n"}
            )
            assert not filed.is_error, filed


def test_the_web_phone_answers_confirms_reminds_rings_and_receives_a_document(
    tmp_path: Path, browser: Browser
) -> None:
    port = free_port()
    with RelayboxServer(tmp_path / "server", env=SERVER_ENV, port=port) as server:
        url = server.wait_until_ready()
        context = browser.new_context(accept_downloads=True)
        context.grant_permissions(["notifications"], origin=url)
        try:
            page = context.new_page()
            watch = watched(page, url)
            become_the_phone(page, url)
            token = create_token(page, may_ring=True)
            auth = {"Authorization": f"Bearer {token}"}
            phone_id, phone_token = page.evaluate(IDENTITY)
            with httpx.Client(base_url=url, timeout=30) as http:
                answered = answer_a_question(page, http, auth)
                assert answered["status"] == "answered" and answered["choice_index"] == 0, answered

                with httpx.Client(base_url=url, timeout=10) as assistant_browser:
                    consent = open_consent_page(assistant_browser, url)
                    enter_code(page, consent.code)
                    page.locator("#code-result", has_text="Confirmed for Leaver").wait_for()
                    state = assistant_browser.get(
                        f"/oauth/consent/{consent.session_id}/status", params={"wait": 0}
                    )
                    assert state.json()["status"] == "confirmed", state.text

                at = int(time.time()) + 3
                reminded = http.post("/v1/reminders", json={"message": "Stretch", "at": at}, headers=auth)
                assert reminded.status_code in (200, 201, 202), reminded.text
                show_view(page, "Inbox")
                page.locator("#inbox li.kind-reminder", has_text="Reminder: Stretch").wait_for(timeout=20_000)
                assert time.time() >= at
                assert ["Reminder", "Stretch"] in eventually(page, lambda: page.evaluate(SHOWN))

                rung = http.post(f"/v1/devices/{phone_id}/ring", headers=auth)
                assert rung.status_code in (200, 202), rung.text
                page.locator("#pinned li.kind-ring", has_text="Ringing for 2 s").wait_for()
                page.locator("#inbox li.kind-ring", has_text="for 2 s").wait_for()  # it stops by itself

                phone = {"Authorization": f"Bearer {phone_token}"}
                phone_key = http.get("/v1/devices/me", headers=phone).json()["public_key"]
            with ThreadPoolExecutor(1) as aside:  # the SDK's event loop, away from Playwright's
                aside.submit(anyio.run, assistant_sends_file, url, phone_token, phone_key).result(120)
            with page.expect_download() as download:
                page.get_by_role("link", name="Download notes.txt").click()
            saved = download.value.path()
            assert download.value.suggested_filename == "notes.txt"
            assert Path(saved).read_text(encoding="utf-8") == "hello from a script\n"
            problems = watch.problems()

            # Offline, then back: what was sent meanwhile is replayed; the assistant is listed and
            # can be disconnected.
            page.goto(f"{url}/app/icons/icon-192.png")
            with httpx.Client(base_url=url, timeout=10) as http:
                away = {"title": "While away", "message": "kept for you"}
                assert http.post("/v1/send", json=away, headers=auth).status_code == 200
            page.goto(f"{url}/app/")
            page.locator("#inbox li.kind-notification", has_text="While away").filter(
                has_text="kept for you"
            ).wait_for()
            assert page.locator("#pinned li").count() == 0  # nothing already seen comes again
            assert page.locator("li.kind-question").count() == 1  # the answered question, kept as answered
            show_view(page, "Assistants")
            page.locator("#grant-list li").first.wait_for()  # the list is read when the view opens
            disconnect = page.get_by_role("button", name="Disconnect relaybox tests")
            while (listed := disconnect.count()) > 0:  # one grant per consent the assistant asked for
                disconnect.first.click()
                page.wait_for_function(
                    "n => document.querySelectorAll('#grant-list button').length < n", arg=listed
                )
            page.locator("#grant-list li", has_text="No assistant is connected.").wait_for()
        finally:
            context.close()
    assert problems == [], problems
