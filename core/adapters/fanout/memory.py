"""In-process fan-out: a topic maps to the live subscriptions of this process."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager

import anyio

SUBSCRIPTION_BUFFER = 256


class MemorySubscription:
    def __init__(self, buffer: int = SUBSCRIPTION_BUFFER) -> None:
        self._queue: deque[tuple[str, str]] = deque()
        self._buffer = buffer
        self._ready = anyio.Event()
        self.overflowed = False
        self.connected = True  # in process, always; the Redis fan-out clears it while disconnected

    def deliver(self, topic: str, message: str) -> None:
        if len(self._queue) >= self._buffer:
            self.overflowed = True
            return
        self._queue.append((topic, message))
        self._ready.set()

    def receive_nowait(self) -> tuple[str, str] | None:
        if self._queue:
            return self._queue.popleft()
        return None

    async def receive(self) -> tuple[str, str]:
        while not self._queue:
            self._ready = anyio.Event()
            await self._ready.wait()
        return self._queue.popleft()


class MemoryFanout:
    def __init__(self) -> None:
        self._topics: dict[str, set[MemorySubscription]] = {}

    async def publish(self, topic: str, message: str) -> None:
        self.publish_nowait(topic, message)

    def publish_nowait(self, topic: str, message: str) -> None:
        for subscription in tuple(self._topics.get(topic, ())):
            subscription.deliver(topic, message)

    @asynccontextmanager
    async def subscribe(self, *topics: str) -> AsyncIterator[MemorySubscription]:
        subscription = MemorySubscription()
        for topic in topics:
            self._topics.setdefault(topic, set()).add(subscription)
        try:
            yield subscription
        finally:
            for topic in topics:
                members = self._topics.get(topic)
                if members is not None:
                    members.discard(subscription)
                    if not members:
                        del self._topics[topic]

    def subscriber_count(self, topic: str) -> int:
        return len(self._topics.get(topic, ()))

    async def listened(self, topics: Collection[str]) -> set[str]:
        return {topic for topic in topics if self._topics.get(topic)}

    async def aclose(self) -> None:
        self._topics.clear()
