"""Run mode "quick read", for a ``@quick_read`` operation when the database is a SQLite file: it runs
on the event loop itself, on a connection kept for it (``LoopReader``; ``read_on_loop``).

A WAL reader never waits for a writer, so a read of a few rows by index costs less on the loop than
the hop to a worker thread and back. The connection is opened once, on a worker thread, and kept;
nothing awaits while a read runs, so no other task uses it meanwhile.

Each read is one transaction begun and ended on the driver: a deferred ``BEGIN`` takes no lock and
so cannot be busy, and SQLAlchemy's own transaction bookkeeping costs several times the statement
a quick read runs. A read that runs statements through SQLAlchemy (``tx.connection().execute`` or
the ORM session) still works: SQLAlchemy's transaction joins the driver's (the engine's ``begin``
hook sees one open and issues nothing) and is ended through SQLAlchemy.

A read marked ``@reusable`` may be answered from what this reader kept of it instead: kept results
are dropped whenever ``PRAGMA data_version`` says another connection has committed since (every
write in this process, and any other process's, is another connection: this one only reads). The
PRAGMA opens a read transaction, two ``fcntl`` calls on the WAL index, so it is not asked on every
call: it is asked again after any commit of this process (every write goes through an ORM
session, whose ``after_commit`` counts it in ``COMMITS`` once it has landed), and otherwise at most
every ``VERSION_CHECK_S`` for another process's commits (the CLI's, say: a device it revokes stops
being listed within that time; its credentials are not kept here but in ``core.credentials``).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import anyio
from sqlalchemy import Connection, Engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from core.principal import Principal
from core.runtime.marks import reuse_key
from core.runtime.tally import Tally
from core.runtime.tx import MakeTx, Outcome
from core.store.database import READ_ONLY
from core.store.prepared import driver_error, run_on_driver

SQLITE_BUSY = 5
MAX_KEPT = 1024  # results kept at once (a key per operation, principal and arguments)
NOT_KEPT = object()
DATA_VERSION = "PRAGMA data_version"
VERSION_CHECK_S = 0.01  # another process's commit drops what is kept within this long
T = TypeVar("T")


# The commits of this process's sessions (any engine), counted once each has landed: a read that
# begins after the count moved sees the commit.
COMMITS = Tally()
event.listen(Session, "after_commit", lambda _session: COMMITS.counted())


class LoopReader:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._connection: Connection | None = None
        self._opening: anyio.Lock | None = None  # held by the read that opens the connection
        # A cursor of its sqlite3 connection, for the data_version check every kept answer costs:
        # reached through SQLAlchemy's connection and pool proxies, or made afresh, it costs more
        # than the PRAGMA itself (its one row fetched, the statement is reset: no read stays open).
        self._version_cursor: sqlite3.Cursor | None = None
        self._kept: dict[Hashable, Any] = {}
        self._kept_version: int | None = None  # the data_version the kept results were read at
        self._checked_commits = -1  # COMMITS.count when data_version was last asked
        self._check_due = 0.0  # time.monotonic() when it is to be asked again in any case

    async def connection(self) -> Connection:
        """The kept connection, opened on a worker thread the first time, by one read: the others
        that come meanwhile wait for it (a restart's reconnecting long polls, thousands at once,
        would otherwise each open one, waiting in turn for a worker thread and a pooled connection)."""
        if self._connection is None:
            self._opening = self._opening or anyio.Lock()
            async with self._opening:
                if self._connection is None:
                    opened = await anyio.to_thread.run_sync(self._open)
                    self._connection, self._version_cursor = opened, sqlite_driver(opened).cursor()
        return self._connection

    def read(self, connection: Connection, run: Callable[[], Any]) -> tuple[bool, Any]:
        """``(True, run())`` with ``run`` inside one read transaction on ``connection``, or
        ``(False, None)`` when the database is busy (the caller then reads on a worker thread,
        where waiting for the lock blocks nothing else). Any other error closes the connection
        (it is opened afresh next time) and is raised."""
        try:
            with _DriverTransaction(connection):
                return True, run()
        except OperationalError as error:
            if getattr(error.orig, "sqlite_errorcode", None) == SQLITE_BUSY:
                return False, None
            self.close()
            raise

    def kept(self, connection: Connection, key: Hashable) -> Any:
        """The result kept for ``key`` if nothing was committed since it was read (by this process:
        at once; by another: as of ``VERSION_CHECK_S`` ago at most), else ``NOT_KEPT``."""
        commits, now = COMMITS.count, time.monotonic()  # counted before asking: none is missed
        if commits != self._checked_commits or now >= self._check_due:
            version = self._data_version(connection)
            if version is None or version != self._kept_version:
                self._kept.clear()
                self._kept_version = version
            if version is None:  # busy: asked again next time
                self._checked_commits = -1
                return NOT_KEPT
            self._checked_commits, self._check_due = commits, now + VERSION_CHECK_S
        try:
            return self._kept.get(key, NOT_KEPT)
        except TypeError:  # an argument that does not hash: nothing is kept for the call
            return NOT_KEPT

    def keep(self, key: Hashable, result: Any) -> None:
        """Keep what a read found after ``kept`` was asked: it is at least as new as that version."""
        if self._kept_version is not None and len(self._kept) < MAX_KEPT:
            try:
                self._kept[key] = result
            except TypeError:  # an argument that does not hash: nothing is kept
                return

    def _data_version(self, connection: Connection) -> int | None:
        """The connection's ``data_version``; ``None`` when the database is busy. Any other error
        closes the connection (it is opened afresh next time) and is raised as SQLAlchemy's."""
        cursor = self._version_cursor if connection is self._connection else None
        try:
            row = (cursor or sqlite_driver(connection)).execute(DATA_VERSION).fetchone()
        except sqlite3.Error as error:
            if getattr(error, "sqlite_errorcode", None) == SQLITE_BUSY:
                return None
            raised = driver_error(connection, DATA_VERSION, (), error)
            self.close()
            raise raised from error
        return int(row[0])

    def close(self) -> None:
        self._kept.clear()
        self._kept_version = None
        self._checked_commits = -1
        connection, self._connection, self._version_cursor = self._connection, None, None
        if connection is not None:
            connection.invalidate()  # not back to the pool: it does not wait when busy
            connection.close()

    @property
    def is_open(self) -> bool:
        return self._connection is not None

    @property
    def opened(self) -> Connection | None:
        """The kept connection when it is open."""
        return self._connection

    def _open(self) -> Connection:
        connection = self.engine.connect().execution_options(**{READ_ONLY: True})
        with connection.begin():
            # Busy means "read on a worker thread", never "wait here, blocking the loop".
            connection.exec_driver_sql("PRAGMA busy_timeout=0")
        return connection


