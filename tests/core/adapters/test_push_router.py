"""PushRouter over in-process senders: which sender a device's push goes to, and what it counts."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from core.adapters.push.base import (
    FCM,
    PUSH_DATA_LIMIT,
    STREAM,
    WEB_PUSH,
    WEB_PUSH_DATA_LIMIT,
    PushMessage,
    PushOutcome,
    PushTarget,
    WebPushSubscription,
)
from core.adapters.push.memory import MemoryPushSender
from core.adapters.push.router import PushRouter

pytestmark = pytest.mark.anyio

SUBSCRIPTION = {"endpoint": "https://push.example/p/1", "p256dh": "p256dh", "auth": "auth"}
MESSAGE = PushMessage("notify", {"seqId": "7"})
BOTH = PushTarget("both", fcm_token="token-1", registrations={WEB_PUSH: SUBSCRIPTION})
WEB_ONLY = PushTarget("web", registrations={WEB_PUSH: SUBSCRIPTION})
NEITHER = PushTarget("stream")


@pytest.fixture
def fcm() -> MemoryPushSender:
    return MemoryPushSender(FCM)


@pytest.fixture
def web_push() -> MemoryPushSender:
    return MemoryPushSender(WEB_PUSH, WebPushSubscription, WEB_PUSH_DATA_LIMIT)


async def test_a_device_registered_with_both_goes_to_the_first_sender_in_the_list(
    fcm: MemoryPushSender, web_push: MemoryPushSender
) -> None:
    assert await PushRouter([fcm, web_push]).send(BOTH, MESSAGE) is PushOutcome.SENT
    assert (fcm.received("both"), web_push.received("both")) == ([MESSAGE], [])

    assert await PushRouter([web_push, fcm]).send(BOTH, MESSAGE) is PushOutcome.SENT
    assert (fcm.received("both"), web_push.received("both")) == ([MESSAGE], [MESSAGE])


async def test_a_device_goes_to_the_sender_that_serves_it(
    fcm: MemoryPushSender, web_push: MemoryPushSender
) -> None:
    router = PushRouter([fcm, web_push])

    assert router.can_reach(WEB_ONLY)
    assert await router.send(WEB_ONLY, MESSAGE) is PushOutcome.SENT
    assert (fcm.pushes, web_push.received("web")) == ([], [MESSAGE])


@pytest.mark.parametrize("configured", ["none", "fcm only"])
async def test_a_device_no_sender_serves_has_no_route(fcm: MemoryPushSender, configured: str) -> None:
    router = PushRouter([] if configured == "none" else [fcm])
    target = NEITHER if configured == "none" else WEB_ONLY

    assert not router.can_reach(target)
    assert await router.send(target, MESSAGE) is PushOutcome.NO_ROUTE
    assert fcm.pushes == []
    assert router.outcomes[PushOutcome.NO_ROUTE.value] == 1


async def test_outcomes_are_counted_and_only_unregistered_calls_the_hook(fcm: MemoryPushSender) -> None:
    router = PushRouter([fcm])
    forgotten: list[tuple[str, str]] = []

    async def forget(device_id: str, service: str) -> None:
        forgotten.append((device_id, service))

    router.on_unregistered = forget
    fcm.answer("gone", PushOutcome.UNREGISTERED)
    fcm.answer("flaky", PushOutcome.FAILED)
    for device_id in ("ok", "gone", "flaky", "ok"):
        await router.send(PushTarget(device_id, fcm_token=f"token-{device_id}"), MESSAGE)

    assert router.outcomes == {"sent": 2, "unregistered": 1, "failed": 1, "no_route": 0}
    assert forgotten == [("gone", FCM)]


def test_senders_are_found_by_name(fcm: MemoryPushSender, web_push: MemoryPushSender) -> None:
    router = PushRouter([fcm, web_push], web_push_key="key")

    assert (router.sender(FCM), router.sender(WEB_PUSH), router.sender("apns")) == (fcm, web_push, None)
    assert router.web_push_key == "key"


def test_the_registrations_a_router_takes_are_those_of_its_senders(
    fcm: MemoryPushSender, web_push: MemoryPushSender
) -> None:
    router = PushRouter([fcm, web_push])

    assert router.registrations == {WEB_PUSH: WebPushSubscription}  # FCM's token is proved instead
    assert PushRouter([fcm]).registrations == {}


@pytest.mark.parametrize(
    ("target", "route", "limit"),
    [
        (BOTH, FCM, PUSH_DATA_LIMIT),
        (WEB_ONLY, WEB_PUSH, WEB_PUSH_DATA_LIMIT),
        (NEITHER, STREAM, PUSH_DATA_LIMIT),
    ],
)
def test_a_device_has_the_route_and_data_limit_of_the_sender_that_serves_it(
    fcm: MemoryPushSender, web_push: MemoryPushSender, target: PushTarget, route: str, limit: int
) -> None:
    router = PushRouter([fcm, web_push])

    assert (router.route(target), router.data_limit(target)) == (route, limit)


@pytest.mark.parametrize("names", [[FCM, FCM], [STREAM]])
def test_senders_need_distinct_names_other_than_stream(names: list[str]) -> None:
    with pytest.raises(ValueError, match="distinct names"):
        PushRouter([MemoryPushSender(name) for name in names])


def test_a_registration_of_other_than_text_fields_is_refused() -> None:
    class Numbered(BaseModel):
        endpoint: str
        port: int

    with pytest.raises(TypeError, match="str fields only"):
        PushRouter([MemoryPushSender("numbered", Numbered)])


async def test_aclose_closes_every_sender(fcm: MemoryPushSender, web_push: MemoryPushSender) -> None:
    await PushRouter([fcm, web_push]).aclose()

    assert fcm.closed and web_push.closed
