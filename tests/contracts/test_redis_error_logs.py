"""The fan-out logs Redis errors with their text (it says what went wrong: refused, timed out,
authentication); that text never carries the password of the Redis URL, whether nothing listens
or the server refuses the credentials."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import anyio
import pytest

from core.adapters.fanout.redis import RedisFanout
from core.availability import CircuitBreaker
from tests.reliability.instances import PrivateRedis

PASSWORD = "hunter2-fanout-secret"
NOTHING_LISTENS = f"redis://:{PASSWORD}@127.0.0.1:1/0"


@pytest.fixture
def wrong_password_url() -> Iterator[str]:
    """A Redis that requires another password than the one its URL carries."""
    with PrivateRedis(password="the-right-one") as server:
        yield f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0"


async def exercise(fanout: RedisFanout) -> None:
    """Every path that logs a Redis error: publish, presence, the pub/sub connection."""
    await fanout.publish("device:x", "{}")
    assert await fanout.listened(["device:x"]) == set()
    with anyio.move_on_after(1.0):  # never confirmed: the supervisor keeps failing and logging
        async with fanout.subscribe("device:x"):
            pass
    await fanout.aclose()


def logged_text(caplog: pytest.LogCaptureFixture) -> str:
    handler = logging.Handler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    return "\n".join(handler.format(record) for record in caplog.records)  # exc_info included


@pytest.mark.anyio
@pytest.mark.parametrize("case", ["nothing listens", "wrong password"])
async def test_redis_errors_are_logged_without_the_urls_password(
    case: str, request: pytest.FixtureRequest, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = NOTHING_LISTENS if case == "nothing listens" else request.getfixturevalue("wrong_password_url")
    caplog.set_level(logging.DEBUG)
    never_open = CircuitBreaker("redis", cooldown_s=0)  # every path tries Redis, so every one logs
    await exercise(RedisFanout(url, namespace=namespace, breaker=never_open))
    text = logged_text(caplog)
    assert "fan-out publish failed" in text
    assert "fan-out presence query failed" in text
    assert "fan-out connection to Redis lost" in text
    assert PASSWORD not in text