class _DriverTransaction:
    """``BEGIN`` … ``COMMIT`` (``ROLLBACK`` on any exception) on the driver connection."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.driver = sqlite_driver(connection)

    def __enter__(self) -> None:
        self._run("BEGIN")

    def __exit__(self, error_type: type[BaseException] | None, *_: object) -> None:
        ending = "COMMIT" if error_type is None else "ROLLBACK"
        if self.connection.in_transaction():  # SQLAlchemy joined: it ends the transaction itself
            if error_type is None:
                self.connection.commit()
            else:
                self.connection.rollback()
        if self.driver.in_transaction:
            self._run(ending)

    def _run(self, statement: str) -> None:
        run_on_driver(self.connection, statement)


def sqlite_driver(connection: Connection) -> sqlite3.Connection:
    """The ``sqlite3`` connection under ``connection``."""
    driver = connection.connection.driver_connection
    assert isinstance(driver, sqlite3.Connection)
    return driver


async def read_on_loop(
    reader: LoopReader,
    make_tx: MakeTx,
    running: Callable[[], bool],
    op: Callable[..., T],
    principal: Principal,
    args: tuple[Any, ...],
    kw: dict[str, Any],
) -> Outcome[T] | None:
    """Run a quick read on the loop's own connection; ``None`` when the database is busy (the
    caller then runs it on a worker thread) or the Core stopped (``running()`` is false) while the
    connection opened."""
    connection = reader.opened or await reader.connection()
    if not running():
        reader.close()
        return None
    key = reuse_key(op, principal, args, kw)
    if key is not None:
        kept = reader.kept(connection, key)
        if kept is not NOT_KEPT:
            return kept, []
    tx = make_tx(read_connection=connection)

    def run() -> T:
        try:
            result = op(tx, principal, *args, **kw)
            session = tx.opened_session
            if session is not None and (session.new or session.dirty or session.deleted):
                raise RuntimeError("a read-only operation changed rows")
            return result
        finally:
            if tx.opened_session is not None:
                tx.opened_session.close()

    done, result = reader.read(connection, run)
    if not done:
        return None
    if key is not None and not tx.events:
        reader.keep(key, result)
    return result, tx.events
