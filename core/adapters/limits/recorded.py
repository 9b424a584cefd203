"""A limiter's decisions recorded on a write's first run and given back when it runs again.

A group commit writes its group first without a savepoint a write (``core.runtime.group_transaction``);
should a write fail after changing rows, the transaction is rolled back and the writes before it run
again. Their rate limits were charged on the first run and must not be charged twice: each write's
first run goes through a ``RecordingLimiter``, its second through a ``ReplayingLimiter`` over that
record, which answers the same calls with the same decisions without asking the limiter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.adapters.limits.base import LimitCheck, LimitDecision, RateLimiter


@dataclass(frozen=True, slots=True)
class LimiterCall:
    charge: bool  # acquire, else peek
    checks: tuple[LimitCheck, ...]
    cost: int
    decision: LimitDecision


@dataclass(slots=True)
class _OverLimiter:
    """A limiter in front of ``limiter``: what it does not answer itself, ``limiter`` does."""

    limiter: RateLimiter
    blocking: bool = field(init=False)

    def __post_init__(self) -> None:
        self.blocking = self.limiter.blocking

    def reset(self) -> None:
        self.limiter.reset()

    def close(self) -> None:
        self.limiter.close()


@dataclass(slots=True)
class RecordingLimiter(_OverLimiter):
    """``limiter``, every call and its decision appended to ``calls``."""

    calls: list[LimiterCall] = field(default_factory=list)

    def acquire(self, checks: list[LimitCheck], now: float, *, cost: int = 1) -> LimitDecision:
        decision = self.limiter.acquire(checks, now, cost=cost)
        self.calls.append(LimiterCall(True, tuple(checks), cost, decision))
        return decision

    def acquire_each(self, calls: list[list[LimitCheck]], now: float) -> list[LimitDecision]:
        decisions = self.limiter.acquire_each(calls, now)
        self.calls += [LimiterCall(True, tuple(c), 1, d) for c, d in zip(calls, decisions, strict=True)]
        return decisions

    def peek(self, checks: list[LimitCheck], now: float) -> LimitDecision:
        decision = self.limiter.peek(checks, now)
        self.calls.append(LimiterCall(False, tuple(checks), 1, decision))
        return decision


@dataclass(slots=True)
class ReplayingLimiter(_OverLimiter):
    """Answers the calls of ``recorded``, in their order, with their decisions; a call the record
    does not hold next (the write took another path this time) goes to ``limiter``, as does every
    call after it."""

    recorded: list[LimiterCall] = field(default_factory=list)
    _next: int = 0

    def acquire(self, checks: list[LimitCheck], now: float, *, cost: int = 1) -> LimitDecision:
        replayed = self._replay(True, checks, cost)
        return replayed if replayed is not None else self.limiter.acquire(checks, now, cost=cost)

    def acquire_each(self, calls: list[list[LimitCheck]], now: float) -> list[LimitDecision]:
        return [self.acquire(checks, now) for checks in calls]

    def peek(self, checks: list[LimitCheck], now: float) -> LimitDecision:
        replayed = self._replay(False, checks, 1)
        return replayed if replayed is not None else self.limiter.peek(checks, now)

    def _replay(self, charge: bool, checks: list[LimitCheck], cost: int) -> LimitDecision | None:
        if self._next < len(self.recorded):
            call = self.recorded[self._next]
            if call.charge == charge and call.cost == cost and call.checks == tuple(checks):
                self._next += 1
                return call.decision
        self._next = len(self.recorded)  # off the record: from here on every call is a new one
        return None
