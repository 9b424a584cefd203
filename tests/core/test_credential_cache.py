"""The verified-credential cache: one entry point (``cached``) for every kind of bearer credential,
keyed by the credential's digest; bounded, short-lived, dropped by tag, and bypassed whenever it may
have missed a revocation; a revoked sender token, device credential or access token is refused at
once through it; a revocation on one Core empties the cache of every Core sharing its fan-out
before the revoking call returns (in process) or as soon as Redis carries it."""

from __future__ import annotations

import base64
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest
import redis.asyncio

from core.adapters.fanout.memory import MemoryFanout, MemorySubscription
from core.bootstrap import build_core
from core.clock import ManualClock
from core.credentials import CREDENTIALS_TOPIC, CredentialCache, Verification, revocation_message
from core.domain.keys import generate_keypair
from core.domain.secrets import digest, new_prefixed_id
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.events import Deferred
from core.runtime.tx import Tx
from core.services.auth import Accept, authenticated
from core.services.connector_grants import (
    ConnectorGrantCreate,
    create_connector_grant,
    revoke_connector_grant,
)
from core.services.devices import DeviceCreate, DeviceRegistered, disconnect_device, register_phone
from core.services.tokens import TokenCreate, create_sender_token, revoke_sender_token
from core.settings import explicit_settings
from oauth.bridge import AuthlibContext
from oauth.tables import OAuthToken
from oauth.tokens import ACCESS_PREFIX, find_token, revoke_token, verify_access_token
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


# -- the one entry point ------------------------------------------------------------------------

SECRET = "rfk_live_" + "s" * 32
KEPT = Verification("v", ("tok:t1",))


class Store:
    """A ``verify`` for ``cached`` that counts how often the store was asked."""

    def __init__(self, answer: Verification[Any] | None = KEPT, *, error: Exception | None = None) -> None:
        self.answer = answer
        self.error = error
        self.reads = 0
        self.during: Callable[[], None] = lambda: None  # what happens while the store is read

    async def __call__(self) -> Verification[Any] | None:
        self.reads += 1
        self.during()
        if self.error is not None:
            raise self.error
        return self.answer


async def test_cached_keys_by_digest_and_asks_the_store_once_while_it_keeps_the_answer() -> None:
    cache, _ = live_cache(ManualClock())
    store = Store()
    for _ in range(3):
        assert await cache.cached(str, SECRET, store, defer=no_defer) == "v"
    assert store.reads == 1
    assert list(cache._entries) == [digest(SECRET)]
    assert all(SECRET not in key and SECRET not in entry.digest for key, entry in cache._entries.items())
    cache.drop(["tok:t1"])  # revoked: the next call asks the store again
    assert await cache.cached(str, SECRET, store, defer=no_defer) == "v" and store.reads == 2


async def test_cached_keeps_nothing_the_store_refused_answered_untagged_or_raised() -> None:
    cache, _ = live_cache(ManualClock())
    for store in (Store(None), Store(Verification("pending")), Store(error=RelayError("invalid_token"))):
        for _ in range(2):
            with contextlib.suppress(RelayError):  # the store's refusal reaches the caller
                await cache.cached(str, SECRET, store, defer=no_defer)
        assert store.reads == 2 and len(cache) == 0


async def test_cached_asks_the_store_again_for_another_kind_or_one_the_caller_does_not_accept() -> None:
    cache, _ = live_cache(ManualClock())
    assert await cache.cached(str, SECRET, Store(), defer=no_defer) == "v"
    store = Store(Verification(1, ("tok:t1",)))
    assert await cache.cached(int, SECRET, store, defer=no_defer) == 1  # a str was kept: not taken
    assert await cache.cached(int, SECRET, store, defer=no_defer) == 1 and store.reads == 1
    assert await cache.cached(int, SECRET, store, defer=no_defer, accept=lambda n: n > 1) == 1
    assert store.reads == 2


async def test_cached_keeps_nothing_read_while_a_revocation_was_dropping_tags() -> None:
    cache, _ = live_cache(ManualClock())
    store = Store()
    store.during = lambda: cache.drop(["tok:t1"])  # committed while the store was being read
    assert await cache.cached(str, SECRET, store, defer=no_defer) == "v"
    assert len(cache) == 0


