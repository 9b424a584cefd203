"""Reminders are owned by the phone: the server encrypts the setup (or the cancel) once to the phone
and keeps nothing but that sealed envelope, on the phone's queue, until the phone can have it.

Neither may be lost to an offline phone, so both are queued like every other phone-bound message
and pinned there (never trimmed to the newest 200): a set until a day after it fires (a phone that
was off at that moment still fires it, late), a cancel for as long as the set it cancels. Both
carry a tag, a keyed digest of the reminder id, which is all the server can tell of either: a
cancel finds its set by it and deletes it, so a phone that was offline throughout never even
receives the text; it still gets the cancel, in case it had the set already.
"""

from __future__ import annotations

import hmac
import re
from datetime import datetime
from hashlib import sha256
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from core.domain import payloads
from core.domain.secrets import new_prefixed_id
from core.errors import RelayError
from core.principal import SCOPE_REMINDERS_WRITE, Principal
from core.queue import queue
from core.runtime.core import Core
from core.runtime.tx import Tx
from core.services import wake_ups
from core.services.capability import Feature, account_phone, gate
from core.services.delivery import QUEUE_LIFETIME_S, Delivery, send_server_message
from core.services.delivery_warnings import settle
from core.services.limits import Limited, charge_send_class

REMINDER_ID = re.compile(r"^rmd_[0-9a-f]{32}$")
MAX_AHEAD_S = 365 * 86_400
LATE_FIRE_S = 86_400  # a set stays queued this long after its fire time: a phone off then fires it late
MAX_PINNED = 500  # pinned queue entries (reminder sets and cancels) one phone may hold


