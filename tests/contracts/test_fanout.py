"""The fan-out contract: one body for every implementation (memory, Redis), then what only Redis
pub/sub adds: replicas hear each other, and a dropped connection is told and then recovered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import anyio
import pytest
import redis
import redis.asyncio

from core.adapters.fanout import redis_subscriber
from core.adapters.fanout.base import Fanout
from core.adapters.fanout.memory import SUBSCRIPTION_BUFFER, MemoryFanout
from core.adapters.fanout.redis import RedisFanout
from core.adapters.fanout.redis_subscriber import RESYNC

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def fanout(request: pytest.FixtureRequest, namespace: str) -> AsyncIterator[Fanout]:
    if request.param == "memory":
        implementation: Fanout = MemoryFanout()
    else:
        implementation = RedisFanout(request.getfixturevalue("redis_url"), namespace=namespace)
    try:
        yield implementation
    finally:
        await implementation.aclose()


async def test_a_subscriber_receives_what_is_published_on_its_topic(fanout: Fanout) -> None:
    async with fanout.subscribe("device:a") as subscription:
        await fanout.publish("device:a", "hello")
        with anyio.fail_after(5):
            assert await subscription.receive() == ("device:a", "hello")


async def test_messages_published_together_arrive_in_order_on_their_topics(fanout: Fanout) -> None:
    async with fanout.subscribe("device:a", "device:b") as both, fanout.subscribe("device:b") as only_b:
        await fanout.publish_all([("device:a", "1"), ("device:b", "2"), ("device:c", "x"), ("device:a", "3")])
        with anyio.fail_after(5):
            heard = [await both.receive() for _ in range(3)]
            assert heard == [("device:a", "1"), ("device:b", "2"), ("device:a", "3")]
            assert await only_b.receive() == ("device:b", "2")


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


async def test_one_subscription_hears_all_its_topics(fanout: Fanout) -> None:
    async with fanout.subscribe("a", "b") as subscription:
        await fanout.publish("b", "1")
        await fanout.publish("a", "2")
        with anyio.fail_after(5):
            assert [await subscription.receive() for _ in range(2)] == [("b", "1"), ("a", "2")]


async def test_a_waiting_receiver_is_woken_by_a_later_publish(fanout: Fanout) -> None:
    received: list[tuple[str, str]] = []
    woken = anyio.Event()
    async with fanout.subscribe("t") as subscription, anyio.create_task_group() as tasks:

        async def wait() -> None:
            received.append(await subscription.receive())
            woken.set()

        tasks.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        await fanout.publish("t", "wake")
        with anyio.fail_after(5):
            await woken.wait()
    assert received == [("t", "wake")]


async def test_a_wait_until_a_deadline_answers_a_message_or_none_at_the_deadline(fanout: Fanout) -> None:
    loop = asyncio.get_running_loop()
    async with fanout.subscribe("t") as subscription:
        started = loop.time()
        assert await subscription.receive_until(started + 0.05) is None
        assert loop.time() >= started + 0.05
        async with fanout.subscribe("t") as witness:
            await fanout.publish("t", "queued")
            # Through Redis the message reaches the subscriptions a moment after the publish
            # returns, every subscription of the topic at once: the witness's has it, so this has.
            with anyio.fail_after(5):
                assert await witness.receive_until(loop.time() + 5) == ("t", "queued")
        # a message already there is answered even past the deadline
        assert await subscription.receive_until(started) == ("t", "queued")
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_publish_soon, fanout, "t", "later")
            with anyio.fail_after(5):
                assert await subscription.receive_until(loop.time() + 60) == ("t", "later")


async def _publish_soon(fanout: Fanout, topic: str, message: str) -> None:
    await anyio.sleep(0.02)
    await fanout.publish(topic, message)


async def test_an_interrupt_ends_the_wait_and_every_later_one(fanout: Fanout) -> None:
    loop = asyncio.get_running_loop()
    async with fanout.subscribe("t") as subscription, anyio.create_task_group() as tasks:
        ended: list[object] = []
        done = anyio.Event()

        async def wait() -> None:
            ended.append(await subscription.receive_until(loop.time() + 60))
            done.set()

        tasks.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        subscription.interrupt()
        with anyio.fail_after(5):
            await done.wait()
        assert ended == [None]
        assert await subscription.receive_until(loop.time() + 60) is None


async def test_a_subscription_ends_when_its_block_exits(fanout: Fanout) -> None:
    async with fanout.subscribe("t") as subscription:
        pass
    async with fanout.subscribe("t") as later:
        await fanout.publish("t", "late")
        with anyio.fail_after(5):
            assert await later.receive() == ("t", "late")
    assert subscription.receive_nowait() is None


async def test_the_last_of_two_subscriptions_on_a_topic_keeps_hearing_it(fanout: Fanout) -> None:
    async with fanout.subscribe("t") as staying:
        async with fanout.subscribe("t"):
            pass
        await fanout.publish("t", "still here")
        with anyio.fail_after(5):
            assert await staying.receive() == ("t", "still here")


async def test_a_flooded_subscriber_is_told_it_overflowed(fanout: Fanout) -> None:
    async with fanout.subscribe("t") as subscription, fanout.subscribe("done") as done:
        for n in range(SUBSCRIPTION_BUFFER + 1):
            await fanout.publish("t", str(n))
        await fanout.publish("done", "")
        with anyio.fail_after(5):
            await done.receive()  # published last: everything before it has been delivered
        assert subscription.overflowed
        assert subscription.receive_nowait() == ("t", "0")


async def test_listened_names_the_topics_with_a_subscriber_while_it_is_subscribed(fanout: Fanout) -> None:
    assert await fanout.listened(["device:a", "device:b"]) == set()
    async with fanout.subscribe("device:a"), fanout.subscribe("device:a", "device:c"):
        assert await fanout.listened(["device:a", "device:b", "device:c"]) == {"device:a", "device:c"}
        assert await fanout.listened([]) == set()
    with anyio.fail_after(5):  # (Redis hears the UNSUBSCRIBE a moment after the block exits)
        while await fanout.listened(["device:a", "device:c"]):  # noqa: ASYNC110 - the state is in Redis
            await anyio.sleep(0.01)


async def test_may_deliver_is_false_only_where_no_subscriber_can_hear(fanout: Fanout) -> None:
    """What lets a write skip making wake-ups nobody hears: the in-process fan-out knows every
    subscriber; Redis cannot know another replica's without asking it, so it always says maybe."""
    everywhere = isinstance(fanout, RedisFanout)
    assert fanout.may_deliver("device:a") is everywhere
    async with fanout.subscribe("device:a"):
        assert fanout.may_deliver("device:a")
        assert fanout.may_deliver("device:b") is everywhere
    assert fanout.may_deliver("device:a") is everywhere


