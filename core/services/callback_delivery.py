"""Answer callbacks, the sending side: each due callback is claimed by one replica, POSTed signed,
and its outcome recorded; a failure is retried after ``RETRY_AFTER_S`` (or the receiver's longer
``Retry-After``, up to the longest of them) until the attempts run out.

Claiming moves the row's ``due_at`` a lease (``LEASE_S``) ahead under a fresh ``claim`` in one
conditional UPDATE, so two replicas never send the same attempt at once; a replica that dies
mid-attempt leaves it due again when the lease ends. Delivery is at least once: a receiver that
answered 2xx to a POST whose outcome was not recorded gets it again, with the same webhook-id.

The body is built anew for each attempt from the interaction, as GET would show it, with the typed
reply's text if no read took it yet (``typed_replies.waiting_text``); the text is taken, as by a
read, only when the receiver answers 2xx, so a callback that never gets through leaves it for GET.
The app's sender (``app.background``) sleeps until the earliest due callback (``next_due_at``),
woken by ``CALLBACKS_TOPIC``. Logs name the question and the outcome, never the URL or the text.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio
from sqlalchemy import func, select, update
from sqlmodel import col

from core.adapters.webhooks.poster import Outcome
from core.domain.secrets import new_prefixed_id
from core.domain.webhooks import signature
from core.principal import Principal, PrincipalKind
from core.runtime.core import Core
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services.callbacks import secret_key
from core.services.interactions import interaction_out
from core.services.typed_replies import mark_text_read, waiting_text
from core.store.tables import Interaction, InteractionCallback

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


@dataclass(frozen=True)
class Attempt:
    """One claimed attempt, with what it sends."""

    interaction_id: str
    claim: str
    number: int  # 1 for the event's first attempt
    url: str = field(repr=False)
    webhook_id: str
    body: bytes = field(repr=False)
    key: bytes = field(repr=False)
    carries_text: bool  # the body holds the typed reply: a 2xx takes it


def claim_due(tx: Tx, principal: Principal) -> list[Attempt]:
    """Claim up to ``BATCH`` callbacks due now, each under this round's claim for ``LEASE_S``."""
    if principal.kind is not PrincipalKind.SYSTEM:
        return []
    now = tx.now()
    due = (
        tx.session.execute(
            select(col(InteractionCallback.interaction_id))
            .where(col(InteractionCallback.due_at) <= now)
            .order_by(col(InteractionCallback.due_at))
            .limit(BATCH)
        )
        .scalars()
        .all()
    )
    if not due:
        return []
    claim = new_prefixed_id("clm")
    claimed = tx.session.execute(
        update(InteractionCallback)
        .where(col(InteractionCallback.interaction_id).in_(due), col(InteractionCallback.due_at) <= now)
        .values(due_at=now + LEASE_S, claim=claim, attempts=col(InteractionCallback.attempts) + 1)
        .returning(
            col(InteractionCallback.interaction_id),
            col(InteractionCallback.url),
            col(InteractionCallback.event),
            col(InteractionCallback.webhook_id),
            col(InteractionCallback.attempts),
        )
    ).all()
    attempts = []
    for interaction_id, url, event, webhook_id, number in claimed:
        row = tx.session.get(Interaction, interaction_id)
        if row is None:
            continue  # its row goes with it (ON DELETE CASCADE)
        text = waiting_text(tx.keys, row)
        body = _body(event, row, now, text)
        key = secret_key(tx.keys, interaction_id)
        attempts.append(Attempt(interaction_id, claim, number, url, webhook_id, body, key, text is not None))
    return attempts


def record_attempt(tx: Tx, principal: Principal, *, attempt: Attempt, outcome: Outcome) -> str:
    """Record how ``attempt`` went, if its claim still holds (another event or replica may have
    taken the row since); a 2xx takes the typed reply it carried. Returns the callback's state."""
    if principal.kind is not PrincipalKind.SYSTEM:
        return "pending"
    now = tx.now()
    values: dict[str, object] = {"claim": None, "last_status": outcome.status, "last_error": outcome.error}
    if outcome.error is None:
        state, values["due_at"], values["delivered_at"] = "delivered", None, now
    elif outcome.final or attempt.number >= MAX_ATTEMPTS:
        state, values["due_at"], values["failed_at"] = "failed", None, now
    else:
        state, values["due_at"] = "pending", now + retry_delay(attempt.number, outcome.retry_after_s)
    recorded = tx.session.execute(
        update(InteractionCallback)
        .where(
            col(InteractionCallback.interaction_id) == attempt.interaction_id,
            col(InteractionCallback.claim) == attempt.claim,
        )
        .values(**values)
    )
    if getattr(recorded, "rowcount", 0) == 1 and state == "delivered" and attempt.carries_text:
        mark_text_read(tx, attempt.interaction_id)
    return state


@read_only
def next_due_at(tx: Tx, principal: Principal) -> int | None:
    """When the earliest callback is due (an index read)."""
    if principal.kind is not PrincipalKind.SYSTEM:
        return None
    due: int | None = tx.session.execute(select(func.min(col(InteractionCallback.due_at)))).scalar()
    return due


async def deliver_due(core: Core) -> int:
    """Send every callback due now (up to ``BATCH``), at once; the number of attempts made."""
    attempts = await core.run(claim_due, Principal.system())
    async with anyio.create_task_group() as tasks:
        for attempt in attempts:
            tasks.start_soon(_send, core, attempt)
    return len(attempts)


async def _send(core: Core, attempt: Attempt) -> None:
    timestamp = int(core.clock.now())
    headers = {
        "webhook-id": attempt.webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(
            attempt.key, webhook_id=attempt.webhook_id, timestamp=timestamp, body=attempt.body
        ),
    }
    outcome = await core.webhooks.post(attempt.url, headers, attempt.body)
    try:
        state = await core.run(record_attempt, Principal.system(), attempt=attempt, outcome=outcome)
    except Exception:  # the lease runs out and the attempt is made again
        log.warning("callback of %s: its outcome was not recorded", attempt.interaction_id, exc_info=True)
        return
    log.info(
        "callback of %s, attempt %d: %s (%s)",
        attempt.interaction_id,
        attempt.number,
        outcome.error or "delivered",
        state,
    )


def _body(event: str, row: Interaction, now: int, text: str | None) -> bytes:
    """The event as JSON (Standard Webhooks' payload: type, timestamp, data)."""
    at = row.answered_at if event == "answered" and row.answered_at is not None else row.expires_at
    data = interaction_out(row, now, created=False, text=text).model_dump(mode="json", exclude_none=True)
    payload = {
        "type": f"interaction.{event}",
        "timestamp": datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "data": data,
    }
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
