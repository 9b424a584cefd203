"""Fan-out over Redis pub/sub: a publish on any replica wakes the waiters of every replica.

A topic is the channel ``<namespace>:fanout:<topic>``. This module publishes, asks Redis who
listens (presence) and answers readiness, on one ordinary client connection; subscriptions share
the process's one pub/sub connection, ``RedisSubscriber`` (``redis_subscriber.py``), which says
what a subscriber hears while that connection is lost and after it is back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from core.adapters.fanout.memory import MemorySubscription
from core.adapters.fanout.redis_subscriber import RedisSubscriber
from core.availability import CircuitBreaker

log = logging.getLogger("relaybox.fanout")

DEFAULT_NAMESPACE = "relaybox"
TIMEOUT_S = 2.0


@dataclass(eq=False)
class _Batch:
    """Messages published while another publish was on its way, sent together after it."""

    messages: list[tuple[str, str]] = field(default_factory=list)
    sent: asyncio.Event = field(default_factory=asyncio.Event)


class RedisFanout:
    def __init__(
        self, url: str, *, namespace: str = DEFAULT_NAMESPACE, breaker: CircuitBreaker | None = None
    ) -> None:
        self.breaker = breaker or CircuitBreaker("redis")  # shared with the rate limiter by bootstrap
        self._url = url
        self._prefix = f"{namespace}:fanout:"
        self._client: redis.asyncio.Redis | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._subscriber: RedisSubscriber | None = None  # made on the first subscribe
        self._batch: _Batch | None = None  # publishes waiting for the one on its way
        self._sender: asyncio.Future[None] | None = None  # sends the batches, while there are any

    # -- the Fanout protocol ----------------------------------------------------------------
    async def publish(self, topic: str, message: str) -> None:
        """Best-effort, like every fan-out message: the data is already committed, and a waiter that
        misses the wake-up catches up at its next timeout or keep-alive."""
        await self.publish_all(((topic, message),))

    async def publish_all(self, messages: Sequence[tuple[str, str]]) -> None:
        """One round trip for all: several are pipelined. Publishes made while one is on its way
        to Redis wait for it and then go together, in the order they were made (the sends of a
        group commit, answered together: one round trip and one connection for all of their
        wake-ups rather than one each); the caller returns once its messages were sent."""
        self._bind_loop()
        if not self.breaker.allow():
            return  # Redis is down: the wake-up is skipped at once rather than after a timeout
        if self._batch is None:
            self._batch = _Batch()
        batch = self._batch
        batch.messages.extend(messages)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.ensure_future(self._send_batches())
        await batch.sent.wait()

    async def _send_batches(self) -> None:
        while self._batch is not None:
            batch, self._batch = self._batch, None
            try:
                await self._publish_now(batch.messages)
            except Exception:  # not expected (Redis errors are handled); the next batch still goes
                log.exception("fan-out publish failed unexpectedly")
            finally:
                batch.sent.set()

    async def _publish_now(self, messages: Sequence[tuple[str, str]]) -> None:
        client = self._publisher()
        try:
            if len(messages) == 1:
                [(topic, message)] = messages
                await client.publish(self._channel_name(topic), message)
            else:
                async with client.pipeline(transaction=False) as pipe:
                    for topic, message in messages:
                        pipe.publish(self._channel_name(topic), message)
                    await pipe.execute()
        except RedisError as error:
            self.breaker.failed()
            log.warning("fan-out publish failed: %s: %s", type(error).__name__, error)
        else:
            self.breaker.succeeded()

    @asynccontextmanager
    async def subscribe(self, *topics: str) -> AsyncIterator[MemorySubscription]:
        """A subscription on the process's pub/sub connection, confirmed by Redis when entered."""
        self._bind_loop()
        if self._subscriber is None:
            self._subscriber = RedisSubscriber(self._publisher, self.breaker)
        channels = {self._channel_name(topic): topic for topic in topics}
        async with self._subscriber.subscribe(channels) as subscription:
            yield subscription

    def may_deliver(self, _topic: str) -> bool:
        """Another replica may have a subscriber: every message is made and published."""
        return True

    async def listened(self, topics: Collection[str]) -> set[str]:
        """``PUBSUB NUMSUB`` counts the subscribing connections of every replica (each process holds
        one per channel). Should Redis not answer, what this process knows: its own subscriptions."""
        wanted = {self._channel_name(topic): topic for topic in topics}
        if not wanted:
            return set()
        self._bind_loop()
        subscriber = self._subscriber
        known_here = {topic for name, topic in wanted.items() if subscriber and subscriber.wants(name)}
        if not self.breaker.allow():
            return known_here
        try:
            counts = await self._publisher().pubsub_numsub(*wanted)
        except RedisError as error:
            self.breaker.failed()
            log.warning("fan-out presence query failed: %s: %s", type(error).__name__, error)
            return known_here
        self.breaker.succeeded()
        listened = {
            name.encode() if isinstance(name, str) else name for name, count in counts if int(count) > 0
        }
        return {topic for name, topic in wanted.items() if name in listened}

    async def ping(self) -> None:
        """Readiness (``/readyz``): Redis answers PING on this process's publishing connection."""
        self._bind_loop()
        await self._publisher().ping()
        self.breaker.succeeded()

    async def aclose(self) -> None:
        """Send what is waiting, stop the subscriber and close both connections; a later use
        starts afresh."""
        sender, self._sender = self._sender, None
        if sender is not None:
            await sender
        subscriber, self._subscriber = self._subscriber, None
        if subscriber is not None:
            await subscriber.aclose()
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        self._loop = None

    # -- the publishing connection ----------------------------------------------------------
    def _channel_name(self, topic: str) -> bytes:
        return (self._prefix + topic).encode()

    def _publisher(self) -> redis.asyncio.Redis:
        if self._client is None:
            self._client = redis.asyncio.Redis.from_url(
                self._url,
                socket_timeout=TIMEOUT_S,
                socket_connect_timeout=TIMEOUT_S,
                retry=Retry(NoBackoff(), 1),  # once more on a fresh connection, then give up
            )
        return self._client

    def _bind_loop(self) -> None:
        """The connections belong to the loop that first used them (the app's)."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError("a RedisFanout serves one event loop; aclose() it before using another")
