"""Whether a connection may have changed a row between two moments, told without a round trip.

``change_mark(connection)`` is a number that moves whenever the connection may have changed a
row: on SQLite the rows its statements changed (``total_changes``, kept by SQLite itself; a
statement that failed and was undone adds nothing); on PostgreSQL every statement it ran, a read
counted too (``counting_cursor``: the server tells nothing of a transaction's changes so far without
a query, and a statement may change rows whatever it looks like, a ``SELECT`` over a data-modifying
``WITH``). A group commit uses it to tell a write that failed before changing anything, which can
fail alone, from one whose changes must be undone (``core.runtime.group_transaction``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection

from core.store.held_back import STATEMENTS_RUN, count_statement, send_held


@functools.cache
def counting_cursor() -> type[Any]:
    """psycopg's cursor class, counting on its connection every statement it runs (and sending
    first a write held back, ``core.store.held_back``): the engine's ``cursor_factory``
    (``core.store.database``), so every cursor of a connection, whoever asks for it, is one. Made
    on first use: psycopg is an optional dependency."""
    import psycopg

    class CountingCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
            send_held(self.connection)  # a write held back goes first (``core.store.held_back``)
            count_statement(self.connection)
            return super().execute(query, params, **options)

        def executemany(self, query: Any, params_seq: Iterable[Any], *, returning: bool = False) -> None:
            send_held(self.connection)
            count_statement(self.connection)
            super().executemany(query, params_seq, returning=returning)

    return CountingCursor


def change_mark(connection: Connection) -> int:
    """Moves whenever ``connection`` may have changed a row (see the module)."""
    driver: Any = connection.connection.driver_connection
    if connection.dialect.name == "sqlite":
        return int(driver.total_changes)
    if driver.cursor_factory is not counting_cursor():
        raise RuntimeError("this PostgreSQL connection does not count its statements (make_engine's cursor)")
    return int(getattr(driver, STATEMENTS_RUN, 0))