def epoch_seconds(value: object) -> int:
    """``at`` as epoch seconds: a whole number (``1800003600.0`` too), or an ISO 8601 date-time
    with its UTC offset (a fraction of a second is dropped). A time without an offset is refused:
    the server cannot know which zone the caller meant."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("must be epoch seconds or an ISO 8601 date-time") from None
        if parsed.tzinfo is None:
            raise ValueError("an ISO 8601 time needs its UTC offset (Z or +hh:mm)")
        return int(parsed.timestamp())
    raise ValueError("must be epoch seconds or an ISO 8601 date-time")


FireAt = Annotated[
    int,
    BeforeValidator(epoch_seconds),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string", "format": "date-time"}],
            "description": "When: Unix epoch seconds, or an ISO 8601 date-time with its offset "
            "(2026-12-24T18:00:00+01:00, …Z); at least the configured lead (60 s by default) and at "
            "most 365 days from now",
        }
    ),
]


class ReminderCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(min_length=1, max_length=500)
    at: FireAt


class ReminderOut(Limited):
    reminder_id: str
    fire_at: int
    warnings: list[str] | None = Field(
        default=None, description="Why delivery is uncertain, or the phone never reported its build"
    )


class CancelOut(Limited):
    status: str = "cancel_requested"
    warnings: list[str] | None = Field(default=None, description="Why delivery is uncertain")


def reminder_tag(tx: Tx, reminder_id: str) -> str:
    """The keyed digest that names a reminder's queue entries: a cancel finds its set by it, and
    nothing about the reminder can be read from it."""
    key = tx.keys.derived_key("reminder-tag")
    return hmac.new(key, reminder_id.encode(), sha256).hexdigest()


def prepare_reminder(
    tx: Tx, principal: Principal, *, body: ReminderCreate, ip: str
) -> tuple[ReminderOut, Delivery]:
    principal.require_scope(SCOPE_REMINDERS_WRITE)
    now, fire_at = tx.now(), body.at
    lead = tx.settings.reminder_min_lead_s
    if fire_at - now < lead:
        raise RelayError(
            "fire_at_too_soon",
            f"at must be at least {lead} seconds from now.",
            details={"min_seconds_ahead": lead},
        )
    if fire_at - now > MAX_AHEAD_S:
        raise RelayError("fire_at_too_far", details={"max_seconds_ahead": MAX_AHEAD_S})
    phone = account_phone(tx, principal.account_id)
    warnings = gate(tx, phone, Feature.REMINDERS)
    _check_room(tx, phone.device_id)
    rate_limit, _ = charge_send_class(tx, principal, ip)
    reminder_id = new_prefixed_id("rmd")
    tag = reminder_tag(tx, reminder_id)
    payload = payloads.reminder(reminder_id=reminder_id, fire_at=fire_at, message=body.message)
    by_wake_up = wake_ups.wakes_by_push(tx, phone)  # a browser phone: pushed at its time instead
    delivery = send_server_message(
        tx,
        phone,
        payload,
        msg_id=new_prefixed_id("msg"),
        push_type="reminder",
        ttl_s=fire_at + LATE_FIRE_S - now,
        max_lifetime_s=MAX_AHEAD_S + LATE_FIRE_S,
        high_priority=True,
        tag=tag,
        awaited=True,
        push_now=not by_wake_up,
    )
    if by_wake_up:
        wake_ups.schedule(tx, phone, due_at=fire_at, tag=tag, payload=payload, push_type="reminder")
    out = ReminderOut(
        reminder_id=reminder_id, fire_at=fire_at, warnings=warnings or None, rate_limit=rate_limit
    )
    return out, delivery


async def create_reminder(core: Core, principal: Principal, *, body: ReminderCreate, ip: str) -> ReminderOut:
    """Arm a reminder on the account's phone: the setup is queued for it (and pushed where it has a
    push service); ``warnings`` say when delivery is uncertain."""
    out, delivery = await core.run(prepare_reminder, principal, body=body, ip=ip)
    kept_s = out.fire_at + LATE_FIRE_S - int(core.clock.now())
    uncertain = await settle(core, [delivery], what="reminder", kept_s=kept_s)
    return out.model_copy(update={"warnings": [*(out.warnings or []), *uncertain] or None})


def prepare_cancel(
    tx: Tx, principal: Principal, *, reminder_id: str, ip: str
) -> tuple[CancelOut, Delivery, int]:
    principal.require_scope(SCOPE_REMINDERS_WRITE)
    if not REMINDER_ID.fullmatch(reminder_id):
        raise RelayError("invalid_reminder_id")
    phone = account_phone(tx, principal.account_id)
    rate_limit, _ = charge_send_class(tx, principal, ip)
    tag = reminder_tag(tx, reminder_id)
    wake_ups.cancel(tx, phone.device_id, tag)
    queued_until = queue(tx).take_pinned(tx, phone.device_id, tag, "reminder")
    now = tx.now()
    # The cancel must outlive the set it cancels (the phone may have that set already); with no
    # set queued, either it never existed or its time is long past, and a short life is plenty.
    keep_s = max(queued_until, default=now + QUEUE_LIFETIME_S) - now
    delivery = send_server_message(
        tx,
        phone,
        payloads.reminder_cancel(reminder_id=reminder_id),
        msg_id=new_prefixed_id("msg"),
        push_type="reminder_cancel",
        ttl_s=keep_s,
        max_lifetime_s=MAX_AHEAD_S + LATE_FIRE_S,
        high_priority=False,
        tag=tag if queued_until else None,
        awaited=True,
        push_now=not wake_ups.wakes_by_push(tx, phone),  # a browser is not woken to be told
    )
    return CancelOut(rate_limit=rate_limit), delivery, keep_s


async def cancel_reminder(core: Core, principal: Principal, *, reminder_id: str, ip: str) -> CancelOut:
    """Forward a cancel to the phone. Succeeds for any well-formed id: the server cannot tell
    whether the reminder exists (it never stored one it can read)."""
    out, delivery, kept_s = await core.run(prepare_cancel, principal, reminder_id=reminder_id, ip=ip)
    uncertain = await settle(core, [delivery], what="cancel", kept_s=kept_s)
    return out.model_copy(update={"warnings": uncertain or None})


def _check_room(tx: Tx, phone_id: str) -> None:
    if queue(tx).pinned(tx, phone_id) >= MAX_PINNED:
        raise RelayError(
            "limit_reached",
            f"The phone already has {MAX_PINNED} reminders waiting for it; cancel some or let it connect.",
            details={"max": MAX_PINNED},
        )
