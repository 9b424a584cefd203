"""What the loop's reader keeps (``@reusable``) is dropped when SQLite's ``data_version`` moves: a
commit by another process on the same file included, within ``VERSION_CHECK_S``; a commit of this
process at once, without waiting for that; a busy check answers nothing from memory and keeps the
reader open; any other error closes it (it is opened afresh next time)."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError

from core.principal import Principal
from core.runtime import loop_reader
from core.runtime.core import Core
from core.runtime.loop_reader import NOT_KEPT, SQLITE_BUSY, VERSION_CHECK_S, LoopReader
from tests.core.test_quick_reads import count_devices_reading, phone

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

# Another process deletes every device on the same file: no connection of this process sees it.
DELETE_DEVICES = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], timeout=10, isolation_level=None)
connection.execute("PRAGMA foreign_keys=OFF")
connection.execute("DELETE FROM devices")
connection.close()
"""


async def test_a_kept_read_is_dropped_when_another_process_commits(running: Core) -> None:
    ran: list[int] = []
    count = count_devices_reading(ran)
    await phone(running, "10.9.1.1")
    assert await running.run(count, Principal.system()) == 1
    assert await running.run(count, Principal.system()) == 1
    assert len(ran) == 1  # the second answered from memory

    database = running.engine.url.database
    assert database is not None
    with anyio.fail_after(60):
        await anyio.run_process([sys.executable, "-c", DELETE_DEVICES, database], check=True)
    await anyio.sleep(2 * VERSION_CHECK_S)  # no commit of this process tells: data_version is asked by then
    assert await running.run(count, Principal.system()) == 0
    assert len(ran) == 2


async def test_a_commit_of_this_process_drops_what_is_kept_at_once(
    running: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_reader, "VERSION_CHECK_S", 3600.0)  # only a commit makes it ask
    ran: list[int] = []
    count = count_devices_reading(ran)
    await phone(running, "10.9.1.2")
    assert await running.run(count, Principal.system()) == 1
    assert await running.run(count, Principal.system()) == 1
    assert len(ran) == 1
    await phone(running, "10.9.1.3")  # committed on a worker thread's session
    assert await running.run(count, Principal.system()) == 2
    assert len(ran) == 2


async def test_without_a_commit_a_kept_answer_asks_nothing_until_the_check_is_due(
    running: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_reader, "VERSION_CHECK_S", 3600.0)
    reader, connection, _ = await reader_after_a_read(running)
    key = ("a key",)
    assert reader.kept(connection, key) is NOT_KEPT
    reader.keep(key, "kept")
    reader._version_cursor = FailingCursor(sqlite_error(10))  # type: ignore[assignment]  # never asked
    assert reader.kept(connection, key) == "kept"
    reader._check_due = 0.0  # due: asked (and failing, it closes the reader)
    with pytest.raises(OperationalError):
        reader.kept(connection, key)
    assert not reader.is_open


class FailingCursor:
    """A sqlite3 cursor whose every statement fails with ``error``."""

    def __init__(self, error: sqlite3.Error) -> None:
        self.error = error

    def execute(self, *_: Any) -> Any:
        raise self.error


def sqlite_error(code: int) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("database is locked" if code == SQLITE_BUSY else "disk I/O error")
    error.sqlite_errorcode = code
    return error


async def reader_after_a_read(running: Core) -> tuple[LoopReader, Connection, Callable[..., Any]]:
    """The running Core's loop reader once a read opened it, its connection and that read."""
    reader = running.loop_reader
    assert reader is not None
    count = count_devices_reading([])
    await running.run(count, Principal.system())
    connection = reader.opened
    assert connection is not None
    return reader, connection, count


async def test_a_busy_version_check_answers_nothing_kept_and_keeps_the_reader(running: Core) -> None:
    reader, connection, _ = await reader_after_a_read(running)
    reader._version_cursor = FailingCursor(sqlite_error(SQLITE_BUSY))  # type: ignore[assignment]
    await anyio.sleep(2 * VERSION_CHECK_S)  # the check is due
    assert reader.kept(connection, ("any key",)) is NOT_KEPT
    assert reader.opened is connection


async def test_a_failing_version_check_closes_the_reader_and_the_next_read_opens_it(running: Core) -> None:
    reader, connection, count = await reader_after_a_read(running)
    reader._version_cursor = FailingCursor(sqlite_error(10))  # type: ignore[assignment]  # SQLITE_IOERR
    await anyio.sleep(2 * VERSION_CHECK_S)  # the check is due
    with pytest.raises(OperationalError):
        reader.kept(connection, ("any key",))
    assert not reader.is_open
    assert await running.run(count, Principal.system()) == 0
    assert reader.is_open
