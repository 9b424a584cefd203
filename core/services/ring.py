"""Ringing the phone: a high-priority, fire-and-forget ``ring`` push. A phone without a push
service gets it from its queue, where it lives only as long as the ring would last."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from core.adapters.limits.base import LimitState
from core.adapters.push.base import PushMessage
from core.errors import RelayError
from core.principal import SCOPE_PHONE_CONTROL, Principal
from core.runtime.core import Core
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services.capability import Feature, account_phone, gate
from core.services.delivery import Delivery, push_target, request_push
from core.services.delivery_warnings import settle
from core.services.limits import Limited, charge_send_class
from core.store.tables import Device

NO_REGISTRATION = "the phone has no push registration; the ring goes to its open stream"


class RingOut(Limited):
    status: Literal["requested"] = "requested"
    warnings: list[str] | None = Field(default=None, description="A non-empty list is not itself a failure")


@dataclass(frozen=True)
class RingPlan:
    delivery: Delivery
    warnings: list[str]
    rate_limit: LimitState


def prepare_ring(tx: Tx, principal: Principal, *, device_id: str, ip: str) -> RingPlan:
    principal.require_scope(SCOPE_PHONE_CONTROL)
    device = tx.session.get(Device, device_id)
    if device is None or device.account_id != principal.account_id:
        raise RelayError("not_found", "No device of yours has that id.")
    if device.surface_kind != "phone":
        raise RelayError("no_phone_device", "That device is not a phone.")
    warnings = gate(tx, device, Feature.RING)
    rate_limit, _ = charge_send_class(tx, principal, ip)
    duration = tx.settings.ring_duration_s
    # A phone without a push service finds the ring in its queue, kept only as long as it would
    # ring: one that connects later than that does not ring for a search long over.
    message = PushMessage("ring", {"durationS": str(duration)}, high_priority=True, ttl_s=duration)
    delivery = request_push(tx, push_target(tx, device), message, awaited=True)
    return RingPlan(delivery, warnings, rate_limit)


async def find_my_phone(core: Core, principal: Principal, *, ip: str) -> RingOut:
    """Ring the account's phone (the connector's ``find_my_phone``)."""
    device_id = await core.run(phone_device_id, principal)
    return await ring_phone(core, principal, device_id=device_id, ip=ip)


@read_only
def phone_device_id(tx: Tx, principal: Principal) -> str:
    principal.require_scope(SCOPE_PHONE_CONTROL)
    return account_phone(tx, principal.account_id).device_id


async def ring_phone(core: Core, principal: Principal, *, device_id: str, ip: str) -> RingOut:
    """Ring the phone at full volume for up to a minute; delivery is never confirmed."""
    plan = await core.run(prepare_ring, principal, device_id=device_id, ip=ip)
    uncertain = await settle(core, [plan.delivery], what="ring", kept_s=core.settings.ring_duration_s)
    if not uncertain and not plan.delivery.pushed:  # the spec names this case even when it streams
        uncertain = [NO_REGISTRATION]
    return RingOut(warnings=[*plan.warnings, *uncertain] or None, rate_limit=plan.rate_limit)
