"""Following a device's queue live: replay what is queued after a sequence id, then wait for
fan-out wake-ups (never polling the database). A wake-up that carries the entry right after the
last one delivered is written as is; any other (a gap, an entry too big to carry, lost wake-ups)
makes the stream read the store from its last seq, so nothing is lost or sent twice.

Yields queue items, live pushes (not kept: ring, reminders) and, when nothing happened for the
keep-alive interval, ``KEEPALIVE``. Ends when the device's credential is revoked, or when the
server begins to shut down.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, Final

from core.adapters.fanout.base import Subscription
from core.errors import RelayError
from core.principal import Principal
from core.queue import carried
from core.runtime.core import Core
from core.runtime.events import device_topic
from core.services.relay import QueueItem, read_queue

KEEPALIVE: Final = "keepalive"
PAGE = 100


@dataclass(frozen=True, slots=True)
class LivePush:
    """A push for a device without a push service that is not kept (ring, reminders): no seq."""

    data: dict[str, Any]


async def follow_queue(
    core: Core, principal: Principal, *, after: int
) -> AsyncGenerator[QueueItem | LivePush | str, None]:
    device_id = principal.require_device()
    core.presence.opened(device_id)
    try:
        # Subscribe before the first read: a wake-up that lands between the two is not lost.
        async with core.fanout.subscribe(device_topic(device_id)) as wakeups:
            with core.waits.interrupting(wakeups.interrupt):  # shutdown ends the stream's waits
                async for item in _items(core, principal, wakeups, after):
                    yield item
    finally:
        core.presence.closed(device_id)


async def _items(
    core: Core, principal: Principal, wakeups: Subscription, after: int
) -> AsyncIterator[QueueItem | LivePush | str]:
    last = after
    read_store = True
    loop = asyncio.get_running_loop()
    while True:
        if read_store:
            items = await _queued_after(core, principal, last)
            if items is None:
                return  # revoked while we read: end the stream cleanly, as the revocation would
            for item in items:
                yield item
                last = item.seq
            if len(items) == PAGE:
                continue  # more is waiting
            read_store = False
        received = await wakeups.receive_until(loop.time() + core.settings.stream_keepalive_s)
        if core.waits.shutting_down:
            return  # the server is stopping: end the response cleanly; the device resumes elsewhere
        if received is None:
            yield KEEPALIVE
            continue
        while received is not None:  # a burst of wake-ups
            message = json.loads(received[1])
            if message.get("revoked"):
                return
            if isinstance(message.get("push"), dict):
                yield LivePush(message["push"])
            elif not _already_delivered(message, last):
                entry = None if read_store else carried(message)
                if entry is not None and entry.prev == last:  # the very next entry: no read
                    yield QueueItem(seq=entry.seq, sender=entry.sender, type=entry.type, blob=entry.blob)
                    last = entry.seq
                else:  # behind, too big to carry, or a resync: the store has it
                    read_store = True
            received = wakeups.receive_nowait()
        if wakeups.overflowed:  # wake-ups were lost: what they announced is in the store
            wakeups.overflowed = False
            read_store = True


async def _queued_after(core: Core, principal: Principal, last: int) -> list[QueueItem] | None:
    """The next page of the device's queue (just its items: the page is not held while the stream
    waits), or ``None`` once the device's credential is revoked."""
    try:
        return (await core.run(read_queue, principal, after=last, limit=PAGE)).items
    except RelayError as error:
        if error.code == "invalid_token":
            return None
        raise


def _already_delivered(message: dict[str, Any], last: int) -> bool:
    seq = message.get("seq")
    return isinstance(seq, int) and seq <= last
