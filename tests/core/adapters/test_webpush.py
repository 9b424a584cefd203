"""WebPushSender against a fake push service over real HTTPS: real pywebpush encryption (aes128gcm),
VAPID, and the outbound policy it pushes through (the fake's host and CA allowed by explicit
settings, ``push_reach_settings``)."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from core.adapters.push.base import (
    PUSH_DATA_LIMIT,
    WEB_PUSH_DATA_LIMIT,
    PushMessage,
    PushOutcome,
    PushTarget,
    WebPushSubscription,
)
from core.adapters.push.webpush import WebPushSender
from tests.fakes.webpush_server import FakeWebPushService, b64url_encode, fake_push_outbound, web_push_target

pytestmark = pytest.mark.anyio

SUBJECT = "mailto:ops@relay.example"
TIMEOUT_S = 1.0
MESSAGE = PushMessage("approval_request", {"request_id": "r-42", "title": "Deploy?"}, high_priority=True)


@pytest.fixture(scope="module")
def vapid_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture(scope="module")
def vapid_pem(vapid_key: ec.EllipticCurvePrivateKey) -> str:
    return vapid_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()


@pytest.fixture
async def sender(vapid_pem: str) -> AsyncIterator[WebPushSender]:
    web_push = WebPushSender(vapid_pem, SUBJECT, outbound=fake_push_outbound(TIMEOUT_S))
    yield web_push
    await web_push.aclose()


@pytest.fixture
def refused_endpoint() -> Iterator[str]:
    # A bound port nobody listens on: connecting is refused for as long as the socket is held.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"https://127.0.0.1:{sock.getsockname()[1]}/push/nobody"


async def send(
    sender: WebPushSender, subscription: WebPushSubscription, message: PushMessage = MESSAGE
) -> PushOutcome:
    with anyio.fail_after(5):
        return await sender.send(web_push_target(subscription), message)


async def test_the_push_decrypts_to_the_compact_json_of_the_message_data(
    push_service: FakeWebPushService, sender: WebPushSender
) -> None:
    subscriber = push_service.subscribe()

    assert await send(sender, subscriber.subscription) is PushOutcome.SENT

    [push] = push_service.received
    assert push.payload == b'{"type":"approval_request","request_id":"r-42","title":"Deploy?"}'
    assert push.json() == MESSAGE.data()


async def test_the_ttl_header_carries_the_message_ttl(
    push_service: FakeWebPushService, sender: WebPushSender
) -> None:
    await send(sender, push_service.subscribe().subscription, PushMessage("sync", ttl_s=120))

    assert push_service.received[0].ttl == "120"


@pytest.mark.parametrize(("high_priority", "urgency"), [(True, "high"), (False, "normal")])
async def test_the_urgency_header_follows_the_message_priority(
    push_service: FakeWebPushService, sender: WebPushSender, high_priority: bool, urgency: str
) -> None:
    await send(
        sender, push_service.subscribe().subscription, PushMessage("sync", high_priority=high_priority)
    )

    assert push_service.received[0].urgency == urgency


async def test_the_vapid_token_is_signed_by_the_application_server_key_for_the_endpoint_origin(
    push_service: FakeWebPushService, sender: WebPushSender
) -> None:
    subscriber = push_service.subscribe(application_server_key=sender.application_server_key)

    assert await send(sender, subscriber.subscription) is PushOutcome.SENT

    [push] = push_service.received
    assert push.vapid_key == sender.application_server_key
    assert push.claims["aud"] == push_service.origin
    assert push.claims["sub"] == SUBJECT
    assert push_service.rejections == []


async def test_each_push_service_origin_gets_its_own_audience(
    push_service: FakeWebPushService, other_push_service: FakeWebPushService, sender: WebPushSender
) -> None:
    first, second = push_service.subscribe(), other_push_service.subscribe()

    for subscriber in (first, second, first):
        assert await send(sender, subscriber.subscription) is PushOutcome.SENT

    assert [push.claims["aud"] for push in push_service.received] == [push_service.origin] * 2
    assert [push.claims["aud"] for push in other_push_service.received] == [other_push_service.origin]
    assert push_service.rejections == other_push_service.rejections == []


async def test_a_signature_by_another_key_is_refused_and_is_a_failure(
    push_service: FakeWebPushService, sender: WebPushSender
) -> None:
    other_key = b64url_encode(b"\x04" + bytes(64))
    subscriber = push_service.subscribe(application_server_key=other_key)

    assert await send(sender, subscriber.subscription) is PushOutcome.FAILED
    assert push_service.rejections == ["vapid: k is not the subscription's application server key"]


async def test_a_device_without_a_subscription_has_no_route(
    push_service: FakeWebPushService, sender: WebPushSender
) -> None:
    assert await sender.send(PushTarget("d1"), MESSAGE) is PushOutcome.NO_ROUTE
    assert push_service.connections_accepted == 0


@pytest.mark.parametrize("size", [PUSH_DATA_LIMIT + 1, WEB_PUSH_DATA_LIMIT + 1])
async def test_a_message_a_push_body_cannot_hold_is_not_sent(
    push_service: FakeWebPushService, sender: WebPushSender, size: int
) -> None:
    message = _message_of_size(size)

    assert await send(sender, push_service.subscribe().subscription, message) is PushOutcome.FAILED
    assert push_service.connections_accepted == 0


async def test_the_largest_message_a_push_body_holds_is_sent(
    push_service: FakeWebPushService, sender: WebPushSender
) -> None:
    message = _message_of_size(WEB_PUSH_DATA_LIMIT)

    assert await send(sender, push_service.subscribe().subscription, message) is PushOutcome.SENT
    assert push_service.received[0].json() == message.data()


@pytest.mark.parametrize("status", [404, 410])
async def test_a_subscription_the_push_service_has_dropped_is_unregistered(
    push_service: FakeWebPushService, sender: WebPushSender, status: int
) -> None:
    subscriber = push_service.subscribe()
    push_service.answer(subscriber.push_id, status)

    assert await send(sender, subscriber.subscription) is PushOutcome.UNREGISTERED


@pytest.mark.parametrize("status", [400, 403, 413, 429, 500, 503])
async def test_other_refusals_are_failures(
    push_service: FakeWebPushService, sender: WebPushSender, status: int
) -> None:
    subscriber = push_service.subscribe()
    push_service.answer(subscriber.push_id, status)

    assert await send(sender, subscriber.subscription) is PushOutcome.FAILED


async def test_a_push_service_that_never_answers_times_out_as_a_failure(
    push_service: FakeWebPushService, sender: WebPushSender
) -> None:
    stalled, healthy = push_service.subscribe(), push_service.subscribe()
    push_service.stall(stalled.push_id)

    assert await send(sender, stalled.subscription) is PushOutcome.FAILED
    assert await send(sender, healthy.subscription) is PushOutcome.SENT


async def test_an_unreachable_push_service_is_a_failure(
    push_service: FakeWebPushService, sender: WebPushSender, refused_endpoint: str
) -> None:
    subscription = push_service.subscribe().subscription.model_copy(update={"endpoint": refused_endpoint})

    assert await send(sender, subscription) is PushOutcome.FAILED


async def test_a_malformed_subscription_is_a_failure_not_an_exception(
    push_service: FakeWebPushService, sender: WebPushSender
) -> None:
    subscription = push_service.subscribe().subscription.model_copy(
        update={"p256dh": b64url_encode(b"\x04" + bytes(64))}
    )

    assert await send(sender, subscription) is PushOutcome.FAILED
    assert push_service.received == []


async def test_one_connection_serves_many_pushes(
    push_service: FakeWebPushService, sender: WebPushSender
) -> None:
    subscriber = push_service.subscribe()

    for _ in range(3):
        assert await send(sender, subscriber.subscription) is PushOutcome.SENT

    assert push_service.connections_accepted == 1


async def test_logs_never_name_the_endpoint_or_the_payload(
    push_service: FakeWebPushService,
    sender: WebPushSender,
    refused_endpoint: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="core.adapters.push.webpush")
    secret = "secret-field-value"
    message = PushMessage("notify", {"title": secret})
    gone, failing = push_service.subscribe(), push_service.subscribe()
    push_service.answer(gone.push_id, 410)
    push_service.answer(failing.push_id, 500)
    refused = failing.subscription.model_copy(update={"endpoint": refused_endpoint})

    for subscription in (gone.subscription, failing.subscription, refused):
        await send(sender, subscription, message)
    await send(sender, gone.subscription, PushMessage("notify", {"title": secret * 500}))

    assert len([record for record in caplog.records if record.name == "core.adapters.push.webpush"]) == 4
    for secret_text in (secret, gone.push_id, failing.push_id, refused_endpoint, push_service.origin):
        assert secret_text not in caplog.text


@pytest.mark.parametrize("key_format", ["pem", "raw", "der"])
async def test_the_vapid_key_may_be_pem_raw_or_der(
    push_service: FakeWebPushService, vapid_key: ec.EllipticCurvePrivateKey, key_format: str
) -> None:
    encoded = {
        "pem": vapid_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode(),
        "raw": b64url_encode(vapid_key.private_numbers().private_value.to_bytes(32, "big")),
        "der": b64url_encode(vapid_key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption())),
    }[key_format]
    web_push = WebPushSender(encoded, SUBJECT, outbound=fake_push_outbound(TIMEOUT_S))
    subscriber = push_service.subscribe(application_server_key=web_push.application_server_key)
    try:
        assert await send(web_push, subscriber.subscription) is PushOutcome.SENT
    finally:
        await web_push.aclose()


@pytest.mark.parametrize("subject", ["ops@relay.example", "http://relay.example", ""])
def test_a_subject_that_is_not_a_mailto_or_https_url_is_refused(vapid_pem: str, subject: str) -> None:
    with pytest.raises(ValueError, match="RELAYBOX_VAPID_SUBJECT"):
        WebPushSender(vapid_pem, subject, outbound=fake_push_outbound(TIMEOUT_S))


def test_a_private_key_that_is_not_p256_is_refused() -> None:
    p384 = ec.generate_private_key(ec.SECP384R1())
    p384_pem = p384.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()

    for key in ("bm90IGEga2V5", p384_pem):
        with pytest.raises(ValueError, match="RELAYBOX_VAPID_PRIVATE_KEY"):
            WebPushSender(key, SUBJECT, outbound=fake_push_outbound(TIMEOUT_S))


async def test_aclose_before_any_push_and_twice_is_harmless(vapid_pem: str) -> None:
    web_push = WebPushSender(vapid_pem, SUBJECT, outbound=fake_push_outbound(TIMEOUT_S))

    with anyio.fail_after(5):
        await web_push.aclose()
        await web_push.aclose()


async def test_a_closed_sender_fails_instead_of_raising(
    push_service: FakeWebPushService, sender: WebPushSender
) -> None:
    subscriber = push_service.subscribe()
    assert await send(sender, subscriber.subscription) is PushOutcome.SENT
    await sender.aclose()

    assert await send(sender, subscriber.subscription) is PushOutcome.FAILED
    assert len(push_service.received) == 1


def _message_of_size(size: int) -> PushMessage:
    padding = size - PushMessage("notify", {"body": ""}).encoded_size()
    message = PushMessage("notify", {"body": "x" * padding})
    assert message.encoded_size() == size
    return message
