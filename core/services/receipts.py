"""Urgent until acknowledged: an urgent send with ``repeat`` keeps a receipt, which its sender
polls (``GET /v1/receipts/{id}``, long poll with ``wait``) and may cancel, and any of the
account's devices acknowledges. The first of acknowledgement, cancel and expiry settles it. Only
the sender that sent it (its token, or its connector grant: ``Principal.owner_key``) reads or
cancels a receipt, as only its creator reads a question; another sender of the same account is
told there is no such receipt.

The phone repeats the alert itself, every ``repeat`` seconds until ``expire_at``
(``core.domain.urgent``). A browser phone whose app is closed cannot time anything, so for each
one the notification went to, the server also keeps a repeating wake-up (``core.services.wake_ups``)
that pushes the sealed notification again at each step. Acknowledging or cancelling deletes those
wake-ups and sends every recipient an ``urgent_stop`` (the acknowledging device too: the same
phone may run the app twice, or acknowledge from another shell). The receipt holds no text: its
recipients, its times and who acknowledged it. Swept a day after it expires.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy import func, select, update
from sqlmodel import col

from core.domain import payloads
from core.domain.notification import InvalidFieldError
from core.domain.secrets import new_prefixed_id
from core.domain.urgent import UrgentReceipt, parse_repeat
from core.errors import RelayError
from core.principal import SCOPE_NOTIFICATIONS_SEND, Principal
from core.runtime.core import Core
from core.runtime.events import Published
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services import receipt_callbacks, wake_ups
from core.services.capability import Feature, account_phone, gate
from core.services.delivery import Addressee, send_server_messages
from core.services.devices import own_device
from core.services.interactions import WAIT_MAX_S
from core.services.long_poll import until_settled
from core.store.tables import Account, Device, Receipt

MAX_PENDING = 20  # urgent notifications repeating at once, per account
RETENTION_S = 86_400  # kept this long past expiry, so a late poll still hears "expired"

Status = Literal["pending", "acknowledged", "expired", "cancelled"]


class AcknowledgedBy(BaseModel):
    device_id: str
    name: str | None = Field(default=None, description="The device's name; absent once it is removed")


class ReceiptOut(BaseModel):
    receipt: str = Field(description="rcp_ + 32 hex characters")
    status: Status
    acknowledged_at: int | None = Field(default=None, description="Epoch seconds, once acknowledged")
    acknowledged_by: AcknowledgedBy | None = Field(default=None, description="The device that did")
    cancelled_at: int | None = Field(default=None, description="Epoch seconds, once cancelled")
    expires_at: int = Field(description="When the phone stops repeating, unacknowledged")
    created_at: int


def receipt_topic(receipt_id: str) -> str:
    return f"receipt:{receipt_id}"


def prepare(tx: Tx, principal: Principal, fields: Mapping[str, Any], priority: str) -> UrgentReceipt | None:
    """The receipt an urgent send with ``repeat`` will keep (nothing is written yet), or ``None``
    for any other send. Refuses bad ``repeat``/``expire`` (400), a phone app too old to repeat and
    acknowledge (426) and an account with ``MAX_PENDING`` urgent notifications repeating (429)."""
    try:
        repeat = parse_repeat(fields, priority, min_repeat_s=tx.settings.urgent_min_repeat_s)
    except InvalidFieldError as error:
        raise RelayError(error.code, error.message, details=error.details) from error
    if repeat is None:
        return None
    gate(tx, account_phone(tx, principal.account_id), Feature.URGENT_REPEAT)
    # One urgent send at a time per account (a row lock on PostgreSQL), so the cap holds.
    account = select(Account).where(col(Account.account_id) == principal.account_id)
    tx.session.execute(account.with_for_update())
    now = tx.now()
    repeating = tx.session.execute(
        select(func.count()).where(
            col(Receipt.account_id) == principal.account_id,
            col(Receipt.acknowledged_at).is_(None),
            col(Receipt.cancelled_at).is_(None),
            col(Receipt.expires_at) > now,
        )
    ).scalar_one()
    if repeating >= MAX_PENDING:
        raise RelayError("too_many_urgent", details={"max": MAX_PENDING})
    return UrgentReceipt(new_prefixed_id("rcp"), repeat.every_s, now + repeat.expire_s)


def keep(
    tx: Tx,
    principal: Principal,
    receipt: UrgentReceipt,
    *,
    msg_id: str,
    device_ids: list[str],
    payload: dict[str, Any],
    callback_url: str | None = None,
) -> None:
    """Write the receipt of a send that went to ``device_ids``, and keep a repeating wake-up of
    its notification ``payload`` for each browser phone among them; with ``callback_url`` (checked
    already), its acknowledgement callback (``core.services.receipt_callbacks``)."""
    now = tx.now()
    tx.session.add(
        Receipt(
            receipt_id=receipt.receipt_id,
            account_id=principal.account_id,
            owner=principal.owner_key,
            msg_id=msg_id,
            device_ids=",".join(device_ids),
            repeat_s=receipt.repeat_s,
            created_at=now,
            expires_at=receipt.expires_at,
        )
    )
    if callback_url is not None:
        tx.session.flush()  # the receipt first: its callback row refers to it
        receipt_callbacks.schedule(
            tx, receipt_id=receipt.receipt_id, account_id=principal.account_id, url=callback_url
        )
    first = now + receipt.repeat_s
    if first >= receipt.expires_at:
        return
    for device in _devices(tx, device_ids, browsers_only=True):
        if wake_ups.wakes_by_push(tx, device):
            wake_ups.schedule(
                tx,
                device,
                due_at=first,
                tag=receipt.receipt_id,
                payload=payload,
                push_type="notification",
                repeat=(receipt.repeat_s, receipt.expires_at),
            )


@read_only
def get_receipt(tx: Tx, principal: Principal, *, receipt_id: str) -> ReceiptOut:
    """The receipt's state; 404 ``receipt_not_found`` for an unknown id or another sender's."""
    principal.require_scope(SCOPE_NOTIFICATIONS_SEND)
    return _out(tx, _of_sender(tx, principal, receipt_id))


async def poll_receipt(core: Core, principal: Principal, *, receipt_id: str, wait: int) -> ReceiptOut:
    """The receipt's state, waiting up to ``wait`` seconds (clamped to 0-``WAIT_MAX_S``) while it
    is pending, woken by its acknowledgement or cancel on any replica."""
    return await until_settled(
        core,
        receipt_topic(receipt_id),
        lambda: core.run(get_receipt, principal, receipt_id=receipt_id),
        max(0, min(wait, WAIT_MAX_S)),
    )


def cancel_receipt(tx: Tx, principal: Principal, *, receipt_id: str) -> ReceiptOut:
    """Stop a pending receipt's repeats: the devices are told (``urgent_stop``, reason
    ``cancelled``). Idempotent: a settled receipt is answered as it is."""
    principal.require_scope(SCOPE_NOTIFICATIONS_SEND)
    row = _of_sender(tx, principal, receipt_id)
    _settle(tx, row, "cancelled", cancelled_at=tx.now())
    return _out(tx, row)


def acknowledge_receipt(tx: Tx, principal: Principal, *, receipt_id: str) -> ReceiptOut:
    """A device acknowledges: the first acknowledgement wins and every recipient is told
    (``urgent_stop``, reason ``acknowledged``). Idempotent: a settled receipt is answered as it is."""
    device = own_device(tx, principal)
    row = _of_account(tx, device.account_id, receipt_id)
    _settle(tx, row, "acknowledged", acknowledged_at=tx.now(), acknowledged_by=device.device_id)
    return _out(tx, row)


def _settle(tx: Tx, row: Receipt, reason: str, **values: Any) -> None:
    """Settle ``row`` with ``values`` if it is still pending (one statement: the first of two
    racing settlements wins), then stop the repeats everywhere."""
    now = tx.now()
    won = tx.session.execute(
        update(Receipt)
        .where(
            col(Receipt.receipt_id) == row.receipt_id,
            col(Receipt.acknowledged_at).is_(None),
            col(Receipt.cancelled_at).is_(None),
            col(Receipt.expires_at) > now,
        )
        .values(**values)
    )
    tx.session.refresh(row)
    if getattr(won, "rowcount", 0) != 1:
        return
    devices = _devices(tx, row.device_ids.split(","), browsers_only=False)
    for device in devices:
        wake_ups.cancel(tx, device.device_id, row.receipt_id)
    send_server_messages(
        tx,
        [Addressee(device, new_prefixed_id("msg")) for device in devices],
        payloads.urgent_stop(receipt_id=row.receipt_id, reason=reason),
        push_type="urgent_stop",
        ttl_s=row.expires_at - now,  # after that the phones stop by themselves
        high_priority=True,
        account_id=row.account_id,
    )
    if reason == "acknowledged":
        receipt_callbacks.on_acknowledged(tx, row.receipt_id)
    tx.emit(Published(receipt_topic(row.receipt_id), reason))


def _devices(tx: Tx, device_ids: list[str], *, browsers_only: bool) -> list[Device]:
    """The receipt's recipients that still exist (browser phones only, with ``browsers_only``),
    in id order."""
    query = select(Device).where(col(Device.device_id).in_(device_ids))
    if browsers_only:
        query = query.where(col(Device.device_type) == "web")
    return list(tx.session.execute(query.order_by(col(Device.device_id))).scalars())


def _of_account(tx: Tx, account_id: str, receipt_id: str) -> Receipt:
    row = tx.session.get(Receipt, receipt_id)
    if row is None or row.account_id != account_id:
        raise RelayError("receipt_not_found")
    return row


def _of_sender(tx: Tx, principal: Principal, receipt_id: str) -> Receipt:
    """The receipt ``principal`` sent (one kept before receipts had owners: its account's)."""
    row = _of_account(tx, principal.account_id, receipt_id)
    if row.owner is not None and row.owner != principal.owner_key:
        raise RelayError("receipt_not_found")
    return row


def _out(tx: Tx, row: Receipt) -> ReceiptOut:
    status: Status = "pending"
    by = None
    if row.acknowledged_at is not None:
        status = "acknowledged"
        if row.acknowledged_by is not None:
            device = tx.session.get(Device, row.acknowledged_by)
            by = AcknowledgedBy(device_id=row.acknowledged_by, name=device.name if device else None)
    elif row.cancelled_at is not None:
        status = "cancelled"
    elif row.expires_at <= tx.now():
        status = "expired"
    return ReceiptOut(
        receipt=row.receipt_id,
        status=status,
        acknowledged_at=row.acknowledged_at,
        acknowledged_by=by,
        cancelled_at=row.cancelled_at,
        expires_at=row.expires_at,
        created_at=row.created_at,
    )
