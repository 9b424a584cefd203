"""The push sender contract: one body for every sender (memory, FCM, web push), each against its
far end (the real SDKs over HTTP to tests/fakes' FakeFcm and FakeWebPushService). What each
service adds beyond this (priorities, retries, VAPID, encryption) is in tests/core/adapters.

A push service added as issue 17 says one is added runs the same body: ``UnifiedPushSender``, a
UnifiedPush-like sender written here and nowhere else (its name, its registration model, its data
limit, serves/send/aclose), against ``FakeDistributor`` over real HTTP. Put in the sender list as
bootstrap does, it carries a send end to end: a phone registers with it through ``/v1/devices``
and a ``/v1/send`` reaches its far end, with no table, request field or service written for it."""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

import anyio
import httpx
import pytest
from pydantic import BaseModel, ConfigDict, Field

from app.assembly import create_app
from core.adapters.push.base import (
    FCM,
    PUSH_DATA_LIMIT,
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
from core.bootstrap import PUSH_SENDERS, build_core
from core.domain.envelope import open_envelope
from core.settings import Settings
from tests.fakes.fcm_server import QUOTA_EXCEEDED, UNREGISTERED, FakeFcm, make_service_account
from tests.fakes.local_http import LocalHttpServer, Reply, Request
from tests.fakes.webpush_server import (
    FakeWebPushService,
    fake_push_outbound,
    new_vapid_private_key,
    web_push_target,
)
from tests.helpers import b64, create_token, error_code, pair_computer, register_phone
from tests.live import serve_in_thread

pytestmark = pytest.mark.anyio

TIMEOUT_S = 1.0
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


# -- a push service added by one module: UnifiedPush-like, defined only here --------------------

UNIFIED_PUSH = "unifiedpush"


class UnifiedPushEndpoint(BaseModel):
    """What a device registers: the endpoint its UnifiedPush distributor gave it."""

    model_config = ConfigDict(extra="forbid")
    endpoint: str = Field(pattern=r"^https?://", max_length=2048)


class UnifiedPushSender:
    """POSTs the message data as JSON to the device's endpoint (RFC 8030's TTL and Urgency headers;
    a real one would also encrypt, and keep endpoints to the distributors' hosts). 404 or 410:
    the registration is gone."""

    name = UNIFIED_PUSH
    registration = UnifiedPushEndpoint
    data_limit = PUSH_DATA_LIMIT

    def __init__(self, *, timeout_s: float = 10.0) -> None:
        self._client = httpx.AsyncClient(timeout=timeout_s)
        self._closed = False

    def serves(self, target: PushTarget) -> bool:
        return target.registered_with(self.name)

    async def send(self, target: PushTarget, message: PushMessage) -> PushOutcome:
        registration = target.registrations.get(self.name)
        if registration is None:
            return PushOutcome.NO_ROUTE
        if self._closed or message.encoded_size() > self.data_limit:
            return PushOutcome.FAILED
        headers = {"TTL": str(message.ttl_s), "Urgency": "high" if message.high_priority else "normal"}
        body = json.dumps(message.data(), separators=(",", ":"))
        try:
            response = await self._client.post(registration["endpoint"], content=body, headers=headers)
        except httpx.HTTPError:
            return PushOutcome.FAILED
        if response.status_code in (404, 410):
            return PushOutcome.UNREGISTERED
        return PushOutcome.SENT if response.is_success else PushOutcome.FAILED

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._client.aclose()


class FakeDistributor(LocalHttpServer):
    """The far end: endpoints on 127.0.0.1 that keep what they receive or answer a set status."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._received: list[Request] = []
        self._answers: dict[str, int] = {}

    def endpoint(self) -> str:
        return f"{self.origin}/up/{secrets.token_urlsafe(8)}"

    def answer(self, endpoint: str, status: int) -> None:
        with self._lock:
            self._answers[endpoint.removeprefix(self.origin)] = status

    @property
    def received(self) -> list[Request]:
        with self._lock:
            return list(self._received)

    def handle(self, request: Request) -> Reply:
        with self._lock:
            status = self._answers.get(request.path, 201)
            if status == 201:
                self._received.append(request)
        return Reply(status)


@pytest.fixture
def distributor() -> Iterator[FakeDistributor]:
    with FakeDistributor() as fake:
        yield fake


def _unified_push(distributor: FakeDistributor) -> FarEnd:
    endpoint = distributor.endpoint()
    return FarEnd(
        UnifiedPushSender(timeout_s=TIMEOUT_S),
        PushTarget("d1", registrations={UNIFIED_PUSH: {"endpoint": endpoint}}),
        PushTarget("d1", fcm_token=FCM_TOKEN),
        received=lambda: [push.json() for push in distributor.received],
        disown=lambda: distributor.answer(endpoint, 410),
        fail=lambda: distributor.answer(endpoint, 500),
    )


# -- the contract ----------------------------------------------------------------------------


@pytest.fixture(params=["memory", "memory-web-push", "fcm", "webpush", UNIFIED_PUSH])
async def far_end(request: pytest.FixtureRequest) -> AsyncIterator[FarEnd]:
    match request.param:
        case "memory" | "memory-web-push":
            far = _memory(FCM if request.param == "memory" else WEB_PUSH)
        case "fcm":
            far = _fcm(request.getfixturevalue("fcm"))
        case "webpush":
            far = _webpush(request.getfixturevalue("push_service"))
        case _:
            far = _unified_push(request.getfixturevalue("distributor"))
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
        new_vapid_private_key().get_secret_value(),
        "mailto:ops@relay.example",
        outbound=fake_push_outbound(TIMEOUT_S),
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


# -- the added service, end to end -----------------------------------------------------------


def arrived(distributor: FakeDistributor, timeout_s: float = 5.0) -> list[Request]:
    """What reached the far end, once something has (the push leaves after the send's commit)."""
    deadline = time.monotonic() + timeout_s
    while not distributor.received and time.monotonic() < deadline:
        time.sleep(0.01)
    return distributor.received


def test_a_service_added_to_the_sender_list_carries_a_send_from_registration_to_its_far_end(
    settings: Settings, distributor: FakeDistributor
) -> None:
    core = build_core(settings, senders=(*PUSH_SENDERS, lambda _settings: UnifiedPushSender()))
    try:
        with serve_in_thread(create_app(core=core)) as url, httpx.Client(base_url=url) as http:
            schemas = http.get("/openapi.json").json()["components"]["schemas"]
            assert set(schemas["PushRegistrations"]["properties"]) == {WEB_PUSH, UNIFIED_PUSH}
            bad = {"public_key": b64(bytes(32)), "push_registrations": {UNIFIED_PUSH: {"endpoint": "x"}}}
            refused = http.post("/v1/devices", json=bad)
            assert refused.status_code == 400 and error_code(refused) == "invalid_body"
            assert (
                refused.json()["error"]["details"]["errors"][0]["field"]
                == "push_registrations.unifiedpush.endpoint"
            )

            endpoint = distributor.endpoint()
            phone = register_phone(http, push_registrations={UNIFIED_PUSH: {"endpoint": endpoint}})
            assert http.get("/v1/devices/me", headers=phone.auth).json()["push"] == UNIFIED_PUSH
            pair_computer(http, phone)  # a second device, served over its stream
            token = create_token(http, phone)["token"]
            sent = http.post(
                "/v1/send", json={"message": "hello"}, headers={"Authorization": f"Bearer {token}"}
            )
            assert sent.status_code == 200, sent.text

            [push] = arrived(distributor)
            assert push.path == endpoint.removeprefix(distributor.origin)
            assert push.header("Urgency") == "high"
            data = push.json()
            assert (data["type"], data["msgId"]) == ("notification", sent.json()["id"])
            plaintext = open_envelope(
                base64.b64decode(data["payload"]), phone.secret_key, core.keys.public_key
            )
            assert json.loads(plaintext)["message"] == "hello"
    finally:
        core.engine.dispose()