# -- Redis only ------------------------------------------------------------------------------------


def named(url: str, name: str) -> str:
    """``url`` whose connections carry the client name ``name`` (CLIENT LIST shows it)."""
    return f"{url}{'&' if '?' in url else '?'}client_name={name}"


@pytest.mark.redis
async def test_a_message_published_on_one_replica_reaches_a_subscriber_on_another(
    redis_url: str, namespace: str
) -> None:
    here, there = RedisFanout(redis_url, namespace=namespace), RedisFanout(redis_url, namespace=namespace)
    try:
        for n in range(20):  # each publish right after subscribe returns: confirmed means heard
            async with here.subscribe(f"interaction:{n}") as subscription:
                await there.publish(f"interaction:{n}", "answered")
                with anyio.fail_after(5):
                    assert await subscription.receive() == (f"interaction:{n}", "answered")
    finally:
        await here.aclose()
        await there.aclose()


@pytest.mark.redis
async def test_a_subscription_on_one_replica_is_listened_to_as_seen_from_another(
    redis_url: str, namespace: str
) -> None:
    here, there = RedisFanout(redis_url, namespace=namespace), RedisFanout(redis_url, namespace=namespace)
    try:
        async with here.subscribe("device:a"):
            assert await there.listened(["device:a", "device:b"]) == {"device:a"}
        with anyio.fail_after(5):
            while await there.listened(["device:a"]):  # noqa: ASYNC110 - the state is in Redis
                await anyio.sleep(0.01)
    finally:
        await here.aclose()
        await there.aclose()


