"""DELETE /v1/notifications/{sequence_id} over real HTTP: the selected devices receive a sealed
notification_clear by a send's path, the caller pays a send's limits, a malformed sequence or
selector is refused with its code, an unknown sequence is harmless (200), an old phone app is 426,
and a browser phone woken only by web push gets the clear from its queue rather than a push."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.assembly import create_app
from core.bootstrap import build_core
from core.clock import ManualClock
from core.runtime.core import Core
from core.services.capability import UNKNOWN_BUILD_WARNING
from core.settings import Settings
from tests.core.api.test_notification_content import send
from tests.core.test_push_delivery import eventually
from tests.fakes.webpush_server import FakeWebPushService, push_reach_settings
from tests.helpers import FakeDevice, create_token, error_code, pair_computer, queued_payloads, register_phone
from tests.live import serve_in_thread


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The shared settings, able to push to the fake push service on loopback."""
    return settings.model_copy(update=push_reach_settings())


@pytest.fixture
def tight(settings: Settings, clock: ManualClock) -> Iterator[tuple[Core, httpx.Client]]:
    """A server whose phones need app build 5 to clear and whose tokens may send 3 times a minute."""
    update = {"min_build_notification_clear": 5, "limit_token_burst": 3}
    core = build_core(settings.model_copy(update=update), clock=clock)
    with serve_in_thread(create_app(core=core)) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield core, client
    core.engine.dispose()


def clear(http: httpx.Client, caller: dict[str, str], sequence_id: str, **params: str) -> httpx.Response:
    return http.delete(f"/v1/notifications/{sequence_id}", params=params, headers=caller)


def test_a_clear_reaches_every_device_sealed_in_its_documented_shape(
    http: httpx.Client, core: Core, clock: ManualClock, phone: FakeDevice, caller: dict[str, str]
) -> None:
    computer = pair_computer(http, phone)
    send(http, caller, sequence_id="deploy-42")
    response = clear(http, caller, "deploy-42")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "sequence_id": "deploy-42",
        "delivered_to": [
            {"device_id": phone.device_id, "type": "phone"},
            {"device_id": computer.device_id, "type": "cli"},
        ],
        "warnings": [UNKNOWN_BUILD_WARNING],  # the fixture's phone never reported its app build
    }
    [sent] = queued_payloads(core, phone, "notification")
    for device in (phone, computer):
        [payload] = queued_payloads(core, device, "notification_clear")
        assert list(payload) == ["type", "sequence_id", "at"]
        assert payload["type"] == "notification_clear" and payload["sequence_id"] == sent["sequence_id"]
        assert payload["sequence_id"].startswith("tok_") and payload["sequence_id"].endswith(":deploy-42")
        assert payload["at"] == int(clock.now())


