"""queue counts by writers: on SQLite the statements that write the queue keep each device's count
(``core.services.queue_counts``) in place of 0016's insert and delete triggers. A full queue's
write inserts one entry and deletes one, and each trigger ran as a sub-program with its own cursor
on the counts, moving the count up and down again: a quarter of a send's work per device
(``bench/CHANGELOG.md``). The queue's writes now set only the counts that change, and the expiry
sweep recounts the queues it is about to shorten. 0016's update trigger (an entry's pin or
recipient changed, which no code does) and device-removal trigger stay. The counts are recounted
both ways, so each starts exact.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28 02:00:00.000000
"""

from collections.abc import Sequence
from importlib import import_module

from alembic import op


revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DROPPED = ("queue_counts_insert", "queue_counts_delete")
RECOUNT = (
    "DELETE FROM queue_counts",
    "INSERT INTO queue_counts (device_id, unpinned)"
    " SELECT recipient_device_id, count(*) FROM queued_envelopes WHERE tag IS NULL"
    " GROUP BY recipient_device_id",
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for name in DROPPED:
        op.execute(f"DROP TRIGGER {name}")
    for statement in RECOUNT:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for statement in RECOUNT:
        op.execute(statement)
    counts = import_module("core.store.migrations.versions.0016_queue_counts")
    for name in DROPPED:
        op.execute(counts.TRIGGERS[name])  # 0016's triggers, as that migration made them
