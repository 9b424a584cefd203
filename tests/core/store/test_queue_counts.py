"""``queue_counts``: on SQLite each device's number of unpinned queue entries, which the queue's cap
relies on, kept exact by the statements that write the queue (``core.queue._counts``,
migration 0020) and two triggers; PostgreSQL leaves it empty and trims each queue a transaction
wrote once, before it commits."""

from __future__ import annotations

import ast
import json
import random
import re
from pathlib import Path

import pytest
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.errors import RelayError
from core.principal import Principal
from core.queue import QUEUE_CAP, enqueue_all
from core.queue._counts import RECOUNT_EXPIRING, count_after_write
from core.runtime.core import Core
from core.runtime.tx import Tx
from core.services.maintenance import sweep_expired
from core.store import migrate
from tests.core.store.test_migrations import _downgrade
from tests.core.test_queue_held import in_one_group, put_then_fail
from tests.helpers import pair_computer, queue_entries, register_phone

SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # the counts
REPOSITORY = Path(__file__).resolve().parents[3]


def put(
    tx: Tx, _principal: Principal, *, blobs: dict[str, bytes], ttl_s: int = 3600, tag: str | None = None
) -> None:
    enqueue_all(tx, blobs, sender="server", type="push", ttl_s=ttl_s, tag=tag)


def kept_counts(engine: Engine) -> dict[str, int]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT device_id, unpinned FROM queue_counts"))
        return {str(device): int(count) for device, count in rows}


def true_counts(engine: Engine) -> dict[str, int]:
    """Each device's unpinned entries: its own rows, and its entries in packed rows at or above its
    floor (a device a packed row lists without a count's row counts from 0: it would be stale)."""
    with engine.connect() as connection:
        counted_floors = connection.execute(text("SELECT device_id, floor FROM queue_counts"))
        floors = {str(device): int(floor) for device, floor in counted_floors}
        rows = connection.execute(
            text("SELECT seq, recipient_device_id, recipients FROM queued_envelopes WHERE tag IS NULL")
        )
        counted: dict[str, int] = {}
        for seq, recipient, recipients in rows:
            listed = [recipient] if recipients is None else list(json.loads(recipients))
            for device in listed:
                if recipients is None or seq >= floors.get(device, 0):
                    counted[str(device)] = counted.get(str(device), 0) + 1
        return counted


def assert_exact(engine: Engine, *device_ids: str) -> None:
    """Every device with unpinned entries has its count; a count without entries is 0."""
    kept, counted = kept_counts(engine), true_counts(engine)
    assert {device: n for device, n in kept.items() if n} == counted
    assert all(kept.get(device, 0) == counted.get(device, 0) for device in device_ids)


def run_sql(engine: Engine, statement: str, **parameters: object) -> None:
    with engine.begin() as connection:
        connection.execute(text(statement), parameters)


def triggers(engine: Engine) -> list[str]:
    with engine.connect() as connection:
        names = connection.execute(
            text(
                "SELECT name FROM sqlite_master"
                " WHERE type = 'trigger' AND name LIKE 'queue_counts%' ORDER BY name"
            )
        )
        return [name for (name,) in names]


@SQLITE_ONLY
def test_only_the_update_and_device_removal_triggers_are_left_at_head(engine: Engine) -> None:
    assert triggers(engine) == ["queue_counts_device_removed", "queue_counts_update"]


def test_a_write_moves_the_counts_of_queues_below_and_over_the_cap_only() -> None:
    before = {"new": None, "short": 5, "last_room": QUEUE_CAP - 1, "full": QUEUE_CAP, "over": QUEUE_CAP + 7}
    unpinned = {device: count_after_write(count, pinned=False) for device, count in before.items()}
    pinned = {device: count_after_write(count, pinned=True) for device, count in before.items()}
    assert unpinned == {"new": 1, "short": 6, "last_room": QUEUE_CAP, "full": QUEUE_CAP, "over": QUEUE_CAP}
    assert pinned == {"new": 0, "short": 5, "last_room": QUEUE_CAP - 1, "full": QUEUE_CAP, "over": QUEUE_CAP}


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


