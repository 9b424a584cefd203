"""The delivery state every callback row keeps, a question's (``interaction_callbacks``) and an
urgent notification's (``receipt_callbacks``) alike: the due rows claimed under a lease, and an
attempt's outcome recorded with the retry schedule.

Claiming moves each due row's ``due_at`` a lease (``LEASE_S``) ahead under a fresh ``claim`` in one
conditional UPDATE, so two replicas never send the same attempt at once; a replica that dies
mid-attempt leaves it due again when the lease ends. An outcome is recorded only while the
attempt's claim holds. A failure is retried after ``RETRY_AFTER_S`` (or the receiver's longer
``Retry-After``, up to the longest of them) until the attempts run out; 410 Gone stops at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import Table, func, select, update

from core.adapters.webhooks.poster import Outcome
from core.domain.secrets import new_prefixed_id
from core.runtime.core import Core
from core.runtime.tx import Tx

log = logging.getLogger("relaybox.callbacks")

BATCH = 20  # attempts claimed, and sent at once, per round
LEASE_S = 60  # past one attempt's 10 s: a claim outlives its attempt unless its replica died
# Wait after the 1st, 2nd, … failed attempt; the attempt after the last wait is the last.
RETRY_AFTER_S = (10, 30, 120, 600, 1800, 3600, 10_800)
MAX_ATTEMPTS = len(RETRY_AFTER_S) + 1


def retry_delay(failed_attempts: int, asked_s: int | None) -> int:
    """The wait before the next attempt: the schedule's, or longer when the receiver's Retry-After
    asks (up to the schedule's longest wait, so a receiver cannot postpone a callback for ever)."""
    scheduled = RETRY_AFTER_S[failed_attempts - 1]
    return scheduled if asked_s is None else max(scheduled, min(asked_s, RETRY_AFTER_S[-1]))


def claim_due(tx: Tx, table: Table, key: str, *columns: str) -> tuple[str, list[tuple[Any, ...]]]:
    """Claim up to ``BATCH`` rows of ``table`` due now; the claim, and for each row its ``key``,
    ``columns`` and (last) its attempt's number."""
    now = tx.now()
    due_at = table.c.due_at
    due = tx.session.execute(select(table.c[key]).where(due_at <= now).order_by(due_at).limit(BATCH))
    keys = list(due.scalars())
    if not keys:
        return "", []
    claim = new_prefixed_id("clm")
    claimed = tx.session.execute(
        update(table)
        .where(table.c[key].in_(keys), due_at <= now)
        .values(due_at=now + LEASE_S, claim=claim, attempts=table.c.attempts + 1)
        .returning(table.c[key], *(table.c[name] for name in columns), table.c.attempts)
    )
    return claim, [tuple(row) for row in claimed]


def record_outcome(
    tx: Tx, table: Table, key: str, value: str, *, claim: str, number: int, outcome: Outcome
) -> tuple[str, bool]:
    """Record attempt ``number`` of the row whose ``key`` is ``value``, if ``claim`` still holds:
    the row's state (delivered, failed, pending) and whether it was recorded."""
    now = tx.now()
    values: dict[str, object] = {"claim": None, "last_status": outcome.status, "last_error": outcome.error}
    if outcome.error is None:
        state, values["due_at"], values["delivered_at"] = "delivered", None, now
    elif outcome.final or number >= MAX_ATTEMPTS:
        state, values["due_at"], values["failed_at"] = "failed", None, now
    else:
        state, values["due_at"] = "pending", now + retry_delay(number, outcome.retry_after_s)
    recorded = tx.session.execute(
        update(table).where(table.c[key] == value, table.c.claim == claim).values(**values)
    )
    return state, getattr(recorded, "rowcount", 0) == 1


def earliest_due(tx: Tx, *tables: Table) -> int | None:
    """When the earliest row of ``tables`` is due (an index read each)."""
    dues = [tx.session.execute(select(func.min(table.c.due_at))).scalar() for table in tables]
    found = [due for due in dues if due is not None]
    return min(found) if found else None


async def post_and_record(
    core: Core,
    *,
    of: str,
    number: int,
    url: str,
    headers: dict[str, str],
    body: bytes,
    record: Callable[[Outcome], Awaitable[str]],
) -> None:
    """One attempt: the POST (through the one outbound poster), then ``record`` of its outcome.
    The log names the callback's owner (``of``) and the outcome, never the URL or the body."""
    outcome = await core.webhooks.post(url, headers, body)
    try:
        state = await record(outcome)
    except Exception:  # the lease runs out and the attempt is made again
        log.warning("callback of %s: its outcome was not recorded", of, exc_info=True)
        return
    log.info("callback of %s, attempt %d: %s (%s)", of, number, outcome.error or "delivered", state)
