"""Secrets every replica must share and that nobody configured: made by whichever replica starts
first and kept in the database, sealed (``core.adapters.push.vapid_key`` seals the VAPID key with a
key derived from the server key, so a database dump alone does not hold it).

Two replicas starting at once may each make one: ``keep_once`` inserts a replica's candidate only
when the name is not there yet (on PostgreSQL the second insert waits for the first's commit, then
does nothing) and returns what the database holds, so both go on with the first one's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Column, Engine, LargeBinary, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Field, SQLModel

KeepOnce = Callable[[str, bytes], bytes]  # (name, candidate) -> the value kept under that name


class SharedSecret(SQLModel, table=True):
    """One secret by name, as bytes (sealed by its owner); written once, never updated."""

    __tablename__ = "shared_secrets"

    name: str = Field(primary_key=True, max_length=64)
    value: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: int


def keep_once(engine: Engine, name: str, candidate: bytes, *, now: int | None = None) -> bytes:
    """The value kept under ``name``: ``candidate`` if nobody kept one before, else theirs."""
    table = SharedSecret.__table__  # type: ignore[attr-defined]
    dialect = postgresql if engine.dialect.name == "postgresql" else sqlite
    row = {"name": name, "value": candidate, "created_at": int(time.time()) if now is None else now}
    with engine.begin() as connection:
        connection.execute(dialect.insert(table).values(row).on_conflict_do_nothing(index_elements=["name"]))
        kept: bytes = connection.execute(select(table.c.value).where(table.c.name == name)).scalar_one()
    return kept
