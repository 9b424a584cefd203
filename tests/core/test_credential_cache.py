"""The verified-credential cache: bounded, short-lived, dropped by tag, and bypassed whenever it may
have missed a revocation; a revocation on one Core empties the cache of every Core sharing its
fan-out before the revoking call returns (in process) or as soon as Redis carries it."""

from __future__ import annotations

import base64
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
import redis.asyncio

from core.adapters.fanout.memory import MemoryFanout, MemorySubscription
from core.bootstrap import build_core
from core.clock import ManualClock
from core.context import Core, Tx
from core.credentials import CREDENTIALS_TOPIC, CredentialCache, revocation_message
from core.domain.keys import generate_keypair
from core.domain.secrets import digest, new_prefixed_id
from core.events import Deferred
from core.principal import Principal
from core.services.connector_grants import (
    ConnectorGrantCreate,
    create_connector_grant,
    revoke_connector_grant,
)
from core.services.devices import DeviceCreate, register_phone
from core.settings import explicit_settings
from oauth.tables import OAuthToken
from oauth.tokens import ACCESS_PREFIX, verify_access_token
from tests.services import REDIS_URL, unavailable

pytestmark = pytest.mark.anyio


def live_cache(clock: ManualClock, **options: float) -> tuple[CredentialCache, MemorySubscription]:
    cache = CredentialCache(clock, **options)  # type: ignore[arg-type]
    subscription = MemorySubscription()
    cache._subscription = subscription  # as ``follow`` does once subscribed
    return cache, subscription


def test_the_cache_is_bounded_and_forgets_the_least_recently_used_first() -> None:
    cache, _ = live_cache(ManualClock(), max_entries=3)
    for key in "abc":
        cache.put(key, key, epoch=cache.epoch, tags=[])
    assert cache.get("a") is not None  # a is used again: b is now the oldest
    cache.put("d", "d", epoch=cache.epoch, tags=[])
    assert len(cache) == 3
    assert cache.get("b") is None and all(cache.get(key) is not None for key in "acd")


def test_an_entry_lives_for_the_ttl_and_never_past_the_credentials_expiry() -> None:
    clock = ManualClock()
    cache, _ = live_cache(clock, ttl_s=30)
    cache.put("long", 1, epoch=cache.epoch, tags=[])
    cache.put("short", 2, epoch=cache.epoch, tags=[], expires_at=clock.now() + 10)
    clock.advance(10)
    assert cache.get("short") is None and cache.get("long") == (1, None)
    clock.advance(20)
    assert cache.get("long") is None and len(cache) == 0


def test_a_drop_forgets_what_carries_its_tags_and_a_read_from_before_it_cannot_be_put_back() -> None:
    cache, _ = live_cache(ManualClock())
    cache.put("k1", 1, epoch=cache.epoch, tags=["grant:g1", "otk:t1"])
    cache.put("k2", 2, epoch=cache.epoch, tags=["grant:g2"])
    read_started = cache.epoch
    cache.drop(["grant:g1"])
    assert cache.get("k1") is None and cache.get("k2") == (2, None)
    cache.put("k1", 1, epoch=read_started, tags=["grant:g1"])  # read before the revocation committed
    assert cache.get("k1") is None


def test_a_hit_asks_for_the_last_use_to_be_noted_at_most_once_a_minute() -> None:
    clock = ManualClock()
    cache, _ = live_cache(clock, ttl_s=600)
    noted: list[int] = []

    def note(at: int) -> Deferred:
        noted.append(at)
        return Deferred(note, {"at": at})

    cache.put("k", "v", epoch=cache.epoch, tags=[], note_use=note, used_at=int(clock.now()))
    assert cache.get("k") == ("v", None)
    clock.advance(60)
    hit = cache.get("k")
    assert hit is not None and hit[1] is not None and noted == [int(clock.now())]
    assert cache.get("k") == ("v", None)


def test_nothing_is_served_or_kept_unless_subscribed_and_nothing_was_lost() -> None:
    clock = ManualClock()
    cache = CredentialCache(clock)
    cache.put("k", 1, epoch=cache.epoch, tags=[])
    assert len(cache) == 0 and cache.get("k") is None  # not subscribed yet
    cache, subscription = live_cache(clock)
    cache.put("k", 1, epoch=cache.epoch, tags=[])
    subscription.overflowed = True
    assert cache.get("k") is None
    cache._hear(subscription, revocation_message([]))  # the listener catches up: forget everything
    assert not subscription.overflowed and len(cache) == 0
    cache.put("k", 1, epoch=cache.epoch, tags=[])
    subscription.overflowed, subscription.connected = True, False  # the Redis connection was lost
    assert cache.get("k") is None
    cache._hear(subscription, revocation_message([]))
    assert subscription.overflowed and cache.get("k") is None  # still bypassed until it resyncs
    subscription.connected = True
    cache._hear(subscription, "{}")  # Redis's RESYNC
    assert len(cache) == 0 and cache.live


