"""Statements run on the driver's cursor behave like ``Connection.execute`` where it matters: the
same rows (a parameter used several times, literals the statement carries), inside the caller's
transaction, and driver errors raised as SQLAlchemy's with the parameters hidden — so a lost
database still becomes 503 ``unavailable``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Column, Engine, Integer, MetaData, String, Table, bindparam, func, or_, select, text
from sqlalchemy.exc import DBAPIError

from core.availability import as_unavailable
from core.store.database import make_engine
from core.store.driver_sql import DriverStatement

SECRET = "do-not-echo-this-parameter"


@pytest.fixture
def probe(engine: Engine) -> Iterator[Table]:
    """A scratch table with three rows."""
    table = Table("driver_sql_probe", MetaData(), Column("name", String), Column("number", Integer))
    table.create(engine)
    with engine.begin() as connection:
        connection.execute(table.insert(), [{"name": n, "number": i} for i, n in enumerate("abc")])
    yield table
    table.drop(engine)


def test_rows_match_what_sqlalchemy_returns(engine: Engine, probe: Table) -> None:
    statement = (
        select(probe.c.name, probe.c.number)
        .where(or_(probe.c.name == bindparam("first"), probe.c.name == bindparam("second")))
        .where(probe.c.number != bindparam("first_number"), probe.c.name != bindparam("first"))  # again
        .order_by(probe.c.number.desc())
        .limit(5)  # a literal LIMIT compiles into a parameter of its own
    )
    params = {"first": "a", "second": "c", "first_number": 0}
    with engine.begin() as connection:
        expected = [tuple(row) for row in connection.execute(statement, params)]
        assert DriverStatement(statement).rows(connection, params) == expected == [("c", 2)]
        assert DriverStatement(statement).scalar(connection, params) == "c"
        assert DriverStatement(statement).rows(connection, {**params, "second": "z"}) == []


def test_it_runs_inside_the_callers_transaction(engine: Engine, probe: Table) -> None:
    insert = DriverStatement(probe.insert().values(name=bindparam("name"), number=bindparam("number")))
    count = DriverStatement(select(func.count()).select_from(probe))
    with engine.connect() as connection:
        with connection.begin() as transaction:
            assert insert.rows(connection, {"name": "d", "number": 3}) == []
            assert count.scalar(connection, {}) == 4
            transaction.rollback()
        with connection.begin():
            assert count.scalar(connection, {}) == 3


def test_a_driver_error_is_raised_as_sqlalchemys_without_its_parameters(engine: Engine) -> None:
    broken = DriverStatement(text("SELECT value FROM no_such_table WHERE value = :value"))
    with engine.connect() as connection, connection.begin():
        with pytest.raises(DBAPIError) as raised:
            broken.rows(connection, {"value": SECRET})
    assert SECRET not in str(raised.value)
    assert not raised.value.connection_invalidated


def test_a_lost_connection_is_invalidated_and_means_unavailable(postgres_database: str) -> None:
    engine = make_engine(postgres_database)  # a SQLite file has no connection to lose
    with engine.connect() as killer, engine.connect() as victim:
        pid = victim.execute(text("SELECT pg_backend_pid()")).scalar_one()
        victim.rollback()
        killer.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        killer.commit()
        with pytest.raises(DBAPIError) as raised:
            DriverStatement(select(bindparam("value"))).rows(victim, {"value": SECRET})
        assert raised.value.connection_invalidated
        assert victim.invalidated
        unavailable = as_unavailable(raised.value)
        assert unavailable is not None and unavailable.code == "unavailable"
    engine.dispose()
    assert SECRET not in str(raised.value)
