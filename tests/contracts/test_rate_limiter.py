"""The rate-limiter contract: one body for every implementation (memory, Redis), then what only
the shared Redis limiter promises: replicas share counts, one round trip a call, atomic charges."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis

from core.adapters.limits.base import LimitCheck, RateLimiter, WindowKind, month_bounds
from core.adapters.limits.memory import MemoryRateLimiter
from core.adapters.limits.redis import RedisRateLimiter

NOW = 1_800_000_000.0


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def limiter(request: pytest.FixtureRequest, namespace: str) -> Iterator[RateLimiter]:
    if request.param == "memory":
        memory = MemoryRateLimiter()
        yield memory
        memory.reset()
        return
    shared = RedisRateLimiter(request.getfixturevalue("redis_url"), namespace=namespace)
    try:
        yield shared
    finally:
        shared.reset()
        shared.close()


def test_a_rolling_window_allows_exactly_the_limit(limiter: RateLimiter) -> None:
    check = LimitCheck("token_burst", "tok_1", 3, 60)
    results = [limiter.acquire([check], NOW + i).allowed for i in range(4)]
    assert results == [True, True, True, False]


def test_remaining_counts_down_and_reset_is_when_the_oldest_slot_frees(limiter: RateLimiter) -> None:
    check = LimitCheck("token_burst", "tok_1", 3, 60)
    first = limiter.acquire([check], NOW)
    assert (first.binding.remaining, first.binding.reset_at) == (2, int(NOW) + 60)
    limiter.acquire([check], NOW + 10)
    third = limiter.acquire([check], NOW + 20)
    assert third.binding.remaining == 0
    refused = limiter.acquire([check], NOW + 30)
    assert not refused.allowed
    assert refused.retry_after == 30
    assert limiter.acquire([check], NOW + 60).allowed


def test_a_refused_layer_charges_no_other_layer(limiter: RateLimiter) -> None:
    burst = LimitCheck("token_burst", "tok_1", 10, 60)
    daily = LimitCheck("receiver_daily", "acct", 1, 86_400)
    assert limiter.acquire([burst, daily], NOW).allowed
    refused = limiter.acquire([burst, daily], NOW + 1)
    assert not refused.allowed and refused.binding.resource == "receiver_daily"
    assert limiter.peek([burst], NOW + 2).binding.remaining == 9


def test_an_allowed_decision_reports_every_layer_as_a_peek_of_it_alone_would(limiter: RateLimiter) -> None:
    burst = LimitCheck("token_burst", "tok_1", 10, 60)
    monthly = LimitCheck("token_monthly", "tok_1", 100, kind=WindowKind.CALENDAR_MONTH)
    limiter.acquire([monthly], NOW - 5)
    charged = limiter.acquire([burst, monthly], NOW)
    assert [layer.resource for layer in charged.layers] == ["token_burst", "token_monthly"]
    assert charged.layer("token_monthly") == limiter.peek([monthly], NOW).binding
    assert charged.layer("token_monthly").remaining == 98  # type: ignore[union-attr]
    assert charged.layer("receiver_daily") is None
    refused = limiter.acquire([burst, LimitCheck("receiver_daily", "acct", 0, 86_400)], NOW + 1)
    assert not refused.allowed and refused.layers == ()


def test_peek_charges_nothing(limiter: RateLimiter) -> None:
    check = LimitCheck("ip_minute", "1.2.3.4", 1, 60)
    for _ in range(5):
        assert limiter.peek([check], NOW).allowed
    assert limiter.acquire([check], NOW).allowed


def test_the_binding_layer_of_an_allowed_request_is_the_one_with_fewest_remaining(
    limiter: RateLimiter,
) -> None:
    decision = limiter.acquire(
        [LimitCheck("ip_minute", "ip", 20, 60), LimitCheck("ip_hour", "ip", 5, 3600)], NOW
    )
    assert decision.binding.resource == "ip_hour" and decision.binding.remaining == 4


def test_a_calendar_month_resets_at_the_start_of_the_next_utc_month(limiter: RateLimiter) -> None:
    check = LimitCheck("token_monthly", "tok_1", 2, kind=WindowKind.CALENDAR_MONTH)
    start, end = month_bounds(NOW)
    assert limiter.acquire([check], end - 2).allowed
    assert limiter.acquire([check], end - 1).allowed
    refused = limiter.acquire([check], end - 0.5)
    assert not refused.allowed and refused.binding.reset_at == int(end)
    assert limiter.acquire([check], end).allowed
    assert start < NOW < end


def test_keys_are_independent(limiter: RateLimiter) -> None:
    assert limiter.acquire([LimitCheck("ip_minute", "a", 1, 60)], NOW).allowed
    assert limiter.acquire([LimitCheck("ip_minute", "b", 1, 60)], NOW).allowed
    assert not limiter.acquire([LimitCheck("ip_minute", "a", 1, 60)], NOW).allowed


def test_a_cost_is_charged_whole_or_not_at_all(limiter: RateLimiter) -> None:
    check = LimitCheck("token_burst", "tok_1", 5, 60)
    assert limiter.acquire([check], NOW, cost=3).binding.remaining == 2
    refused = limiter.acquire([check], NOW + 1, cost=3)
    assert not refused.allowed and refused.binding.remaining == 2
    assert limiter.acquire([check], NOW + 2, cost=2).binding.remaining == 0


def test_an_entry_leaves_the_window_exactly_window_seconds_later(limiter: RateLimiter) -> None:
    check = LimitCheck("ip_minute", "ip", 1, 60)
    assert limiter.acquire([check], NOW + 0.25).allowed
    assert not limiter.acquire([check], NOW + 60.2).allowed
    assert limiter.acquire([check], NOW + 60.25).allowed


# -- Redis only ------------------------------------------------------------------------------------


def test_acquire_each_decides_each_call_as_acquires_one_after_another_would(limiter: RateLimiter) -> None:
    burst = LimitCheck("token_burst", "tok", 3, 60)
    others = [LimitCheck("ip_minute", "ip", 100, 60), LimitCheck("receiver_daily", "acc", 100, 86_400)]
    alone = LimitCheck("token_burst", "other", 3, 60)
    calls = [[burst, *others], [alone], [burst, *others], [burst, *others], [burst, *others], [alone]]

    decisions = limiter.acquire_each(calls, NOW)

    assert [d.allowed for d in decisions] == [True, True, True, True, False, True]
    assert [d.binding.remaining for d in decisions[:4]] == [2, 2, 1, 0]
    assert decisions[4].binding.resource == "token_burst" and decisions[4].retry_after == 60
    assert decisions[5].binding.remaining == 1
    # the refused call charged no layer; each allowed one charged every layer once
    assert limiter.peek(others, NOW).layers[0].remaining == 100 - 3
    assert limiter.acquire_each([], NOW) == []


@pytest.fixture
def replicas(redis_url: str, namespace: str) -> Iterator[tuple[RedisRateLimiter, RedisRateLimiter]]:
    first = RedisRateLimiter(redis_url, namespace=namespace)
    second = RedisRateLimiter(redis_url, namespace=namespace)
    try:
        yield first, second
    finally:
        first.reset()
        first.close()
        second.close()


@pytest.mark.redis
def test_two_replicas_share_their_counts(replicas: tuple[RedisRateLimiter, RedisRateLimiter]) -> None:
    first, second = replicas
    check = LimitCheck("token_burst", "tok_1", 3, 60)
    assert first.acquire([check], NOW).allowed
    assert second.acquire([check], NOW + 1).allowed
    assert first.acquire([check], NOW + 2).binding.remaining == 0
    refused = second.acquire([check], NOW + 3)
    assert not refused.allowed and refused.retry_after == 57
    second.reset()
    assert first.peek([check], NOW + 4).binding.remaining == 3


@pytest.mark.redis
def test_concurrent_acquires_on_two_replicas_never_exceed_the_limit(
    replicas: tuple[RedisRateLimiter, RedisRateLimiter],
) -> None:
    burst = LimitCheck("token_burst", "tok_1", 37, 60)
    daily = LimitCheck("receiver_daily", "acct", 1000, 86_400)
    allowed: list[bool] = []
    lock = threading.Lock()

    def hammer(limiter: RedisRateLimiter) -> None:
        for n in range(10):
            decision = limiter.acquire([daily, burst], NOW + n / 100)
            with lock:
                allowed.append(decision.allowed)

    threads = [threading.Thread(target=hammer, args=(replicas[n % 2],)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert allowed.count(True) == 37 and len(allowed) == 80
    assert replicas[0].peek([daily], NOW + 1).binding.remaining == 1000 - 37  # refused calls charged nothing


@pytest.mark.redis
def test_reset_forgets_only_its_own_namespace(redis_url: str, namespace: str) -> None:
    mine = RedisRateLimiter(redis_url, namespace=namespace)
    theirs = RedisRateLimiter(redis_url, namespace=namespace + "-other")
    bystander = redis.Redis.from_url(redis_url)
    unrelated = f"{namespace}-unrelated"
    check = LimitCheck("ip_minute", "ip", 5, 60)
    try:
        bystander.set(unrelated, "kept", ex=60)
        mine.acquire([check], NOW)
        theirs.acquire([check], NOW)
        mine.reset()
        assert mine.peek([check], NOW).binding.remaining == 5
        assert theirs.peek([check], NOW).binding.remaining == 4
        assert bystander.get(unrelated) == b"kept"
    finally:
        theirs.reset()
        bystander.delete(unrelated)
        for client in (mine, theirs, bystander):
            client.close()


@pytest.mark.redis
def test_an_acquire_is_one_round_trip_that_runs_the_script(
    redis_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted on the server: MONITOR sees every command of the limiter's named connection; calls
    made together are written to it at once."""
    separator = "&" if "?" in redis_url else "?"
    limiter = RedisRateLimiter(f"{redis_url}{separator}client_name={namespace}", namespace=namespace)
    admin = redis.Redis.from_url(redis_url, socket_timeout=10)
    layers = [
        LimitCheck("ip_minute", "ip", 20, 60),
        LimitCheck("ip_hour", "ip", 200, 3600),
        LimitCheck("token_monthly", "tok", 500, kind=WindowKind.CALENDAR_MONTH),
    ]
    marker = f"{namespace}-done"
    try:
        limiter.acquire(layers, NOW)  # connects, and loads the script if the server lacks it
        with admin.monitor() as monitor:  # type: ignore[no-untyped-call]
            for n in range(3):
                limiter.acquire(layers, NOW + n)
            limiter.peek(layers, NOW + 3)
            sent = _counting_sends(monkeypatch)
            limiter.acquire_each([layers] * 5, NOW + 4)  # pipelined: 5 scripts, one round trip
            assert len(sent) == 1
            admin.echo(marker)
            seen: list[tuple[str, str]] = []
            while marker not in (command := monitor.next_command())["command"]:
                seen.append((f"{command['client_address']}:{command['client_port']}", command["command"]))
        addresses = {client["addr"] for client in admin.client_list() if client["name"] == namespace}
        commands = [text for address, text in seen if address in addresses]
        assert len(commands) == 9, commands
        assert all(text.startswith("EVALSHA ") for text in commands), commands
    finally:
        limiter.reset()
        limiter.close()
        admin.close()


