"""Redis fan-out: publishes made while one is on its way to Redis go together after it (a group
commit's sends, answered together), in the order they were made, each caller returning once its
own messages were sent."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from core.adapters.fanout.redis import RedisFanout

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_publishes_made_together_go_to_redis_together_and_in_order(
    redis_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fanout = RedisFanout(redis_url, namespace=namespace)
    sent: list[int] = []  # messages per round trip
    publish_now = fanout._publish_now

    async def counted(messages: Sequence[tuple[str, str]]) -> None:
        sent.append(len(messages))
        await publish_now(messages)

    monkeypatch.setattr(fanout, "_publish_now", counted)
    returned: list[int] = []

    async def publish(n: int) -> None:
        await fanout.publish_all([("t", f"{n}a"), ("t", f"{n}b")])
        returned.append(sum(sent))  # what had been sent when this caller returned

    try:
        async with fanout.subscribe("t") as subscription:
            async with anyio.create_task_group() as group:
                for n in range(20):
                    group.start_soon(publish, n)
            with anyio.fail_after(5):
                heard = [(await subscription.receive())[1] for _ in range(40)]
    finally:
        await fanout.aclose()

    assert heard == [f"{n}{part}" for n in range(20) for part in "ab"]
    assert sum(sent) == 40 and len(sent) <= 2  # the first alone (or with all), the rest together
    assert returned == [40] * 20 or returned == [2] + [40] * 19
