"""Scheduled delivery: a send asked for later (``delay``, ``at``, ntfy's ``Delay``/``At``/``In``) is
sealed when it is accepted, to each device it goes to, as an immediate send is (the server never
keeps its text), and kept so (``scheduled_notifications``, ``scheduled_envelopes``) until its
time. Then its envelopes go on those devices' queues and are pushed the one way every send's do
(``core.services.delivery.deliver_sealed``), so a later send of the same sequence replaces it on
the phone as it would any.

The app's waker (``app.background.wake_forever``), which sends the web phones' reminders at their
time (``core.services.wake_ups``), sends these too: it sleeps until the earliest is due, woken
early by the fan-out message each newly scheduled one publishes. A due one is claimed by deleting
it in the transaction that queues it, so one replica delivers it, once; one found due after a
restart (or a waker that was down) is delivered then, late, never lost. A device removed
meanwhile is skipped; nothing is delivered for a sender whose token or grant was revoked meanwhile.

Locks (PostgreSQL): a delivery locks the devices of its accounts before it claims, as a group of
sends does before its writes, so the order is always devices, then scheduled rows (a clear cancels
after its queue write for the same reason). A replacement takes the account's row, then the
scheduled row, and no device's (a kept envelope has no foreign key to its device), so it never
waits in a circle with a delivery (``tests/core/test_scheduled_replica_races.py``).

Before its time its sender cancels it by its sequence (``DELETE /v1/notifications/{sequence_id}``,
``core.services.notification_clear``), or replaces it by scheduling another of the same sequence
(a dead man's switch: each check-in pushes the alarm back). An account keeps at most
``scheduled_max_pending`` (409 ``too_many_scheduled``).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel
from sqlalchemy import ColumnElement, delete, func, select
from sqlmodel import col

from core.errors import RelayError
from core.principal import Principal, PrincipalKind
from core.runtime.core import Core
from core.runtime.events import Published
from core.runtime.group_commit import lock_devices_of
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services.delivery import Addressee, Recipient, deliver_sealed, seal_to_each
from core.services.wake_ups import WAKE_UPS_TOPIC
from core.store.tables import (
    Account,
    ConnectorGrant,
    Device,
    ScheduledEnvelope,
    ScheduledNotification,
    SenderToken,
)

BATCH = 100  # scheduled sends one transaction delivers


class Cancelled(BaseModel):
    id: str
    deliver_at: int


def check_room(tx: Tx, principal: Principal, sequence_id: str) -> None:
    """409 ``too_many_scheduled`` when the account keeps as many as it may, not counting the one of
    this sender and sequence that a new one would replace."""
    most = tx.settings.scheduled_max_pending
    table = ScheduledNotification
    # One scheduled send at a time per account (a row lock on PostgreSQL), so the bound holds; an
    # urgent send that repeats takes the same lock for its own (``core.services.receipts``).
    account = select(Account).where(col(Account.account_id) == principal.account_id)
    tx.session.execute(account.with_for_update())
    pending = tx.session.execute(
        select(func.count()).where(col(table.account_id) == principal.account_id)
    ).scalar_one()
    if pending < most:
        return
    if pending - waiting(tx, principal, sequence_id) >= most:
        raise RelayError(
            "too_many_scheduled",
            f"The account already has {most} sends waiting for their time; cancel some or wait.",
            details={"max": most},
        )


def keep(
    tx: Tx,
    principal: Principal,
    devices: Sequence[Recipient],
    plaintext: bytes,
    *,
    msg_id: str,
    sequence_id: str,
    deliver_at: int,
    ttl_s: int,
    high_priority: bool,
) -> None:
    """Seal ``plaintext`` (a notification payload) to each of ``devices`` now and keep it until
    ``deliver_at``, replacing this sender's pending one of ``sequence_id``. ``ttl_s``: how long it
    is then queued, clamped already to a notification's lifetime."""
    blobs = seal_to_each(tx, devices, plaintext)
    cancel(tx, principal, sequence_id)
    tx.session.add(
        ScheduledNotification(
            scheduled_id=msg_id,
            account_id=principal.account_id,
            sender=principal.sender_id,
            sequence_id=sequence_id,
            deliver_at=deliver_at,
            created_at=tx.now(),
            ttl_s=ttl_s,
            high_priority=high_priority,
        )
    )
    tx.session.flush()  # the parent row before its envelopes (their foreign key)
    tx.session.add_all(
        ScheduledEnvelope(scheduled_id=msg_id, device_id=device_id, blob=blob)
        for device_id, blob in blobs.items()
    )
    tx.emit(Published(WAKE_UPS_TOPIC, str(deliver_at)))


