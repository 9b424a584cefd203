"""Array parameters of strings, bytes and integers are written by relaybox's own dumpers, in PostgreSQL's own
binary array format, and arrive as they were sent, whatever they hold."""

from __future__ import annotations

import pytest
from psycopg.adapt import PyFormat
from sqlalchemy import bindparam, select, text

from core.runtime.core import Core
from core.store.postgres_arrays import (
    BIGINT_ARRAY,
    BYTEA_ARRAY,
    BYTEA_OID,
    VARCHAR_ARRAY,
    VARCHAR_OID,
    BigIntegers,
    Blobs,
    Strings,
    bigint_array,
    binary_array,
)
from core.store.prepared import PreparedStatement

pytestmark = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)

_ECHO = PreparedStatement(
    select(
        bindparam("strings", type_=VARCHAR_ARRAY).label("strings"),
        bindparam("blobs", type_=BYTEA_ARRAY).label("blobs"),
        bindparam("integers", type_=BIGINT_ARRAY).label("integers"),
    )
)


@pytest.mark.parametrize(
    ("strings", "blobs", "integers"),
    [
        (["dev_a", "dev_b"], [b"sealed", b"\x00\xff" * 300], [1, 2]),
        (
            ["a,b", 'q"uote\\', "{brace}", "NULL", " spaced ", "é✓"],
            [b"", b"\\x00", b"{,}"],
            [0, -1, 2**63 - 1],
        ),
        ([], [], []),
    ],
)
def test_an_array_arrives_as_it_was_sent(
    core: Core, strings: list[str], blobs: list[bytes], integers: list[int]
) -> None:
    with core.engine.connect() as connection:
        [(got_strings, got_blobs, got_integers)] = _ECHO.rows(
            connection, strings=strings, blobs=blobs, integers=integers
        )
    assert got_strings == strings
    assert [bytes(blob) for blob in got_blobs] == blobs
    assert got_integers == integers


def test_the_connection_dumps_marked_lists_with_relayboxs_dumpers(core: Core) -> None:
    with core.engine.connect() as connection:
        driver = connection.connection.driver_connection
        assert driver is not None
        adapters = driver.adapters
        for marked in (Strings, Blobs, BigIntegers):
            dumper = adapters.get_dumper(marked, PyFormat.BINARY)
            assert dumper.__module__ == "core.store.postgres_arrays", dumper


def test_the_binary_form_is_postgresqls_own(core: Core) -> None:
    with core.engine.connect() as connection:
        own = connection.execute(
            text(
                "SELECT array_send(ARRAY['dev_a', 'é']::varchar[]), array_send(ARRAY['\\x00ff'::bytea]),"
                " array_send('{}'::varchar[]), array_send(ARRAY[7, -2]::bigint[]), array_send('{}'::bigint[])"
            )
        ).one()
    assert binary_array(VARCHAR_OID, [b"dev_a", "é".encode()]) == bytes(own[0])
    assert binary_array(BYTEA_OID, [b"\x00\xff"]) == bytes(own[1])
    assert binary_array(VARCHAR_OID, []) == bytes(own[2])
    assert bigint_array([7, -2]) == bytes(own[3])
    assert bigint_array([]) == bytes(own[4])
