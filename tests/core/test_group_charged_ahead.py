"""Sends of a group charged together (``core.runtime.ahead``): one limiter call for the planned
sends next to each other, each decided as it would have been alone and in its order; a send
refused before its charge is not charged; a transaction written again in savepoints charges no
write twice, those after the failed one included."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from core.adapters.limits.base import LimitCheck, LimitDecision, RateLimiter
from core.errors import RelayError
from core.principal import Principal
from core.queue import enqueue
from core.runtime.ahead import Planned, charged_ahead
from core.runtime.core import Core
from core.runtime.marks import group_commit
from core.runtime.tx import Tx
from core.services.relay import read_queue
from core.services.send import SendOut, send_notification
from tests.core.pairs import paired
from tests.core.test_group_commit import SEND_BURST, Call, queue_then_fail, run_all, send_limited, sender

pytestmark = pytest.mark.anyio
__all__ = ["send_limited"]  # the fixture, used here by name


class CountedCalls:
    """Counts the calls that reach ``limiter``: ``acquire`` and ``acquire_each`` (with their sizes)."""

    def __init__(self, limiter: RateLimiter, monkeypatch: pytest.MonkeyPatch) -> None:
        self.acquires = 0
        self.together: list[int] = []
        acquire, acquire_each = limiter.acquire, limiter.acquire_each

        def counted_acquire(checks: list[LimitCheck], now: float, *, cost: int = 1) -> LimitDecision:
            self.acquires += 1
            return acquire(checks, now, cost=cost)

        def counted_each(calls: list[list[LimitCheck]], now: float) -> list[LimitDecision]:
            self.together.append(len(calls))
            return acquire_each(calls, now)

        monkeypatch.setattr(limiter, "acquire", counted_acquire)
        monkeypatch.setattr(limiter, "acquire_each", counted_each)


async def counted_sender(core: Core, monkeypatch: pytest.MonkeyPatch) -> tuple[Principal, CountedCalls]:
    """A sender token of a paired account, and the limiter's calls counted from now on."""
    token = await sender(core, await paired(core))
    return token, CountedCalls(core.limiter, monkeypatch)


def sends(count: int, **fields: Any) -> list[Call]:
    return [
        (send_notification, {"fields": {"message": f"build {n} done", **fields}, "ip": "10.9.9.9"})
        for n in range(count)
    ]


async def test_the_sends_of_a_group_are_charged_in_one_call_each_as_if_alone(
    send_limited: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = send_limited
    token, counted = await counted_sender(core, monkeypatch)

    outcomes = await run_all(core, token, sends(30))

    # in the order they were submitted: the first SEND_BURST sent, the rest refused
    assert [isinstance(o, SendOut) for o in outcomes] == [n < SEND_BURST for n in range(30)]
    assert all(o.code == "rate_limit_exceeded" for o in outcomes[SEND_BURST:])
    assert [o.rate_limit.remaining for o in outcomes[:SEND_BURST]] == list(range(SEND_BURST - 1, -1, -1))
    assert counted.acquires + sum(counted.together) == 30  # each charged once
    assert counted.acquires + len(counted.together) <= 3  # the first alone, the rest together


async def test_a_send_refused_before_its_charge_is_not_charged_with_the_others(
    send_limited: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = send_limited
    token, counted = await counted_sender(core, monkeypatch)
    calls = sends(12)
    for bad in (3, 7):  # refused by validation: no charge
        calls[bad] = (
            send_notification,
            {"fields": {"message": "x", "priority": "loudest"}, "ip": "10.9.9.9"},
        )
    calls[9] = (
        send_notification,
        {"fields": {"message": "x", "device": "no such device"}, "ip": "10.9.9.9"},
    )

    outcomes = await run_all(core, token, calls)

    refused = [n for n, o in enumerate(outcomes) if isinstance(o, RelayError)]
    assert refused == [3, 7, 9], outcomes
    assert counted.acquires + sum(counted.together) == 9
    burst = LimitCheck("token_burst", str(token.token_id), SEND_BURST)
    assert core.limiter.peek([burst], core.clock.now()).binding.remaining == SEND_BURST - 9


async def test_an_urgent_repeating_send_is_charged_after_the_sends_before_it(
    send_limited: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its part before the charge reads the account's receipts: it runs as usual, once the sends
    planned before it are charged and written."""
    core = send_limited
    token, counted = await counted_sender(core, monkeypatch)
    calls = sends(8)
    calls[4] = (
        send_notification,
        {"fields": {"message": "wake up", "priority": "urgent", "repeat": 60}, "ip": "10.9.9.9"},
    )

    outcomes = await run_all(core, token, calls)

    assert all(isinstance(o, SendOut) for o in outcomes), outcomes
    assert outcomes[4].receipt is not None
    assert counted.acquires + sum(counted.together) == 8
    assert counted.acquires >= 1  # the urgent one, alone


@group_commit
def _charged_then_queued(tx: Tx, principal: Principal, *, name: str, fail: bool) -> None:
    """Charges one send-like layer, queues a row, then fails when told to (after changing rows)."""
    decision = tx.limiter.acquire([_layer(principal)], tx.clock.now())
    if not decision.allowed:
        raise RelayError("rate_limit_exceeded")
    assert principal.device_id is not None
    enqueue(tx, principal.device_id, sender="test", type="ping", blob=name.encode(), ttl_s=60)
    if fail:
        raise RelayError("not_found")


def _layer(principal: Principal) -> LimitCheck:
    return LimitCheck("token_burst", f"ahead-{principal.device_id}", 100)


def _plan(tx: Tx, principal: Principal, *, name: str, fail: bool) -> Planned:
    return Planned([_layer(principal)], lambda tx: _charged_then_queued(tx, principal, name=name, fail=fail))


charged_then_queued = charged_ahead(_plan)(_charged_then_queued)


async def test_writes_charged_together_are_charged_once_when_one_fails_after_changing_rows(
    running: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failed write's transaction is written again in savepoints: the writes before it and the
    ones after it charged with it answer from their first charge; only then do new ones charge."""
    core = running
    pair = await paired(core)
    counted = CountedCalls(core.limiter, monkeypatch)
    calls: list[Call] = [(charged_then_queued, {"name": f"w{n}", "fail": n == 5}) for n in range(12)]
    calls.insert(9, (queue_then_fail, {"recipient": pair.computer.device_id}))  # not planned: a flush

    outcomes = await run_all(core, pair.computer, calls)

    assert [n for n, o in enumerate(outcomes) if isinstance(o, RelayError)] == [5, 9]
    assert core.group_rewrites.count >= 1
    assert counted.acquires + sum(counted.together) == 12  # each of the 12 charged once
    layer = _layer(pair.computer)
    assert core.limiter.peek([layer], core.clock.now()).binding.remaining == 100 - 12
    queued = await core.run(read_queue, pair.computer, after=0)
    written = sorted(item.blob for item in queued.items if item.sender == "test")
    expected = sorted(base64.b64encode(f"w{n}".encode()).decode() for n in range(12) if n != 5)
    assert written == expected  # each written once, w5's rows undone
