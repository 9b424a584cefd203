"""Sending a notification: the server composes it, encrypts it once per target device, pushes it to
the phone and queues it for the other devices. The plaintext lives only in memory for the call.

Order (so a 4xx never burns quota): per-IP peek (at authentication; for a cached credential
settled instead by a request that fails, ``core.services.limits``) → body validation → priority
cap → envelope size → all counters at once → dispatch.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter

from core.domain import payloads
from core.domain.delivery_time import asks_for_later, delivery_time
from core.domain.notification import PRIORITIES, InvalidFieldError, Notification, parse_notification
from core.domain.secrets import new_prefixed_id
from core.domain.urgent import UrgentReceipt, may_repeat
from core.errors import RelayError
from core.principal import SCOPE_NOTIFICATIONS_SEND, Principal
from core.queue import LIVE_GRACE_S, NOTIFICATION_LIFETIME_S
from core.runtime.ahead import Planned, charged_ahead
from core.runtime.marks import group_commit
from core.runtime.tx import Tx
from core.services import attachments, receipts, scheduled
from core.services.account_devices import AccountDevice, account_devices
from core.services.attachments import SealedAttachment
from core.services.delivery import Addressee, send_server_messages
from core.services.limits import Limited, charge_send_class, send_class_checks

ENVELOPE_MAX_BYTES = 2048
NORMAL_PRIORITIES = ("min", "low")


class DeliveredTo(BaseModel):
    device_id: str
    type: str = Field(description="The device's surface kind: phone, extension, pwa, cli, desktop")


class SendOut(Limited):
    id: str = Field(description="msg_ + 32 hex characters")
    sequence_id: str = Field(
        description="The sequence_id sent, else the id: send again with it to replace this "
        "notification on the phone, or clear it with DELETE /v1/notifications/{sequence_id}"
    )
    delivered_to: list[DeliveredTo]
    warnings: list[str]
    receipt: str | None = Field(
        default=None, description="With priority urgent and repeat: poll it at GET /v1/receipts/{id}"
    )
    scheduled: bool | None = Field(
        default=None, description="true when sent with delay or at: kept sealed until deliver_at (HTTP 202)"
    )
    deliver_at: int | None = Field(
        default=None, description="With scheduled: the Unix second it will be delivered at"
    )


@dataclass(slots=True)
class _Composed:
    """A send as far as its charge: validated, composed, encoded and addressed."""

    note: Notification
    urgent: UrgentReceipt | None
    msg_id: str
    now: int
    attachment_id: str
    payload: dict[str, Any]
    encoded: bytes
    devices: list[AccountDevice]
    warnings: list[str]
    deliver_at: int | None  # a scheduled send's time (``core.services.scheduled``)


def _compose(
    tx: Tx, principal: Principal, fields: Mapping[str, Any], attachment: SealedAttachment | None
) -> _Composed:
    """Everything a send does before its charge; refuses as the send does (nothing charged)."""
    principal.require_scope(SCOPE_NOTIFICATIONS_SEND)
    note = checked_notification(fields)
    now = tx.now()
    with field_error():
        deliver_at = delivery_time(fields, now, tx.settings.delay_min_s)
    if deliver_at is not None and may_repeat(fields):
        raise RelayError(
            "delay_unsupported", "An urgent send that repeats until acknowledged is sent at once, not later."
        )
    _check_priority_cap(principal, note.priority)
    urgent = receipts.prepare(tx, principal, fields, note.priority)  # None unless it repeats
    msg_id = new_prefixed_id("msg")
    attachment_id = new_prefixed_id("att")
    reference = attachments.reference(attachment, attachment_id) if attachment is not None else None
    # A repeating alert keeps the true time: the phone counts its repeats from it. A scheduled
    # one says it was sent when it is delivered.
    sent_at = note.timestamp if note.timestamp is not None and urgent is None else deliver_at or now
    payload = payloads.notification(
        note, msg_id=msg_id, sent_at=sent_at, sender=principal.sender_id, attachment=reference, urgent=urgent
    )
    encoded = payloads.encode(payload)  # once: every device gets the same plaintext, sealed to it
    size = len(encoded)
    if size > ENVELOPE_MAX_BYTES:
        raise RelayError("payload_too_large", details={"size": size, "max": ENVELOPE_MAX_BYTES})
    devices, warnings = resolve_targets(tx, principal.account_id, note.devices)
    if attachment is not None:
        attachments.check_room(tx, principal.account_id, attachment)
    if deliver_at is not None:
        scheduled.check_room(tx, principal, note.sequence_id or msg_id)
    return _Composed(
        note, urgent, msg_id, now, attachment_id, payload, encoded, devices, warnings, deliver_at
    )


def _dispatch(
    tx: Tx,
    principal: Principal,
    ip: str,
    attachment: SealedAttachment | None,
    send: _Composed,
    receipt_callback: str | None = None,
) -> SendOut:
    """The send's charge, then its envelopes queued and pushed, its receipt kept; its answer."""
    rate_limit, monthly = charge_send_class(tx, principal, ip)
    note, devices = send.note, send.devices
    life = min(note.ttl, NOTIFICATION_LIFETIME_S)
    if attachment is not None:  # it lives as long as the notification's queue entries
        expires_at = (send.deliver_at or send.now) + (life if note.ttl > 0 else LIVE_GRACE_S)
        attachments.park(
            tx, principal.account_id, attachment, attachment_id=send.attachment_id, expires_at=expires_at
        )
    if send.deliver_at is not None:
        scheduled.keep(
            tx,
            principal,
            devices,
            send.encoded,
            msg_id=send.msg_id,
            sequence_id=note.sequence_id or send.msg_id,
            deliver_at=send.deliver_at,
            ttl_s=life,
            high_priority=note.priority not in NORMAL_PRIORITIES,
        )
    else:
        send_server_messages(
            tx,
            [Addressee(device, send.msg_id, device.push_target()) for device in devices],
            send.payload,
            push_type="notification",
            ttl_s=note.ttl,
            high_priority=note.priority not in NORMAL_PRIORITIES,
            max_lifetime_s=NOTIFICATION_LIFETIME_S,
            encoded=send.encoded,
            account_id=principal.account_id,
        )
    if send.urgent is not None:
        ids = [device.device_id for device in devices]
        receipts.keep(
            tx,
            principal,
            send.urgent,
            msg_id=send.msg_id,
            device_ids=ids,
            payload=send.payload,
            callback_url=receipt_callback,
        )
    return SendOut(
        id=send.msg_id,
        sequence_id=note.sequence_id or send.msg_id,
        delivered_to=delivered_to(devices),
        warnings=[*note.warnings, *send.warnings],
        rate_limit=rate_limit,
        monthly=monthly,
        receipt=send.urgent.receipt_id if send.urgent is not None else None,
        scheduled=True if send.deliver_at is not None else None,
        deliver_at=send.deliver_at,
    )


