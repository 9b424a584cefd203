"""A prepared statement answers what ``Connection.execute`` of its statement answers, on each backend:
the same rows in the same order, values through their types (booleans are bools), parameters
given or carried by the statement, and a driver error raised as SQLAlchemy's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import (
    Column,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    bindparam,
    exists,
    func,
    or_,
    select,
    text,
)
from sqlalchemy.exc import DBAPIError, OperationalError, ProgrammingError

from core.availability import as_unavailable
from core.store.database import make_engine
from core.store.prepared import PreparedStatement
from core.store.tables import Account, Device, PushRegistration

SECRET = "do-not-echo-this-parameter"
DEVICE = Device.__table__  # type: ignore[attr-defined]
REGISTRATIONS = PushRegistration.__table__  # type: ignore[attr-defined]
ACCOUNT = Account.__table__  # type: ignore[attr-defined]


def add_devices(engine: Engine) -> None:
    with engine.begin() as connection:
        for account_id in ("acc-1", "acc-2"):
            connection.execute(ACCOUNT.insert().values(account_id=account_id, created_at=1))
        for number, (account_id, charging) in enumerate([("acc-1", True), ("acc-1", None), ("acc-2", False)]):
            connection.execute(
                DEVICE.insert().values(
                    device_id=f"dev-{number}",
                    account_id=account_id,
                    name=f"device {number}",
                    device_type="android",
                    surface_kind="phone",
                    public_key=f"key-{number}",
                    credential_hash=f"hash-{number}",
                    created_at=10 - number,
                    charging=charging,
                )
            )


STATEMENT = (
    select(
        DEVICE.c.device_id,
        DEVICE.c.charging,
        exists().where(REGISTRATIONS.c.device_id == DEVICE.c.device_id).label("registered"),
    )
    .where(DEVICE.c.account_id == bindparam("account_id"))
    .order_by(DEVICE.c.created_at)
)


def test_rows_are_those_the_engine_answers_with_typed_values(engine: Engine) -> None:
    add_devices(engine)
    prepared = PreparedStatement(STATEMENT)
    with engine.connect() as connection, connection.begin():
        expected = [tuple(row) for row in connection.execute(STATEMENT, {"account_id": "acc-1"})]
        rows = prepared.rows(connection, account_id="acc-1")
    assert rows == expected == [("dev-1", None, False), ("dev-0", True, False)]
    assert all(type(row[2]) is bool for row in rows)
    assert type(rows[1][1]) is bool


def test_a_value_the_statement_carries_needs_no_parameter(engine: Engine) -> None:
    add_devices(engine)
    prepared = PreparedStatement(select(DEVICE.c.device_id).where(DEVICE.c.account_id == "acc-2"))
    with engine.connect() as connection, connection.begin():
        assert prepared.rows(connection) == [("dev-2",)]


def test_it_reads_inside_the_connections_transaction(engine: Engine) -> None:
    add_devices(engine)
    prepared = PreparedStatement(STATEMENT)
    with engine.connect() as connection, connection.begin() as transaction:
        connection.execute(DEVICE.delete().where(DEVICE.c.device_id == "dev-0"))
        assert prepared.rows(connection, account_id="acc-1") == [("dev-1", None, False)]
        transaction.rollback()


def test_a_driver_error_is_raised_as_sqlalchemys_without_its_parameters(engine: Engine) -> None:
    prepared = PreparedStatement(STATEMENT)
    with engine.connect() as connection, connection.begin():
        connection.execute(text("DROP TABLE push_registrations"))
        with pytest.raises((OperationalError, ProgrammingError)) as raised:  # SQLite says operational
            prepared.rows(connection, account_id=SECRET)
    assert SECRET not in str(raised.value)
    assert not raised.value.connection_invalidated


def test_expanding_parameters_are_refused(engine: Engine) -> None:
    prepared = PreparedStatement(select(DEVICE.c.device_id).where(DEVICE.c.device_id.in_(["a", "b"])))
    with engine.connect() as connection, pytest.raises(ValueError, match="expanding"):
        prepared.rows(connection)


@pytest.fixture
def probe(engine: Engine) -> Iterator[Table]:
    """A scratch table with three rows."""
    table = Table("driver_sql_probe", MetaData(), Column("name", String), Column("number", Integer))
    table.create(engine)
    with engine.begin() as connection:
        connection.execute(table.insert(), [{"name": n, "number": i} for i, n in enumerate("abc")])
    yield table
    table.drop(engine)


def test_a_parameter_used_twice_and_a_literal_limit(engine: Engine, probe: Table) -> None:
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
        assert PreparedStatement(statement).rows(connection, **params) == expected == [("c", 2)]
        assert PreparedStatement(statement).scalar(connection, **params) == "c"
        assert PreparedStatement(statement).rows(connection, **{**params, "second": "z"}) == []


def test_an_insert_runs_inside_the_callers_transaction(engine: Engine, probe: Table) -> None:
    insert = PreparedStatement(probe.insert().values(name=bindparam("name"), number=bindparam("number")))
    count = PreparedStatement(select(func.count()).select_from(probe))
    with engine.connect() as connection:
        with connection.begin() as transaction:
            assert insert.rows(connection, name="d", number=3) == []
            assert count.scalar(connection) == 4
            transaction.rollback()
        with connection.begin():
            assert count.scalar(connection) == 3


def test_a_returning_write_answers_its_rows_and_a_plain_one_none(engine: Engine, probe: Table) -> None:
    """Whether a statement answers rows is told by the statement, not asked of the cursor: a write
    with ``returning`` answers them, one without answers an empty list (psycopg would refuse a fetch)."""
    insert = probe.insert().values(name=bindparam("name"), number=bindparam("number"))
    inserted = PreparedStatement(insert.returning(probe.c.number))
    with engine.begin() as connection:
        assert inserted.rows(connection, name="e", number=7) == [(7,)]
        assert PreparedStatement(probe.delete().where(probe.c.number == 7)).rows(connection) == []


def test_an_update_answers_the_rows_it_changed_and_only_those(engine: Engine, probe: Table) -> None:
    """An update's ``returning`` tells which rows matched: a conditional write that lost answers none."""
    renamed = PreparedStatement(
        probe.update()
        .where(probe.c.number == bindparam("which"), probe.c.name != bindparam("new_name"))
        .values(name=bindparam("new_name"))
        .returning(probe.c.number, probe.c.name)
    )
    with engine.begin() as connection:
        assert renamed.rows(connection, which=2, new_name="renamed") == [(2, "renamed")]
        assert renamed.rows(connection, which=2, new_name="renamed") == []
        assert PreparedStatement(probe.update().values(name="all")).rows(connection) == []


