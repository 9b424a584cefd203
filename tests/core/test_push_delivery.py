"""Push through the whole core: FCM registrations proved by reg_challenge, envelopes pushed to the
phone inline or as notify, web push for web apps, and dead registrations cleared."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlmodel import Session, col, select
from starlette.testclient import TestClient

from app.assembly import create_app
from core.bootstrap import build_core
from core.clock import ManualClock
from core.domain.envelope import open_envelope, seal
from core.runtime.core import Core
from core.settings import Settings
from core.store.tables import QueuedEnvelope
from tests.fakes.fcm_server import INTERNAL, UNREGISTERED, FakeFcm, make_service_account
from tests.fakes.webpush_server import FakeWebPushService, new_vapid_private_key, push_reach_settings
from tests.helpers import FakeDevice, error_code, pair_computer, register_phone

T = TypeVar("T")
FCM_TOKEN = "fcm-registration-token-of-the-phone"


def eventually(probe: Callable[[], T | None], timeout: float = 5.0) -> T:
    """Wait (bounded) for a background push to reach the fake far end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError("the push did not arrive in time")


@pytest.fixture
def push_core(settings: Settings, clock: ManualClock, fcm: FakeFcm, tmp_path: Path) -> Iterator[Core]:
    credentials = tmp_path / "service-account.json"
    credentials.write_text(json.dumps(make_service_account(fcm.origin)))
    configured = settings.model_copy(
        update={
            "fcm_credentials_file": credentials,
            "fcm_url": fcm.origin,
            "vapid_private_key": new_vapid_private_key(),
            "push_timeout_s": 2.0,
            **push_reach_settings(),  # the fake push service is on loopback
        }
    )
    built = build_core(configured, clock=clock)
    yield built
    built.engine.dispose()


@pytest.fixture
def http(push_core: Core) -> Iterator[TestClient]:
    with TestClient(create_app(core=push_core)) as client:
        yield client


def messages_to(fcm: FakeFcm, token: str) -> list[dict[str, Any]]:
    return [request.message for request in fcm.received if request.registration == token]


def register_fcm_phone(http: TestClient, fcm: FakeFcm) -> FakeDevice:
    phone = register_phone(http, fcm_token=FCM_TOKEN)
    challenge = eventually(lambda: messages_to(fcm, FCM_TOKEN))[0]
    data = challenge["data"]
    assert data["type"] == "reg_challenge"
    assert challenge["android"]["priority"] == "high"
    proof = {"registration_id": data["registrationId"], "nonce": data["nonce"]}
    response = http.post("/v1/devices/me/push-registration", json=proof, headers=phone.auth)
    assert response.status_code == 200 and response.json()["push"] == "fcm"
    return phone


def test_an_fcm_token_is_used_only_after_the_phone_echoes_its_challenge(
    http: TestClient, fcm: FakeFcm
) -> None:
    phone = register_phone(http, fcm_token=FCM_TOKEN)
    challenge = eventually(lambda: messages_to(fcm, FCM_TOKEN))[0]["data"]
    assert http.get("/v1/devices/me", headers=phone.auth).json()["push"] == "stream"
    wrong = {"registration_id": challenge["registrationId"], "nonce": "guess"}
    response = http.post("/v1/devices/me/push-registration", json=wrong, headers=phone.auth)
    assert response.status_code == 400 and error_code(response) == "invalid_registration"
    right = {"registration_id": challenge["registrationId"], "nonce": challenge["nonce"]}
    assert (
        http.post("/v1/devices/me/push-registration", json=right, headers=phone.auth).json()["push"] == "fcm"
    )


def test_a_challenge_expires(http: TestClient, fcm: FakeFcm, clock: ManualClock, push_core: Core) -> None:
    phone = register_phone(http, fcm_token=FCM_TOKEN)
    challenge = eventually(lambda: messages_to(fcm, FCM_TOKEN))[0]["data"]
    clock.advance(push_core.settings.reg_challenge_ttl_s)
    proof = {"registration_id": challenge["registrationId"], "nonce": challenge["nonce"]}
    assert error_code(http.post("/v1/devices/me/push-registration", json=proof, headers=phone.auth)) == (
        "invalid_registration"
    )


def test_a_relayed_clipboard_reaches_the_phone_inline_over_fcm(http: TestClient, fcm: FakeFcm) -> None:
    phone = register_fcm_phone(http, fcm)
    computer = pair_computer(http, phone)
    blob = seal(b'{"type":"clipboard","text":"hi"}', computer.secret_key, phone.public_key)
    body = {"to": phone.device_id, "type": "clipboard", "blob": base64.b64encode(blob).decode()}
    accepted = http.post("/v1/envelopes", json=body, headers=computer.auth).json()
    message = eventually(
        lambda: [m for m in messages_to(fcm, FCM_TOKEN) if m["data"]["type"] == "clipboard"]
    )[0]
    assert message["data"]["msgId"] == accepted["msg_id"]
    assert message["android"]["priority"] == "high"
    inline = base64.b64decode(message["data"]["payload"])
    assert open_envelope(inline, phone.secret_key, computer.public_key) == b'{"type":"clipboard","text":"hi"}'


def test_an_envelope_too_big_for_fcm_goes_as_notify_with_its_seq(http: TestClient, fcm: FakeFcm) -> None:
    phone = register_fcm_phone(http, fcm)
    computer = pair_computer(http, phone)
    blob = seal(b"x" * 5000, computer.secret_key, phone.public_key)
    body = {"to": phone.device_id, "type": "clipboard", "blob": base64.b64encode(blob).decode()}
    accepted = http.post("/v1/envelopes", json=body, headers=computer.auth).json()
    message = eventually(lambda: [m for m in messages_to(fcm, FCM_TOKEN) if m["data"]["type"] == "notify"])[0]
    assert message["data"] == {"type": "notify", "msgId": accepted["msg_id"], "seqId": str(accepted["seq"])}


