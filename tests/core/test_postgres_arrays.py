"""Array parameters of strings and bytes are written by relaybox's own dumpers, in PostgreSQL's own
binary array format, and arrive as they were sent, whatever they hold."""

from __future__ import annotations

import pytest
from psycopg.adapt import PyFormat
from sqlalchemy import bindparam, select, text

from core.runtime.core import Core
from core.store.postgres_arrays import (
    BYTEA_ARRAY,
    BYTEA_OID,
    VARCHAR_ARRAY,
    VARCHAR_OID,
    Blobs,
    Strings,
    binary_array,
)
from core.store.prepared import PreparedStatement

pytestmark = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)

_ECHO = PreparedStatement(
    select(
        bindparam("strings", type_=VARCHAR_ARRAY).label("strings"),
        bindparam("blobs", type_=BYTEA_ARRAY).label("blobs"),
    )
)


@pytest.mark.parametrize(
    ("strings", "blobs"),
    [
        (["dev_a", "dev_b"], [b"sealed", b"\x00\xff" * 300]),
        (["a,b", 'q"uote\\', "{brace}", "NULL", " spaced ", "é✓"], [b"", b"\\x00", b"{,}"]),
        ([], []),
    ],
)
def test_an_array_arrives_as_it_was_sent(core: Core, strings: list[str], blobs: list[bytes]) -> None:
    with core.engine.connect() as connection:
        [(got_strings, got_blobs)] = _ECHO.rows(connection, strings=strings, blobs=blobs)
    assert got_strings == strings
    assert [bytes(blob) for blob in got_blobs] == blobs


def test_the_connection_dumps_marked_lists_with_relayboxs_dumpers(core: Core) -> None:
    with core.engine.connect() as connection:
        driver = connection.connection.driver_connection
        assert driver is not None
        adapters = driver.adapters
        for marked in (Strings, Blobs):
            dumper = adapters.get_dumper(marked, PyFormat.BINARY)
            assert dumper.__module__ == "core.store.postgres_arrays", dumper


def test_the_binary_form_is_postgresqls_own(core: Core) -> None:
    with core.engine.connect() as connection:
        own = connection.execute(
            text(
                "SELECT array_send(ARRAY['dev_a', 'é']::varchar[]), array_send(ARRAY['\\x00ff'::bytea]),"
                " array_send('{}'::varchar[])"
            )
        ).one()
    assert binary_array(VARCHAR_OID, [b"dev_a", "é".encode()]) == bytes(own[0])
    assert binary_array(BYTEA_OID, [b"\x00\xff"]) == bytes(own[1])
    assert binary_array(VARCHAR_OID, []) == bytes(own[2])
