"""A write held back on PostgreSQL: sent just before the connection's next statement, or in the
pipeline of its commit, instead of on a round trip of its own.

A statement whose answer the caller does not need (an insert whose keys it chose itself) need not
wait for one: held back, it goes out with whatever the transaction sends next. Every statement a
PostgreSQL connection runs goes through its counting cursor (``core.store.change_marks``), which
first sends what is held, so statements still run in the order they were made; the commit
(``core.store.database``) sends it in one pipeline with the ``COMMIT``. A held write counts as a
statement the moment it is held (a group commit must see that the write changed rows before it was
sent), and fails its transaction like any statement when it is sent. A transaction rolled back
drops what it held, when its connection goes back to the pool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlmodel import Session

STATEMENTS_RUN = "relaybox_statements_run"  # the attribute a PostgreSQL connection counts in (below)
_HELD = "relaybox_held_back"  # the attribute of a psycopg connection that holds the write
_HOLDING = "relaybox_holding"  # in a session's ``info``: its transaction held a write back


def hold_back(session: Session, send: Callable[[], object]) -> None:
    """Have ``send()`` (which runs the write's statements on the session's connection) called just
    before the connection's next statement or the session's commit, whichever comes first. One
    write is held at a time; holding the same one again (it has grown: a group's next entries)
    counts it as one more statement."""
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        raise RuntimeError("only a PostgreSQL connection holds a write back")
    driver: Any = connection.connection.driver_connection
    held = getattr(driver, _HELD, None)
    if held is not None and held != send:
        raise RuntimeError("another write is held back on this connection already")
    setattr(driver, _HELD, send)
    session.info[_HOLDING] = True
    count_statement(driver)


def held_in(session: Session) -> bool:
    """Whether the session's transaction held a write back (its commit must send it)."""
    return bool(session.info.get(_HOLDING))


def send_held(driver: Any) -> None:
    """Send what ``driver`` (a psycopg connection) holds back, if anything: before its next
    statement (the counting cursor) and in its commit."""
    send = getattr(driver, _HELD, None)
    if send is not None:
        setattr(driver, _HELD, None)
        send()


def drop_held(driver: Any, *_event: object) -> None:
    """Forget what ``driver`` holds back: the pool's reset of a connection returned to it, after
    its transaction (a commit sent what it held; a rollback drops it)."""
    if getattr(driver, _HELD, None) is not None:
        setattr(driver, _HELD, None)


def count_statement(connection: Any) -> None:
    """Count one statement on ``connection`` (a psycopg connection): run, or held back to be run
    (``core.store.change_marks`` reads the count)."""
    setattr(connection, STATEMENTS_RUN, getattr(connection, STATEMENTS_RUN, 0) + 1)
