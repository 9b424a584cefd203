"""A prepared select answers what ``Connection.execute`` of its statement answers, on each backend:
the same rows in the same order, values through their types (booleans are bools), parameters
given or carried by the statement, and a driver error raised as SQLAlchemy's."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, bindparam, exists, select, text
from sqlalchemy.exc import OperationalError, ProgrammingError

from core.store.prepared import PreparedSelect
from core.store.tables import Account, Device, WebPushSubscriptionRow

DEVICE = Device.__table__  # type: ignore[attr-defined]
WEB_PUSH = WebPushSubscriptionRow.__table__  # type: ignore[attr-defined]
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
        exists().where(WEB_PUSH.c.device_id == DEVICE.c.device_id).label("web_push"),
    )
    .where(DEVICE.c.account_id == bindparam("account_id"))
    .order_by(DEVICE.c.created_at)
)


def test_rows_are_those_the_engine_answers_with_typed_values(engine: Engine) -> None:
    add_devices(engine)
    prepared = PreparedSelect(STATEMENT)
    with engine.connect() as connection, connection.begin():
        expected = [tuple(row) for row in connection.execute(STATEMENT, {"account_id": "acc-1"})]
        rows = prepared.rows(connection, account_id="acc-1")
    assert rows == expected == [("dev-1", None, False), ("dev-0", True, False)]
    assert all(type(row[2]) is bool for row in rows)
    assert type(rows[1][1]) is bool


def test_a_value_the_statement_carries_needs_no_parameter(engine: Engine) -> None:
    add_devices(engine)
    prepared = PreparedSelect(select(DEVICE.c.device_id).where(DEVICE.c.account_id == "acc-2"))
    with engine.connect() as connection, connection.begin():
        assert prepared.rows(connection) == [("dev-2",)]


def test_it_reads_inside_the_connections_transaction(engine: Engine) -> None:
    add_devices(engine)
    prepared = PreparedSelect(STATEMENT)
    with engine.connect() as connection, connection.begin() as transaction:
        connection.execute(DEVICE.delete().where(DEVICE.c.device_id == "dev-0"))
        assert prepared.rows(connection, account_id="acc-1") == [("dev-1", None, False)]
        transaction.rollback()


def test_a_driver_error_is_raised_as_sqlalchemys(engine: Engine) -> None:
    prepared = PreparedSelect(STATEMENT)
    with engine.connect() as connection, connection.begin():
        connection.execute(text("DROP TABLE web_push_subscriptions"))
        with pytest.raises((OperationalError, ProgrammingError)):  # SQLite says operational
            prepared.rows(connection, account_id="acc-1")


def test_expanding_parameters_are_refused(engine: Engine) -> None:
    prepared = PreparedSelect(select(DEVICE.c.device_id).where(DEVICE.c.device_id.in_(["a", "b"])))
    with engine.connect() as connection, pytest.raises(ValueError, match="expanding"):
        prepared.rows(connection)
