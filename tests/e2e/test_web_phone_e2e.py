"""The web app as a person's phone, in real Chromium against a real ``relaybox serve``: set up as the
phone (keys made in the browser), pair a CLI computer (``relaybox pair``) and see the same safety
number on both, create a sender token, and receive a ``/v1/send`` notification — shown from the
open page's stream, and by the service worker from a web push: the server's real RFC 8291 message
(pywebpush, to a fake push service that decrypts it) handed to the worker with the DevTools
protocol's ``ServiceWorker.deliverPushMessage``, the envelope inside opened with the browser's key."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page

from tests.browser import watched
from tests.e2e.conftest import Cli, RelayboxServer
from tests.e2e.web_phone import (
    CLOSE_ALL,
    IDENTITY,
    SHOWN,
    become_the_phone,
    create_token,
    enter_code,
    eventually,
    subscribe_on,
    worker_registration,
)
from tests.fakes.webpush_server import FakeWebPushService, push_reach_env

pytestmark = pytest.mark.e2e


@pytest.fixture
def relaybox_process(tmp_path: Path) -> Iterator[RelayboxServer]:
    """The shared fixture's server, able to push to the fake push service on loopback."""
    with RelayboxServer(tmp_path / "server", env=push_reach_env()) as server:
        server.wait_until_ready()
        yield server


CODE_LINE = re.compile(r"^pairing code: ([0-9]{6})$")
SAFETY_LINE = re.compile(r"^safety number: ((?:[0-9]{5} ){11}[0-9]{5})$", re.MULTILINE)


def pair_the_cli_computer(page: Page, cli: Cli) -> tuple[str, str]:
    pairing = cli.start("pair", "--name", "laptop", "--timeout", "60")
    code = pairing.wait_for_line(CODE_LINE)[1]
    enter_code(page, code)
    on_page = page.locator("#safety-number").inner_text()
    finished = pairing.finish()
    assert finished.returncode == 0, finished
    found = SAFETY_LINE.search(finished.stdout)
    assert found, finished.stdout
    return on_page, found[1]


def test_a_browser_is_the_phone_pairs_a_cli_computer_and_shows_a_curl_notification(
    cli: Cli, browser: Browser
) -> None:
    server = cli.server_url
    context = browser.new_context()
    context.grant_permissions(["notifications"], origin=server)
    try:
        page = context.new_page()
        watch = watched(page, server)
        become_the_phone(page, server)
        on_page, on_computer = pair_the_cli_computer(page, cli)
        assert on_page == on_computer
        token = create_token(page)

        with httpx.Client(base_url=server, timeout=10) as http:
            sent = http.post(
                "/v1/send",
                json={"title": "Backup", "message": "Backup done"},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert sent.status_code == 200, sent.text
            entry = page.locator("#inbox li.kind-notification", has_text="Backup done")
            entry.wait_for()
            assert entry.locator(".note-title").inner_text() == "Backup"
            assert ["Backup", "Backup done"] in eventually(page, lambda: page.evaluate(SHOWN))

            with FakeWebPushService() as push_service:
                _, device_token = page.evaluate(IDENTITY)
                # From here only the worker can show anything: the app page (and its stream) is closed,
                # and the tab shows a file in the worker's scope instead.
                page.evaluate(CLOSE_ALL)
                problems = watch.problems()  # the app page's (the image shown next has its own)
                page.goto(f"{server}/app/icons/icon-192.png")
                subscribe_on(push_service, http, device_token)
                sent = http.post(
                    "/v1/send",
                    json={"title": "Push", "message": "Through the worker"},
                    headers={"Authorization": f"Bearer {token}"},
                )
                assert sent.status_code == 200, sent.text
                pushed = eventually(page, lambda: push_service.received)[0]
                assert push_service.rejections == []
        message = pushed.json()
        assert message["type"] == "notification" and "Through the worker" not in pushed.payload.decode()

        assert page.evaluate(SHOWN) == []
        cdp = context.new_cdp_session(page)
        registration = worker_registration(page, cdp, f"{server}/app/")
        cdp.send(
            "ServiceWorker.deliverPushMessage",
            {"origin": server, "registrationId": registration, "data": json.dumps(message)},
        )
        assert ["Push", "Through the worker"] in eventually(page, lambda: page.evaluate(SHOWN))
    finally:
        context.close()
    assert problems == [], problems
