"""Answer callbacks, the sending side: each due callback is claimed by one replica, POSTed signed,
and its outcome recorded; a failure is retried after ``RETRY_AFTER_S`` (or the receiver's longer
``Retry-After``, up to the longest of them) until the attempts run out (``core.services.callback_rows``
keeps that state, for urgent notifications' acknowledgement callbacks too, which the same round
sends: ``core.services.receipt_callbacks``). Delivery is at least once: a receiver that answered
2xx to a POST whose outcome was not recorded gets it again, with the same webhook-id.

The body is built anew for each attempt from the interaction, as GET would show it, with the typed
reply's text if no read took it yet (``typed_replies.waiting_text``); the text is taken, as by a
read, only when the receiver answers 2xx, so a callback that never gets through leaves it for GET.
The app's sender (``app.background``) sleeps until the earliest due callback (``next_due_at``),
woken by ``CALLBACKS_TOPIC``. Logs name the question and the outcome, never the URL or the text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio

from core.adapters.webhooks.poster import Outcome
from core.domain.webhooks import signature
from core.principal import Principal, PrincipalKind
from core.runtime.core import Core
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services import callback_rows, receipt_callbacks
from core.services.callback_rows import RETRY_AFTER_S as RETRY_AFTER_S
from core.services.callbacks import secret_key
from core.services.interactions import interaction_out
from core.services.typed_replies import mark_text_read, waiting_text
from core.store.tables import Interaction, InteractionCallback

_TABLE = InteractionCallback.__table__  # type: ignore[attr-defined]


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
    claim, claimed = callback_rows.claim_due(tx, _TABLE, "interaction_id", "url", "event", "webhook_id")
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
    state, recorded = callback_rows.record_outcome(
        tx,
        _TABLE,
        "interaction_id",
        attempt.interaction_id,
        claim=attempt.claim,
        number=attempt.number,
        outcome=outcome,
    )
    if recorded and state == "delivered" and attempt.carries_text:
        mark_text_read(tx, attempt.interaction_id)
    return state


@read_only
def next_due_at(tx: Tx, principal: Principal) -> int | None:
    """When the earliest callback, a question's or a receipt's, is due (an index read each)."""
    if principal.kind is not PrincipalKind.SYSTEM:
        return None
    return callback_rows.earliest_due(tx, _TABLE, receipt_callbacks.TABLE)


async def deliver_due(core: Core) -> int:
    """Send every callback due now (up to ``BATCH`` of each kind), at once; the number of attempts
    made."""
    attempts = await core.run(claim_due, Principal.system())
    acknowledged = await core.run(receipt_callbacks.claim_due, Principal.system())
    async with anyio.create_task_group() as tasks:
        for attempt in attempts:
            tasks.start_soon(_send, core, attempt)
        for receipt_attempt in acknowledged:
            tasks.start_soon(receipt_callbacks.send, core, receipt_attempt)
    return len(attempts) + len(acknowledged)


async def _send(core: Core, attempt: Attempt) -> None:
    timestamp = int(core.clock.now())
    headers = {
        "webhook-id": attempt.webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(
            attempt.key, webhook_id=attempt.webhook_id, timestamp=timestamp, body=attempt.body
        ),
    }
    await callback_rows.post_and_record(
        core,
        of=attempt.interaction_id,
        number=attempt.number,
        url=attempt.url,
        headers=headers,
        body=attempt.body,
        record=lambda outcome: core.run(record_attempt, Principal.system(), attempt=attempt, outcome=outcome),
    )


def _body(event: str, row: Interaction, now: int, text: str | None) -> bytes:
    """The event as JSON (Standard Webhooks' payload: type, timestamp, data)."""
    at = row.answered_at if event == "answered" and row.answered_at is not None else row.expires_at
    data = interaction_out(row, now, text=text).model_dump(mode="json", exclude_none=True)
    payload = {
        "type": f"interaction.{event}",
        "timestamp": datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "data": data,
    }
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
