"""Driving the web app as the phone in Chromium, for the web-phone end-to-end tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
from playwright.sync_api import CDPSession, Page

from core.domain.secrets import SENDER_TOKEN_PATTERN
from tests.fakes.webpush_server import FakeWebPushService

NOTIFICATIONS = "navigator.serviceWorker.ready.then(r => r.getNotifications())"
SHOWN = f"{NOTIFICATIONS}.then(ns => ns.map(n => [n.title, n.body]))"
CLOSE_ALL = f"{NOTIFICATIONS}.then(ns => ns.forEach(n => n.close()))"
IDENTITY = (
    "import('/app/store.js').then(() => globalThis.relayboxStore.load()).then(i => [i.deviceId, i.token])"
)


def eventually(page: Page, check: Callable[[], Any], timeout: float = 15.0) -> Any:
    """``check()`` once it is truthy; waits through the page, so Playwright delivers events meanwhile."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "not within the time allowed"
        page.wait_for_timeout(100)
    return found


def become_the_phone(page: Page, server: str) -> None:
    page.goto(f"{server}/app/")
    page.get_by_label("Name this device").fill("Web Phone")
    page.get_by_role("button", name="This is my phone").click()
    page.locator("#phone").wait_for(state="visible")
    assert page.locator("#phone-name").inner_text() == "Web Phone"
    page.locator("#stream-state", has_text="connected").wait_for()


def enter_code(page: Page, code: str) -> None:
    page.get_by_label("Six-digit code shown on the computer or the assistant's page").fill(code)
    page.get_by_role("button", name="Confirm code").click()


def create_token(page: Page, *, may_ring: bool = False) -> str:
    page.get_by_label("Label").fill("cron")
    if may_ring:
        page.get_by_label("May ring this phone (phone:control)").check()
    page.get_by_role("button", name="Create token").click()
    page.locator("#new-token").wait_for(state="visible")
    token = page.locator("#new-token-value").inner_text()
    assert SENDER_TOKEN_PATTERN.fullmatch(token), token
    assert (
        page.locator("#curl-line")
        .inner_text()
        .endswith(f'-d "Backup done" {page.url.split("/app/")[0]}/v1/send')
    )
    page.get_by_role("button", name="Revoke cron").wait_for()
    return token


def worker_registration(page: Page, cdp: CDPSession, scope: str) -> str:
    registrations: list[dict[str, Any]] = []
    cdp.on(
        "ServiceWorker.workerRegistrationUpdated", lambda event: registrations.extend(event["registrations"])
    )
    cdp.send("ServiceWorker.enable")
    found = eventually(
        page, lambda: [r for r in registrations if r["scopeURL"] == scope and not r["isDeleted"]]
    )
    return str(found[0]["registrationId"])


def subscribe_on(push_service: FakeWebPushService, http: httpx.Client, device_token: str) -> None:
    """Hand the phone a web-push subscription on the fake push service, made with the server's
    published key, as ``pushManager.subscribe`` would (headless Chromium reaches no real one)."""
    key = http.get("/v1/push/web-key").json()["application_server_key"]
    subscription = push_service.subscribe(application_server_key=key).subscription
    web_push = {"endpoint": subscription.endpoint, "p256dh": subscription.p256dh, "auth": subscription.auth}
    patched = http.patch(
        "/v1/devices/me", json={"web_push": web_push}, headers={"Authorization": f"Bearer {device_token}"}
    )
    assert patched.json()["push"] == "web_push", patched.text
