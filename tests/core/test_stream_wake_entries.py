"""A live stream that is caught up writes the entry its wake-up carries without reading the store;
a stream that is behind, an entry too big to carry, or lost wake-ups make it read the store. In
every case each entry arrives once, in seq order."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream

from core.adapters.fanout.memory import MemoryFanout
from core.principal import Principal
from core.queue import CARRIED_MAX_CHARS
from core.runtime.core import Core
from core.runtime.events import device_topic
from core.services import stream
from core.services.relay import QueueItem, read_queue, relay_envelope
from tests.core.pairs import Pair, paired

pytestmark = pytest.mark.anyio


@pytest.fixture
def store_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``after`` of every store read a stream makes."""
    reads: list[int] = []
    original = read_queue

    def counted(tx: Any, principal: Principal, *, after: int, limit: int = 100) -> Any:
        reads.append(after)
        return original(tx, principal, after=after, limit=limit)

    counted.__relaybox_read_only__ = True  # type: ignore[attr-defined]
    monkeypatch.setattr(stream, "read_queue", counted)
    return reads


@asynccontextmanager
async def followed(core: Core, pair: Pair) -> AsyncIterator[MemoryObjectReceiveStream[QueueItem]]:
    """The queue items of a stream of the computer's, once it has read the store and waits."""
    send, receive = anyio.create_memory_object_stream[QueueItem](100)
    topic = device_topic(pair.computer.device_id or "")
    async with send, receive, anyio.create_task_group() as tasks:

        async def follow() -> None:
            async for item in stream.follow_queue(core, pair.computer, after=0):
                if isinstance(item, QueueItem):
                    await send.send(item)

        tasks.start_soon(follow)
        assert isinstance(core.fanout, MemoryFanout)
        fanout = core.fanout
        await eventually(lambda: fanout.subscriber_count(topic) > 0)
        await anyio.sleep(0.05)  # the first read is done: the stream waits
        yield receive
        tasks.cancel_scope.cancel()


async def eventually(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(5):
        while not condition():  # noqa: ASYNC110 (the state is the fan-out's: nothing to wait on)
            await anyio.sleep(0.01)


async def next_items(items: MemoryObjectReceiveStream[QueueItem], count: int) -> list[int]:
    with anyio.fail_after(5):
        return [(await items.receive()).seq for _ in range(count)]


async def test_a_caught_up_stream_writes_carried_entries_without_reading_the_store(
    running: Core, store_reads: list[int]
) -> None:
    pair = await paired(running)
    async with followed(running, pair) as items:
        sent = [(await running.run(relay_envelope, pair.phone, body=pair.envelope())).seq for _ in range(3)]
        assert await next_items(items, 3) == sent
        assert store_reads == [0]  # only the opening read


async def test_a_stream_behind_the_carried_entry_reads_the_store_and_misses_nothing(
    running: Core, store_reads: list[int]
) -> None:
    pair = await paired(running)
    async with followed(running, pair) as items:
        missed = running.run_sync(relay_envelope, pair.phone, body=pair.envelope()).seq  # no wake-up
        woken = (await running.run(relay_envelope, pair.phone, body=pair.envelope())).seq
        assert await next_items(items, 2) == [missed, woken]
        assert store_reads == [0, 0]
        again = (await running.run(relay_envelope, pair.phone, body=pair.envelope())).seq
        assert await next_items(items, 1) == [again]  # caught up again: carried
        assert store_reads == [0, 0]


async def test_an_entry_too_big_to_carry_is_read_from_the_store(
    running: Core, store_reads: list[int]
) -> None:
    pair = await paired(running)
    async with followed(running, pair) as items:
        big = (
            await running.run(relay_envelope, pair.phone, body=pair.envelope(b"x" * CARRIED_MAX_CHARS))
        ).seq
        assert await next_items(items, 1) == [big]
        assert store_reads == [0, 0]


async def test_lost_wake_ups_make_the_stream_read_the_store(running: Core, store_reads: list[int]) -> None:
    pair = await paired(running)
    async with followed(running, pair) as items:
        missed = running.run_sync(relay_envelope, pair.phone, body=pair.envelope()).seq
        assert isinstance(running.fanout, MemoryFanout)
        topic = device_topic(pair.computer.device_id or "")
        for subscription in running.fanout._topics[topic]:
            subscription.overflowed = True  # as when its buffer was full
        await running.fanout.publish(topic, '{"seq":0,"prev":0}')  # announces nothing new by itself
        assert await next_items(items, 1) == [missed]
        assert store_reads == [0, 0]


async def test_a_wake_up_for_an_entry_already_read_from_the_store_is_not_sent_twice(
    running: Core, store_reads: list[int]
) -> None:
    pair = await paired(running)
    async with followed(running, pair) as items:
        first = running.run_sync(relay_envelope, pair.phone, body=pair.envelope()).seq
        second = (await running.run(relay_envelope, pair.phone, body=pair.envelope())).seq
        assert await next_items(items, 2) == [first, second]
        assert isinstance(running.fanout, MemoryFanout)
        topic = device_topic(pair.computer.device_id or "")
        stale = f'{{"seq":{second},"prev":{first},"entry":{{"from":"x","type":"clipboard","blob":"AQ=="}}}}'
        await running.fanout.publish(topic, stale)  # late, or from a slower replica
        third = (await running.run(relay_envelope, pair.phone, body=pair.envelope())).seq
        assert await next_items(items, 1) == [third]
        assert store_reads == [0, 0]
