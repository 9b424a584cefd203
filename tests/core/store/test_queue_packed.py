"""SQLite: a send to several devices of one account is one queue row (``core.queue._packed``):
each device reads its own entry from it, a full queue passes it by its floor, the row goes once no
device still has it, a removed device is taken out of it, and migration 0021's downgrade gives each
device its row back."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from core.principal import Principal
from core.queue import QUEUE_CAP, enqueue_all
from core.queue._packed import pack, unpack
from core.runtime.core import Core
from core.runtime.tx import Tx
from core.services.relay import QueueItem, read_queue
from core.store import migrate
from tests.core.store.test_migrations import _downgrade
from tests.helpers import (
    FakeDevice,
    create_token,
    pair_computer,
    queue_entries,
    queued_payloads,
    register_phone,
)

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # PostgreSQL never packs


def put(tx: Tx, _principal: Principal, *, blobs: dict[str, bytes], account_id: str | None) -> list[int]:
    return enqueue_all(tx, blobs, sender="server", type="push", ttl_s=3600, account_id=account_id)


def stored_rows(engine: Engine) -> list[tuple[int, str, str | None]]:
    """Every queue row: (seq, its key, its recipients)."""
    with engine.connect() as connection:
        rows = connection.execute(
            text("SELECT seq, recipient_device_id, recipients FROM queued_envelopes ORDER BY seq")
        )
        return [(int(seq), str(key), recipients) for seq, key, recipients in rows]


def account_of(client: TestClient, count: int) -> tuple[FakeDevice, list[FakeDevice]]:
    phone = register_phone(client)
    devices = [phone] + [pair_computer(client, phone, name=f"laptop {n}") for n in range(count - 1)]
    return phone, devices


def read(core: Core, device: FakeDevice, *, after: int) -> list[QueueItem]:
    """What the device's stream reads of its queue (``read_queue``)."""
    principal = Principal.device(account_id=device.account_id, device_id=device.device_id, surface_kind="cli")
    return core.run_sync(read_queue, principal, after=after).items


def blobs_for(devices: list[FakeDevice], label: str) -> dict[str, bytes]:
    return {device.device_id: f"{label} for {device.device_id}".encode() for device in devices}


def test_packing_round_trips_blobs_of_any_length() -> None:
    entries = [("dev-a", 7, b""), ("dev-b", 8, b"x" * 70_000), ("dev-c", 9, b"\x00\xff")]
    recipients, blob = pack(entries)
    assert list(unpack(recipients, bytes(blob))) == entries
    assert json.loads(recipients) == {"dev-a": 7, "dev-b": 8, "dev-c": 9}


@SQLITE_ONLY
def test_a_send_to_several_devices_is_one_row_each_reads_its_own(client: TestClient, core: Core) -> None:
    phone, devices = account_of(client, 3)
    account = str(phone.account_id)
    seqs = core.run_sync(put, Principal.system(), blobs=blobs_for(devices, "first"), account_id=account)
    assert seqs == [seqs[0], seqs[0] + 1, seqs[0] + 2]  # a seq each, never shared
    [(row_seq, key, recipients)] = stored_rows(core.engine)
    assert (row_seq, key) == (seqs[-1], account) and recipients is not None
    for device, seq in zip(devices, seqs, strict=True):
        assert queue_entries(core.engine, device.device_id) == [
            (seq, f"first for {device.device_id}".encode(), None)
        ]
        assert [item.seq for item in read(core, device, after=0)] == [seq]
        assert read(core, device, after=seq) == []  # its own seq, not the row's, is what it read up to


@SQLITE_ONLY
def test_without_an_account_or_for_one_device_each_gets_a_row(client: TestClient, core: Core) -> None:
    phone, devices = account_of(client, 2)
    system = Principal.system()
    core.run_sync(put, system, blobs=blobs_for(devices, "unsaid"), account_id=None)
    core.run_sync(put, system, blobs=blobs_for(devices[:1], "alone"), account_id=str(phone.account_id))
    assert [recipients for _, _, recipients in stored_rows(core.engine)] == [None, None, None]


