"""Prepared statements: a Core ``select``, ``insert``, ``update`` or ``delete`` (each may
``returning``) compiled once per dialect and run on the driver's cursor.

For the hottest paths only — every MCP ``list_devices`` call, every relay's queue writes: executing
even a cached statement through SQLAlchemy (execution context, events, result wrapping) costs
several times what the database spends on a statement by index (the relay's four queue statements:
0.23 ms of CPU through ``Connection.execute``, 0.045 ms on the cursor). Values still pass through
each type's bind and result processors (a SQLite boolean comes back a ``bool``), a driver error is
raised as SQLAlchemy's (``OperationalError``…, the connection invalidated on a disconnect, the
parameters hidden: they may be ciphertext or credentials), and the statement runs in the
transaction the connection is in, as ``Connection.execute`` would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Delete, Dialect, Insert, Select, String, Update, bindparam, exc, func

Processor = Callable[[Any], Any]
Statement = Select[*tuple[Any, ...]] | Insert | Update | Delete  # a select of any columns


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    positions: tuple[str, ...] | None  # bind names in order, for a positional paramstyle
    defaults: dict[str, Any]  # binds that carry their own value (``where(x == 5)``)
    bind_processors: dict[str, Processor]
    result_processors: tuple[Processor | None, ...] | None  # None: every value is used as it comes
    # Whether it answers rows (a select, a ``returning``): known here, so that no execution asks
    # the cursor (psycopg builds the columns' descriptions afresh each time it is asked).
    returns_rows: bool

    @classmethod
    def of(cls, statement: Statement, dialect: Dialect) -> _Compiled:
        compiled = statement.compile(dialect=dialect)
        binds = compiled.binds
        if any(bind.expanding or bind.literal_execute for bind in binds.values()):
            raise ValueError("a prepared statement cannot have expanding (IN) or literal-execute parameters")
        bind_processors: dict[str, Processor] = {
            name: processor
            for name, bind in binds.items()
            if (processor := bind.type.dialect_impl(dialect).bind_processor(dialect)) is not None
        }
        results = tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None)
            for column in statement.exported_columns  # a select's columns, or what it returns
        )
        return cls(
            sql=compiled.string,
            positions=tuple(compiled.positiontup or ()) if compiled.positional else None,
            defaults={name: bind.effective_value for name, bind in binds.items() if not bind.required},
            bind_processors=bind_processors,
            result_processors=results if any(results) else None,
            returns_rows=bool(results),
        )

    def parameters(self, given: dict[str, Any]) -> Sequence[Any] | dict[str, Any]:
        values = {**self.defaults, **given} if self.defaults else given
        for name, processor in self.bind_processors.items():
            values[name] = processor(values[name])
        if self.positions is None:
            return values
        return [values[name] for name in self.positions]


class PreparedStatement:
    """``rows(connection, **params)``: the rows as tuples, in the order of the statement's columns
    (none for a write without ``returning``: one that must tell whether it matched returns a column)."""

    def __init__(self, statement: Statement) -> None:
        self.statement = statement
        self._compiled: dict[str, _Compiled] = {}  # by dialect name: one process, one engine or two

    def rows(self, connection: Connection, **params: Any) -> list[tuple[Any, ...]]:
        dialect = connection.dialect
        compiled = self._compiled.get(dialect.name)
        if compiled is None:
            compiled = self._compiled[dialect.name] = _Compiled.of(self.statement, dialect)
        parameters = compiled.parameters(params)
        fairy = connection.connection
        kept = dialect.name == "postgresql"
        cursor = None
        try:
            cursor = _kept_cursor(fairy) if kept else fairy.cursor()
            cursor.execute(compiled.sql, parameters)
            rows: list[tuple[Any, ...]] = list(cursor.fetchall()) if compiled.returns_rows else []
        except dialect.loaded_dbapi.Error as error:
            if kept:  # the next statement gets a fresh cursor
                fairy.info.pop(_KEPT_CURSOR, None)
            raise driver_error(connection, compiled.sql, parameters, error, cursor) from error
        finally:
            if cursor is not None and not kept:
                cursor.close()
        processors = compiled.result_processors
        if processors is None:
            return rows
        return [
            tuple(value if p is None else p(value) for p, value in zip(processors, row, strict=True))
            for row in rows
        ]

    def scalar(self, connection: Connection, **params: Any) -> Any:
        """The first column of the first row, or None when there is no row."""
        found = self.rows(connection, **params)
        return found[0][0] if found else None


# In a pooled connection's ``info``: its cursor for prepared statements, on PostgreSQL. psycopg
# builds a cursor's adaptation state (the loaders of a result's columns, the dumpers of its
# parameters) afresh for every new cursor; kept, a statement run again finds it made. It holds the
# last statement's parameters (ciphertext, hashes) and result (a few small rows) until the next one.
_KEPT_CURSOR = "relaybox_kept_cursor"


def _kept_cursor(fairy: Any) -> Any:
    """The pooled connection's kept cursor, made when it has none or its driver connection is a new
    one (a reconnect); one thread at a time uses a connection, so one cursor serves every statement."""
    cursor = fairy.info.get(_KEPT_CURSOR)
    if cursor is None or cursor.connection is not fairy.driver_connection or cursor.closed:
        cursor = fairy.info[_KEPT_CURSOR] = fairy.cursor()
    return cursor


def driver_error(
    connection: Connection, statement: str, parameters: Any, error: Any, cursor: Any = None
) -> exc.StatementError:
    """A driver's ``error`` as SQLAlchemy would raise it (``OperationalError``…, parameters hidden),
    the connection invalidated first when the error says it is gone."""
    dialect = connection.dialect
    disconnected = dialect.is_disconnect(error, connection.connection, cursor)
    if disconnected:
        connection.invalidate(error)
    wrapped: exc.StatementError = exc.DBAPIError.instance(
        statement,
        parameters,
        error,
        dialect.loaded_dbapi.Error,
        hide_parameters=True,
        connection_invalidated=disconnected,
        dialect=dialect,
    )
    return wrapped


def run_on_driver(connection: Connection, statement: str) -> Any:
    """A statement without parameters (``BEGIN``, ``SAVEPOINT``, a ``PRAGMA``) straight on the
    driver's connection, its cursor returned: through the engine it would cost several times the
    statement. A driver error is raised as SQLAlchemy's."""
    driver: Any = connection.connection.driver_connection
    try:
        return driver.execute(statement)
    except connection.dialect.loaded_dbapi.Error as error:
        raise driver_error(connection, statement, (), error) from error


def json_rows(name: str, *columns: str) -> Any:
    """SQLite: a JSON parameter ``name`` read as rows (``json_each``), with these of its columns:
    an array's ``value``, an object's ``key`` and ``value``. One parameter for any number of items,
    and one compiled statement."""
    return func.json_each(bindparam(name, type_=String)).table_valued(*columns)
