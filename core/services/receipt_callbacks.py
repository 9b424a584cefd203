"""Acknowledgement callbacks of urgent notifications (Pushover's ``callback``): once a device
acknowledges a receipt that has one, the server POSTs Pushover's form to the caller's URL.

The URL is held to the answer callbacks' outbound rules when the send asks for it (``checked``:
https, not plainly private) and at every attempt (the one poster resolves, checks and pins the
address). Its row is written in the send's transaction, not due; the acknowledgement makes it due
in its own transaction (``on_acknowledged``) and wakes every replica's sender, which delivers it in
the same rounds as the answer callbacks (``core.services.callback_delivery``), claimed, retried and
given up by the same rules (``core.services.callback_rows``). A cancel or an expiry sends nothing,
as with Pushover. The body is built from the receipt at each attempt; logs name the receipt and
the outcome, never the URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from sqlalchemy import update

from core.adapters.webhooks.poster import Outcome
from core.principal import Principal, PrincipalKind
from core.runtime.core import Core
from core.runtime.events import Published
from core.runtime.tx import Tx
from core.services import callback_rows
from core.services.callbacks import CALLBACKS_TOPIC, checked_url
from core.settings import Settings
from core.store.tables import Device, Receipt, ReceiptCallback

TABLE = ReceiptCallback.__table__  # type: ignore[attr-defined]
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@dataclass(frozen=True)
class ReceiptAttempt:
    receipt_id: str
    claim: str
    number: int
    url: str = field(repr=False)
    body: bytes = field(repr=False)


def checked(settings: Settings, url: str) -> str:
    """``url`` if it may be called back (400 ``invalid_callback_url`` or
    ``callback_url_not_allowed`` otherwise), as a question's ``callback_url``."""
    return checked_url(settings, url)


def schedule(tx: Tx, *, receipt_id: str, account_id: str, url: str) -> None:
    """Keep the receipt's callback, not due until a device acknowledges it."""
    tx.session.add(ReceiptCallback(receipt_id=receipt_id, account_id=account_id, url=url))


def on_acknowledged(tx: Tx, receipt_id: str) -> None:
    """The receipt was acknowledged: its callback, if it has one, is due at once."""
    now = tx.now()
    made_due = tx.session.execute(
        update(TABLE)
        .where(TABLE.c.receipt_id == receipt_id, TABLE.c.due_at.is_(None), TABLE.c.attempts == 0)
        .values(due_at=now)
    )
    if getattr(made_due, "rowcount", 0):
        tx.emit(Published(CALLBACKS_TOPIC, str(now)))


def called_back_at(tx: Tx, receipt_id: str) -> int | None:
    """When the receipt's callback was delivered, if it was."""
    row = tx.session.get(ReceiptCallback, receipt_id)
    return row.delivered_at if row is not None else None


def claim_due(tx: Tx, principal: Principal) -> list[ReceiptAttempt]:
    """Claim the receipt callbacks due now, each with Pushover's form of its acknowledgement."""
    if principal.kind is not PrincipalKind.SYSTEM:
        return []
    claim, claimed = callback_rows.claim_due(tx, TABLE, "receipt_id", "url")
    attempts = []
    for receipt_id, url, number in claimed:
        receipt = tx.session.get(Receipt, receipt_id)
        if receipt is None or receipt.acknowledged_at is None:
            continue  # never made due unacknowledged; a swept receipt takes its row with it
        device = tx.session.get(Device, receipt.acknowledged_by) if receipt.acknowledged_by else None
        form = {
            "receipt": receipt_id,
            "acknowledged": 1,
            "acknowledged_at": receipt.acknowledged_at,
            "acknowledged_by": receipt.acknowledged_by or "",
            "acknowledged_by_device": device.name if device is not None else "",
        }
        attempts.append(ReceiptAttempt(receipt_id, claim, number, url, urlencode(form).encode()))
    return attempts


def record_attempt(tx: Tx, principal: Principal, *, attempt: ReceiptAttempt, outcome: Outcome) -> str:
    if principal.kind is not PrincipalKind.SYSTEM:
        return "pending"
    state, _ = callback_rows.record_outcome(
        tx,
        TABLE,
        "receipt_id",
        attempt.receipt_id,
        claim=attempt.claim,
        number=attempt.number,
        outcome=outcome,
    )
    return state


async def send(core: Core, attempt: ReceiptAttempt) -> None:
    await callback_rows.post_and_record(
        core,
        of=attempt.receipt_id,
        number=attempt.number,
        url=attempt.url,
        headers=FORM,
        body=attempt.body,
        record=lambda outcome: core.run(record_attempt, Principal.system(), attempt=attempt, outcome=outcome),
    )
