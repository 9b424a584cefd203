"""queue, one row a send: on SQLite a send to several devices is one queue row keyed by their
account, listing each recipient and its seq (``recipients``) and holding their blobs
(``core.services.queue_packed``). A row a device dirtied a leaf of the recipient index a device,
and the pages a commit writes were most of what a device added to a send (``bench/CHANGELOG.md``).
Each device's count gains its ``floor`` (its packed entries below it are trimmed) and its
``newest`` seq (a wake-up's ``prev``, which the write read from the recipient index until now).
PostgreSQL gets the columns, unused: it keeps a row a device.

The upgrade counts every queue (pinned entries give a device its row too, for ``newest``). The
downgrade unpacks each packed row into a row a device, each with the seq its device was given,
then counts as 0020 did.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28 08:00:00.000000
"""

import json
from collections.abc import Sequence
from importlib import import_module

import sqlalchemy as sa
from alembic import op


revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
COUNT = (
    "DELETE FROM queue_counts",
    "INSERT INTO queue_counts (device_id, unpinned, floor, newest)"
    " SELECT recipient_device_id, sum(tag IS NULL), 0, max(seq) FROM queued_envelopes"
    " GROUP BY recipient_device_id",
)


def upgrade() -> None:
    op.add_column("queued_envelopes", sa.Column("recipients", sa.Text(), nullable=True))
    op.add_column("queue_counts", sa.Column("floor", SEQ, nullable=False, server_default="0"))
    op.add_column("queue_counts", sa.Column("newest", SEQ, nullable=True))
    if op.get_bind().dialect.name == "sqlite":
        for statement in COUNT:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _unpack_rows()
    # SQLite drops a column in place (3.35 and later): no table rebuilt, so its triggers stay.
    op.execute("ALTER TABLE queue_counts DROP COLUMN newest")
    op.execute("ALTER TABLE queue_counts DROP COLUMN floor")
    op.execute("ALTER TABLE queued_envelopes DROP COLUMN recipients")
    if op.get_bind().dialect.name == "sqlite":
        for statement in import_module("core.store.migrations.versions.0020_queue_counts_by_writers").RECOUNT:
            op.execute(statement)


def _unpack_rows() -> None:
    """Each packed row as a row a device still has (at or above its floor), with its seq."""
    connection = op.get_bind()
    counted = connection.execute(sa.text("SELECT device_id, floor FROM queue_counts"))
    floors = {str(device): int(floor) for device, floor in counted}
    packed = connection.execute(
        sa.text(
            "SELECT seq, sender, type, created_at, expires_at, recipients, blob FROM queued_envelopes"
            " WHERE recipients IS NOT NULL"
        )
    ).all()
    insert = sa.text(
        "INSERT INTO queued_envelopes (seq, recipient_device_id, sender, type, blob, created_at, expires_at)"
        " VALUES (:seq, :device, :sender, :type, :blob, :created_at, :expires_at)"
    )
    for row_seq, sender, type_, created_at, expires_at, recipients, blob in packed:
        connection.execute(sa.text("DELETE FROM queued_envelopes WHERE seq = :seq"), {"seq": row_seq})
        for device, seq, sealed in _unpack(recipients, blob):
            if device in floors and row_seq >= floors[device]:
                shared = {"sender": sender, "type": type_, "created_at": created_at, "expires_at": expires_at}
                connection.execute(insert, {"seq": seq, "device": device, "blob": sealed, **shared})


def _unpack(recipients: str, blob: bytes) -> list[tuple[str, int, bytes]]:
    """Each recipient's entry of a packed row, in order: its blob behind a 4-byte length."""
    entries, offset = [], 0
    for device, seq in json.loads(recipients).items():
        length = int.from_bytes(blob[offset : offset + 4], "big")
        entries.append((device, int(seq), bytes(blob[offset + 4 : offset + 4 + length])))
        offset += 4 + length
    return entries
