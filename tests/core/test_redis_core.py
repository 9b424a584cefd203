"""Two replicas in one process: two Cores on one SQLite file and one Redis. A waiter on one Core
(a long poll, a /v1/sync stream) wakes when the other Core does what it waits for."""

from __future__ import annotations

import base64
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
import redis.asyncio

from core.adapters.fanout.redis import RedisFanout
from core.adapters.limits.redis import RedisRateLimiter
from core.bootstrap import build_core
from core.clock import ManualClock
from core.domain.envelope import seal
from core.domain.keys import generate_keypair
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.events import device_topic
from core.services.auth import Accept, authenticate
from core.services.delivery_warnings import not_connected
from core.services.device_list import list_devices
from core.services.devices import DeviceCreate, register_phone
from core.services.interactions import (
    Answer,
    InteractionCreate,
    InteractionOut,
    answer_interaction,
    answered_topic,
    create_interaction,
    poll_interaction,
)
from core.services.pairing import PairConfirm, PairInit, confirm_pairing, init_pairing
from core.services.relay import EnvelopeCreate, QueueItem, relay_envelope
from core.services.ring import NO_REGISTRATION, ring_phone
from core.services.stream import follow_queue
from core.services.tokens import TokenCreate, create_sender_token
from core.settings import explicit_settings
from tests.services import REDIS_URL, unavailable

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


@pytest.fixture
async def redis_admin() -> AsyncIterator[redis.asyncio.Redis]:
    """A client of the test Redis for looking on, or a skip (a failure under RELAYBOX_REQUIRE_SERVICES=1)."""
    client = redis.asyncio.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        try:
            await client.ping()
        except redis.RedisError as error:
            unavailable("Redis", error)
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def namespace() -> str:
    """Redis keys and channels of one test only (``RELAYBOX_REDIS_NAMESPACE``)."""
    return f"relaybox-test-{secrets.token_hex(6)}"


@pytest.fixture
async def replicas(
    tmp_path: Path, redis_admin: redis.asyncio.Redis, namespace: str
) -> AsyncIterator[tuple[Core, Core]]:
    settings = explicit_settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'relaybox.db'}",
        redis_url=REDIS_URL,
        redis_namespace=namespace,
        stream_keepalive_s=60,  # a stream re-reads the store only when woken
    )
    clock = ManualClock()
    first, second = build_core(settings, clock=clock), build_core(settings, clock=clock)
    async with first, second:
        yield first, second


@dataclass
class Account:
    ip: str  # a fresh address per test: the shared per-IP limits of other tests and runs stay apart
    phone: Principal
    phone_secret: bytes
    phone_public: str


async def new_account(core: Core) -> Account:
    ip = f"10.{secrets.randbelow(256)}.{secrets.randbelow(256)}.{secrets.randbelow(254) + 1}"
    secret, public = generate_keypair()
    public_b64 = base64.b64encode(public).decode()
    registered = await core.run(
        register_phone, Principal.anonymous(ip), body=DeviceCreate(public_key=public_b64, name="Pixel")
    )
    return Account(ip, await signed_in(core, ip, registered.device_token), secret, public_b64)


async def signed_in(core: Core, ip: str, token: str) -> Principal:
    return await core.run(
        authenticate, Principal.anonymous(ip), token=token, accept=Accept.SENDER_TOKEN | Accept.DEVICE
    )


async def subscribed(redis_admin: redis.asyncio.Redis, namespace: str, topic: str) -> None:
    """Wait until some replica holds a Redis subscription to ``topic``, plus a moment for the waiter
    to read the store and settle into its wait."""
    with anyio.fail_after(5):
        while not (await redis_admin.pubsub_numsub(f"{namespace}:fanout:{topic}"))[0][1]:  # noqa: ASYNC110
            await anyio.sleep(0.01)  # (the state is in Redis: nothing here to wait on)
    await anyio.sleep(0.3)


async def test_the_build_picks_the_redis_adapters_when_a_redis_url_is_set(
    replicas: tuple[Core, Core],
) -> None:
    for core in replicas:
        assert isinstance(core.limiter, RedisRateLimiter) and isinstance(core.fanout, RedisFanout)


async def test_a_long_poll_on_one_replica_returns_when_the_phone_answers_through_another(
    replicas: tuple[Core, Core], redis_admin: redis.asyncio.Redis, namespace: str
) -> None:
    here, there = replicas
    account = await new_account(here)
    token = await here.run(create_sender_token, account.phone, body=TokenCreate(label="script"))
    sender = await signed_in(here, account.ip, token.token)
    asked = await here.run(create_interaction, sender, body=InteractionCreate(question="ok?"), ip=account.ip)
    polled: list[InteractionOut] = []
    returned = anyio.Event()

    async with anyio.create_task_group() as tasks:

        async def poll() -> None:
            polled.append(await here.run(poll_interaction, sender, interaction_id=asked.id, wait=45))
            returned.set()

        tasks.start_soon(poll)
        await subscribed(redis_admin, namespace, answered_topic(asked.id))
        with anyio.fail_after(5):  # far inside the poll's 45 s: woken, not timed out
            await there.run(
                answer_interaction, account.phone, interaction_id=asked.id, body=Answer(choice_index=1)
            )
            await returned.wait()
    assert (polled[0].status, polled[0].choice_index) == ("answered", 1)


