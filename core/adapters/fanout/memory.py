"""In-process fan-out: a topic maps to the live subscriptions of this process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager

SUBSCRIPTION_BUFFER = 256


class MemorySubscription:
    """An open stream holds its subscription for hours, mostly waiting: what it holds is kept
    small (a list, not a deque whose first block alone is 624 bytes; a bare future to wait on,
    not an event, which on asyncio is a deque of waiters too)."""

    def __init__(self, buffer: int = SUBSCRIPTION_BUFFER) -> None:
        self._queue: list[tuple[str, str]] = []
        self._buffer = buffer
        self._waiter: asyncio.Future[None] | None = None
        self.overflowed = False
        self.connected = True  # in process, always; the Redis fan-out clears it while disconnected
        self.interrupted = False

    def deliver(self, topic: str, message: str) -> None:
        if len(self._queue) >= self._buffer:
            self.overflowed = True
            return
        self._queue.append((topic, message))
        if self._waiter is not None:
            _wake(self._waiter)

    def receive_nowait(self) -> tuple[str, str] | None:
        if self._queue:
            return self._queue.pop(0)
        return None

    async def receive(self) -> tuple[str, str]:
        while not self._queue:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._queue.pop(0)

    async def receive_until(self, deadline: float) -> tuple[str, str] | None:
        """The next (topic, message), or None at ``deadline`` (the event loop's clock) or once
        ``interrupt`` was called. A timer on the loop, not a cancel scope: every open stream waits
        this way after each wake-up, and a scope costs several times the rest of the wait."""
        loop = asyncio.get_running_loop()
        while not self._queue:
            if self.interrupted or loop.time() >= deadline:
                return None
            waiter = self._waiter = loop.create_future()
            timer = loop.call_at(deadline, _wake, waiter)
            try:
                await waiter
            finally:
                self._waiter = None
                timer.cancel()
        return self._queue.pop(0)

    def interrupt(self) -> None:
        """End the wait in ``receive_until``, and every later one: they return None."""
        self.interrupted = True
        if self._waiter is not None:
            _wake(self._waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class MemoryFanout:
    def __init__(self) -> None:
        self._topics: dict[str, set[MemorySubscription]] = {}

    async def publish(self, topic: str, message: str) -> None:
        self.publish_nowait(topic, message)

    async def publish_all(self, messages: Sequence[tuple[str, str]]) -> None:
        topics = self._topics  # a send's wake-ups, one a device: most topics have no subscriber
        for topic, message in messages:
            if topic in topics:
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
        return {topic for topic in topics if self.may_deliver(topic)}

    def may_deliver(self, topic: str) -> bool:
        """This process is all there is: a topic with no subscriber here has none anywhere."""
        return bool(self._topics.get(topic))

    async def aclose(self) -> None:
        self._topics.clear()
