"""SQLite's bookkeeping beside the queue and the devices, kept by the statements and triggers that
change what it describes, so that a send reads one row where it would count or read many:
each queue's count, floor and newest seq (``QueueCount``) and each account's devices' version
(``AccountDeviceVersion``). PostgreSQL leaves both empty. Part of ``core.store.tables``, which
re-exports them.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer
from sqlmodel import Field, SQLModel


class QueueCount(SQLModel, table=True):
    """SQLite only: how many unpinned entries a device's queue holds, so that a write knows without
    counting whether it takes the queue over its cap, with its floor and newest seq (below). Kept
    exact by the statements that write the queue (``core.services.queue_counts`` lists them;
    migrations 0020, 0021) and two triggers of migration
    0016: an entry's pin or recipient changed, and the row dropped with its device. PostgreSQL
    finds the cap's boundary by walking each queue a transaction wrote once, before it commits,
    and leaves this table empty. A migration that rebuilds ``queued_envelopes`` on SQLite
    (``batch_alter_table``) drops its trigger: it must create it again
    (``tests/core/store/test_queue_counts.py`` checks the triggers that are there)."""

    __tablename__ = "queue_counts"
    __table_args__ = {"sqlite_with_rowid": False}  # the count beside its key: one b-tree, one seek

    device_id: str = Field(primary_key=True, max_length=36)
    unpinned: int
    # The device's entries in rows of several recipients with a lower seq are trimmed (migration 0021).
    floor: int = Field(
        default=0,
        sa_column=Column(BigInteger().with_variant(Integer, "sqlite"), nullable=False, server_default="0"),
    )
    # The newest seq handed to the device (NULL: none since 0021 counted): a wake-up's ``prev``.
    newest: int | None = Field(default=None, sa_column=Column(BigInteger().with_variant(Integer, "sqlite")))


class AccountDeviceVersion(SQLModel, table=True):
    """SQLite only: a random version of each account's devices as a send reads them, replaced by
    triggers (migration 0022) on every change of those columns or of a push registration, so that
    a send reuses the devices it read at the same version (``core.services.account_devices``).
    PostgreSQL leaves the table empty. A migration that rebuilds ``devices`` or
    ``push_registrations`` on SQLite drops their triggers: it must create them again
    (``tests/core/store/test_account_device_versions.py`` checks they are there)."""

    __tablename__ = "account_device_versions"
    __table_args__ = {"sqlite_with_rowid": False}

    account_id: str = Field(primary_key=True, max_length=36)
    version: str = Field(max_length=16)
