"""A reminder on a web phone whose browser is closed: the server pushes it, sealed, at its time
(never when it is set), and the service worker shows it — in real Chromium, the server's real RFC
8291 push (pywebpush to a fake push service) handed to the worker with the DevTools protocol."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser

from tests.e2e.conftest import RelayboxServer
from tests.e2e.web_phone import (
    CLOSE_ALL,
    IDENTITY,
    SHOWN,
    become_the_phone,
    create_token,
    eventually,
    worker_registration,
)
from tests.fakes.webpush_server import FakeWebPushService
from tests.reliability.instances import free_port

pytestmark = pytest.mark.e2e

LEAD_S = 3


def test_a_closed_web_phone_is_reminded_at_the_reminders_time(tmp_path: Path, browser: Browser) -> None:
    env = {"RELAYBOX_REMINDER_MIN_LEAD_S": "2"}
    with (
        RelayboxServer(tmp_path / "server", env=env, port=free_port()) as server,
        FakeWebPushService() as push_service,
        httpx.Client(base_url=server.wait_until_ready(), timeout=10) as http,
    ):
        url = str(http.base_url).rstrip("/")
        context = browser.new_context()
        context.grant_permissions(["notifications"], origin=url)
        try:
            page = context.new_page()
            become_the_phone(page, url)
            auth = {"Authorization": f"Bearer {create_token(page)}"}
            _, device_token = page.evaluate(IDENTITY)
            key = http.get("/v1/push/web-key").json()["application_server_key"]
            subscription = push_service.subscribe(application_server_key=key).subscription
            web_push = {
                "endpoint": subscription.endpoint,
                "p256dh": subscription.p256dh,
                "auth": subscription.auth,
            }
            http.patch(
                "/v1/devices/me",
                json={"web_push": web_push},
                headers={"Authorization": f"Bearer {device_token}"},
            )
            page.goto(f"{url}/app/icons/icon-192.png")  # the app is closed; its worker stays
            page.evaluate(CLOSE_ALL)

            at = int(time.time()) + LEAD_S
            set_up = http.post("/v1/reminders", json={"message": "Stretch", "at": at}, headers=auth)
            assert set_up.status_code == 201, set_up.text
            pushed = eventually(page, lambda: push_service.received, timeout=LEAD_S + 10)[0]
            assert time.time() >= at, "pushed before its time"
            assert push_service.received == [pushed]  # nothing when it was set
            message = pushed.json()
            assert message["type"] == "reminder" and "Stretch" not in pushed.payload.decode()

            cdp = context.new_cdp_session(page)
            registration = worker_registration(page, cdp, f"{url}/app/")
            cdp.send(
                "ServiceWorker.deliverPushMessage",
                {"origin": url, "registrationId": registration, "data": json.dumps(message)},
            )
            assert ["Reminder", "Stretch"] in eventually(page, lambda: page.evaluate(SHOWN))
        finally:
            context.close()