def _plan_send(
    tx: Tx,
    principal: Principal,
    *,
    fields: Mapping[str, Any],
    ip: str,
    attachment: SealedAttachment | None = None,
    receipt_callback: str | None = None,
) -> Planned | None:
    """A send taken as far as its charge, to be charged with the group's other sends
    (``core.runtime.ahead``); ``None`` for one whose part before it reads what another send of the
    group may write: the account's parked attachments, its urgent receipts, its scheduled sends."""
    if attachment is not None or may_repeat(fields) or asks_for_later(fields):
        return None
    send = _compose(tx, principal, fields, None)
    finish = functools.partial(_dispatch, principal=principal, ip=ip, attachment=None, send=send)
    return Planned(send_class_checks(tx.settings, principal, ip), finish)


@group_commit  # sends under load share transactions (both databases); limits are charged once a send
@charged_ahead(_plan_send)  # and their charges are made together
def send_notification(
    tx: Tx,
    principal: Principal,
    *,
    fields: Mapping[str, Any],
    ip: str,
    attachment: SealedAttachment | None = None,
    receipt_callback: str | None = None,
) -> SendOut:
    """Validate, cap, size-check, charge the limits, then encrypt per device and dispatch. An
    ``attachment`` (sealed by the caller, off the event loop) is parked as one ciphertext for as
    long as the notification lives; each device's envelope carries its key. ``receipt_callback``
    (a URL checked by the caller): an urgent send that repeats calls it back once acknowledged."""
    send = _compose(tx, principal, fields, attachment)
    return _dispatch(tx, principal, ip, attachment, send, receipt_callback)


# The answer's devices built by pydantic's validator from plain dicts, in Rust: a third cheaper a
# device than one ``DeliveredTo(...)`` call each (a Python ``__init__`` frame per model).
_DELIVERED_TO = TypeAdapter(list[DeliveredTo])


def delivered_to(devices: list[AccountDevice]) -> list[DeliveredTo]:
    return _DELIVERED_TO.validate_python(
        [{"device_id": d.device_id, "type": d.surface_kind} for d in devices]
    )


def checked_notification(fields: Mapping[str, Any]) -> Notification:
    try:  # as ``field_error``, without a context manager's generator on every send
        return parse_notification(fields)
    except InvalidFieldError as error:
        raise field_relay_error(error) from error


@contextmanager
def field_error() -> Iterator[None]:
    """A field's ``InvalidFieldError`` as the ``RelayError`` of the same code (a 400)."""
    try:
        yield
    except InvalidFieldError as error:
        raise field_relay_error(error) from error


def field_relay_error(error: InvalidFieldError) -> RelayError:
    return RelayError(error.code, error.message, details=error.details)


def _check_priority_cap(principal: Principal, priority: str) -> None:
    cap = principal.priority_cap
    if cap is not None and PRIORITIES.index(priority) > PRIORITIES.index(cap):
        raise RelayError(
            "priority_capped",
            f"This token's priority_cap is {cap}.",
            details={"priority": priority, "priority_cap": cap},
        )


def resolve_targets(
    tx: Tx, account_id: str, selectors: tuple[str, ...]
) -> tuple[list[AccountDevice], list[str]]:
    """Resolve ``all``, ``phone``/``mobile``, ``desktop``, names and ids to the account's devices."""
    devices = account_devices(tx, account_id)
    if not any(d.surface_kind == "phone" for d in devices):
        raise RelayError("no_phone_device")
    chosen: dict[str, AccountDevice] = {}
    warnings: list[str] = []
    for selector in selectors:
        wanted = selector.lower()
        if wanted == "all":
            matched = devices
        elif wanted in ("phone", "mobile"):
            matched = [d for d in devices if d.surface_kind == "phone"]
        elif wanted == "desktop":
            matched = [d for d in devices if d.surface_kind != "phone"]
        else:
            matched = [d for d in devices if d.device_id == selector or d.name.lower() == wanted]
        if not matched:
            warnings.append(f"device: nothing matches {selector!r}")
        for device in matched:
            chosen.setdefault(device.device_id, device)
    if not chosen:  # nothing would be delivered: an error, never a success that sent nothing
        raise RelayError("no_matching_device", details={"device": list(selectors)})
    return list(chosen.values()), warnings