@pytest.mark.redis
async def test_a_message_published_the_instant_subscribe_returns_is_heard(
    redis_url: str, namespace: str
) -> None:
    """A blocking publisher gives the subscriber's tasks no turn: only a SUBSCRIBE that Redis had
    confirmed before ``subscribe`` returned can hear it."""
    fanout = RedisFanout(redis_url, namespace=namespace)
    publisher = redis.Redis.from_url(redis_url)
    try:
        publisher.ping()
        for n in range(5):
            async with fanout.subscribe(f"device:{n}") as subscription:
                assert publisher.publish(f"{namespace}:fanout:device:{n}", "wake") == 1
                with anyio.fail_after(5):
                    assert await subscription.receive() == (f"device:{n}", "wake")
    finally:
        await fanout.aclose()
        publisher.close()


@pytest.mark.redis
async def test_other_namespaces_are_not_heard(redis_url: str, namespace: str) -> None:
    mine, theirs = (
        RedisFanout(redis_url, namespace=namespace),
        RedisFanout(redis_url, namespace=namespace + "x"),
    )
    try:
        async with mine.subscribe("t") as subscription:
            await theirs.publish("t", "not for us")
            await mine.publish("t", "ours")
            with anyio.fail_after(5):
                assert await subscription.receive() == ("t", "ours")
    finally:
        await mine.aclose()
        await theirs.aclose()


@pytest.mark.redis
async def test_the_process_holds_one_channel_per_topic_and_drops_it_after_the_last_subscriber(
    redis_url: str, namespace: str
) -> None:
    fanout = RedisFanout(redis_url, namespace=namespace)
    admin = redis.asyncio.Redis.from_url(redis_url)
    channel = f"{namespace}:fanout:t"

    async def subscribers() -> int:
        counts = await admin.pubsub_numsub(channel)
        return int(counts[0][1])

    try:
        async with fanout.subscribe("t"), fanout.subscribe("t"):
            assert await subscribers() == 1
        with anyio.CancelScope() as scope:  # an exit under cancellation unsubscribes too
            async with fanout.subscribe("t"):
                scope.cancel()
                await anyio.sleep(5)
        with anyio.fail_after(5):
            while await subscribers():  # noqa: ASYNC110 - the state is in Redis: nothing here to wait on
                await anyio.sleep(0.01)
    finally:
        await fanout.aclose()
        await admin.aclose()


@pytest.mark.redis
async def test_a_dropped_connection_marks_subscribers_overflowed_then_they_hear_again(
    redis_url: str, namespace: str
) -> None:
    fanout = RedisFanout(named(redis_url, namespace), namespace=namespace)
    admin = redis.asyncio.Redis.from_url(redis_url)
    try:
        async with fanout.subscribe("device:a") as subscription, fanout.subscribe("device:b") as other:
            (pubsub,) = [c for c in await admin.client_list() if c["name"] == namespace and c["sub"] != "0"]
            await admin.client_kill_filter(_id=pubsub["id"])
            with anyio.fail_after(10):
                assert await subscription.receive() == ("device:a", RESYNC)  # after resubscribing
                assert await other.receive() == ("device:b", RESYNC)
            assert subscription.overflowed and other.overflowed
            await fanout.publish("device:a", "after")
            with anyio.fail_after(5):
                assert await subscription.receive() == ("device:a", "after")
    finally:
        await fanout.aclose()
        await admin.aclose()


async def test_a_publish_that_cannot_reach_redis_is_dropped_not_raised() -> None:
    fanout = RedisFanout("redis://127.0.0.1:1/0")
    try:
        with anyio.fail_after(10):
            await fanout.publish("t", "lost")
    finally:
        await fanout.aclose()


async def test_subscribing_while_redis_is_unreachable_fails_within_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redis_subscriber, "SUBSCRIBE_TIMEOUT_S", 0.5)
    fanout = RedisFanout("redis://127.0.0.1:1/0")
    try:
        with anyio.fail_after(5), pytest.raises(ConnectionError):
            async with fanout.subscribe("t"):
                pass
    finally:
        await fanout.aclose()