async def test_a_stream_on_one_replica_wakes_when_an_envelope_is_relayed_through_another(
    replicas: tuple[Core, Core], redis_admin: redis.asyncio.Redis, namespace: str
) -> None:
    here, there = replicas
    account = await new_account(there)
    _, computer_public = generate_keypair()
    init = PairInit(public_key=base64.b64encode(computer_public).decode(), surface_kind="cli", name="laptop")
    code = await here.run(init_pairing, Principal.anonymous(account.ip), body=init)
    confirm = PairConfirm(code=code.code, public_key=account.phone_public)
    await there.run(confirm_pairing, account.phone, body=confirm, ip=account.ip)
    computer = await signed_in(here, account.ip, code.device_token)
    received: list[QueueItem] = []
    woken = anyio.Event()

    async with anyio.create_task_group() as tasks:

        async def follow() -> None:
            async for item in follow_queue(here, computer, after=0):
                if isinstance(item, QueueItem):
                    received.append(item)
                    woken.set()
                    return

        tasks.start_soon(follow)
        await subscribed(redis_admin, namespace, device_topic(code.device_id))
        blob = base64.b64encode(seal(b"copied text", account.phone_secret, computer_public)).decode()
        with anyio.fail_after(5):  # far inside the 60 s keep-alive: woken by the relay's fan-out
            accepted = await there.run(
                relay_envelope,
                account.phone,
                body=EnvelopeCreate(to=code.device_id, type="clipboard", blob=blob),
            )
            await woken.wait()
    assert received[0].seq == accepted.seq and received[0].type == "clipboard"


async def test_a_stream_open_on_one_replica_is_presence_on_the_other_for_devices_and_ring(
    replicas: tuple[Core, Core], redis_admin: redis.asyncio.Redis, namespace: str
) -> None:
    """The phone has no push service: it is reachable only through its open stream, wherever that is."""
    here, there = replicas
    account = await new_account(there)
    token = await there.run(
        create_sender_token, account.phone, body=TokenCreate(label="script", scope="phone:control")
    )
    sender = await signed_in(there, account.ip, token.token)
    phone_id = account.phone.require_device()

    async def phone_reachable() -> bool:
        (phone,) = (await there.run(list_devices, account.phone)).devices
        return phone.reachable

    assert not await phone_reachable()
    rang = await there.run(ring_phone, sender, device_id=phone_id, ip=account.ip)
    not_connected_warning = not_connected("ring", there.settings.ring_duration_s)
    assert not_connected_warning in (rang.warnings or [])

    async with anyio.create_task_group() as tasks:

        async def follow() -> None:
            async for _ in follow_queue(here, account.phone, after=0):
                pass

        tasks.start_soon(follow)
        await subscribed(redis_admin, namespace, device_topic(phone_id))
        assert await phone_reachable()
        rang = await there.run(ring_phone, sender, device_id=phone_id, ip=account.ip)
        assert NO_REGISTRATION in (rang.warnings or [])
        assert not_connected_warning not in (rang.warnings or [])
        tasks.cancel_scope.cancel()
    with anyio.fail_after(5):  # the stream closed: its replica unsubscribes
        while await phone_reachable():  # noqa: ASYNC110 - the state is in Redis
            await anyio.sleep(0.01)


async def test_a_stopped_core_leaves_no_redis_connection_open(
    tmp_path: Path, redis_admin: redis.asyncio.Redis, namespace: str
) -> None:
    """Both adapters connect under the URL's client name; after the Core stops, Redis lists none."""
    settings = explicit_settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'relaybox.db'}",
        redis_url=f"{REDIS_URL}{'&' if '?' in REDIS_URL else '?'}client_name={namespace}",
        redis_namespace=namespace,
    )
    core = build_core(settings, clock=ManualClock())

    async def named_connections() -> int:
        return sum(1 for client in await redis_admin.client_list() if client["name"] == namespace)

    async with core:
        await new_account(core)  # the limiter charges the registration's per-IP limit
        async with core.fanout.subscribe("device:x"):
            await core.fanout.publish("device:x", "{}")
        assert await named_connections() >= 2  # the limiter's, the publisher's (and pub/sub's)
    assert await named_connections() == 0
