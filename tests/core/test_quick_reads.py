"""Quick reads (``@quick_read``) on a SQLite file run on the event loop, on a connection kept for
them, and see what was committed before; a busy database sends them to a worker thread; on
PostgreSQL they always run on a worker thread. Their transaction ends with the read either way."""

from __future__ import annotations

import base64
import sqlite3
import threading

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from core.context import SQLITE_BUSY, Core, Tx, quick_read
from core.domain.keys import generate_keypair
from core.errors import RelayError
from core.principal import Principal
from core.services.auth import Accept, authenticate
from core.services.device_list import list_devices
from core.services.devices import DeviceCreate, register_phone

pytestmark = pytest.mark.anyio


def on_loop_expected(core: Core) -> bool:
    return core.engine.dialect.name == "sqlite"


@quick_read
def where_and_count(tx: Tx, principal: Principal) -> tuple[int, int, bool]:
    count = tx.connection().execute(text("SELECT count(*) FROM devices")).scalar_one()
    return threading.get_ident(), count, tx.connection().in_transaction()


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
    if running._loop_reader is not None:
        assert not running._loop_reader.in_transaction()  # no snapshot held between reads


async def test_a_failing_quick_read_rolls_back_and_the_next_one_works(running: Core) -> None:
    with pytest.raises(RelayError):
        await running.run(list_devices, Principal.anonymous("10.9.0.3"))
    if running._loop_reader is not None:
        assert not running._loop_reader.in_transaction()
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
    if running._loop_reader is not None:
        assert not running._loop_reader.in_transaction()


async def test_without_a_running_core_a_quick_read_runs_on_a_worker_thread(core: Core) -> None:
    thread, _, _ = await core.run(where_and_count, Principal.system())
    assert thread != threading.get_ident()
    assert core._loop_reader is None