@pytest.mark.parametrize(("also", "route"), [("nothing", "stream"), ("a web-push subscription", "web_push")])
def test_an_unregistered_answer_clears_that_registration_alone(
    http: TestClient, fcm: FakeFcm, push_core: Core, push_service: FakeWebPushService, also: str, route: str
) -> None:
    """FCM says the phone's token is gone: the token is dropped; a web-push subscription the phone
    also has stays, and becomes its route."""
    phone = register_fcm_phone(http, fcm)
    if also != "nothing":
        assert push_core.push.web_push_key is not None
        subscription = push_service.subscribe(application_server_key=push_core.push.web_push_key).subscription
        patched = http.patch(
            "/v1/devices/me", json={"web_push": subscription.model_dump()}, headers=phone.auth
        )
        assert patched.json()["push"] == "fcm"
    computer = pair_computer(http, phone)
    fcm.fail(FCM_TOKEN, UNREGISTERED)
    blob = seal(b"{}", computer.secret_key, phone.public_key)
    body = {"to": phone.device_id, "type": "clipboard", "blob": base64.b64encode(blob).decode()}
    assert http.post("/v1/envelopes", json=body, headers=computer.auth).status_code == 202
    eventually(lambda: http.get("/v1/devices/me", headers=phone.auth).json()["push"] == route)


def test_a_failing_push_service_never_fails_the_request(http: TestClient, fcm: FakeFcm) -> None:
    phone = register_fcm_phone(http, fcm)
    computer = pair_computer(http, phone)
    fcm.stall(FCM_TOKEN)
    blob = seal(b"{}", computer.secret_key, phone.public_key)
    body = {"to": phone.device_id, "type": "clipboard", "blob": base64.b64encode(blob).decode()}
    started = time.monotonic()
    assert http.post("/v1/envelopes", json=body, headers=computer.auth).status_code == 202
    assert time.monotonic() - started < 1.0  # the stalled push runs in the background


def test_a_web_app_gets_token_updates_woken_by_web_push(
    http: TestClient, push_core: Core, push_service: FakeWebPushService
) -> None:
    phone = register_phone(http)
    web_app = pair_computer(http, phone, surface_kind="pwa", name="browser")
    key = push_core.push.web_push_key
    assert key is not None
    subscriber = push_service.subscribe(application_server_key=key)
    subscription = subscriber.subscription
    web_push = {"endpoint": subscription.endpoint, "p256dh": subscription.p256dh, "auth": subscription.auth}
    assert (
        http.patch("/v1/devices/me", json={"web_push": web_push}, headers=web_app.auth).json()["push"]
        == "web_push"
    )
    http.post("/v1/tokens", json={"label": "cron"}, headers=phone.auth).raise_for_status()
    received = eventually(lambda: push_service.received)[0]
    assert received.json()["type"] == "notify" and received.json()["seqId"]
    assert push_service.rejections == []


@pytest.mark.parametrize(
    ("priority", "android"), [("min", "normal"), ("low", "normal"), ("default", "high"), ("urgent", "high")]
)
def test_a_notification_goes_inline_to_the_phone_at_its_priority(
    http: TestClient, fcm: FakeFcm, push_core: Core, priority: str, android: str
) -> None:
    phone = register_fcm_phone(http, fcm)
    token = http.post("/v1/tokens", json={"label": "t"}, headers=phone.auth).json()["token"]
    sent = http.post(
        "/v1/send",
        json={"message": "hello", "priority": priority},
        headers={"Authorization": f"Bearer {token}"},
    ).json()
    message = eventually(
        lambda: [m for m in messages_to(fcm, FCM_TOKEN) if m["data"]["type"] == "notification"]
    )[0]
    assert message["android"]["priority"] == android
    assert message["data"]["msgId"] == sent["id"]
    payload = open_envelope(
        base64.b64decode(message["data"]["payload"]), phone.secret_key, push_core.keys.public_key
    )
    assert json.loads(payload)["message"] == "hello"


@pytest.mark.parametrize("fault", ["server error", "no answer"])
def test_a_failing_push_service_leaves_the_request_the_registration_and_the_queue_intact(
    http: TestClient, fcm: FakeFcm, push_core: Core, fault: str
) -> None:
    """FCM answering 500 (after the SDK's retries) or never answering (the push timeout): the caller
    still gets 202 at once, the push counts as failed, the phone keeps its registration, and the
    envelope stays queued for the phone's next fetch."""
    phone = register_fcm_phone(http, fcm)
    computer = pair_computer(http, phone)
    if fault == "server error":
        fcm.fail(FCM_TOKEN, INTERNAL)
    else:
        fcm.stall(FCM_TOKEN)
    failed_before = push_core.push.outcomes["failed"]
    blob = seal(b"{}", computer.secret_key, phone.public_key)
    body = {"to": phone.device_id, "type": "clipboard", "blob": base64.b64encode(blob).decode()}
    started = time.monotonic()
    accepted = http.post("/v1/envelopes", json=body, headers=computer.auth)
    assert accepted.status_code == 202 and time.monotonic() - started < 1.0
    eventually(lambda: push_core.push.outcomes["failed"] > failed_before, timeout=30)
    assert http.get("/v1/devices/me", headers=phone.auth).json()["push"] == "fcm"
    with Session(push_core.engine) as session:
        queued = session.exec(
            select(QueuedEnvelope).where(col(QueuedEnvelope.seq) == accepted.json()["seq"])
        ).all()
    assert [row.recipient_device_id for row in queued] == [phone.device_id]