def _counting_sends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the writes to Redis connections from now on (one a round trip)."""
    sent: list[int] = []
    send = redis.connection.AbstractConnection.send_packed_command

    def counted(
        connection: redis.connection.AbstractConnection, command: object, check_health: bool = True
    ) -> None:
        sent.append(1)
        send(connection, command, check_health)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
    return sent


@pytest.mark.redis
def test_each_key_lives_as_long_as_a_charge_in_it_counts(redis_url: str, namespace: str) -> None:
    """A rolling window's key lives a window past its newest charge (each charge sets it anew); a
    month's key lives until its month ends (set when its first charge creates it)."""
    limiter = RedisRateLimiter(redis_url, namespace=namespace)
    admin = redis.Redis.from_url(redis_url, socket_timeout=10)
    rolling = LimitCheck("token_burst", "tok", 60, 60)
    monthly = LimitCheck("token_monthly", "tok", 500, kind=WindowKind.CALENDAR_MONTH)
    rolling_key, monthly_key = (f"{namespace}:limit:{check.bucket(NOW)[0]}" for check in (rolling, monthly))
    until_month_end_ms = (month_bounds(NOW)[1] - NOW) * 1000
    try:
        assert limiter.acquire([rolling, monthly], NOW).allowed
        assert 55_000 < admin.pttl(rolling_key) <= 60_000
        assert until_month_end_ms - 5_000 < admin.pttl(monthly_key) <= until_month_end_ms
        admin.pexpire(rolling_key, 1_000)  # as if its newest charge were almost a window old
        admin.pexpire(monthly_key, 1_000)
        assert limiter.acquire([rolling, monthly], NOW + 1).allowed
        assert 55_000 < admin.pttl(rolling_key) <= 60_000  # a window past the new charge
        assert admin.pttl(monthly_key) <= 1_000  # still the month's end, as first set
        assert limiter.peek([rolling, monthly], NOW + 2).binding.remaining == 58
    finally:
        limiter.reset()
        limiter.close()
        admin.close()


