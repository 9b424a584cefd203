"""How anything reaches a device: its queue (``core.queue``), the push transports, and
server-composed envelopes. Operations call these inside their transaction; pushes leave after
commit.
"""

from __future__ import annotations

import base64
import json
from binascii import a2b_base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import select
from sqlmodel import col

from core.adapters.push.base import PushMessage, PushTarget
from core.domain import payloads
from core.domain.canonical import canonical_json
from core.queue import QUEUE_LIFETIME_S as QUEUE_LIFETIME_S  # the relay and reminders
from core.queue import enqueue as enqueue  # import these two from here
from core.queue import enqueue_all
from core.runtime.events import PushRequested
from core.runtime.tx import Tx
from core.store.tables import PushRegistration

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


# Delivery and Addressee are made once a device a send: not frozen, whose __init__ costs 3x (its
# object.__setattr__ a field). Nothing changes one once made.
@dataclass(slots=True)
class Delivery:
    device_id: str
    seq: int | None  # set when the message was queued
    pushed: bool  # a push service (FCM, web push) carries it
    # With ``awaited=True``: the push the caller sends itself after commit, to learn how it went
    # (``core.services.delivery_warnings``); otherwise pushes leave in the background.
    awaited_push: tuple[PushTarget, PushMessage] | None = None


@dataclass(slots=True)
class Addressee:
    """A device a server message goes to (``send_server_messages``)."""

    device: Recipient
    msg_id: str
    target: PushTarget | None = None  # where the device is pushed, when the caller read it already
    push_now: bool = True  # False: queue only, the push service carries it later (``wake_ups``)


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
) -> Delivery:
    """``send_server_messages`` to one device."""
    [delivery] = send_server_messages(
        tx,
        [Addressee(device, msg_id, push_now=push_now)],
        payload,
        push_type=push_type,
        ttl_s=ttl_s,
        high_priority=high_priority,
        max_lifetime_s=max_lifetime_s,
        tag=tag,
        awaited=awaited,
    )
    return delivery


def send_server_messages(
    tx: Tx,
    addressees: Sequence[Addressee],
    payload: dict[str, Any],
    *,
    push_type: str | None,
    ttl_s: int,
    high_priority: bool,
    max_lifetime_s: int = QUEUE_LIFETIME_S,
    tag: str | None = None,
    awaited: bool = False,
    encoded: bytes | None = None,
    account_id: str | None = None,
) -> list[Delivery]:
    """Encrypt a server-composed payload once to each device (distinct devices), put the envelopes
    on their queues in one write (for up to ``ttl_s``, at most ``max_lifetime_s``; ``tag`` pins
    them, see ``core.queue``) and, for a device with a push service, push it too — inline
    as ``push_type`` when it fits the 4 KB limit, else (or when ``push_type`` is None) as a
    ``notify`` wake-up after which the device fetches its queue. A device without one is woken on
    its open stream by the queue event. ``awaited``: see ``Delivery``. ``encoded``: the payload
    encoded, when the caller has it already. ``account_id``: the addressees' account (they are
    all of one), when the caller has it: their entries may then share a row (``enqueue_all``). One
    ``Delivery`` per addressee, in their order."""
    plaintext = payloads.encode(payload) if encoded is None else encoded
    blobs = seal_to_each(tx, [addressee.device for addressee in addressees], plaintext)
    return deliver_sealed(
        tx,
        addressees,
        blobs,
        type=str(payload["type"]),
        push_type=push_type,
        ttl_s=ttl_s,
        high_priority=high_priority,
        max_lifetime_s=max_lifetime_s,
        tag=tag,
        awaited=awaited,
        account_id=account_id,
    )


def seal_to_each(tx: Tx, devices: Sequence[Recipient], plaintext: bytes) -> dict[str, bytes]:
    """``plaintext`` sealed to each of ``devices`` (distinct), by device id, in their order."""
    # a2b_base64: what base64.b64decode does with text, without its two Python calls a device
    sealed = tx.keys.seal_each([a2b_base64(device.public_key) for device in devices], plaintext)
    blobs = dict(zip((device.device_id for device in devices), sealed, strict=True))
    if len(blobs) != len(devices):
        raise ValueError("a server message goes to each device once")
    return blobs


def deliver_sealed(
    tx: Tx,
    addressees: Sequence[Addressee],
    blobs: Mapping[str, bytes],
    *,
    type: str,
    push_type: str | None,
    ttl_s: int,
    high_priority: bool,
    max_lifetime_s: int = QUEUE_LIFETIME_S,
    tag: str | None = None,
    awaited: bool = False,
    account_id: str | None = None,
) -> list[Delivery]:
    """Envelopes sealed already (``blobs``, by device id: ``seal_to_each``) put on their devices'
    queues in one write and pushed, as ``send_server_messages`` says; a scheduled send's at its
    time (``core.services.scheduled``) too, the one way both reach the queue."""
    seqs = enqueue_all(
        tx,
        blobs,
        sender=SERVER_SENDER,
        type=type,
        ttl_s=ttl_s,
        max_lifetime_s=max_lifetime_s,
        tag=tag,
        account_id=account_id,
    )
    can_reach = tx.push.can_reach
    deliveries: list[Delivery] = []
    for addressee, seq in zip(addressees, seqs, strict=True):
        device = addressee.device
        target = addressee.target if addressee.target is not None else push_target(tx, device)
        if not can_reach(target):  # most devices: their stream is woken by the queue event
            deliveries.append(Delivery(device.device_id, seq, False))
            continue
        pushed = _push_queued(
            tx,
            addressee,
            target,
            seq,
            blobs[device.device_id],
            push_type=push_type,
            ttl_s=ttl_s,
            high_priority=high_priority,
            awaited=awaited,
        )
        deliveries.append(pushed)
    return deliveries


def _push_queued(
    tx: Tx,
    addressee: Addressee,
    target: PushTarget,
    seq: int,
    blob: bytes,
    *,
    push_type: str | None,
    ttl_s: int,
    high_priority: bool,
    awaited: bool,
) -> Delivery:
    """Push a queued envelope (``send_server_messages``) to its device, which a push service
    reaches at ``target``, unless the addressee is to be pushed later."""
    device_id = addressee.device.device_id
    if not addressee.push_now:
        return Delivery(device_id, seq, True)
    wake = {"msgId": addressee.msg_id, "seqId": str(seq)}
    message = PushMessage("notify", wake, high_priority, ttl_s)
    if push_type is not None:
        inline_fields = wake | {"payload": base64.b64encode(blob).decode()}
        inline = PushMessage(push_type, inline_fields, high_priority, ttl_s)
        if inline.encoded_size() <= tx.push.data_limit(target):
            message = inline
    if awaited:
        return Delivery(device_id, seq, True, (target, message))
    tx.emit(PushRequested(target, message))
    return Delivery(device_id, seq, True)
