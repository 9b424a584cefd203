"""``queue_counts`` (migration 0016): on SQLite each device's number of unpinned queue entries, kept
exact by triggers whatever removes or changes an entry, which the queue's cap relies on; PostgreSQL
leaves it empty and trims each queue a transaction wrote once, before it commits."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.tx import Tx
from core.services.maintenance import sweep_expired
from core.services.queue import QUEUE_CAP, enqueue_all
from core.store import migrate
from tests.core.store.test_migrations import _downgrade
from tests.helpers import pair_computer, queue_entries, register_phone

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the triggers
TRIGGERS = [
    "queue_counts_delete",
    "queue_counts_device_removed",
    "queue_counts_insert",
    "queue_counts_update",
]


def put(
    tx: Tx, _principal: Principal, *, blobs: dict[str, bytes], ttl_s: int = 3600, tag: str | None = None
) -> None:
    enqueue_all(tx, blobs, sender="server", type="push", ttl_s=ttl_s, tag=tag)


def kept_counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT device_id, unpinned FROM queue_counts"))
        return {str(device): int(count) for device, count in rows}


def true_counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT recipient_device_id, count(*) FROM queued_envelopes WHERE tag IS NULL"
                " GROUP BY recipient_device_id"
            )
        )
        return {str(device): int(count) for device, count in rows}


def assert_exact(engine: Engine, *device_ids: str) -> None:
    """Every device with unpinned entries has its count; a count without entries is 0."""
    kept, counted = kept_counts(engine), true_counts(engine)
    assert {device: n for device, n in kept.items() if n} == counted
    assert all(kept.get(device, 0) == counted.get(device, 0) for device in device_ids)


def run_sql(engine: Engine, statement: str, **parameters: object) -> None:
    with engine.begin() as connection:
        connection.execute(text(statement), parameters)


@SQLITE_ONLY
def test_the_triggers_are_there_at_head(engine: Engine) -> None:
    with engine.connect() as connection:
        names = connection.execute(
            text("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
        )
        assert [name for (name,) in names] == TRIGGERS


@SQLITE_ONLY
def test_the_count_stays_exact_through_writes_trims_sweeps_and_changes(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    full, short = register_phone(client).device_id, register_phone(client).device_id
    system = Principal.system()
    for n in range(QUEUE_CAP + 3):  # full: trimmed by each write past the cap; short: 20 entries
        blobs = {full: b"{}", short: b"{}"} if n < 20 else {full: b"{}"}
        core.run_sync(put, system, blobs=blobs, ttl_s=60 if n % 2 else 3600, tag="pin" if n == 4 else None)
    assert kept_counts(core.engine) == {full: QUEUE_CAP, short: 19}
    assert_exact(core.engine, full, short)
    clock.advance(61)  # every other entry expires: the sweep removes them
    core.run_sync(sweep_expired, system)
    assert_exact(core.engine, full, short)
    assert 0 < kept_counts(core.engine)[full] < QUEUE_CAP
    seqs = [seq for seq, _, tag in queue_entries(core.engine, full) if tag is None]
    run_sql(core.engine, "UPDATE queued_envelopes SET tag = 'pinned later' WHERE seq = :seq", seq=seqs[0])
    run_sql(core.engine, "UPDATE queued_envelopes SET tag = NULL WHERE tag = 'pin'")
    run_sql(
        core.engine,
        "UPDATE queued_envelopes SET recipient_device_id = :to WHERE seq = :seq",
        to=short,
        seq=seqs[1],
    )
    run_sql(core.engine, "UPDATE queued_envelopes SET created_at = created_at + 1")  # no count moves
    assert_exact(core.engine, full, short)
    run_sql(core.engine, "DELETE FROM queued_envelopes WHERE tag IS NOT NULL")  # as a reminder's cancel
    assert_exact(core.engine, full, short)
    run_sql(core.engine, "DELETE FROM queued_envelopes WHERE recipient_device_id = :device", device=short)
    assert_exact(core.engine, full, short)
    assert kept_counts(core.engine)[short] == 0


@SQLITE_ONLY
def test_a_removed_device_takes_its_count_along(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    core.run_sync(put, Principal.system(), blobs={computer.device_id: b"{}", phone.device_id: b"{}"})
    assert kept_counts(core.engine) == {computer.device_id: 1, phone.device_id: 1}
    assert client.delete("/v1/devices/me", headers=computer.auth).status_code == 204
    assert computer.device_id not in kept_counts(core.engine)  # the phone was told by its queue
    assert kept_counts(core.engine) == {phone.device_id: 2}
    assert_exact(core.engine, phone.device_id, computer.device_id)


def test_a_queue_further_over_its_cap_keeps_its_newest_entries(core: Core, database_url: str) -> None:
    """A queue can hold more than the cap (entries written before a lower cap, or by hand): the next
    write still keeps the newest unpinned ones, pinned or unpinned write alike, and the new one. SQLite,
    told by its count, drops every older one; PostgreSQL drops as many entries past the cap as the
    transaction wrote unpinned ones, found from the newest end (the unpinned write's one: the entry at
    the cap; the pinned write's none), and leaves the excess to expire (docs/protocol.md: no write
    scans from the oldest end)."""
    system = Principal.system()
    excess = 10
    for device in ("dev_over", "dev_pinned_write"):
        run_sql(
            core.engine,
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < :last)"
            " INSERT INTO queued_envelopes (recipient_device_id, sender, type, blob, created_at, expires_at)"
            " SELECT :device, 'server', 'push', :blob, 0, 2000000000 FROM n",
            device=device,
            last=QUEUE_CAP + excess - 1,
            blob=b"{}",
        )
    before = {
        device: [seq for seq, _, _ in queue_entries(core.engine, device)]
        for device in ("dev_over", "dev_pinned_write")
    }
    core.run_sync(put, system, blobs={"dev_over": b"{}"})
    core.run_sync(put, system, blobs={"dev_pinned_write": b"{}"}, tag="pin")
    over = [seq for seq, _, _ in queue_entries(core.engine, "dev_over")]
    pinned_write = queue_entries(core.engine, "dev_pinned_write")
    unpinned = [seq for seq, _, tag in pinned_write if tag is None]
    assert [tag for _, _, tag in pinned_write][-1] == "pin" and over[-1] > before["dev_over"][-1]
    if database_url.startswith("sqlite"):
        assert over[:-1] == before["dev_over"][-(QUEUE_CAP - 1) :] and len(over) == QUEUE_CAP
        assert unpinned == before["dev_pinned_write"][-QUEUE_CAP:]
        assert_exact(core.engine, "dev_over", "dev_pinned_write")
    else:
        at_cap = excess  # the new entry's 201st newest
        assert over[:-1] == before["dev_over"][:at_cap] + before["dev_over"][at_cap + 1 :]
        assert unpinned == before["dev_pinned_write"]


@SQLITE_ONLY
def test_the_migration_counts_the_queues_it_finds(core: Core) -> None:
    engine = core.engine
    core.run_sync(put, Principal.system(), blobs={"dev_a": b"{}", "dev_b": b"{}"})
    core.run_sync(put, Principal.system(), blobs={"dev_a": b"{}", "dev_b": b"{}"}, tag="pin")
    core.run_sync(put, Principal.system(), blobs={"dev_a": b"{}"})
    _downgrade(engine, "0015")
    try:
        with engine.connect() as connection:
            tables = connection.execute(
                text("SELECT name FROM sqlite_master WHERE name LIKE 'queue_counts%'")
            )
            assert tables.all() == []  # table and triggers gone
    finally:
        migrate.upgrade(engine)
    assert kept_counts(engine) == {"dev_a": 2, "dev_b": 1}


def test_postgresql_keeps_no_counts(core: Core, database_url: str) -> None:
    """Both backends keep the cap (``test_queue_cap``); only SQLite counts in a table."""
    core.run_sync(put, Principal.system(), blobs={"dev_a": b"{}"})
    expected = {"dev_a": 1} if database_url.startswith("sqlite") else {}
    assert kept_counts(core.engine) == expected
