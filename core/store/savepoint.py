"""One write of a group commit, in a savepoint of the group's transaction.

``Session.begin_nested`` cost a short write (a relay, a send) more than its own statements: it
compiles SAVEPOINT and RELEASE afresh each time and keeps a nested ORM transaction with its own
snapshots. Here the statements go to the driver as plain SQL, and the ORM is kept right by
hand: a write's ORM changes are flushed inside its savepoint, and when the write raises, the
savepoint is rolled back and the session forgets every object it holds (their state may no
longer match the rows; nothing is lost, as every earlier write was flushed).

The ORM knows nothing of such a savepoint: an ORM flush that fails rolls back the session's
whole transaction, and SQLite ends it on its own after some errors (disk full, I/O; PostgreSQL
only marks it failed, which rolling back to the savepoint undoes); a savepoint
that cannot be ended (never seen) rolls it back too. Then the error is raised as it is, and
``in_transaction`` tells the caller that the whole group is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, exc
from sqlmodel import Session

from core.store.prepared import run_on_driver

T = TypeVar("T")
NAME = "relaybox_write"


def in_savepoint(session: Session, write: Callable[[], T]) -> T:
    """``write()`` in a savepoint of the session's transaction (begun if need be): released when it
    returns, rolled back to when it raises (unless the transaction itself ended), and its error
    raised again.

    On PostgreSQL, where every statement is a round trip, a savepoint that was written is left
    open when its write returns: the next write's ``SAVEPOINT`` releases it in the same round
    trip, or the commit does. There is never more than one open, so ``ROLLBACK TO`` always names
    the failing write's own."""
    connection = session.connection()
    several = connection.dialect.name == "postgresql"  # several statements in one round trip
    left_open = session.info.pop(_LEFT_OPEN, False)
    _close(session, connection, several, *([f"RELEASE {NAME}"] if left_open else []), f"SAVEPOINT {NAME}")
    try:
        result = write()
        session.flush()
    except Exception:
        if in_transaction(session):
            _close(session, connection, several, f"ROLLBACK TO {NAME}", f"RELEASE {NAME}")
            session.expunge_all()
        raise
    if several:
        session.info[_LEFT_OPEN] = True
    else:
        _close(session, connection, several, f"RELEASE {NAME}")
    return result


_LEFT_OPEN = "relaybox_savepoint_left_open"  # in the session's info: released by the next one


def _run(connection: Connection, several: bool, *statements: str) -> None:
    if several:
        run_on_driver(connection, "; ".join(statements))
    else:
        for statement in statements:
            run_on_driver(connection, statement)


def _close(session: Session, connection: Connection, several: bool, *statements: str) -> None:
    """End (or open) the savepoint. Should that fail, what the write did can no longer be told
    apart from what the writes before it did: the whole transaction is rolled back
    (``in_transaction`` is then false) and the error raised."""
    try:
        _run(connection, several, *statements)
    except Exception:
        session.rollback()
        raise


def in_transaction(session: Session) -> bool:
    """Whether the session and the connection under it are both still in the transaction (on
    PostgreSQL one a failed statement left to be rolled back to a savepoint counts)."""
    if not session.in_transaction() or not session.is_active:
        return False
    try:
        driver = session.connection().connection.driver_connection
    except exc.PendingRollbackError:  # the connection was lost (invalidated): so was the transaction
        return False
    status = _postgres_status(driver)
    if status is not None:
        return status in _POSTGRES_IN_TRANSACTION
    return bool(getattr(driver, "in_transaction", False))


def in_failed_transaction(session: Session) -> bool:
    """Whether the transaction is one a failed statement left to be rolled back (PostgreSQL)."""
    return _postgres_status(session.connection().connection.driver_connection) == "INERROR"


def _postgres_status(driver: Any) -> str | None:
    """psycopg's transaction status of the driver connection by name; None on sqlite3 (no ``info``)."""
    info = getattr(driver, "info", None)
    return None if info is None else str(info.transaction_status.name)


_POSTGRES_IN_TRANSACTION = ("INTRANS", "INERROR")  # idle in a transaction, or in a failed one
