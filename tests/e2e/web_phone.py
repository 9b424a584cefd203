"""Driving the web app as the phone in Chromium, for the web-phone end-to-end tests."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Browser, BrowserContext, CDPSession, Page

from core.domain.secrets import SENDER_TOKEN_PATTERN
from tests.e2e.conftest import RelayboxServer
from tests.fakes.webpush_server import FakeWebPushService, push_reach_env
from tests.reliability.instances import free_port

NOTIFICATIONS = "navigator.serviceWorker.ready.then(r => r.getNotifications())"
SHOWN = f"{NOTIFICATIONS}.then(ns => ns.map(n => [n.title, n.body]))"
CLOSE_ALL = f"{NOTIFICATIONS}.then(ns => ns.forEach(n => n.close()))"
IDENTITY = (
    "import('/app/store.js').then(() => globalThis.relayboxStore.load()).then(i => [i.deviceId, i.token])"
)
# The phone's identity as text (its keys as byte lists), and back into another browser's IndexedDB:
# the same phone in a second browser, as when it runs in two tabs or two installs.
EXPORT_IDENTITY = """import('/app/store.js').then(() => globalThis.relayboxStore.load())
  .then(i => JSON.stringify(i, (k, v) => v instanceof Uint8Array ? {bytes: Array.from(v)} : v))"""
IMPORT_IDENTITY = """text => import('/app/store.js').then(() => globalThis.relayboxStore.save(
  JSON.parse(text, (k, v) => v && Array.isArray(v.bytes) ? new Uint8Array(v.bytes) : v)))"""
# A phone's screen: its size in CSS pixels, touch, and a mobile viewport.
PHONE_SCREEN: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "has_touch": True,
    "is_mobile": True,
}


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


def show_view(page: Page, name: str) -> None:
    """Open one of the phone's views (Inbox, Pair, Tokens, Assistants, Settings) from its tab bar."""
    page.get_by_role("navigation", name="Views").get_by_role("link", name=name).click()
    page.locator(f"#view-{name.lower()}").wait_for(state="visible")


def enter_code(page: Page, code: str) -> None:
    show_view(page, "Pair")
    page.get_by_label("Six-digit code shown on the computer or the assistant's page").fill(code)
    page.get_by_role("button", name="Confirm code").click()


def create_token(page: Page, *, may_ring: bool = False) -> str:
    """Create a sender token in the Tokens view, then go back to the inbox."""
    show_view(page, "Tokens")
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
    show_view(page, "Inbox")
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


@dataclass(frozen=True)
class ClosedWebPhone:
    """A web phone whose app was opened once, paired and subscribed to web push, then closed: what
    reaches it now goes through the server's push (to ``push_service``) and its service worker."""

    url: str
    http: httpx.Client
    push_service: FakeWebPushService
    context: BrowserContext
    page: Page  # on a page of the app's origin outside its scope: the worker stays, the app is closed
    auth: dict[str, str]  # a sender token's Authorization header
    phone_id: str
    device_token: str
    cdp: CDPSession
    registration: str  # the worker's, for ServiceWorker.deliverPushMessage

    def deliver(self, message: dict[str, Any], shown: Callable[[], Any]) -> Any:
        """Hand ``message`` (a push the server made) to the worker until ``shown()`` holds, and return
        it; again if it does not (a delivery can be lost while Chromium stops an idle worker, as a
        push service would retry), three times at most."""
        data = {"origin": self.url, "registrationId": self.registration, "data": json.dumps(message)}
        for attempt in range(3):
            self.cdp.send("ServiceWorker.deliverPushMessage", data)
            try:
                return eventually(self.page, shown, timeout=5.0)
            except AssertionError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")


@contextmanager
def closed_web_phone(
    tmp_path: Path, browser: Browser, *, env: Mapping[str, str] | None = None, may_ring: bool = False
) -> Iterator[ClosedWebPhone]:
    """A ``relaybox serve`` (with ``env``, and able to push to the fake on loopback), a fake push
    service, and a ``ClosedWebPhone`` on them."""
    with (
        RelayboxServer(
            tmp_path / "server", env=push_reach_env() | dict(env or {}), port=free_port()
        ) as server,
        FakeWebPushService() as push_service,
        httpx.Client(base_url=server.wait_until_ready(), timeout=10) as http,
    ):
        url = str(http.base_url).rstrip("/")
        context = browser.new_context()
        context.grant_permissions(["notifications"], origin=url)
        try:
            page = context.new_page()
            become_the_phone(page, url)
            auth = {"Authorization": f"Bearer {create_token(page, may_ring=may_ring)}"}
            phone_id, device_token = page.evaluate(IDENTITY)
            subscribe_on(push_service, http, device_token)
            page.goto(f"{url}/app/icons/icon-192.png")  # the app is closed; its worker stays
            page.evaluate(CLOSE_ALL)
            cdp = context.new_cdp_session(page)
            registration = worker_registration(page, cdp, f"{url}/app/")
            yield ClosedWebPhone(
                url, http, push_service, context, page, auth, phone_id, device_token, cdp, registration
            )
        finally:
            context.close()