@SQLITE_ONLY
def test_a_row_goes_once_every_device_it_lists_has_passed_it(client: TestClient, core: Core) -> None:
    """Two devices' queues filled by packed sends; then only the first is written past the cap: its
    floor passes the oldest rows, which stay while the second still has them, and go after the
    second passes them too."""
    phone, devices = account_of(client, 2)
    account, system = str(phone.account_id), Principal.system()
    both = [
        core.run_sync(put, system, blobs=blobs_for(devices, f"both {n}"), account_id=account)
        for n in range(QUEUE_CAP)
    ]
    for n in range(3):
        core.run_sync(put, system, blobs=blobs_for(devices[:1], f"first only {n}"), account_id=account)
    first, second = (queue_entries(core.engine, device.device_id) for device in devices)
    assert [seq for seq, _, _ in first][: QUEUE_CAP - 3] == [seqs[0] for seqs in both[3:]]
    assert len(first) == QUEUE_CAP and [seq for seq, _, _ in second] == [seqs[1] for seqs in both]
    assert len(stored_rows(core.engine)) == QUEUE_CAP + 3  # the passed rows, still the second's
    for n in range(2):
        core.run_sync(put, system, blobs=blobs_for(devices[1:], f"second only {n}"), account_id=account)
    assert [seq for seq, _, _ in queue_entries(core.engine, devices[1].device_id)][:1] == [both[2][1]]
    assert len(stored_rows(core.engine)) == QUEUE_CAP + 3 + 2 - 2  # two rows neither device has


@SQLITE_ONLY
def test_a_removed_device_is_taken_out_of_its_accounts_rows(client: TestClient, core: Core) -> None:
    phone, devices = account_of(client, 3)
    account, system = str(phone.account_id), Principal.system()
    core.run_sync(put, system, blobs=blobs_for(devices, "all"), account_id=account)
    core.run_sync(put, system, blobs=blobs_for(devices[1:], "two computers"), account_id=account)
    removed = devices[1]
    assert client.delete("/v1/devices/me", headers=removed.auth).status_code == 204
    rows = stored_rows(core.engine)
    assert removed.device_id not in "".join(recipients or "" for _, _, recipients in rows)
    with core.engine.connect() as connection:
        blobs = connection.execute(text("SELECT blob FROM queued_envelopes")).scalars().all()
    assert not any(f"for {removed.device_id}".encode() in blob for blob in blobs)  # its blobs went too
    assert [blob for _, blob, _ in queue_entries(core.engine, devices[2].device_id)] == [
        f"all for {devices[2].device_id}".encode(),
        f"two computers for {devices[2].device_id}".encode(),
    ]
    assert [blob for _, blob, _ in queue_entries(core.engine, phone.device_id)][:1] == [
        f"all for {phone.device_id}".encode()
    ]


@SQLITE_ONLY
def test_the_downgrade_gives_each_device_its_row_back(client: TestClient, core: Core) -> None:
    """0021's downgrade: each packed entry a device still has becomes its own row with its seq and
    blob (a passed one does not come back); the upgrade counts every queue."""
    phone, devices = account_of(client, 2)
    account, system = str(phone.account_id), Principal.system()
    for n in range(QUEUE_CAP):
        core.run_sync(put, system, blobs=blobs_for(devices, f"both {n}"), account_id=account)
    core.run_sync(put, system, blobs=blobs_for(devices[:1], "first only"), account_id=account)
    before = {device.device_id: queue_entries(core.engine, device.device_id) for device in devices}
    _downgrade(core.engine, "0020")
    try:
        with core.engine.connect() as connection:
            rows = connection.execute(
                text("SELECT recipient_device_id, seq, blob FROM queued_envelopes ORDER BY seq")
            ).all()
        for device in devices:
            own = [(seq, bytes(blob), None) for key, seq, blob in rows if key == device.device_id]
            assert own == before[device.device_id]
        assert len(rows) == 2 * QUEUE_CAP
    finally:
        migrate.upgrade(core.engine)
    with core.engine.connect() as connection:
        counts = connection.execute(text("SELECT device_id, unpinned, floor, newest FROM queue_counts")).all()
    newest = {device_id: entries[-1][0] for device_id, entries in before.items()}
    assert sorted(counts) == sorted((device_id, QUEUE_CAP, 0, newest[device_id]) for device_id in newest)
    for device in devices:
        assert queue_entries(core.engine, device.device_id) == before[device.device_id]


@SQLITE_ONLY
def test_a_notification_sent_over_http_to_an_accounts_devices_is_one_row(
    client: TestClient, core: Core
) -> None:
    """The send route passes its account to the queue: its devices' entries share a row, and each
    device opens its own with its key."""
    phone, devices = account_of(client, 3)
    token = create_token(client, phone)
    sent = client.post(
        "/v1/send", content=b"backup done", headers={"Authorization": f"Bearer {token['token']}"}
    )
    assert sent.status_code == 200, sent.text
    [(_, key, recipients)] = [row for row in stored_rows(core.engine) if row[2] is not None]
    assert key == phone.account_id and recipients is not None
    assert set(json.loads(recipients)) == {device.device_id for device in devices}
    for device in devices:
        [payload] = queued_payloads(core, device)
        assert payload["message"] == "backup done"
