"""In-process rate limiter: exact sliding logs in a dict, guarded by one lock."""

from __future__ import annotations

import threading
from collections import deque
from itertools import repeat

from core.adapters.limits.base import LimitCheck, LimitDecision, LimitState, decide, layer_state


class MemoryRateLimiter:
    blocking = False  # a dict behind a lock held for microseconds: callable on the event loop

    def __init__(self) -> None:
        self._logs: dict[str, deque[float]] = {}
        self._expiry: dict[str, float] = {}
        self._lock = threading.Lock()
        self._next_sweep = 0.0

    def acquire(self, checks: list[LimitCheck], now: float, *, cost: int = 1) -> LimitDecision:
        return self._evaluate(checks, now, cost, charge=True)

    def acquire_each(self, calls: list[list[LimitCheck]], now: float) -> list[LimitDecision]:
        return [self._evaluate(checks, now, 1, charge=True) for checks in calls]

    def peek(self, checks: list[LimitCheck], now: float) -> LimitDecision:
        return self._evaluate(checks, now, 1, charge=False)

    def reset(self) -> None:
        with self._lock:
            self._logs.clear()
            self._expiry.clear()

    def close(self) -> None:
        """Nothing to release: the counts live in this process."""

    def _evaluate(self, checks: list[LimitCheck], now: float, cost: int, *, charge: bool) -> LimitDecision:
        with self._lock:
            if now >= self._next_sweep:
                self._sweep(now)
            states: list[tuple[LimitState, bool]] = []
            logs: list[tuple[deque[float], float, str]] = []
            for check in checks:
                key, since, expires = check.bucket(now)
                log = self._logs.get(key)
                if log is None:
                    log = self._logs[key] = deque()
                while log and log[0] <= since:
                    log.popleft()
                oldest = log[0] if log else None
                states.append(layer_state(check, now, used=len(log), oldest=oldest, cost=cost, charge=charge))
                logs.append((log, expires, key))
            decision = decide(states, now)
            if decision.allowed and charge:
                expiry = self._expiry
                for log, expires, key in logs:
                    log.extend(repeat(now, cost))
                    if expiry.get(key, 0.0) < expires:
                        expiry[key] = expires
            return decision

    def _sweep(self, now: float) -> None:
        """Drop buckets whose every entry has expired, so idle keys do not accumulate (once a
        minute)."""
        self._next_sweep = now + 60
        for key in [k for k, at in self._expiry.items() if at <= now]:
            self._expiry.pop(key, None)
            self._logs.pop(key, None)
