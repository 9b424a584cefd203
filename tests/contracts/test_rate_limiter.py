"""The rate-limiter contract: one body for every implementation (memory now; Redis with scale-out)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.adapters.limits.base import LimitCheck, RateLimiter, WindowKind, month_bounds
from core.adapters.limits.memory import MemoryRateLimiter

NOW = 1_800_000_000.0


@pytest.fixture(params=["memory"])
def limiter(request: pytest.FixtureRequest) -> Iterator[RateLimiter]:
    implementation = MemoryRateLimiter()
    yield implementation
    implementation.reset()


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
