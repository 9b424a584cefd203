"""A group-commit write in a savepoint of its own (SQLite, PostgreSQL): what it wrote through the ORM or the
driver is kept when it returns and undone when it raises, the session forgets what it held, the
writes before it are kept; a savepoint that cannot be ended is SQLAlchemy's error and ends the
transaction."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlmodel import Session

from core.availability import as_unavailable
from core.runtime.core import Core
from core.store.database import make_engine, session_scope
from core.store.savepoint import NAME, in_savepoint, in_transaction
from core.store.tables import Account

ACCOUNT = Account.__table__  # type: ignore[attr-defined]


@pytest.fixture
def engine(core: Core) -> Engine:
    """The database of a Core (migrated), on each backend."""
    return core.engine


def add_accounts(session: Session, *ids: str) -> None:
    """One account through the ORM (flushed by ``in_savepoint``), the rest through the driver."""
    session.add(Account(account_id=ids[0], created_at=1))
    for account_id in ids[1:]:
        session.connection().execute(ACCOUNT.insert().values(account_id=account_id, created_at=1))


def accounts(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        return set(connection.execute(select(ACCOUNT.c.account_id)).scalars())


def refuse() -> None:
    raise ValueError("refused")


def test_a_write_that_returns_is_kept_and_one_that_raises_is_undone(engine: Engine) -> None:
    with session_scope(engine) as session:
        assert in_savepoint(session, lambda: add_accounts(session, "a1", "a2")) is None

        def add_then_refuse() -> None:
            add_accounts(session, "b1", "b2")
            session.flush()
            session.add(Account(account_id="b3", created_at=1))  # pending, never flushed
            refuse()

        with pytest.raises(ValueError, match="refused"):
            in_savepoint(session, add_then_refuse)
        assert len(session.identity_map) == 0 and not session.new  # it forgot what it held
        assert in_transaction(session)
        in_savepoint(session, lambda: add_accounts(session, "c1"))
    assert accounts(engine) == {"a1", "a2", "c1"}


def test_the_write_sees_what_the_writes_before_it_wrote(engine: Engine) -> None:
    with session_scope(engine) as session:
        in_savepoint(session, lambda: add_accounts(session, "a1"))
        count = in_savepoint(
            session, lambda: session.connection().execute(select(func.count()).select_from(ACCOUNT))
        )
        assert count.scalar_one() == 1


def test_a_failed_orm_flush_ends_the_transaction_and_is_raised_as_it_is(engine: Engine) -> None:
    with session_scope(engine) as session:
        in_savepoint(session, lambda: add_accounts(session, "a1"))
        with pytest.raises(IntegrityError):
            in_savepoint(session, lambda: add_accounts(session, "a1"))  # the primary key is taken
        assert not in_transaction(session)
        session.rollback()
    assert accounts(engine) == set()


def test_a_savepoint_that_cannot_be_ended_is_sqlalchemys_error_and_ends_the_transaction(
    engine: Engine,
) -> None:
    def add_release_its_savepoint_then_refuse() -> None:
        add_accounts(session, "b1", "b2")
        session.connection().exec_driver_sql(f"RELEASE {NAME}")
        refuse()

    with session_scope(engine) as session:
        in_savepoint(session, lambda: add_accounts(session, "a1"))
        with pytest.raises(OperationalError, match=r"no such savepoint|does not exist"):
            in_savepoint(session, add_release_its_savepoint_then_refuse)
        assert not in_transaction(session)  # b1 and b2 cannot be undone alone: nothing is kept
    assert accounts(engine) == set()


def test_a_transaction_whose_connection_was_lost_is_not_in_transaction(postgres_database: str) -> None:
    """A write of a group that failed because PostgreSQL went away (a restart, an administrator's
    kill) ends the whole group: asking whether the transaction lives answers no rather than raising
    SQLAlchemy's PendingRollbackError, so each write fails with the disconnect, a 503 (once a 500)."""
    engine = make_engine(postgres_database)
    try:
        with engine.connect() as killer, Session(engine) as session:
            pid = session.connection().execute(text("SELECT pg_backend_pid()")).scalar_one()
            assert in_transaction(session)
            killer.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            killer.commit()
            with pytest.raises(DBAPIError) as raised:
                session.connection().execute(text("SELECT 1"))
            assert raised.value.connection_invalidated
            assert not in_transaction(session)
            assert as_unavailable(raised.value) is not None
    finally:
        engine.dispose()