async def test_a_revocation_published_by_another_replica_drops_the_tag() -> None:
    fanout = MemoryFanout()
    cache = CredentialCache(ManualClock())
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(cache.follow, fanout)
        await eventually(lambda: cache.live)
        cache.put("k", 1, epoch=cache.epoch, tags=["device:d1"])
        await fanout.publish(CREDENTIALS_TOPIC, revocation_message(["device:d1"]))
        with anyio.fail_after(5):
            while len(cache):
                await anyio.lowlevel.checkpoint()
        tasks.cancel_scope.cancel()
    assert not cache.live


# -- two Cores (replicas) sharing one fan-out ------------------------------------------------------


async def connector_token(core: Core) -> tuple[str, Principal, str]:
    """A phone's account with one connector grant: its access token, the phone and the grant id."""
    public = base64.b64encode(generate_keypair()[1]).decode()
    ip = f"10.9.{secrets.randbelow(256)}.{secrets.randbelow(254) + 1}"
    registered = await core.run(register_phone, Principal.anonymous(ip), body=DeviceCreate(public_key=public))
    phone = Principal.device(
        account_id=registered.account_id, device_id=registered.device_id, surface_kind="phone"
    )
    token = ACCESS_PREFIX + secrets.token_urlsafe(32)

    def issue(tx: Tx, _principal: Principal) -> str:
        grant = create_connector_grant(
            tx,
            Principal.system(),
            body=ConnectorGrantCreate(
                account_id=registered.account_id,
                client_id="client-1",
                client_name="assistant",
                scopes=["devices:read"],
                resource="http://127.0.0.1/mcp",
            ),
        )
        now = tx.now()
        tx.session.add(
            OAuthToken(
                token_id=new_prefixed_id("otk"),
                grant_id=grant.id,
                client_id="client-1",
                account_id=registered.account_id,
                access_hash=digest(token),
                scope="devices:read",
                resource="http://127.0.0.1/mcp",
                issued_at=now,
                access_expires_at=now + 3600,
            )
        )
        return grant.id

    grant_id = await core.run(issue, Principal.system())
    return token, phone, grant_id


async def eventually(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not condition():  # noqa: ASYNC110 (the state is the cache's: nothing to wait on)
            await anyio.sleep(0.01)


async def revoked_everywhere(here: Core, there: Core) -> None:
    """A token verified (and cached) on both replicas, its grant revoked on ``here``: ``there``
    refuses it as soon as the fan-out has carried the revocation."""
    await eventually(lambda: here.credentials.live and there.credentials.live)
    token, phone, grant_id = await connector_token(here)
    for core in (here, there, here, there):
        assert await verify_access_token(core, token) is not None
    assert len(here.credentials) == len(there.credentials) == 1
    await here.run(revoke_connector_grant, phone, grant_id=grant_id)
    assert await verify_access_token(here, token) is None  # this replica: before the call returned
    await eventually(lambda: len(there.credentials) == 0)
    assert await verify_access_token(there, token) is None


@pytest.fixture
async def two_cores(tmp_path: Path) -> AsyncIterator[tuple[Core, Core]]:
    """Two replicas on one SQLite file and one in-process fan-out."""
    settings = explicit_settings(data_dir=tmp_path / "data", database_url=f"sqlite:///{tmp_path / 'r.db'}")
    first, second = build_core(settings), build_core(settings)
    second.fanout = first.fanout
    async with first, second:
        yield first, second


async def test_a_grant_revoked_on_one_core_is_refused_by_the_other_sharing_its_fanout(
    two_cores: tuple[Core, Core],
) -> None:
    here, there = two_cores
    await revoked_everywhere(here, there)
    assert len(there.credentials) == 0  # in process the fan-out delivered before the call returned


@pytest.mark.redis
async def test_a_grant_revoked_on_one_replica_is_refused_by_another_through_redis(tmp_path: Path) -> None:
    admin = redis.asyncio.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        await admin.ping()
    except redis.RedisError as error:
        unavailable("Redis", error)
    finally:
        await admin.aclose()
    settings = explicit_settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'r.db'}",
        redis_url=REDIS_URL,
    )
    first, second = build_core(settings), build_core(settings)
    async with first, second:
        await revoked_everywhere(first, second)
