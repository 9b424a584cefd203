"""Device-to-device relay: a device posts an opaque envelope for a device it is paired with; the
server queues it for the recipient (whose open streams wake) and pushes it to a phone.

The server cannot read a relayed blob; it only checks that it is shaped like an envelope v1.
"""

from __future__ import annotations

import base64
import binascii
import re

from pydantic import BaseModel, ConfigDict, Field, StrictInt
from pydantic.config import JsonDict
from sqlalchemy import and_, bindparam, or_, sql, update
from sqlmodel import col, select

from core.adapters.push.base import PushMessage
from core.domain.envelope import MIN_LENGTH, WIRE_VERSION
from core.domain.secrets import new_prefixed_id
from core.errors import RelayError
from core.principal import Principal, PrincipalKind
from core.queue import blob_text, queue
from core.runtime.events import Deferred
from core.runtime.marks import group_commit, read_only
from core.runtime.tx import Tx
from core.services.delivery import QUEUE_LIFETIME_S, enqueue, push_target, request_push
from core.services.devices import own_device
from core.store.prepared import PreparedStatement
from core.store.tables import Device, Pair

# Envelope payload types a device may relay (the spec's table), and the sms family behind a flag.
RELAYED_TYPES = frozenset(
    {
        "notification",
        "reply",
        "action",
        "dismissed",
        "replied",
        "clipboard",
        "file_ctrl",
        "ping",
        "pong",
        "batch_dismiss",
    }
)
# Standard base64 of at least MIN_LENGTH (41) bytes; the first byte, the wire version, is the server's
# to check (a refusal the schema cannot express).
BLOB_SCHEMA: JsonDict = {
    "pattern": "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
    "minLength": 56,
}
RELAYED_TYPES_SCHEMA: JsonDict = {"enum": [*sorted(RELAYED_TYPES)]}
SMS_FAMILY = re.compile(r"^sms(_[a-z]{1,24})?$")
# Types a phone receives inline in the push when they fit; the others wake it with ``notify``.
INLINE_PUSH_TYPES = frozenset({"notification", "clipboard", "file_ctrl", "reply", "action"})


class EnvelopeCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: str = Field(min_length=1, max_length=36, description="Recipient device id (a paired device)")
    type: str = Field(
        min_length=1,
        max_length=32,
        description="The payload type inside the envelope (and the sms family, where the server enables it)",
        json_schema_extra=RELAYED_TYPES_SCHEMA,
    )
    blob: str = Field(
        min_length=1,
        description="Standard base64 of the envelope v1 bytes",
        json_schema_extra=BLOB_SCHEMA,
    )
    ttl: StrictInt | None = Field(default=None, description="Seconds in the queue; clamped to 0-86400")
    msg_ids: list[str] | None = Field(
        default=None, max_length=100, description="batch_dismiss only: the message ids being cleared"
    )


class EnvelopeAccepted(BaseModel):
    seq: int
    msg_id: str


class QueueItem(BaseModel):
    seq: int
    sender: str = Field(serialization_alias="from")
    type: str
    blob: str  # base64 (an envelope), or for type "push" the push message as JSON text


class QueuePage(BaseModel):
    items: list[QueueItem]


@group_commit  # the hot write: nothing outside the transaction before it returns
def relay_envelope(tx: Tx, principal: Principal, *, body: EnvelopeCreate) -> EnvelopeAccepted:
    """Queue an opaque envelope for a paired device and push it to a phone."""
    sender_id = principal.require_device()
    found = _SENDER_AND_RECIPIENT.rows(tx.connection(), sender=sender_id, to=body.to)
    if not found:
        raise RelayError("invalid_token")  # the sending device is gone
    recipient, recipient_kind = found[0]
    if body.type not in RELAYED_TYPES:
        if not SMS_FAMILY.fullmatch(body.type):
            raise RelayError("invalid_envelope_type", details={"allowed": sorted(RELAYED_TYPES)})
        if not tx.settings.sms_enabled:
            raise RelayError("feature_disabled", "SMS relaying is turned off on this server.")
    blob = _decode_blob(body.blob, tx.settings.max_envelope_bytes)
    if recipient is None:  # no pair joins them (existence is not confirmed)
        raise RelayError("not_found", "No paired device with that id.")
    ttl = max(0, min(body.ttl if body.ttl is not None else QUEUE_LIFETIME_S, QUEUE_LIFETIME_S))
    msg_id = new_prefixed_id("msg")
    seq = enqueue(tx, recipient, sender=sender_id, type=body.type, blob=blob, ttl_s=ttl)
    if recipient_kind == "phone":
        phone = tx.session.get(Device, recipient)
        assert phone is not None  # read in this transaction
        _push_to_phone(tx, phone, body, blob, msg_id=msg_id, seq=seq, ttl=ttl)
    return EnvelopeAccepted(seq=seq, msg_id=msg_id)


