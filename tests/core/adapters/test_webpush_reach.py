"""Web push under the outbound policy, with the default hosts: a push service's name (resolved here
to the fake on 127.0.0.1 by a StaticResolver, never by the real DNS) is reached at the address
that was checked, its certificate checked for that name; any other host, any address that is not
allowed and any redirect are not followed, and the fake sees nothing of them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from core.adapters.outbound.client import OutboundClient
from core.adapters.outbound.reach import Reach
from core.adapters.outbound.resolver import StaticResolver
from core.adapters.push.base import PushMessage, PushOutcome, WebPushSubscription
from core.adapters.push.webpush import WebPushSender
from core.domain.outbound import WEB_PUSH_HOSTS
from tests.fakes.tls import ca_file
from tests.fakes.webpush_server import FakeWebPushService, new_vapid_private_key, web_push_target

pytestmark = pytest.mark.anyio

MESSAGE = PushMessage("sync", {"n": "1"})
NAMES = {
    "fcm.googleapis.com": ["127.0.0.1"],
    "web.push.apple.com": ["127.0.0.1"],
    "push.test": ["127.0.0.1"],  # not a push service's host
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def sender_with(reach: Reach, names: dict[str, list[str]] | None = None) -> WebPushSender:
    outbound = OutboundClient(
        StaticResolver(names or NAMES), reach, timeout_s=2.0, user_agent="test", keep_alive=True
    )
    return WebPushSender(
        new_vapid_private_key().get_secret_value(), "mailto:ops@x.example", outbound=outbound
    )


@pytest.fixture
async def sender() -> AsyncIterator[WebPushSender]:
    """The default hosts; private addresses allowed and the run's CA trusted, so that a push
    service's name resolved to the fake can be reached at all."""
    built = await sender_with(Reach(allow_private=True, ca_file=ca_file(), hosts=WEB_PUSH_HOSTS))
    yield built
    await built.aclose()


def on_host(service: FakeWebPushService, host: str, push_id: str | None = None) -> WebPushSubscription:
    subscriber = service.subscribe()
    endpoint = f"https://{host}:{service.port}/push/{push_id or subscriber.push_id}"
    return subscriber.subscription.model_copy(update={"endpoint": endpoint})


async def send(sender: WebPushSender, subscription: WebPushSubscription) -> PushOutcome:
    with anyio.fail_after(10):
        return await sender.send(web_push_target(subscription), MESSAGE)


@pytest.mark.parametrize("host", ["fcm.googleapis.com", "web.push.apple.com"])
async def test_a_push_service_name_is_reached_with_its_certificate_checked_for_that_name(
    push_service: FakeWebPushService, sender: WebPushSender, host: str
) -> None:
    subscription = on_host(push_service, host)
    assert await send(sender, subscription) is PushOutcome.SENT
    [push] = push_service.received
    assert push.claims["aud"] == f"https://{host}:{push_service.port}"  # the URL's origin, not the address


async def test_a_host_that_is_not_a_push_service_is_never_reached_and_its_registration_is_dropped(
    push_service: FakeWebPushService, sender: WebPushSender
) -> None:
    for host in ("push.test", "127.0.0.1", "localhost"):
        assert await send(sender, on_host(push_service, host)) is PushOutcome.UNREGISTERED, host
    plain_http = on_host(push_service, "fcm.googleapis.com").model_copy(
        update={"endpoint": f"http://fcm.googleapis.com:{push_service.port}/push/x"}
    )
    assert await send(sender, plain_http) is PushOutcome.UNREGISTERED
    assert push_service.connections_accepted == 0


async def test_a_push_service_name_that_resolves_to_a_private_address_is_not_reached(
    push_service: FakeWebPushService,
) -> None:
    strict = await sender_with(Reach(ca_file=ca_file(), hosts=WEB_PUSH_HOSTS))
    mixed = await sender_with(
        Reach(ca_file=ca_file(), hosts=WEB_PUSH_HOSTS),
        {"fcm.googleapis.com": ["2606:4700::1111", "127.0.0.1"]},  # one private address refuses the name
    )
    try:
        for built in (strict, mixed):
            assert await send(built, on_host(push_service, "fcm.googleapis.com")) is PushOutcome.FAILED
    finally:
        await strict.aclose()
        await mixed.aclose()
    assert push_service.connections_accepted == 0


async def test_a_certificate_for_another_name_is_refused(push_service: FakeWebPushService) -> None:
    untrusted = await sender_with(Reach(allow_private=True, hosts=WEB_PUSH_HOSTS))  # public CAs only
    try:
        assert await send(untrusted, on_host(push_service, "fcm.googleapis.com")) is PushOutcome.FAILED
    finally:
        await untrusted.aclose()
    assert push_service.received == []


async def test_a_redirect_is_not_followed(push_service: FakeWebPushService, sender: WebPushSender) -> None:
    target = push_service.subscribe()
    moved = push_service.subscribe()
    redirect_to = f"https://fcm.googleapis.com:{push_service.port}/push/{target.push_id}"
    push_service.answer(moved.push_id, 307, location=redirect_to)
    assert (
        await send(sender, on_host(push_service, "fcm.googleapis.com", moved.push_id)) is PushOutcome.FAILED
    )
    assert push_service.received == []
