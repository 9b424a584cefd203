"""Writes of a group charged together: an operation planned up to its charge, the charges of
consecutive planned writes made in one limiter call, then each finished in order.

On Redis a limiter call is a round trip (~60 µs of the caller's CPU here and ~25 of Redis's, besides
the script), made from the group writer's thread while the group's transaction waits: one a send.
An operation that declares how far it can go before its charge (``@charged_ahead(plan)``) lets a
group make its charge with those of the planned writes around it, in one call that decides each as
it would have been decided alone and in the same order (``RateLimiter.acquire_each``).

What stays exactly as when each write runs alone, one after another:

- A write is charged only once it got as far as its charge: ``plan`` does everything before it
  (validation, the account's devices) and refuses as the operation would; a refused plan is not
  charged.
- ``plan`` reads nothing that another write of the group may change (the request, the account's
  devices: ``core.runtime.group_commit``), writes nothing and makes no limiter call (it would not be
  recorded, and a rewrite would make it again), so planning a write before the writes ahead of it
  are finished sees what it would have seen after them. An operation whose part before its charge
  reads more (a send with an attachment or an urgent receipt) returns ``None`` from ``plan`` and
  runs as usual, after the planned writes before it are charged and finished.
- ``finish`` runs the rest, the operation's own code, whose charge (``tx.limiter.acquire``) is
  answered with the decision made for it (``ReplayingLimiter``); the decision and every later
  limiter call are recorded as a write's calls always are, so a transaction written again in
  savepoints charges nothing twice (``core.runtime.group_transaction``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from core.adapters.limits.base import LimitCheck
from core.adapters.limits.recorded import LimiterCall, RecordingLimiter, ReplayingLimiter
from core.principal import Principal
from core.runtime.tx import Tx

F = TypeVar("F", bound=Callable[..., Any])

PLAN_MARK = "__relaybox_charged_ahead__"


@dataclass(frozen=True, slots=True)
class Planned:
    """A write planned up to its charge: what it will charge (``acquire(checks)``, cost 1) and the
    rest of the operation, called with the write's ``Tx`` once the charge is decided."""

    checks: list[LimitCheck]
    finish: Callable[[Tx], Any]


# Called as the operation is: with its Tx, principal and arguments. ``None``: run it as usual.
Plan = Callable[..., Planned | None]


def charged_ahead(plan: Plan) -> Callable[[F], F]:
    """Mark a ``@group_commit`` operation that ``plan`` takes as far as its charge (see the module)."""

    def mark(op: F) -> F:
        setattr(op, PLAN_MARK, plan)
        return op

    return mark


@dataclass(slots=True)
class Ahead:
    """A write of the group planned and not yet finished; ``calls`` is the record of its limiter
    calls the group keeps (empty until its charge is decided)."""

    index: int  # in the group
    tx: Tx
    calls: list[LimiterCall]
    planned: Planned | Exception  # the error its plan refused it with: it fails with that, uncharged


def planned(
    op: Callable[..., Any], tx: Tx, principal: Principal, args: tuple[Any, ...], kw: dict[str, Any]
) -> Planned | Exception | None:
    """The write planned (or the error its plan raised); ``None`` when it runs as usual."""
    plan: Plan | None = getattr(op, PLAN_MARK, None)
    if plan is None:
        return None
    try:
        return plan(tx, principal, *args, **kw)
    except Exception as error:
        return error


def charge_together(ahead: list[Ahead]) -> None:
    """Make the charges of the planned writes in ``ahead`` in one limiter call; each write's ``Tx``
    then answers its charge with its decision, recorded on ``calls`` at once (a rewrite replays it
    even when the write was not finished), as is every call after it. When the call fails (Redis
    down), each write fails with its error, as its own call would have made it fail."""
    charged = [(write, write.planned) for write in ahead if isinstance(write.planned, Planned)]
    if not charged:
        return
    limiter = charged[0][0].tx.limiter
    try:
        decisions = limiter.acquire_each([plan.checks for _, plan in charged], charged[0][0].tx.clock.now())
    except Exception as error:
        for write, _ in charged:
            write.planned = error
        return
    for (write, plan), decision in zip(charged, decisions, strict=True):
        answer = LimiterCall(True, tuple(plan.checks), 1, decision)
        write.calls.append(answer)  # recorded now: a write charged and not yet finished has its charge
        write.tx.limiter = ReplayingLimiter(RecordingLimiter(limiter, write.calls), [answer])
