"""How anything reaches a device: the per-device queue, the push transports, and server-composed
envelopes. Operations call these inside their transaction; pushes leave after commit.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import String, bindparam, delete, func, insert, select
from sqlalchemy.dialects import postgresql
from sqlmodel import col

from core.adapters.push.base import PushMessage, PushTarget
from core.domain import payloads
from core.domain.canonical import canonical_json
from core.runtime.events import EnvelopeQueued, PushRequested
from core.runtime.tx import Tx
from core.services.queue_wake import wake_message
from core.store.prepared import PreparedStatement
from core.store.tables import Device, PushRegistration, QueuedEnvelope

QUEUE_CAP = 200
QUEUE_LIFETIME_S = 86_400  # device-to-device envelopes
NOTIFICATION_LIFETIME_S = 259_200  # server-composed notifications may wait up to their 72 h ttl
LIVE_GRACE_S = 30  # a ttl of 0 still gives open streams this long to read the entry (decisions.md)
SERVER_SENDER = "server"


class Recipient(Protocol):
    """What delivering to a device reads of it: a ``Device`` row, or a lighter read of its columns."""

    @property
    def device_id(self) -> str: ...
    @property
    def public_key(self) -> str: ...
    @property
    def fcm_token(self) -> str | None: ...
    @property
    def fcm_token_kind(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Delivery:
    device_id: str
    seq: int | None  # set when the message was queued
    pushed: bool  # a push service (FCM, web push) carries it
    # With ``awaited=True``: the push the caller sends itself after commit, to learn how it went
    # (``core.services.delivery_warnings``); otherwise pushes leave in the background.
    awaited_push: tuple[PushTarget, PushMessage] | None = None


def enqueue(
    tx: Tx,
    recipient_device_id: str,
    *,
    sender: str,
    type: str,
    blob: bytes,
    ttl_s: int,
    max_lifetime_s: int = QUEUE_LIFETIME_S,
    tag: str | None = None,
    locked: bool = False,
) -> int:
    """Append a blob to a device's queue (``ttl_s`` up to ``max_lifetime_s``) and wake its streams.
    The newest 200 untagged entries are kept; a tagged (pinned) entry is never trimmed, only
    expired (``core.services.reminders`` bounds how many a device may have). ``locked``: the
    caller holds the recipient's lock already (``lock_recipients``)."""
    if not locked:
        lock_recipients(tx, [recipient_device_id])
    now = tx.now()
    connection = tx.session.connection()
    entry = {
        "recipient": recipient_device_id,
        "sender": sender,
        "type": type,
        "blob": blob,
        "created_at": now,
        "expires_at": now + (min(ttl_s, max_lifetime_s) if ttl_s > 0 else LIVE_GRACE_S),
        "tag": tag,
    }
    if connection.dialect.name == "postgresql":  # one round trip, not three
        [(seq, prev)] = (_QUEUE_PINNED if tag is not None else _QUEUE_UNPINNED).rows(connection, **entry)
        prev = prev or 0
    else:  # SQLite: no data-modifying CTEs, and a statement costs no round trip
        prev = _LATEST.scalar(connection, recipient=recipient_device_id) or 0
        seq = _INSERT.scalar(connection, **entry)
        _TRIM.rows(connection, recipient=recipient_device_id)
    wake = wake_message(seq=int(seq), prev=int(prev), sender=sender, type=type, blob=blob)
    tx.emit(EnvelopeQueued(recipient_device_id, int(seq), wake))
    return int(seq)


def lock_recipients(tx: Tx, device_ids: list[str]) -> None:
    """Serialise enqueues per recipient (row locks on PostgreSQL) so that, for each device, sequence
    order is commit order and a stream reading "seq > last" can never step over a late commit. One
    statement for all of a send's devices, in one order (by id) so two sends cannot deadlock."""
    connection = tx.session.connection()
    if connection.dialect.name == "sqlite":  # SQLite writers are serial already
        return
    _LOCK_DEVICES.rows(connection, ids=sorted(device_ids))


_DEVICES = Device.__table__  # type: ignore[attr-defined]
_LOCK_DEVICES = PreparedStatement(  # PostgreSQL only: one array parameter for any number of devices
    select(_DEVICES.c.device_id)
    .where(_DEVICES.c.device_id == func.any(bindparam("ids", type_=postgresql.ARRAY(String))))
    .order_by(_DEVICES.c.device_id)
    .with_for_update()
)


# Built once and run on the driver's cursor: the queue is the hot path, and building statements
# and SQLAlchemy's per-execution work cost more than running them.
_QUEUE = QueuedEnvelope.__table__  # type: ignore[attr-defined]
_INSERT = PreparedStatement(
    insert(_QUEUE)
    .values(
        recipient_device_id=bindparam("recipient"),
        sender=bindparam("sender"),
        type=bindparam("type"),
        blob=bindparam("blob"),
        created_at=bindparam("created_at"),
        expires_at=bindparam("expires_at"),
        tag=bindparam("tag"),
    )
    .returning(_QUEUE.c.seq)
)
# The recipient's newest entry before this one: its streams know whether they missed anything.
_LATEST_SEQ = select(func.max(_QUEUE.c.seq)).where(_QUEUE.c.recipient_device_id == bindparam("recipient"))
_LATEST = PreparedStatement(_LATEST_SEQ)
_UNPINNED = (_QUEUE.c.recipient_device_id == bindparam("recipient")) & _QUEUE.c.tag.is_(None)
_OLDEST_KEPT = (
    select(_QUEUE.c.seq).where(_UNPINNED).order_by(_QUEUE.c.seq.desc()).offset(QUEUE_CAP - 1).limit(1)
).scalar_subquery()
# Keep the newest QUEUE_CAP unpinned entries: one DELETE below the cap's oldest survivor.
_TRIM = PreparedStatement(delete(_QUEUE).where(_UNPINNED, _QUEUE.c.seq < _OLDEST_KEPT))