def waiting(tx: Tx, principal: Principal, sequence_id: str) -> bool:
    """Whether the calling sender has a send of ``sequence_id`` waiting (a read: no lock)."""
    same = select(func.count()).where(*_of_sequence(principal, sequence_id))
    return bool(tx.session.execute(same).scalar_one())


def cancel(tx: Tx, principal: Principal, sequence_id: str) -> list[Cancelled]:
    """Take back the calling sender's pending sends of ``sequence_id`` (their envelopes go with
    them); what was taken back."""
    rows = tx.session.execute(
        delete(ScheduledNotification)
        .where(*_of_sequence(principal, sequence_id))
        .returning(col(ScheduledNotification.scheduled_id), col(ScheduledNotification.deliver_at))
    ).all()
    return [Cancelled(id=scheduled_id, deliver_at=deliver_at) for scheduled_id, deliver_at in rows]


def take_due(tx: Tx, principal: Principal) -> int:
    """Claim the sends due now (each once, whatever the replicas: a claim is a DELETE, which a
    concurrent one waits for and then finds nothing to delete) and queue each to its devices that
    are still paired; how many were claimed."""
    if principal.kind is not PrincipalKind.SYSTEM:
        return 0
    table = ScheduledNotification
    rows = tx.session.execute(
        select(col(table.scheduled_id), col(table.account_id))
        .where(col(table.deliver_at) <= tx.now())
        .order_by(col(table.deliver_at))
        .limit(BATCH)
    ).all()
    if not rows:
        return 0
    due = [scheduled_id for scheduled_id, _ in rows]
    if tx.connection().dialect.name == "postgresql":
        lock_devices_of(tx.session, {account_id for _, account_id in rows})
    envelopes = tx.session.execute(
        select(
            col(ScheduledEnvelope.scheduled_id), col(ScheduledEnvelope.device_id), col(ScheduledEnvelope.blob)
        ).where(col(ScheduledEnvelope.scheduled_id).in_(due))
    ).all()
    claimed = (  # only what this transaction deleted is its to deliver (its envelopes go with it)
        tx.session.execute(
            delete(ScheduledNotification)
            .where(col(ScheduledNotification.scheduled_id).in_(due))
            .returning(ScheduledNotification)
        )
        .scalars()
        .all()
    )
    revoked = _revoked(tx, {note.sender for note in claimed})
    device_ids = {device_id for _, device_id, _ in envelopes}
    paired = select(Device).where(col(Device.device_id).in_(device_ids))
    devices = {device.device_id: device for device in tx.session.execute(paired).scalars()}
    sealed: dict[str, dict[str, bytes]] = {}  # by send, by device still paired
    for scheduled_id, device_id, blob in envelopes:
        if device_id in devices:
            sealed.setdefault(scheduled_id, {})[device_id] = bytes(blob)
    for note in claimed:
        blobs = sealed.get(note.scheduled_id)
        if note.sender in revoked or not blobs:
            continue
        deliver_sealed(  # the blobs' order is the addressees'
            tx,
            [Addressee(devices[device_id], note.scheduled_id) for device_id in blobs],
            blobs,
            type="notification",
            push_type="notification",
            ttl_s=note.ttl_s,
            high_priority=note.high_priority,
            max_lifetime_s=max(note.ttl_s, 1),  # clamped when it was kept
            account_id=note.account_id,
        )
    return len(claimed)


@read_only
def next_due_at(tx: Tx, principal: Principal) -> int | None:
    """When the earliest kept send is due, if any (an index read)."""
    if principal.kind is not PrincipalKind.SYSTEM:
        return None
    due: int | None = tx.session.execute(select(func.min(col(ScheduledNotification.deliver_at)))).scalar()
    return due


async def deliver_due(core: Core) -> int:
    """Deliver every send due now (in transactions of ``BATCH``); how many."""
    total = 0
    while (claimed := await core.run(take_due, Principal.system())) > 0:
        total += claimed
        if claimed < BATCH:
            break
    return total


def _of_sequence(principal: Principal, sequence_id: str) -> tuple[ColumnElement[bool], ...]:
    table = ScheduledNotification
    return (
        col(table.account_id) == principal.account_id,
        col(table.sender) == principal.sender_id,
        col(table.sequence_id) == sequence_id,
    )


def _revoked(tx: Tx, senders: set[str]) -> set[str]:
    """Which of ``senders`` (token and grant ids) are revoked, or gone."""
    live = set(
        tx.session.execute(
            select(col(SenderToken.token_id)).where(
                col(SenderToken.token_id).in_(senders), col(SenderToken.revoked_at).is_(None)
            )
        ).scalars()
    )
    live |= set(
        tx.session.execute(
            select(col(ConnectorGrant.grant_id)).where(
                col(ConnectorGrant.grant_id).in_(senders), col(ConnectorGrant.revoked_at).is_(None)
            )
        ).scalars()
    )
    return senders - live
