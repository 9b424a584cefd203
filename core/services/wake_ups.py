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

An urgent notification that repeats until acknowledged (``core.services.receipts``) is kept the
same way, once per browser phone it went to, as a wake-up that repeats: pushed again every
``repeat_s`` until ``repeat_until``, unless its acknowledgement or cancel deletes it first.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, literal, select, update
from sqlmodel import col

from core.adapters.push.base import WEB_PUSH, PushMessage, PushTarget
from core.domain import payloads
from core.domain.secrets import new_prefixed_id
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.events import Published
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services.delivery import Recipient, push_target
from core.store.tables import Device, ScheduledWakeUp

BATCH = 100
LATE_S = 86_400
WAKE_UPS_TOPIC = "wake-ups"  # a wake-up was scheduled: wakers look again for the earliest due


def wakes_by_push(tx: Tx, device: Device) -> bool:
    """Whether ``device`` is a browser phone that web push can wake."""
    return device.device_type == "web" and tx.push.route(push_target(tx, device)) == WEB_PUSH


def schedule(
    tx: Tx,
    device: Recipient,
    *,
    due_at: int,
    tag: str,
    payload: dict[str, Any],
    push_type: str,
    repeat: tuple[int, int] | None = None,
) -> None:
    """Keep ``payload`` (sealed now, to ``device``) to be pushed as ``push_type`` at ``due_at``;
    with ``repeat`` (every ``s`` seconds, until ``t``), again at each step before ``t``, each
    push living only until the next is due."""
    sealed = tx.keys.seal_to(base64.b64decode(device.public_key), payloads.encode(payload))
    fields = {"msgId": new_prefixed_id("msg"), "payload": base64.b64encode(sealed).decode()}
    every, until = repeat if repeat is not None else (None, None)
    tx.session.add(
        ScheduledWakeUp(
            wake_id=new_prefixed_id("wake"),
            device_id=device.device_id,
            due_at=due_at,
            tag=tag,
            message=json.dumps({"type": push_type, **fields}, separators=(",", ":")),
            ttl_s=LATE_S if every is None else every,
            repeat_s=every,
            repeat_until=until,
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
    """Claim the wake-ups due now (each is sent once whatever the replicas: a single one is
    deleted here, a repeating one moved to its next step after now, or deleted after its last)
    and say where each goes; single ones too late are dropped with them."""
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
    claimed = _claim_repeating(tx, due, now)
    claimed += (
        tx.session.execute(
            delete(ScheduledWakeUp)
            .where(col(ScheduledWakeUp.wake_id).in_(due), col(ScheduledWakeUp.repeat_s).is_(None))
            .returning(ScheduledWakeUp)
        )
        .scalars()
        .all()
    )
    sends: list[tuple[PushTarget, PushMessage]] = []
    for wake in claimed:
        device = tx.session.get(Device, wake.device_id)
        if device is None or (wake.repeat_s is None and now - wake.due_at > LATE_S):
            continue
        data = json.loads(wake.message)
        message = PushMessage(data.pop("type"), data, high_priority=True, ttl_s=wake.ttl_s)
        sends.append((push_target(tx, device), message))
    return sends


def _claim_repeating(tx: Tx, due: Sequence[str], now: int) -> list[ScheduledWakeUp]:
    """Move each due repeating wake-up to its first step after ``now`` (steps missed while no
    waker ran are skipped, not sent in a burst); one whose next step is past its end is deleted.
    A plain conditional UPDATE: on PostgreSQL a concurrent claim waits for this one's row lock,
    then finds the row no longer due; a cancel's DELETE takes the row wherever it moved."""
    table = ScheduledWakeUp
    every = col(table.repeat_s)
    steps = (literal(now) - col(table.due_at)) // every + 1
    moved = list(
        tx.session.execute(
            update(table)
            .where(col(table.wake_id).in_(due), every.is_not(None), col(table.due_at) <= now)
            .values(due_at=col(table.due_at) + every * steps)
            .returning(table)
        )
        .scalars()
        .all()
    )
    ended = [wake.wake_id for wake in moved if wake.repeat_until is None or wake.due_at >= wake.repeat_until]
    if ended:
        tx.session.execute(delete(table).where(col(table.wake_id).in_(ended)))
    return moved


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
