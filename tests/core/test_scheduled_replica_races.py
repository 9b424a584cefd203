"""Scheduled sends on two replicas sharing one PostgreSQL database (the harness of
``test_replica_races``): a sender replacing its scheduled send (a dead man's switch checking in)
while a waker delivers the one it replaces. A delivery locks the account's devices, then claims
the send by deleting it; a replacement takes the account's row and the send's, never a device's
(a kept envelope has no foreign key to its device), so neither waits for the other in a circle:
whichever deletes the send first has it, and the other finds nothing to deliver or to cancel."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import Engine, text

from core.clock import ManualClock
from core.principal import Principal
from core.runtime.core import Core
from core.services import scheduled
from core.services.send import send_notification
from core.services.tokens import TokenCreate, create_sender_token
from tests.core.test_replica_races import (  # the harness: fixtures by name, helpers
    IP,
    ROUNDS,
    Phone,
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

CHECK_IN = {"title": "Backup", "message": "no check-in for an hour", "sequence_id": "dead-man", "delay": 60}
WAIT_S = 10.0


def checking_in(core: Core) -> tuple[Phone, Principal]:
    """A phone, and a sender of its account (a cron job's token)."""
    phone = new_phone(core)
    token = core.run_sync(create_sender_token, phone.principal, body=TokenCreate(label="cron"))
    return phone, signed_in(core, token.token)


def kept(looker: Engine) -> list[tuple[Any, ...]]:
    return [
        tuple(row) for row in rows(looker, "SELECT scheduled_id, deliver_at FROM scheduled_notifications")
    ]


def test_a_replacement_does_not_wait_for_a_delivery_holding_the_devices_which_then_claims_nothing(
    replicas: tuple[Core, Core], looker: Engine, clock: ManualClock
) -> None:
    phone, caller = checking_in(replicas[0])
    first = replicas[0].run_sync(send_notification, caller, fields=CHECK_IN, ip=IP)
    clock.advance(61)  # due

    # A delivery's first step, held open: the account's devices locked, as ``take_due`` locks them.
    with looker.connect() as delivery, delivery.begin():
        delivery.execute(text("SET LOCAL lock_timeout = '5s'"))
        devices = "SELECT device_id FROM devices WHERE account_id = :a ORDER BY device_id FOR UPDATE"
        assert delivery.execute(text(devices), {"a": phone.account_id}).all()
        with ThreadPoolExecutor(1) as aside:
            check_in = aside.submit(replicas[1].run_sync, send_notification, caller, fields=CHECK_IN, ip=IP)
            replaced = check_in.result(WAIT_S)  # done while the devices stay locked
        # Then its claim: the send it found due went with the replacement; nothing to deliver.
        claim = "DELETE FROM scheduled_notifications WHERE scheduled_id = :s RETURNING scheduled_id"
        assert delivery.execute(text(claim), {"s": first.id}).all() == []
    assert kept(looker) == [(replaced.id, int(clock.now()) + 60)]


def test_replacements_and_deliveries_racing_on_two_replicas_deliver_or_replace_each_send_once(
    replicas: tuple[Core, Core], looker: Engine, clock: ManualClock
) -> None:
    phone, caller = checking_in(replicas[0])
    delivered_in_all = 0
    for _ in range(ROUNDS):
        replicas[0].run_sync(send_notification, caller, fields=CHECK_IN, ip=IP)
        clock.advance(61)  # due

        def act(core: Core, n: int) -> Any:
            if n % 2:
                return core.run_sync(scheduled.take_due, Principal.system())
            return core.run_sync(send_notification, caller, fields=CHECK_IN, ip=IP)

        outcomes = race(on_each_replica(replicas, act))
        assert error_codes(outcomes) == []
        delivered = sum(o for o in outcomes if isinstance(o, int))
        assert delivered <= 1  # the due one, once, unless a replacement took it back first
        delivered_in_all += delivered
        assert len(kept(looker)) == 1  # one pending for a sender and sequence, whoever won
        replicas[0].run_sync(scheduled.cancel, caller, "dead-man")
    queued = "SELECT count(*) FROM queued_envelopes WHERE recipient_device_id = :d AND type = 'notification'"
    assert rows(looker, queued, d=phone.device_id)[0][0] == delivered_in_all  # each delivered send, once