# Built once and run on the driver's cursor (the relay is the hot write path): the sender, if it
# still exists, and the recipient with its kind if a pair joins the two (either may be the phone).
_SENDER = Device.__table__.alias("sender")  # type: ignore[attr-defined]
_RECIPIENT = Device.__table__.alias("recipient")  # type: ignore[attr-defined]
_PAIR = Pair.__table__  # type: ignore[attr-defined]
_SENDER_AND_RECIPIENT = PreparedStatement(
    sql.select(_RECIPIENT.c.device_id.label("recipient"), _RECIPIENT.c.surface_kind)
    .select_from(_SENDER)
    .outerjoin(
        _PAIR,
        or_(
            and_(_PAIR.c.phone_device_id == _SENDER.c.device_id, _PAIR.c.device_id == bindparam("to")),
            and_(_PAIR.c.phone_device_id == bindparam("to"), _PAIR.c.device_id == _SENDER.c.device_id),
        ),
    )
    .outerjoin(_RECIPIENT, and_(_RECIPIENT.c.device_id == bindparam("to"), _PAIR.c.pair_id.is_not(None)))
    .where(_SENDER.c.device_id == bindparam("sender"))
    .limit(1)
)


def _push_to_phone(
    tx: Tx, phone: Device, body: EnvelopeCreate, blob: bytes, *, msg_id: str, seq: int, ttl: int
) -> None:
    target = push_target(tx, phone)
    if not tx.push.can_reach(target):
        return  # the queue entry itself reaches its stream
    wake = {"msgId": msg_id, "seqId": str(seq)}
    message = PushMessage("notify", wake, high_priority=True, ttl_s=ttl)
    if body.type == "batch_dismiss":
        message = PushMessage("batch_dismiss", {"msgIds": ",".join(body.msg_ids or [])}, ttl_s=ttl)
    elif body.type in INLINE_PUSH_TYPES or SMS_FAMILY.fullmatch(body.type):
        inline = PushMessage(
            body.type,
            {"msgId": msg_id, "payload": base64.b64encode(blob).decode()},
            high_priority=True,
            ttl_s=ttl,
        )
        if inline.encoded_size() <= tx.push.data_limit(target):
            message = inline
    request_push(tx, target, message)


def _decode_blob(text: str, limit: int) -> bytes:
    if len(text) > (limit * 4) // 3 + 4:
        raise RelayError("envelope_too_large", details={"max": limit})
    try:
        blob = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RelayError("invalid_blob") from exc
    if len(blob) > limit:
        raise RelayError("envelope_too_large", details={"max": limit})
    if len(blob) < MIN_LENGTH or blob[0] != WIRE_VERSION:
        raise RelayError("invalid_blob")
    return blob


def paired_recipient(tx: Tx, sender: Device, recipient_id: str) -> Device:
    """The recipient, if a pair joins it to the sender; otherwise 404 (existence is not confirmed)."""
    pair = tx.session.exec(
        select(Pair).where(
            or_(
                and_(col(Pair.phone_device_id) == sender.device_id, col(Pair.device_id) == recipient_id),
                and_(col(Pair.phone_device_id) == recipient_id, col(Pair.device_id) == sender.device_id),
            )
        )
    ).first()
    recipient = tx.session.get(Device, recipient_id) if pair is not None else None
    if recipient is None:
        raise RelayError("not_found", "No paired device with that id.")
    return recipient


@read_only
def read_queue(tx: Tx, principal: Principal, *, after: int, limit: int = 100) -> QueuePage:
    """The calling device's queued items with ``seq > after``, oldest first, unexpired."""
    device = own_device(tx, principal)
    entries = queue(tx).read(tx, device.device_id, after=after, limit=limit, now=tx.now())
    if not device.ever_drained and len(entries) < limit:
        tx.emit(Deferred(mark_drained, {"device_id": device.device_id}))
    items = [
        QueueItem(seq=seq, sender=sender, type=type, blob=blob_text(type, blob))
        for seq, sender, type, blob in entries
    ]
    return QueuePage(items=items)


def mark_drained(tx: Tx, principal: Principal, *, device_id: str) -> None:
    """System bookkeeping: the device has read its whole queue at least once."""
    if principal.kind is not PrincipalKind.SYSTEM:
        raise RelayError("forbidden")
    tx.session.execute(update(Device).where(col(Device.device_id) == device_id).values(ever_drained=1))
