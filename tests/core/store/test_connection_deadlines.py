"""``core.store.deadline`` on a real PostgreSQL: a connection that sat in the pool is pinged before
use and replaced when its server side is gone; one back in use at once is not pinged (a ping is a
round trip), and a query on a dead one fails as "database down" and its replacement works."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import exc as sa
from sqlalchemy import text

from core.availability import unavailable_service
from core.store import deadline
from core.store.database import make_engine


class CountedEngine:
    def __init__(self, url: str) -> None:
        self.engine = make_engine(url)
        self.pings = 0
        self.ping_delay = 0.0  # seconds each ping takes to return once answered
        ping = self.engine.dialect.do_ping

        def counted(dbapi_connection: Any) -> bool:
            self.pings += 1
            answered = ping(dbapi_connection)
            time.sleep(self.ping_delay)  # a thread that waits for the GIL, say
            return answered

        self.engine.dialect.do_ping = counted  # type: ignore[method-assign]
        deadline.bound_connections(self.engine, seconds=4.0)

    def backend_pid(self) -> int:
        with self.engine.connect() as connection:
            return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())


@pytest.fixture
def pool(postgres_database: str) -> Iterator[CountedEngine]:
    counted = CountedEngine(postgres_database)
    yield counted
    counted.engine.dispose()


@pytest.fixture
def terminate(postgres_database: str) -> Iterator[Any]:
    """Ends a server process from a connection of another engine."""
    other = make_engine(postgres_database)

    def end(pid: int) -> None:
        with other.connect() as connection:
            connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})

    yield end
    other.dispose()


def test_a_connection_pooled_for_a_while_is_pinged_and_replaced_when_dead(
    pool: CountedEngine, terminate: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = pool.backend_pid()
    terminate(first)
    monkeypatch.setattr(deadline, "PING_AFTER_IDLE_S", 0.0)  # everything pooled counts as idle
    assert pool.backend_pid() != first  # no error: the ping found it dead and the pool reconnected
    assert pool.pings == 1


def test_a_connection_back_in_use_at_once_is_not_pinged_and_a_dead_one_fails_as_unavailable(
    pool: CountedEngine, terminate: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deadline, "PING_AFTER_IDLE_S", 3600.0)
    first = pool.backend_pid()
    assert pool.backend_pid() == first and pool.pings == 0  # reused at once, not pinged
    terminate(first)
    with pytest.raises(sa.OperationalError) as failed:
        pool.backend_pid()
    assert unavailable_service(failed.value) == "database"
    assert pool.backend_pid() != first  # the dead connection was dropped; its replacement works
    assert pool.pings == 0


def test_a_ping_that_answers_after_its_deadline_does_not_hand_out_the_shut_connection(
    pool: CountedEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = pool.backend_pid()
    monkeypatch.setattr(deadline, "PING_AFTER_IDLE_S", 0.0)
    monkeypatch.setattr(deadline, "PING_DEADLINE_S", 0.2)
    # The ping is answered, but returns only after the watchdog has shut the socket.
    pool.ping_delay = 0.2 + 3 * deadline.WATCH_INTERVAL_S
    assert pool.backend_pid() != first  # no error: that connection was replaced, not used


def test_a_connection_shut_past_its_deadline_while_idle_in_use_is_replaced_after_check_in(
    postgres_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(postgres_database)
    deadline.bound_connections(engine, seconds=0.2)
    monkeypatch.setattr(deadline, "PING_AFTER_IDLE_S", 3600.0)  # nothing is pinged
    try:
        with engine.connect() as connection:
            first = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
            connection.commit()
            time.sleep(0.2 + 3 * deadline.WATCH_INTERVAL_S)  # past its deadline, nothing in flight
        with engine.connect() as connection:  # the same pool slot, not pinged: must not be the shut one
            assert connection.execute(text("SELECT pg_backend_pid()")).scalar_one() != first
    finally:
        engine.dispose()


def test_a_connection_pooled_before_the_deadlines_were_installed_is_pinged_at_first_use(
    postgres_database: str, terminate: Any
) -> None:
    engine = make_engine(postgres_database)  # as build_core's migrations use it, before the deadlines
    try:
        with engine.connect() as connection:
            first = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        terminate(first)  # it went stale in the pool, however long ago
        deadline.bound_connections(engine, seconds=4.0)
        with engine.connect() as connection:  # no error: pinged, found dead, replaced
            assert connection.execute(text("SELECT pg_backend_pid()")).scalar_one() != first
            connection.commit()
        with engine.connect() as connection:  # the replacement, back at once: used as it is
            connection.execute(text("SELECT 1"))
    finally:
        engine.dispose()
