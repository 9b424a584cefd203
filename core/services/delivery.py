"""How anything reaches a device: the per-device queue, the push transports, and server-composed
envelopes. Operations call these inside their transaction; pushes leave after commit.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import bindparam, delete, func, insert, select
from sqlmodel import col

from core.adapters.push.base import PushMessage, PushTarget, WebPushSubscription
from core.context import Tx
from core.domain import payloads
from core.domain.canonical import canonical_json
from core.events import EnvelopeQueued, Published, PushRequested, device_topic
from core.services.queue_wake import wake_message
from core.store.prepared import PreparedStatement
from core.store.tables import Device, QueuedEnvelope, WebPushSubscriptionRow

QUEUE_CAP = 200
QUEUE_LIFETIME_S = 86_400  # device-to-device envelopes
NOTIFICATION_LIFETIME_S = 259_200  # server-composed notifications may wait up to their 72 h ttl
LIVE_GRACE_S = 30  # a ttl of 0 still gives open streams this long to read the entry
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
    pushed: bool  # a push service (FCM, web push) was asked to carry it


def enqueue(
    tx: Tx,
    recipient_device_id: str,
    *,
    sender: str,
    type: str,
    blob: bytes,
    ttl_s: int,
    max_lifetime_s: int = QUEUE_LIFETIME_S,
) -> int:
    """Append a blob to a device's queue (newest 200 kept, ``ttl_s`` up to ``max_lifetime_s``) and
    wake its streams."""
    # Serialise enqueues per recipient (a row lock on PostgreSQL) so that, for each device, sequence
    # order is commit order and a stream reading "seq > last" can never step over a late commit.
    if tx.session.get_bind().dialect.name != "sqlite":  # SQLite writers are serial already
        tx.session.execute(
            select(col(Device.device_id))
            .where(col(Device.device_id) == recipient_device_id)
            .with_for_update()
        )
    now = tx.now()
    connection = tx.session.connection()
    prev = _LATEST.scalar(connection, recipient=recipient_device_id) or 0
    seq = _INSERT.scalar(
        connection,
        recipient=recipient_device_id,
        sender=sender,
        type=type,
        blob=blob,
        created_at=now,
        expires_at=now + max(LIVE_GRACE_S, min(ttl_s, max_lifetime_s)),
    )
    _TRIM.rows(connection, recipient=recipient_device_id)
    wake = wake_message(seq=int(seq), prev=int(prev), sender=sender, type=type, blob=blob)
    tx.emit(EnvelopeQueued(recipient_device_id, int(seq), wake))
    return int(seq)


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
    )
    .returning(_QUEUE.c.seq)
)
# The recipient's newest entry before this one: its streams know whether they missed anything.
_LATEST = PreparedStatement(
    select(func.max(_QUEUE.c.seq)).where(_QUEUE.c.recipient_device_id == bindparam("recipient"))
)
_OLDEST_KEPT = (
    select(_QUEUE.c.seq)
    .where(_QUEUE.c.recipient_device_id == bindparam("recipient"))
    .order_by(_QUEUE.c.seq.desc())
    .offset(QUEUE_CAP - 1)
    .limit(1)
    .scalar_subquery()
)
# Keep the newest QUEUE_CAP entries: one DELETE below the cap's oldest survivor.
_TRIM = PreparedStatement(
    delete(_QUEUE).where(_QUEUE.c.recipient_device_id == bindparam("recipient"), _QUEUE.c.seq < _OLDEST_KEPT)
)


def push_target(tx: Tx, device: Recipient) -> PushTarget:
    """Where the device can be pushed (its web-push subscription is read only when web push is on)."""
    subscription = tx.session.get(WebPushSubscriptionRow, device.device_id) if tx.web_push_enabled else None
    return PushTarget(
        device_id=device.device_id,
        fcm_token=device.fcm_token,
        fcm_token_kind=device.fcm_token_kind or "token",
        web_push=(
            WebPushSubscription(subscription.endpoint, subscription.p256dh, subscription.auth)
            if subscription
            else None
        ),
    )


def request_push(tx: Tx, target: PushTarget, message: PushMessage, *, store: bool = True) -> bool:
    """Hand a push to the device's push service after commit. A device without one gets it on its
    open ``/v1/sync`` stream: ``store=True`` keeps it on the queue for ``ttl_s`` (store-and-forward,
    as FCM does); ``store=False`` (ring, reminders: nothing retained) reaches only open streams.

    Returns whether a push service (rather than the stream) carries it.
    """
    if tx.push_available(target):
        tx.emit(PushRequested(target, message))
        return True
    if store:
        enqueue(
            tx,
            target.device_id,
            sender=SERVER_SENDER,
            type="push",
            blob=canonical_json(message.data()),
            ttl_s=message.ttl_s,
        )
    else:
        tx.emit(Published(device_topic(target.device_id), json.dumps({"push": message.data()})))
    return False


def send_server_message(
    tx: Tx,
    device: Recipient,
    payload: dict[str, Any],
    *,
    msg_id: str,
    push_type: str | None,
    ttl_s: int,
    high_priority: bool,
    queue: bool = True,
    max_lifetime_s: int = QUEUE_LIFETIME_S,
) -> Delivery:
    """Encrypt a server-composed payload once to ``device`` and send it.

    ``queue=True``: the envelope goes on the device's queue; a device with a push service is also
    pushed — inline as ``push_type`` when it fits the 4 KB limit, else (or when ``push_type`` is
    None) as a ``notify`` wake-up after which the device fetches its queue.
    ``queue=False`` (nothing may be retained): an inline push only.
    """
    blob = tx.keys.seal_to(base64.b64decode(device.public_key), payloads.encode(payload))
    blob_b64 = base64.b64encode(blob).decode()
    if not queue:
        if push_type is None:
            raise ValueError("an unqueued message must be pushed inline")
        inline = PushMessage(push_type, {"msgId": msg_id, "payload": blob_b64}, high_priority, ttl_s)
        return Delivery(
            device.device_id, None, request_push(tx, push_target(tx, device), inline, store=False)
        )
    seq = enqueue(
        tx, device.device_id, sender=SERVER_SENDER, type=str(payload["type"]), blob=blob, ttl_s=ttl_s
    )
    target = push_target(tx, device)
    if not tx.push_available(target):
        return Delivery(device.device_id, seq, False)  # its open stream is woken by the queue event
    wake = {"msgId": msg_id, "seqId": str(seq)}
    message = PushMessage("notify", wake, high_priority, ttl_s)
    if push_type is not None:
        inline = PushMessage(push_type, wake | {"payload": blob_b64}, high_priority, ttl_s)
        if inline.encoded_size() <= target.data_limit:
            message = inline
    tx.emit(PushRequested(target, message))
    return Delivery(device.device_id, seq, True)
