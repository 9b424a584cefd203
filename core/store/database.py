"""The engine: SQLite (WAL, foreign keys, immediate write transactions) or PostgreSQL by URL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.pool import StaticPool
from sqlmodel import Session

from core.store.change_marks import counting_cursor
from core.store.held_back import drop_held, held_in, send_held
from core.store.postgres_arrays import register_dumpers
from core.store.prepared import driver_error

READ_ONLY = "relaybox_read_only"
# In a session's ``info``: what its transaction still owes before it commits (``before_commit``).
_BEFORE_COMMIT = "relaybox_before_commit"
POOL_WAIT_S = 2.0
POSTGRES_CONNECT_ARGS = {
    "connect_timeout": 2,  # seconds, libpq's minimum
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
    "tcp_user_timeout": 5000,  # ms: unacknowledged data this long = the peer is gone
}


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def make_engine(url: str) -> Engine:
    """Build an engine with the pragmas and pool each backend needs."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    if not is_sqlite(url):
        # Bounded waits: for a pooled connection, for a new one, and (TCP) for a peer that vanished.
        # A peer that is there but never answers is bounded by ``core.store.deadline``, which also
        # pings a pooled connection before use (so no ``pool_pre_ping``: its ping is unbounded).
        # Every cursor counts its statements: a group commit tells by them whether a write that
        # failed had changed anything (``core.store.change_marks``).
        connect_args = {**POSTGRES_CONNECT_ARGS, "cursor_factory": counting_cursor()}
        postgres = create_engine(
            url, pool_size=10, max_overflow=20, pool_timeout=POOL_WAIT_S, connect_args=connect_args
        )
        # Array parameters of strings and bytes sent in one step (``core.store.postgres_arrays``).
        event.listen(
            postgres, "connect", lambda dbapi_connection, _record: register_dumpers(dbapi_connection)
        )
        # A write held back by a transaction rolled back never reaches the next one.
        event.listen(postgres.pool, "reset", drop_held)
        return postgres

    in_memory = url in ("sqlite://", "sqlite:///:memory:")
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 10}}
    if not in_memory:
        kwargs |= {"pool_size": 20, "max_overflow": 30}  # one connection per worker thread, at most
    if in_memory:
        kwargs["poolclass"] = StaticPool  # one shared connection, or each thread sees an empty DB
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself, so writes can take the lock up front.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not in_memory:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            # No checkpoint inside a commit: it would copy the WAL into the database and fsync
            # both while holding the write lock, stalling every write behind it for tens of ms.
            # ``checkpoint`` runs on a connection of its own instead, in the background.
            cursor.execute("PRAGMA wal_autocheckpoint=0")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=10000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # Writers take the lock up front (IMMEDIATE): two deferred readers that both try to upgrade
        # would deadlock. Read-only operations start deferred and never wait for a writer (WAL).
        if connection.get_execution_options().get(READ_ONLY):
            # A deferred BEGIN takes no lock and so cannot be busy: straight to the driver, which
            # costs a fraction of a statement through the engine. A quick read has begun on the
            # driver already (``core.runtime.loop_reader``): SQLAlchemy's transaction then joins it.
            driver = connection.connection.driver_connection
            if not driver.in_transaction:
                driver.execute("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


@contextmanager
def session_scope(engine: Engine, *, read_only: bool = False) -> Iterator[Session]:
    """One transaction: commit on success (after what it owes, ``before_commit``), roll back on
    any exception."""
    with Session(engine, expire_on_commit=False) as session:
        if read_only:
            session.connection(execution_options={READ_ONLY: True})
        try:
            yield session
            if read_only and (session.new or session.dirty or session.deleted):
                raise RuntimeError("a read-only operation changed rows")
            _commit(session)
        except BaseException:
            session.rollback()
            raise


def before_commit(session: Session, owed: Callable[[], object]) -> None:
    """Have ``session_scope`` call ``owed`` once the transaction's work is done, just before it
    commits (in the order they were registered); when it fails, the transaction fails with it. A
    transaction rolled back owes nothing."""
    session.info.setdefault(_BEFORE_COMMIT, []).append(owed)


def _commit(session: Session) -> None:
    """Commit, after what the transaction owes (``before_commit``), which sees every change of the
    transaction (the ORM's flushed first). On PostgreSQL a write held back
    (``core.store.held_back``), what the transaction owes and the COMMIT are sent in one pipeline,
    whose end waits once for all of them (a statement that answers no rows is not waited for on
    its own; one that fails fails the pipeline, the COMMIT with it): a lone write's transaction
    makes no more round trips for what it owes. SQLAlchemy's commit then finds the connection out
    of its transaction and sends nothing. An owed action runs statements on the connection: ORM
    objects it added would be flushed in the pipeline, where SQLAlchemy cannot read what an insert
    returns."""
    owed = session.info.pop(_BEFORE_COMMIT, [])
    if not owed and not held_in(session):
        session.commit()
        return
    session.flush()
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        driver: Any = connection.connection.driver_connection
        try:
            with driver.pipeline():
                send_held(driver)
                for action in owed:
                    action()
                driver.execute("COMMIT")
        except connection.dialect.loaded_dbapi.Error as error:  # as SQLAlchemy would raise it
            raise driver_error(connection, "COMMIT", (), error) from error
    else:
        for action in owed:
            action()
    session.commit()


def checkpoint(engine: Engine) -> tuple[int, int]:
    """Copy what the WAL holds into a SQLite file's database, as far as readers allow, without
    waiting for any of them or for the writer (a passive checkpoint); the next write then starts
    the WAL over, so it stays small. Returns the frames in the WAL and the frames copied."""
    connection = engine.raw_connection()  # no transaction: a checkpoint cannot run inside one
    try:
        cursor = connection.cursor()
        _busy, frames, copied = cursor.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        cursor.close()
        return int(frames), int(copied)
    finally:
        connection.close()
