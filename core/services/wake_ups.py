"""Pushes sent at a set time: how a web phone's reminder fires while the browser is closed.

A phone app sets an alarm itself; a closed browser cannot time anything, but its service worker
wakes for a push. So for a phone that is a browser (``device_type`` "web") with web push, a
reminder is also kept here as a wake-up due at its time, holding the reminder only as an envelope
sealed to the phone (the server still learns nothing of its text, and already knew the time).
``deliver_due`` sends what is due, each once across replicas; a cancel deletes its wake-up by
the reminder's tag. A wake-up not sent by ``LATE_S`` after its time is dropped (the queued
reminder still reaches the app when it opens). The app's waker sleeps until the earliest wake-up
is due (``next_due_at``), woken early by the fan-out message each newly scheduled one publishes on
``WAKE_UPS_TOPIC`` — it does not ask the database every second.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from sqlalchemy import delete, func, select
from sqlmodel import col

from core.adapters.push.base import WEB_PUSH, PushMessage, PushTarget
from core.domain import payloads
from core.domain.secrets import new_prefixed_id
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.events import Published
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services.delivery import push_target
from core.store.tables import Device, ScheduledWakeUp

BATCH = 100
LATE_S = 86_400
WAKE_UPS_TOPIC = "wake-ups"  # a wake-up was scheduled: wakers look again for the earliest due


def wakes_by_push(tx: Tx, device: Device) -> bool:
    """Whether ``device`` is a browser phone that web push can wake."""
    return device.device_type == "web" and tx.push.route(push_target(tx, device)) == WEB_PUSH


def schedule(
    tx: Tx, device: Device, *, due_at: int, tag: str, payload: dict[str, Any], push_type: str
) -> None:
    """Keep ``payload`` (sealed now, to ``device``) to be pushed as ``push_type`` at ``due_at``."""
    sealed = tx.keys.seal_to(base64.b64decode(device.public_key), payloads.encode(payload))
    fields = {"msgId": new_prefixed_id("msg"), "payload": base64.b64encode(sealed).decode()}
    tx.session.add(
        ScheduledWakeUp(
            wake_id=new_prefixed_id("wake"),
            device_id=device.device_id,
            due_at=due_at,
            tag=tag,
            message=json.dumps({"type": push_type, **fields}, separators=(",", ":")),
            ttl_s=LATE_S,
        )
    )
    tx.emit(Published(WAKE_UPS_TOPIC, str(due_at)))


def cancel(tx: Tx, device_id: str, tag: str) -> None:
    tx.session.execute(
        delete(ScheduledWakeUp).where(
            col(ScheduledWakeUp.device_id) == device_id, col(ScheduledWakeUp.tag) == tag
        )
    )


def take_due(tx: Tx, principal: Principal) -> list[tuple[PushTarget, PushMessage]]:
    """Claim the wake-ups due now (deleted here, so each is sent once whatever the replicas) and
    say where each goes; those too late are dropped with them."""
    if principal.kind.value != "system":
        return []
    now = tx.now()
    due = (
        tx.session.execute(
            select(col(ScheduledWakeUp.wake_id)).where(col(ScheduledWakeUp.due_at) <= now).limit(BATCH)
        )
        .scalars()
        .all()
    )
    if not due:
        return []
    claimed = (
        tx.session.execute(
            delete(ScheduledWakeUp).where(col(ScheduledWakeUp.wake_id).in_(due)).returning(ScheduledWakeUp)
        )
        .scalars()
        .all()
    )
    sends: list[tuple[PushTarget, PushMessage]] = []
    for wake in claimed:
        device = tx.session.get(Device, wake.device_id)
        if device is None or now - wake.due_at > LATE_S:
            continue
        data = json.loads(wake.message)
        message = PushMessage(data.pop("type"), data, high_priority=True, ttl_s=wake.ttl_s)
        sends.append((push_target(tx, device), message))
    return sends


@read_only
def next_due_at(tx: Tx, principal: Principal) -> int | None:
    """When the earliest kept wake-up is due, if any (an index read)."""
    if principal.kind.value != "system":
        return None
    due: int | None = tx.session.execute(select(func.min(col(ScheduledWakeUp.due_at)))).scalar()
    return due


async def deliver_due(core: Core) -> int:
    """Send every wake-up due now; the number sent."""
    sends = await core.run(take_due, Principal.system())
    for target, message in sends:
        await core.push.send(target, message)
    return len(sends)
