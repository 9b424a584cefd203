"""The subscribing half of the Redis fan-out: one pub/sub connection per process, shared by every
local subscription (``RedisFanout.subscribe`` hands out its subscriptions).

The connection is served by a supervisor task: a reader dispatches messages to the local
subscriptions (``MemorySubscription``: the same buffer and overflow rules as memory) and a writer
brings the connection's channels in line with the local subscriptions (reference counted:
SUBSCRIBE for the first local subscriber of a channel, UNSUBSCRIBE after the last). ``subscribe``
returns only once Redis has confirmed the SUBSCRIBE, so a message published after it returns is
heard ("subscribe, read the store, then wait" loses nothing).

When the connection drops, every confirmed subscription is marked ``overflowed`` and not
``connected``; after the reconnect has resubscribed its channels it is woken with ``RESYNC`` (a
message that announces nothing), so its waiter reads the store again and catches up on what it
may have missed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import redis.asyncio
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import RedisError

from core.adapters.fanout.memory import MemorySubscription
from core.availability import CircuitBreaker, DependencyUnavailableError

log = logging.getLogger("relaybox.fanout")

RESYNC = "{}"  # the wake-up after a reconnect: an empty JSON object, nothing announced
SUBSCRIBE_TIMEOUT_S = 3.0
HEARTBEAT_S = 15.0  # an idle connection is PINGed this often; silent for twice as long = dead
RECONNECT_MAX_S = 5.0


@dataclass(eq=False)
class _Channel:
    """A channel this process wants: its local subscriptions, and whether Redis confirmed it."""

    topic: str
    subscriptions: set[MemorySubscription] = field(default_factory=set)
    confirmed: asyncio.Event = field(default_factory=asyncio.Event)
    resync: bool = False  # lost with the connection: wake the subscriptions once resubscribed


class RedisSubscriber:
    """The process's pub/sub connection, made (on the running event loop) from the pool of the
    client ``client()`` returns, and reconnected after a loss until ``aclose``."""

    def __init__(self, client: Callable[[], redis.asyncio.Redis], breaker: CircuitBreaker) -> None:
        self.breaker = breaker
        self._client = client
        self._supervisor: asyncio.Task[None] | None = None
        self._channels: dict[bytes, _Channel] = {}  # wanted: at least one local subscription
        self._sent: set[bytes] = set()  # subscribed on the current connection (command sent)
        self._unacked: dict[bytes, int] = {}  # (UN)SUBSCRIBE commands still to be confirmed
        self._dirty = asyncio.Event()  # the wanted channels changed: the writer has work

    @asynccontextmanager
    async def subscribe(self, channels: Mapping[bytes, str]) -> AsyncIterator[MemorySubscription]:
        """One subscription to ``channels`` (channel name → the topic its messages are told under),
        confirmed by Redis before it is handed out."""
        if self._supervisor is None:
            loop = asyncio.get_running_loop()
            self._supervisor = loop.create_task(self._supervise(), name="relaybox-fanout")
        subscription = MemorySubscription()
        joined: list[tuple[bytes, _Channel]] = []
        try:
            for name, topic in channels.items():
                joined.append(self._join(name, topic, subscription))
            self._dirty.set()
            await self._confirmed([channel for _, channel in joined])
            yield subscription
        finally:
            for name, channel in joined:
                channel.subscriptions.discard(subscription)
                if not channel.subscriptions and self._channels.get(name) is channel:
                    del self._channels[name]
            self._dirty.set()  # no await here: an exit under cancellation still unsubscribes

    def wants(self, name: bytes) -> bool:
        """Whether a local subscription listens on the channel ``name``."""
        return name in self._channels

    async def aclose(self) -> None:
        """Stop the supervisor, which closes the connection."""
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.wait({supervisor})  # a cancellation of aclose itself still propagates
        self._channels.clear()
        self._sent.clear()
        self._unacked.clear()

    # -- local bookkeeping ------------------------------------------------------------------
    def _join(self, name: bytes, topic: str, subscription: MemorySubscription) -> tuple[bytes, _Channel]:
        channel = self._channels.get(name)
        if channel is None:
            channel = self._channels[name] = _Channel(topic)
            if name in self._sent and not self._unacked.get(name):
                channel.confirmed.set()  # still subscribed from an earlier subscription
        channel.subscriptions.add(subscription)
        return name, channel

    async def _confirmed(self, channels: list[_Channel]) -> None:
        if all(c.confirmed.is_set() for c in channels):
            return
        self.breaker.check()
        try:
            with anyio.fail_after(SUBSCRIBE_TIMEOUT_S):
                while pending := [c for c in channels if not c.confirmed.is_set()]:
                    await pending[0].confirmed.wait()
        except TimeoutError:
            self.breaker.failed()
            raise DependencyUnavailableError("redis") from None

    # -- the pub/sub connection -------------------------------------------------------------
    async def _supervise(self) -> None:
        delay = 0.0
        loop = asyncio.get_running_loop()
        while True:
            # Made by the pool (same URL options) but not lent by it: this connection is ours alone.
            pool = self._client().connection_pool
            connection: AbstractConnection = pool.make_connection()  # type: ignore[no-untyped-call]
            # With a socket timeout redis-py wraps each write in asyncio.wait_for, which on Python 3.11
            # can swallow a cancellation; a stalled connection is caught by the reader's heartbeat.
            connection.socket_timeout = None
            started = loop.time()
            try:
                await connection.connect()  # type: ignore[no-untyped-call]
                await self._serve(connection)
            except (RedisError, OSError) as error:
                log.warning("fan-out connection to Redis lost: %s: %s", type(error).__name__, error)
            except Exception:
                log.exception("fan-out connection failed unexpectedly")
            finally:
                with suppress(RedisError, OSError):
                    await connection.disconnect(nowait=True)
            self._connection_lost()
            if loop.time() - started > 30:
                delay = 0.0
            await asyncio.sleep(delay)
            delay = min(RECONNECT_MAX_S, max(0.05, delay * 2))

    async def _serve(self, connection: AbstractConnection) -> None:
        """Read and write until either side fails; raise what ended it."""
        self._dirty.set()  # a new connection starts with nothing subscribed
        reader = asyncio.create_task(self._read(connection))
        writer = asyncio.create_task(self._write(connection))
        try:
            done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            for task in (reader, writer):
                task.cancel()
            await asyncio.gather(reader, writer, return_exceptions=True)

    async def _write(self, connection: AbstractConnection) -> None:
        loop = asyncio.get_running_loop()
        last_sent = loop.time()
        while True:
            with suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, last_sent + HEARTBEAT_S - loop.time())):
                    await self._dirty.wait()
            if not self._dirty.is_set():
                await connection.send_command("PING", check_health=False)
                last_sent = loop.time()
                continue
            self._dirty.clear()
            wanted = set(self._channels)
            for command, names in (("SUBSCRIBE", wanted - self._sent), ("UNSUBSCRIBE", self._sent - wanted)):
                if not names:
                    continue
                self._sent ^= names
                for name in names:
                    self._unacked[name] = self._unacked.get(name, 0) + 1
                await connection.send_command(command, *sorted(names), check_health=False)
                last_sent = loop.time()

    async def _read(self, connection: AbstractConnection) -> None:
        while True:
            response = await connection.read_response(timeout=2 * HEARTBEAT_S, push_request=True)
            if response is None:
                raise TimeoutError(f"no word from Redis in {2 * HEARTBEAT_S} s, not even to PING")
            self.breaker.succeeded()  # Redis answers: callers need not wait out a cool-down
            self._handle(response)

    def _handle(self, response: Any) -> None:
        if not isinstance(response, list) or len(response) < 3:
            return  # PONG
        kind, name = response[0], response[1]
        if kind == b"message":
            channel = self._channels.get(name)
            if channel is not None:
                message = response[2].decode(errors="replace")
                _deliver(channel.subscriptions, channel.topic, message)
        elif kind in (b"subscribe", b"unsubscribe"):
            left = self._unacked.get(name, 0) - 1
            if left > 0:
                self._unacked[name] = left
                return
            self._unacked.pop(name, None)
            channel = self._channels.get(name)
            if name in self._sent and channel is not None:
                channel.confirmed.set()
                if channel.resync:
                    channel.resync = False
                    for subscription in channel.subscriptions:
                        subscription.connected = True
                    _deliver(channel.subscriptions, channel.topic, RESYNC)

    def _connection_lost(self) -> None:
        self._sent.clear()
        self._unacked.clear()
        for channel in self._channels.values():
            if channel.confirmed.is_set():
                channel.confirmed.clear()
                channel.resync = True
                for subscription in channel.subscriptions:
                    subscription.overflowed = True
                    subscription.connected = False


def _deliver(subscriptions: Iterable[MemorySubscription], topic: str, message: str) -> None:
    for subscription in tuple(subscriptions):
        subscription.deliver(topic, message)
