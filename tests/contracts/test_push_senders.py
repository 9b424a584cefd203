"""The push sender contract: one body for every sender (memory, FCM, web push), each against its
far end (the real SDKs over HTTP to tests/fakes' FakeFcm and FakeWebPushService). What each
service adds beyond this (priorities, retries, VAPID, encryption) is in tests/core/adapters."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import anyio
import pytest

from core.adapters.push.base import (
    FCM,
    WEB_PUSH,
    WEB_PUSH_DATA_LIMIT,
    PushMessage,
    PushOutcome,
    PushSender,
    PushTarget,
    WebPushSubscription,
)
from core.adapters.push.fcm import FcmPush
from core.adapters.push.memory import MemoryPushSender
from core.adapters.push.webpush import WebPushSender
from tests.fakes.fcm_server import QUOTA_EXCEEDED, UNREGISTERED, FakeFcm, make_service_account
from tests.fakes.webpush_server import FakeWebPushService, new_vapid_private_key, web_push_target

pytestmark = pytest.mark.anyio

TIMEOUT_S = 0.5
FCM_TOKEN = "registration-token-1"
ELSEWHERE = WebPushSubscription(endpoint="https://push.invalid/push/someone", p256dh="p256dh", auth="auth")
MESSAGE = PushMessage("approval_request", {"request_id": "r-42", "title": "Deploy?"}, high_priority=True)


@dataclass(frozen=True)
class FarEnd:
    """A sender and its far end, driven the same way whatever the service."""

    sender: PushSender
    served: PushTarget  # registered with the sender's service only
    elsewhere: PushTarget  # registered with another service only
    received: Callable[[], list[dict[str, str]]]  # the data of every message that reached the far end
    disown: Callable[[], None]  # the far end now says the served registration is gone
    fail: Callable[[], None]  # the far end now refuses pushes to the served registration


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "memory-web-push", "fcm", "webpush"])
async def far_end(request: pytest.FixtureRequest) -> AsyncIterator[FarEnd]:
    match request.param:
        case "memory" | "memory-web-push":
            far = _memory(FCM if request.param == "memory" else WEB_PUSH)
        case "fcm":
            far = _fcm(request.getfixturevalue("fcm"))
        case _:
            far = _webpush(request.getfixturevalue("push_service"))
    try:
        yield far
    finally:
        await far.sender.aclose()


def _memory(name: str) -> FarEnd:
    sender = (
        MemoryPushSender(FCM)
        if name == FCM
        else MemoryPushSender(name, WebPushSubscription, WEB_PUSH_DATA_LIMIT)
    )
    by_fcm, by_web_push = PushTarget("d1", fcm_token=FCM_TOKEN), web_push_target(ELSEWHERE)
    served, elsewhere = (by_fcm, by_web_push) if name == FCM else (by_web_push, by_fcm)
    return FarEnd(
        sender,
        served,
        elsewhere,
        received=lambda: [push.message.data() for push in sender.pushes if push.outcome is PushOutcome.SENT],
        disown=lambda: sender.answer("d1", PushOutcome.UNREGISTERED),
        fail=lambda: sender.answer("d1", PushOutcome.FAILED),
    )


def _fcm(fcm: FakeFcm) -> FarEnd:
    sender = FcmPush(make_service_account(fcm.origin), fcm_url=fcm.origin, timeout_s=TIMEOUT_S)
    return FarEnd(
        sender,
        PushTarget("d1", fcm_token=FCM_TOKEN),
        web_push_target(ELSEWHERE),
        received=lambda: [request.message["data"] for request in fcm.received],
        disown=lambda: fcm.fail(FCM_TOKEN, UNREGISTERED),
        fail=lambda: fcm.fail(FCM_TOKEN, QUOTA_EXCEEDED),  # a 429: refused at once, not retried
    )


def _webpush(service: FakeWebPushService) -> FarEnd:
    sender = WebPushSender(
        new_vapid_private_key().get_secret_value(), "mailto:ops@relay.example", timeout_s=TIMEOUT_S
    )
    subscriber = service.subscribe(application_server_key=sender.application_server_key)
    return FarEnd(
        sender,
        web_push_target(subscriber.subscription),
        PushTarget("d1", fcm_token=FCM_TOKEN),
        received=lambda: [push.json() for push in service.received],
        disown=lambda: service.answer(subscriber.push_id, 410),
        fail=lambda: service.answer(subscriber.push_id, 500),
    )


async def send(far: FarEnd, target: PushTarget, message: PushMessage = MESSAGE) -> PushOutcome:
    with anyio.fail_after(5):
        return await far.sender.send(target, message)


def message_of_size(size: int) -> PushMessage:
    padding = size - PushMessage("notify", {"body": ""}).encoded_size()
    message = PushMessage("notify", {"body": "x" * padding})
    assert message.encoded_size() == size
    return message


async def test_a_served_device_gets_exactly_the_message_data(far_end: FarEnd) -> None:
    assert far_end.sender.serves(far_end.served)

    assert await send(far_end, far_end.served) is PushOutcome.SENT
    assert far_end.received() == [MESSAGE.data()]


async def test_each_push_arrives_once_and_in_order(far_end: FarEnd) -> None:
    messages = [PushMessage("notify", {"seqId": str(n)}) for n in range(3)]

    for message in messages:
        assert await send(far_end, far_end.served, message) is PushOutcome.SENT
    assert far_end.received() == [message.data() for message in messages]


@pytest.mark.parametrize("registration", ["none", "another service"])
async def test_a_device_the_sender_does_not_serve_is_not_claimed(far_end: FarEnd, registration: str) -> None:
    target = PushTarget("d2") if registration == "none" else far_end.elsewhere

    assert not far_end.sender.serves(target)
    assert await send(far_end, target) is PushOutcome.NO_ROUTE
    assert far_end.received() == []


async def test_a_registration_the_far_end_disowns_is_unregistered(far_end: FarEnd) -> None:
    far_end.disown()

    assert await send(far_end, far_end.served) is PushOutcome.UNREGISTERED


async def test_a_failing_far_end_is_a_failure_not_an_exception(far_end: FarEnd) -> None:
    far_end.fail()

    assert await send(far_end, far_end.served) is PushOutcome.FAILED


async def test_the_largest_message_the_device_takes_is_sent_and_a_larger_one_fails(far_end: FarEnd) -> None:
    largest = message_of_size(far_end.sender.data_limit)

    assert await send(far_end, far_end.served, message_of_size(far_end.sender.data_limit + 1)) is (
        PushOutcome.FAILED
    )
    assert far_end.received() == []
    assert await send(far_end, far_end.served, largest) is PushOutcome.SENT
    assert far_end.received() == [largest.data()]


async def test_aclose_may_be_called_twice_and_a_closed_sender_fails_instead_of_raising(
    far_end: FarEnd,
) -> None:
    with anyio.fail_after(5):
        await far_end.sender.aclose()
        await far_end.sender.aclose()

    assert await send(far_end, far_end.served) is PushOutcome.FAILED
    assert far_end.received() == []


async def test_the_sender_is_named_for_the_registration_it_serves(far_end: FarEnd) -> None:
    assert far_end.served.registered_with(far_end.sender.name)
    assert not far_end.elsewhere.registered_with(far_end.sender.name)


async def test_what_a_device_registers_is_what_the_sender_finds_in_its_target(far_end: FarEnd) -> None:
    """A sender that takes a registration of its own is served by what its model validated: the
    fields a device gives on registering, stored as validated, come back in its PushTarget."""
    model, name = far_end.sender.registration, far_end.sender.name
    if model is None:
        assert name == FCM  # the one service registered otherwise: a proved token on the device row
        return
    fields = far_end.served.registrations[name]
    assert model.model_validate(fields).model_dump() == fields
