"""Reminders are owned by the phone: the server encrypts the setup (or the cancel) once to the phone,
pushes it, and keeps nothing."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from core.context import Tx
from core.domain import payloads
from core.domain.secrets import new_prefixed_id
from core.errors import RelayError
from core.principal import SCOPE_REMINDERS_WRITE, Principal
from core.services.capability import Feature, account_phone, gate
from core.services.delivery import send_server_message
from core.services.limits import Limited, charge_send_class

REMINDER_ID = re.compile(r"^rmd_[0-9a-f]{32}$")
MAX_AHEAD_S = 365 * 86_400


class ReminderCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(min_length=1, max_length=500)
    at: StrictInt = Field(description="Unix epoch seconds, 60 s to 365 days from now")


class ReminderOut(Limited):
    reminder_id: str
    fire_at: int
    warnings: list[str] | None = Field(default=None, description="Only when the phone never reported a build")


class CancelOut(Limited):
    status: str = "cancel_requested"


def create_reminder(tx: Tx, principal: Principal, *, body: ReminderCreate, ip: str) -> ReminderOut:
    """Arm a reminder on the account's phone; delivery of the setup is best-effort."""
    principal.require_scope(SCOPE_REMINDERS_WRITE)
    now = tx.now()
    if body.at - now < tx.settings.reminder_min_lead_s:
        raise RelayError("fire_at_too_soon", details={"min_seconds_ahead": tx.settings.reminder_min_lead_s})
    if body.at - now > MAX_AHEAD_S:
        raise RelayError("fire_at_too_far", details={"max_seconds_ahead": MAX_AHEAD_S})
    phone = account_phone(tx, principal.account_id)
    warnings = gate(tx, phone, Feature.REMINDERS)
    rate_limit, _ = charge_send_class(tx, principal, ip)
    reminder_id = new_prefixed_id("rmd")
    payload = payloads.reminder(reminder_id=reminder_id, fire_at=body.at, message=body.message)
    send_server_message(
        tx,
        phone,
        payload,
        msg_id=new_prefixed_id("msg"),
        push_type="reminder",
        ttl_s=body.at - now,
        high_priority=True,
        queue=False,
    )
    return ReminderOut(
        reminder_id=reminder_id, fire_at=body.at, warnings=warnings or None, rate_limit=rate_limit
    )


def cancel_reminder(tx: Tx, principal: Principal, *, reminder_id: str, ip: str) -> CancelOut:
    """Forward a cancel to the phone. Succeeds for any well-formed id: nothing was stored to check."""
    principal.require_scope(SCOPE_REMINDERS_WRITE)
    if not REMINDER_ID.fullmatch(reminder_id):
        raise RelayError("invalid_reminder_id")
    phone = account_phone(tx, principal.account_id)
    rate_limit, _ = charge_send_class(tx, principal, ip)
    send_server_message(
        tx,
        phone,
        payloads.reminder_cancel(reminder_id=reminder_id),
        msg_id=new_prefixed_id("msg"),
        push_type="reminder_cancel",
        ttl_s=86_400,
        high_priority=False,
        queue=False,
    )
    return CancelOut(rate_limit=rate_limit)
