"""The fan-out contract: one body for every implementation (memory now; Redis with scale-out)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from core.adapters.fanout.base import Fanout
from core.adapters.fanout.memory import SUBSCRIPTION_BUFFER, MemoryFanout

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory"])
async def fanout(request: pytest.FixtureRequest) -> AsyncIterator[Fanout]:
    implementation = MemoryFanout()
    yield implementation
    await implementation.aclose()


async def test_a_subscriber_receives_what_is_published_on_its_topic(fanout: Fanout) -> None:
    async with fanout.subscribe("device:a") as subscription:
        await fanout.publish("device:a", "hello")
        with anyio.fail_after(5):
            assert await subscription.receive() == ("device:a", "hello")


async def test_other_topics_are_not_heard(fanout: Fanout) -> None:
    async with fanout.subscribe("device:a") as subscription:
        await fanout.publish("device:b", "not for a")
        await fanout.publish("device:a", "for a")
        with anyio.fail_after(5):
            assert await subscription.receive() == ("device:a", "for a")


async def test_every_subscriber_hears_each_message_in_order(fanout: Fanout) -> None:
    async with fanout.subscribe("t") as first, fanout.subscribe("t") as second:
        for n in range(3):
            await fanout.publish("t", str(n))
        with anyio.fail_after(5):
            for subscription in (first, second):
                assert [(await subscription.receive())[1] for _ in range(3)] == ["0", "1", "2"]


async def test_a_waiting_receiver_is_woken_by_a_later_publish(fanout: Fanout) -> None:
    received: list[tuple[str, str]] = []
    async with fanout.subscribe("t") as subscription, anyio.create_task_group() as tasks:

        async def wait() -> None:
            received.append(await subscription.receive())

        tasks.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        await fanout.publish("t", "wake")
        with anyio.fail_after(5):
            while not received:
                await anyio.wait_all_tasks_blocked()
    assert received == [("t", "wake")]


async def test_a_subscription_ends_when_its_block_exits(fanout: Fanout) -> None:
    async with fanout.subscribe("t") as subscription:
        pass
    await fanout.publish("t", "late")
    assert subscription.receive_nowait() is None


async def test_a_flooded_subscriber_is_told_it_overflowed(fanout: Fanout) -> None:
    async with fanout.subscribe("t") as subscription:
        for n in range(SUBSCRIPTION_BUFFER + 1):
            await fanout.publish("t", str(n))
        assert subscription.overflowed
