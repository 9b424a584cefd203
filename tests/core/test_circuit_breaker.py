"""The circuit breaker in front of Redis: fail fast while it is down, one trial per cool-down, and
any sign of life closes it."""

from __future__ import annotations

import pytest

from core.availability import CircuitBreaker, DependencyUnavailableError


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_closed_breaker_lets_every_call_through() -> None:
    breaker = CircuitBreaker("redis", cooldown_s=5, clock=Ticks())
    assert all(breaker.allow() for _ in range(3)) and not breaker.tripped


def test_after_a_failure_calls_fail_at_once_until_the_cool_down_ends() -> None:
    clock = Ticks()
    breaker = CircuitBreaker("redis", cooldown_s=5, clock=clock)
    breaker.failed()
    with pytest.raises(DependencyUnavailableError):
        breaker.check()
    clock.now += 4.9
    assert not breaker.allow()
    clock.now += 0.2
    assert breaker.allow()  # the trial
    assert not breaker.allow()  # the others wait for the trial's outcome


def test_a_failed_trial_opens_it_again_and_a_success_closes_it() -> None:
    clock = Ticks()
    breaker = CircuitBreaker("redis", cooldown_s=5, clock=clock)
    breaker.failed()
    clock.now += 5
    assert breaker.allow()
    breaker.failed()
    clock.now += 4
    assert not breaker.allow()
    breaker.succeeded()  # e.g. the pub/sub connection heard from Redis
    assert breaker.allow() and breaker.allow() and not breaker.tripped
