"""The web phone's inbox in real Chromium at a phone's size (390 x 844, touch) against a real
``relaybox serve``: what it receives (a notification, a question, a Pushover image attachment) is
still there after a reload, the question still answerable; a question answered on one device is
shown closed on another; the assistants list follows a consent without a reload; a ring rings
until Stop; a sender's ``sequence_id: "ring"`` replaces only its own notification; and a paired
computer cannot make the phone's alarm loop."""

from __future__ import annotations

import base64
import struct
import threading
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from core.domain.canonical import canonical_json
from core.domain.envelope import seal
from tests.browser import watched
from tests.e2e.conftest import RelayboxServer
from tests.e2e.web_phone import (
    EXPORT_IDENTITY,
    IDENTITY,
    IMPORT_IDENTITY,
    NOTIFICATIONS,
    PHONE_SCREEN,
    become_the_phone,
    create_token,
    enter_code,
    eventually,
    show_view,
)
from tests.helpers import start_pairing
from tests.oauth.flow import Authorization, decide, exchange, open_consent, redirect_params, register_client

pytestmark = pytest.mark.e2e

USER_KEY = "uQiRzpo4DXghDmr9QzzfQu27cmVRsG"  # Pushover's user key: accepted and ignored


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A real PNG of one colour (what a camera's snapshot would be, smaller)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def unexpected(problems: list[str]) -> list[str]:
    """The page's problems but the stream a reload cuts short (the page goes, its stream with it)."""
    return [problem for problem in problems if not problem.endswith("/v1/sync (net::ERR_ABORTED)")]


def phone_context(browser: Browser, url: str) -> BrowserContext:
    context = browser.new_context(**PHONE_SCREEN)
    context.grant_permissions(["notifications"], origin=url)
    return context


def entry(page: Page, text: str) -> Any:
    return page.locator("li.entry", has_text=text)


def ask(http: httpx.Client, auth: dict[str, str], question: str) -> tuple[str, threading.Thread, list[Any]]:
    """Ask, then long-poll for the answer in a thread."""
    asked = http.post(
        "/v1/interactions", json={"question": question, "choices": ["Ship it", "Wait"]}, headers=auth
    )
    assert asked.status_code == 201, asked.text
    interaction_id = str(asked.json()["id"])
    polled: list[Any] = []
    poll = threading.Thread(
        target=lambda: polled.append(
            http.get(f"/v1/interactions/{interaction_id}", params={"wait": 30}, headers=auth).json()
        )
    )
    poll.start()
    return interaction_id, poll, polled


def test_what_arrived_is_still_there_after_a_reload_and_the_question_still_answerable(
    tmp_path: Path, browser: Browser
) -> None:
    image = png(48, 32, (29, 78, 216))
    with RelayboxServer(tmp_path / "server") as server:
        url = server.wait_until_ready()
        context = phone_context(browser, url)
        try:
            page = context.new_page()
            watch = watched(page, url)
            become_the_phone(page, url)
            token = create_token(page)
            auth = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=url, timeout=30) as http:
                sent = http.post(
                    "/v1/send", json={"title": "Backup", "message": "12 GB copied"}, headers=auth
                )
                assert sent.status_code == 200, sent.text
                fields = {"token": token, "user": USER_KEY, "title": "Door", "message": "Someone at the door"}
                shot = http.post(
                    "/v1/messages.json", data=fields, files={"attachment": ("door.png", image, "image/png")}
                )
                assert shot.status_code == 200, shot.text
                _, poll, polled = ask(http, auth, "Deploy now?")
                for text in ("12 GB copied", "Someone at the door", "Deploy now?"):
                    entry(page, text).wait_for()
                entry(page, "Someone at the door").locator("img.attachment-image").wait_for()

                page.reload()
                page.locator("#stream-state", has_text="connected").wait_for()
                assert entry(page, "12 GB copied").locator(".note-title").inner_text() == "Backup"
                picture = entry(page, "Someone at the door").locator("img.attachment-image")
                picture.wait_for()
                assert picture.get_attribute("alt") == "Attached image door.png"
                assert picture.evaluate("img => img.complete && img.naturalWidth") == 48  # opened, decoded
                assert (
                    entry(page, "Someone at the door").get_by_role("link", name="Download door.png").count()
                    == 1
                )
                question = page.locator("#pinned li.entry", has_text="Deploy now?")
                question.get_by_role("button", name="Wait").click()
                question_after = page.locator("#inbox li.entry", has_text="Deploy now?")
                question_after.locator(".closed-line", has_text="Answered: Wait.").wait_for()
                poll.join(35)
                assert polled and (polled[0]["status"], polled[0]["choice_index"]) == ("answered", 1)

                page.reload()  # and once more: the answer is kept as well, the question not asked again
                page.locator("#stream-state", has_text="connected").wait_for()
                kept = page.locator("li.entry", has_text="Deploy now?")
                kept.locator(".closed-line", has_text="Answered: Wait.").wait_for()
                assert kept.get_by_role("button", name="Ship it").count() == 0
                assert page.locator("li.entry").count() == 3
            problems = unexpected(watch.problems())
        finally:
            context.close()
    assert problems == [], problems


