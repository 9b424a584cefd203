"""Clearing a notification: ``DELETE /v1/notifications/{sequence_id}`` and the MCP tool
``clear_notification``. The phone gets a ``notification_clear`` payload, sealed to it, by the path a
send takes (queued for a device that is offline, pushed to one with a push service), and takes the
notification of that sequence away. The server keeps no list of what it sent, so clearing a
sequence that was never sent (or is gone already) is harmless: the phone ignores it, and the answer
is 200 like any other.

Charged to the send-class limits, as a send is: a clear costs a delivery to every target device.

It also takes back the calling sender's scheduled sends of that sequence that are still waiting
(``core.services.scheduled``): they are never delivered, and the answer's ``cancelled`` lists
them. The clear still goes, as a notification of that sequence may be on show already; a phone too
old to take a clear is then left out of it with a warning, rather than the cancel refused.
"""

from __future__ import annotations

from pydantic import Field

from core.adapters.push.base import WEB_PUSH
from core.domain import payloads
from core.domain.notification import parse_device_selector, required_sequence_id
from core.domain.secrets import new_prefixed_id
from core.errors import RelayError
from core.principal import SCOPE_NOTIFICATIONS_SEND, Principal
from core.queue import NOTIFICATION_LIFETIME_S
from core.runtime.marks import group_commit
from core.runtime.tx import Tx
from core.services import scheduled
from core.services.account_devices import AccountDevice
from core.services.capability import Feature, account_phone, gate
from core.services.delivery import Addressee, send_server_messages
from core.services.limits import Limited, charge_send_class
from core.services.scheduled import Cancelled
from core.services.send import DeliveredTo, delivered_to, field_error, resolve_targets


class ClearOut(Limited):
    sequence_id: str = Field(description="The sequence cleared (a send's sequence_id, else its id)")
    delivered_to: list[DeliveredTo] = Field(description="The devices told to take it away")
    warnings: list[str] = Field(
        description="Device names that matched nothing, as a send says them; a phone of uncertain support"
    )
    cancelled: list[Cancelled] | None = Field(
        default=None,
        description="When this sender had scheduled sends of the sequence waiting: they, taken back "
        "before their time (id, deliver_at), never to be delivered",
    )


@group_commit
def clear_notification(
    tx: Tx, principal: Principal, *, sequence_id: str, device: str | None, ip: str
) -> ClearOut:
    """Tell the selected devices (``device`` as a send takes it; all by default) to take away the
    calling sender's notification of ``sequence_id`` (another sender's of the same name stays:
    ``payloads.sender_sequence``). A phone app too old to understand it is 426
    ``phone_app_outdated`` (``min_build_notification_clear``)."""
    principal.require_scope(SCOPE_NOTIFICATIONS_SEND)
    with field_error():
        checked = required_sequence_id(sequence_id)
        selectors = parse_device_selector(device)
    devices, warnings = resolve_targets(tx, principal.account_id, selectors)
    if any(d.surface_kind == "phone" for d in devices):
        try:
            warnings += gate(tx, account_phone(tx, principal.account_id), Feature.NOTIFICATION_CLEAR)
        except RelayError as outdated:
            if not scheduled.waiting(tx, principal, checked):
                raise
            devices = [d for d in devices if d.surface_kind != "phone"]
            warnings.append(f"phone: not cleared ({outdated.code}); the scheduled send was cancelled")
    rate_limit, monthly = charge_send_class(tx, principal, ip)
    payload = payloads.notification_clear(sender=principal.sender_id, sequence_id=checked, at=tx.now())
    addressees = [
        Addressee(d, new_prefixed_id("msg"), d.push_target(), push_now=not _woken_only_to_show(tx, d))
        for d in devices
    ]
    send_server_messages(
        tx,
        addressees,
        payload,
        push_type="notification_clear",
        ttl_s=NOTIFICATION_LIFETIME_S,
        max_lifetime_s=NOTIFICATION_LIFETIME_S,
        high_priority=False,
        account_id=principal.account_id,
    )
    cancelled = scheduled.cancel(tx, principal, checked)  # after the devices' locks, as a delivery
    return ClearOut(
        sequence_id=checked,
        delivered_to=delivered_to(devices),
        warnings=warnings,
        cancelled=cancelled or None,
        rate_limit=rate_limit,
        monthly=monthly,
    )


def _woken_only_to_show(tx: Tx, device: AccountDevice) -> bool:
    """A browser phone woken by web push must show a notification for every push (or lose its
    subscription), so a clear is not pushed to it: it waits in the queue for the open app, as a
    reminder's set and cancel do (``core.services.wake_ups``)."""
    return device.device_type == "web" and tx.push.route(device.push_target()) == WEB_PUSH
