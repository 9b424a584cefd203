"""Urgent receipts on two replicas sharing one PostgreSQL database (the harness of
``test_replica_races``): acknowledgements and cancels racing on both settle a receipt once, with
one ``urgent_stop``; and the waker of each replica claiming a repeating wake-up sends each step
once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Engine

from core.clock import ManualClock
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.tx import Tx
from core.services import receipts, wake_ups
from core.services.send import send_notification
from core.services.tokens import TokenCreate, create_sender_token
from core.store.tables import Device
from tests.core.test_replica_races import (  # the harness: fixtures by name, helpers
    IP,
    ROUNDS,
    clock,
    database,
    error_codes,
    looker,
    new_phone,
    on_each_replica,
    race,
    replicas,
    rows,
    settings,
    signed_in,
)

pytestmark = pytest.mark.postgres
__all__ = ["clock", "database", "looker", "replicas", "settings"]  # fixtures, used by name


@dataclass
class Sender:
    phone: Any
    caller: Principal


def sender(core: Core) -> Sender:
    phone = new_phone(core)
    token = core.run_sync(create_sender_token, phone.principal, body=TokenCreate(label="pager"))
    return Sender(phone, signed_in(core, token.token))


def urgent(core: Core, who: Sender) -> str:
    fields = {"message": "prod is down", "priority": "urgent", "repeat": 30}
    sent = core.run_sync(send_notification, who.caller, fields=fields, ip=IP)
    assert sent.receipt is not None
    return sent.receipt


def test_acknowledgements_and_cancels_racing_on_two_replicas_settle_once(
    replicas: tuple[Core, Core], looker: Engine
) -> None:
    who = sender(replicas[0])
    for settled in range(1, ROUNDS // 2 + 1):
        receipt = urgent(replicas[0], who)

        def settle(core: Core, n: int, receipt: str = receipt) -> receipts.ReceiptOut:
            if n % 2:
                return core.run_sync(receipts.cancel_receipt, who.caller, receipt_id=receipt)
            return core.run_sync(receipts.acknowledge_receipt, who.phone.principal, receipt_id=receipt)

        outcomes = race(on_each_replica(replicas, settle))
        assert error_codes(outcomes) == []
        states = {o.status for o in outcomes if isinstance(o, receipts.ReceiptOut)}
        assert len(states) == 1 and states <= {"acknowledged", "cancelled"}  # one winner; all saw it
        stops = rows(
            looker,
            "SELECT count(*) FROM queued_envelopes WHERE recipient_device_id = :d AND type = 'urgent_stop'",
            d=who.phone.device_id,
        )
        assert stops[0][0] == settled  # one stop per receipt, whoever won


def test_a_repeating_wake_up_claimed_on_two_replicas_is_sent_once_a_step(
    replicas: tuple[Core, Core], clock: ManualClock, looker: Engine
) -> None:
    phone = new_phone(replicas[0])
    start = int(clock.now())
    until = start + 30 * ROUNDS + 1  # the last step is at start + 30 * ROUNDS

    def keep(tx: Tx, principal: Principal) -> None:
        device = tx.session.get(Device, phone.device_id)
        assert device is not None
        payload = {"type": "notification", "id": "msg_1", "message": "m"}
        wake_ups.schedule(
            tx,
            device,
            due_at=start + 30,
            tag="rcp_x",
            payload=payload,
            push_type="notification",
            repeat=(30, until),
        )

    def claim(core: Core, _n: int) -> list[Any]:
        return core.run_sync(wake_ups.take_due, Principal.system())

    replicas[0].run_sync(keep, Principal.system())
    for step in range(1, ROUNDS + 1):
        clock.advance(30)
        sent = race(on_each_replica(replicas, claim))
        assert error_codes(sent) == []
        assert sum(len(s) for s in sent if isinstance(s, list)) == 1, step
        left = rows(looker, "SELECT due_at FROM scheduled_wake_ups WHERE tag = 'rcp_x'")
        assert left == ([] if step == ROUNDS else [(start + 30 * (step + 1),)])
    clock.advance(30)
    assert sum(len(s) for s in race(on_each_replica(replicas, claim)) if isinstance(s, list)) == 0
