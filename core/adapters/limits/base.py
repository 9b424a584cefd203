"""The rate-limiter Protocol: several layered limits checked and charged all-or-nothing.

Rolling windows are exact sliding logs (the 60th request in any 60 s is the last allowed);
calendar windows reset at the start of the UTC month. ``acquire`` charges every check only
when all of them allow it, so a refused request never burns quota in another layer.
"""

from __future__ import annotations

import calendar
import enum
import functools
import math
import operator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol


class WindowKind(enum.Enum):
    ROLLING = "rolling"
    CALENDAR_MONTH = "month"


@dataclass(frozen=True, slots=True)
class LimitCheck:
    resource: str  # the layer's name, reported in X-RateLimit-Resource (token_burst, ip_minute, …)
    key: str  # what is counted (a token id, an IP, an account)
    limit: int
    window_s: int = 60
    kind: WindowKind = WindowKind.ROLLING

    def bucket(self, now: float) -> tuple[str, float, float]:
        """Storage key, the earliest time still counted, and when an entry charged now expires."""
        if self.kind is WindowKind.CALENDAR_MONTH:
            start, end = month_bounds(now)
            return f"{self.resource}:{self.key}:{int(start)}", start, end
        return f"{self.resource}:{self.key}", now - self.window_s, now + self.window_s


@dataclass(frozen=True, slots=True)
class LimitState:
    resource: str
    limit: int
    remaining: int
    reset_at: int  # epoch seconds when the window frees a slot (rolling) or restarts (calendar)


@dataclass(frozen=True, slots=True)
class LimitDecision:
    allowed: bool
    binding: LimitState  # the refused layer, else the layer with the fewest remaining
    retry_after: int = 0
    layers: tuple[LimitState, ...] = ()  # allowed: every layer in the order of the checks (refused: none)

    def layer(self, resource: str) -> LimitState | None:
        """The state of the layer named ``resource``, if it was checked."""
        for state in self.layers:
            if state.resource == resource:
                return state
        return None


def month_bounds(now: float) -> tuple[float, float]:
    """The UTC calendar month holding ``now``: its first second and the first of the next month."""
    return _month_bounds_of_day(int(now // 86_400))


@functools.lru_cache(maxsize=4)
def _month_bounds_of_day(day: int) -> tuple[float, float]:
    """Every send charges a monthly layer: the bounds are worked out once a day, not per call."""
    moment = datetime.fromtimestamp(day * 86_400, UTC)
    start = datetime(moment.year, moment.month, 1, tzinfo=UTC)
    days = calendar.monthrange(moment.year, moment.month)[1]
    return start.timestamp(), start.timestamp() + days * 86_400


def layer_state(
    check: LimitCheck, now: float, *, used: int, oldest: float | None, cost: int, charge: bool
) -> tuple[LimitState, bool]:
    """One layer's state and whether it allows ``cost`` more, from what its window holds now:
    ``used`` entries (already trimmed to the window), the oldest of them at ``oldest``.
    Shared by every implementation, so they report the same numbers."""
    limit = check.limit
    ok = used + cost <= limit
    counted = used + cost if ok and charge else used
    if check.kind is WindowKind.ROLLING:
        reset_at = math.ceil((now if oldest is None else oldest) + check.window_s)
    else:
        reset_at = math.ceil(month_bounds(now)[1])
    return LimitState(check.resource, limit, limit - counted if counted < limit else 0, reset_at), ok


_TIGHTNESS = operator.attrgetter("remaining", "reset_at")  # the binding layer of an allowed request
_RESET_AT = operator.attrgetter("reset_at")  # the binding layer of a refused one


def decide(states: list[tuple[LimitState, bool]], now: float) -> LimitDecision:
    """Combine per-layer states into one decision (shared by every implementation). On every
    send: list comprehensions and C key functions, not generators and lambdas."""
    refused = [state for state, ok in states if not ok]
    if refused:  # no layers: a refused acquire counted the others as if it had charged them
        binding = min(refused, key=_RESET_AT)
        return LimitDecision(False, binding, retry_after=max(1, binding.reset_at - int(now)))
    layers = tuple([state for state, _ in states])
    return LimitDecision(True, min(layers, key=_TIGHTNESS), layers=layers)


class RateLimiter(Protocol):
    # True when a call waits on the network (Redis): callers on the event loop hand it to a worker
    # thread. An in-process limiter answers in microseconds and may be called on the loop.
    blocking: bool

    def acquire(self, checks: list[LimitCheck], now: float, *, cost: int = 1) -> LimitDecision:
        """Charge ``cost`` to every check if all allow it; otherwise charge nothing."""
        ...

    def acquire_each(self, calls: list[list[LimitCheck]], now: float) -> list[LimitDecision]:
        """``acquire`` of each call (cost 1), one after another in their order, each decided as it
        would be alone: on Redis in one round trip (a group's sends charged together,
        ``core.runtime.ahead``)."""
        ...

    def peek(self, checks: list[LimitCheck], now: float) -> LimitDecision:
        """The decision ``acquire`` would give, without charging."""
        ...

    def reset(self) -> None: ...

    def close(self) -> None:
        """Release connections (the Core calls it when it stops); a later call reconnects."""
        ...