def test_a_question_answered_on_one_device_is_shown_closed_on_another(
    tmp_path: Path, browser: Browser
) -> None:
    with RelayboxServer(tmp_path / "server") as server:
        url = server.wait_until_ready()
        first, second = phone_context(browser, url), phone_context(browser, url)
        try:
            here = first.new_page()
            become_the_phone(here, url)
            auth = {"Authorization": f"Bearer {create_token(here)}"}
            there = second.new_page()  # the same phone in another browser
            there.goto(f"{url}/app/")
            there.locator("#setup").wait_for()
            there.evaluate(IMPORT_IDENTITY, here.evaluate(EXPORT_IDENTITY))
            there.reload()
            there.locator("#stream-state", has_text="connected").wait_for()
            watch = watched(there, url)
            with httpx.Client(base_url=url, timeout=30) as http:
                _, poll, polled = ask(http, auth, "Restart the database?")
                for page in (here, there):
                    page.locator("#pinned li.entry", has_text="Restart the database?").wait_for()
                here.locator("#pinned li.entry").get_by_role("button", name="Ship it").click()
                closed = there.locator("#inbox li.entry", has_text="Restart the database?")
                closed.locator(".closed-line", has_text="Answered on Web Phone: Ship it.").wait_for()
                assert closed.get_by_role("button", name="Wait").count() == 0
                assert there.locator("#pinned li").count() == 0
                poll.join(35)
                assert polled and polled[0]["status"] == "answered"
            problems = watch.problems()
        finally:
            first.close()
            second.close()
    assert problems == [], problems


def test_the_assistants_list_follows_a_consent_without_a_reload(tmp_path: Path, browser: Browser) -> None:
    with RelayboxServer(tmp_path / "server") as server:
        url = server.wait_until_ready()
        context = phone_context(browser, url)
        try:
            page = context.new_page()
            watch = watched(page, url)
            become_the_phone(page, url)
            show_view(page, "Assistants")
            page.locator("#grant-list li", has_text="No assistant is connected.").wait_for()
            with httpx.Client(base_url=url, timeout=10) as assistant:
                client = register_client(assistant, client_name="Desk Assistant")
                request = Authorization(client["client_id"], resource=f"{url}/mcp")
                consent = open_consent(assistant, request.url())
                enter_code(page, consent.code)
                page.locator("#code-result", has_text="Confirmed for Desk Assistant").wait_for()
                show_view(page, "Assistants")  # the view is open while the person chooses on the page
                code = redirect_params(decide(assistant, consent))["code"]
                assert exchange(assistant, request, code, resource=f"{url}/mcp").status_code == 200
            page.get_by_role("button", name="Disconnect Desk Assistant").wait_for(timeout=15_000)
            problems = watch.problems()
        finally:
            context.close()
    assert problems == [], problems


