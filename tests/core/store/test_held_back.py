"""``hold_back``: a write held back on PostgreSQL goes out just before the connection's next
statement, or in its commit's pipeline, and counts as a statement from the moment it is held; a
transaction rolled back drops it, and it never reaches the next transaction on that connection."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, exc, insert, text

from core.store.change_marks import change_mark
from core.store.database import session_scope
from core.store.held_back import hold_back, send_held
from core.store.prepared import PreparedStatement
from core.store.tables import QueuedEnvelope
from tests.helpers import queue_entries

_QUEUE = QueuedEnvelope.__table__  # type: ignore[attr-defined]
_ENTRY = {"sender": "server", "type": "push", "created_at": 1, "expires_at": 2}
_HELD_ENTRY = PreparedStatement(insert(_QUEUE).values(recipient_device_id="dev_held", blob=b"held", **_ENTRY))
_BROKEN_ENTRY = PreparedStatement(insert(_QUEUE).values(recipient_device_id="dev_held", blob=None, **_ENTRY))

postgres_only = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


def _count(connection: Any, device_id: str) -> int:
    query = text("SELECT count(*) FROM queued_envelopes WHERE recipient_device_id = :d")
    return int(connection.execute(query, {"d": device_id}).scalar_one())


@postgres_only
def test_a_held_write_is_sent_in_the_commit(engine: Engine) -> None:
    sent: list[str] = []
    with session_scope(engine) as session:
        connection = session.connection()

        def send() -> None:
            sent.append("held")
            _HELD_ENTRY.rows(connection)

        hold_back(session, send)
        assert sent == []
    assert sent == ["held"]
    assert [blob for _, blob, _ in queue_entries(engine, "dev_held")] == [b"held"]


@postgres_only
def test_the_next_statement_sends_the_held_write_first_and_it_counts_from_the_moment_it_is_held(
    engine: Engine,
) -> None:
    with session_scope(engine) as session:
        connection = session.connection()
        before = change_mark(connection)
        hold_back(session, lambda: _HELD_ENTRY.rows(connection))
        assert change_mark(connection) != before  # a group commit sees the write changed rows
        assert _count(connection, "dev_held") == 1  # sent before the query, in its transaction
        assert _count(connection, "dev_held") == 1  # and once
    assert len(queue_entries(engine, "dev_held")) == 1


@postgres_only
def test_a_held_write_that_fails_in_the_commit_fails_the_transaction(engine: Engine) -> None:
    def work() -> None:
        with session_scope(engine) as session:
            session.add(
                QueuedEnvelope(recipient_device_id="dev_work", blob=b"work", **_ENTRY)  # type: ignore[arg-type]
            )
            session.flush()
            connection = session.connection()
            hold_back(session, lambda: _BROKEN_ENTRY.rows(connection))  # a NULL blob

    with pytest.raises(exc.IntegrityError):
        work()
    assert queue_entries(engine, "dev_work") == [] and queue_entries(engine, "dev_held") == []


@postgres_only
def test_a_transaction_rolled_back_drops_what_it_held(engine: Engine) -> None:
    sent: list[str] = []
    drivers: list[Any] = []

    def failed_work() -> None:
        with session_scope(engine) as session:
            drivers.append(session.connection().connection.driver_connection)
            hold_back(session, lambda: sent.append("held"))
            raise RuntimeError("the work failed")

    with pytest.raises(RuntimeError):
        failed_work()
    send_held(drivers[0])  # the connection, back in the pool, holds nothing
    with session_scope(engine) as session:
        _count(session.connection(), "dev_held")
    assert sent == []


@postgres_only
def test_one_write_is_held_at_a_time_and_holding_it_again_counts_again(engine: Engine) -> None:
    def send() -> None:
        pass

    with session_scope(engine) as session:
        hold_back(session, send)
        mark = change_mark(session.connection())
        hold_back(session, send)  # it grew: the group commit must see this write changed rows too
        assert change_mark(session.connection()) != mark
        with pytest.raises(RuntimeError, match="another write is held back"):
            hold_back(session, lambda: None)


def test_sqlite_holds_nothing_back(tmp_path: Any) -> None:
    from core.store import migrate
    from core.store.database import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'held.db'}")
    migrate.upgrade(engine)
    with pytest.raises(RuntimeError, match="only a PostgreSQL"), session_scope(engine) as session:
        hold_back(session, lambda: None)
    engine.dispose()