def test_a_lost_connection_is_invalidated_and_means_unavailable(postgres_database: str) -> None:
    engine = make_engine(postgres_database)  # a SQLite file has no connection to lose
    with engine.connect() as killer, engine.connect() as victim:
        pid = victim.execute(text("SELECT pg_backend_pid()")).scalar_one()
        victim.rollback()
        killer.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        killer.commit()
        with pytest.raises(DBAPIError) as raised:
            PreparedStatement(select(bindparam("value"))).rows(victim, value=SECRET)
        assert raised.value.connection_invalidated
        assert victim.invalidated
        unavailable = as_unavailable(raised.value)
        assert unavailable is not None and unavailable.code == "unavailable"
        victim.rollback()  # connected again: the cursor kept for the lost connection is not used
        assert PreparedStatement(select(bindparam("value"))).rows(victim, value=7) == [(7,)]
    engine.dispose()
    assert SECRET not in str(raised.value)


def test_statements_of_every_shape_in_turn_on_one_connection(engine: Engine, probe: Table) -> None:
    """On PostgreSQL they share the connection's kept cursor: each answers its own rows, one that
    fails leaves the next (in a new transaction) to run as if it had not."""
    add_devices(engine)
    devices = PreparedStatement(STATEMENT)
    one = PreparedStatement(select(bindparam("value", type_=Integer)))
    insert = PreparedStatement(probe.insert().values(name=bindparam("name"), number=bindparam("number")))
    broken = PreparedStatement(select(probe.c.name).where(probe.c.number == func.no_such_function()))
    with engine.connect() as connection:
        for round_ in range(3):
            with connection.begin():
                assert [row[0] for row in devices.rows(connection, account_id="acc-1")] == ["dev-1", "dev-0"]
                assert one.rows(connection, value=round_) == [(round_,)]
                assert insert.rows(connection, name=f"n{round_}", number=10 + round_) == []
            with pytest.raises((OperationalError, ProgrammingError)), connection.begin():
                broken.rows(connection)
        with connection.begin():
            assert devices.rows(connection, account_id="acc-2") == [("dev-2", False, False)]
            assert len(connection.execute(select(probe)).all()) == 6  # three rows and the three inserted
