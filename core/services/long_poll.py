"""Long polls: a caller waits for something pending (a question's answer, an urgent notification's
acknowledgement) to settle, woken by a fan-out event that may come from another replica. No
transaction is held and the database is not polled while waiting."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import anyio

from core.runtime.core import Core


class Pending(Protocol):
    """A state that is ``pending`` until it settles, or until ``expires_at`` at the latest."""

    @property
    def status(self) -> str: ...

    @property
    def expires_at(self) -> int: ...


S = TypeVar("S", bound=Pending)


async def until_settled(core: Core, topic: str, read: Callable[[], Awaitable[S]], wait: int) -> S:
    """``read()``'s state once it is no longer pending, or after ``wait`` seconds (or at its
    expiry, if sooner); each message on ``topic`` makes it read again."""
    async with core.fanout.subscribe(topic) as changed:
        current = await read()
        deadline = core.clock.now() + min(float(wait), current.expires_at - core.clock.now())
        if current.status != "pending" or deadline <= core.clock.now():
            return current
        with core.waits.long_poll():  # shutdown ends the wait: the caller gets the state now
            while (remaining := deadline - core.clock.now()) > 0:
                with anyio.move_on_after(remaining) as timer:
                    await changed.receive()
                if timer.cancelled_caught:
                    break
                # The change, or a resync after the fan-out lost its connection (nothing changed
                # then: keep waiting rather than hand the caller an early "pending").
                current = await read()
                if current.status != "pending":
                    return current
    return await read()