@pytest.mark.redis
def test_a_limiter_carries_on_after_redis_drops_its_connection_and_forgets_its_script(
    redis_url: str, namespace: str
) -> None:
    """As after a Redis restart: the idle connection is gone (one more try, connected afresh) and
    the server no longer has the script (EVALSHA answers NOSCRIPT: EVAL it). Counts stay exact."""
    separator = "&" if "?" in redis_url else "?"
    limiter = RedisRateLimiter(f"{redis_url}{separator}client_name={namespace}", namespace=namespace)
    admin = redis.Redis.from_url(redis_url, socket_timeout=10)
    check = LimitCheck("token_burst", "tok", 3, 60)
    try:
        assert limiter.acquire([check], NOW).allowed
        for client in admin.client_list():
            if client["name"] == namespace:
                admin.client_kill_filter(_id=client["id"])
        assert limiter.acquire([check], NOW + 1).binding.remaining == 1
        admin.script_flush()
        assert limiter.acquire([check], NOW + 2).binding.remaining == 0
        assert not limiter.acquire([check], NOW + 3).allowed
        admin.script_flush()  # and for calls made together: each charged once
        other = LimitCheck("token_burst", "other", 3, 60)
        decisions = limiter.acquire_each([[other], [check], [other]], NOW + 4)
        assert [(d.allowed, d.binding.remaining) for d in decisions] == [(True, 2), (False, 0), (True, 1)]
        assert limiter.peek([other], NOW + 5).binding.remaining == 1
    finally:
        limiter.reset()
        limiter.close()
        admin.close()


@pytest.mark.parametrize(
    ("moment", "start", "end"),
    [
        ("2026-11-30T23:59:59.5", "2026-11-01", "2026-12-01"),
        ("2026-12-01T00:00:00", "2026-12-01", "2027-01-01"),
        ("2028-02-29T12:00:00", "2028-02-01", "2028-03-01"),
        ("2027-02-28T23:59:59", "2027-02-01", "2027-03-01"),
    ],
)
def test_month_bounds_are_the_utc_calendar_month(moment: str, start: str, end: str) -> None:
    def epoch(text: str) -> float:
        return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()

    assert month_bounds(epoch(moment)) == (epoch(start), epoch(end))