@SQLITE_ONLY
def test_the_counts_stay_exact_through_a_mixed_workload(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    """Writes to some of a few devices (unpinned and pinned, short and long lives), groups in which
    one write fails and is undone alone, sweeps, a device's removal: after every step each count is
    its queue's number of unpinned entries. The cap is reached and passed on the way."""
    phone = register_phone(client)
    computers = [pair_computer(client, phone, name=f"laptop {n}") for n in range(3)]
    devices = [str(phone.device_id)] + [str(computer.device_id) for computer in computers]
    system, rng = Principal.system(), random.Random(20)
    for step in range(3 * QUEUE_CAP):
        recipients = rng.sample(devices, rng.randint(1, len(devices)))
        blobs = dict.fromkeys(recipients, b"{}")
        roll = rng.random()
        if roll < 0.75:
            tag = f"pin {step}" if rng.random() < 0.05 else None
            core.run_sync(put, system, blobs=blobs, ttl_s=rng.choice([30, 3600]), tag=tag)
        elif roll < 0.9:
            writes = [(put, {"blobs": blobs}), (put_then_fail, {"blobs": blobs}), (put, {"blobs": blobs})]
            first, failing, last = in_one_group(core, system, writes)
            assert first.error is None and isinstance(failing.error, RelayError) and last.error is None
        else:
            clock.advance(rng.randint(1, 40))
            core.run_sync(sweep_expired, system)
        if step == 2 * QUEUE_CAP:
            removed = computers.pop()
            assert client.delete("/v1/devices/me", headers=removed.auth).status_code == 204
            devices.remove(str(removed.device_id))
        assert_exact(core.engine, *devices)
    assert max(true_counts(core.engine).values()) == QUEUE_CAP


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
    """A queue can hold more than the cap (entries written before a lower cap): the next write still
    keeps the newest unpinned ones, pinned or unpinned write alike, and the new one. SQLite, told by
    its count, drops every older one; PostgreSQL drops as many entries past the cap as the
    transaction wrote unpinned ones, found from the newest end (the unpinned write's one: the entry
    at the cap; the pinned write's none), and leaves the excess to expire (docs/protocol.md: no
    write scans from the oldest end)."""
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
    if database_url.startswith("sqlite"):  # counted, as the writer of those entries counted them
        run_sql(
            core.engine,
            "INSERT INTO queue_counts (device_id, unpinned)"
            " VALUES ('dev_over', :n), ('dev_pinned_write', :n)",
            n=QUEUE_CAP + excess,
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
def test_the_migrations_count_the_queues_they_find(core: Core) -> None:
    """0020 and its downgrade recount every queue (the downgrade's triggers then count on), and 0016
    counts the queues it finds."""
    engine = core.engine
    core.run_sync(put, Principal.system(), blobs={"dev_a": b"{}", "dev_b": b"{}"})
    core.run_sync(put, Principal.system(), blobs={"dev_a": b"{}", "dev_b": b"{}"}, tag="pin")
    core.run_sync(put, Principal.system(), blobs={"dev_a": b"{}"})
    run_sql(engine, "UPDATE queue_counts SET unpinned = 50")  # wrong, to be recounted
    _downgrade(engine, "0019")
    try:
        assert kept_counts(engine) == {"dev_a": 2, "dev_b": 1}
        assert "queue_counts_insert" in triggers(engine) and "queue_counts_delete" in triggers(engine)
        run_sql(engine, "DELETE FROM queued_envelopes WHERE recipient_device_id = 'dev_b'")  # by trigger
        assert kept_counts(engine) == {"dev_a": 2, "dev_b": 0}
        run_sql(engine, "UPDATE queue_counts SET unpinned = 50")
    finally:
        migrate.upgrade(engine)
    assert kept_counts(engine) == {"dev_a": 2}
    _downgrade(engine, "0015")
    try:
        with engine.connect() as connection:
            tables = connection.execute(
                text("SELECT name FROM sqlite_master WHERE name LIKE 'queue_counts%'")
            )
            assert tables.all() == []  # table and triggers gone
    finally:
        migrate.upgrade(engine)
    assert kept_counts(engine) == {"dev_a": 2}


def test_postgresql_keeps_no_counts(core: Core, database_url: str) -> None:
    """Both backends keep the cap (``test_queue_cap``); only SQLite counts in a table."""
    core.run_sync(put, Principal.system(), blobs={"dev_a": b"{}"})
    core.run_sync(sweep_expired, Principal.system())
    expected = {"dev_a": 1} if database_url.startswith("sqlite") else {}
    assert kept_counts(core.engine) == expected


# Every place in relaybox's code that inserts, deletes or updates queue entries, and how it keeps the
# counts. A new one fails ``test_every_writer_of_the_queue_keeps_the_counts``: make it keep them
# (``core.queue._counts``), then add it here.
QUEUE_WRITERS = {
    ("core/queue/_stored.py", "entries_from"): "counted by write_entries (count_after_write)",
    ("core/queue/_sqlite_sql.py", "DROP"): "counted by write_entries (count_after_write)",
    ("core/queue/_packed.py", "INSERT_PACKED"): "counted by write_entries (count_after_write)",
    ("core/queue/_packed.py", "DROP_UNNEEDED"): "rows every listed device passed: no count moves",
    ("core/queue/_packed.py", "unlist_device"): "the removed device's entries only",
    ("core/queue/_stored.py", "_TAKE_PINNED"): "deletes pinned entries (a reminder's cancel): no count moves",
    ("core/queue/_stored.py", "_FORGET"): "the count's row goes with the device (trigger)",
    ("core/queue/_stored.py", "_EXPIRE"): "SqliteQueue.expire: recount_expiring before the delete",
    ("core/queue/_pg_sql.py", "TRIM_OVER_CAP"): "PostgreSQL only: no counts",
    ("core/queue/_held.py", "_INSERT_HELD"): "PostgreSQL only: no counts",
}
_TABLE_NAMES = {"QueuedEnvelope", "_QUEUE", "QUEUE"}
_RAW_WRITE = re.compile(r"\b(INSERT\s+INTO|DELETE\s+FROM|UPDATE)\s+queued_envelopes\b", re.IGNORECASE)


def _writers_in(path: Path) -> set[str]:
    """The top-level names (functions, assignments) in ``path`` whose code writes the queue: an
    ``insert``/``delete``/``update`` of the queue's table, an entry constructed, or raw SQL."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        for inner in ast.walk(node):
            writes = False
            if isinstance(inner, ast.Call):
                called = (
                    inner.func.attr
                    if isinstance(inner.func, ast.Attribute)
                    else getattr(inner.func, "id", "")
                )
                first = ast.unparse(inner.args[0]) if inner.args else ""
                writes = (
                    called in {"insert", "delete", "update"} and first in _TABLE_NAMES
                ) or called == "QueuedEnvelope"
            elif isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                writes = bool(_RAW_WRITE.search(inner.value))
            if writes:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    found.add(node.name)
                elif isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    found.update(ast.unparse(target) for target in targets)
    return found


def test_every_writer_of_the_queue_keeps_the_counts() -> None:
    sources = [
        path
        for package in ("app", "client", "connector", "core", "demo", "oauth", "webapp")
        for path in (REPOSITORY / package).rglob("*.py")
        if "migrations" not in path.parts
    ]
    writers = {(str(path.relative_to(REPOSITORY)), name) for path in sources for name in _writers_in(path)}
    assert writers == set(QUEUE_WRITERS)


@SQLITE_ONLY
def test_the_sweeps_recount_seeks_only_the_counts_of_queues_with_expired_entries(engine: Engine) -> None:
    """Driven by the expired entries (the expires index), each of their devices' counts found by its
    key and recounted in the recipient index: no scan of every device's count (only of each expired
    packed row's recipients, its JSON)."""
    compiled = RECOUNT_EXPIRING.statement.compile(dialect=engine.dialect)
    with engine.connect() as connection:
        plan = connection.exec_driver_sql(
            "EXPLAIN QUERY PLAN " + compiled.string, tuple(1 for _ in compiled.positiontup or ())
        ).all()
    details = [row[-1] for row in plan]
    assert "SEARCH queue_counts USING PRIMARY KEY (device_id=?)" in details, details
    assert [detail for detail in details if detail.startswith("SCAN")] == [
        "SCAN listed VIRTUAL TABLE INDEX 1:"
    ], details
    assert any("ix_queued_envelopes_expires_at" in detail for detail in details), details
    assert any("ix_queued_envelopes_recipient_seq" in detail for detail in details), details
