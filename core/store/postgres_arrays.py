"""PostgreSQL array parameters of strings, bytes or integers, sent in PostgreSQL's binary array
format in one step.

psycopg sends a Python list through its generic ``ListDumper``, which works out the element type of
every list it is given (a dumper looked up, upgraded and made afresh each time, in Python): for a
send's queue statement, two arrays of two elements, about 40 to 60 µs of the replica's CPU a send,
several times the statement's other parameters. The bind types here (``VARCHAR_ARRAY``,
``BYTEA_ARRAY``, ``BIGINT_ARRAY``) hand psycopg a list marked with what it holds, whose dumper
(registered on each connection by ``core.store.database``) writes the array at once. A connection
without them (never one of ``make_engine``'s) would still send the same array through
``ListDumper``: a marked list is a list.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.engine import Dialect
from sqlalchemy.types import UserDefinedType

VARCHAR_OID, VARCHAR_ARRAY_OID = 1043, 1015
BYTEA_OID, BYTEA_ARRAY_OID = 17, 1001
BIGINT_OID, BIGINT_ARRAY_OID = 20, 1016

_ONE_DIMENSION = struct.Struct(">iiiii")  # dimensions, has nulls, element type, length, lower bound
_EMPTY = struct.Struct(">iii")  # no dimension: the empty array
_LENGTH = struct.Struct(">i")
_BIGINT = struct.Struct(">iq")  # an element's length (8) and its value


class Strings(list[str]):
    """A list of strings, sent as ``varchar[]``."""


class Blobs(list[bytes]):
    """A list of byte strings, sent as ``bytea[]``."""


class BigIntegers(list[int]):
    """A list of integers, sent as ``bigint[]``."""


def binary_array(element_oid: int, items: Sequence[bytes]) -> bytes:
    """PostgreSQL's binary form of a one-dimensional array without NULLs (``array_recv``)."""
    if not items:
        return _EMPTY.pack(0, 0, element_oid)
    parts = [_ONE_DIMENSION.pack(1, 0, element_oid, len(items), 1)]
    for item in items:
        parts += (_LENGTH.pack(len(item)), item)
    return b"".join(parts)


def bigint_array(items: Sequence[int]) -> bytes:
    """``binary_array`` of 64-bit integers."""
    if not items:
        return _EMPTY.pack(0, 0, BIGINT_OID)
    head = _ONE_DIMENSION.pack(1, 0, BIGINT_OID, len(items), 1)
    return head + b"".join([_BIGINT.pack(8, item) for item in items])


@functools.cache
def _dumpers() -> tuple[type[Any], type[Any], type[Any]]:
    """psycopg's dumpers of ``Strings``, ``Blobs`` and ``BigIntegers``. Made on first use: psycopg
    is an optional dependency."""
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class StringsDumper(Dumper):
        oid = VARCHAR_ARRAY_OID
        format = Format.BINARY

        def dump(self, obj: Strings) -> bytes:
            return binary_array(VARCHAR_OID, [item.encode() for item in obj])

    class BlobsDumper(Dumper):
        oid = BYTEA_ARRAY_OID
        format = Format.BINARY

        def dump(self, obj: Blobs) -> bytes:
            return binary_array(BYTEA_OID, [bytes(item) for item in obj])

    class BigIntegersDumper(Dumper):
        oid = BIGINT_ARRAY_OID
        format = Format.BINARY

        def dump(self, obj: BigIntegers) -> bytes:
            return bigint_array(obj)

    return StringsDumper, BlobsDumper, BigIntegersDumper


def register_dumpers(driver_connection: Any) -> None:
    """On a new psycopg connection (``core.store.database``)."""
    strings, blobs, bigints = _dumpers()
    driver_connection.adapters.register_dumper(Strings, strings)
    driver_connection.adapters.register_dumper(Blobs, blobs)
    driver_connection.adapters.register_dumper(BigIntegers, bigints)


class _MarkedArray(UserDefinedType[list[Any]]):
    """A bind parameter rendered with its cast (``%(name)s::VARCHAR[]``), its list marked."""

    cache_ok = True
    render_bind_cast = True
    spec = ""
    marked: Callable[[Sequence[Any]], list[Any]] = list

    def get_col_spec(self, **_kw: Any) -> str:
        return self.spec

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        marked = type(self).marked
        return lambda value: None if value is None else marked(value)


class VarcharArray(_MarkedArray):
    spec = "VARCHAR[]"
    marked = Strings


class ByteaArray(_MarkedArray):
    spec = "BYTEA[]"
    marked = Blobs


class BigintArray(_MarkedArray):
    spec = "BIGINT[]"
    marked = BigIntegers


VARCHAR_ARRAY = VarcharArray()
BYTEA_ARRAY = ByteaArray()
BIGINT_ARRAY = BigintArray()