async def test_cached_hands_a_due_last_use_to_defer() -> None:
    clock = ManualClock()
    cache, _ = live_cache(clock, ttl_s=600)
    deferred: list[Deferred] = []
    noted = Deferred(record, {})
    store = Store(Verification("v", ("tok:t1",), note_use=lambda _at: noted, used_at=int(clock.now())))
    await cache.cached(str, SECRET, store, defer=deferred.append)
    await cache.cached(str, SECRET, store, defer=deferred.append)
    assert deferred == []
    clock.advance(60)
    await cache.cached(str, SECRET, store, defer=deferred.append)
    assert deferred == [noted] and store.reads == 1


def no_defer(_note: Deferred) -> None:
    raise AssertionError("no last use was due")


def record(_tx: Tx, _principal: Principal) -> None:
    pass


# -- every kind of credential, revoked through the one path -------------------------------------------


@pytest.fixture
async def running_core(tmp_path: Path) -> AsyncIterator[Core]:
    settings = explicit_settings(data_dir=tmp_path / "data", database_url=f"sqlite:///{tmp_path / 'c.db'}")
    async with build_core(settings) as core:
        await eventually(lambda: core.credentials.live)
        yield core


Check = Callable[[], Awaitable[object]]
Revoke = Callable[[], Awaitable[object]]


async def sender_token(
    core: Core, registered: DeviceRegistered, caller: Principal
) -> tuple[str, Check, Revoke]:
    phone = phone_of(registered)
    created = await core.run(create_sender_token, phone, body=TokenCreate(label="script"))

    async def check() -> object:
        return await authenticated(core, caller, token=created.token, accept=Accept.SENDER_TOKEN)

    return created.token, check, lambda: core.run(revoke_sender_token, phone, token_id=created.id)


async def device_credential(
    core: Core, registered: DeviceRegistered, caller: Principal
) -> tuple[str, Check, Revoke]:
    token = registered.device_token

    async def check() -> object:
        return await authenticated(core, caller, token=token, accept=Accept.DEVICE)

    return token, check, lambda: core.run(disconnect_device, phone_of(registered))


async def access_token(
    core: Core, _registered: DeviceRegistered, _caller: Principal
) -> tuple[str, Check, Revoke]:
    token, _, _ = await connector_token(core)

    async def check() -> object:
        verified = await verify_access_token(core, token)
        if verified is None:
            raise RelayError("invalid_token")
        return verified

    return token, check, lambda: core.run(revoke_access_token, Principal.system(), token=token)


def revoke_access_token(tx: Tx, _principal: Principal, *, token: str) -> None:
    """RFC 7009's revocation of an access token, as the revocation endpoint runs it."""
    context = cast(AuthlibContext, SimpleNamespace(tx=tx))
    found = find_token(context, token, "access_token")
    assert found is not None
    revoke_token(context, found)


@pytest.mark.parametrize("kind", [sender_token, device_credential, access_token])
async def test_every_credential_is_verified_once_kept_by_digest_and_refused_at_once_when_revoked(
    running_core: Core,
    monkeypatch: pytest.MonkeyPatch,
    kind: Callable[[Core, DeviceRegistered, Principal], Awaitable[tuple[str, Check, Revoke]]],
) -> None:
    core = running_core
    registered = await core.run(
        register_phone, Principal.anonymous("10.8.0.1"), body=DeviceCreate(public_key=public_key())
    )
    credential, check, revoke = await kind(core, registered, Principal.anonymous("10.8.0.2"))
    reads: list[str] = []
    run = core.run

    async def counted(op: Any, principal: Principal, /, *args: Any, **kw: Any) -> Any:
        reads.append(getattr(op, "__name__", ""))
        return await run(op, principal, *args, **kw)

    monkeypatch.setattr(core, "run", counted)
    for _ in range(3):
        await check()
    assert len([name for name in reads if name in {"_resolve", "check_access_token"}]) == 1
    assert digest(credential) in core.credentials._entries
    assert all(credential not in key for key in core.credentials._entries)
    await revoke()
    with pytest.raises(RelayError) as refused:
        await check()
    assert refused.value.code == "invalid_token"


def public_key() -> str:
    return base64.b64encode(generate_keypair()[1]).decode()


def phone_of(registered: DeviceRegistered) -> Principal:
    return Principal.device(
        account_id=registered.account_id, device_id=registered.device_id, surface_kind="phone"
    )


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
