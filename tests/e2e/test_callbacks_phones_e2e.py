"""Answer callbacks with both reference phones against a real ``relaybox serve``: whether the virtual
phone (``relaybox phone answer``) or the web phone in real Chromium answers, the caller's HTTPS
receiver is POSTed the answer, signed (verified with the standardwebhooks package); the virtual
phone's typed reply rides in it, is then read, and never reaches the server's output or its
database files in plaintext."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser

from tests.browser import watched
from tests.e2e import test_typed_replies_e2e as typed
from tests.e2e.conftest import TRACEBACK, Cli, RelayboxServer
from tests.e2e.test_phone_ops_e2e import Phone, ok
from tests.e2e.web_phone import become_the_phone, create_token
from tests.fakes.webhook_receiver import WebhookReceiver, wait_until

pytestmark = pytest.mark.e2e

TYPED = "after the backup — ü"
phone = typed.phone  # the registered virtual phone and its caller (a fixture, found here by name)


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[WebhookReceiver]:
    with WebhookReceiver(tmp_path) as running:
        yield running


def callback_env(receiver: WebhookReceiver) -> dict[str, str]:
    """The receiver is on loopback, with a certificate from its own CA."""
    return {"RELAYBOX_CALLBACKS_ALLOW_PRIVATE": "true", "RELAYBOX_CALLBACKS_CA_FILE": str(receiver.ca_file)}


@pytest.fixture
def relaybox_process(tmp_path: Path, receiver: WebhookReceiver) -> Iterator[RelayboxServer]:
    with RelayboxServer(tmp_path / "server", callback_env(receiver)) as server:
        server.wait_until_ready()
        yield server
    assert TRACEBACK not in server.stderr(), server.stderr()


def delivered(http: httpx.Client, interaction_id: str, **headers: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        shown = http.get(f"/v1/interactions/{interaction_id}", params={"wait": 0}, headers=headers).json()
        return dict(shown) if shown["callback"]["state"] == "delivered" else None

    return wait_until(probe)


def test_the_virtual_phones_answer_and_typed_reply_reach_the_callback(
    cli: Cli, phone: Phone, relaybox_process: RelayboxServer, receiver: WebhookReceiver
) -> None:
    body = {"question": "Deploy?", "allow_text": True, "callback_url": receiver.url("/cli", host="127.0.0.1")}
    asked = phone.post("/v1/interactions", body)
    assert asked.status_code == 201, asked.text
    interaction_id, secret = asked.json()["id"], asked.json()["callback_secret"]
    ok(cli.run("phone", "answer", interaction_id, "1", "--text", TYPED, "--state", phone.state))
    (delivery,) = receiver.wait_for("/cli", 1)
    event = delivery.verified(secret)
    assert event["type"] == "interaction.answered"
    assert (event["data"]["choice_index"], event["data"]["text"]) == (1, TYPED)
    later = delivered(phone.http, interaction_id)  # the callback took the text
    assert "text" not in later and later["text_already_read"] is True
    assert TYPED not in typed.database_bytes(relaybox_process)
    assert TYPED not in relaybox_process.stdout() + relaybox_process.stderr()


def test_the_web_phones_answer_reaches_the_callback(
    tmp_path: Path, browser: Browser, receiver: WebhookReceiver
) -> None:
    with RelayboxServer(tmp_path / "web", callback_env(receiver)) as server:
        url = server.wait_until_ready()
        context = browser.new_context(viewport={"width": 390, "height": 844})
        try:
            page = context.new_page()
            watch = watched(page, url)
            become_the_phone(page, url)
            auth = {"Authorization": f"Bearer {create_token(page)}"}
            with httpx.Client(base_url=url, timeout=30, trust_env=False) as http:
                body = {
                    "question": "Rotate the keys?",
                    "choices": ["Rotate", "Later"],
                    "callback_url": receiver.url("/web", host="127.0.0.1"),
                }
                asked = http.post("/v1/interactions", json=body, headers=auth)
                assert asked.status_code == 201, asked.text
                entry = page.locator("li.kind-question", has_text="Rotate the keys?")
                entry.get_by_role("button", name="Later").click()
                (delivery,) = receiver.wait_for("/web", 1)
                event = delivery.verified(asked.json()["callback_secret"])
                assert (event["type"], event["data"]["id"], event["data"]["choice_index"]) == (
                    "interaction.answered",
                    asked.json()["id"],
                    1,
                )
                assert delivered(http, asked.json()["id"], **auth)["callback"]["attempts"] == 1
            problems = watch.problems()
        finally:
            context.close()
    assert problems == [], problems
    assert TRACEBACK not in server.stderr(), server.stderr()
