"""An account's devices kept between sends (``core.services.account_devices``): on SQLite every change
of what a send reads of them gives the account a new version (migration 0022's triggers), so that
no send reuses devices read before the change; a change of anything else keeps the version."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, Engine, text
from starlette.testclient import TestClient

from core.runtime.core import Core
from core.services.account_devices import account_devices
from tests.helpers import FakeDevice, create_token, pair_computer, register_phone

SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # PostgreSQL: no triggers


def version(engine: Engine, account_id: str | None) -> str | None:
    with engine.connect() as connection:
        found = connection.execute(
            text("SELECT version FROM account_device_versions WHERE account_id = :account"),
            {"account": account_id},
        ).scalar()
    return None if found is None else str(found)


def run_sql(engine: Engine, statement: str, **params: object) -> None:
    with engine.begin() as connection:
        connection.execute(text(statement), params)


@SQLITE
def test_the_triggers_are_there_at_head(engine: Engine) -> None:
    with engine.connect() as connection:
        names = connection.execute(
            text(
                "SELECT name FROM sqlite_master"
                " WHERE type = 'trigger' AND name LIKE 'account_device_versions%'"
            )
        ).scalars()
        assert sorted(names) == [
            f"account_device_versions_{change}"
            for change in (
                "device_added",
                "device_changed",
                "device_removed",
                "registration_added",
                "registration_changed",
                "registration_removed",
            )
        ]


@SQLITE
def test_each_change_a_send_reads_gives_a_new_version_and_no_other(
    engine: Engine, client: TestClient
) -> None:
    phone = register_phone(client)
    account = phone.account_id
    seen = [version(engine, account)]
    assert seen[0] is not None  # the phone's registration gave the account its first

    def changes(statement: str, **params: object) -> bool:
        run_sql(engine, statement, **params)
        seen.append(version(engine, account))
        return seen[-1] not in seen[:-1]

    computer = pair_computer(client, phone)
    seen.append(version(engine, account))
    assert seen[-1] not in seen[:-1]
    device = {"device": computer.device_id}
    assert changes("UPDATE devices SET name = 'desk' WHERE device_id = :device", **device)
    assert changes(
        "UPDATE devices SET fcm_token = 'tok', fcm_token_kind = 'fid' WHERE device_id = :device", **device
    )
    assert changes("UPDATE devices SET public_key = 'key' WHERE device_id = :device", **device)
    assert not changes(
        "UPDATE devices SET last_seen_at = 5, battery_percent = 50, app_build = 7, ringer = 'silent'"
        " WHERE device_id = :device",
        **device,
    )
    assert changes(
        "INSERT INTO push_registrations (device_id, service, registration, created_at)"
        " VALUES (:device, 'web_push', '{}', 1)",
        **device,
    )
    assert changes(
        'UPDATE push_registrations SET registration = \'{"a": "b"}\' WHERE device_id = :device', **device
    )
    assert changes("DELETE FROM push_registrations WHERE device_id = :device", **device)
    assert client.delete("/v1/devices/me", headers=computer.auth).status_code == 204
    seen.append(version(engine, account))
    assert seen[-1] not in seen[:-1]


@pytest.fixture
def account(client: TestClient) -> tuple[FakeDevice, dict[str, str]]:
    phone = register_phone(client, name="Pixel")
    token = str(create_token(client, phone)["token"])
    return phone, {"Authorization": f"Bearer {token}"}


def test_a_send_reaches_the_devices_of_the_moment_through_pairings_renames_and_removals(
    client: TestClient, account: tuple[FakeDevice, dict[str, str]]
) -> None:
    phone, sender = account

    def reached(selector: str = "all") -> set[str]:
        response = client.post("/v1/send", json={"message": "hi", "device": selector}, headers=sender)
        assert response.status_code == 200, response.text
        return {device["device_id"] for device in response.json()["delivered_to"]}

    assert reached() == {phone.device_id}
    laptop = pair_computer(client, phone, name="laptop")
    assert reached() == {phone.device_id, laptop.device_id}
    renamed = client.patch("/v1/devices/me", json={"name": "desk"}, headers=laptop.auth)
    assert renamed.status_code == 200, renamed.text
    assert reached("desk") == {laptop.device_id}
    tablet = pair_computer(client, phone, name="tablet")
    assert reached() == {phone.device_id, laptop.device_id, tablet.device_id}
    assert client.delete("/v1/devices/me", headers=laptop.auth).status_code == 204
    assert reached() == {phone.device_id, tablet.device_id}


@SQLITE
def test_devices_read_in_a_transaction_that_rolled_back_are_not_reused(
    core: Core, client: TestClient
) -> None:
    phone = register_phone(client)
    account = str(phone.account_id)

    def read(connection: Connection) -> list[str]:
        return [device.device_id for device in account_devices(core._tx(read_connection=connection), account)]

    with core.engine.connect() as connection:
        with connection.begin() as transaction:
            assert read(connection) == [phone.device_id]
            connection.execute(
                text(
                    "INSERT INTO devices (device_id, account_id, device_type, surface_kind, public_key, name,"
                    " credential_hash, created_at, ever_paired, ever_drained)"
                    " VALUES ('dev_gone', :account, 'cli', 'cli', 'key', 'gone', 'hash', 9999999999, 0, 0)"
                ),
                {"account": account},
            )
            assert read(connection) == [phone.device_id, "dev_gone"]  # kept at the transaction's version
            transaction.rollback()
        assert read(connection) == [phone.device_id]
