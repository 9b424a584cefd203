"""The web phone and urgent notifications that repeat until acknowledged, in real Chromium against a
real ``relaybox serve`` (a 1 s repeat allowed: ``RELAYBOX_URGENT_MIN_REPEAT_S``). The open app
shows the alert with an Acknowledge button and alerts again until it is tapped, which reaches the
server; with the app closed, the server pushes the notification again every repeat (its real
RFC 8291 push to a fake push service, handed to the worker with the DevTools protocol's
ServiceWorker.deliverPushMessage), and the worker's notification carries an Acknowledge action."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page

from tests.browser import ARTIFACTS, watched
from tests.e2e.conftest import RelayboxServer
from tests.e2e.web_phone import (
    IDENTITY,
    NOTIFICATIONS,
    become_the_phone,
    closed_web_phone,
    create_token,
    eventually,
)

pytestmark = pytest.mark.e2e

SERVER_ENV = {"RELAYBOX_URGENT_MIN_REPEAT_S": "1"}
URGENT = {"title": "PagerDuty", "message": "prod is down", "priority": "urgent"}
ALERTED = re.compile(r"Alerted (\d+) times")
TAP_ACKNOWLEDGE = (
    "r => import('/app/store.js').then(() => import('/app/answer.js')).then(() => relayboxAcknowledge(r))"
)


def urgent_notifications(page: Page) -> list[dict[str, Any]]:
    """The shown notifications titled ``Urgent: …``: title, body, tag and action titles."""
    script = (
        f"{NOTIFICATIONS}.then(ns => ns.filter(n => n.title.startsWith('Urgent')).map(n => "
        "({title: n.title, body: n.body, tag: n.tag, actions: n.actions.map(a => a.title)})))"
    )
    shown: list[dict[str, Any]] = page.evaluate(script)
    return shown


def alerted(page: Page) -> int:
    found = ALERTED.search(page.locator("li.kind-urgent").first.inner_text())
    return int(found[1]) if found else 1


def test_the_open_app_alerts_until_acknowledge_is_tapped(tmp_path: Path, browser: Browser) -> None:
    with RelayboxServer(tmp_path / "server", env=SERVER_ENV) as server:
        url = server.wait_until_ready()
        context = browser.new_context(viewport={"width": 390, "height": 844})  # a phone's size
        context.grant_permissions(["notifications"], origin=url)
        try:
            page = context.new_page()
            watch = watched(page, url)
            become_the_phone(page, url)
            phone_id, _ = page.evaluate(IDENTITY)
            auth = {"Authorization": f"Bearer {create_token(page)}"}
            with httpx.Client(base_url=url, timeout=30) as http:
                sent = http.post("/v1/send", json=URGENT | {"repeat": 1}, headers=auth)
                receipt = sent.json()["receipt"]
                card = page.locator("#pinned-box")
                card.wait_for(state="visible")
                entry = page.locator("li.kind-urgent", has_text="PagerDuty").filter(has_text="prod is down")
                entry.get_by_role("button", name="Acknowledge").wait_for()
                eventually(page, lambda: alerted(page) >= 3)  # again every second
                [shown] = urgent_notifications(page)
                assert (shown["title"], shown["tag"], shown["actions"]) == (
                    "Urgent: PagerDuty",
                    f"app:urgent:{receipt}",
                    ["Acknowledge"],
                )
                card.scroll_into_view_if_needed()
                page.screenshot(path=ARTIFACTS / "web-phone-urgent.png")
                entry.get_by_role("button", name="Acknowledge").click()
                entry.locator("p", has_text="You acknowledged it.").wait_for()
                assert entry.locator(".alert-status").count() == 0  # no more "Alerted N times"
                assert page.locator("#pinned li").count() == 0  # no longer waiting: out of "Needs you"
                count = alerted(page)
                state = http.get(f"/v1/receipts/{receipt}", headers=auth).json()
                assert state["status"] == "acknowledged"
                assert state["acknowledged_by"] == {"device_id": phone_id, "name": "Web Phone"}
                eventually(page, lambda: urgent_notifications(page) == [])  # its notification closed
                page.wait_for_timeout(2500)
                assert alerted(page) == count and entry.get_by_role("button", name="Acknowledge").count() == 0

                # The sender's cancel stops the next one; a reload does not bring either back.
                cancelled = http.post("/v1/send", json=URGENT | {"repeat": 1, "message": "db"}, headers=auth)
                second = page.locator("li.kind-urgent", has_text="PagerDuty").filter(has_text="db")
                second.get_by_role("button", name="Acknowledge").wait_for()
                http.post(f"/v1/receipts/{cancelled.json()['receipt']}/cancel", headers=auth)
                second.locator("p", has_text="Cancelled by the sender.").wait_for()
                problems = watch.problems()
                page.reload()
                page.locator("#stream-state", has_text="connected").wait_for()
                page.wait_for_timeout(1500)
                assert page.locator("#pinned-box").is_hidden()  # neither alerts again
                assert page.locator("li.kind-urgent .alert-status").count() == 0
        finally:
            context.close()
    assert problems == [], problems


def test_a_closed_app_is_pushed_again_and_its_worker_offers_acknowledge(
    tmp_path: Path, browser: Browser
) -> None:
    with closed_web_phone(tmp_path, browser, env=SERVER_ENV) as phone:
        http, page, auth, push_service = phone.http, phone.page, phone.auth, phone.push_service
        receipt = http.post("/v1/send", json=URGENT | {"repeat": 1}, headers=auth).json()["receipt"]
        pushed = eventually(page, lambda: push_service.received[2:])  # the send's push, then repeats
        assert {p.json()["type"] for p in pushed} == {"notification"}
        assert "prod" not in json.dumps([p.json() for p in pushed])  # sealed to the phone

        [shown] = phone.deliver(pushed[-1].json(), lambda: urgent_notifications(page))
        assert (shown["title"], shown["tag"], shown["actions"]) == (
            "Urgent: PagerDuty",
            f"app:urgent:{receipt}",
            ["Acknowledge"],
        )
        assert shown["body"].startswith("prod is down") and "Repeats until acknowledged." in shown["body"]

        # What its Acknowledge action runs in the worker (headless Chromium cannot tap it):
        tapped = page.evaluate(TAP_ACKNOWLEDGE, receipt)
        assert (tapped["status"], tapped["body"]["status"]) == (200, "acknowledged"), tapped
        stop = eventually(
            page, lambda: [p for p in push_service.received if p.json()["type"] == "urgent_stop"]
        )
        before = len(push_service.received)
        page.wait_for_timeout(2500)  # no repeat after the acknowledgement
        assert len(push_service.received) == before, [p.json()["type"] for p in push_service.received]
        assert len(stop) == 1