def test_a_ring_rings_until_stop_and_a_senders_ring_sequence_is_its_own(
    tmp_path: Path, browser: Browser
) -> None:
    with RelayboxServer(tmp_path / "server") as server:
        url = server.wait_until_ready()
        context = phone_context(browser, url)
        try:
            page = context.new_page()
            watch = watched(page, url)
            become_the_phone(page, url)
            phone_id, _ = page.evaluate(IDENTITY)
            auth = {"Authorization": f"Bearer {create_token(page, may_ring=True)}"}
            with httpx.Client(base_url=url, timeout=30) as http:
                assert http.post(f"/v1/devices/{phone_id}/ring", headers=auth).status_code == 202
                ringing = page.locator("#pinned li.kind-ring")
                ringing.get_by_role("button", name="Stop ringing").click()
                page.locator("#inbox li.kind-ring", has_text="you stopped it").wait_for()
                assert page.locator("#pinned li").count() == 0

                assert http.post(f"/v1/devices/{phone_id}/ring", headers=auth).status_code == 202
                ringing.wait_for()
                shown_ring = eventually(
                    page,
                    lambda: page.evaluate(
                        f"{NOTIFICATIONS}.then(ns => ns.filter(n => n.title === 'Ring').map(n => n.tag))"
                    ),
                )
                assert shown_ring == ["app:ring"]
                spoof = {"title": "Ring", "message": "not the ring", "sequence_id": "ring"}
                assert http.post("/v1/send", json=spoof, headers=auth).status_code == 200
                page.locator('#inbox li[data-sequence$=":ring"]', has_text="not the ring").wait_for()
                assert ringing.get_by_role("button", name="Stop ringing").count() == 1  # still ringing
                tags = eventually(
                    page, lambda: sorted(page.evaluate(f"{NOTIFICATIONS}.then(ns => ns.map(n => n.tag))"))
                )
                assert len(tags) == 2 and tags[0] == "app:ring"  # the sender's is s:tok_…:ring
                assert tags[1].startswith("s:tok_") and tags[1].endswith(":ring")
                ringing.get_by_role("button", name="Stop ringing").click()
                page.locator("#inbox li.kind-ring", has_text="you stopped it").wait_for()
            problems = watch.problems()
        finally:
            context.close()
    assert problems == [], problems


def test_a_paired_computer_cannot_make_the_phone_alarm(tmp_path: Path, browser: Browser) -> None:
    """Urgent fields count only in what the server sealed: a computer's notification carrying a
    receipt, a 1 ms repeat and a far expiry is shown as an ordinary notification, and no alarm."""
    with RelayboxServer(tmp_path / "server") as server:
        url = server.wait_until_ready()
        context = phone_context(browser, url)
        try:
            page = context.new_page()
            watch = watched(page, url)
            become_the_phone(page, url)
            phone_id, _ = page.evaluate(IDENTITY)
            with httpx.Client(base_url=url, timeout=10) as http:
                laptop, code = start_pairing(http, name="laptop")
                enter_code(page, code)
                page.locator("#safety-number").wait_for()
                _, phone_token = page.evaluate(IDENTITY)
                me = http.get("/v1/devices/me", headers={"Authorization": f"Bearer {phone_token}"}).json()
                phone_public = base64.b64decode(me["public_key"])
                forged = {
                    "type": "notification",
                    "id": "msg_forged",
                    "message": "loop forever",
                    "priority": "urgent",
                    "receipt": "rcp_" + "0" * 32,
                    "repeat": 0.001,
                    "expire_at": 4_000_000_000,
                }
                blob = seal(canonical_json(forged), laptop.secret_key, phone_public)
                relayed = http.post(
                    "/v1/envelopes",
                    json={"to": phone_id, "type": "notification", "blob": base64.b64encode(blob).decode()},
                    headers=laptop.auth,
                )
                assert relayed.status_code in (200, 201, 202), relayed.text
            show_view(page, "Inbox")
            page.locator("#inbox li.kind-notification", has_text="loop forever").wait_for()
            page.wait_for_timeout(1000)
            assert page.locator("li.kind-urgent").count() == 0 and page.locator("#pinned li").count() == 0
            problems = watch.problems()
        finally:
            context.close()
    assert problems == [], problems
