"""A device's removal and a group of sends to its account on PostgreSQL: the group locks the account's
devices in id order, then writes. The removal tells the phone on its queue (which locks the phone)
and then deletes the device's row; in that order, a group holding the removed device (the lower id)
and waiting for the phone would wait on the removal while the removal waits on it: a deadlock,
which PostgreSQL ends after a second by failing one of them (the removal, or the group and with it
every send in it; before the fix this test saw the removal fail). The removal takes its account's
devices in id order first, so it waits behind the group instead."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import Connection, text
from starlette.testclient import TestClient

from core.principal import Principal
from core.runtime.core import Core
from core.services.devices import disconnect_device
from tests.helpers import FakeDevice, pair_computer, register_phone

WAIT_S = 10.0


def _computer_below_its_phone(client: TestClient) -> tuple[FakeDevice, FakeDevice]:
    """A phone and a computer paired with it whose id sorts before the phone's (half of them do)."""
    for _ in range(40):
        phone = register_phone(client)
        computer = pair_computer(client, phone)
        if computer.device_id < phone.device_id:
            return phone, computer
    raise AssertionError("no computer's id sorted before its phone's in 40 pairings")


def _lock(connection: Connection, device_id: str) -> None:
    connection.execute(text("SELECT 1 FROM devices WHERE device_id = :id FOR UPDATE"), {"id": device_id})


def _waiting_on_a_lock(connection: Connection) -> bool:
    """Whether another backend of this database waits on a lock (the removal, behind the group)."""
    return bool(
        connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
            )
        ).scalar()
    )


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_removal_waits_behind_a_group_holding_its_accounts_devices(client: TestClient, core: Core) -> None:
    phone, computer = _computer_below_its_phone(client)
    principal = Principal.device(
        account_id=phone.account_id, device_id=computer.device_id, surface_kind="cli"
    )
    outcome: list[str] = []

    def remove() -> None:
        try:
            core.run_sync(disconnect_device, principal)
            outcome.append("removed")
        except Exception as error:  # the assertion below names it
            outcome.append(f"{type(error).__name__}: {error}")

    removal = threading.Thread(target=remove)
    with core.engine.connect() as group, core.engine.connect() as observer:
        _lock(group, computer.device_id)  # a group's lock statement, part way: the lower id first
        removal.start()
        deadline = time.monotonic() + WAIT_S
        while not _waiting_on_a_lock(observer):
            assert time.monotonic() < deadline, "the removal never waited for the group's lock"
            time.sleep(0.02)
        observer.rollback()
        _lock(group, phone.device_id)  # the group's next lock: the removal must not hold it
        group.commit()
    removal.join(WAIT_S)
    assert outcome == ["removed"]
    listed = client.get("/v1/devices", headers=phone.auth)
    assert listed.status_code == 200 and computer.device_id not in listed.text
