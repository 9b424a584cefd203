"""Quick reads (``@quick_read``) on a SQLite file run on the event loop, on a connection kept for
them, and see what was committed before; a busy database sends them to a worker thread; on
PostgreSQL they always run on a worker thread. Their transaction ends with the read either way."""

from __future__ import annotations

import base64
import sqlite3
import threading
from collections.abc import Callable

import anyio
import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import OperationalError

from core.domain.keys import generate_keypair
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.events import Published
from core.runtime.loop_reader import SQLITE_BUSY, sqlite_driver
from core.runtime.marks import quick_read, reusable
from core.runtime.tx import Tx
from core.services.auth import Accept, authenticate
from core.services.device_list import list_devices
from core.services.devices import DeviceCreate, register_phone
from core.store.prepared import PreparedStatement
from core.store.tables import Device

pytestmark = pytest.mark.anyio


def on_loop_expected(core: Core) -> bool:
    return core.engine.dialect.name == "sqlite"


@quick_read
def where_and_count(tx: Tx, principal: Principal) -> tuple[int, int, bool]:
    count = tx.connection().execute(text("SELECT count(*) FROM devices")).scalar_one()
    return threading.get_ident(), count, tx.connection().in_transaction()


def assert_no_snapshot_held(core: Core) -> None:
    """Between reads the loop's connection is in no transaction, neither SQLAlchemy's nor the driver's."""
    reader = core.loop_reader
    if reader is not None and reader.is_open:
        connection = reader._connection
        assert connection is not None
        assert not connection.in_transaction()
        assert not sqlite_driver(connection).in_transaction


async def phone(core: Core, ip: str) -> Principal:
    registered = await core.run(
        register_phone,
        Principal.anonymous(ip),
        body=DeviceCreate(public_key=base64.b64encode(generate_keypair()[1]).decode()),
    )
    return await core.run(
        authenticate, Principal.anonymous(ip), token=registered.device_token, accept=Accept.DEVICE
    )


async def test_a_quick_read_runs_on_the_loop_and_sees_every_commit(running: Core) -> None:
    loop_thread = threading.get_ident()
    first = await phone(running, "10.9.0.1")
    thread, before, in_transaction = await running.run(where_and_count, Principal.system())
    assert (thread == loop_thread) is on_loop_expected(running)
    assert in_transaction
    await phone(running, "10.9.0.2")  # committed on a worker thread, after the reader's last read
    _, after, _ = await running.run(where_and_count, Principal.system())
    assert after == before + 1
    listing = await running.run(list_devices, first)
    assert [d.device_id for d in listing.devices] == [first.device_id]
    assert_no_snapshot_held(running)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # PostgreSQL has no loop reader
