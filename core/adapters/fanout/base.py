"""The fan-out Protocol: publish a small message on a topic; every subscriber anywhere hears it.

Used to wake waiters (open streams, long polls, consent pages) instead of polling the database.
Messages are hints, never the only copy of data: a subscriber whose buffer overflowed is told
(``Subscription.overflowed``) and catches up from the store.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol


class Subscription(Protocol):
    overflowed: bool  # messages were lost (buffer full, connection lost): catch up from the store
    connected: bool  # False while the fan-out cannot hear this subscription's topics at all

    async def receive(self) -> tuple[str, str]:
        """Wait for the next (topic, message)."""
        ...

    def receive_nowait(self) -> tuple[str, str] | None: ...

    async def receive_until(self, deadline: float) -> tuple[str, str] | None:
        """The next (topic, message), or None at ``deadline`` (the event loop's clock) or once
        interrupted."""
        ...

    def interrupt(self) -> None:
        """End the current and every later ``receive_until`` wait (shutdown)."""
        ...


class Fanout(Protocol):
    async def publish(self, topic: str, message: str) -> None: ...

    async def publish_all(self, messages: Sequence[tuple[str, str]]) -> None:
        """Publish each ``(topic, message)``, in order, at the cost of one (a Redis pipeline: one
        round trip for a send's wake-ups to all of its devices)."""
        ...

    def subscribe(self, *topics: str) -> AbstractAsyncContextManager[Subscription]: ...

    def may_deliver(self, topic: str) -> bool:
        """Whether a message on ``topic`` may reach a subscriber, asked without waiting: ``False``
        only when none can (the in-process fan-out with no subscriber to it here), so that the
        message need not be made at all."""
        ...

    async def listened(self, topics: Collection[str]) -> set[str]:
        """Which of ``topics`` someone is subscribed to now, on any replica the fan-out reaches
        (presence: a device's topic has a subscriber while one of its streams is open)."""
        ...

    async def aclose(self) -> None: ...