def _queue_in_one_statement(*, pinned: bool) -> PreparedStatement:
    """PostgreSQL: the three statements above as one — insert, the recipient's newest seq before it,
    and the trim — in data-modifying CTEs. All parts read the snapshot from before the insert, so
    the trim keeps QUEUE_CAP - 1 older unpinned entries beside a new unpinned one."""
    inserted = _INSERT.statement.cte("inserted")
    kept = QUEUE_CAP if pinned else QUEUE_CAP - 1
    oldest_kept = (
        select(_QUEUE.c.seq).where(_UNPINNED).order_by(_QUEUE.c.seq.desc()).offset(kept - 1).limit(1)
    ).scalar_subquery()
    trimmed = (
        delete(_QUEUE).where(_UNPINNED, _QUEUE.c.seq < oldest_kept).returning(_QUEUE.c.seq).cte("trimmed")
    )
    previous = _LATEST_SEQ.scalar_subquery()
    return PreparedStatement(select(inserted.c.seq, previous).add_cte(trimmed))


_QUEUE_UNPINNED = _queue_in_one_statement(pinned=False)
_QUEUE_PINNED = _queue_in_one_statement(pinned=True)


def push_target(tx: Tx, device: Recipient) -> PushTarget:
    """Where the device can be pushed (its registrations are read only when a configured sender
    takes one)."""
    rows = (
        tx.session.execute(
            select(col(PushRegistration.service), col(PushRegistration.registration)).where(
                col(PushRegistration.device_id) == device.device_id
            )
        ).all()
        if tx.push.registrations
        else ()
    )
    return PushTarget(
        device.device_id,
        device.fcm_token,
        device.fcm_token_kind or "token",
        {service: json.loads(registration) for service, registration in rows},
    )


def request_push(tx: Tx, target: PushTarget, message: PushMessage, *, awaited: bool = False) -> Delivery:
    """Hand a push to the device's push service after commit. A device without one gets it from
    its queue, kept for the message's ``ttl_s`` (store-and-forward, as FCM does): an open
    ``/v1/sync`` stream at once, a closed one when it reconnects. ``awaited``: see ``Delivery``."""
    if tx.push.can_reach(target):
        if awaited:
            return Delivery(target.device_id, None, True, (target, message))
        tx.emit(PushRequested(target, message))
        return Delivery(target.device_id, None, True)
    seq = enqueue(
        tx,
        target.device_id,
        sender=SERVER_SENDER,
        type="push",
        blob=canonical_json(message.data()),
        ttl_s=message.ttl_s,
    )
    return Delivery(target.device_id, seq, False)


def send_server_message(
    tx: Tx,
    device: Recipient,
    payload: dict[str, Any],
    *,
    msg_id: str,
    push_type: str | None,
    ttl_s: int,
    high_priority: bool,
    max_lifetime_s: int = QUEUE_LIFETIME_S,
    tag: str | None = None,
    awaited: bool = False,
    push_now: bool = True,
    target: PushTarget | None = None,
    encoded: bytes | None = None,
    locked: bool = False,
) -> Delivery:
    """Encrypt a server-composed payload once to ``device``, put the envelope on its queue (for up
    to ``ttl_s``, at most ``max_lifetime_s``; ``tag`` pins it, see ``enqueue``) and, for a device
    with a push service, push it too — inline as ``push_type`` when it fits the 4 KB limit, else
    (or when ``push_type`` is None) as a ``notify`` wake-up after which the device fetches its
    queue. A device without one is woken on its open stream by the queue event. ``awaited``: see
    ``Delivery``. ``push_now=False``: queue only, the push service carries it later
    (``core.services.wake_ups``). ``target``: where the device is pushed, when the caller read it
    already (else it is read here); ``encoded``: the payload encoded, when the caller sends the same
    one to several devices; ``locked``: see ``enqueue``."""
    plaintext = payloads.encode(payload) if encoded is None else encoded
    blob = tx.keys.seal_to(base64.b64decode(device.public_key), plaintext)
    seq = enqueue(
        tx,
        device.device_id,
        sender=SERVER_SENDER,
        type=str(payload["type"]),
        blob=blob,
        ttl_s=ttl_s,
        max_lifetime_s=max_lifetime_s,
        tag=tag,
        locked=locked,
    )
    if target is None:
        target = push_target(tx, device)
    if not tx.push.can_reach(target) or not push_now:
        return Delivery(device.device_id, seq, tx.push.can_reach(target))
    wake = {"msgId": msg_id, "seqId": str(seq)}
    message = PushMessage("notify", wake, high_priority, ttl_s)
    if push_type is not None:
        inline_fields = wake | {"payload": base64.b64encode(blob).decode()}
        inline = PushMessage(push_type, inline_fields, high_priority, ttl_s)
        if inline.encoded_size() <= tx.push.data_limit(target):
            message = inline
    if awaited:
        return Delivery(device.device_id, seq, True, (target, message))
    tx.emit(PushRequested(target, message))
    return Delivery(device.device_id, seq, True)