async def test_quick_reads_arriving_together_open_one_connection_between_them(
    running: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thousands of long polls reconnecting at once all find the reader closed: one of them opens
    its connection, the others wait for it, rather than each opening one in turn."""
    reader = running.loop_reader
    assert reader is not None
    reader.close()
    opened: list[object] = []
    open_one = reader._open

    def counted() -> object:
        opened.append(threading.get_ident())
        return open_one()

    monkeypatch.setattr(reader, "_open", counted)
    async with anyio.create_task_group() as reads:
        for _ in range(50):
            reads.start_soon(running.run, where_and_count, Principal.system())
    assert len(opened) == 1
    assert_no_snapshot_held(running)


async def test_a_failing_quick_read_rolls_back_and_the_next_one_works(running: Core) -> None:
    with pytest.raises(RelayError):
        await running.run(list_devices, Principal.anonymous("10.9.0.3"))
    assert_no_snapshot_held(running)
    _, count, _ = await running.run(where_and_count, Principal.system())
    assert count == 0


async def test_a_busy_database_sends_a_quick_read_to_a_worker_thread(running: Core) -> None:
    loop_thread = threading.get_ident()
    tries: list[int] = []

    @quick_read
    def busy_on_the_loop(tx: Tx, principal: Principal) -> int:
        tries.append(threading.get_ident())
        if threading.get_ident() == loop_thread:
            busy = sqlite3.OperationalError("database is locked")
            busy.sqlite_errorcode = SQLITE_BUSY
            raise OperationalError("SELECT", {}, busy)
        return int(tx.connection().execute(text("SELECT 1")).scalar_one())

    assert await running.run(busy_on_the_loop, Principal.system()) == 1
    assert tries[-1] != loop_thread
    assert len(tries) == (2 if on_loop_expected(running) else 1)
    assert_no_snapshot_held(running)


async def test_without_a_running_core_a_quick_read_runs_on_a_worker_thread(core: Core) -> None:
    thread, _, _ = await core.run(where_and_count, Principal.system())
    assert thread != threading.get_ident()
    assert core.loop_reader is None or not core.loop_reader.is_open


COUNT_DEVICES = PreparedStatement(select(func.count()).select_from(Device.__table__))  # type: ignore[attr-defined]


# SQLite only: the driver-level transaction is the loop reader's (PostgreSQL reads run on a worker
# thread at READ COMMITTED, where each statement sees the latest commits).
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_quick_read_sees_one_snapshot_across_its_statements(running: Core) -> None:
    """On a SQLite file its statements share one transaction begun on the driver: a phone
    registered (and committed) between two of them is not seen by the second."""
    assert running.loop_reader is not None
    await phone(running, "10.9.0.4")
    committed_between = threading.Event()

    def register_meanwhile() -> None:
        running.run_sync(
            register_phone,
            Principal.anonymous("10.9.0.5"),
            body=DeviceCreate(public_key=base64.b64encode(generate_keypair()[1]).decode()),
        )
        committed_between.set()

    @quick_read
    def count_twice(tx: Tx, principal: Principal) -> tuple[int, int]:
        first = int(COUNT_DEVICES.scalar(tx.connection()))  # on the driver's cursor
        writer = threading.Thread(target=register_meanwhile)
        writer.start()
        writer.join(timeout=10)
        assert committed_between.is_set()
        second = tx.session.connection().execute(text("SELECT count(*) FROM devices")).scalar_one()
        return first, second

    first, second = await running.run(count_twice, Principal.system())
    assert first == second == 1
    _, now, _ = await running.run(where_and_count, Principal.system())
    assert now == 2
    assert_no_snapshot_held(running)


async def test_a_quick_read_through_the_orm_session_ends_its_transaction(running: Core) -> None:
    registered = await phone(running, "10.9.0.6")

    @quick_read
    def device_name(tx: Tx, principal: Principal) -> str | None:
        device = tx.session.get(Device, registered.device_id)
        return device.name if device is not None else None

    assert await running.run(device_name, Principal.system()) is not None
    assert_no_snapshot_held(running)
    listing = await running.run(list_devices, registered)  # the kept connection still serves
    assert [d.device_id for d in listing.devices] == [registered.device_id]


def count_devices_reading(ran: list[int]) -> Callable[..., int]:
    """A reusable quick read of the number of devices that notes each time it really runs."""

    @reusable
    @quick_read
    def count(tx: Tx, principal: Principal, **_: object) -> int:
        ran.append(1)
        return int(COUNT_DEVICES.scalar(tx.connection()))

    return count


async def test_a_reusable_read_is_kept_until_anything_is_committed(running: Core) -> None:
    ran: list[int] = []
    count = count_devices_reading(ran)
    await phone(running, "10.9.0.7")
    assert await running.run(count, Principal.system()) == 1
    assert await running.run(count, Principal.system()) == 1
    assert len(ran) == (1 if on_loop_expected(running) else 2)  # the second answered from memory

    await phone(running, "10.9.0.8")  # committed on another connection: nothing kept survives it
    assert await running.run(count, Principal.system()) == 2
    assert len(ran) == (2 if on_loop_expected(running) else 3)
    assert_no_snapshot_held(running)


async def test_a_kept_read_is_per_principal_and_arguments_and_only_when_they_hash(running: Core) -> None:
    ran: list[int] = []
    count = count_devices_reading(ran)
    first, second = await phone(running, "10.9.0.9"), await phone(running, "10.9.0.10")
    for principal in (first, second, first, second):
        await running.run(count, principal)
    await running.run(count, first, label="a")
    await running.run(count, first, label="a")
    await running.run(count, first, label=["not", "hashable"])
    await running.run(count, first, label=["not", "hashable"])
    assert len(ran) == (5 if on_loop_expected(running) else 8)


async def test_a_read_that_emitted_events_is_not_kept(running: Core) -> None:
    ran: list[int] = []

    @reusable
    @quick_read
    def publishing(tx: Tx, principal: Principal) -> int:
        ran.append(1)
        tx.emit(Published("test-topic", "hello"))
        return 1

    await running.run(publishing, Principal.system())
    await running.run(publishing, Principal.system())
    assert len(ran) == 2