def test_a_message_id_clears_like_a_sequence_and_an_unknown_one_is_harmless(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    sent = send(http, caller)
    assert clear(http, caller, sent["sequence_id"]).json()["sequence_id"] == sent["id"]
    never_sent = clear(http, caller, "never.sent~1")
    assert never_sent.status_code == 200 and never_sent.json()["sequence_id"] == "never.sent~1"
    [notification] = queued_payloads(core, phone, "notification")
    sender = notification["sequence_id"].partition(":")[0]
    assert [p["sequence_id"] for p in queued_payloads(core, phone, "notification_clear")] == [
        notification["sequence_id"],  # the notification's own: its sender and id
        f"{sender}:never.sent~1",
    ]


def test_one_senders_sequence_is_out_of_another_senders_reach(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    """Token B sending or clearing "deploy-42" names its own deploy-42, never token A's: the phone
    sees two sequences, and B's clear names B's."""
    other = {"Authorization": f"Bearer {create_token(http, phone, label='other')['token']}"}
    send(http, caller, sequence_id="deploy-42", message="A: building")
    send(http, other, sequence_id="deploy-42", message="B: replaces A's?")
    assert clear(http, other, "deploy-42").status_code == 200
    by_a, by_b = queued_payloads(core, phone, "notification")
    [cleared] = queued_payloads(core, phone, "notification_clear")
    assert by_a["sequence_id"].endswith(":deploy-42") and by_b["sequence_id"].endswith(":deploy-42")
    assert by_a["sequence_id"] != by_b["sequence_id"]
    assert cleared["sequence_id"] == by_b["sequence_id"]
    for payload in (by_a, by_b, cleared):  # nothing a sender sends is a tag the app keeps for itself
        assert ":" in payload["sequence_id"]


def test_the_device_selector_works_as_a_sends(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    computer = pair_computer(http, phone)
    only_laptop = clear(http, caller, "s1", device="laptop,fridge")
    assert only_laptop.json()["delivered_to"] == [{"device_id": computer.device_id, "type": "cli"}]
    assert only_laptop.json()["warnings"] == ["device: nothing matches 'fridge'"]
    assert queued_payloads(core, phone, "notification_clear") == []
    nothing = clear(http, caller, "s1", device="fridge")
    assert nothing.status_code == 400 and error_code(nothing) == "no_matching_device"
    malformed = clear(http, caller, "s1", device=",".join(f"d{n}" for n in range(21)))
    assert malformed.status_code == 400 and error_code(malformed) == "invalid_device"


@pytest.mark.parametrize("sequence_id", ["a%20b", "x" * 65, "%C3%A9t%C3%A9", "a%23b", "a%3Fb"])
def test_a_malformed_sequence_is_400(http: httpx.Client, caller: dict[str, str], sequence_id: str) -> None:
    response = clear(http, caller, sequence_id)
    assert response.status_code == 400 and error_code(response) == "invalid_sequence_id", response.text


def test_only_a_sender_token_clears(http: httpx.Client, phone: FakeDevice, caller: dict[str, str]) -> None:
    missing = http.delete("/v1/notifications/s1")
    assert missing.status_code == 401 and error_code(missing) == "missing_token"
    as_device = http.delete("/v1/notifications/s1", headers=phone.auth)  # a device credential is not one
    assert as_device.status_code == 401 and error_code(as_device) == "invalid_token"
    token_id = next(t["id"] for t in http.get("/v1/tokens", headers=phone.auth).json()["tokens"])
    assert http.delete(f"/v1/tokens/{token_id}", headers=phone.auth).status_code in (200, 204)
    revoked = clear(http, caller, "s1")
    assert revoked.status_code == 401 and error_code(revoked) == "invalid_token"


def test_a_clear_is_charged_to_the_send_limits(tight: tuple[Core, httpx.Client]) -> None:
    _, http = tight
    phone = register_phone(http, app_build=5)
    caller = {"Authorization": f"Bearer {create_token(http, phone)['token']}"}
    sent = http.post("/v1/send", json={"message": "m"}, headers=caller)
    first = clear(http, caller, "s1")
    assert first.status_code == 200, first.text
    assert int(first.headers["x-ratelimit-remaining"]) == int(sent.headers["x-ratelimit-remaining"]) - 1
    assert clear(http, caller, "s1").status_code == 200
    limited = clear(http, caller, "s1")
    assert limited.status_code == 429 and error_code(limited) == "rate_limit_exceeded"
    assert http.post("/v1/send", json={"message": "m"}, headers=caller).status_code == 429  # one budget


def test_a_phone_app_too_old_to_clear_is_426_unless_the_clear_skips_it(
    tight: tuple[Core, httpx.Client],
) -> None:
    _, http = tight
    phone = register_phone(http, app_build=4)
    pair_computer(http, phone)
    caller = {"Authorization": f"Bearer {create_token(http, phone)['token']}"}
    outdated = clear(http, caller, "s1")
    assert outdated.status_code == 426 and error_code(outdated) == "phone_app_outdated"
    assert outdated.json()["error"]["details"] == {"app_build": 4, "minimum": 5}
    assert clear(http, caller, "s1", device="desktop").status_code == 200
    assert http.patch("/v1/devices/me", json={"app_build": 5}, headers=phone.auth).status_code == 200
    assert clear(http, caller, "s1").status_code == 200


def test_a_browser_phone_is_pushed_the_notification_but_finds_the_clear_in_its_queue(
    http: httpx.Client, core: Core, push_service: FakeWebPushService
) -> None:
    phone = register_phone(http, device_type="web", app_build=3)
    assert core.push.web_push_key is not None
    subscription = push_service.subscribe(application_server_key=core.push.web_push_key).subscription
    web_push: dict[str, Any] = subscription.model_dump()
    assert (
        http.patch("/v1/devices/me", json={"web_push": web_push}, headers=phone.auth).json()["push"]
        == "web_push"
    )
    caller = {"Authorization": f"Bearer {create_token(http, phone)['token']}"}
    send(http, caller, sequence_id="deploy-42")
    [pushed] = eventually(lambda: push_service.received)
    assert pushed.json()["type"] == "notification"
    assert clear(http, caller, "deploy-42").status_code == 200
    [queued] = queued_payloads(core, phone, "notification_clear")
    assert queued["sequence_id"] == queued_payloads(core, phone, "notification")[0]["sequence_id"]
    time.sleep(0.5)  # a push would have left at once, after the commit
    assert len(push_service.received) == 1
